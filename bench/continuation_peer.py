#!/usr/bin/python3
"""NumPy/SciPy peer of tokdyn's rho-continuation of the closed loop (coupling paper (15), Thm 10):
the same formulation and the same algorithm, written straightforwardly.

  --write GEN.npy PSI.npy d L seed   writes a rotating-sector cocycle B(l) (G4-like) and a tanh-MLP psi
  --run GEN.npy PSI.npy steps ds OUT.npy  runs `steps` fixed-size pseudo-arclength steps from rho = 0,
                                      prints JSON {seconds, rho, steps, newton}, saves the final u (d x (L+1))

Formulation (as tokdyn's closed_loop.hpp): states u(0..L); u(l+1) - B(l) u(l) = rho psi(u(l));
left_rows (u(0) - ubar_-) = 0, right_rows (u(L) - ubar_+) = 0 with the open loop's end rows
(orthonormal complements of E^u(B(0)) and E^s(B(L-1)), from sorted real Schur forms) and ubar_+-
the closed loop's end equilibria; u = ubar-profile + w. Each linear solve is the block-banded
BVP with generator B(l) + rho Dpsi(u(l)), assembled as a LAPACK band matrix and solved with
scipy.linalg.solve_banded (dgbsv: band LU with partial pivoting), both right-hand sides at once.
"""
import json
import sys
import time

import numpy as np
import scipy.linalg as sl


def write(gen, psi, d, L, seed):
    rng = np.random.default_rng(seed)
    half = d // 2
    lam = np.concatenate([np.full(half, 1.2), np.full(d - half, 0.7)])
    K = rng.standard_normal((d, d))
    K = K - K.T
    K /= np.linalg.norm(K, 2)
    R1 = sl.expm(0.01 * K)
    B = np.empty((L, d, d))
    R = np.eye(d)
    for l in range(L):
        B[l] = R @ np.diag(lam) @ R.T
        R = R1 @ R
    np.save(gen, B)
    W1 = rng.standard_normal((d, d)); W1 /= np.linalg.norm(W1, 2)
    W2 = rng.standard_normal((d, d)); W2 /= np.linalg.norm(W2, 2)
    W2 *= 0.5
    b1 = 0.5 * rng.standard_normal(d)
    c = rng.standard_normal(d); c /= np.linalg.norm(c)
    np.save(psi, np.column_stack([c, W1, b1, W2]))


class Psi:
    def __init__(self, P):
        d = P.shape[0]
        self.c, self.W1, self.b1, self.W2 = P[:, 0], P[:, 1:1 + d], P[:, 1 + d], P[:, d + 2:]

    def value(self, U):  # U: d x n columns
        return self.c[:, None] + self.W2 @ np.tanh(self.W1 @ U + self.b1[:, None])

    def jac_all(self, U):  # n x d x d
        t = np.tanh(self.W1 @ U + self.b1[:, None])  # d x n
        s = (1 - t * t).T  # n x h
        return np.einsum("ih,nh,hj->nij", self.W2, s, self.W1, optimize=True)


def end_rows(Bl, Br):
    d = Bl.shape[0]
    _, Ql, kl = sl.schur(Bl, output="real", sort="ouc")   # first kl Schur vectors span E^u(B_left)
    _, Qr, sr = sl.schur(Br, output="real", sort="iuc")   # first sr span E^s(B_right)
    k = kl
    assert d - sr == k, "unstable dimensions of the ends differ"
    return Ql[:, k:].T.copy(), Qr[:, sr:].T.copy(), k


def end_point(Bend, psi, rho, u):
    d = Bend.shape[0]
    A = Bend - np.eye(d)
    for _ in range(100):
        F = A @ u + rho * psi.value(u[:, None])[:, 0]
        J = A + rho * psi.jac_all(u[:, None])[0]
        du = np.linalg.solve(J, F)
        u = u - du
        if np.linalg.norm(du) <= 1e-15 * (1 + np.linalg.norm(u)):
            break
    J = A + rho * psi.jac_all(u[:, None])[0]
    return u, -np.linalg.solve(J, psi.value(u[:, None])[:, 0])


class Problem:
    def __init__(self, B, P):
        self.B = B
        self.L, self.d = B.shape[0], B.shape[1]
        self.psi = Psi(P)
        self.left, self.right, self.k = end_rows(B[0], B[-1])

    def ends(self, rho, guess):
        um, dm = end_point(self.B[0], self.psi, rho, guess[0])
        up, dp = end_point(self.B[-1], self.psi, rho, guess[1])
        return (um, up), (dm, dp)

    def profile(self, a, b):
        U = np.empty((self.d, self.L + 1))
        half = self.L // 2
        U[:, :half + 1] = a[:, None]
        U[:, half + 1:] = b[:, None]
        return U

    def band_solve(self, M, H):
        """Solves u(l+1) - M(l) u(l) = h(l) with homogeneous end rows for the columns of H (nrhs)."""
        d, L, k = self.d, self.L, self.k
        m = d - k
        N = d * (L + 1)
        lo, up = 2 * d - k - 1, d + k - 1
        ab = np.zeros((lo + up + 1, N))

        def put(r, c, block):  # dense block at rows r.., cols c.. into the band storage
            nr, nc = block.shape
            rr = np.arange(r, r + nr)[:, None]
            cc = np.arange(c, c + nc)[None, :]
            ab[up + rr - cc, np.broadcast_to(cc, (nr, nc))] = block

        put(0, 0, self.left)
        for l in range(L):
            r = m + l * d
            put(r, l * d, -M[l])
            put(r, (l + 1) * d, np.eye(d))
        put(m + L * d, L * d, self.right)
        nrhs = H.shape[0]
        rhs = np.zeros((N, nrhs))
        for j in range(nrhs):
            rhs[m:m + L * d, j] = H[j].T.reshape(-1)
        X = sl.solve_banded((lo, up), ab, rhs, overwrite_ab=True, check_finite=False)
        return [X[:, j].reshape(L + 1, d).T for j in range(nrhs)]

    def linearise(self, rho, w, e, de):
        ub, dub = self.profile(*e), self.profile(*de)
        u = ub + w
        D = self.psi.jac_all(u[:, :self.L])
        M = self.B + rho * D
        R = u[:, 1:] - np.einsum("lij,jl->il", self.B, u[:, :-1]) - rho * self.psi.value(u[:, :-1])
        Rrho = dub[:, 1:] - np.einsum("lij,jl->il", M, dub[:, :-1]) - self.psi.value(u[:, :-1])
        a, b = self.band_solve(M, np.stack([-R, Rrho]))
        return a, b


def sdot(a, b):
    return float((a * b).sum()) / a.shape[1]


def supn(u):
    return float(np.sqrt((u * u).sum(axis=0)).max())


def tangent(b, prev, orient):
    tw, tr = -b, 1.0
    n = np.sqrt(sdot(b, b) + 1.0)
    tw, tr = tw / n, tr / n
    s = sdot(tw, prev[0]) + tr * prev[1] if prev is not None else tr * orient
    return (-tw, -tr) if s < 0 else (tw, tr)


def run(gen, psi_file, steps, ds, out, tol=1e-10, newton_max=8):
    B = np.load(gen)
    P = np.load(psi_file)
    t0 = time.perf_counter()
    p = Problem(B, P)
    d, L = p.d, p.L
    z = np.zeros(d)
    e, de = p.ends(0.0, (z, z))
    w = np.zeros((d, L + 1))
    rho = 0.0
    _, b = p.linearise(0.0, w, e, de)
    t = tangent(b, None, 1.0)
    its = []
    for _ in range(steps):
        w_pred, rho_pred = w + ds * t[0], rho + ds * t[1]
        wc, rc, ec = w_pred.copy(), rho_pred, e
        ok = False
        for it in range(1, newton_max + 1):
            ec, dec = p.ends(rc, ec)
            a, b = p.linearise(rc, wc, ec, dec)
            g = sdot(t[0], wc - w_pred) + t[1] * (rc - rho_pred)
            drho = (g + sdot(t[0], a)) / (sdot(t[0], b) - t[1])
            dw = a - drho * b
            wc += dw
            rc += drho
            if supn(dw) + abs(drho) <= tol * (1 + supn(wc)):
                ok = True
                break
        if not ok:
            raise SystemExit("continuation_peer: corrector did not converge at rho = %g" % rc)
        ec, de = p.ends(rc, ec)
        w, rho, e = wc, rc, ec
        t = tangent(b, t, 1.0)
        its.append(it)
    secs = time.perf_counter() - t0
    u = p.profile(*e) + w
    np.save(out, u)
    print(json.dumps({"seconds": secs, "rho": rho, "steps": steps, "newton": its, "sup_u": supn(u)}))


if __name__ == "__main__":
    if len(sys.argv) == 7 and sys.argv[1] == "--write":
        write(sys.argv[2], sys.argv[3], int(sys.argv[4]), int(sys.argv[5]), int(sys.argv[6]))
    elif len(sys.argv) == 7 and sys.argv[1] == "--run":
        run(sys.argv[2], sys.argv[3], int(sys.argv[4]), float(sys.argv[5]), sys.argv[6])
    else:
        sys.exit(__doc__)
