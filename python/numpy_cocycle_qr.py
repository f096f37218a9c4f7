#!/usr/bin/python3
"""Straightforward NumPy reference of the discrete QR (Benettin) spectrum, for timing against
tokdyn's cocycle-spectra: a G5-like cocycle B(l) = I + A_0 + delta E(l) (A_0 = scale G/sqrt(d),
E(l) Gaussian/sqrt(d), i.i.d.), full k = d. Loop over l: Z = B(l) Q, (Q, R) = qr(Z), sign fix
diag(R) > 0, accumulate log diag(R). Prints one JSON line: seconds of the QR loop only (the
generation of B(l) is excluded), and the largest and smallest exponents.

Usage: numpy_cocycle_qr.py D L [SEED] [SCALE] [DELTA]"""
import json
import sys
import time

import numpy as np


def main():
    d, L = int(sys.argv[1]), int(sys.argv[2])
    seed = int(sys.argv[3]) if len(sys.argv) > 3 else 0
    scale = float(sys.argv[4]) if len(sys.argv) > 4 else 0.5
    delta = float(sys.argv[5]) if len(sys.argv) > 5 else 0.1
    rng = np.random.default_rng(seed)
    rs = 1.0 / np.sqrt(d)
    A0 = scale * rs * rng.standard_normal((d, d))
    I = np.eye(d)
    # Layer maps drawn on the fly in chunks would mix generation into the timing: draw first.
    B = [I + A0 + delta * rs * rng.standard_normal((d, d)) for _ in range(L)]
    Q = np.eye(d)
    logs = np.zeros(d)
    t0 = time.perf_counter()
    for l in range(L):
        Z = B[l] @ Q
        Q, R = np.linalg.qr(Z)
        s = np.sign(np.diag(R))
        s[s == 0] = 1.0
        Q = Q * s
        logs += np.log(np.abs(np.diag(R)))
    t = time.perf_counter() - t0
    mu = logs / L
    print(json.dumps({"seconds": t, "mu_max": float(mu.max()), "mu_min": float(mu.min()), "d": d, "L": L}))


if __name__ == "__main__":
    main()
