"""A training corpus: listed, hashed and cut as tokdyn's C++ reader does (include/tokdyn/io/corpus.hpp),
encoded with tokdyn's tokenizer, split into training and held-out windows.

    corpus_files(path) -> [(relative path, path)]   a file, or every file under a folder (no hidden names)
    corpus_sha256(files)                             the C++ reader's hash of the same bytes
    encode_corpus(tokenizer, files) -> int64 ids     every file cut into pieces of <= 64 KiB at line ends
    Split(ids, context, every)                       held-out: every `every`-th chunk of the stream
"""
from __future__ import annotations

import hashlib
import os
from typing import List, Tuple

import numpy as np

PIECE = 64 * 1024


class InputError(ValueError):
    """Bad input: one line, exit code 2 on the command line."""


def corpus_files(path: str) -> List[Tuple[str, str]]:
    if not os.path.exists(path):
        raise InputError(f"--corpus: '{path}' does not exist; expected a text file or a folder of text files")
    if os.path.isfile(path):
        return [(os.path.basename(path), path)]
    if not os.path.isdir(path):
        raise InputError(f"--corpus: '{path}' is neither a file nor a folder; expected a text file or a folder of text files")
    out = []
    for root, dirs, files in os.walk(path):
        dirs[:] = [d for d in dirs if not d.startswith(".")]
        for f in files:
            if f.startswith("."):
                continue
            p = os.path.join(root, f)
            if os.path.isfile(p):
                out.append((os.path.relpath(p, path).replace(os.sep, "/"), p))
    if not out:
        raise InputError(f"--corpus: the folder '{path}' holds no files; expected text files")
    out.sort(key=lambda rp: rp[0].encode())
    return out


def read_texts(files) -> List[bytes]:
    data = []
    for rel, p in files:
        with open(p, "rb") as f:
            b = f.read()
        try:
            b.decode("utf-8")
        except UnicodeDecodeError as e:
            raise InputError(f"--corpus: '{p}': invalid UTF-8 at byte {e.start}") from None
        data.append(b)
    return data


def corpus_sha256(files, data: List[bytes]) -> str:
    h = hashlib.sha256()
    for (rel, _), b in zip(files, data):
        h.update(rel.encode() + b"\0" + str(len(b)).encode() + b"\0")
        h.update(b)
    return h.hexdigest()


def pieces(b: bytes) -> List[str]:
    out, at = [], 0
    while at < len(b):
        end = min(len(b), at + PIECE)
        if end < len(b):
            nl = b.rfind(b"\n", at, end)
            if nl >= at:
                end = nl + 1
            else:
                while end > at + 1 and (b[end] & 0xC0) == 0x80:
                    end -= 1
        out.append(b[at:end].decode())
        at = end
    return out


def encode_corpus(tokenizer, data: List[bytes], threads: int = 0) -> np.ndarray:
    """The corpus as one stream of ids: each file's pieces encoded without special tokens, an
    end-of-text token (when the tokenizer has one) after each file."""
    eot = tokenizer.token_to_id("<|endoftext|>")
    parts = []
    for b in data:
        encs = tokenizer.encode_batch(pieces(b), add_special_tokens=False, threads=threads)
        parts.extend(np.asarray(e.ids, dtype=np.int64) for e in encs)
        if eot is not None:
            parts.append(np.array([eot], dtype=np.int64))
    return np.concatenate(parts) if parts else np.zeros(0, dtype=np.int64)


class Split:
    """The stream cut into chunks of `chunk` tokens; every `every`-th chunk (from the `every`-th) is
    held out. Training windows of context + 1 tokens are drawn inside training chunks; the held-out
    windows are the non-overlapping ones of the held-out chunks."""

    def __init__(self, ids: np.ndarray, context: int, every: int, batch: int):
        self.context = context
        self.chunk = 8 * (context + 1)
        n_chunks = len(ids) // self.chunk
        held = [c for c in range(n_chunks) if (c + 1) % every == 0]
        train = [c for c in range(n_chunks) if (c + 1) % every != 0]
        if not held or len(train) < batch:
            need = self.chunk * max(every, batch + batch // max(every - 1, 1) + 1)
            raise InputError(f"--corpus: {len(ids)} tokens make {n_chunks} chunks of {self.chunk} (8 windows of context "
                             f"{context} + 1); held-out every {every}-th chunk needs at least {every} chunks and {batch} "
                             f"training chunks (about {need} tokens); give a larger corpus or a smaller --context")
        self.ids = ids
        self.train_chunks = np.array(train, dtype=np.int64)
        self.held_chunks = np.array(held, dtype=np.int64)
        w = context + 1
        self.heldout = np.stack([ids[c * self.chunk + k * w: c * self.chunk + (k + 1) * w]
                                 for c in held for k in range(8)])

    @property
    def train_tokens(self) -> int:
        return len(self.train_chunks) * self.chunk

    @property
    def heldout_tokens(self) -> int:
        return len(self.held_chunks) * self.chunk

    def batch(self, rng: np.random.Generator, batch: int) -> np.ndarray:
        c = self.train_chunks[rng.integers(0, len(self.train_chunks), size=batch)]
        off = rng.integers(0, self.chunk - self.context, size=batch)
        start = c * self.chunk + off
        return np.stack([self.ids[s: s + self.context + 1] for s in start])


def unigram_entropy(train_ids: np.ndarray, held_ids: np.ndarray, vocab: int) -> float:
    """Cross-entropy (nats per token) of the held-out tokens under the training unigram
    distribution (add-one smoothed): the loss of a model that ignores context."""
    counts = np.bincount(train_ids, minlength=vocab).astype(np.float64) + 1.0
    logp = np.log(counts / counts.sum())
    return float(-logp[held_ids].mean())
