#!/usr/bin/python3
"""A straightforward NumPy/SciPy implementation of the 12 resonant rate fits of Table 2 (RoPE paper),
for timing against tokdyn's `rope-table2` part "resonant rate fits (12)" (src/analysis/rope_circle.cpp:
phase_consensus_gap, circle_rate_fit; src/models/rope/phase.cpp).

For each (n, m, beta): the circle phase model (9)
    dtheta_i = sum_j A_ij sin(theta_j - theta_i),
    A = row softmax of beta cos(theta_i - theta_j + omega (p_i - p_j)),  p_j = j,  omega = 2 pi m / n.
A* = A at consensus (theta = 0) = D^{-1} W with W symmetric, similar to S = D^{-1/2} W D^{-1/2};
gamma = 1 - lambda_2(S) (numpy.linalg.eigh); slow right eigenvector v = D^{-1/2} u_2, scaled to unit
max-norm with its largest-magnitude entry +1. Start at 1e-4 v, integrate with solve_ivp(DOP853,
rtol 1e-10, atol 1e-12) to T = 3.75 / gamma with 360 output times uniform on [0, T]; gamma_fit = minus the
least-squares slope of log ||theta - mean(theta)||_2 on t over 0.75 <= gamma t <= 3.75.

Usage: /usr/bin/python3 python/scipy_rope_rate_fits.py
Prints one JSON line: {"seconds", "fits": [{"n", "m", "beta", "gamma", "gamma_fit", "rel_error", "nfev",
"fit_points"}...], "max_rel_error", "numpy", "scipy"}; "seconds" is the total wall time of the 12 fits
(eigenproblems, integrations and fits; imports excluded).
"""
import json
import time

import numpy as np
import scipy
from scipy.integrate import solve_ivp

TRIPLES = [(8, 0, 2), (8, 1, 2), (8, 2, 2), (8, 4, 2), (16, 1, 1), (16, 4, 4),
           (16, 8, 4), (32, 2, 2), (32, 8, 2), (32, 16, 2), (64, 16, 1), (128, 64, 1)]
EPS, OUTPUTS, T_FACTOR, WIN_LO, WIN_HI = 1e-4, 360, 3.75, 0.75, 3.75
RTOL, ATOL = 1e-10, 1e-12


def make_rhs(n, omega, beta):
    """Vectorised right-hand side of (9) (max-subtracted softmax: exp(beta (cos d - 1)))."""
    phase = omega * (np.arange(n)[:, None] - np.arange(n)[None, :])  # omega (p_i - p_j)

    def rhs(_t, theta):
        diff = theta[:, None] - theta[None, :]                       # theta_i - theta_j
        w = np.exp(beta * (np.cos(diff + phase) - 1.0))
        return -(w * np.sin(diff)).sum(axis=1) / w.sum(axis=1)

    return rhs, phase


def consensus_gap(n, omega, beta, phase):
    w = np.exp(beta * (np.cos(phase) - 1.0))                         # W at consensus, symmetric
    z = w.sum(axis=1)
    s = w / np.sqrt(np.outer(z, z))                                  # D^{-1/2} W D^{-1/2}
    lam, u = np.linalg.eigh(s)                                       # ascending
    gamma = 1.0 - lam[-2]
    v = u[:, -2] / np.sqrt(z)                                        # right eigenvector of A* = D^{-1} W
    v = v / v[np.argmax(np.abs(v))]                                  # unit max-norm, largest entry +1
    return gamma, v


def rate_fit(n, m, beta):
    omega = 2.0 * np.pi * m / n
    rhs, phase = make_rhs(n, omega, beta)
    gamma, v = consensus_gap(n, omega, beta, phase)
    T = T_FACTOR / gamma
    t_eval = np.linspace(0.0, T, OUTPUTS)
    sol = solve_ivp(rhs, (0.0, T), EPS * v, method="DOP853", rtol=RTOL, atol=ATOL, t_eval=t_eval)
    if not sol.success:
        raise RuntimeError(f"solve_ivp failed for (n, m, beta) = ({n}, {m}, {beta}): {sol.message}")
    norm = np.linalg.norm(sol.y - sol.y.mean(axis=0), axis=0)
    gt = gamma * sol.t
    sel = (gt >= WIN_LO - 1e-12) & (gt <= WIN_HI + 1e-12)
    slope = np.polyfit(sol.t[sel], np.log(norm[sel]), 1)[0]
    gamma_fit = -slope
    return {"n": n, "m": m, "beta": beta, "gamma": gamma, "gamma_fit": gamma_fit,
            "rel_error": abs(gamma_fit - gamma) / gamma, "nfev": int(sol.nfev), "fit_points": int(sel.sum())}


def main():
    t0 = time.perf_counter()
    fits = [rate_fit(n, m, beta) for n, m, beta in TRIPLES]
    seconds = time.perf_counter() - t0
    print(json.dumps({"seconds": seconds, "fits": fits, "max_rel_error": max(f["rel_error"] for f in fits),
                      "numpy": np.__version__, "scipy": scipy.__version__}))


if __name__ == "__main__":
    main()
