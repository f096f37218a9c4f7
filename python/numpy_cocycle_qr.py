#!/usr/bin/python3
"""Straightforward NumPy reference of the discrete QR (Benettin) spectrum, for timing against
tokdyn's cocycle-spectra: a G5-like cocycle B(l) = I + A_0 + delta E(l) (A_0 = scale G/sqrt(d),
E(l) Gaussian/sqrt(d), i.i.d.), full k = d. Loop over l: Z = B(l) Q, (Q, R) = qr(Z), sign fix
diag(R) > 0, accumulate log diag(R). Prints one JSON line: seconds of the QR loop only (the
generation of B(l) is excluded), and the exponents.

Usage: numpy_cocycle_qr.py D L [SEED] [SCALE] [DELTA]
       numpy_cocycle_qr.py --generators FILE.npy      (float64 [L, d, d] holding B(l) = I + A(l),
                                                       the file tokdyn reads with --set generators=)
       numpy_cocycle_qr.py --write FILE.npy D L [SEED] [SCALE] [DELTA]   (write that file and exit)"""
import json
import sys
import time

import numpy as np


def generators(args):
    d, L = int(args[0]), int(args[1])
    seed = int(args[2]) if len(args) > 2 else 0
    scale = float(args[3]) if len(args) > 3 else 0.5
    delta = float(args[4]) if len(args) > 4 else 0.1
    rng = np.random.default_rng(seed)
    rs = 1.0 / np.sqrt(d)
    A0 = scale * rs * rng.standard_normal((d, d))
    I = np.eye(d)
    return np.stack([I + A0 + delta * rs * rng.standard_normal((d, d)) for _ in range(L)])


def main():
    if sys.argv[1] == "--write":
        np.save(sys.argv[2], generators(sys.argv[3:]))
        return
    # Layer maps drawn on the fly in chunks would mix generation into the timing: draw (or load) first.
    B = np.load(sys.argv[2]) if sys.argv[1] == "--generators" else generators(sys.argv[1:])
    L, d = B.shape[0], B.shape[1]
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
    print(json.dumps({"seconds": t, "mu_max": float(mu.max()), "mu_min": float(mu.min()), "mu": [float(x) for x in mu],
                      "d": d, "L": L}))


if __name__ == "__main__":
    main()
