"""bench_all's workloads on the models: mamba2-fig1, ssm-random-silu, depth-spectra, gpt2-depth and
the sweep overhead. Each returns (rows, scaling entries); a scaling entry is a dict with workload,
parameter, sizes, times, what, expected (text), flop_model (list of flops per size or None)."""
import csv
import json
import re

import numpy as np

from . import agreement
from .config import HERE, PY, THREADS
from .flops import depth_spectra_flops, gpt2_flops, gpt2_tangent_flops, mamba2_flops, mamba2_shapes, ssm_flops
from .measure import BenchError, add_peer, best, fmt_s, load, new_row, phase_seconds


def read_metrics_final(path, layer):
    out = {}
    with open(path) as f:
        rd = csv.reader(f)
        head = next(rd)
        il, i1, ip = head.index("layer"), head.index("lambda1_mean"), head.index("pr_mean")
        for r in rd:
            if int(r[il]) == layer:
                out[r[0]] = (float(r[i1]), float(r[ip]))
    return out


def w_mamba2(B):
    P = B.S["mamba2-fig1"]
    runs, tokens, depth = P["runs"], P["tokens"], P["depth"]
    ck = B.checkpoint()
    sh = mamba2_shapes(ck)
    ids = B.work / "ids.npy"
    np.save(ids, np.random.default_rng(0).integers(0, sh["vocab"], size=(runs, tokens)).astype(np.int64))

    def run(dep, label):
        return B.tokdyn_run(label, "mamba2-fig1", [("checkpoint", ck), ("token_ids", ids), ("runs", runs), ("tokens", tokens),
                                                   ("depth", dep)], THREADS, B.work / f"m2-{dep}-{label[-1]}")

    td = [run(depth, f"mamba2-fig1 tokdyn depth {depth} #{i}") for i in range(1, B.S["reps"] + 1)]
    tb = best(td, key=lambda r: r["elapsed"])
    row = new_row("mamba2-fig1", f"mamba2-fig1 (130m, runs {runs}, tokens {tokens}, depth {depth}, gate + no_gate)", "mamba2-fig1")
    row["command"] = (f"tokdyn run mamba2-fig1 --set checkpoint=CK --set token_ids=IDS --set runs={runs} --set tokens={tokens} "
                      f"--set depth={depth} --threads {THREADS} --no-figures")
    row.update(time=tb["elapsed"], time_what=f"wall, best of {len(td)}", gflop=mamba2_flops(sh, runs, tokens, depth) / 1e9,
               peak=("sgemm", THREADS), rss_tok=tb["rss_kb"], threads=THREADS)
    row["phases"], row["phase_src"] = phase_seconds(tb["manifest"])
    load(row, "tokdyn", tb)
    B.before_run(row, "mamba2-fig1 tokdyn", "mamba2-fig1", [("checkpoint", ck), ("token_ids", ids), ("runs", runs), ("tokens", tokens),
                                                          ("depth", depth)], THREADS, B.work / "m2-before", lambda man: None, "wall")
    checks = []
    for name, script, pdepth, extra in (("NumPy", "python/numpy_mamba2_fig1.py", P["np_depth"], []),
                                        ("PyTorch", "python/torch_mamba2_fig1.py", P["th_depth"], ["--threads", THREADS])):
        pdepth = min(pdepth, depth)
        pr = [B.peer_run(f"mamba2-fig1 {name} depth {pdepth} #{i}",
                         [HERE / script, "--checkpoint", ck, "--runs", runs, "--tokens", tokens, "--depth", pdepth, "--seed", 0, *extra],
                         THREADS) for i in range(1, B.S["peer_reps"] + 1)]
        pb = best(pr, key=lambda r: r["elapsed"])
        scale = depth / pdepth
        note = "" if pdepth == depth else f"measured at depth {pdepth}: {fmt_s(pb['elapsed'])}, scaled x{scale:g} (incl. loading)"
        add_peer(row, f"{name} ({THREADS} thr.)", pb["elapsed"] * scale, pb["rss_kb"], note)
        load(row, name, pb)
        tok = read_metrics_final(tb["out"] / "metrics.csv", pdepth)
        # Bounds from float32 round-off through pdepth layers (agreement.mamba2_token_error, gram_metric_bounds).
        eps_tokens = agreement.mamba2_token_error(sh, tokens, pdepth)
        worst_l = worst_p = 0.0
        bound_l = bound_p = 0.0
        for v in ("gate", "no_gate"):
            tl, tp = tok.get(v, (float("nan"), float("nan")))
            worst_l = max(worst_l, abs(pb["json"]["lambda1_final"][v] - tl))
            worst_p = max(worst_p, abs(pb["json"]["pr_final"][v] - tp) / abs(tp))
            bl, bp = agreement.gram_metric_bounds(eps_tokens, tl)
            bound_l, bound_p = max(bound_l, bl), max(bound_p, bp)
        ok = worst_l <= bound_l and worst_p <= bound_p
        checks.append(f"{name} at layer {pdepth}: d(lambda1) {worst_l:.1e} (bound {bound_l:.1e}), d(r)/r {worst_p:.1e} "
                      f"(bound {bound_p:.1e}) {'ok' if ok else 'DIFFER'}")
        if not ok:
            B.disagree.append(("mamba2-fig1", checks[-1]))
    row["check"] = "; ".join(checks)
    row["notes"].append(f"checkpoint: `tokdyn make-checkpoint --size 130m --seed 0` took {fmt_s(B.ck_time['elapsed'])}")

    # Growth with depth (runs, tokens fixed): the same ids.
    times = []
    for dep in P["scale"]:
        times.append(tb["elapsed"] if dep == depth else run(dep, f"mamba2-fig1 scaling depth {dep} #1")["elapsed"])
    sc = dict(workload="mamba2-fig1", parameter="depth", sizes=P["scale"], times=times, what="wall, incl. loading the checkpoint",
              expected="1 (work per layer fixed; the fixed cost of loading the checkpoint lowers the fitted slope)",
              flop_model=[mamba2_flops(sh, runs, tokens, s) for s in P["scale"]])
    return [row], [sc]


def w_ssm(B):
    P = B.S["ssm-random-silu"]
    runs, depth, n, m, ell = P["runs"], P["depth"], P["n"], P["m"], 50

    def run(nn, label):
        return B.tokdyn_run(label, "ssm-random-silu", [("runs", runs), ("depth", depth), ("tokens", ell), ("n", nn), ("m", m)],
                            THREADS, B.work / f"ssm-{nn}-{label[-1]}")

    td = [run(n, f"ssm-random-silu tokdyn n {n} #{i}") for i in range(1, B.S["reps"] + 1)]
    tb = best(td, key=lambda r: r["elapsed"])
    row = new_row("ssm-random-silu", f"ssm-random-silu (runs {runs}, depth {depth}, n {n}, m {m}, both variants, diagnostics on)",
                  "ssm-random-silu")
    row["command"] = f"tokdyn run ssm-random-silu --set runs={runs} --set depth={depth} --threads {THREADS} --no-figures"
    row.update(time=tb["elapsed"], time_what=f"wall, best of {len(td)}", gflop=ssm_flops(runs, depth, ell, n, m) / 1e9,
               peak=("dgemm", THREADS), rss_tok=tb["rss_kb"], threads=THREADS)
    row["phases"], row["phase_src"] = phase_seconds(tb["manifest"])
    np_depth = min(P["np_depth"], depth)
    pr = [B.peer_run(f"ssm-random-silu NumPy depth {np_depth} #{i}",
                     [HERE / "python/numpy_ssm_random_silu.py", "--runs", runs, "--depth", np_depth, "--tokens", ell, "--n", n,
                      "--m", m, "--variants", "both"], THREADS) for i in range(1, B.S["peer_reps"] + 1)]
    pb = best(pr, key=lambda r: r["elapsed"])
    scale = depth / np_depth
    add_peer(row, f"NumPy ({THREADS} thr.)", pb["elapsed"] * scale, pb["rss_kb"],
             "" if np_depth == depth else f"measured at depth {np_depth}: {fmt_s(pb['elapsed'])}, scaled x{scale:g}")
    load(row, "tokdyn", tb)
    load(row, "NumPy", pb)
    B.before_run(row, "ssm-random-silu tokdyn", "ssm-random-silu", [("runs", runs), ("depth", depth), ("tokens", ell), ("n", n), ("m", m)],
                 THREADS, B.work / "ssm-before", lambda man: None, "wall")
    row["check"] = "n/a (NumPy draws other random bits; same distributions)"
    row["notes"].append("NumPy does not compute the Assumption III.1 diagnostics that tokdyn's default run does")
    times = [tb["elapsed"] if s == n else run(s, f"ssm-random-silu scaling n {s} #1")["elapsed"] for s in P["scale"]]
    sc = dict(workload="ssm-random-silu", parameter="n (m = 128)", sizes=P["scale"], times=times, what="wall",
              expected="2 from the counted flops' n^2 GEMM (lower: terms linear in n); the uncounted n^3 "
                       "diagnostics eigenvalues push it up",
              flop_model=[ssm_flops(runs, depth, ell, s, m) for s in P["scale"]])
    return [row], [sc]


def w_depth_spectra(B):
    P = B.S["depth-spectra"]
    k, T, depth, burn = P["k"], P["tokens"], P["depth"], P["burn_in"]
    ck = B.checkpoint()
    sh = mamba2_shapes(ck)

    def run(kk, label, i):
        return B.tokdyn_run(label, "depth-spectra", [("model", "mamba2"), ("checkpoint", ck), ("k", kk), ("tokens", T), ("depth", depth),
                                                     ("burn_in", burn), ("seed", 0)], THREADS, B.work / f"ds-{kk}-{i}")
    t_of = lambda r: float(r["manifest"].get("wall_time_s") or r["elapsed"])
    td = [run(k, f"depth-spectra tokdyn k {k} #{i}", i) for i in range(1, B.S["reps"] + 1)]
    tb = best(td, key=t_of)
    row = new_row("depth-spectra", f"depth-spectra (mamba2-130m JVP, k {k}, tokens {T}, depth {depth})", "depth-spectra")
    row["command"] = (f"tokdyn run depth-spectra --set model=mamba2 --set checkpoint=CK --set k={k} --set tokens={T} --set depth={depth} "
                      f"--set burn_in={burn} --threads {THREADS} --no-figures")
    row.update(time=t_of(tb), time_what=f"manifest wall_time_s, best of {len(td)}", gflop=depth_spectra_flops(sh, k, T, depth) / 1e9,
               peak=("dgemm", THREADS), rss_tok=tb["rss_kb"], threads=THREADS)
    row["phases"], row["phase_src"] = phase_seconds(tb["manifest"])
    row["check"] = "n/a (no peer)"
    load(row, "tokdyn", tb)
    B.before_run(row, f"depth-spectra tokdyn k {k}", "depth-spectra", [("model", "mamba2"), ("checkpoint", ck), ("k", k), ("tokens", T),
                                                                       ("depth", depth), ("burn_in", burn), ("seed", 0)], THREADS,
                 B.work / "ds-before", lambda man: float(man["wall_time_s"]), "manifest wall_time_s")
    row["peer_none"] = "none: no Python library computes Lyapunov spectra of a Mamba-2 depth map"
    times = [t_of(tb) if s == k else t_of(run(s, f"depth-spectra scaling k {s} #1", 1)) for s in P["scale"]]
    sc = dict(workload="depth-spectra", parameter=f"k (tokens = {T}, depth = {depth})", sizes=P["scale"], times=times,
              what="manifest wall_time_s, incl. loading the checkpoint",
              expected="about 1 ((1 + k) GEMM passes: the value once, k tangents sharing it; the fixed cost of loading lowers it)",
              flop_model=[depth_spectra_flops(sh, s, T, depth) for s in P["scale"]])
    return [row], [sc]


def w_gpt2(B):
    """GPT-2-small (124M, make-checkpoint) cycled to depth 96 on 50 runs x 64 tokens (transformer-clustering,
    positions on) against a batched PyTorch-CPU forward on the same ids (bench/torch_gpt2_depth.py); the
    depth-spectra tangent step on the same model."""
    P = B.S["gpt2-depth"]
    R, T, depth = P["runs"], P["tokens"], P["depth"]
    ck = B.work / "gpt2-ck"
    if not ck.exists():
        B.measured("make-checkpoint gpt2 124m", [B.tok, "make-checkpoint", "--model", "gpt2", "--size", "124m", "--seed", "0", "--out", ck])
    cfg = json.load(open(ck / "config.json"))
    ids = B.work / "gpt2-ids.npy"
    np.save(ids, np.random.default_rng(0).integers(0, cfg["vocab_size"], size=(R, T)).astype(np.int64))

    def run(dd, label, i):
        return B.tokdyn_run(label, "transformer-clustering", [("model", "gpt2"), ("checkpoint", ck), ("token_ids", ids), ("tokens", T),
                                                              ("depth", dd), ("variants", "on")], THREADS, B.work / f"gpt2-{dd}-{i}")
    t_of = lambda r: float(r["manifest"]["notes"]["phase_seconds"]["positions_on"])  # noqa: E731
    td = [run(depth, f"gpt2 tokdyn #{i}", i) for i in range(1, B.S["reps"] + 1)]
    tb = best(td, key=t_of)
    row = new_row("gpt2-depth", f"GPT-2 124M depth map (12 layers cycled to depth {depth}, {R} runs x {T} tokens, fp32)", "gpt2-depth")
    row["command"] = (f"tokdyn run transformer-clustering --set model=gpt2 --set checkpoint=CK --set token_ids=IDS --set tokens={T} "
                      f"--set depth={depth} --set variants=on --threads {THREADS} --no-figures")
    row.update(time=t_of(tb), time_what=f"notes.phase_seconds.positions_on (the depth loop), best of {len(td)}",
               gflop=gpt2_flops(cfg, R, T, depth) / 1e9, peak=("sgemm", THREADS), rss_tok=tb["rss_kb"], threads=THREADS)
    row["phases"], row["phase_src"] = phase_seconds(tb["manifest"])
    load(row, "tokdyn", tb)
    peer = []
    for i in range(1, B.S["peer_reps"] + 1):
        m = B.measured(f"gpt2 PyTorch #{i}", [PY, HERE / "bench/torch_gpt2_depth.py", ck, ids, depth, THREADS], env=B.peer_env(THREADS))
        peer.append((json.loads(m["stdout"].strip().splitlines()[-1]), m))
    pj, pm = min(peer, key=lambda x: x[0]["seconds"])
    add_peer(row, f"PyTorch {pj['torch']} batched forward ({THREADS} thr.)", pj["seconds"], pm["rss_kb"], note="the depth loop")
    lam = tb["manifest"]["summaries"]["lambda1_final_positions_on"]
    # Bound from float32 round-off through `depth` layers (agreement.gpt2_token_error, gram_metric_bounds).
    bound, _ = agreement.gram_metric_bounds(agreement.gpt2_token_error(cfg, T, depth), lam)
    agree = abs(lam - pj["lambda1_final"]) <= bound
    row["check"] = (f"final lambda_bar_1 {lam:.6f} vs PyTorch {pj['lambda1_final']:.6f}: "
                    f"{'agree' if agree else 'DISAGREE'} within {bound:.1e} (float32 round-off bound)")
    if not agree:
        row["error"] = "tokdyn and PyTorch disagree on the final lambda_bar_1"
    times = [t_of(tb) if s == depth else t_of(run(s, f"gpt2 scaling depth {s}", 1)) for s in P["scale"]]
    sc = dict(workload="gpt2-depth", parameter=f"depth (runs = {R}, tokens = {T})", sizes=P["scale"], times=times,
              what="notes.phase_seconds.positions_on", expected="1 (each layer the same work)",
              flop_model=[gpt2_flops(cfg, R, T, s) for s in P["scale"]])
    # The tangent step of depth-spectra on the same model (double, k tangents sharing the value).
    k, tdep = P["k"], P["tangent_depth"]
    ds = B.tokdyn_run("gpt2 depth-spectra", "depth-spectra", [("model", "gpt2"), ("checkpoint", ck), ("tokens", T), ("depth", tdep), ("k", k),
                                                               ("burn_in", 0)], THREADS, B.work / "gpt2-ds")
    row2 = new_row("gpt2-tangent", f"depth-spectra on GPT-2 124M (k {k}, tokens {T}, depth {tdep}, double)", "gpt2-tangent")
    row2["command"] = f"tokdyn run depth-spectra --set model=gpt2 --set checkpoint=CK --set tokens={T} --set depth={tdep} --set k={k} --set burn_in=0"
    row2.update(time=float(ds["manifest"]["notes"]["phase_seconds"]["spectrum"]), time_what="notes.phase_seconds.spectrum",
                gflop=gpt2_tangent_flops(cfg, k, T, tdep) / 1e9, peak=("dgemm", THREADS), rss_tok=ds["rss_kb"], threads=THREADS)
    row2["phases"], row2["phase_src"] = phase_seconds(ds["manifest"])
    row2["check"] = "n/a (no peer)"
    row2["peer_none"] = "none: no Python library computes Lyapunov spectra of a GPT-2 depth map"
    load(row2, "tokdyn", ds)
    return [row, row2], [sc]


def w_sweep(B):
    row = new_row("sweep", "sweep overhead per point (64 tiny rope-flow points)", "sweep")
    if not B.S["sweep"]["run"]:
        row["error"] = "skipped in --quick (scripts/bench_sweep.sh measures it; bench/results-sweep.md)"
        return [row], []
    out = B.work / "sweep.md"
    m = B.measured("sweep (scripts/bench_sweep.py --quick)", [PY, HERE / "scripts/bench_sweep.py", "--tokdyn", B.tok, "--quick", "--out", out],
                   env=B.peer_env(THREADS))
    modes = {}
    for line in m["stdout"].splitlines():
        mm = re.match(r"tiny\s+(serial|--jobs 2|mpirun -np 2)\s+(\d+) points\s+wall\s+([\d.]+) s.*overhead/point\s+(-?[\d.]+) ms", line)
        if mm:
            modes[mm.group(1)] = (int(mm.group(2)), float(mm.group(3)), float(mm.group(4)))
    if "serial" not in modes:
        raise BenchError("sweep: no 'serial' line in scripts/bench_sweep.py's output")
    row["command"] = "scripts/bench_sweep.py --tokdyn BUILD/tokdyn --quick (serial, --jobs 2, mpirun -np 2)"
    row.update(time=modes["serial"][2] / 1e3, time_what="overhead per point, serial", gflop_na="n/a")
    row["notes"].append("overhead per point: " + ", ".join(f"{k} {v[2]:.1f} ms" for k, v in modes.items()) +
                        "; see scripts/bench_sweep.sh for the >= 1 s points")
    row["check"] = "n/a"
    load(row, "sweep", m)
    row["peer_none"] = "none (tokdyn's own sweep runner)"
    return [row], []
