"""Lanczos with full reorthogonalisation: the top-k eigenpairs of a symmetric operator known only
through matrix-vector products (coupling paper §6.3 E6: the top Hessian / Gauss-Newton
eigenvectors of a trained model).

    res = lanczos_top(matvec, n, k, tol=1e-10, max_iter=None, seed=0)
    res.values      (k,)   the k largest eigenvalues (algebraic), descending
    res.vectors     (n, k) orthonormal Ritz vectors
    res.residuals   (k,)   ||A y_i - theta_i y_i|| / max(|theta_1|, tiny), computed with k extra products
    res.iterations  Lanczos steps taken (= products, without the k of the residuals)
    res.converged   every estimate |beta_m s_{m,i}| <= tol * |theta_1| at the end

Why here, in NumPy beside the PyTorch models, and not in tokdyn's C++ analysis layer: the operator
is a Hessian- or Gauss-Newton-vector product of a PyTorch model, so every product is a PyTorch
double backward; the Krylov loop in the same process hands the vectors over without a copy,
where a C++ loop would send two n-vectors (n up to ~1e6) across a process boundary per step. The
loop itself is ~60 lines of dense linear algebra that NumPy does as fast as Eigen would; it is
tested on its own (tests/train/test_lanczos.py) against operators with known spectra.

Algorithm (Golub & Van Loan 10.1, with full reorthogonalisation): q_1 a seeded random unit vector,
w = A q_j - beta_{j-1} q_{j-1}, alpha_j = <q_j, w>, w -= alpha_j q_j, then w is orthogonalised
against every q_1..q_j twice (classical Gram-Schmidt twice: orthogonal to working precision), and
beta_j = ||w||, q_{j+1} = w / beta_j. The Ritz values are the eigenvalues theta_i of the
tridiagonal T_m (alpha on the diagonal, beta beside it) with eigenvectors s_i; the residual of the
Ritz pair (theta_i, V_m s_i) is beta_m |s_{m,i}|. Breakdown (beta_j <= 1e-13 ||A||_est: the
Krylov space is invariant) continues with a fresh random vector orthogonal to the basis and
beta_j = 0, so eigenvalues of multiplicity > 1 and operators of low rank are found too. The loop
stops when the k largest Ritz values have estimates below tol * |theta_1| (never right after a
breakdown), or at max_iter, or at n. As every Lanczos method, it can miss a copy of a repeated
eigenvalue that the start vector and the restarts do not reach; the tests cover multiplicity 2.
Memory: the basis, (max_iter + 1) x n doubles (rows).
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Callable, Optional

import numpy as np


@dataclass
class LanczosResult:
    values: np.ndarray
    vectors: np.ndarray
    residuals: np.ndarray
    estimates: np.ndarray
    iterations: int
    converged: bool


def _ritz(alpha, beta, m):
    T = np.diag(np.asarray(alpha[:m], dtype=np.float64))
    if m > 1:
        off = np.asarray(beta[:m - 1], dtype=np.float64)
        T += np.diag(off, 1) + np.diag(off, -1)
    theta, S = np.linalg.eigh(T)
    return theta[::-1], S[:, ::-1]  # descending


def lanczos_top(matvec: Callable[[np.ndarray], np.ndarray], n: int, k: int, *, tol: float = 1e-10,
                max_iter: Optional[int] = None, seed: int = 0, v0: Optional[np.ndarray] = None,
                check_every: int = 5) -> LanczosResult:
    """The k largest eigenpairs of the symmetric operator `matvec` on R^n (see the module's doc)."""
    if not (isinstance(n, (int, np.integer)) and n >= 1):
        raise ValueError(f"lanczos: n = {n!r}; expected a positive integer")
    if not (isinstance(k, (int, np.integer)) and 1 <= k <= n):
        raise ValueError(f"lanczos: k = {k!r}; expected an integer in [1, n = {n}]")
    if not (tol > 0 and np.isfinite(tol)):
        raise ValueError(f"lanczos: tol = {tol!r}; expected a positive number")
    m_max = int(min(n, max_iter if max_iter is not None else 8 * k + 100))
    if m_max < k:
        raise ValueError(f"lanczos: max_iter = {max_iter}; expected at least k = {k}")
    rng = np.random.default_rng(seed)
    V = np.zeros((m_max + 1, n), dtype=np.float64)  # rows: contiguous basis vectors
    q = rng.standard_normal(n) if v0 is None else np.array(v0, dtype=np.float64).reshape(n)
    nq = np.linalg.norm(q)
    if not (nq > 0 and np.isfinite(nq)):
        raise ValueError("lanczos: the start vector is zero or not finite")
    V[0] = q / nq
    alpha, beta = [], []
    norm_est = 0.0
    m = 0
    converged = False
    theta = S = None
    for j in range(m_max):
        w = np.asarray(matvec(V[j].copy()), dtype=np.float64).reshape(n)
        if not np.all(np.isfinite(w)):
            raise FloatingPointError(f"lanczos: the operator returned a non-finite vector at step {j}")
        if j > 0:
            w = w - beta[j - 1] * V[j - 1]
        a = float(V[j] @ w)
        w = w - a * V[j]
        Vj = V[:j + 1]
        for _ in range(2):  # classical Gram-Schmidt twice
            w = w - (Vj @ w) @ Vj
        b = float(np.linalg.norm(w))
        alpha.append(a)
        m = j + 1
        norm_est = max(norm_est, abs(a) + b + (beta[j - 1] if j > 0 else 0.0))
        if m == n:
            beta.append(0.0)
            break
        breakdown = b <= 1e-13 * max(norm_est, np.finfo(float).tiny)
        # No test right after a breakdown: the Krylov space of one start vector holds one vector of
        # each eigenspace, so a repeated eigenvalue shows only after the restart.
        if not breakdown and m >= k and (m % check_every == 0 or m == m_max):
            theta, S = _ritz(alpha, beta, m)
            est = b * np.abs(S[m - 1, :k])
            scale = max(abs(theta[0]), np.finfo(float).tiny)
            if np.all(est <= tol * scale):
                beta.append(b)
                converged = True
                break
        if breakdown:
            # invariant subspace: continue with a random vector orthogonal to the basis
            r = rng.standard_normal(n)
            for _ in range(2):
                r = r - (Vj @ r) @ Vj
            V[j + 1] = r / np.linalg.norm(r)
            beta.append(0.0)
        else:
            V[j + 1] = w / b
            beta.append(b)
    theta, S = _ritz(alpha, beta, m)
    kk = min(k, m)
    Y = V[:m].T @ S[:, :kk]
    # re-orthonormalise the Ritz vectors (they are orthonormal to working precision already)
    Y, _ = np.linalg.qr(Y)
    Y = Y * np.sign(np.sum(Y * (V[:m].T @ S[:, :kk]), axis=0))
    vals = np.array([float(Y[:, i] @ np.asarray(matvec(Y[:, i]), dtype=np.float64)) for i in range(kk)])
    # residuals with the Rayleigh quotients (one product each)
    res = np.empty(kk)
    scale = max(abs(theta[0]), np.finfo(float).tiny)
    for i in range(kk):
        AY = np.asarray(matvec(Y[:, i]), dtype=np.float64).reshape(n)
        res[i] = np.linalg.norm(AY - vals[i] * Y[:, i]) / scale
    order = np.argsort(-vals, kind="stable")
    last_b = beta[m - 1] if len(beta) >= m else 0.0
    est = last_b * np.abs(S[m - 1, :kk])
    if not converged:
        converged = bool(np.all(est <= tol * scale))
    return LanczosResult(values=vals[order], vectors=Y[:, order], residuals=res[order], estimates=est[order],
                         iterations=m, converged=converged)


def known_spectrum_operator(eigenvalues: np.ndarray, seed: int = 0, rotate: bool = True):
    """(matvec, dense matrix or None, eigenvectors or None) of Q diag(eigenvalues) Q^T with Q a
    seeded random orthogonal matrix (rotate), or of the diagonal itself (rotate = False: the
    eigenvectors are the unit vectors, no dense matrix is formed)."""
    lam = np.asarray(eigenvalues, dtype=np.float64)
    n = lam.size
    if not rotate:
        return (lambda v: lam * v), None, None
    rng = np.random.default_rng(seed)
    Q, R = np.linalg.qr(rng.standard_normal((n, n)))
    Q = Q * np.sign(np.diag(R))
    A = (Q * lam) @ Q.T
    A = 0.5 * (A + A.T)
    return (lambda v: A @ v), A, Q


def angles(U: np.ndarray, W: np.ndarray) -> np.ndarray:
    """Angle (radians) between each column of U and the matching column of W (sign-free)."""
    U = U / np.linalg.norm(U, axis=0)
    W = W / np.linalg.norm(W, axis=0)
    dots = np.sum(U * W, axis=0)
    c = np.abs(dots)
    s = np.linalg.norm(U - W * dots, axis=0)  # the component of u orthogonal to w (accurate for small angles)
    return np.arctan2(s, c)
