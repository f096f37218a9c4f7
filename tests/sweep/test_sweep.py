"""`tokdyn sweep` from the outside (the binary in TOKDYN_BIN): grids, sweep.csv against single
runs, --jobs / shards / mpirun giving the same bytes as a serial sweep, kill-and-resume, changed
parameters refused, failing points, --points / --zip, --plot, bad input. Run by CTest (`sweep`)."""
import csv
import filecmp
import json
import os
import shutil
import signal
import subprocess
import time
from pathlib import Path

import pytest

BIN = os.environ.get("TOKDYN_BIN", "tokdyn")
MPIRUN = shutil.which("mpirun")
# Tiny rope-flow points (a few ms of compute each).
TINY = ["--set", "d=4", "--set", "t_end=0.5", "--set", "outputs=5", "--set", "runs=2"]


def tokdyn(*args, check=None, env=None, **kw):
    r = subprocess.run([BIN, *map(str, args)], capture_output=True, text=True, env=env, **kw)
    if check is not None:
        assert r.returncode == check, (r.returncode, r.stdout[-2000:], r.stderr[-2000:])
    return r


def rows(path):
    with open(path, newline="") as f:
        return list(csv.DictReader(f))


def same_tree(a, b, skip=("manifest.json",)):
    """The points' result files are the same bytes (manifests hold times and hosts)."""
    fa = sorted(p.relative_to(a) for p in Path(a).rglob("*") if p.is_file() and p.name not in skip)
    fb = sorted(p.relative_to(b) for p in Path(b).rglob("*") if p.is_file() and p.name not in skip)
    assert fa == fb
    for f in fa:
        assert filecmp.cmp(Path(a) / f, Path(b) / f, shallow=False), f


@pytest.fixture(scope="module")
def serial(tmp_path_factory):
    out = tmp_path_factory.mktemp("serial") / "s"
    r = tokdyn("sweep", "rope-flow", "--grid", "beta=0.5,1,2", "--grid", "n=4:8:x2", *TINY, "--out", out, "--threads", "2", check=0)
    return out, r


def test_grid_points_and_sweep_csv(serial, tmp_path):
    out, r = serial
    t = rows(out / "sweep.csv")
    assert [(x["beta"], x["n"]) for x in t] == [("0.5", "4"), ("0.5", "8"), ("1", "4"), ("1", "8"), ("2", "4"), ("2", "8")]
    assert all(x["status"] == "ok" and x["exit_code"] == "0" and x["error"] == "" for x in t)
    assert "[6/6]" in r.stdout and "ok" in r.stdout
    head = open(out / "sweep.csv").readline().strip().split(",")
    assert head[:7] == ["point", "hash", "beta", "n", "status", "exit_code", "error"]
    summaries = json.loads(tokdyn("show", "rope-flow", "--json", check=0).stdout)["outputs"]["summaries"]
    assert head[7:] == [s["name"] for s in summaries]  # every declared scalar summary
    # A point equals the same run made by hand, byte for byte; its folder is named by its hash.
    one = tmp_path / "one"
    tokdyn("run", "rope-flow", "--out", one, "--no-figures", "-q", *TINY, "--set", "beta=1", "--set", "n=8", check=0)
    point = out / "points" / t[3]["hash"]
    same_tree(one, point)
    with open(one / "summary.csv") as f:
        want = {r["quantity"]: r["value"] for r in csv.DictReader(f)}
    assert {k: t[3][k] for k in want} == want
    m = json.load(open(point / "manifest.json"))
    assert m["sweep_point"]["point"] == 3 and m["sweep_point"]["hash"] == t[3]["hash"] and m["sweep_point"]["host"]
    sm = json.load(open(out / "manifest.json"))
    assert sm["kind"] == "tokdyn-sweep" and sm["counts"] == {"points": 6, "ok": 6, "failed": 0, "missing": 0}
    assert [p["status"] for p in sm["points"]] == ["ok"] * 6


def test_jobs_equal_serial_byte_for_byte(serial, tmp_path):
    out, _ = serial
    j = tmp_path / "j"
    tokdyn("sweep", "rope-flow", "--grid", "beta=0.5,1,2", "--grid", "n=4:8:x2", *TINY, "--out", j, "--jobs", "2", "-q", check=0)
    assert filecmp.cmp(out / "sweep.csv", j / "sweep.csv", shallow=False)
    same_tree(out / "points", j / "points")
    assert json.load(open(j / "manifest.json"))["threads_per_point"] == max(1, (os.cpu_count() or 1) // 2)


def test_shards_and_collect_equal_the_whole_sweep(serial, tmp_path):
    out, _ = serial
    s = tmp_path / "sh"
    args = ["sweep", "rope-flow", "--grid", "beta=0.5,1,2", "--grid", "n=4:8:x2", *TINY, "--out", s, "-q"]
    r0 = tokdyn(*args, "--shard", "0/2", check=0)
    assert "--collect" in r0.stdout and not (s / "sweep.csv").exists()
    # With one shard missing, collect writes what is there and says so (exit 8).
    r = tokdyn("sweep", "--collect", s, check=8)
    assert "3 missing" in r.stdout
    assert [x["status"] for x in rows(s / "sweep.csv")].count("missing") == 3
    tokdyn(*args, "--shard", "1/2", check=0)
    tokdyn("sweep", "--collect", s, check=0)
    assert filecmp.cmp(out / "sweep.csv", s / "sweep.csv", shallow=False)
    same_tree(out / "points", s / "points")


def test_a_config_file_with_a_sweep_table(serial, tmp_path):
    out, _ = serial
    cfg = tmp_path / "beta-n.toml"
    cfg.write_text('preset = "rope-flow"\nd = 4\nt_end = 0.5\noutputs = 5\nruns = 2\n\n'
                   '[sweep]\ngrid = { beta = [0.5, 1, 2], n = "4:8:x2" }\n')
    t = tmp_path / "t"
    tokdyn("sweep", cfg, "--out", t, "-q", check=0)
    # The same points as the command line's sweep: the same hashes, the same bytes.
    assert filecmp.cmp(out / "sweep.csv", t / "sweep.csv", shallow=False)
    assert json.load(open(t / "manifest.json"))["definition"]["config"] == str(cfg)
    assert not list(Path("/tmp").glob(f"tokdyn-sweep-*.toml"))  # the copy without [sweep] is removed
    pts = tmp_path / "pts.csv"
    pts.write_text("beta\n3\n")
    cfg2 = tmp_path / "z.toml"
    cfg2.write_text('preset = "rope-flow"\nd = 4\nt_end = 0.5\noutputs = 5\n[sweep]\nzip = { n = [4, 5], seed = [1, 2] }\npoints = "pts.csv"\n')
    tokdyn("sweep", cfg2, "--out", tmp_path / "z", "-q", check=0)
    assert [(x["n"], x["seed"], x["beta"]) for x in rows(tmp_path / "z" / "sweep.csv")] == [("4", "1", "3"), ("5", "2", "3")]
    r = tokdyn("run", cfg, "--out", tmp_path / "r", check=2)
    assert "a [sweep] table is read by `tokdyn sweep FILE.toml`, not by `tokdyn run`" in r.stderr
    bad = tmp_path / "bad.toml"
    bad.write_text('preset = "rope-flow"\n[sweep]\ngrids = { beta = [1] }\n')
    r = tokdyn("sweep", bad, "--out", tmp_path / "b", check=2)
    assert "[sweep] grids: unknown key; expected grid, zip or points" in r.stderr and not (tmp_path / "b").exists()


def test_kill_and_resume(tmp_path):
    out = tmp_path / "k"
    args = ["sweep", "rope-flow", "--grid", "seed=0:7", "--set", "n=48", "--set", "d=8", "--set", "t_end=6", "--set", "runs=2",
            "--set", "outputs=5", "--out", out, "--threads", "1"]
    p = subprocess.Popen([BIN, *map(str, args)], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    deadline = time.time() + 120
    while time.time() < deadline:
        done = [x for x in (out / "points").glob("*") if (x / "manifest.json").exists()] if (out / "points").exists() else []
        if len(done) >= 2:
            break
        time.sleep(0.02)
    p.send_signal(signal.SIGKILL)  # the sweep dies at once; its running point dies with it
    p.wait()
    time.sleep(0.3)
    before = {x.name: (x / "manifest.json").stat().st_mtime_ns for x in (out / "points").glob("*") if (x / "manifest.json").exists()}
    assert 2 <= len(before) < 8, before
    r = tokdyn(*args, check=0)
    assert f"{len(before)} complete (skipped)" in r.stdout
    after = {x.name: (x / "manifest.json").stat().st_mtime_ns for x in (out / "points").glob("*")}
    assert len(after) == 8 and all(after[k] == v for k, v in before.items())  # not recomputed
    assert not list((out / "points").glob("*.tmp-*"))  # the killed point's temporary folder is gone
    assert not (out / "failed").exists()  # and its log (failed/ is removed when empty)
    fresh = tmp_path / "f"
    tokdyn(*[a if a != str(out) and a != out else fresh for a in args], check=0)
    assert filecmp.cmp(out / "sweep.csv", fresh / "sweep.csv", shallow=False)


def test_an_interrupted_sweep_stops_its_points_and_leaves_only_complete_ones(tmp_path):
    out = tmp_path / "i"
    # Many points, and the signal goes when a point is observed running (its temporary folder
    # exists), not after a time: on any CPU the sweep is then mid-way (issue 38).
    p = subprocess.Popen([BIN, "sweep", "rope-flow", "--grid", "seed=0:63", "--set", "n=48", "--set", "d=8", "--set", "t_end=6",
                          "--set", "runs=2", "--set", "outputs=5", "--out", str(out), "--jobs", "2", "--threads", "1"],
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    deadline = time.time() + 120
    while time.time() < deadline and p.poll() is None:
        if (out / "points").exists() and list((out / "points").glob("*.tmp-*")):
            break
        time.sleep(0.005)
    assert p.poll() is None, "the sweep ended before a point was seen running"
    p.send_signal(signal.SIGINT)
    _, err = p.communicate(timeout=60)
    assert p.returncode == 130 and "interrupted (SIGINT)" in err
    left = ["?"]
    for _ in range(100):  # a point stopped with the sweep may take a moment to finish its own clean-up
        left = subprocess.run(["pgrep", "-f", f"--out {out}/points"], capture_output=True, text=True).stdout.split()
        if not left:
            break
        time.sleep(0.05)
    assert left == [], left  # no point still running
    assert not list((out / "points").glob("*.tmp-*")) and not list((out / "points").glob(".*lock"))
    assert not list((out / "failed").glob(".*stderr*"))
    for d in (out / "points").iterdir():
        assert d.is_dir() and (d / "manifest.json").exists(), d
    assert not (out / "failed").exists() or not list((out / "failed").glob("*.json"))  # an interrupted point is not a failure


def test_changed_parameters_are_refused_then_replaced(tmp_path):
    out = tmp_path / "c"
    tokdyn("sweep", "rope-flow", "--grid", "beta=1,2", *TINY, "--out", out, "-q", check=0)
    r = tokdyn("sweep", "rope-flow", "--grid", "beta=1,3", *TINY, "--out", out, "-q", check=2)
    assert r.stderr.count("\n") == 1 and "holds a sweep of other parameters" in r.stderr and "beta=1,2 there, beta=1,3 here" in r.stderr
    r = tokdyn("sweep", "rope-flow", "--grid", "beta=1,2", *TINY, "--set", "n=5", "--out", out, "-q", check=2)
    assert "--set n: (not set) there, 5 here" in r.stderr
    tokdyn("sweep", "rope-flow", "--grid", "beta=1,3", *TINY, "--out", out, "-q", "--overwrite", check=0)
    assert [x["beta"] for x in rows(out / "sweep.csv")] == ["1", "3"]
    assert len(list((out / "points").iterdir())) == 2
    # A folder that is not a sweep is never touched.
    other = tmp_path / "mine"
    other.mkdir()
    (other / "thesis.tex").write_text("x")
    r = tokdyn("sweep", "rope-flow", "--grid", "beta=1", *TINY, "--out", other, "--overwrite", check=2)
    assert "not a tokdyn sweep" in r.stderr and (other / "thesis.tex").exists()


def test_a_point_of_other_parameters_is_never_reused(tmp_path):
    out = tmp_path / "t"
    args = ["sweep", "rope-flow", "--grid", "beta=1,2", *TINY, "--out", out, "-q"]
    tokdyn(*args, check=0)
    h = rows(out / "sweep.csv")[0]["hash"]
    m = json.load(open(out / "points" / h / "manifest.json"))
    m["params"]["n"] = 99  # as if the folder held another run
    json.dump(m, open(out / "points" / h / "manifest.json", "w"))
    r = tokdyn(*args, check=2)
    assert f"points/{h} holds a result of other parameters (n)" in r.stderr


def test_several_values_for_run_point_to_sweep(tmp_path):
    r = tokdyn("run", "rope-flow", "--set", "beta=0.5,1,2", "--out", tmp_path / "r", check=2)
    assert "several are a sweep: tokdyn sweep PRESET --grid beta=0.5,1,2" in r.stderr and r.stderr.count("\n") == 1


def test_overwrite_removes_only_what_a_sweep_wrote(tmp_path):
    out = tmp_path / "o"
    tokdyn("sweep", "rope-flow", "--grid", "beta=1,2", *TINY, "--out", out, "-q", check=0)
    other = ["sweep", "rope-flow", "--grid", "beta=3", *TINY, "--out", out, "-q", "--overwrite"]
    before = sorted(p.relative_to(out) for p in out.rglob("*"))
    # A file of the user's anywhere in the folder (top level, points/, inside a point, failed/) or a
    # symbolic link: --overwrite is refused, naming it, and nothing at all is removed.
    h = rows(out / "sweep.csv")[0]["hash"]
    for extra in [out / "notes.txt", out / "points" / "notes.txt", out / "points" / h / "notes.txt", out / "failed" / "x.txt"]:
        extra.parent.mkdir(exist_ok=True)
        extra.write_text("mine")
        r = tokdyn(*other, check=2)
        assert extra.name in r.stderr and "replaces only a previous sweep" in r.stderr, r.stderr
        assert extra.read_text() == "mine" and (out / "points" / h / "manifest.json").exists()
        extra.unlink()
    (out / "failed").rmdir()
    (out / "points" / "link").symlink_to(tmp_path)
    r = tokdyn(*other, check=2)
    assert "is a symbolic link" in r.stderr and tmp_path.exists()
    (out / "points" / "link").unlink()
    assert sorted(p.relative_to(out) for p in out.rglob("*")) == before
    tokdyn(*other, check=0)
    assert [x["beta"] for x in rows(out / "sweep.csv")] == ["3"] and len(list((out / "points").iterdir())) == 1


def test_failing_points_are_rows(tmp_path):
    out = tmp_path / "f"
    # d = 3 with RoPE is refused by the run (odd dimension); n = 0 by the schema (bad input before running).
    r = tokdyn("sweep", "rope-flow", "--grid", "d=3,4", "--grid", "n=0,4", "--set", "t_end=0.5", "--set", "outputs=5", "--out", out, check=8)
    t = {(x["d"], x["n"]): x for x in rows(out / "sweep.csv")}
    assert t[("4", "4")]["status"] == "ok"
    for k in [("3", "4"), ("3", "0"), ("4", "0")]:
        assert t[k]["status"] == "failed" and t[k]["exit_code"] == "2" and t[k]["error"].startswith("error: ")
        assert t[k]["lambda1_final"] == ""
    assert "n" in t[("4", "0")]["error"]
    assert "failed (exit 2)" in r.stdout
    assert json.load(open(out / "manifest.json"))["counts"]["failed"] == 3
    # Rerun: the good point is skipped, the failing ones are retried (and fail again).
    r = tokdyn("sweep", "rope-flow", "--grid", "d=3,4", "--grid", "n=0,4", "--set", "t_end=0.5", "--set", "outputs=5", "--out", out, check=8)
    assert "1 complete (skipped)" in r.stdout


def test_points_file_zip_and_ranges(tmp_path):
    pts = tmp_path / "p.csv"
    pts.write_text("beta,n\n0.5,4\n2,6\n1,\n")  # an empty cell: the default (n = 16)
    out = tmp_path / "p"
    tokdyn("sweep", "rope-flow", "--points", pts, *TINY, "--out", out, "-q", check=0)
    assert [(x["beta"], x["n"]) for x in rows(out / "sweep.csv")] == [("0.5", "4"), ("2", "6"), ("1", "")]
    z = tmp_path / "z"
    tokdyn("sweep", "rope-flow", "--zip", "beta=linspace(0,1,3)", "--zip", "n=4,5,6", "--grid", "seed=0,1", *TINY, "--out", z, "-q", check=0)
    # The product runs over the --grid axes (in order), then the --zip axis, then --points; the last fastest.
    assert [(x["seed"], x["beta"], x["n"]) for x in rows(z / "sweep.csv")] == [
        ("0", "0", "4"), ("0", "0.5", "5"), ("0", "1", "6"), ("1", "0", "4"), ("1", "0.5", "5"), ("1", "1", "6")]
    assert open(z / "sweep.csv").readline().startswith("point,hash,seed,beta,n,status")
    g = tmp_path / "g"
    tokdyn("sweep", "rope-flow", "--grid", "beta=logspace(-1,1,3)", "--grid", "t_end=0.1:0.3:0.1", "--set", "n=3", "--set", "outputs=2",
           "--set", "runs=1", "--out", g, "-q", check=0)
    assert [(x["beta"], x["t_end"]) for x in rows(g / "sweep.csv")][:3] == [("0.1", "0.1"), ("0.1", "0.2"), ("0.1", "0.3")]
    assert rows(g / "sweep.csv")[-1]["beta"] == "10"


@pytest.mark.parametrize("args,expect", [
    (["--grid", "bogus=1,2"], "--grid bogus: not a parameter of preset rope-flow"),
    (["--grid", "beta"], "--grid 'beta': expected key=SPEC"),
    (["--grid", "beta=2:1:0.5"], "the step does not move A towards B"),
    (["--grid", "n=4:8:x1"], "a geometric range needs"),
    (["--grid", "n=linspace(1,2,3)"], "n is an integer parameter and 1.5 is not an integer"),
    (["--grid", "beta=1,2", "--set", "beta=3"], "already given"),
    (["--zip", "beta=1,2", "--zip", "n=4,5,6"], "need the same count"),
    (["--grid", "beta=1,1.0"], "run the same parameters"),
    ([], "no --grid, --zip or --points"),
    (["--grid", "beta=1", "--plot", "y=nothing,x=beta"], "--plot y=nothing: not a scalar summary of preset rope-flow"),
    (["--grid", "beta=1", "--plot", "y=lambda1_final,x=n"], "--plot x=n: not a swept parameter"),
    (["--grid", "beta=1", "--shard", "2/2"], "--shard '2/2': expected I/N"),
    (["--grid", "beta=1", "--jobs", "0"], "--jobs: expected an integer"),
    (["--grid", "beta=1", "--shard", "0/2", "--plot", "y=lambda1_final,x=beta"], "--plot: not with --shard"),
])
def test_bad_input_is_one_line_exit_2_nothing_written(tmp_path, args, expect):
    out = tmp_path / "bad"
    r = tokdyn("sweep", "rope-flow", *args, "--out", out)
    assert r.returncode == 2, (r.stdout, r.stderr)
    assert r.stderr.count("\n") == 1 and expect in r.stderr, r.stderr
    assert not out.exists()
    r = tokdyn("sweep", "--collect", tmp_path)
    assert r.returncode == 2 and "no sweep manifest.json" in r.stderr


def test_plot(serial, tmp_path):
    out, _ = serial
    c = tmp_path / "plot"
    shutil.copytree(out, c)
    tokdyn("sweep", "--collect", c, "--plot", "y=lambda1_final,x=n,hue=beta", check=0)
    png = c / "sweep_lambda1_final_vs_n_by_beta.png"
    assert png.exists() and png.stat().st_size > 5000
    assert json.load(open(c / "manifest.json"))["plots"] == [{"y": "lambda1_final", "x": "n", "hue": "beta"}]


@pytest.mark.skipif(MPIRUN is None or os.environ.get("TOKDYN_HAVE_MPI") != "ON", reason="tokdyn built without Open MPI")
def test_mpirun_two_ranks_share_the_points(serial, tmp_path):
    out, _ = serial
    m = tmp_path / "mpi"
    env = dict(os.environ, OMPI_ALLOW_RUN_AS_ROOT="1", OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1", OMPI_MCA_rmaps_base_oversubscribe="1")
    r = subprocess.run([MPIRUN, "--oversubscribe", "-np", "2", BIN, "sweep", "rope-flow", "--grid", "beta=0.5,1,2", "--grid", "n=4:8:x2",
                        *TINY, "--out", str(m)], capture_output=True, text=True, env=env, timeout=300)
    assert r.returncode == 0, (r.stdout, r.stderr)
    assert "2 ranks" in r.stdout
    assert filecmp.cmp(out / "sweep.csv", m / "sweep.csv", shallow=False)
    same_tree(out / "points", m / "points")
    ranks = {json.load(open(p / "manifest.json"))["sweep_point"]["rank"] for p in (m / "points").iterdir()}
    assert ranks == {0, 1}, ranks  # both ranks did work
    points = json.load(open(m / "manifest.json"))["points"]
    assert {p["rank"] for p in points} == {0, 1} and all(p["host"] for p in points)
