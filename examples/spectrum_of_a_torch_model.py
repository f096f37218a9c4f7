#!/usr/bin/python3
"""Lyapunov spectrum of a small PyTorch transformer stack through tokdyn's callbacks, checked against
a straightforward PyTorch computation (autograd Jacobian of every layer + torch.linalg.qr).

    PYTHONPATH=build/python /usr/bin/python3 examples/spectrum_of_a_torch_model.py

The model is written here: L Pre-LN blocks (single-head softmax attention + a tanh MLP) on T tokens
of dimension d, with weights drawn once (a weight-tied stack). tokdyn advances the state with
`step` and the k tangents with `jvp` (torch.func.jvp under vmap: k tangents in one call), and runs
its Benettin QR, Bohl intervals and hyperbolicity decision on them. scripts/bench_python.py times
the same two computations on a larger stack (it imports `make_stack` and `torch_spectrum`).
"""
import math
import sys

import numpy as np
import torch

try:  # PyTorch >= 2.0
    from torch.func import jvp as fjvp, vmap
except ImportError:  # Debian 12's PyTorch 1.13: functorch
    from functorch import jvp as fjvp, vmap

import tokdyn

torch.set_default_dtype(torch.float64)


def make_stack(T, d, d_ff, k, seed=0):
    """The block, tokdyn's step and jvp callbacks, a start state X0 [T, d] and a frame V0 [k, T, d]."""
    g = torch.Generator().manual_seed(seed)
    W = {n: torch.randn(*s, generator=g) / math.sqrt(s[1]) for n, s in
         {"q": (d, d), "k": (d, d), "v": (d, d), "o": (d, d), "w1": (d_ff, d), "w2": (d, d_ff)}.items()}

    def rms(x):
        return x / torch.sqrt((x * x).mean(-1, keepdim=True) + 1e-6)

    def block(x):
        h = rms(x)
        a = torch.softmax((h @ W["q"].T) @ (h @ W["k"].T).T / math.sqrt(d), dim=-1)
        x = x + 0.5 * (a @ (h @ W["v"].T)) @ W["o"].T
        return x + 0.5 * torch.tanh(rms(x) @ W["w1"].T) @ W["w2"].T

    def step(X, l):
        with torch.no_grad():
            return block(torch.from_numpy(X)).numpy()

    def jvp(X, V, l):
        x = torch.from_numpy(X)
        return vmap(lambda v: fjvp(block, (x,), (v,))[1])(torch.from_numpy(V)).numpy()

    X0 = torch.randn(T, d, generator=g).numpy()
    Q0 = torch.linalg.qr(torch.randn(T * d, k, generator=torch.Generator().manual_seed(seed + 1)))[0]
    V0 = Q0.T.reshape(k, T, d).contiguous().numpy()  # the same initial frame for both computations
    return block, step, jvp, X0, V0


def torch_spectrum(block, X0, V0, L, burn_in=0):
    """The straightforward reference: the full Jacobian of each layer by autograd, QR in PyTorch
    (diag R > 0), the mean of log R_ii over layers burn_in+1..L."""
    k, T, d = V0.shape
    x = torch.from_numpy(X0)
    Q = torch.from_numpy(V0).reshape(k, T * d).T.clone()
    logs = []
    for l in range(1, L + 1):
        J = torch.autograd.functional.jacobian(block, x).reshape(T * d, T * d)
        Q, R = torch.linalg.qr(J @ Q)
        s = torch.sign(torch.diagonal(R))
        Q, R = Q * s, R * s[:, None]
        if l > burn_in:
            logs.append(torch.log(torch.diagonal(R)))
        with torch.no_grad():
            x = block(x)
    return torch.stack(logs).mean(0).numpy()


if __name__ == "__main__":
    T, d, d_ff, L, k = 6, 8, 16, 60, 4
    block, step, jvp, X0, V0 = make_stack(T, d, d_ff, k)
    res = tokdyn.depth_spectrum(step, jvp, X0, depth=L, k=k, burn_in=10, V0=V0)
    ref = torch_spectrum(block, X0, V0, L, burn_in=10)
    print("tokdyn  mu:", np.array2string(res["mu"], precision=6))
    print("PyTorch mu:", np.array2string(ref, precision=6))
    print("dichotomy spectrum:", [(round(a, 4), round(b, 4)) for a, b in res["dichotomy_spectrum"]], "hyperbolic:", res["hyperbolic"])
    # Same frame, same maps: the exponents agree to round-off (QR sign conventions are fixed alike).
    err = np.max(np.abs(res["mu"] - ref))
    print(f"max |mu_tokdyn - mu_torch| = {err:.2e}")
    sys.exit(0 if err < 1e-9 else 1)
