"""tokdyn train-tokenizer against an independent brute-force BPE trainer written here.

The reference recounts every pair of every word after each merge (quadratic, no heap, no
incremental bookkeeping) on an ASCII corpus, where GPT-2's pre-tokenizer regular expression can be
written with Python's `re` (\\p{L} -> [A-Za-z], \\p{N} -> [0-9]). Same rules as documented in
include/tokdyn/io/bpe_trainer.hpp: byte alphabet with id = byte, most frequent pair, ties to the
smaller (left id, right id), a string reached twice keeps its first id, stop at the vocabulary size
or below min_frequency.
"""
import json
import os
import re
import subprocess
from collections import Counter

import pytest

TOKDYN = os.environ.get("TOKDYN_BIN", "build/tokdyn")
GPT2_ASCII = re.compile(r"""'s|'t|'re|'ve|'m|'ll|'d| ?[A-Za-z]+| ?[0-9]+| ?[^\sA-Za-z0-9]+|\s+(?!\S)|\s+""")


def byte_chars():
    """GPT-2's byte -> character map (printable Latin-1 to itself, the rest to U+0100 + n)."""
    keep = list(range(ord("!"), ord("~") + 1)) + list(range(0xA1, 0xAC + 1)) + list(range(0xAE, 0xFF + 1))
    out, n = {}, 0
    for b in range(256):
        if b in keep:
            out[b] = chr(b)
        else:
            out[b] = chr(256 + n)
            n += 1
    return out


def reference_merges(text, vocab_size, min_frequency, n_special=1):
    bc = byte_chars()
    words = Counter()
    for chunk in text:
        for m in GPT2_ASCII.finditer(chunk):
            words["".join(bc[b] for b in m.group(0).encode())] += 1
    tokens = [bc[b] for b in range(256)]
    ids = {t: i for i, t in enumerate(tokens)}
    seqs = {w: [ids[c] for c in w] for w in words}
    merges = []
    while len(tokens) < vocab_size - n_special:
        pairs = Counter()
        for w, s in seqs.items():
            for a, b in zip(s, s[1:]):
                pairs[(a, b)] += words[w]
        if not pairs:
            break
        best = max(pairs.items(), key=lambda kv: (kv[1], -kv[0][0], -kv[0][1]))
        (a, b), count = best
        if count < min_frequency:
            break
        new = tokens[a] + tokens[b]
        if new not in ids:
            ids[new] = len(tokens)
            tokens.append(new)
        nid = ids[new]
        merges.append(tokens[a] + " " + tokens[b])
        for w, s in seqs.items():
            out, i = [], 0
            while i < len(s):
                if i + 1 < len(s) and s[i] == a and s[i + 1] == b:
                    out.append(nid)
                    i += 2
                else:
                    out.append(s[i])
                    i += 1
            seqs[w] = out
    return merges


def corpus_lines():
    lines = []
    for i in range(400):
        lines.append(f"And it came to pass in the {i % 13}th day, that the people's king's men said: "
                     f"Let us go up {i * 7 % 101} times; we'll see it, they've done it.\n")
        lines.append("  indented   spaces\tand tabs!! (parentheses) -- dashes... 3.14159 2024-12-04\n")
    return lines


@pytest.mark.parametrize("vocab_size,min_frequency", [(400, 2), (700, 1)])
def test_merges_equal_a_brute_force_trainer(tmp_path, vocab_size, min_frequency):
    lines = corpus_lines()
    corpus = tmp_path / "c.txt"
    corpus.write_text("".join(lines))
    out = tmp_path / "tok.json"
    r = subprocess.run([TOKDYN, "train-tokenizer", "--corpus", str(corpus), "--out", str(out),
                        "--vocab-size", str(vocab_size), "--min-frequency", str(min_frequency)],
                       capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    ours = json.loads(out.read_text())["model"]["merges"]
    # tokdyn cuts a corpus file into pieces of at most 64 KiB, each ending after a line end
    # (io/corpus.hpp); the reference cuts the same way.
    data, pieces = "".join(lines).encode(), []
    while data:
        end = len(data) if len(data) <= 65536 else data.rfind(b"\n", 0, 65536) + 1
        pieces.append(data[:end].decode())
        data = data[end:]
    assert len(pieces) >= 2
    ref = reference_merges(pieces, vocab_size, min_frequency)
    assert len(ours) == len(ref)
    first = next((i for i, (x, y) in enumerate(zip(ours, ref)) if x != y), None)
    assert first is None, f"merge {first}: tokdyn {ours[first]!r}, reference {ref[first]!r}"
