#!/usr/bin/python3
"""A straightforward NumPy implementation of the preset ssm-random-silu, for timing against tokdyn.

Same sizes and the same math as `tokdyn run ssm-random-silu` (The Attention Within §II, input-output
form of Lemma II.1, tau = 1, gate off), written the way a researcher would: Python loops over
variants, layers and runs, NumPy inside, vectorised where natural. Random bits differ from tokdyn's
(NumPy's PCG64 instead of xoshiro256++); the distributions are the same:

  per layer (one weight sequence, shared by all runs and both variants; redrawn at every layer):
    S_B, S_C (m x n), W_Delta (n x n) iid U(-1, 1); alpha ~ U(1, 16);
    b_Delta = dt + log(-expm1(-dt)), dt = max(exp(U(log 1e-3, log 1e-1)), 1e-4)
  initial tokens: iid uniform on S^{n-1} per run (normalised Gaussians).

Per layer and variant, on the stack of all runs X (runs*ell x n):
    Delta = softplus(X W_Delta^T + b),  Bz = X S_B^T,  Cz = X S_C^T  (SiLU on Bz, Cz for "silu")
    q_i = Cz_i . Bz_i (interaction term of the state entering the layer, for the PE windows)
  per run (Lemma II.1, prefix sums P_i = sum_{l<=i} alpha ⊙ Delta_l):
    K = Cz Bz^T,  lambda_ij = Delta_j ⊙ exp(-(P_i - P_j)) for j <= i,
    r_i = sum_{j<=i} K_ij lambda_ij ⊙ z_j,   z_i <- z_i + tau r_i, normalised
  metrics of every run after every layer (and of the input): Gram matrix G of the normalised tokens,
    lambda_bar_1 = max eig(G) / ell and participation ratio r = 1 / sum_k (eig_k / ell)^2 via
    numpy.linalg.eigvalsh, min pairwise cosine, distance to the nearest consensus configuration.
  after the run: the PE windows (eq. (23)) of q for every run and token.

Prints one JSON object (wall time, per-phase times, BLAS in use, a few results) on stdout.
Run it with /usr/bin/python3 (Debian's, with numpy). Usage:
  numpy_ssm_random_silu.py [--runs 50] [--depth 200] [--tokens 50] [--n 768] [--m 128]
                           [--variants both|silu|no_silu] [--seed 0] [--tau 1.0]
"""
import argparse
import ctypes
import json
import os
import sys
import time
from collections import defaultdict

import numpy as np


def softplus(x):
    return np.maximum(x, 0.0) + np.log1p(np.exp(-np.abs(x)))


def silu(x):
    return x / (1.0 + np.exp(-x))


def draw_layer(seed, k, n, m):
    """Layer k's weights from its own stream (seed, k): the same for every run and variant."""
    rng = np.random.default_rng([seed, 0x5EEDF00D, k])
    alpha = rng.uniform(1.0, 16.0, n)
    dt = np.maximum(np.exp(rng.uniform(np.log(1e-3), np.log(1e-1), n)), 1e-4)
    b = dt + np.log(-np.expm1(-dt))  # softplus(b) = dt
    W = rng.uniform(-1.0, 1.0, (n, n))
    SB = rng.uniform(-1.0, 1.0, (m, n))
    SC = rng.uniform(-1.0, 1.0, (m, n))
    return alpha, W, b, SB, SC


def initial_tokens(seed, runs, ell, n):
    Z = np.empty((runs, ell, n))
    for r in range(runs):
        x = np.random.default_rng([seed, r]).standard_normal((ell, n))
        Z[r] = x / np.linalg.norm(x, axis=1, keepdims=True)
    return Z


def readout_io(z, delta, bz, cz, alpha, mask):
    """r_i = sum_{j<=i} K_ij (lambda_ij ⊙ z_j) for one sequence z (ell x n)."""
    K = cz @ bz.T                                   # (ell, ell), K_ij = C_i . B_j
    P = np.cumsum(alpha * delta, axis=0)            # P_i = alpha ⊙ sum_{l<=i} Delta_l
    E = P[:, None, :] - P[None, :, :]               # (i, j, mu): alpha sum_{l=j+1}^{i} Delta_l
    L = np.exp(-np.where(mask[:, :, None], E, np.inf))  # exp(d_ij), 0 for j > i
    return np.einsum("ij,ijm,jm->im", K, L, delta * z)


def metrics(z):
    ell = z.shape[0]
    zh = z / np.linalg.norm(z, axis=1, keepdims=True)
    G = zh @ zh.T
    ev = np.linalg.eigvalsh(G) / ell
    lam1 = ev[-1]
    pr = 1.0 / np.sum(ev ** 2)
    iu = np.triu_indices(ell, 1)
    min_cos = G[iu].min() if ell > 1 else 1.0
    # nearest consensus configuration (s_i e^mu): sum_i |zh_i - s_i e^mu|^2 = 2 sum_i (1 - |zh_i^mu|)
    cd = np.sqrt(max(np.min(2.0 * np.sum(1.0 - np.abs(zh), axis=0)), 0.0))
    return lam1, pr, min_cos, cd


def pe_windows(q):
    """q (..., kappa): W(T) = min_t mean(q[t:t+T]) for T = 1..kappa, and T* (0 = none)."""
    kappa = q.shape[-1]
    P = np.concatenate([np.zeros(q.shape[:-1] + (1,)), np.cumsum(q, axis=-1)], axis=-1)
    W = np.empty(q.shape)
    for T in range(1, kappa + 1):
        W[..., T - 1] = (P[..., T:] - P[..., :-T]).min(axis=-1) / T
    pos = W > 0
    tstar = np.where(pos.any(axis=-1), pos.argmax(axis=-1) + 1, 0)
    return W, tstar


def run_variant(silu_bc, Z0, args, clock):
    runs, ell, n, m, depth, tau = args.runs, args.tokens, args.n, args.m, args.depth, args.tau
    mask = np.tril(np.ones((ell, ell), dtype=bool))
    Z = Z0.copy()
    lam1 = np.empty((depth + 1, runs))
    pr = np.empty((depth + 1, runs))
    mc = np.empty((depth + 1, runs))
    cd = np.empty((depth + 1, runs))
    q = np.empty((runs, ell, depth))

    def observe(k):
        for r in range(runs):
            lam1[k, r], pr[k, r], mc[k, r], cd[k, r] = metrics(Z[r])

    t = time.perf_counter()
    observe(0)
    clock["metrics"] += time.perf_counter() - t
    for k in range(1, depth + 1):
        t0 = time.perf_counter()
        alpha, W, b, SB, SC = draw_layer(args.seed, k, n, m)
        t1 = time.perf_counter()
        X = Z.reshape(runs * ell, n)
        D = X @ W.T
        Bz = X @ SB.T
        Cz = X @ SC.T
        t2 = time.perf_counter()
        delta = softplus(D + b)
        if silu_bc:
            Bz = silu(Bz)
            Cz = silu(Cz)
        q[:, :, k - 1] = np.einsum("ij,ij->i", Cz, Bz).reshape(runs, ell)
        t3 = time.perf_counter()
        delta = delta.reshape(runs, ell, n)
        Bz = Bz.reshape(runs, ell, m)
        Cz = Cz.reshape(runs, ell, m)
        R = np.empty_like(Z)
        for r in range(runs):
            R[r] = readout_io(Z[r], delta[r], Bz[r], Cz[r], alpha, mask)
        t4 = time.perf_counter()
        Z = Z + tau * R
        Z /= np.linalg.norm(Z, axis=2, keepdims=True)
        t5 = time.perf_counter()
        observe(k)
        t6 = time.perf_counter()
        clock["draw"] += t1 - t0
        clock["gemm"] += t2 - t1
        clock["elementwise"] += t3 - t2
        clock["readout"] += t4 - t3
        clock["update"] += t5 - t4
        clock["metrics"] += t6 - t5
    t = time.perf_counter()
    _, tstar = pe_windows(q)
    clock["pe_windows"] += time.perf_counter() - t
    return {
        "lambda1_mean_final": float(lam1[-1].mean()),
        "pr_mean_final": float(pr[-1].mean()),
        "consensus_dist_mean_final": float(cd[-1].mean()),
        "min_cosine_mean_final": float(mc[-1].mean()),
        "pe_runs_tokens_with_window": int((tstar > 0).sum()),
    }


def blas_info():
    """Which BLAS numpy runs: the loaded library and, for OpenBLAS, its core and thread count."""
    info = {"env": {v: os.environ.get(v) for v in ("OPENBLAS_CORETYPE", "OPENBLAS_L2_SIZE",
                                                    "OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS")}}
    libs = set()
    try:
        with open("/proc/self/maps") as f:
            for line in f:
                p = line.split()[-1]
                if p.startswith("/") and ("blas" in p or "lapack" in p):
                    libs.add(os.path.realpath(p))
    except OSError:
        pass
    info["libraries"] = sorted(libs)
    for lib in sorted(libs):
        try:
            h = ctypes.CDLL(lib)
            h.openblas_get_corename.restype = ctypes.c_char_p
            h.openblas_get_config.restype = ctypes.c_char_p
            info["openblas_corename"] = h.openblas_get_corename().decode()
            info["openblas_config"] = h.openblas_get_config().decode()
            info["openblas_threads"] = int(h.openblas_get_num_threads())
            break
        except (OSError, AttributeError):
            continue
    try:
        import threadpoolctl  # optional; Debian's python3-threadpoolctl
        info["threadpoolctl"] = threadpoolctl.threadpool_info()
    except ImportError:
        pass
    return info


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--runs", type=int, default=50)
    ap.add_argument("--depth", type=int, default=200)
    ap.add_argument("--tokens", type=int, default=50)
    ap.add_argument("--n", type=int, default=768)
    ap.add_argument("--m", type=int, default=128)
    ap.add_argument("--variants", choices=["both", "silu", "no_silu"], default="both")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--tau", type=float, default=1.0)
    args = ap.parse_args(argv)
    for name in ("runs", "depth", "tokens", "n", "m"):
        if getattr(args, name) < 1:
            ap.error(f"--{name} must be >= 1")
    variants = ["silu", "no_silu"] if args.variants == "both" else [args.variants]

    clock = defaultdict(float)
    t0 = time.perf_counter()
    Z0 = initial_tokens(args.seed, args.runs, args.tokens, args.n)
    clock["init"] += time.perf_counter() - t0
    results = {}
    for v in variants:
        results[v] = run_variant(v == "silu", Z0, args, clock)
    wall = time.perf_counter() - t0

    out = {
        "implementation": "numpy",
        "wall_time_s": wall,
        "params": {"runs": args.runs, "depth": args.depth, "tokens": args.tokens, "n": args.n, "m": args.m,
                   "variants": variants, "seed": args.seed, "tau": args.tau},
        "phases_s": dict(clock),
        "numpy": np.__version__,
        "python": sys.version.split()[0],
        "blas": blas_info(),
        "results": results,
    }
    json.dump(out, sys.stdout, indent=2)
    sys.stdout.write("\n")


if __name__ == "__main__":
    main()
