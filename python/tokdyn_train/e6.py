"""Experiment E6 of the coupling paper (§6.3, assumption (A6)): the PyTorch half of tokdyn's preset
`coupling-e6` (src/experiments/coupling_e6.cpp), which runs it as a child process and does the
dichotomy (projectors P_±) and the slow / fast decomposition in C++ from the files written here.

    /usr/bin/python3 -m tokdyn_train.e6 step --checkpoint DIR --ids IDS.npy --out DIR [options]
    /usr/bin/python3 -m tokdyn_train.e6 train-smoke --out DIR [--steps N --every E --seed S]

`step`: one checkpoint (config.json + model.safetensors of a family tokdyn_train knows), in float64.
  * the loss: mean next-token cross-entropy over the rows of IDS.npy [batch, context] (int):
    L(W) = mean_{b, t < context-1} -log softmax(f_W(ids[b, :t+1]))[ids[b, t+1]];
  * the curvature operator (--curvature): `hessian`, H v = d/de grad L(W + e v) (double backward),
    or `gauss-newton`, G v = J^T H_out J v with J = d logits / dW and H_out the Hessian of the mean
    cross-entropy in the logits (per predicted position (diag(p) - p p^T) / positions);
  * its top --k eigenpairs (largest algebraic) by Lanczos with full reorthogonalisation
    (tokdyn_train.lanczos), and --random seeded Gaussian unit directions (the baseline), each with
    its Rayleigh quotient v^T H v;
  * the cocycle along the fixed input x_0 = embed(ids[0, :tokens]): the residual stream x_l of the
    model's blocks, state R^N with N = tokens x d (token-major: index t d + i), and for each layer
    l of the window [first, last) the layer Jacobian J(l) = D_x F_l(x_l) = I + A(l) (the cocycle's
    map B(l); dense, N x N, forward mode: jacfwd);
  * for each direction v: dA(l) = dJ(l) = d/de D_x F_l(x_l(W + e v); W + e v) at e = 0 (--delta total: x_l
    moves with W, the spec's [inferred] convention) or with x_l held (--delta direct), by forward
    mode over forward mode (functorch jvp of jacfwd);
  * checks: Lanczos on a known spectrum (Q diag(lam) Q^T), Lanczos against LAPACK's eigh of the
    compressed operator Q_m^T H Q_m (m random orthonormal directions, the real model's operator),
    symmetry <u, H w> = <w, H u>, the product against central differences of gradients (hessian) or
    of the logits (gauss-newton: J v), and dA against central differences of A(W +- h v).
  Writes OUT/J.npy [layers, N, N], OUT/dA_top.npy [k, layers, N, N], OUT/dA_random.npy
  [random, layers, N, N] (float64), OUT/info.json last.

`train-smoke`: a tiny gpt2 (tokdyn's tiny with a vocabulary of --vocab ids) trained with AdamW for
  --steps steps on sequences of a seeded random Markov chain (each id has three successors, with
  probabilities 0.6, 0.3, 0.1), written as tokdyn train's layout OUT/checkpoints/step-NNNNNNN/
  (config.json, model.safetensors) at step 0, every --every steps and the last step, and
  OUT/ids.npy: --batch held-out sequences of --context ids of the same chain (another stream).

Exit status: 0 done; 2 bad input (one line "error: ..." on stderr); 1 anything else.
Threads: torch and the BLAS pools run on --threads (default 1) threads.
"""
from __future__ import annotations

import argparse
import json
import math
import os
import sys
from typing import Dict, List, Sequence, Tuple

import numpy as np


class InputError(ValueError):
    pass


def _set_threads(n: int) -> None:
    for k in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
        os.environ[k] = str(n)
    import torch
    torch.set_num_threads(n)


# --------------------------------------------------------------------------- model access


def _torch():
    import torch
    return torch


def load_double(step_dir: str):
    """(family, float64 model in eval mode) of one checkpoint folder."""
    from .families import load_pretrained
    if not os.path.isfile(os.path.join(step_dir, "config.json")):
        raise InputError(f"checkpoint '{step_dir}': no config.json")
    try:
        family, model = load_pretrained(step_dir)
    except (ValueError, KeyError, OSError) as e:
        raise InputError(f"checkpoint '{step_dir}': {str(e).splitlines()[0] if str(e) else type(e).__name__}")
    model = model.double()
    model.eval()
    return family, model


def _wrapper(model):
    torch = _torch()

    class Wrap(torch.nn.Module):
        """One module whose forward reaches the parts E6 needs, for functional_call."""

        def __init__(self, m):
            super().__init__()
            self.m = m

        def forward(self, mode: str, a, layer: int = 0):
            if mode == "hidden":
                return torch.stack(self.m.hidden_states(a))
            if mode == "block":
                return self.m.blocks()[layer](a)
            return self.m(a)

    return Wrap(model)


class Curvature:
    """The loss of `ids` [batch, context] and its curvature operator ('hessian' or 'gauss-newton')
    on the flattened parameters (named_parameters order, tied tensors once)."""

    def __init__(self, model, ids, kind: str):
        torch = _torch()
        self.kind = kind
        self.params = [p for _, p in model.named_parameters()]
        self.shapes = [p.shape for p in self.params]
        self.n = int(sum(p.numel() for p in self.params))
        inp, tgt = ids[:, :-1], ids[:, 1:]
        self.model, self.inp, self.tgt = model, inp, tgt
        logits = model(inp)
        V = logits.shape[-1]
        self.loss = torch.nn.functional.cross_entropy(logits.reshape(-1, V), tgt.reshape(-1))
        if kind == "hessian":
            g = torch.autograd.grad(self.loss, self.params, create_graph=True, allow_unused=True)
            self.g = self._flat(g)
        elif kind == "gauss-newton":
            self.logits = logits
            self.p = torch.softmax(logits.detach(), dim=-1)
            self.positions = inp.numel()
            self.y = torch.zeros_like(logits, requires_grad=True)
            gy = torch.autograd.grad(logits, self.params, grad_outputs=self.y, create_graph=True, allow_unused=True)
            self.gy = self._flat(gy)
        else:
            raise InputError(f"curvature '{kind}': expected hessian or gauss-newton")

    def _flat(self, parts) -> "torch.Tensor":
        torch = _torch()
        return torch.cat([(torch.zeros(s, dtype=torch.float64) if x is None else x).reshape(-1)
                          for x, s in zip(parts, self.shapes)])

    def split(self, v: np.ndarray):
        torch = _torch()
        out, at = [], 0
        t = torch.from_numpy(np.ascontiguousarray(v, dtype=np.float64))
        for s in self.shapes:
            m = int(np.prod(s)) if len(s) else 1
            out.append(t[at:at + m].reshape(s))
            at += m
        return out

    def out_hessian(self, u):
        """H_out u: the Hessian of the mean cross-entropy in the logits applied to u (logit-shaped)."""
        p = self.p
        return (p * u - p * (p * u).sum(dim=-1, keepdim=True)) / self.positions

    def jv(self, v: np.ndarray):
        """J v (logit-shaped) by the double-vjp trick (gauss-newton only)."""
        torch = _torch()
        return torch.autograd.grad(self.gy, self.y, grad_outputs=torch.from_numpy(np.ascontiguousarray(v)),
                                   retain_graph=True)[0]

    def matvec(self, v: np.ndarray) -> np.ndarray:
        torch = _torch()
        vt = torch.from_numpy(np.ascontiguousarray(v, dtype=np.float64))
        if self.kind == "hessian":
            hv = torch.autograd.grad(self.g, self.params, grad_outputs=vt, retain_graph=True, allow_unused=True)
        else:
            w = self.out_hessian(self.jv(v))
            hv = torch.autograd.grad(self.logits, self.params, grad_outputs=w, retain_graph=True, allow_unused=True)
        return self._flat(hv).detach().numpy().copy()

    def shifted(self, v: np.ndarray, h: float):
        """(gradient, logits) of the loss at W + h v, on a copy of the model (the operator's own
        graph and weights stay untouched), for finite differences."""
        import copy
        torch = _torch()
        m = copy.deepcopy(self.model)
        params = [p for _, p in m.named_parameters()]
        with torch.no_grad():
            for p, d in zip(params, self.split(v)):
                p.add_(h * d)
        logits = m(self.inp)
        loss = torch.nn.functional.cross_entropy(logits.reshape(-1, logits.shape[-1]), self.tgt.reshape(-1))
        g = torch.autograd.grad(loss, params, allow_unused=True)
        return self._flat(g).detach().numpy().copy(), logits.detach()


class Cocycle:
    """A(l) = D_x F_l(x_l) and its directional derivatives dA(l)[v] along the input `ids_c` [1, tokens]."""

    def __init__(self, model, ids_c, first: int, last: int, delta: str):
        torch = _torch()
        self.wrap = _wrapper(model)
        named = list(self.wrap.named_parameters())
        self.names = [n for n, _ in named]
        self.params = tuple(p.detach() for _, p in named)
        self.ids_c, self.window, self.delta = ids_c, list(range(first, last)), delta
        from torch.nn.utils.stateless import functional_call
        self._call = functional_call
        with torch.no_grad():
            self.hidden0 = functional_call(self.wrap, dict(zip(self.names, self.params)), ("hidden", ids_c)).detach()
        self.T, self.d = int(self.hidden0.shape[2]), int(self.hidden0.shape[3])
        self.N = self.T * self.d

    def _jacobians(self, *ps):
        from functorch import jacfwd
        torch = _torch()
        d = dict(zip(self.names, ps))
        hs = self._call(self.wrap, d, ("hidden", self.ids_c)) if self.delta == "total" else self.hidden0
        out = []
        for l in self.window:
            f = lambda x, l=l: self._call(self.wrap, d, ("block", x, l))  # noqa: E731
            J = jacfwd(f)(hs[l])
            out.append(J.reshape(self.N, self.N))
        return torch.stack(out)

    def A(self):
        torch = _torch()
        with torch.no_grad():
            return self._jacobians(*self.params).detach().numpy().copy()

    def dA(self, parts: Sequence) -> np.ndarray:
        from functorch import jvp
        _, t = jvp(self._jacobians, self.params, tuple(x.detach() for x in parts))
        return t.detach().numpy().copy()

    def A_at(self, parts: Sequence, h: float) -> np.ndarray:
        torch = _torch()
        ps = tuple(p + h * x for p, x in zip(self.params, parts))
        with torch.no_grad():
            return self._jacobians(*ps).detach().numpy().copy()


# --------------------------------------------------------------------------- checks


def lanczos_known_spectrum(k: int, tol: float, seed: int) -> Dict[str, float]:
    """Lanczos on Q diag(lam) Q^T (n = 400, Q seeded random orthogonal): the top k of lam are
    10 * 0.8^i, the rest uniform in [-1, 1]."""
    from .lanczos import angles, known_spectrum_operator, lanczos_top
    n = 400
    rng = np.random.default_rng(seed + 17)
    lam = np.concatenate([10.0 * 0.8 ** np.arange(k), rng.uniform(-1.0, 1.0, n - k)])
    mv, _, Q = known_spectrum_operator(lam, seed + 18)
    r = lanczos_top(mv, n, k, tol=min(tol, 1e-12), seed=seed)
    return {"n": n, "k": k, "max_rel_eig_error": float(np.max(np.abs(r.values - lam[:k]) / np.abs(lam[:k]))),
            "max_angle": float(np.max(angles(r.vectors, Q[:, :k]))), "iterations": r.iterations}


def lanczos_vs_dense(op: Curvature, k: int, m: int, seed: int) -> Dict[str, float]:
    """The compressed operator C = Q^T H Q (Q: m seeded random orthonormal columns of R^n), formed
    densely with m products, its eigenvalues by LAPACK (numpy eigh) against Lanczos on u -> Q^T H Q u."""
    from .lanczos import lanczos_top
    rng = np.random.default_rng(seed + 29)
    Q, _ = np.linalg.qr(rng.standard_normal((op.n, m)))
    HQ = np.stack([op.matvec(Q[:, j]) for j in range(m)], axis=1)
    C = Q.T @ HQ
    asym = float(np.max(np.abs(C - C.T)) / max(np.max(np.abs(C)), 1e-300))
    C = 0.5 * (C + C.T)
    ref = np.sort(np.linalg.eigvalsh(C))[::-1]
    kk = min(k, m // 2)
    r = lanczos_top(lambda u: Q.T @ op.matvec(Q @ u), m, kk, tol=1e-13, seed=seed)
    scale = max(abs(ref[0]), 1e-300)
    return {"m": m, "k": kk, "max_rel_eig_error": float(np.max(np.abs(r.values - ref[:kk])) / scale),
            "asymmetry": asym}


def product_checks(op: Curvature, seed: int) -> Dict[str, float]:
    rng = np.random.default_rng(seed + 41)
    u = rng.standard_normal(op.n)
    w = rng.standard_normal(op.n)
    u /= np.linalg.norm(u)
    w /= np.linalg.norm(w)
    Hu, Hw = op.matvec(u), op.matvec(w)
    sym = abs(float(u @ Hw) - float(w @ Hu)) / max(np.linalg.norm(Hu), np.linalg.norm(Hw), 1e-300)
    h = 1e-4
    if op.kind == "hessian":
        gp, _ = op.shifted(u, h)
        gm, _ = op.shifted(u, -h)
        fd = (gp - gm) / (2 * h)
        err = float(np.linalg.norm(fd - Hu) / max(np.linalg.norm(Hu), 1e-300))
        what = "|H u - (g(W + h u) - g(W - h u)) / 2h| / |H u|, h = 1e-4"
    else:
        _, zp = op.shifted(u, h)
        _, zm = op.shifted(u, -h)
        fdJ = (zp - zm) / (2 * h)
        _torch()
        Ju = op.jv(u)
        err = float((fdJ - Ju).norm() / max(float(Ju.norm()), 1e-300))
        what = "|J u - (z(W + h u) - z(W - h u)) / 2h| / |J u| (J = d logits / dW), h = 1e-4"
    return {"symmetry": float(sym), "fd_rel_error": err, "fd_what": what}


# --------------------------------------------------------------------------- step


def analyse_step(a) -> Dict:
    torch = _torch()
    from .lanczos import lanczos_top
    family, model = load_double(a.checkpoint)
    try:
        ids = np.load(a.ids)
    except (OSError, ValueError) as e:
        raise InputError(f"ids '{a.ids}': {e}")
    if ids.ndim != 2 or ids.shape[1] < 2 or ids.shape[0] < 1 or not np.issubdtype(ids.dtype, np.integer):
        raise InputError(f"ids '{a.ids}': expected integer ids [batch, context >= 2], got {ids.dtype} {list(ids.shape)}")
    vocab = int(model.config.get("vocab_size", 0))
    if ids.min() < 0 or ids.max() >= vocab:
        raise InputError(f"ids: values in [{ids.min()}, {ids.max()}]; the model's vocabulary has {vocab} ids")
    maxpos = model.max_tokens()
    if maxpos is not None and ids.shape[1] - 1 > maxpos:
        raise InputError(f"context {ids.shape[1]}: longer than the model's {maxpos} positions + 1")
    L = model.n_layer
    last = L if a.last < 0 else a.last
    if not (0 <= a.first < last <= L):
        raise InputError(f"depth window [first, last) = [{a.first}, {a.last}): expected 0 <= first < last <= {L} "
                         f"(the model has {L} layers; last = -1 means {L})")
    if a.tokens > ids.shape[1]:
        raise InputError(f"tokens = {a.tokens}: longer than the context of the ids ({ids.shape[1]})")
    ids_t = torch.from_numpy(ids.astype(np.int64))
    op = Curvature(model, ids_t, a.curvature)
    if a.k > op.n:
        raise InputError(f"k = {a.k}: more than the model's {op.n} parameters")
    if a.max_iter is not None and a.max_iter < a.k:
        raise InputError(f"max-iter = {a.max_iter}: fewer Lanczos steps than k = {a.k}")
    res = lanczos_top(op.matvec, op.n, a.k, tol=a.tol, max_iter=a.max_iter, seed=a.seed)
    rng = np.random.default_rng(a.seed + 1)
    R = rng.standard_normal((op.n, a.random))
    R /= np.linalg.norm(R, axis=0)
    rq = [float(R[:, j] @ op.matvec(R[:, j])) for j in range(a.random)]

    coc = Cocycle(model, ids_t[:1, :a.tokens], a.first, last, a.delta)
    A = coc.A()
    os.makedirs(a.out, exist_ok=True)
    np.save(os.path.join(a.out, "J.npy"), A)
    dtop = np.stack([coc.dA(op.split(res.vectors[:, i])) for i in range(res.values.size)])
    np.save(os.path.join(a.out, "dA_top.npy"), dtop)
    drnd = np.stack([coc.dA(op.split(R[:, j])) for j in range(a.random)])
    np.save(os.path.join(a.out, "dA_random.npy"), drnd)

    info = {"family": family, "n_params": op.n, "n_layer": L, "d": coc.d, "tokens": coc.T, "N": coc.N,
            "first": a.first, "last": last, "loss": float(op.loss.detach()), "curvature": a.curvature, "delta": a.delta,
            "eigenvalues": [float(x) for x in res.values], "residuals": [float(x) for x in res.residuals],
            "lanczos_iterations": res.iterations, "lanczos_converged": bool(res.converged),
            "random_rayleigh": rq, "ids_shape": list(ids.shape)}
    if a.checks:
        info["known_spectrum"] = lanczos_known_spectrum(a.k, a.tol, a.seed)
        info["dense"] = lanczos_vs_dense(op, a.k, min(op.n, max(30, 2 * a.k + 10)), a.seed)
        info["products"] = product_checks(op, a.seed)
        # dA against central differences of A, along the top direction
        h = 1e-4
        parts = op.split(res.vectors[:, 0])
        fd = (coc.A_at(parts, h) - coc.A_at(parts, -h)) / (2 * h)
        info["dA_fd_rel_error"] = float(np.linalg.norm(fd - dtop[0]) / max(np.linalg.norm(dtop[0]), 1e-300))
    tmp = os.path.join(a.out, "info.json.tmp")
    with open(tmp, "w") as f:
        json.dump(info, f, indent=1)
    os.replace(tmp, os.path.join(a.out, "info.json"))
    return info


# --------------------------------------------------------------------------- smoke checkpoint


def markov_sequences(rng: np.random.Generator, succ: np.ndarray, n: int, length: int) -> np.ndarray:
    vocab = succ.shape[0]
    x = np.empty((n, length), dtype=np.int64)
    x[:, 0] = rng.integers(0, vocab, size=n)
    choice = rng.choice(3, size=(n, length), p=[0.6, 0.3, 0.1])
    for t in range(1, length):
        x[:, t] = succ[x[:, t - 1], choice[:, t]]
    return x


def train_smoke(out: str, steps: int, every: int, seed: int, vocab: int, context: int, batch: int) -> None:
    torch = _torch()
    from .families import make, named_config, save_pretrained
    torch.use_deterministic_algorithms(True)
    rng = np.random.default_rng(seed)
    succ = rng.integers(0, vocab, size=(vocab, 3))
    cfg = named_config("gpt2", "tiny", vocab)
    model = make("gpt2", cfg, seed)
    opt = torch.optim.AdamW(model.parameters(), lr=3e-3, betas=(0.9, 0.95), weight_decay=0.0)
    drng = np.random.default_rng([seed, 1])

    def save(step: int) -> None:
        save_pretrained(model, os.path.join(out, "checkpoints", f"step-{step:07d}"))

    save(0)
    for step in range(1, steps + 1):
        x = torch.from_numpy(markov_sequences(drng, succ, 16, context))
        logits = model(x[:, :-1])
        loss = torch.nn.functional.cross_entropy(logits.reshape(-1, vocab), x[:, 1:].reshape(-1))
        opt.zero_grad()
        loss.backward()
        opt.step()
        if step % every == 0 or step == steps:
            save(step)
    held = markov_sequences(np.random.default_rng([seed, 2]), succ, batch, context)
    np.save(os.path.join(out, "ids.npy"), held)


# --------------------------------------------------------------------------- CLI


class _Parser(argparse.ArgumentParser):
    def error(self, message):
        print(f"error: tokdyn_train.e6: {message}", file=sys.stderr)
        sys.exit(2)


def main(argv=None) -> int:
    p = _Parser(prog="python -m tokdyn_train.e6")
    sub = p.add_subparsers(dest="cmd", required=True)
    s = sub.add_parser("step")
    s.add_argument("--checkpoint", required=True)
    s.add_argument("--ids", required=True)
    s.add_argument("--out", required=True)
    s.add_argument("--k", type=int, default=6)
    s.add_argument("--random", type=int, default=6)
    s.add_argument("--curvature", choices=("hessian", "gauss-newton"), default="hessian")
    s.add_argument("--first", type=int, default=0)
    s.add_argument("--last", type=int, default=-1)
    s.add_argument("--tokens", type=int, default=8)
    s.add_argument("--delta", choices=("total", "direct"), default="total")
    s.add_argument("--tol", type=float, default=1e-10)
    s.add_argument("--max-iter", type=int, default=None)
    s.add_argument("--seed", type=int, default=0)
    s.add_argument("--checks", action="store_true")
    s.add_argument("--threads", type=int, default=1)
    t = sub.add_parser("train-smoke")
    t.add_argument("--out", required=True)
    t.add_argument("--steps", type=int, default=40)
    t.add_argument("--every", type=int, default=20)
    t.add_argument("--seed", type=int, default=0)
    t.add_argument("--vocab", type=int, default=64)
    t.add_argument("--context", type=int, default=33)
    t.add_argument("--batch", type=int, default=4)
    t.add_argument("--threads", type=int, default=1)
    a = p.parse_args(argv)
    try:
        _set_threads(a.threads)
        if a.cmd == "step":
            analyse_step(a)
        else:
            if a.steps < 1 or a.every < 1 or a.vocab < 4 or a.context < 3 or a.batch < 1:
                raise InputError("train-smoke: expected steps, every, batch >= 1, vocab >= 4, context >= 3")
            train_smoke(a.out, a.steps, a.every, a.seed, a.vocab, a.context, a.batch)
    except InputError as e:
        print(f"error: {str(e).splitlines()[0] if str(e) else 'bad input'}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
