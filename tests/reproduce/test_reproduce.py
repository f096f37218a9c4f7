"""`tokdyn reproduce` (apps/tokdyn/reproduce.cpp) and scripts/reproduction_tables.py.

`tokdyn reproduce all --quick` runs here in full (about 1.5 minutes on 2 cores, figures off; the
figures are tested by figure_props): every preset of every paper ran, reproduction.csv agrees with
each preset's own checks.csv and summary.csv, the differences are recomputed here from the cells,
the counts in the manifest are recounted, the report links every file it names, and the generated
markdown renders. Bad input is one line, exit 2, nothing written; an interrupt leaves nothing.
"""
import csv
import json
import os
import re
import signal
import subprocess
import sys
import time
from html.parser import HTMLParser
from pathlib import Path
from urllib.parse import unquote

import pytest

TOKDYN = os.environ.get("TOKDYN_BIN", "build/tokdyn")
HERE = Path(__file__).resolve().parents[2]
SCRIPT = HERE / "scripts/reproduction_tables.py"
# The sanitizer build reproduces one paper (TOKDYN_REPRODUCE_QUICK=rope); the release suite all three.
WHICH = os.environ.get("TOKDYN_REPRODUCE_QUICK", "all")
PAPERS = {"attention-within", "rope", "coupling"} if WHICH == "all" else {WHICH}


def tokdyn(*args, cwd=None, timeout=900):
    return subprocess.run([TOKDYN, *args], cwd=cwd, capture_output=True, text=True, timeout=timeout)


def rows(path):
    with open(path, newline="") as f:
        return list(csv.DictReader(f))


@pytest.fixture(scope="module")
def quick(tmp_path_factory):
    out = tmp_path_factory.mktemp("rep") / "quick"
    t0 = time.monotonic()
    r = tokdyn("reproduce", WHICH, "--quick", "--no-figures", "--progress", "none", "--out", str(out))
    assert r.returncode == 0, r.stderr
    print(f"reproduce {WHICH} --quick: {time.monotonic() - t0:.1f} s", file=sys.stderr)
    return out, r


def test_every_preset_of_every_paper_ran(quick):
    out, r = quick
    m = json.loads((out / "manifest.json").read_text())
    assert m["kind"] == "tokdyn-reproduction" and m["paper"] == WHICH and m["quick"] is True
    presets = rows(out / "presets.csv")
    assert {p["paper"] for p in presets} == PAPERS
    names = [p["preset"] for p in presets]
    assert len(names) == len(set(names))
    # Every registered preset of the three papers (by its name's family) is in the reproduction,
    # except the generic flows and the two training presets (listed by --presets only).
    listed = subprocess.run([TOKDYN, "presets"], capture_output=True, text=True, check=True).stdout.split("\n")
    registry = {line.split()[0] for line in listed if line.strip()}
    prefixes = {"attention-within": r"(ssm-|mamba2-fig)", "rope": r"(rope-fig|rope-table)",
                "coupling": r"(coupling-|cocycle-|depth-spectra)"}
    family = {n for n in registry if any(re.match(prefixes[p], n) for p in PAPERS)}
    assert family - set(names) == ({"coupling-all", "coupling-e1", "coupling-e6"} if "coupling" in PAPERS else set())
    for p in presets:
        run = json.loads((out / p["preset"] / "manifest.json").read_text())
        assert run["preset"] == p["preset"]
        assert p["command"].startswith("tokdyn run " + p["preset"])
        # The command's --set values are the run's parameters.
        for k, v in re.findall(r"--set (\w+)=(\S+)", p["command"]):
            assert str(run["set"][k]).replace(" ", "") in (v, "[" + v + "]"), (p["preset"], k, v, run["set"][k])
    assert f"report: {out / 'report/index.html'}" in r.stdout


def test_rows_agree_with_each_presets_own_tables(quick):
    out, _ = quick
    rep = rows(out / "reproduction.csv")
    for p in rows(out / "presets.csv"):
        d = out / p["preset"]
        mine = [x for x in rep if x["preset"] == p["preset"]]
        checks = rows(d / "checks.csv") if (d / "checks.csv").exists() else []
        summ = [s for s in rows(d / "summary.csv") if s["paper"]] if (d / "summary.csv").exists() else []
        got_checks = [x for x in mine if x["source"] == "check"]
        got_summ = [x for x in mine if x["source"] == "summary"]
        assert [c["check"] for c in checks] == [x["id"] for x in got_checks]
        assert [c["pass"] for c in checks] == [{"pass": "true", "fail": "false", "n/a": "n/a"}[x["verdict"]] for x in got_checks]
        assert [c["reference_kind"] for c in checks] == [x["reference_kind"] for x in got_checks]
        assert [s["quantity"] for s in summ] == [x["id"] for x in got_summ]
        assert [s["paper"] for s in summ] == [x["reference"] for x in got_summ]
        assert all(x["verdict"] == "side-by-side" for x in got_summ)
        assert int(p["checks"]) == len(checks)
        assert int(p["failed"]) == sum(c["pass"] == "false" for c in checks)


def paper_number(text):
    t = re.sub(r"^(\u2248|~|=)", "", text).strip()
    try:
        return float(t)
    except ValueError:
        return None


def test_differences_recomputed_from_the_cells(quick):
    out, _ = quick
    n = 0
    for x in rows(out / "reproduction.csv"):
        ref = None
        if x["source"] == "summary" or x["reference_kind"] == "paper":
            ref = paper_number(x["reference"])
        if ref is None and " within " in x["expected"]:
            ref = paper_number(x["expected"].split(" within ")[0])
        if ref is None or x["tokdyn_value"] == "":
            assert x["difference"] == "", x
            continue
        assert float(x["difference"]) == pytest.approx(float(x["tokdyn_value"]) - ref, rel=1e-12, abs=1e-300), x
        n += 1
    assert n > (40 if WHICH == "all" else 10)  # the paper numbers and "X within TOL" references


def test_counts_by_reference_kind_are_the_rows(quick):
    out, r = quick
    m = json.loads((out / "manifest.json").read_text())
    rep = rows(out / "reproduction.csv")
    counted = {}
    for x in rep:
        k = counted.setdefault(x["reference_kind"], {"passed": 0, "failed": 0, "not_applicable": 0, "side_by_side": 0})
        k[{"pass": "passed", "fail": "failed", "n/a": "not_applicable", "side-by-side": "side_by_side"}[x["verdict"]]] += 1
    assert counted == m["checks_by_kind"]
    assert m["checks"] == sum(x["source"] == "check" for x in rep)
    assert m["paper_numbers_side_by_side"] == sum(x["source"] == "summary" for x in rep)
    # Quick sizes keep the depths, models and time spans the checks are stated at: few are n/a.
    na = [x for x in rep if x["verdict"] == "n/a" and "freshly initialised" not in x["expected"]]
    assert len(na) <= 8, [(x["preset"], x["id"], x["expected"]) for x in na]


class Links(HTMLParser):
    def __init__(self):
        super().__init__()
        self.links, self.rows = [], 0

    def handle_starttag(self, tag, attrs):
        a = dict(attrs)
        if tag == "a" and a.get("href"):
            self.links.append(a["href"])
        if tag == "tr":
            self.rows += 1


def test_report_has_every_row_and_every_link_resolves(quick):
    out, _ = quick
    page = out / "report/index.html"
    p = Links()
    p.feed(page.read_text())
    n_rows = len(rows(out / "reproduction.csv"))
    assert p.rows >= n_rows
    assert "Every paper number and verdict" in page.read_text()
    for href in p.links:
        if href.startswith(("http:", "https:", "#")):
            continue
        target = (page.parent / unquote(href.split("#")[0])).resolve()
        assert target.exists(), href
    # The published folder is a tokdyn result: exactly the files its manifest lists.
    m = json.loads((out / "manifest.json").read_text())
    on_disk = sorted(str(f.relative_to(out)) for f in out.rglob("*") if f.is_file() and f != out / "manifest.json")
    assert on_disk == sorted(m["files"])


def test_markdown_renders_and_is_refused_into_the_document(quick, tmp_path):
    out, _ = quick
    r = subprocess.run(["/usr/bin/python3", str(SCRIPT), "--stdout", str(out)], capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    for paper in PAPERS:
        assert f"<!-- BEGIN GENERATED: reproduce {paper} -->" in r.stdout
    doc = tmp_path / "doc.md"
    doc.write_text("# x\n")
    r = subprocess.run(["/usr/bin/python3", str(SCRIPT), str(out), "--doc", str(doc), "--data", str(tmp_path / "data")],
                       capture_output=True, text=True)
    assert r.returncode != 0 and "--quick" in r.stderr
    assert doc.read_text() == "# x\n"


def test_the_document_agrees_with_its_data():
    r = subprocess.run(["/usr/bin/python3", str(SCRIPT), "--check"], capture_output=True, text=True)
    assert r.returncode == 0, r.stderr


def test_bad_input_is_one_line_and_writes_nothing(tmp_path):
    cases = [
        (["reproduce", "attention"], "unknown paper 'attention'"),
        (["reproduce", "rope", "--presets", "rope-fig9"], "--presets: 'rope-fig9' is not a preset of rope"),
        (["reproduce", "rope", "--threads", "0"], "--threads"),
        (["reproduce", "rope", "--quiet", "--progress", "bar"], "--quiet"),
    ]
    for args, want in cases:
        out = tmp_path / "o"
        r = tokdyn(*args, "--out", str(out), cwd=tmp_path)
        assert r.returncode == 2, (args, r.stderr)
        assert want in r.stderr and r.stderr.count("\n") == 1, r.stderr
        assert sorted(os.listdir(tmp_path)) == [], os.listdir(tmp_path)
    # A folder the user wrote is never replaced.
    mine = tmp_path / "mine"
    mine.mkdir()
    (mine / "thesis.tex").write_text("x")
    r = tokdyn("reproduce", "rope", "--presets", "rope-fig4c", "--no-figures", "--out", str(mine), "--overwrite")
    assert r.returncode == 2 and "thesis.tex" in r.stderr
    assert os.listdir(mine) == ["thesis.tex"]


def test_presets_selects_and_a_rerun_needs_overwrite(tmp_path):
    out = tmp_path / "one"
    args = ["reproduce", "coupling", "--presets", "coupling-euler", "--no-figures", "--progress", "none", "--out", str(out)]
    r = tokdyn(*args)
    assert r.returncode == 0, r.stderr
    assert [p["preset"] for p in rows(out / "presets.csv")] == ["coupling-euler"]
    assert (out / "report/index.html").exists()
    r = tokdyn(*args)
    assert r.returncode == 2 and "--overwrite" in r.stderr
    r = tokdyn(*args, "--overwrite")
    assert r.returncode == 0, r.stderr
    assert sorted(os.listdir(tmp_path)) == ["one"]


def test_an_interrupt_leaves_nothing(tmp_path):
    out = tmp_path / "rope"
    p = subprocess.Popen([TOKDYN, "reproduce", "rope", "--no-figures", "--progress", "none", "--out", str(out)],
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    # Wait for a state: the second preset's folder is being written inside the temporary folder.
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline and p.poll() is None:
        if any((t / "rope-fig1a" / "manifest.json").exists() for t in tmp_path.glob("rope.tmp-*")):
            break
        time.sleep(0.01)
    assert p.poll() is None, "the reproduction ended before it could be interrupted"
    p.send_signal(signal.SIGINT)
    _, err = p.communicate(timeout=60)
    assert p.returncode == 130, err
    assert os.listdir(tmp_path) == [], os.listdir(tmp_path)


def test_the_report_loads_in_a_browser_with_its_figures(tmp_path):
    sys.path.insert(0, str(HERE / "tests/browser"))
    from cdp import Browser

    out = tmp_path / "rope"
    r = tokdyn("reproduce", "rope", "--quick", "--presets", "rope-fig1a,rope-table2", "--progress", "none", "--out", str(out))
    assert r.returncode == 0, r.stderr
    shots = Path(os.environ.get("TOKDYN_REPORT_SHOTS", tmp_path))
    shots.mkdir(parents=True, exist_ok=True)
    n_rows = len(rows(out / "reproduction.csv"))
    with Browser() as b:
        pg = b.open((out / "report/index.html").as_uri())
        assert pg.broken_images() == []
        assert pg.eval("document.querySelectorAll('table.checks tbody tr').length") == n_rows
        assert "Reproduction: rope" in pg.eval("document.querySelector('h1').textContent")
        w, h = pg.screenshot(str(shots / "reproduce-index.png"), 1280, 900)
        assert w == 1280 and h >= 900
        # A run's page from the index: its figures are embedded and load.
        run_page = out / "report/runs/rope-fig1a.html"
        pg = b.open(run_page.as_uri())
        assert pg.broken_images() == []
        assert pg.eval("document.images.length") >= 1


def test_a_hand_edit_of_a_generated_block_fails_the_check(tmp_path):
    doc = (HERE / "docs/reproduction.md").read_text()
    m = re.search(r"<!-- BEGIN GENERATED: reproduce (\S+) -->.*?\| pass \|", doc, re.S)
    assert m, "docs/reproduction.md has no generated block"
    edited = tmp_path / "reproduction.md"
    edited.write_text(doc[:m.end() - len("| pass |")] + "| fail |" + doc[m.end():])
    r = subprocess.run(["/usr/bin/python3", str(SCRIPT), "--check", "--doc", str(edited)], capture_output=True, text=True)
    assert r.returncode == 1 and m.group(1) in r.stderr, r.stderr
