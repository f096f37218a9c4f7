#!/usr/bin/env bash
# Benchmark of the preset rope-table2 (Table 2 of the RoPE paper) on this machine, against a
# straightforward NumPy/SciPy implementation of its 12 resonant rate fits
# (python/scipy_rope_rate_fits.py), plus the attention-field micro-benchmarks (bench/bench_rope.cpp)
# against the machine's 2-thread OpenBLAS DGEMM peak, all in one run. Writes
# bench/results-rope-table2.md (and prints it).
#
# Usage: scripts/bench_rope.sh [BUILD_DIR]     (default BUILD_DIR: build-bench)
# Environment knobs (defaults in brackets):
#   BENCH_THREADS [2]        threads for tokdyn (--threads), SciPy's OpenBLAS and the DGEMM peak
#                            (BM_AttentionField fixes its own: 2, plus one 1-thread row)
#   BENCH_REPS [3]           tokdyn run rope-table2 runs; the best (smallest) wall time is reported
#   BENCH_SCIPY_REPS [3]     SciPy runs; the best (smallest) time of the 12 fits is reported
#   BENCH_MICRO [1]          0: skip (c), the attention-field micro-benchmarks and the DGEMM peak
#   BENCH_MICRO_REPS [3]     repetitions of every micro-benchmark (interleaved in random order); best
#   BENCH_IDLE_WAIT [300]    seconds to wait, before each measurement, for the machine to be idle
#   BENCH_KEEP               set: keep the raw outputs (work directory under /tmp)
#   BENCH_OUT [bench/results-rope-table2.md]
# The machine has 2 cores: run it on an otherwise idle machine; the load seen before each
# measurement and the share of the machine other processes used during it are in the results file.
set -euo pipefail
here=$(cd "$(dirname "$0")/.." && pwd)
build=${1:-$here/build-bench}
threads=${BENCH_THREADS:-2}
reps=${BENCH_REPS:-3}
sc_reps=${BENCH_SCIPY_REPS:-3}
micro=${BENCH_MICRO:-1}
micro_reps=${BENCH_MICRO_REPS:-3}
out_md=${BENCH_OUT:-$here/bench/results-rope-table2.md}
py=/usr/bin/python3  # Debian's, with numpy and scipy (not whatever python3 is first on PATH)
bench_name=bench_rope

work=$(mktemp -d /tmp/tokdyn-bench-rope.XXXXXX)
[ -n "${BENCH_KEEP:-}" ] || trap 'rm -rf "$work"' EXIT

# log, cpu_jiffies, wait_idle (appends to $work/load_log.txt), measured (appends to
# $work/other_load.txt), ensure_gnu_time.
# shellcheck source=scripts/bench_lib.sh
source "$here/scripts/bench_lib.sh"

ensure_gnu_time
"$py" -c "import numpy, scipy" 2>/dev/null ||
  { echo "bench_rope: $py (Debian's python3 with numpy and scipy) is missing or incomplete: run scripts/setup.sh" >&2; exit 1; }

if [ ! -f "$build/build.ninja" ]; then
  log "configuring (Release, Ninja) in $build"
  cmake -S "$here" -B "$build" -G Ninja -DCMAKE_BUILD_TYPE=Release -DTOKDYN_BENCH=ON >/dev/null
fi
log "building tokdyn and tokdyn_bench in $build"
cmake --build "$build" -j 2 --target tokdyn tokdyn_bench >/dev/null

uptime >"$work/load_before.txt"
log "load before: $(cat "$work/load_before.txt")"

# (a) tokdyn run rope-table2, best of $reps, with peak RSS and the per-part times (manifest.json,
# notes.part_times_s).
for i in $(seq 1 "$reps"); do
  log "(a) tokdyn run rope-table2 --threads $threads (run $i of $reps)"
  wait_idle "tokdyn$i"
  measured "tokdyn$i" "$work/time$i.txt" "$build/tokdyn" run rope-table2 --out "$work/run$i" \
    --threads "$threads" --no-figures --quiet >"$work/run$i.log"
  for f in manifest.json rate_fits.csv; do cp "$work/run$i/$f" "$work/${f%.*}$i.${f##*.}"; done
  rm -rf "$work/run$i"
done

# (b) The 12 resonant rate fits in NumPy/SciPy (BLAS threads = $threads; OPENBLAS_CORETYPE /
# OPENBLAS_L2_SIZE unset for this command only, as scripts/bench.sh does).
for i in $(seq 1 "$sc_reps"); do
  log "(b) SciPy rate fits (run $i of $sc_reps)"
  wait_idle "scipy$i"
  measured "scipy$i" "$work/sc_time$i.txt" env -u OPENBLAS_CORETYPE -u OPENBLAS_L2_SIZE \
    OPENBLAS_NUM_THREADS="$threads" OMP_NUM_THREADS="$threads" \
    "$py" "$here/python/scipy_rope_rate_fits.py" >"$work/scipy$i.json"
done

# (c) Attention-field micro-benchmarks (bench/bench_rope.cpp) and the DGEMM peak (n = 4096), each
# $micro_reps repetitions interleaved in random order; the best is taken.
att=0
if [ "$micro" = 1 ]; then
  listed=$("$build/tokdyn_bench" --benchmark_list_tests --benchmark_filter='BM_AttentionField' || true)
  if [ -n "$listed" ]; then
    att=1
    log "(c) DGEMM peak (n = 4096, $threads threads)"
    wait_idle dgemm
    measured dgemm "$work/dgemm_time.txt" "$build/tokdyn_bench" --benchmark_filter="^BM_Dgemm/n:4096/threads:$threads/" --benchmark_min_time=2 \
      --benchmark_repetitions="$micro_reps" --benchmark_enable_random_interleaving=true \
      --benchmark_out="$work/dgemm.json" --benchmark_out_format=json >"$work/dgemm.txt"
    log "(c) BM_AttentionField"
    wait_idle attention
    measured attention "$work/att_time.txt" "$build/tokdyn_bench" --benchmark_filter='BM_AttentionField' \
      --benchmark_repetitions="$micro_reps" --benchmark_enable_random_interleaving=true \
      --benchmark_out="$work/att.json" --benchmark_out_format=json >"$work/att.txt"
  else
    log "(c) BM_AttentionField is not in $build/tokdyn_bench (bench/bench_rope.cpp missing?): skipped"
  fi
fi
uptime >"$work/load_after.txt"

"$py" - "$work" "$out_md" "$threads" "$reps" "$sc_reps" "$micro" "$att" "$micro_reps" <<'EOF'
import csv, datetime, json, math, os, re, subprocess, sys
work, out_md = sys.argv[1:3]
threads, reps, sc_reps, micro, att, micro_reps = map(int, sys.argv[3:])

def gnu_time(path):
    t = open(path).read()
    rss = int(re.search(r"Maximum resident set size \(kbytes\): (\d+)", t).group(1))
    el = re.search(r"Elapsed \(wall clock\) time \(h:mm:ss or m:ss\): (\S+)", t).group(1).split(":")
    secs = sum(float(x) * 60 ** (len(el) - 1 - i) for i, x in enumerate(el))
    user = float(re.search(r"User time \(seconds\): (\S+)", t).group(1))
    sysm = float(re.search(r"System time \(seconds\): (\S+)", t).group(1))
    return secs, rss, user + sysm

def best_by_name(path):
    """Best (smallest real time) repetition of every benchmark: {name: run}, context."""
    if not os.path.exists(path):
        return {}, {}
    j = json.load(open(path))
    best = {}
    for b in j["benchmarks"]:
        if b.get("run_type") != "iteration":
            continue
        n = b["run_name"].replace("/real_time", "")
        if n not in best or b["real_time"] < best[n]["real_time"]:
            best[n] = b
    return best, j["context"]

# Share of the machine (cores) that other processes used during each measured command.
other = {}
for line in open(f"{work}/other_load.txt"):
    label, a1, b1, t0, t1, tck = line.split()
    other[label] = (float(b1) - float(a1)) / float(tck), float(t1) - float(t0)
def other_cores(label, own_cpu):
    busy, el = other[label]
    return max(busy - own_cpu, 0.0) / el

to_s = {"ns": 1e-9, "us": 1e-6, "ms": 1e-3, "s": 1.0}
secs_of = lambda b: b["real_time"] * to_s[b["time_unit"]]
def fmt_t(s):
    return "%.1f us" % (s * 1e6) if s < 1e-3 else ("%.2f ms" % (s * 1e3) if s < 1 else "%.2f s" % s)

# (a) tokdyn.
td = []
for i in range(1, reps + 1):
    secs, rss, cpu = gnu_time(f"{work}/time{i}.txt")
    man = json.load(open(f"{work}/manifest{i}.json"))
    parts = [(r["part"], float(r["seconds"])) for r in man["notes"]["part_times_s"]]
    td.append({"i": i, "elapsed": secs, "rss_kb": rss, "cpu": cpu, "manifest": man, "parts": parts,
               "other": other_cores(f"tokdyn{i}", cpu)})
tb = min(td, key=lambda r: r["elapsed"])
t_tok = tb["elapsed"]
FITS = "resonant rate fits (12)"
part_names = [p for p, _ in tb["parts"]]
part_min = {p: min(dict(r["parts"])[p] for r in td) for p in part_names}
t_fits = part_min[FITS]
tok_fits = {(int(r["n"]), int(r["m"]), float(r["beta"])): r for r in csv.DictReader(open(f"{work}/rate_fits{tb['i']}.csv"))}

# (b) SciPy.
sc = []
for i in range(1, sc_reps + 1):
    j = json.load(open(f"{work}/scipy{i}.json"))
    secs, rss, cpu = gnu_time(f"{work}/sc_time{i}.txt")
    j["_elapsed"], j["_rss"], j["_other"] = secs, rss, other_cores(f"scipy{i}", cpu)
    sc.append(j)
sb = min(sc, key=lambda j: j["seconds"])
t_sc = sb["seconds"]

def lscpu(key):
    r = subprocess.run(["lscpu"], capture_output=True, text=True).stdout
    m = re.search(r"^%s:\s*(.+)$" % re.escape(key), r, re.M)
    return m.group(1).strip() if m else "?"

L = []
P = L.append
P("# Benchmark: `rope-table2` (Table 2 of the RoPE paper) and the attention field")
P("")
P("Written by `scripts/bench_rope.sh` (Release build) on %s, tokdyn `%s`. "
  "`tokdyn run rope-table2 --threads %d --no-figures` against a straightforward NumPy/SciPy implementation of its 12 "
  "resonant rate fits (`python/scipy_rope_rate_fits.py`: vectorised right-hand side, `solve_ivp(DOP853, rtol 1e-10, "
  "atol 1e-12)`, `numpy.linalg.eigh`); attention-field micro-benchmarks from `bench/bench_rope.cpp`." % (
      datetime.datetime.now().astimezone().strftime("%Y-%m-%d %H:%M %Z"), tb["manifest"].get("version", "?"), threads))
P("")
P("Machine: %s, %d cores (%s threads per core); load before: `%s`; after: `%s`." % (
    lscpu("Model name"), os.cpu_count(), lscpu("Thread(s) per core"),
    open(f"{work}/load_before.txt").read().strip(), open(f"{work}/load_after.txt").read().strip()))
P("")
P("Machine load seen before each measurement (each waits up to BENCH_IDLE_WAIT s for < 10 % busy):")
P("")
for line in open(f"{work}/load_log.txt"):
    P("- " + line.strip())
P("")
loads = {"tokdyn (best run)": tb["other"], "SciPy (best run)": sb["_other"]}
for lab, f, tf in (("DGEMM peak", "dgemm", "dgemm_time.txt"), ("BM_AttentionField", "attention", "att_time.txt")):
    if f in other and os.path.exists(f"{work}/{tf}"):
        loads[lab] = other_cores(f, gnu_time(f"{work}/{tf}")[2])
P("Other processes' load during the measurements (cores, of %d): %s." % (
    os.cpu_count(), ", ".join("%s %.2f" % kv for kv in loads.items())))
if max(loads.values()) > 0.2:
    P("")
    P("**Warning: other processes used more than 0.2 cores during some measurements; their times (above all the "
      "2-thread micro-benchmarks) are not representative of an idle machine. Rerun on an idle machine.**")
P("")
P("## rope-table2 and the SciPy rate fits")
P("")
P("| | value |")
P("| --- | --- |")
P("| tokdyn `run rope-table2` wall time (GNU time; best of %d; all: %s s) | **%.2f s** |" % (
    reps, ", ".join("%.2f" % r["elapsed"] for r in td), t_tok))
P("| other processes' load during the best tokdyn run (all runs) | %.2f cores (%s) |" % (
    tb["other"], ", ".join("%.2f" % r["other"] for r in td)))
P("| peak RSS (GNU time; all runs) | %.0f MiB (%s) |" % (
    tb["rss_kb"] / 1024, ", ".join("%.0f" % (r["rss_kb"] / 1024) for r in td)))
P("| CPU time (user + sys) of the best run | %.2f s (%.2f cores busy on average) |" % (tb["cpu"], tb["cpu"] / t_tok))
P("| tokdyn part \"%s\" (manifest notes.part_times_s, best of %d) | **%.3f s** |" % (FITS, reps, t_fits))
P("| SciPy, the same 12 fits (in-script wall time, best of %d; all: %s s) | **%.3f s** |" % (
    sc_reps, ", ".join("%.3f" % j["seconds"] for j in sc), t_sc))
P("| SciPy process wall time incl. interpreter start and imports (best run) | %.2f s, peak RSS %.0f MiB |" % (
    sb["_elapsed"], sb["_rss"] / 1024))
P("| other processes' load during the best SciPy run | %.2f cores |" % sb["_other"])
P("| **SciPy fits / tokdyn rate-fit part** | **%.2fx** (>1: tokdyn faster) |" % (t_sc / t_fits))
P("| SciPy fits / whole tokdyn rope-table2 run | %.3fx |" % (t_sc / t_tok))
P("")
P("Per-part times of tokdyn (`manifest.json` notes.part_times_s, steady clock inside the run; best run, and the minimum per part over all runs):")
P("")
P("| part | best run (s) | min over runs (s) | share of the best run's wall time |")
P("| --- | --- | --- | --- |")
for p, s in tb["parts"]:
    P("| %s | %.3f | %.3f | %.0f %% |" % (p, s, part_min[p], 100 * s / t_tok))
rest = t_tok - sum(s for _, s in tb["parts"])
P("| (outside the parts: start-up, output files) | %.3f | | %.0f %% |" % (rest, 100 * rest / t_tok))
P("")
P("Agreement of the 12 fits (tokdyn: Boost.Odeint Fehlberg 7(8) rtol 1e-10 atol 1e-12; SciPy: DOP853 with the same "
  "tolerances; the integrators differ, so gamma_fit agrees only to the integration error, which atol 1e-12 on a "
  "1e-4 ... 2e-6 amplitude makes ~1e-7 relative; where lambda_2 is double the two eigensolvers may also pick different "
  "slow vectors):")
P("")
P("| n | m | beta | gamma (tokdyn) | abs. diff SciPy | gamma_fit tokdyn | gamma_fit SciPy | rel. diff | rel_error tokdyn | rel_error SciPy |")
P("| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |")
dg = dfit = 0.0
for f in sb["fits"]:
    t = tok_fits.get((f["n"], f["m"], float(f["beta"])))
    if t is None:
        P("| %d | %d | %g | (missing in rate_fits.csv) | | | %.10f | | | %.2e |" % (f["n"], f["m"], f["beta"], f["gamma_fit"], f["rel_error"]))
        continue
    g, gf = float(t["gamma"]), float(t["gamma_fit"])
    a, b = abs(f["gamma"] - g), abs(f["gamma_fit"] - gf) / g
    dg, dfit = max(dg, a), max(dfit, b)
    P("| %d | %d | %g | %.12f | %.1e | %.10f | %.10f | %.1e | %.2e | %.2e |" % (
        f["n"], f["m"], f["beta"], g, a, gf, f["gamma_fit"], b, float(t["rel_error"]), f["rel_error"]))
P("")
P("Max |gamma_SciPy - gamma_tokdyn| = %.1e (%s 1e-10); max |gamma_fit_SciPy - gamma_fit_tokdyn| / gamma = %.1e (%s 1e-6); "
  "max relative rate error: tokdyn %.2e, SciPy %.2e (paper 1.059e-07)." % (
      dg, "within" if dg <= 1e-10 else "OUTSIDE", dfit, "within" if dfit <= 1e-6 else "OUTSIDE",
      max(float(t["rel_error"]) for t in tok_fits.values()), sb["max_rel_error"]))
P("")
P("Integrators: tokdyn's rate fits use Boost.Odeint's Bulirsch-Stoer with dense output (the 360 outputs are "
  "interpolated, as SciPy's DOP853 interpolates them); before that change, Fehlberg 7(8) without dense output had to "
  "land on every output time and the part took 2.25 s. The remaining cost is per right-hand-side evaluation "
  "(O(n^2) sin/exp each); SciPy's evaluation counts are below.")
P("")
P("SciPy: numpy %s, scipy %s, Python %s, OPENBLAS_NUM_THREADS=%d (OPENBLAS_CORETYPE and OPENBLAS_L2_SIZE unset); "
  "right-hand-side evaluations per fit: %s." % (
      sb.get("numpy", "?"), sb.get("scipy", "?"),
      subprocess.run(["/usr/bin/python3", "-c", "import sys; print(sys.version.split()[0])"], capture_output=True, text=True).stdout.strip(),
      threads, ", ".join(str(f.get("nfev", "?")) for f in sb["fits"])))
P("")

P("## Attention field (`BM_AttentionField`, one evaluation of the flow (5), one run of n tokens in d dimensions)")
P("")
if not micro:
    P("Skipped (BENCH_MICRO=0).")
elif not att:
    P("Skipped: `BM_AttentionField` is not in this build's `tokdyn_bench` (bench/bench_rope.cpp not there yet).")
else:
    dg_b, ctx = best_by_name(f"{work}/dgemm.json")
    dk = f"BM_Dgemm/n:4096/threads:{threads}"
    peak = dg_b[dk]["FLOPS"] / 1e9 if dk in dg_b else float("nan")
    ab, _ = best_by_name(f"{work}/att.json")
    rows = []
    for k, b in ab.items():
        m = re.match(r"BM_AttentionField/n:(\d+)/d:(\d+)/threads:(\d+)", k)
        if m:
            rows.append((int(m.group(3)), int(m.group(1)), int(m.group(2)), b))
    rows.sort(key=lambda r: (-r[0], r[2], r[1]))
    P("Best of %d repetitions (interleaved in random order), wall time. GFLOP/s is nominal, by bench_rope.cpp's count "
      "4 n^2 d + 5 n^2 + 7 n d per evaluation (the symmetric scores are formed on the block upper triangle only, so the "
      "executed work at large n is about 3 n^2 d). DGEMM peak: `BM_Dgemm/n:4096/threads:%d` (OpenBLAS `%s`, counter "
      "FLOPS, best of %d) = **%.1f GFLOP/s**." % (micro_reps, threads, ctx.get("openblas_config", "?"), micro_reps, peak))
    P("")
    P("| threads | n | d | time | GFLOP/s | of DGEMM peak | time / (n^2 d) | time / (n^2 d) relative to n = %d, d = 512 |" % max(r[1] for r in rows))
    P("| --- | --- | --- | --- | --- | --- | --- | --- |")
    ref = next((secs_of(b) / (n * n * d) for t, n, d, b in rows if t == 2 and n == max(r[1] for r in rows) and d == 512), float("nan"))
    t2 = {}
    for t, n, d, b in rows:
        s = secs_of(b)
        if t == 2:
            t2[(n, d)] = s
        P("| %d | %d | %d | %s | %.2f | %.1f %% | %.3f ns | %.2f |" % (
            t, n, d, fmt_t(s), b["GFLOP/s"], 100 * b["GFLOP/s"] / peak, 1e9 * s / (n * n * d), s / (n * n * d) / ref))
    P("")
    ns = sorted({n for n, _ in t2}); ds = sorted({d for _, d in t2})
    P("Growth exponents (2 threads): log(time ratio) / log(size ratio) between neighbouring sizes; O(n^2 d) means 2 in n "
      "and 1 in d once the products dominate (at d = 2 the softmax's 5 n^2 and the fixed costs dominate instead):")
    P("")
    P("| d | " + " | ".join("n %d -> %d" % (a, b) for a, b in zip(ns, ns[1:])) + " |")
    P("| --- |" + " --- |" * (len(ns) - 1))
    for d in ds:
        P("| %d | " % d + " | ".join("%.2f" % (math.log(t2[(b, d)] / t2[(a, d)]) / math.log(b / a)) if (a, d) in t2 and (b, d) in t2 else ""
                                     for a, b in zip(ns, ns[1:])) + " |")
    P("")
    P("| n | " + " | ".join("d %d -> %d" % (a, b) for a, b in zip(ds, ds[1:])) + " |")
    P("| --- |" + " --- |" * (len(ds) - 1))
    for n in ns:
        P("| %d | " % n + " | ".join("%.2f" % (math.log(t2[(n, b)] / t2[(n, a)]) / math.log(b / a)) if (n, a) in t2 and (n, b) in t2 else ""
                                     for a, b in zip(ds, ds[1:])) + " |")
    one = [r for r in rows if r[0] == 1]
    for t, n, d, b in one:
        if (n, d) in t2:
            P("")
            P("2-thread speed-up at n = %d, d = %d: %.2fx." % (n, d, secs_of(b) / t2[(n, d)]))
P("")
open(out_md, "w").write("\n".join(L))
print("\n".join(L))
EOF
log "wrote $out_md"
