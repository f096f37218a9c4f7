"""python -m tokdyn_train MODEL --size tiny|small --corpus FILE|DIR --steps N --out DIR [...]
(what `tokdyn train` runs). Exit codes: 0 done, 2 bad input (one line), 4 non-finite loss."""
import argparse
import sys

from .train import InputError, NonFiniteLoss, train


class _Parser(argparse.ArgumentParser):
    def error(self, message):
        print(f"error: train: {message} (see `tokdyn train --help`)", file=sys.stderr)
        sys.exit(2)


def main(argv=None) -> int:
    p = _Parser(prog="tokdyn train", description="Train a model of a family tokdyn loads on a text corpus; the "
                "results folder is a checkpoint tokdyn runs (docs/training.md).")
    p.add_argument("model", help="gpt2, neox, llama or mamba2")
    p.add_argument("--size", default="small", help="tiny or small (default small)")
    p.add_argument("--corpus", required=True, help="a text file or a folder of text files")
    p.add_argument("--steps", type=int, required=True, help="optimiser steps")
    p.add_argument("--out", required=True, help="results folder (new, or a previous run of the same arguments to resume)")
    p.add_argument("--tokenizer", help="a tokenizer.json to use (default: a byte-level BPE trained on the corpus)")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--threads", type=int, help="torch threads (default: all cores); the bits depend on it")
    p.add_argument("--context", type=int, help="tokens per training window (default tiny 64, small 128)")
    p.add_argument("--batch", type=int, help="windows per step (default 16)")
    p.add_argument("--lr", type=float, help="peak learning rate (default tiny 3e-3, small 1.5e-3)")
    p.add_argument("--warmup", type=int, help="linear warm-up steps (default min(100, steps/10))")
    p.add_argument("--weight-decay", type=float, default=0.1, help="AdamW weight decay of the matrices")
    p.add_argument("--eval-every", type=int, help="steps between held-out evaluations")
    p.add_argument("--checkpoint-every", type=int, help="steps between checkpoints")
    p.add_argument("--heldout-every", type=int, default=20, help="every N-th chunk of the corpus is held out")
    p.add_argument("--overwrite", action="store_true", help="replace a previous tokdyn train result in --out")
    p.add_argument("--quiet", "-q", action="store_true", help="no progress lines")
    a = p.parse_args(argv)
    try:
        train(a.model, a.size, a.corpus, a.steps, a.out, tokenizer=a.tokenizer, seed=a.seed, threads=a.threads,
              context=a.context, batch=a.batch, lr=a.lr, warmup=a.warmup, weight_decay=a.weight_decay,
              eval_every=a.eval_every, checkpoint_every=a.checkpoint_every, heldout_every=a.heldout_every,
              overwrite=a.overwrite, quiet=a.quiet)
    except (InputError, ValueError) as e:
        print(f"error: {str(e).splitlines()[0] if str(e) else type(e).__name__}", file=sys.stderr)
        return 2
    except NonFiniteLoss as e:
        print(f"error: {e}", file=sys.stderr)
        return 4
    except KeyboardInterrupt:
        print("interrupted: the last checkpoint stays; rerun the same command to resume", file=sys.stderr)
        return 130
    return 0


if __name__ == "__main__":
    sys.exit(main())
