"""Experiment E1 (conditional scaling law, coupling paper §6, engineering spec §6.3): one training run
of the hierarchical model (C1)-(C2) (``tokdyn_train.hierarchical.HierarchicalLM``) on block-HMM
token sequences, with the gate rho learned or off.

    /usr/bin/python3 -m tokdyn_train.e1 --train X.npy --heldout Y.npy --vocab V --block P \\
        --size s|m|l --rho learn|off --seed S [--steps N] [--lr LR] [--batch B] [--threads 1] --out DIR

Data. X.npy, Y.npy: integer arrays [sequences, T] (int64 expected; any integer dtype is read) of
token ids in [0, V), T >= P + 1 tokens per sequence (K = ceil(T / P) blocks of P, the last one
possibly partial), both with the same T. The model is built for that T.

Model. ``SIZES``: s, m, l = d 16, 32, 64, all of depth 3 (the chain's reach); d_ff = 4 d, one
head, psi a tanh-MLP of hidden width d, the block-local mask of length P, block-mean compression of
the normalised stream, sample-and-hold refresh every layer, chain, additive site (tokdyn's defaults).
``--rho learn``: rho an unconstrained learned scalar starting at 0 (no weight decay on it);
``--rho off``: rho fixed at 0 (psi's parameters are then dead: zero gradient).

Training. Seeded and deterministic (a torch.Generator of --seed draws the initial weights and the
minibatches; --threads, default 1, fixes the thread count of torch and of the BLAS and OpenMP
pools, set before they load): the same arguments on the same machine and torch give the same
bytes of loss.csv. AdamW (betas 0.9, 0.98; weight decay
--weight-decay on matrices, embeddings included, none on vectors and rho), gradient norm clipped at
1, learning rate warmed up linearly over --warmup steps (default min(100, steps / 10)) then cosine
decay to lr / 10 at the last step. Each step draws --batch training sequences uniformly with
replacement. The objective: mean next-token cross-entropy over every predicted token (tokens
2..T of each sequence, 1-based).

Losses, in nats per token. ``heldout_loss``: the mean of -ln p_model(x_t | x_1..x_{t-1}) over
every held-out sequence and every token t = P + 1, ..., T (1-based; 0-based positions P..T-1),
i.e. every token after the first block, each token weighted equally (the same number per sequence,
so also the mean over sequences of per-sequence means). This is what tokdyn's
``block_hmm::sequence_risk(m, x, Summary::Full, first_block = 1)`` averages for the Bayes risk
(0-based block index 1 = the second block on). ``train_loss`` (loss.csv): the mean of the
training objective over the steps since the previous row.

Outputs (DIR is created; files written atomically, result.json last, so its presence marks a
complete run):
  loss.csv     ``step,train_loss,heldout_loss,heldout_sequences``: one row at step 0 (before
               training; train_loss empty), then every --eval-every steps (default ceil(steps / 10))
               and at the last step; floats as Python's shortest round-trip repr. The rows before
               the last evaluate the first --eval-sequences held-out sequences (default 256; a
               cheaper curve), the last row all of them (= result.json's heldout_loss).
  result.json  heldout_loss (final), heldout_tokens, unigram_entropy (plug-in entropy of the same
               held-out tokens: a no-context baseline), rho, abs_rho, learn_rho, injection_norm
               (mean |rho psi(y)| over layers and the tokens of blocks 2.. of the first 256 held-out
               sequences: the gate's use, free of the rho/psi scale confound, flag F14), params {fast, slow, psi, total}
               (slow: psi's parameters plus rho when learned), the model's and the run's settings,
               steps, seconds (wall), cpu_seconds, tokens_seen (steps x batch x T). A previous
               run's result.json in DIR is removed when training starts.
Exit status: 0 done; 2 bad arguments or input (one line on stderr); 4 a non-finite loss (one line
naming the step; loss.csv holds the rows before it, no result.json).
"""
from __future__ import annotations

import argparse
import json
import math
import os
import sys
import time
from typing import List, Optional




class _Exit(Exception):
    def __init__(self, code: int, msg: str):
        super().__init__(msg)
        self.code, self.msg = code, msg


class _Parser(argparse.ArgumentParser):
    def error(self, message: str):  # one line, exit 2
        raise _Exit(2, message.replace("\n", " "))


def _parser() -> argparse.ArgumentParser:
    p = _Parser(prog="python -m tokdyn_train.e1", description="E1: one training run of the hierarchical model on block-HMM data")
    p.add_argument("--train", required=True, help="int64 .npy [sequences, T] of training token ids")
    p.add_argument("--heldout", required=True, help="int64 .npy [sequences, T] of held-out token ids")
    p.add_argument("--vocab", required=True, type=int, help="vocabulary size V (ids in [0, V))")
    p.add_argument("--block", required=True, type=int, help="block length P")
    p.add_argument("--size", required=True, choices=["s", "m", "l"])
    p.add_argument("--rho", required=True, choices=["learn", "off"])
    p.add_argument("--seed", required=True, type=int)
    p.add_argument("--steps", type=int, default=1000)
    p.add_argument("--lr", type=float, default=3e-3)
    p.add_argument("--batch", type=int, default=32)
    p.add_argument("--out", required=True, help="output folder")
    p.add_argument("--threads", type=int, default=1)
    p.add_argument("--eval-every", type=int, default=0, help="steps between held-out evaluations (0: ceil(steps / 10))")
    p.add_argument("--warmup", type=int, default=-1, help="warm-up steps (-1: min(100, steps / 10))")
    p.add_argument("--weight-decay", type=float, default=0.01)
    p.add_argument("--eval-sequences", type=int, default=256, help="held-out sequences of the curve's rows before the last")
    return p


def _load_ids(path: str, what: str, vocab: int):
    import numpy as np
    if not os.path.isfile(path):
        raise _Exit(2, f"--{what} {path}: no such file")
    try:
        a = np.load(path, allow_pickle=False)
    except Exception as e:  # noqa: BLE001 - any unreadable file is bad input
        raise _Exit(2, f"--{what} {path}: not a readable .npy file ({type(e).__name__}: {str(e).splitlines()[0] if str(e) else ''})")
    if not isinstance(a, np.ndarray) or a.ndim != 2 or a.shape[0] < 1 or a.shape[1] < 1:
        raise _Exit(2, f"--{what} {path}: shape {list(np.shape(a))}, expected [sequences >= 1, tokens >= 1]")
    if not np.issubdtype(a.dtype, np.integer):
        raise _Exit(2, f"--{what} {path}: dtype {a.dtype}, expected int64 token ids")
    lo, hi = int(a.min()), int(a.max())
    if lo < 0 or hi >= vocab:
        raise _Exit(2, f"--{what} {path}: token ids in [{lo}, {hi}], expected ids in [0, {vocab}) (--vocab {vocab})")
    return a.astype(np.int64)


def _check(args) -> None:
    if args.vocab < 2:
        raise _Exit(2, f"--vocab {args.vocab}: expected >= 2")
    if args.block < 1:
        raise _Exit(2, f"--block {args.block}: expected >= 1")
    if args.seed < 0:
        raise _Exit(2, f"--seed {args.seed}: expected >= 0")
    if args.steps < 1:
        raise _Exit(2, f"--steps {args.steps}: expected >= 1")
    if not (math.isfinite(args.lr) and args.lr > 0):
        raise _Exit(2, f"--lr {args.lr}: expected a finite value > 0")
    if args.batch < 1:
        raise _Exit(2, f"--batch {args.batch}: expected >= 1")
    if args.threads < 1:
        raise _Exit(2, f"--threads {args.threads}: expected >= 1")
    if args.eval_every < 0:
        raise _Exit(2, f"--eval-every {args.eval_every}: expected >= 0 (0: ceil(steps / 10))")
    if args.warmup < -1 or args.warmup >= args.steps:
        raise _Exit(2, f"--warmup {args.warmup}: expected -1 (default) or 0 <= warmup < steps = {args.steps}")
    if not (math.isfinite(args.weight_decay) and args.weight_decay >= 0):
        raise _Exit(2, f"--weight-decay {args.weight_decay}: expected a finite value >= 0")
    if args.eval_sequences < 1:
        raise _Exit(2, f"--eval-sequences {args.eval_sequences}: expected >= 1")
    if os.path.exists(args.out) and not os.path.isdir(args.out):
        raise _Exit(2, f"--out {args.out}: exists and is not a folder")


def _write(path: str, text: str) -> None:
    tmp = path + ".tmp"
    with open(tmp, "w") as fh:
        fh.write(text)
    os.replace(tmp, path)


def heldout_loss(model, ids, block: int, batch: int = 256):
    """(mean loss, token count) over tokens P+1..T (1-based) of every sequence of ids [n, T]."""
    import torch
    import torch.nn.functional as F
    tot, n = 0.0, 0
    model.eval()
    with torch.no_grad():
        for a in range(0, ids.shape[0], batch):
            x = ids[a:a + batch]
            logits = model(x)
            tgt = x[:, block:]
            lo = logits[:, block - 1:-1, :]
            loss = F.cross_entropy(lo.reshape(-1, lo.shape[-1]), tgt.reshape(-1), reduction="none")
            tot += float(loss.double().sum())
            n += tgt.numel()
    model.train()
    return tot / n, n


def _limit_threads(n: int) -> None:
    """The thread count of the BLAS and OpenMP pools, set before NumPy or torch loads them (Debian's
    torch calls OpenBLAS, whose pthread pool torch.set_num_threads does not reach)."""
    for k in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
        os.environ[k] = str(n)
    if "numpy" in sys.modules or "torch" in sys.modules:  # in-process use (tests): also the loaded pools
        try:
            import ctypes
            import ctypes.util
            for name in ("openblas", "blas"):
                lib = ctypes.util.find_library(name)
                if lib and hasattr(ctypes.CDLL(lib), "openblas_set_num_threads"):
                    ctypes.CDLL(lib).openblas_set_num_threads(n)
        except OSError:
            pass


def run(argv: Optional[List[str]] = None) -> int:
    args = _parser().parse_args(argv)
    _check(args)
    _limit_threads(args.threads)
    import numpy as np
    train = _load_ids(args.train, "train", args.vocab)
    held = _load_ids(args.heldout, "heldout", args.vocab)
    T = train.shape[1]
    if held.shape[1] != T:
        raise _Exit(2, f"--heldout {args.heldout}: {held.shape[1]} tokens per sequence, expected the training data's T = {T}")
    if T < args.block + 1:
        raise _Exit(2, f"--block {args.block}: the sequences have T = {T} tokens, expected T >= block + 1 (tokens after the first block)")

    import torch
    from .hierarchical import SIZES, HierarchicalLM

    torch.set_num_threads(args.threads)
    try:
        torch.set_num_interop_threads(1)
    except RuntimeError:
        pass
    torch.use_deterministic_algorithms(True)
    t0, c0 = time.time(), time.process_time()
    gen = torch.Generator().manual_seed(args.seed)
    sz = SIZES[args.size]
    model = HierarchicalLM(args.vocab, sz["d"], T, args.block, sz["depth"], learn_rho=args.rho == "learn")
    model.init_weights(gen)
    decay = [p for p in model.parameters() if p.dim() >= 2]
    rest = [p for p in model.parameters() if p.dim() < 2]
    opt = torch.optim.AdamW([{"params": decay, "weight_decay": args.weight_decay}, {"params": rest, "weight_decay": 0.0}],
                            lr=args.lr, betas=(0.9, 0.98), eps=1e-8)
    warmup = min(100, args.steps // 10) if args.warmup < 0 else args.warmup
    every = args.eval_every or -(-args.steps // 10)

    def lr_at(s: int) -> float:  # s = 1..steps
        if s <= warmup:
            return args.lr * s / warmup
        f = (s - warmup) / max(1, args.steps - warmup)
        return args.lr * (0.1 + 0.9 * 0.5 * (1.0 + math.cos(math.pi * f)))

    Xtr, Xho = torch.from_numpy(train), torch.from_numpy(held)
    try:
        os.makedirs(args.out, exist_ok=True)
        if os.path.exists(os.path.join(args.out, "result.json")):  # a previous run's: this one is not complete yet
            os.remove(os.path.join(args.out, "result.json"))
    except OSError as e:
        raise _Exit(2, f"--out {args.out}: cannot write there ({e.strerror})")
    rows = ["step,train_loss,heldout_loss,heldout_sequences"]
    loss_csv = os.path.join(args.out, "loss.csv")

    def evaluate(step: int, train_loss: Optional[float]) -> float:
        X = Xho if step == args.steps else Xho[:args.eval_sequences]
        h, _ = heldout_loss(model, X, args.block)
        rows.append(f"{step},{'' if train_loss is None else repr(train_loss)},{repr(h)},{X.shape[0]}")
        if not math.isfinite(h):
            _write(loss_csv, "\n".join(rows[:-1]) + "\n")
            raise _Exit(4, f"non-finite held-out loss ({h}) at step {step}")
        return h

    evaluate(0, None)
    acc, nacc = 0.0, 0
    F = torch.nn.functional
    for step in range(1, args.steps + 1):
        for g in opt.param_groups:
            g["lr"] = lr_at(step)
        idx = torch.randint(0, Xtr.shape[0], (args.batch,), generator=gen)
        x = Xtr[idx]
        logits = model(x)
        loss = F.cross_entropy(logits[:, :-1, :].reshape(-1, args.vocab), x[:, 1:].reshape(-1))
        lv = float(loss)
        if not math.isfinite(lv):
            _write(loss_csv, "\n".join(rows) + "\n")
            raise _Exit(4, f"non-finite training loss ({lv}) at step {step}")
        opt.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        acc += lv
        nacc += 1
        if step % every == 0 or step == args.steps:
            final = evaluate(step, acc / nacc)
            acc, nacc = 0.0, 0
    _write(loss_csv, "\n".join(rows) + "\n")

    h, ntok = final, int(held.shape[0]) * (T - args.block)
    counts = np.bincount(held[:, args.block:].ravel(), minlength=args.vocab).astype(np.float64)
    pr = counts[counts > 0] / counts.sum()
    c = model.config
    rho = float(model.core.rho.detach())
    res = {
        "heldout_loss": h, "heldout_tokens": ntok,
        "loss_tokens": "every held-out sequence, tokens P+1..T (1-based): the tokens after the first block; nats per token",
        "unigram_entropy": float(-(pr * np.log(pr)).sum()),
        "rho": rho, "abs_rho": abs(rho), "learn_rho": args.rho == "learn",
        "injection_norm": model.injection_norm(Xho[:256]),
        "params": model.parameter_counts(),
        "size": args.size, "d": c.d, "depth": c.depth, "d_ff": c.d_ff, "heads": c.heads, "psi_hidden": c.psi_hidden,
        "vocab": args.vocab, "block": args.block, "tokens_per_sequence": T,
        "train_sequences": int(train.shape[0]), "heldout_sequences": int(held.shape[0]),
        "steps": args.steps, "batch": args.batch, "lr": args.lr, "warmup": warmup, "weight_decay": args.weight_decay,
        "eval_every": every, "eval_sequences": args.eval_sequences, "seed": args.seed, "threads": args.threads,
        "tokens_seen": args.steps * args.batch * T,
        "seconds": time.time() - t0, "cpu_seconds": time.process_time() - c0, "torch": torch.__version__,
        "train": os.path.abspath(args.train), "heldout": os.path.abspath(args.heldout),
    }
    _write(os.path.join(args.out, "result.json"), json.dumps(res, indent=1) + "\n")
    return 0


def main(argv: Optional[List[str]] = None) -> int:
    try:
        return run(argv)
    except _Exit as e:
        print(f"e1: {e.msg}", file=sys.stderr)
        return e.code


if __name__ == "__main__":
    sys.exit(main())
