#!/usr/bin/python3
"""One benchmark run of every tokdyn workload against its Python peer (issue 21, item 6).

Run by scripts/bench_all.sh (which builds Release with the benchmarks first) with Debian's
/usr/bin/python3 (numpy; the peers also need scipy and torch). In one run it

  1. records the machine (CPU, cores, avx2 / avx512f, OpenBLAS config and core, date, commit,
     `tokdyn --version`);
  2. measures the OpenBLAS DGEMM and SGEMM peaks, 1 and 2 threads (build/tokdyn_bench: BM_Dgemm,
     BM_Sgemm);
  3. times every workload with tokdyn and its peer, each measurement started on an idle machine
     (as scripts/bench_lib.sh's wait_idle: < 10 % busy over a short window, or the wait's limit):
     wall time, GFLOP/s (the flop counts of the per-workload scripts), % of the relevant peak,
     peer time / tokdyn time, peak RSS (GNU time %M) and tokdyn's manifest notes.phase_seconds;
     with --before REF, each row's tokdyn command once more with the build of commit REF (built by
     bench_all.sh), the same OpenBLAS kernels, for a before/after column from the same run;
  4. times tokdyn at 2-3 sizes of each workload's main size parameter and fits the growth exponent;
  5. writes bench/results.md (bench/results-quick.md with --quick) and, in full mode, the generated
     table between <!-- bench_all:begin --> and <!-- bench_all:end --> under README.md's ## Speed.

Usage: bench_all.py [--quick] [--only NAME[,NAME...]] [--build DIR] [--out FILE] [--no-readme]
                    [--readme] [--idle-wait SECONDS] [--keep] [--openblas-coretype NAME] [--before REF]
Workload names (--only): mamba2-fig1, ssm-random-silu, cocycle-spectra, rope-table2, green, gpt2-depth,
continuation, depth-spectra, sweep.
Exit status: 0; 1 when a workload failed or a peer's results disagree with tokdyn's (the results
file is written all the same and says which); 2 for a bad option.
"""
import argparse
import math
import os
import shutil
import subprocess
import sys
import tempfile
import time
import traceback
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))  # scripts/: the package bench_all_lib

from bench_all_lib.config import ALIASES, HERE, WORKLOADS  # noqa: E402
from bench_all_lib.measure import Bench, BenchError, machine_info, measure_peaks, new_row  # noqa: E402
from bench_all_lib.report import readme_block, render, update_readme  # noqa: E402
from bench_all_lib.workloads_models import w_gpt2, w_mamba2, w_ssm, w_depth_spectra, w_sweep  # noqa: E402
from bench_all_lib.workloads_numerics import w_cocycle, w_continuation, w_green, w_rope  # noqa: E402


class OneLineParser(argparse.ArgumentParser):
    def error(self, message):
        sys.stderr.write(f"bench_all: {message} (see --help)\n")
        sys.exit(2)


def parse_args(argv):
    ap = OneLineParser(prog="bench_all", description=__doc__.split("\n")[0],
                       formatter_class=argparse.RawDescriptionHelpFormatter,
                       epilog="Workloads: " + ", ".join(WORKLOADS))
    ap.add_argument("--quick", action="store_true", help="about 5 minutes: small sizes, one repetition, peers at reduced "
                                                         "depth (scaled), writes bench/results-quick.md, README untouched")
    ap.add_argument("--only", metavar="NAME[,NAME]", help="run only these workloads (the peaks are always measured)")
    ap.add_argument("--build", metavar="DIR", default=str(HERE / "build-bench"), help="build directory (tokdyn, tokdyn_bench)")
    ap.add_argument("--out", metavar="FILE", help="results file (default bench/results.md; bench/results-quick.md with --quick; "
                                                  "bench/results-subset.md with --only)")
    ap.add_argument("--no-readme", action="store_true", help="do not update README.md's generated Speed table")
    ap.add_argument("--readme", action="store_true", help="update README.md even with --quick or --only")
    ap.add_argument("--idle-wait", metavar="SECONDS", type=float,
                    help="longest wait for an idle machine before each measurement (default: $BENCH_IDLE_WAIT, "
                         "else 300 s, 10 s with --quick)")
    ap.add_argument("--keep", action="store_true", help="keep the work directory (raw outputs) under /tmp")
    ap.add_argument("--openblas-coretype", metavar="NAME",
                    help="export OPENBLAS_CORETYPE=NAME to every command (peaks, tokdyn, peers), e.g. when OpenBLAS "
                         "does not recognise the CPU and falls back to its generic Prescott kernels")
    ap.add_argument("--before", metavar="REF",
                    help="also time the same tokdyn commands with the build of git commit REF (bench_all.sh builds it in "
                         "BUILD-before), one run each, with the same OpenBLAS kernels: a before/after column from this run")
    ap.add_argument("--before-tokdyn", metavar="PATH", help=argparse.SUPPRESS)  # bench_all.sh: the REF build's tokdyn
    ap.add_argument("--check-args", action="store_true", help=argparse.SUPPRESS)  # used by bench_all.sh
    a = ap.parse_args(argv)
    if a.only is not None:
        names = []
        for n in a.only.split(","):
            n = ALIASES.get(n.strip(), n.strip())
            if n not in WORKLOADS:
                ap.error(f"--only: unknown workload '{n}' (known: {', '.join(WORKLOADS)})")
            names.append(n)
        a.only = names
    if a.readme and a.no_readme:
        ap.error("--readme and --no-readme exclude each other")
    if a.idle_wait is not None and (a.idle_wait < 0 or not math.isfinite(a.idle_wait)):
        ap.error("--idle-wait: expected seconds >= 0")
    return a


RUNNERS = {"mamba2-fig1": w_mamba2, "ssm-random-silu": w_ssm, "cocycle-spectra": w_cocycle, "rope-table2": w_rope,
           "green": w_green, "continuation": w_continuation, "depth-spectra": w_depth_spectra, "gpt2-depth": w_gpt2, "sweep": w_sweep}


# ---------------------------------------------------------------------------------------------

def main(argv):
    a = parse_args(argv)
    if a.check_args:  # bench_all.sh: the options are valid; print the workloads selected
        print(" ".join(w for w in WORKLOADS if a.only is None or w in a.only))
        return 0
    mode = "quick" if a.quick else "full"
    selected = [w for w in WORKLOADS if a.only is None or w in a.only]
    # A full subset run does not overwrite the full results: bench/results-subset.md.
    default = "results-quick.md" if a.quick else ("results.md" if a.only is None else "results-subset.md")
    out = Path(a.out) if a.out else HERE / "bench" / default
    build = Path(a.build).resolve()
    for exe in ("tokdyn", "tokdyn_bench"):
        if not os.access(build / exe, os.X_OK):
            sys.stderr.write(f"bench_all: {build / exe} missing: build it (scripts/bench_all.sh builds it)\n")
            return 1
    if not os.access("/usr/bin/time", os.X_OK):
        sys.stderr.write("bench_all: /usr/bin/time (GNU time) missing: scripts/bench_all.sh installs it\n")
        return 1
    if a.openblas_coretype:
        os.environ["OPENBLAS_CORETYPE"] = a.openblas_coretype
    work = Path(tempfile.mkdtemp(prefix="tokdyn-bench-all."))
    B = Bench(a, mode, work)
    B.before_commit = None
    if a.before:
        if not a.before_tokdyn or not os.access(a.before_tokdyn, os.X_OK):
            sys.stderr.write("bench_all: --before needs REF's build: run scripts/bench_all.sh, which builds it\n")
            return 1
        r = subprocess.run(["git", "-C", str(HERE), "rev-parse", "--short", f"{a.before}^{{commit}}"], stdout=subprocess.PIPE,
                           stderr=subprocess.DEVNULL, text=True)
        B.before_commit = r.stdout.strip() or "?"
    started = time.monotonic()
    try:
        info = machine_info(build)
        B.log(f"{mode} run of {', '.join(selected)}; work directory {work}")
        peaks, peak_rows, ctx, peak_reps = measure_peaks(B)
        B.blas_core = ctx.get("openblas_corename", "?")
        rows, scaling = [], []
        for w in selected:
            B.log(f"== {w}")
            t0 = time.monotonic()
            try:
                r, s = RUNNERS[w](B)
                rows += r
                scaling += s
            except Exception as e:  # noqa: BLE001 -- one workload's failure must not lose the others' results
                msg = f"{type(e).__name__}: {e}" if not isinstance(e, BenchError) else str(e)
                if not isinstance(e, BenchError):
                    traceback.print_exc()
                B.failures.append((w, msg))
                row = new_row(w, w, {"mamba2-fig1": "mamba2-fig1", "ssm-random-silu": "ssm-random-silu",
                                     "cocycle-spectra": "cocycle-256", "rope-table2": "rope-table2"}.get(w, w))
                row["error"] = f"failed: {msg}"
                rows.append(row)
                B.log(f"{w} failed: {msg}")
            B.log(f"{w} took {time.monotonic() - t0:.0f} s")
        total = time.monotonic() - started
        md = render(B, info, peaks, peak_rows, ctx, peak_reps, rows, scaling, selected, started, total)
        out.parent.mkdir(parents=True, exist_ok=True)
        out.write_text(md)
        B.log(f"wrote {out} ({total / 60:.1f} min)")
        do_readme = a.readme or (mode == "full" and a.only is None and not a.no_readme)
        if do_readme:
            try:
                rel = os.path.relpath(out, HERE)
            except ValueError:
                rel = str(out)
            update_readme(readme_block(B, info, peaks, rows, rel))
            B.log(f"updated the generated table in {HERE / 'README.md'}")
        print(md)
    finally:
        if a.keep:
            B.log(f"kept {work}")
        else:
            shutil.rmtree(work, ignore_errors=True)
    if B.failures or B.disagree:
        for w, msg in B.failures:
            sys.stderr.write(f"bench_all: {w} failed: {msg}\n")
        for w, msg in B.disagree:
            sys.stderr.write(f"bench_all: {w}: results disagree: {msg}\n")
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
