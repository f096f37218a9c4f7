"""`tokdyn report` and the manifest's provenance, from the outside (the binary in TOKDYN_BIN).

Reports: a run's page holds every verdict row of its checks.csv (coloured by pass), every summary,
every figure embedded, links that resolve to the raw files; a sweep's page links its points; a
folder of runs gets an index with one row per run; bad input exits 2 with one line and writes
nothing; a rerun replaces only a previous report. The pages are opened in Debian's headless
Chromium (tests/browser/cdp.py): every image loads, the tables have the expected rows, and a
screenshot is written to TOKDYN_REPORT_SHOTS (docs/figures/report-*.png are copies).

Provenance: the manifest records the command line, the explicit parameters, the input files with
their SHA-256 (against hashlib), the versions of tokdyn, its libraries and the plotting stack, and
`tokdyn run DIR/manifest.json` replays the run to the same bytes, refusing a changed input."""
import csv
import hashlib
import html.parser
import json
import os
import subprocess
import sys
from pathlib import Path
from urllib.parse import unquote

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "browser"))
from cdp import Browser  # noqa: E402

BIN = os.environ.get("TOKDYN_BIN", "tokdyn")
SHOTS = Path(os.environ.get("TOKDYN_REPORT_SHOTS", "/tmp"))


def tokdyn(*args, check=0, cwd=None):
    r = subprocess.run([BIN, *map(str, args)], capture_output=True, text=True, cwd=cwd)
    if check is not None:
        assert r.returncode == check, (args, r.returncode, r.stderr)
    return r


class Page(html.parser.HTMLParser):
    """The parts of a page the tests look at: tables (rows of cell texts and the row classes),
    images, links, headings."""

    def __init__(self, path):
        super().__init__()
        self.tables, self.row_classes, self.images, self.links, self.h1 = [], [], [], [], []
        self._cell = None
        self._in_h1 = False
        self.feed(Path(path).read_text())

    def handle_starttag(self, tag, attrs):
        a = dict(attrs)
        if tag == "table":
            self.tables.append([])
            self.row_classes.append([])
        elif tag == "tr" and self.tables:
            self.tables[-1].append([])
            self.row_classes[-1].append(a.get("class", ""))
        elif tag in ("td", "th"):
            self._cell = ""
        elif tag == "img":
            self.images.append(a["src"])
        elif tag == "a" and "href" in a:
            self.links.append(a["href"])
        elif tag == "h1":
            self._in_h1 = True
            self.h1.append("")

    def handle_endtag(self, tag):
        if tag in ("td", "th") and self._cell is not None:
            self.tables[-1][-1].append(self._cell.strip())
            self._cell = None
        elif tag == "h1":
            self._in_h1 = False

    def handle_data(self, data):
        if self._cell is not None:
            self._cell += data
        if self._in_h1:
            self.h1[-1] += data

    def table_with(self, first_header):
        for t, c in zip(self.tables, self.row_classes):
            if t and t[0] and t[0][0] == first_header:
                return t, c
        raise AssertionError(f"no table starting with {first_header!r}")


def rows(path):
    with open(path, newline="") as f:
        return list(csv.DictReader(f))


@pytest.fixture(scope="module")
def results(tmp_path_factory):
    """One run with checks, summaries and figures; a sweep of two points; both in one folder."""
    d = tmp_path_factory.mktemp("r")
    tokdyn("run", "coupling-frozen-kernel", "--out", d / "all" / "fk", "-q", "--set", "seed=1")
    tokdyn("sweep", "rope-flow", "--grid", "beta=1,2", "--set", "n=8", "--set", "d=4", "--set", "t_end=2", "--set", "runs=1",
           "--out", d / "all" / "sw", "-q", "--plot", "y=lambda1_final,x=beta")
    return d


def check_links(page_file, page):
    for h in page.links:
        if h.startswith("#"):
            continue
        assert (page_file.parent / unquote(h)).exists(), (page_file, h)


def test_a_run_report_shows_every_verdict_summary_figure_and_links_its_files(results):
    run = results / "all" / "fk"
    r = tokdyn("report", run)
    assert "wrote" in r.stdout and "1 page for 1 result" in r.stdout
    index = results / "all" / "fk-report" / "index.html"
    p = Page(index)
    assert p.h1 == ["coupling-frozen-kernel"]
    checks = rows(run / "checks.csv")
    t, classes = p.table_with("check")
    assert len(t) - 1 == len(checks)
    assert [row[0] for row in t[1:]] == [c["check"] for c in checks]
    want = {"true": "pass", "false": "fail", "n/a": "na"}
    assert classes[1:] == [want[c["pass"]] for c in checks]
    # The reference kind and the reference beside the value.
    assert t[0][t[0].index("reference_kind")] and all(row[t[0].index("reference_kind")] == c["reference_kind"] for row, c in zip(t[1:], checks))
    kinds, _ = p.table_with("reference kind")
    assert sum(int(k[1]) + int(k[2]) + int(k[3]) for k in kinds[1:]) == len(checks)
    s, _ = p.table_with("quantity")
    assert [x[0] for x in s[1:]] == [x["quantity"] for x in rows(run / "summary.csv")]
    params, _ = p.table_with("parameter")
    assert ["seed", "1", "set"] in params
    # Every figure of the run, embedded as a PNG.
    figs = [f for f in json.load(open(run / "manifest.json"))["files"] if f.endswith(".png")]
    assert len(p.images) == len(figs) > 0
    assert all(i.startswith("data:image/png;base64,iVBORw0KGgo") for i in p.images)
    check_links(index, p)
    assert any(unquote(h).endswith("checks.csv") for h in p.links)


def test_a_sweep_report_links_a_page_per_point(results):
    sw = results / "all" / "sw"
    r = tokdyn("report", sw, "--out", results / "swrep")
    assert "3 pages for 1 result" in r.stdout
    p = Page(results / "swrep" / "index.html")
    assert p.h1 == ["sweep of rope-flow"]
    t, _ = p.table_with("point")
    assert len(t) == 3 and [row[t[0].index("beta")] for row in t[1:]] == ["1", "2"]
    assert len(p.images) == 1  # the sweep's --plot figure
    check_links(results / "swrep" / "index.html", p)
    for h in rows(sw / "sweep.csv"):
        point = results / "swrep" / "points" / f"{h['hash']}.html"
        q = Page(point)
        assert q.h1 == [f"rope-flow point {h['point']}"]
        check_links(point, q)


def test_a_folder_of_runs_gets_an_index_and_a_rerun_replaces_the_report(results):
    out = results / "allrep"
    tokdyn("report", results / "all", "--out", out)
    p = Page(out / "index.html")
    t, classes = p.table_with("result")
    assert [row[0] for row in t[1:]] == ["fk", "sw"]
    assert [row[2] for row in t[1:]] == ["coupling-frozen-kernel", "rope-flow"]
    fk_checks = rows(results / "all" / "fk" / "checks.csv")
    fails = sum(c["pass"] == "false" for c in fk_checks)
    assert f"{sum(c['pass'] == 'true' for c in fk_checks)} pass" in t[1][5] and f"{fails} fail" in t[1][5]
    check_links(out / "index.html", p)
    before = sorted(x.relative_to(out) for x in out.rglob("*"))
    tokdyn("report", results / "all", "--out", out)  # a previous report is replaced
    assert sorted(x.relative_to(out) for x in out.rglob("*")) == before
    assert not list(results.glob("*.tmp-*")) and not list(results.glob(".*lock"))
    # The results themselves are untouched: still exactly what the run published.
    listed = {f.split("/")[0] for f in json.load(open(results / "all" / "fk" / "manifest.json"))["files"]}
    assert sorted(os.listdir(results / "all" / "fk")) == sorted(listed | {"manifest.json"})


def test_bad_report_input_is_one_line_exit_2_and_nothing_written(results, tmp_path):
    (tmp_path / "empty").mkdir()
    mine = tmp_path / "mine"
    mine.mkdir()
    (mine / "thesis.tex").write_text("x")
    for args, says in [((tmp_path / "nope",), "does not exist"),
                       ((tmp_path / "empty",), "holds no tokdyn result"),
                       ((results / "all" / "fk", results / "all" / "sw"), "need --out"),
                       ((results / "all" / "fk", "--out", mine), "tokdyn only replaces its own results"),
                       ((results / "all" / "fk" / "checks.csv",), "is not a folder"),
                       ((results / "all" / "fk", "--out", results / "all" / "fk"), "not a previous report"),
                       ((results / "all" / "fk", "--out", results / "all" / "sw"), "not a previous report")]:
        r = tokdyn("report", *args, check=2)
        assert r.stderr.count("\n") == 1 and says in r.stderr, r.stderr
    assert sorted(os.listdir(tmp_path)) == ["empty", "mine"] and os.listdir(mine) == ["thesis.tex"]
    assert (results / "all" / "fk" / "checks.csv").exists() and (results / "all" / "sw" / "sweep.csv").exists()


def test_the_pages_load_in_a_browser_with_every_image(results):
    tokdyn("report", results / "all", "--out", results / "browse")
    SHOTS.mkdir(parents=True, exist_ok=True)
    with Browser() as b:
        for page, shot, rows_min in [(results / "browse" / "index.html", "report-index.png", 2),
                                     (results / "browse" / "runs" / "fk.html", "report-run.png", 10),
                                     (results / "browse" / "sweeps" / "sw" / "index.html", "report-sweep.png", 2)]:
            pg = b.open(page.as_uri())
            assert pg.broken_images() == []
            n_img = pg.eval("document.images.length")
            assert n_img == len(Page(page).images)
            assert pg.eval("document.querySelectorAll('table tbody tr').length") >= rows_min
            assert pg.eval("document.querySelector('h1').textContent")
            w, h = pg.screenshot(str(SHOTS / shot), 1280, 900)
            assert w == 1280 and h >= 900
            assert (SHOTS / shot).read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_the_manifest_records_command_inputs_and_versions_and_replays_exactly(tmp_path):
    import numpy as np
    rng = np.random.default_rng(0)
    np.save(tmp_path / "gen.npy", np.eye(3) + 0.1 * rng.standard_normal((120, 3, 3)))
    cfg = tmp_path / "c.toml"
    cfg.write_text('preset = "cocycle-spectra"\ngenerators = "gen.npy"\n')
    tokdyn("run", "c.toml", "--out", "a", "-q", "--set", "burn_in=4", cwd=tmp_path)
    m = json.load(open(tmp_path / "a" / "manifest.json"))
    assert m["command"].endswith("run c.toml --out a -q --set burn_in=4") and m["working_directory"] == str(tmp_path)
    assert m["set"] == {"generators": "gen.npy", "burn_in": 4}
    assert m["config_file"]["sha256"] == hashlib.sha256(cfg.read_bytes()).hexdigest()
    [inp] = m["input_files"]
    assert inp["param"] == "generators" and inp["size"] == (tmp_path / "gen.npy").stat().st_size
    assert inp["sha256"] == hashlib.sha256((tmp_path / "gen.npy").read_bytes()).hexdigest()
    v = m["versions"]
    assert v["tokdyn"] == m["version"] and {"compiler", "eigen", "openblas", "plotting"} <= set(v)
    assert set(v["plotting"]) == {"python", "numpy", "matplotlib"}
    # Replay: the same parameters, the same bytes.
    r = tokdyn("run", "a/manifest.json", "--out", "b", "-q", cwd=tmp_path)
    mb = json.load(open(tmp_path / "b" / "manifest.json"))
    assert mb["params"] == m["params"] and mb["set"] == m["set"]
    for f in m["files"]:
        if f.endswith(".csv"):
            assert (tmp_path / "a" / f).read_bytes() == (tmp_path / "b" / f).read_bytes(), f
    # A --set on top of a replay changes that parameter only.
    tokdyn("run", "a/manifest.json", "--out", "c", "-q", "--no-figures", "--set", "burn_in=6", cwd=tmp_path)
    mc = json.load(open(tmp_path / "c" / "manifest.json"))
    assert mc["params"]["burn_in"] == 6 and {k: x for k, x in mc["params"].items() if k != "burn_in"} == \
        {k: x for k, x in m["params"].items() if k != "burn_in"}
    # A changed input is refused, naming it; nothing is written.
    a = np.load(tmp_path / "gen.npy")
    a[0, 0, 0] += 1e-9
    np.save(tmp_path / "gen.npy", a)
    r = tokdyn("run", "a/manifest.json", "--out", "d", "-q", cwd=tmp_path, check=2)
    assert r.stderr.count("\n") == 1 and "input 'gen.npy' of parameter 'generators' changed since the run" in r.stderr
    assert not (tmp_path / "d").exists()


def test_manifests_that_cannot_be_replayed_are_refused_with_one_line(results, tmp_path):
    (tmp_path / "bad.json").write_text("{")
    (tmp_path / "other.json").write_text('{"preset": "no-such-preset", "params": {}}')
    (tmp_path / "param.json").write_text('{"preset": "rope-flow", "params": {"zzz": 1}}')
    for target, says in [(results / "all" / "sw" / "manifest.json", "the manifest of a sweep"),
                         (tmp_path / "bad.json", "not valid JSON"),
                         (tmp_path / "other.json", "unknown preset 'no-such-preset'"),
                         (tmp_path / "param.json", "'zzz' is not a parameter of 'rope-flow'"),
                         (tmp_path / "missing.json", "missing.json")]:
        r = tokdyn("run", target, "--out", tmp_path / "o", "-q", check=2)
        assert r.stderr.count("\n") == 1 and says in r.stderr, r.stderr
    assert not (tmp_path / "o").exists()


def test_plot_redraws_a_runs_figures_and_leaves_its_data_untouched(tmp_path):
    tokdyn("run", "coupling-frozen-kernel", "--out", tmp_path / "r", "-q", "--dpi", "40")
    before = {f: (tmp_path / "r" / f).read_bytes() for f in os.listdir(tmp_path / "r") if f.endswith(".csv")}
    ino = (tmp_path / "r" / "checks.csv").stat().st_ino
    r = tokdyn("plot", tmp_path / "r", "--dpi", "80")
    assert r.stdout.startswith("drew 1 figure file in")
    m = json.load(open(tmp_path / "r" / "manifest.json"))
    assert m["figures_redrawn"]["dpi"] == 80 and m["figures_redrawn"]["formats"] == ["png"]
    assert sorted(m["files"]) == sorted(str(p.relative_to(tmp_path / "r")) for p in (tmp_path / "r").rglob("*")
                                        if p.is_file() and p.name != "manifest.json")
    assert (tmp_path / "r" / "checks.csv").stat().st_ino == ino  # the data files are the same files
    assert {f: (tmp_path / "r" / f).read_bytes() for f in before} == before
    assert not [p for p in tmp_path.iterdir() if p.name != "r"]  # no temporary, no lock left
    # Still a tokdyn result: a rerun with --overwrite may replace it, and a report reads it.
    tokdyn("report", tmp_path / "r", "--out", tmp_path / "rep")
    tokdyn("run", "coupling-frozen-kernel", "--out", tmp_path / "r", "-q", "--no-figures", "--overwrite")


def test_bad_plot_and_figure_options_are_one_line_exit_2(results, tmp_path):
    for args, says in [(("plot", tmp_path / "nope"), "is not a folder"),
                       (("plot", results / "all" / "sw"), "is a sweep"),
                       (("plot", tmp_path), "no readable manifest.json"),
                       (("plot", results / "all" / "fk", "--figure-format", "png,gif"), "expected a comma-separated list of png, svg, pdf"),
                       (("plot", results / "all" / "fk", "--figure-format", "png,png"), "listed twice"),
                       (("plot", results / "all" / "fk", "--dpi", "5"), "--dpi"),
                       (("run", "coupling-frozen-kernel", "--out", tmp_path / "x", "--no-figures", "--dpi", "30"), "does not apply with --no-figures"),
                       (("run", "ssm-lemma-silu-bias", "--out", tmp_path / "x", "--figure-format", "pdf"), "it draws no figures")]:
        r = tokdyn(*args, check=2)
        assert r.stderr.count("\n") == 1 and says in r.stderr, r.stderr
    assert not (tmp_path / "x").exists()
