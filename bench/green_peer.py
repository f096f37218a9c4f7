#!/usr/bin/python3
"""A straightforward NumPy/SciPy peer of tokdyn's Green-operator BVP (analysis/green.hpp), for
scripts/bench_green.sh.

  green_peer.py --write DIR D L SEED   writes DIR/gen.npy ([L, d, d] layer maps B(l) = I + A(l), a
                                       depth-varying saddle with k = ceil(d/2) growing directions)
                                       and DIR/h.npy ([L, d] forcing, uniform in [-1, 1])
  green_peer.py --solve GEN H OUT      solves the same boundary-value problem and writes OUT.npy
                                       (u, [L+1, d]); prints JSON {seconds, assemble_seconds,
                                       solve_seconds, band_flops, ...}

The system (unknowns u(0..L), (L+1) d of them; row order as tokdyn's):
    left_rows (u(0) - ubar_-) = 0            (d-k rows: E^u(B_left)^perp, B_left = B(0))
    u(l+1) - B(l) u(l) = h(l), l = 0..L-1    (d rows each)
    right_rows (u(L) - ubar_+) = 0           (k rows: E^s(B_right)^perp, B_right = B(L-1))
with ubar_- = (I - B_left)^{-1} h(0), ubar_+ = (I - B_right)^{-1} h(L-1) (constant tails). The dense
(L+1)d x (L+1)d matrix (64064^2 doubles = 33 GB at d = 64, L = 1000) does not fit, so the peer stores
it in LAPACK band form (lower bandwidth 2d-k-1, upper d+k-1) and calls scipy.linalg.solve_banded
(LAPACK dgbsv: band LU with partial pivoting, then the solve). The end rows come from ordered real
Schur forms (scipy.linalg.schur, sort='ouc')."""
import json
import sys
import time

import numpy as np
import scipy.linalg as sla


def write(out, d, L, seed):
    rng = np.random.default_rng(seed)
    k = (d + 1) // 2
    lam = np.concatenate([np.linspace(1.2, 1.5, k), np.linspace(0.7, 0.4, d - k)])
    Q, _ = np.linalg.qr(rng.standard_normal((d, d)))
    S = Q @ (np.eye(d) + 0.3 * rng.standard_normal((d, d)) / np.sqrt(d))
    B0 = S @ np.diag(lam) @ np.linalg.inv(S)
    E = rng.standard_normal((L, d, d)) / np.sqrt(d)
    gen = B0[None, :, :] + 0.05 * E
    h = rng.uniform(-1.0, 1.0, size=(L, d))
    np.save(f"{out}/gen.npy", np.ascontiguousarray(gen))
    np.save(f"{out}/h.npy", h)


def end_rows(Bl, Br):
    d = Bl.shape[0]
    # E^u(B_left) = first k Schur vectors of the 'outside the unit circle first' ordering; its
    # orthogonal complement is the rest of the orthogonal Schur basis.
    _, Zl, k = sla.schur(Bl, output="real", sort="ouc")
    _, Zr, kr = sla.schur(Br.T, output="real", sort="ouc")
    if k != kr:
        raise SystemExit(f"green_peer: unstable dimensions differ at the ends ({k} and {kr})")
    return k, Zl[:, k:].T, Zr[:, :k].T


def solve(gen_file, h_file, out_file):
    t0 = time.perf_counter()
    B = np.load(gen_file)
    h = np.load(h_file)
    L, d, _ = B.shape
    k, left, right = end_rows(B[0], B[-1])
    m = d - k
    N = (L + 1) * d
    lo, up = 2 * d - k - 1, d + k - 1
    ab = np.zeros((lo + up + 1, N))
    rhs = np.zeros(N)
    I = np.eye(d)

    def put(r0, c0, M):
        # entry (r0 + i, c0 + j) of the full matrix -> ab[up + i' - j', j'] (LAPACK band storage)
        rows, cols = M.shape
        for j in range(cols):
            col = c0 + j
            ab[up + r0 - col: up + r0 - col + rows, col] = M[:, j]

    ubar_m = np.linalg.solve(I - B[0], h[0])
    ubar_p = np.linalg.solve(I - B[-1], h[-1])
    put(0, 0, left)
    rhs[:m] = left @ ubar_m
    for l in range(L):
        r0 = m + l * d
        put(r0, l * d, -B[l])
        put(r0, (l + 1) * d, I)
        rhs[r0:r0 + d] = h[l]
    put(m + L * d, L * d, right)
    rhs[m + L * d:] = right @ ubar_p
    t1 = time.perf_counter()
    x = sla.solve_banded((lo, up), ab, rhs, overwrite_ab=True, overwrite_b=True, check_finite=False)
    t2 = time.perf_counter()
    u = x.reshape(L + 1, d)
    np.save(out_file, u)
    res = max(np.linalg.norm(u[l + 1] - B[l] @ u[l] - h[l]) for l in range(L))
    # dgbtrf: per column about 2 lo (lo + up) flops (the fill widens U to lo + up); dgbtrs ~ 2 N (2 lo + up).
    band_flops = 2.0 * N * lo * (lo + up) + 2.0 * N * (2 * lo + up)
    print(json.dumps({"seconds": t2 - t0, "assemble_seconds": t1 - t0, "solve_seconds": t2 - t1, "band_flops": band_flops,
                      "residual": float(res), "k": int(k), "N": int(N), "lower": lo, "upper": up}))


if __name__ == "__main__":
    if len(sys.argv) == 6 and sys.argv[1] == "--write":
        write(sys.argv[2], int(sys.argv[3]), int(sys.argv[4]), int(sys.argv[5]))
    elif len(sys.argv) == 5 and sys.argv[1] == "--solve":
        solve(sys.argv[2], sys.argv[3], sys.argv[4])
    else:
        raise SystemExit(__doc__)
