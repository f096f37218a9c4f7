"""Lanczos with full reorthogonalisation (python/tokdyn_train/lanczos.py) on operators with known
spectra: eigenvalues to ~1e-10 relative, eigenvector angles, a large diagonal, repeated eigenvalues,
low rank, and refusals."""
import numpy as np
import pytest

from tokdyn_train.lanczos import angles, known_spectrum_operator, lanczos_top


def test_rotated_known_spectrum():
    rng = np.random.default_rng(1)
    k = 10
    lam = np.concatenate([10.0 * 0.8 ** np.arange(k), rng.uniform(-1.0, 1.0, 290)])
    mv, A, Q = known_spectrum_operator(lam, seed=3)
    r = lanczos_top(mv, lam.size, k, tol=1e-12, seed=0)
    assert r.converged
    assert np.max(np.abs(r.values - lam[:k]) / lam[:k]) <= 1e-10
    assert np.max(angles(r.vectors, Q[:, :k])) <= 1e-8
    assert np.max(r.residuals) <= 1e-10
    # the Ritz vectors are orthonormal
    assert np.max(np.abs(r.vectors.T @ r.vectors - np.eye(k))) <= 1e-12
    # against a dense eigendecomposition of the same matrix
    ref = np.sort(np.linalg.eigvalsh(A))[::-1][:k]
    assert np.max(np.abs(r.values - ref) / np.abs(ref)) <= 1e-10


def test_large_diagonal():
    rng = np.random.default_rng(2)
    lam = np.concatenate([np.linspace(5.0, 3.0, 8), rng.uniform(-1.0, 1.0, 100000)])
    mv, _, _ = known_spectrum_operator(lam, rotate=False)
    r = lanczos_top(mv, lam.size, 8, tol=1e-12, seed=4)
    assert r.converged
    assert np.max(np.abs(r.values - lam[:8]) / lam[:8]) <= 1e-10
    E = np.zeros((lam.size, 8))
    E[np.arange(8), np.arange(8)] = 1.0
    assert np.max(angles(r.vectors, E)) <= 1e-8


def test_negative_top_and_indefinite():
    # largest algebraic, not largest magnitude: a big negative eigenvalue is not "top"
    lam = np.concatenate([[-50.0, 2.0, 1.5], np.linspace(-1.0, 1.0, 200)])
    mv, _, _ = known_spectrum_operator(lam, seed=5)
    r = lanczos_top(mv, lam.size, 2, tol=1e-12)
    assert np.allclose(r.values, [2.0, 1.5], rtol=1e-10, atol=0)


def test_repeated_and_low_rank():
    lam = np.zeros(300)
    lam[:3] = [4.0, 4.0, 2.0]
    mv, _, _ = known_spectrum_operator(lam, seed=5)
    r = lanczos_top(mv, 300, 3, tol=1e-12, seed=1)
    assert np.allclose(r.values, [4.0, 4.0, 2.0], rtol=0, atol=1e-10)
    small = np.array([3.0, 1.0, -2.0])
    mv, _, _ = known_spectrum_operator(small, seed=0)
    r = lanczos_top(mv, 3, 3)
    assert np.allclose(r.values, [3.0, 1.0, -2.0], atol=1e-12)


def test_refusals():
    mv = lambda v: v  # noqa: E731
    with pytest.raises(ValueError):
        lanczos_top(mv, 10, 0)
    with pytest.raises(ValueError):
        lanczos_top(mv, 10, 11)
    with pytest.raises(ValueError):
        lanczos_top(mv, 10, 2, tol=0.0)
    with pytest.raises(FloatingPointError):
        lanczos_top(lambda v: v * np.nan, 10, 2)
