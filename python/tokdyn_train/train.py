"""`tokdyn train`: a model of a family tokdyn loads, trained on a text corpus, written as
checkpoints tokdyn runs (docs/training.md).

    train(model, size, corpus, steps, out, ...) -> manifest dict

The results folder `out` is itself a checkpoint (config.json, model.safetensors, tokenizer.json of
the last step), with:
    checkpoints/step-NNNNNNN/   every `checkpoint_every` steps and step 0 (the initialisation):
                                config.json, model.safetensors, tokenizer.json, optimizer.pt, state.json
    loss.csv                    step, tokens, lr, train_loss, heldout_loss (nats per token)
    loss.png                    the loss curves against tokens seen, the unigram entropy drawn
    manifest.json               the model, seed, threads, corpus hash, tokenizer hash, tokens seen, losses, times
    train-args.json             the resolved arguments (a rerun with the same ones resumes)

Determinism: the initialisation comes from `seed`; the batch of step s from numpy's generator
seeded with (seed, s), so a resumed run draws what an uninterrupted one draws; torch runs with
deterministic algorithms on a fixed thread count. The same arguments and thread count give the same
bits; a run killed and rerun resumes from its last checkpoint and ends with the same weights.
"""
from __future__ import annotations

import csv
import io
import json
import math
import os
import shutil
import subprocess
import sys
import tempfile
import time
from typing import Any, Dict, List, Optional

import numpy as np
import torch

from . import data as D
from .families import FAMILIES, load_pretrained, make, named_config, save_pretrained, sizes
from .safetensors_io import atomic_write_bytes

InputError = D.InputError

SIZES = ("tiny", "small")
# Per size: context, batch, peak learning rate, tokenizer vocabulary (the named configs' own).
DEFAULTS = {"tiny": dict(context=64, batch=16, lr=3e-3, vocab=512),
            "small": dict(context=128, batch=16, lr=1.5e-3, vocab=4096)}


# Test hook (tests/train/test_train.py): the loss of this step is made NaN, as a diverging run's.
_INJECT_NAN_AT = int(os.environ.get("TOKDYN_TRAIN_INJECT_NAN_AT", "0") or 0)


class NonFiniteLoss(RuntimeError):
    """The loss or gradient became non-finite: exit code 4 on the command line."""


def _tokdyn_binary() -> str:
    b = os.environ.get("TOKDYN_BIN")
    if b:
        return b
    try:
        from tokdyn import _paths  # type: ignore
        return _paths.TOKDYN_BINARY
    except ImportError:
        return "tokdyn"


def _atomic_text(path: str, text: str) -> None:
    atomic_write_bytes(path, [text.encode("utf-8")])


def _lr_at(step: int, steps: int, peak: float, warmup: int) -> float:
    """Linear warm-up over `warmup` steps, then cosine decay to peak / 10 at the last step (step is
    1-based: the rate used for the update of step `step`)."""
    if step <= warmup:
        return peak * step / max(warmup, 1)
    frac = (step - warmup) / max(steps - warmup, 1)
    return peak * (0.1 + 0.9 * 0.5 * (1.0 + math.cos(math.pi * min(frac, 1.0))))


def _resolve(model: str, size: str, corpus: str, steps: int, out: str, tokenizer: Optional[str], seed: int,
             threads: Optional[int], context: Optional[int], batch: Optional[int], lr: Optional[float],
             warmup: Optional[int], weight_decay: float, eval_every: Optional[int], checkpoint_every: Optional[int],
             heldout_every: int) -> Dict[str, Any]:
    def integer(name, v, lo, hi):
        if isinstance(v, bool) or not isinstance(v, (int, np.integer)) or not lo <= v <= hi:
            raise InputError(f"--{name}: expected an integer in [{lo}, {hi}], got {v!r}")
        return int(v)

    if model not in FAMILIES:
        raise InputError(f"model '{model}': expected one of {', '.join(FAMILIES)}")
    if size not in SIZES:
        raise InputError(f"--size: expected tiny or small, got '{size}'")
    dflt = DEFAULTS[size]
    steps = integer("steps", steps, 1, 10 ** 9)
    seed = integer("seed", seed, 0, 2 ** 53)
    threads = integer("threads", threads if threads is not None else (os.cpu_count() or 1), 1, 1024)
    batch = integer("batch", batch if batch is not None else dflt["batch"], 1, 1 << 16)
    cfg = named_config(model, size, dflt["vocab"])
    max_ctx = int(cfg.get("n_positions", cfg.get("max_position_embeddings", 1 << 20)))
    context = integer("context", context if context is not None else min(dflt["context"], max_ctx), 2, max_ctx)
    lr = float(lr if lr is not None else dflt["lr"])
    if not (0 < lr < 1):
        raise InputError(f"--lr: expected a number in (0, 1), got {lr!r}")
    warmup = integer("warmup", warmup if warmup is not None else min(100, max(steps // 10, 1)), 0, steps)
    if not (0 <= weight_decay < 1):
        raise InputError(f"--weight-decay: expected a number in [0, 1), got {weight_decay!r}")
    eval_every = integer("eval-every", eval_every if eval_every is not None else max(1, min(200, steps // 10)), 1, steps)
    checkpoint_every = integer("checkpoint-every",
                               checkpoint_every if checkpoint_every is not None else max(1, min(500, steps // 4)), 1, steps)
    heldout_every = integer("heldout-every", heldout_every, 2, 1000)
    if tokenizer is not None and not os.path.exists(tokenizer):
        raise InputError(f"--tokenizer: '{tokenizer}' does not exist; expected a tokenizer.json or a folder holding one")
    return dict(model=model, size=size, corpus=os.path.abspath(corpus), steps=steps, out=os.path.abspath(out),
                tokenizer=os.path.abspath(tokenizer) if tokenizer else None, seed=seed, threads=threads,
                context=context, batch=batch, lr=lr, warmup=warmup, weight_decay=float(weight_decay),
                eval_every=eval_every, checkpoint_every=checkpoint_every, heldout_every=heldout_every)


def _checkpoint_dirs(out: str) -> List[str]:
    root = os.path.join(out, "checkpoints")
    if not os.path.isdir(root):
        return []
    done = [d for d in sorted(os.listdir(root))
            if d.startswith("step-") and os.path.isfile(os.path.join(root, d, "state.json"))]
    return [os.path.join(root, d) for d in done]


def _out_state(args: Dict[str, Any], overwrite: bool) -> str:
    """What `out` is, checked before anything is written: "new" (missing or empty), "resume" (an
    unfinished run of the same arguments), "replace" (a previous tokdyn training, with overwrite).
    Anything else is refused."""
    out = args["out"]
    if not os.path.exists(out):
        parent = os.path.dirname(out) or "."
        if not os.path.isdir(parent):
            raise InputError(f"--out: the folder '{parent}' does not exist")
        return "new"
    if not os.path.isdir(out):
        raise InputError(f"--out: '{out}' exists and is not a folder; expected a new folder or a previous tokdyn train result")
    if not os.listdir(out):
        return "new"
    prev_args = os.path.join(out, "train-args.json")
    if not os.path.isfile(prev_args):
        raise InputError(f"--out: '{out}' exists and is not a tokdyn train result; expected a new folder "
                         "(tokdyn never deletes a folder it did not write)")
    with open(prev_args) as f:
        prev = json.load(f)
    finished = os.path.isfile(os.path.join(out, "manifest.json"))
    if prev == args and not finished and os.path.isfile(os.path.join(out, "tokenizer.json")):
        return "resume"
    if not overwrite:
        why = "a finished training" if finished else "a training with other arguments"
        raise InputError(f"--out: '{out}' holds {why}; give --overwrite to replace it, or another --out")
    return "replace"


def _write_loss_csv(out: str, rows: List[Dict[str, Any]]) -> None:
    buf = io.StringIO()
    w = csv.writer(buf, lineterminator="\n")
    w.writerow(["step", "tokens", "lr", "train_loss", "heldout_loss"])
    for r in rows:
        w.writerow([r["step"], r["tokens"], repr(r["lr"]), repr(r["train_loss"]),
                    "" if r["heldout_loss"] is None else repr(r["heldout_loss"])])
    _atomic_text(os.path.join(out, "loss.csv"), buf.getvalue())


def _plot(out: str, rows: List[Dict[str, Any]], unigram: float, title: str) -> None:
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    tok = np.array([r["tokens"] for r in rows], dtype=float)
    tr = np.array([r["train_loss"] for r in rows], dtype=float)
    held = [(r["tokens"], r["heldout_loss"]) for r in rows if r["heldout_loss"] is not None]
    fig, ax = plt.subplots(figsize=(6.4, 4.0), dpi=150)
    k = max(1, len(tr) // 50)
    smooth = np.convolve(tr, np.ones(k) / k, mode="valid") if len(tr) >= k else tr
    ax.plot(tok, tr, color="#0072B2", alpha=0.25, lw=0.8)
    ax.plot(tok[k - 1:], smooth, color="#0072B2", lw=1.5, label="training" if k == 1 else f"training (mean of {k} steps)")
    if held:
        ax.plot([h[0] for h in held], [h[1] for h in held], color="#D55E00", marker="o", ms=3, lw=1.5,
                ls="--", label="held-out")
    ax.axhline(unigram, color="0.3", ls=":", lw=1.2, label=f"unigram entropy {unigram:.2f}")
    ax.set_xlabel("tokens seen")
    ax.set_ylabel("cross-entropy (nats / token)")
    ax.set_title(title, fontsize=9)
    ax.grid(alpha=0.3)
    ax.legend(fontsize=8)
    fig.tight_layout()
    tmp = os.path.join(out, f".loss.png.tmp-{os.getpid()}")
    fig.savefig(tmp, format="png")
    plt.close(fig)
    os.replace(tmp, os.path.join(out, "loss.png"))


class _Progress:
    """A line on stderr every few seconds and at every held-out evaluation."""

    def __init__(self, steps: int, tokens_per_step: int, quiet: bool):
        self.steps, self.tokens_per_step, self.quiet = steps, tokens_per_step, quiet
        self.last = 0.0

    def __call__(self, step, tokens_per_s, loss, held, force=False):
        now = time.monotonic()
        if self.quiet or (not force and now - self.last < 5.0):
            return
        self.last = now
        left = (self.steps - step) * self.tokens_per_step / max(tokens_per_s, 1e-9)
        held_s = f"  held-out {held:.3f}" if held is not None else ""
        print(f"step {step}/{self.steps}  loss {loss:.3f}{held_s}  {tokens_per_s / 1000:.1f}k tok/s  "
              f"eta {int(left) // 60}m{int(left) % 60:02d}s", file=sys.stderr, flush=True)


def train(model: str, size: str, corpus: str, steps: int, out: str, *, tokenizer: Optional[str] = None, seed: int = 0,
          threads: Optional[int] = None, context: Optional[int] = None, batch: Optional[int] = None,
          lr: Optional[float] = None, warmup: Optional[int] = None, weight_decay: float = 0.1,
          eval_every: Optional[int] = None, checkpoint_every: Optional[int] = None, heldout_every: int = 20,
          overwrite: bool = False, quiet: bool = False, stop_after: Optional[int] = None) -> Dict[str, Any]:
    """Trains `model` (gpt2, neox, llama, mamba2) of `size` (tiny, small) on `corpus` for `steps`
    AdamW steps into `out`; returns the manifest. InputError for bad arguments, NonFiniteLoss when
    the loss becomes non-finite (the last good checkpoint stays). `stop_after`: stop (as a kill
    would) after that many steps of this call, for tests of resumption."""
    t_start = time.monotonic()
    args = _resolve(model, size, corpus, steps, out, tokenizer, seed, threads, context, batch, lr, warmup,
                    weight_decay, eval_every, checkpoint_every, heldout_every)
    files = D.corpus_files(args["corpus"])
    texts = D.read_texts(files)
    data_sha = D.corpus_sha256(files, texts)
    state = _out_state(args, overwrite)
    out = args["out"]

    torch.set_num_threads(args["threads"])
    torch.use_deterministic_algorithms(True)
    import tokdyn  # the C++ tokenizer (encoding) and its binary (training a tokenizer)

    # The tokenizer and the split, before anything is written: a corpus too small is refused here.
    tmpdir = tempfile.mkdtemp(prefix="tokdyn-train-")
    try:
        if state == "resume":
            tok_src = os.path.join(out, "tokenizer.json")
        elif args["tokenizer"]:
            tok_src = args["tokenizer"]
            if os.path.isdir(tok_src):
                tok_src = os.path.join(tok_src, "tokenizer.json")
        else:
            tok_src = os.path.join(tmpdir, "tokenizer.json")
            r = subprocess.run([_tokdyn_binary(), "train-tokenizer", "--corpus", args["corpus"], "--vocab-size",
                                str(DEFAULTS[size]["vocab"]), "--out", tok_src], capture_output=True, text=True)
            if r.returncode != 0:
                raise InputError(r.stderr.strip().splitlines()[-1] if r.stderr.strip() else "train-tokenizer failed")
        tk = tokdyn.Tokenizer.from_file(tok_src)
        vocab = int(tk.vocab_size)
        ids = D.encode_corpus(tk, texts, threads=args["threads"])
        split = D.Split(ids, args["context"], args["heldout_every"], args["batch"])
        if state == "replace":
            shutil.rmtree(out)
        os.makedirs(out, exist_ok=True)
        tok_path = os.path.join(out, "tokenizer.json")
        if state != "resume":
            shutil.copyfile(tok_src, tok_path + ".tmp")
            os.replace(tok_path + ".tmp", tok_path)
    finally:
        shutil.rmtree(tmpdir, ignore_errors=True)
    _atomic_text(os.path.join(out, "train-args.json"), json.dumps(args, indent=1, sort_keys=True) + "\n")
    resuming = state == "resume"
    train_ids = np.concatenate([ids[c * split.chunk:(c + 1) * split.chunk] for c in split.train_chunks])
    unigram = D.unigram_entropy(train_ids, split.heldout[:, 1:].reshape(-1), vocab)

    config = named_config(args["model"], args["size"], vocab)
    net = make(args["model"], config, args["seed"])
    decay = [p for n, p in net.named_parameters() if p.dim() >= 2]
    no_decay = [p for n, p in net.named_parameters() if p.dim() < 2]
    opt = torch.optim.AdamW([{"params": decay, "weight_decay": args["weight_decay"]},
                             {"params": no_decay, "weight_decay": 0.0}], lr=args["lr"], betas=(0.9, 0.95), eps=1e-8)
    n_params = sum(p.numel() for p in net.parameters())

    rows: List[Dict[str, Any]] = []
    start = 0
    ckpts = _checkpoint_dirs(out) if resuming else []
    if ckpts:
        last = ckpts[-1]
        _, loaded = load_pretrained(last)
        net.load_state_dict(loaded.state_dict())
        opt.load_state_dict(torch.load(os.path.join(last, "optimizer.pt")))
        with open(os.path.join(last, "state.json")) as f:
            st = json.load(f)
        start, rows = st["step"], st["rows"]
        if not quiet:
            print(f"resuming {out} from step {start}", file=sys.stderr, flush=True)

    held = torch.from_numpy(split.heldout[:256])

    def heldout_loss() -> float:
        net.eval()
        with torch.no_grad():
            tot, n = 0.0, 0
            for i in range(0, len(held), args["batch"]):
                x = held[i:i + args["batch"]]
                logits = net(x[:, :-1])
                tot += float(torch.nn.functional.cross_entropy(logits.reshape(-1, vocab), x[:, 1:].reshape(-1),
                                                               reduction="sum"))
                n += x[:, 1:].numel()
        net.train()
        return tot / n

    def save_checkpoint(step: int) -> None:
        d = os.path.join(out, "checkpoints", f"step-{step:07d}")
        tmp = d + f".tmp-{os.getpid()}"
        shutil.rmtree(tmp, ignore_errors=True)
        os.makedirs(tmp)
        save_pretrained(net, tmp)
        shutil.copyfile(tok_path, os.path.join(tmp, "tokenizer.json"))
        torch.save(opt.state_dict(), os.path.join(tmp, "optimizer.pt"))
        _atomic_text(os.path.join(tmp, "state.json"), json.dumps({"step": step, "rows": rows}) + "\n")
        if os.path.exists(d):
            shutil.rmtree(d)
        os.replace(tmp, d)

    if start == 0 and not ckpts:
        save_checkpoint(0)

    tokens_per_step = args["batch"] * args["context"]
    progress = _Progress(args["steps"], tokens_per_step, quiet)
    t_loop = time.monotonic()
    done_here = 0
    for step in range(start + 1, args["steps"] + 1):
        rng = np.random.default_rng([args["seed"], step])
        x = torch.from_numpy(split.batch(rng, args["batch"]))
        cur_lr = _lr_at(step, args["steps"], args["lr"], args["warmup"])
        for g in opt.param_groups:
            g["lr"] = cur_lr
        logits = net(x[:, :-1])
        loss = torch.nn.functional.cross_entropy(logits.reshape(-1, vocab), x[:, 1:].reshape(-1))
        if _INJECT_NAN_AT == step:
            loss = loss * float("nan")
        lv = float(loss)
        if not math.isfinite(lv):
            raise NonFiniteLoss(f"step {step}: the training loss is {lv}; the last good checkpoint is "
                                f"{_checkpoint_dirs(out)[-1] if _checkpoint_dirs(out) else 'none'}")
        opt.zero_grad(set_to_none=True)
        loss.backward()
        gn = float(torch.nn.utils.clip_grad_norm_(net.parameters(), 1.0))
        if not math.isfinite(gn):
            raise NonFiniteLoss(f"step {step}: the gradient norm is {gn}; the last good checkpoint is "
                                f"{_checkpoint_dirs(out)[-1]}")
        opt.step()
        h = heldout_loss() if (step % args["eval_every"] == 0 or step == args["steps"]) else None
        rows.append({"step": step, "tokens": step * tokens_per_step, "lr": cur_lr, "train_loss": lv, "heldout_loss": h})
        done_here += 1
        rate = done_here * tokens_per_step / max(time.monotonic() - t_loop, 1e-9)
        progress(step, rate, lv, h, force=h is not None)
        if step % args["checkpoint_every"] == 0 or step == args["steps"]:
            save_checkpoint(step)
            _write_loss_csv(out, rows)
        if stop_after is not None and done_here >= stop_after:
            return {"stopped_at": step}

    # The folder itself: the last step's checkpoint, the curves, the manifest (last: its presence
    # means finished).
    save_pretrained(net, out)
    _write_loss_csv(out, rows)
    final_held = next(r["heldout_loss"] for r in reversed(rows) if r["heldout_loss"] is not None)
    title = (f"tokdyn train {args['model']} {args['size']}: {n_params / 1e6:.2f}M parameters, "
             f"{args['steps'] * tokens_per_step / 1e6:.2f}M tokens, seed {args['seed']}")
    _plot(out, rows, unigram, title)
    wall = time.monotonic() - t_start
    manifest = {
        "tool": "tokdyn train",
        "model": args["model"], "size": args["size"], "config": config, "parameters": n_params,
        "seed": args["seed"], "threads": args["threads"],
        "corpus": {"path": args["corpus"], "files": len(files), "bytes": sum(len(t) for t in texts), "sha256": data_sha,
                   "tokens": int(len(ids)), "train_tokens": split.train_tokens, "heldout_tokens": split.heldout_tokens},
        "tokenizer": {"trained": args["tokenizer"] is None, "source": args["tokenizer"], "vocab_size": vocab,
                      "sha256": tk.sha256},
        "steps": args["steps"], "tokens_seen": args["steps"] * tokens_per_step,
        "epochs": args["steps"] * tokens_per_step / max(split.train_tokens, 1),
        "final": {"train_loss": rows[-1]["train_loss"], "heldout_loss": final_held,
                  "heldout_windows": int(len(held))},
        "unigram_entropy": unigram, "heldout_below_unigram": unigram - final_held,
        "args": args, "wall_seconds": wall,
        "tokens_per_second": done_here * tokens_per_step / max(time.monotonic() - t_loop, 1e-9),
        "torch": torch.__version__, "resumed_from": start if start else None,
    }
    _atomic_text(os.path.join(out, "manifest.json"), json.dumps(manifest, indent=1, sort_keys=True) + "\n")
    if not quiet:
        print(f"trained {out}: {args['model']} {args['size']}, {n_params / 1e6:.2f}M parameters, "
              f"{manifest['tokens_seen'] / 1e6:.2f}M tokens; held-out {final_held:.3f} nats/token "
              f"(unigram entropy {unigram:.3f}); {wall:.0f} s", file=sys.stderr, flush=True)
    return manifest
