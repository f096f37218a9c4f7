"""bench_all's numerical workloads: cocycle-spectra (QR), rope-table2 (ODE rate fits), green (banded
BVP) and the rho-continuation. Each returns (rows, scaling entries), as workloads_models."""
import csv
import os
import shutil

import numpy as np

from . import agreement
from .config import HERE, PY, THREADS
from .flops import cocycle_flops, green_flops, rope_flow_flops
from .measure import add_peer, best, fmt_s, load, new_row, phase_seconds


def w_cocycle(B):
    P = B.S["cocycle-spectra"]
    rows, qr_by_d = [], {}
    for d, L in P["main"]:
        gen = B.work / f"gen{d}.npy"
        B.prep([PY, HERE / "python/numpy_cocycle_qr.py", "--write", gen, d, L, 0])
        td, pr = [], []
        for i in range(1, B.S["reps"] + 1):  # interleaved, as bench_cocycle.sh
            td.append(B.tokdyn_run(f"cocycle-spectra tokdyn d {d} #{i}", "cocycle-spectra",
                                   [("generators", gen), ("burn_in", 0), ("bundles", "none"), ("rank", "false"), ("H", L)],
                                   THREADS, B.work / f"coc-{d}-{i}"))
            pr.append(B.peer_run(f"cocycle-spectra NumPy d {d} #{i}", [HERE / "python/numpy_cocycle_qr.py", "--generators", gen], THREADS))
        qr = lambda r: float(r["manifest"]["notes"]["qr_seconds"])
        tb = best(td, key=qr)
        pb = best(pr, key=lambda r: r["json"]["seconds"])
        row = new_row(f"cocycle-{d}", f"cocycle-spectra QR loop (G5-like, d {d}, L {L}, k = d)", f"cocycle-{d}")
        row["command"] = (f"tokdyn run cocycle-spectra --set generators=GEN.npy --set burn_in=0 --set bundles=none --set rank=false "
                          f"--set H={L} --threads {THREADS} --no-figures")
        row.update(time=qr(tb), time_what=f"notes.qr_seconds, best of {len(td)}", gflop=cocycle_flops(d, L) / 1e9,
                   peak=("dgemm", THREADS), rss_tok=tb["rss_kb"], threads=THREADS)
        row["phases"], row["phase_src"] = phase_seconds(tb["manifest"])
        add_peer(row, f"NumPy QR loop ({THREADS} thr.)", pb["json"]["seconds"], pb["rss_kb"])
        load(row, "tokdyn", tb)
        load(row, "NumPy", pb)
        mu_tok = [float(r["mu"]) for r in csv.DictReader(open(tb["out"] / "lyapunov.csv"))]
        mu_np = pb["json"]["mu"]
        diff = max(abs(x - y) for x, y in zip(mu_tok, mu_np)) if len(mu_tok) == len(mu_np) else float("inf")
        # Bound from double round-off in the QR loop and the layers' conditioning (agreement.cocycle_bound).
        kappa = agreement.layer_condition(gen)
        bound = agreement.cocycle_bound(d, kappa)
        row["check"] = (f"max abs(mu_tokdyn - mu_NumPy) = {diff:.1e} ({'ok' if diff <= bound else 'DIFFER'}, bound {bound:.1e} "
                        f"from kappa(B) {kappa:.1f})")
        if not diff <= bound:
            B.disagree.append((row["workload"], row["check"]))
        row["notes"].append(f"tokdyn --threads {THREADS} (manifest threads: {tb['manifest'].get('threads', '?')}); NumPy "
                            f"OPENBLAS_NUM_THREADS={THREADS}; the generators file ({gen.stat().st_size / 1e6:.0f} MB) is read by both, "
                            "only the QR loop is timed")
        B.before_run(row, f"cocycle-spectra tokdyn d {d}", "cocycle-spectra",
                     [("generators", gen), ("burn_in", 0), ("bundles", "none"), ("rank", "false"), ("H", L)], THREADS,
                     B.work / f"coc-{d}-before", lambda man: float(man["notes"]["qr_seconds"]), "notes.qr_seconds")
        rows.append(row)
        qr_by_d[(d, L)] = qr(tb)
        gen.unlink()
    # The default run of the issue: family G5, d = 256, L = 500, everything on (rank as the preset decides).
    d, L = P["default"]
    td = [B.tokdyn_run(f"cocycle-spectra default run #{i}", "cocycle-spectra", [("family", "G5"), ("d", d), ("depth", L)],
                       THREADS, B.work / f"coc-default-{i}") for i in range(1, B.S["reps"] + 1)]
    tb = best(td, key=lambda r: r["elapsed"])
    row = new_row("cocycle-default", f"cocycle-spectra default run (G5, d {d}, L {L})", "cocycle-default")
    row["command"] = f"tokdyn run cocycle-spectra --set family=G5 --set d={d} --set depth={L} --threads {THREADS} --no-figures"
    row.update(time=tb["elapsed"], time_what=f"wall, best of {len(td)}", gflop_na="n/a (QR, rank check, bundles: no single count)",
               rss_tok=tb["rss_kb"], threads=THREADS)
    row["phases"], row["phase_src"] = phase_seconds(tb["manifest"])
    row["check"] = "n/a (no peer)"
    load(row, "tokdyn", tb)
    B.before_run(row, "cocycle-spectra default run", "cocycle-spectra", [("family", "G5"), ("d", d), ("depth", L)], THREADS,
                 B.work / "coc-default-before", lambda man: None, "wall")
    rows.append(row)
    # Growth with d at fixed L (family G5 drawn by tokdyn; the QR loop's own timer).
    Ls = P["scale_L"]
    times = []
    for s in P["scale"]:
        if (s, Ls) in qr_by_d:
            times.append(qr_by_d[(s, Ls)])
        else:
            r = B.tokdyn_run(f"cocycle-spectra scaling d {s} #1", "cocycle-spectra",
                             [("family", "G5"), ("d", s), ("depth", Ls), ("burn_in", 0), ("bundles", "none"), ("rank", "false"), ("H", Ls)],
                             THREADS, B.work / f"coc-scale-{s}")
            times.append(float(r["manifest"]["notes"]["qr_seconds"]))
    sc = dict(workload="cocycle-spectra", parameter=f"d (L = {Ls}, k = d)", sizes=P["scale"], times=times, what="notes.qr_seconds",
              expected="3 (2 d^3 GEMM + 4/3 d^3 QR per layer)", flop_model=[cocycle_flops(s, Ls) for s in P["scale"]])
    return rows, [sc]


def w_rope(B):
    P = B.S["rope-table2"]
    FITS = "resonant rate fits (12)"
    td = [B.tokdyn_run(f"rope-table2 tokdyn #{i}", "rope-table2", [], THREADS, B.work / f"rope-{i}") for i in range(1, B.S["reps"] + 1)]
    tb = best(td, key=lambda r: r["elapsed"])
    reps = max(B.S["reps"], 2) if B.mode == "full" else 1
    pr = [B.peer_run(f"rope-table2 SciPy fits #{i}", [HERE / "python/scipy_rope_rate_fits.py"], THREADS) for i in range(1, reps + 1)]
    pb = best(pr, key=lambda r: r["json"]["seconds"])
    t_sc = pb["json"]["seconds"]
    phases, src = phase_seconds(tb["manifest"])

    def fit_time(r):
        ph, _ = phase_seconds(r["manifest"])
        return ph.get(FITS) if ph else None
    fits = [fit_time(r) for r in td]
    t_fits = min(f for f in fits if f is not None) if any(f is not None for f in fits) else None

    whole = new_row("rope-table2", "rope-table2 (all of Table 2)", "rope-table2")
    whole["command"] = f"tokdyn run rope-table2 --threads {THREADS} --no-figures"
    whole.update(time=tb["elapsed"], time_what=f"wall, best of {len(td)}", gflop_na="n/a (ODE integrations, eigenproblems)",
                 rss_tok=tb["rss_kb"], threads=THREADS, phases=phases, phase_src=src)
    add_peer(whole, "SciPy, the 12 fits only", t_sc, pb["rss_kb"], "the peer covers only the rate fits",
             "SciPy's fits / tokdyn's whole run")
    whole["notes"].append(f"cores busy on average: {tb['cpu'] / tb['elapsed']:.2f} of {os.cpu_count()} (CPU time / wall)")
    whole["check"] = "see the fits row"
    load(whole, "tokdyn", tb)
    load(whole, "SciPy", pb)
    fitrow = new_row("rope-fits", f"rope-table2 phase \"{FITS}\"", "rope-fits")
    fitrow["command"] = "(the phase of the run above; SciPy: python/scipy_rope_rate_fits.py)"
    fitrow.update(time=t_fits, time_what=f"phase time, best of {len(td)}", gflop_na="n/a (ODE integration)", threads=THREADS)
    add_peer(fitrow, f"SciPy solve_ivp DOP853 ({THREADS} thr.)", t_sc, pb["rss_kb"], "in-script time of the 12 fits, imports excluded")
    load(fitrow, "tokdyn", tb)
    load(fitrow, "SciPy", pb)
    if t_fits is None:
        fitrow["error"] = f"the manifest has no phase \"{FITS}\""
    man_before = B.before_run(whole, "rope-table2 tokdyn", "rope-table2", [], THREADS, B.work / "rope-before", lambda man: None, "wall")
    if man_before is not None:  # the fits' time from the same REF run: its phase, or the older notes.part_times_s
        notes = man_before.get("notes") or {}
        ph = notes.get("phase_seconds") or notes.get("part_times_s") or {}
        fitrow["before"] = ({"time": float(ph[FITS]), "what": f"phase \"{FITS}\"", "same": True} if FITS in ph else
                            {"time": None, "what": "n/a (REF's manifest does not time the fits)"})
    # Agreement of the fitted rates.
    # Each fit's bound from the two integrators' rtol / atol and SciPy's step count (agreement.rate_fit_bound).
    tok_fits = {(int(r["n"]), int(r["m"]), float(r["beta"])): r for r in csv.DictReader(open(tb["out"] / "rate_fits.csv"))}
    dfit, ratio, worst = 0.0, 0.0, None
    for f in pb["json"]["fits"]:
        t = tok_fits.get((f["n"], f["m"], float(f["beta"])))
        if t is None:
            dfit = ratio = float("inf")
            continue
        dd = abs(f["gamma_fit"] - float(t["gamma_fit"])) / float(t["gamma"])
        bound = agreement.rate_fit_bound(f["n"], f["nfev"])
        dfit = max(dfit, dd)
        if dd / bound >= ratio:
            ratio, worst = dd / bound, (f["n"], f["m"], f["beta"], dd, bound)
    where = (f"; closest to its bound: (n, m, beta) = ({worst[0]}, {worst[1]}, {worst[2]}), {worst[3]:.1e} of {worst[4]:.1e}"
             if worst else "")
    fitrow["check"] = (f"max abs(gamma_fit SciPy - tokdyn) / gamma = {dfit:.1e} ({'ok' if ratio <= 1 else 'DIFFER'}: each fit within "
                       f"its bound from rtol 1e-10, atol 1e-12 and the steps{where})")
    if not ratio <= 1:
        B.disagree.append((fitrow["workload"], fitrow["check"]))
    # Growth: the fits have no size knob; rope-flow's attention field grows with the tokens n.
    F = P["flow"]
    times = []
    for n in P["scale"]:
        r = B.tokdyn_run(f"rope-flow scaling n {n} #1", "rope-flow",
                         [("n", n), ("d", F["d"]), ("runs", F["runs"]), ("t_end", F["t_end"]), ("h", F["h"]), ("outputs", F["outputs"])],
                         THREADS, B.work / f"rope-flow-{n}")
        times.append(float(r["manifest"].get("wall_time_s") or r["elapsed"]))
    sc = dict(workload="rope-table2 -> rope-flow",
              parameter=f"rope-flow n (d = {F['d']}, runs = {F['runs']}, RK4 h = {F['h']}, t_end = {F['t_end']})",
              sizes=P["scale"], times=times, what="manifest wall_time_s",
              expected="2 (attention field 4 n^2 d per evaluation); the 12 rate fits have no size knob",
              flop_model=[rope_flow_flops(n, F["d"], F["runs"], F["t_end"], F["h"]) for n in P["scale"]])
    return [whole, fitrow], [sc]


def w_green(B):
    P = B.S["green"]
    d, L = P["d"], P["L"]
    thr = 1

    def files(dd):
        g = B.work / f"green-{dd}"
        g.mkdir(exist_ok=True)
        B.prep([PY, HERE / "bench/green_peer.py", "--write", g, dd, L, 0])
        return g

    def run(g, label, i):
        return B.tokdyn_run(label, "coupling-green", [("generators", g / "gen.npy"), ("forcing", g / "h.npy"), ("validate", "false"),
                                                      ("write_u", "true")], thr, g / f"res-{i}")
    t_of = lambda r: float(r["manifest"]["notes"]["factor_seconds"]) + float(r["manifest"]["notes"]["solve_seconds"])
    g = files(d)
    td, pr = [], []
    for i in range(1, B.S["reps"] + 1):
        td.append(run(g, f"green tokdyn d {d} #{i}", i))
        pr.append(B.peer_run(f"green SciPy d {d} #{i}", [HERE / "bench/green_peer.py", "--solve", g / "gen.npy", g / "h.npy", g / "u_np.npy"], thr))
    tb = best(td, key=t_of)
    pb = best(pr, key=lambda r: r["json"]["solve_seconds"])
    row = new_row("green", f"coupling part 2: Green BVP u = G h (d {d}, L {L}, k {(d + 1) // 2})", "green")
    row["command"] = ("tokdyn run coupling-green --set generators=GEN.npy --set forcing=H.npy --set validate=false --set write_u=true "
                      f"--threads {thr} --no-figures")
    row.update(time=t_of(tb), time_what=f"notes factor_seconds + solve_seconds, best of {len(td)}", gflop=green_flops(d, L) / 1e9,
               peak=("dgemm", thr), rss_tok=tb["rss_kb"], threads=thr)
    row["phases"], row["phase_src"] = phase_seconds(tb["manifest"])
    add_peer(row, "SciPy solve_banded (1 thr.)", pb["json"]["solve_seconds"], pb["rss_kb"],
             f"factorise + solve only; its band assembly took {fmt_s(pb['json']['assemble_seconds'])} more")
    load(row, "tokdyn", tb)
    load(row, "SciPy", pb)
    B.before_run(row, f"green tokdyn d {d}", "coupling-green", [("generators", g / "gen.npy"), ("forcing", g / "h.npy"),
                                                                ("validate", "false"), ("write_u", "true")], thr,
                 B.work / "green-before", t_of, "notes factor_seconds + solve_seconds")
    u_t, u_n = np.load(tb["out"] / "u.npy"), np.load(g / "u_np.npy")
    diff = float(np.abs(u_t - u_n).max() / np.abs(u_n).max()) if u_t.shape == u_n.shape else float("inf")
    # Bound from the banded LU's backward error and the BVP's condition number (agreement.green_bound).
    cond = {}
    bound = agreement.green_bound(g / "gen.npy", g / "h.npy", cond)
    row["check"] = (f"max abs(u_tokdyn - u_SciPy) / max abs(u) = {diff:.1e} ({'ok' if diff <= bound else 'DIFFER'}, bound {bound:.1e} "
                    f"from kappa_inf {cond.get('kappa', float('nan')):.1e})")
    if not diff <= bound:
        B.disagree.append((row["workload"], row["check"]))
    shutil.rmtree(g)
    times = []
    for s in P["scale"]:
        if s == d:
            times.append(t_of(tb))
            continue
        gs = files(s)
        times.append(t_of(run(gs, f"green scaling d {s} #1", 1)))
        shutil.rmtree(gs)
    sc = dict(workload="green (coupling part 2)", parameter=f"d (L = {L}, k = ceil(d/2))", sizes=P["scale"], times=times,
              what="factor + solve", expected="3 (d x d blocks: panel LU and Schur update per layer)",
              flop_model=[green_flops(s, L) for s in P["scale"]])
    return [row], [sc]


def w_continuation(B):
    P = B.S["continuation"]
    d, L, steps, ds = P["d"], P["L"], P["steps"], P["ds"]
    thr = 1

    def files(LL):
        g = B.work / f"cont-{LL}"
        g.mkdir(exist_ok=True)
        B.prep([PY, HERE / "bench/continuation_peer.py", "--write", g / "gen.npy", g / "psi.npy", d, LL, 0])
        return g

    def run(g, label, i):
        return B.tokdyn_run(label, "coupling-margin", [("bench_generators", g / "gen.npy"), ("bench_psi", g / "psi.npy"),
                                                       ("bench_steps", steps), ("bench_ds", ds)], thr, g / f"res-{i}")
    t_of = lambda r: float(r["manifest"]["notes"]["bench"]["continuation_seconds"])
    g = files(L)
    td, pr = [], []
    for i in range(1, B.S["reps"] + 1):
        td.append(run(g, f"continuation tokdyn L {L} #{i}", i))
        if i <= B.S["peer_reps"]:
            pr.append(B.peer_run(f"continuation NumPy/SciPy L {L} #{i}",
                                 [HERE / "bench/continuation_peer.py", "--run", g / "gen.npy", g / "psi.npy", steps, ds, g / "u_np.npy"], thr))
    tb = best(td, key=t_of)
    pb = best(pr, key=lambda r: r["json"]["seconds"])
    bn = tb["manifest"]["notes"]["bench"]
    row = new_row("continuation", f"coupling part 2: rho-continuation ({steps} steps, d {d}, L {L}, tanh-MLP psi)", "continuation")
    row["command"] = (f"tokdyn run coupling-margin --set bench_generators=GEN.npy --set bench_psi=PSI.npy --set bench_steps={steps} "
                      f"--set bench_ds={ds} --threads {thr} --no-figures")
    row.update(time=t_of(tb), time_what=f"notes.bench.continuation_seconds, best of {len(td)}",
               gflop=float(bn["factorizations"]) * float(bn["factor_gflop_each"]), peak=("dgemm", thr), rss_tok=tb["rss_kb"], threads=thr)
    row["notes"].append(f"GFLOP/s counts only the {bn['factorizations']} BVP factorisations ({float(bn['factor_gflop_each']):.3f} GFLOP each), "
                        "as scripts/bench_continuation.sh does")
    row["phases"], row["phase_src"] = phase_seconds(tb["manifest"])
    add_peer(row, "NumPy/SciPy (1 thr.)", pb["json"]["seconds"], pb["rss_kb"])
    load(row, "tokdyn", tb)
    load(row, "peer", pb)
    B.before_run(row, f"continuation tokdyn L {L}", "coupling-margin", [("bench_generators", g / "gen.npy"), ("bench_psi", g / "psi.npy"),
                                                                        ("bench_steps", steps), ("bench_ds", ds)], thr,
                 B.work / "cont-before", t_of, "notes.bench.continuation_seconds")
    rows_c = list(csv.DictReader(open(tb["out"] / "continuation.csv")))
    drho = abs(float(rows_c[-1]["rho"]) - pb["json"]["rho"])
    u_np = np.load(g / "u_np.npy")
    u_tok = np.zeros_like(u_np)
    for r in csv.DictReader(open(tb["out"] / "final_u.csv")):
        u_tok[int(r["i"]), int(r["l"])] = float(r["u"])
    du = float(np.sqrt(((u_tok - u_np) ** 2).sum(axis=0)).max() / np.sqrt((u_np ** 2).sum(axis=0)).max())
    # Bounds from the two Newton correctors' tolerances over the steps (agreement.continuation_bounds).
    b_rho, b_u = agreement.continuation_bounds(steps, float(np.sqrt((u_np ** 2).sum(axis=0)).max()), L)
    ok = drho <= b_rho and du <= b_u
    row["check"] = (f"final rho differs by {drho:.1e} (bound {b_rho:.1e}), u* by {du:.1e} relative (bound {b_u:.1e}) "
                    f"({'ok' if ok else 'DIFFER'})")
    if not ok:
        B.disagree.append((row["workload"], row["check"]))
    shutil.rmtree(g)
    times, fl = [], []
    for s in P["scale"]:
        if s == L:
            times.append(t_of(tb))
            fl.append(float(bn["factorizations"]) * float(bn["factor_gflop_each"]) * 1e9)
            continue
        gs = files(s)
        r = run(gs, f"continuation scaling L {s} #1", 1)
        times.append(t_of(r))
        b = r["manifest"]["notes"]["bench"]
        fl.append(float(b["factorizations"]) * float(b["factor_gflop_each"]) * 1e9)
        shutil.rmtree(gs)
    sc = dict(workload="continuation (coupling part 2)", parameter=f"L (d = {d}, {steps} steps)", sizes=P["scale"], times=times,
              what="notes.bench.continuation_seconds", expected="1 (block-banded LU: O(L d^3) per factorisation)", flop_model=fl)
    return [row], [sc]
