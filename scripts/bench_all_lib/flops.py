"""The flop counts of the per-workload scripts (scripts/bench*.sh), for bench_all's GFLOP/s."""
import json
from pathlib import Path


def mamba2_shapes(ck):
    raw = json.load(open(Path(ck) / "config.json"))
    ssm = raw.get("ssm_cfg", {}) or {}
    d = int(raw["d_model"])
    expand, N, P, G = int(ssm.get("expand", 2)), int(ssm.get("d_state", 128)), int(ssm.get("headdim", 64)), int(ssm.get("ngroups", 1))
    di = expand * d
    H = di // P
    return dict(d=d, di=di, N=N, P=P, G=G, H=H, vocab=int(raw["vocab_size"]), cols=2 * di + 2 * G * N + H)


def mamba2_flops(sh, runs, tokens, depth):
    """scripts/bench_mamba2.sh's count: in_proj, out_proj, SSD, both variants (no_gate skips the z rows)."""
    RT, T = runs * tokens, tokens
    def layer(cols):
        return 2 * RT * sh["d"] * cols + 2 * RT * sh["di"] * sh["d"] + 2 * runs * (sh["G"] * T * T * sh["N"] + sh["H"] * T * T * sh["P"])
    return depth * (layer(sh["cols"]) + layer(sh["cols"] - sh["di"]))


def ssm_flops(runs, depth, ell, n, m, nvar=2):
    """scripts/bench.sh's count per layer and variant: Delta GEMM, branch GEMMs, kernels, IO readout, Gram."""
    Nr = runs * ell
    per = 2 * Nr * n * n + 4 * Nr * n * m + runs * 2 * ell * ell * m + runs * 4 * n * ell * (ell + 1) // 2 + runs * 2 * ell * ell * n
    return per * depth * nvar


def cocycle_flops(d, L):
    """scripts/bench_cocycle.sh's count: GEMM 2 d^3 + Householder QR 4/3 d^3 per layer."""
    return L * (2 + 4 / 3) * d ** 3


def green_flops(d, L):
    """scripts/bench_green.sh's count (tokdyn's block algorithm)."""
    k = (d + 1) // 2
    m = d - k
    n = m + d
    return L * (n * d * d + 2 * m * d * d) + 2 / 3 * d ** 3  # dgetrf n d^2 - d^3/3, unit-lower inverse d^3/3, Schur 2 m d^2


def depth_spectra_flops(sh, k, T, depth):
    """scripts/bench_depth_spectra.sh's count: (1 + k) GEMMs + (1 + 2k) SSD at R = 1, plus the thin QR."""
    din = 2 * sh["di"] + 2 * sh["G"] * sh["N"] + sh["H"]
    gemm1 = 2.0 * (T * sh["d"] * din + T * sh["di"] * sh["d"])
    ssd1 = 2.0 * (sh["G"] * T * T * sh["N"] + sh["H"] * T * T * sh["P"])
    return depth * ((1 + k) * gemm1 + (1 + 2 * k) * ssd1 + 4.0 * (T * sh["d"]) * k * k)


def rope_flow_flops(n, d, runs, t_end, h):
    """rope-flow's own estimate: 4 field evaluations per RK4 step, R (4 n^2 d + 30 n^2) each."""
    return 4 * (t_end / h) * runs * (4.0 * n * n * d + 30.0 * n * n)


def gpt2_flops(cfg, runs, tokens, depth):
    """The forward's flops as tokdyn computes it: QKV, full T x T attention products per head, the
    output projection, the MLP (2 flops per multiply-add)."""
    d, H = cfg["n_embd"], cfg["n_head"]
    RT = runs * tokens
    return 2.0 * depth * (RT * d * 4 * d + 2 * runs * H * tokens * tokens * (d // H) + RT * d * 4 * d * 2)


def gpt2_tangent_flops(cfg, k, tokens, depth):
    d, H = cfg["n_embd"], cfg["n_head"]
    return 2.0 * depth * (tokens * d * (4 * d + 2 * 4 * d) * (1 + k) + H * tokens * tokens * (d // H) * (2 + 4 * k))
