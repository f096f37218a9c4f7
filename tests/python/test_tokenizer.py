"""tokdyn.Tokenizer from Python: small tokenizer.json files written here (a GPT-2-style byte-level
BPE, a Llama-2-style SentencePiece BPE with byte fallback, an unknown token and a BOS template),
each expectation worked out by hand from the format's rules; batches against one by one; the
errors. Run by CTest (test `python`) with PYTHONPATH=build/python."""
import hashlib
import json
import threading
import time

import numpy as np
import pytest

import tokdyn

# ---- the files ----------------------------------------------------------------------------------


def byte_chars():
    """GPT-2's byte-to-character map (bytes_to_unicode): the printable bytes are their own
    character, the others (space included) 256, 257, ... in byte order; the space is 'Ġ' (U+0120)."""
    printable = set(range(33, 127)) | set(range(161, 173)) | set(range(174, 256))
    out, extra = {}, 0
    for b in range(256):
        if b in printable:
            out[b] = chr(b)
        else:
            out[b] = chr(256 + extra)
            extra += 1
    return out


def byte_level_json(template=False):
    """GPT-2's scheme on a small vocabulary: printable ASCII b has id b - 33, the space 'Ġ' 94; nine
    merges (ranks in list order) make ids 95..103; the other 161 byte characters 104..264, so that
    every text can be encoded."""
    chars = byte_chars()
    vocab = {chr(b): b - 33 for b in range(33, 127)}
    vocab["\u0120"] = 94
    merges = ["l l", "h e", "he ll", "hell o", "\u0120 w", "o r", "\u0120w or", "l d", "\u0120wor ld"]
    for k, m in enumerate(merges):
        vocab[m.replace(" ", "")] = 95 + k  # ll 95, he 96, hell 97, hello 98, Ġw 99, or 100, Ġwor 101, ld 102, Ġworld 103
    for b in range(256):
        vocab.setdefault(chars[b], len(vocab))
    assert len(vocab) == 265
    j = {
        "version": "1.0", "truncation": None, "padding": None, "added_tokens": [], "normalizer": None,
        "pre_tokenizer": {"type": "ByteLevel", "add_prefix_space": False, "trim_offsets": True, "use_regex": True},
        "post_processor": None, "decoder": {"type": "ByteLevel"},
        "model": {"type": "BPE", "vocab": vocab, "merges": merges},
    }
    if template:
        j["added_tokens"] = [{"id": 265, "content": "<|bos|>", "special": True, "normalized": False}]
        j["post_processor"] = {
            "type": "TemplateProcessing",
            "single": [{"SpecialToken": {"id": "<|bos|>", "type_id": 0}}, {"Sequence": {"id": "A", "type_id": 0}}],
            "special_tokens": {"<|bos|>": {"id": "<|bos|>", "ids": [265], "tokens": ["<|bos|>"]}},
        }
    return j


def sentencepiece_json():
    """Llama 2's scheme: '▁' for spaces and prepended (normalizer), byte fallback <0xXX>, an unknown
    token with fuse_unk, and a template adding <s>."""
    vocab = {"<unk>": 0, "<s>": 1, "a": 2, "b": 3, "ab": 4, "<0xC3>": 5, "<0xA9>": 6, "\u2581": 7, "\u2581ab": 8}
    return {
        "version": "1.0", "truncation": None, "padding": None,
        "added_tokens": [{"id": 0, "content": "<unk>", "special": True, "normalized": False},
                         {"id": 1, "content": "<s>", "special": True, "normalized": False}],
        "normalizer": {"type": "Sequence", "normalizers": [
            {"type": "Prepend", "prepend": "\u2581"},
            {"type": "Replace", "pattern": {"String": " "}, "content": "\u2581"}]},
        "pre_tokenizer": None,
        "post_processor": {
            "type": "TemplateProcessing",
            "single": [{"SpecialToken": {"id": "<s>", "type_id": 0}}, {"Sequence": {"id": "A", "type_id": 0}}],
            "pair": [{"SpecialToken": {"id": "<s>", "type_id": 0}}, {"Sequence": {"id": "A", "type_id": 0}},
                     {"SpecialToken": {"id": "<s>", "type_id": 1}}, {"Sequence": {"id": "B", "type_id": 1}}],
            "special_tokens": {"<s>": {"id": "<s>", "ids": [1], "tokens": ["<s>"]}},
        },
        "decoder": {"type": "Sequence", "decoders": [
            {"type": "Replace", "pattern": {"String": "\u2581"}, "content": " "},
            {"type": "ByteFallback"}, {"type": "Fuse"},
            {"type": "Strip", "content": " ", "start": 1, "stop": 0}]},
        "model": {"type": "BPE", "dropout": None, "unk_token": "<unk>", "continuing_subword_prefix": None,
                  "end_of_word_suffix": None, "fuse_unk": True, "byte_fallback": True,
                  "vocab": vocab, "merges": ["a b", "\u2581 ab"]},
    }


def write(folder, j):
    folder.mkdir(parents=True, exist_ok=True)
    p = folder / "tokenizer.json"
    p.write_text(json.dumps(j, ensure_ascii=False), encoding="utf-8")
    return p


@pytest.fixture
def gpt2ish(tmp_path):
    return tokdyn.Tokenizer.from_file(write(tmp_path / "bl", byte_level_json()))


@pytest.fixture
def llamaish(tmp_path):
    return tokdyn.Tokenizer.from_file(write(tmp_path / "sp", sentencepiece_json()))


def ascii_id(c):
    return ord(c) - 33


# ---- byte-level BPE ------------------------------------------------------------------------------


def test_byte_level_merges_by_rank(gpt2ish):
    # "hello": l l (rank 0), h e (1), he ll (2), hell o (3). " world" -> "Ġworld": Ġ w (4), o r (5),
    # Ġw or (6), l d (7), Ġwor ld (8).
    e = gpt2ish.encode("hello world")
    assert isinstance(e, tokdyn.Encoding)
    assert isinstance(e.ids, np.ndarray) and e.ids.dtype == np.int64
    assert e.ids.tolist() == [98, 103]
    assert e.pieces == ["hello", "\u0120world"]
    assert e.texts == ["hello", " world"]
    assert e.special == [False, False]
    assert e.unknown == []
    assert len(e) == 2
    # "Hello!": no merge makes "He" or "llo"; "!" is its own pre-token.
    e = gpt2ish.encode("Hello!")
    assert e.ids.tolist() == [ascii_id("H"), ascii_id("e"), 95, ascii_id("o"), ascii_id("!")]
    assert e.pieces == ["H", "e", "ll", "o", "!"]
    # Equal ranks: leftmost first ("lll" -> "ll" "l").
    assert gpt2ish.encode("lll").pieces == ["ll", "l"]
    assert gpt2ish.decode(gpt2ish.encode("hello world, Hello!").ids) == "hello world, Hello!"


def test_vocabulary_lookups(gpt2ish):
    assert gpt2ish.vocab_size == 265
    assert gpt2ish.token_to_id("hell") == 97
    assert gpt2ish.token_to_id("nope") is None
    assert gpt2ish.id_to_token(103) == "\u0120world"
    assert gpt2ish.piece_text(103) == " world"
    assert gpt2ish.piece_text(94) == " "
    assert not gpt2ish.is_special(98)
    assert gpt2ish.summary.startswith("BPE (265 tokens, 9 merges)")
    assert "pre-tokenizer ByteLevel" in gpt2ish.summary
    r = repr(gpt2ish)
    assert r.startswith("tokdyn.Tokenizer(") and "vocab_size=265" in r and "tokenizer.json" in r


def test_template_adds_bos_only_with_special_tokens(tmp_path):
    t = tokdyn.Tokenizer.from_file(write(tmp_path / "tpl", byte_level_json(template=True)))
    assert t.vocab_size == 266
    e = t.encode("hello world")
    assert e.ids.tolist() == [265, 98, 103]
    assert e.pieces == ["<|bos|>", "hello", "\u0120world"]
    assert e.special == [True, False, False]
    assert e.texts == ["<|bos|>", "hello", " world"]
    assert t.encode("hello world", add_special_tokens=False).ids.tolist() == [98, 103]
    assert t.encode("").ids.tolist() == [265]
    assert t.encode("", False).ids.tolist() == []
    assert t.decode(e.ids) == "<|bos|>hello world"
    assert t.decode(e.ids, skip_special_tokens=True) == "hello world"
    # The special token spelled in the text is the added token.
    e = t.encode("a<|bos|>b", add_special_tokens=False)
    assert e.ids.tolist() == [ascii_id("a"), 265, ascii_id("b")]
    assert e.special == [False, True, False]
    assert t.is_special(265) and t.token_to_id("<|bos|>") == 265


# ---- SentencePiece-style BPE ----------------------------------------------------------------------


def test_byte_fallback_unknown_and_template(llamaish):
    # "abé" -> "▁abé": a b (rank 0) -> ab, ▁ ab (1) -> ▁ab; é (not in the vocabulary) as its UTF-8
    # bytes C3 A9; the template puts <s> first.
    e = llamaish.encode("abé")
    assert e.ids.tolist() == [1, 8, 5, 6]
    assert e.pieces == ["<s>", "\u2581ab", "<0xC3>", "<0xA9>"]
    assert e.special == [True, False, False, False]
    assert e.unknown == []
    # Each byte alone is invalid UTF-8: U+FFFD; "▁ab" alone loses its leading space to Strip.
    assert e.texts == ["<s>", "ab", "\ufffd", "\ufffd"]
    assert llamaish.decode(e.ids) == "<s> abé"  # as Hugging Face decodes Llama 2's
    assert llamaish.decode(e.ids, skip_special_tokens=True) == "abé"
    # 'z' has neither a token nor a byte token: the unknown token, two in a row fused into one.
    e = llamaish.encode("abzz", add_special_tokens=False)
    assert e.ids.tolist() == [8, 0]
    assert e.unknown == ["zz"]
    assert e.special == [False, False]
    assert "unknown=['zz']" in repr(e)
    # "ab ab" -> "▁ab▁ab", one word (no pre-tokenizer): both a b first (leftmost first), then ▁ ab twice.
    e = llamaish.encode("ab ab", add_special_tokens=False)
    assert e.ids.tolist() == [8, 8]
    assert llamaish.decode(e.ids) == "ab ab"
    assert llamaish.decode([1, 8, 8], skip_special_tokens=True) == "ab ab"


def test_decode_takes_lists_and_numpy_integer_arrays(llamaish):
    ids = [1, 8, 5, 6]
    want = "<s> abé"
    assert llamaish.decode(ids) == want
    assert llamaish.decode(tuple(ids)) == want
    for dt in (np.int64, np.int32, np.uint16, np.uint64):
        assert llamaish.decode(np.array(ids, dtype=dt)) == want
    assert llamaish.decode(np.array(ids)[::-1][::-1]) == want  # a strided view
    assert llamaish.decode([np.int64(1), np.int32(8), 5, 6]) == want
    assert llamaish.decode([]) == ""


def test_encode_batch_equals_one_by_one(llamaish, gpt2ish):
    texts = ["abé", "", "abzz", "ab ab ab", "zéa", "b" * 40] + [("ab " * (k % 5)) + "é" * (k % 3) for k in range(60)]
    for tok in (llamaish, gpt2ish):
        one = [tok.encode(t) for t in texts]
        for threads in (1, 2):
            batch = tok.encode_batch(texts, threads=threads)
            assert len(batch) == len(texts)
            assert batch == one
            assert [b.ids.tolist() for b in batch] == [o.ids.tolist() for o in one]
            assert [b.texts for b in batch] == [o.texts for o in one]
        plain = tok.encode_batch(texts, add_special_tokens=False, threads=2)
        assert plain == [tok.encode(t, add_special_tokens=False) for t in texts]
    assert llamaish.encode_batch([]) == []


def test_encode_batch_releases_the_gil(gpt2ish):
    texts = [f"hello world {k} " * 40 for k in range(4000)]
    done = threading.Event()

    def work():
        gpt2ish.encode_batch(texts, threads=1)
        done.set()

    th = threading.Thread(target=work)
    n = 0
    th.start()
    time.sleep(0.02)
    t0 = time.perf_counter()
    while not done.is_set():
        n += 1  # pure Python: runs only while the other thread does not hold the GIL
    th.join()
    elapsed = time.perf_counter() - t0
    assert elapsed > 0.05, "the batch was too short to tell"
    assert n > 1000, f"the main thread ran {n} iterations in {elapsed:.2f} s: the GIL was held"


def test_round_trip(gpt2ish, llamaish):
    for text in ["hello world", "  two  spaces ", "tabs\tand\nlines", "ünïcödé ✓ 你好 🙂", "12345 !!"]:
        # The byte-level vocabulary covers every byte: decode(encode(text)) is the text.
        e = gpt2ish.encode(text)
        assert e.unknown == []
        assert gpt2ish.decode(e.ids) == text, text
        if text.isascii():  # a byte of a longer UTF-8 character alone decodes to U+FFFD
            assert "".join(e.texts) == text
    for text in ["ab", "abé", "ab ab é"]:
        assert llamaish.decode(llamaish.encode(text).ids, skip_special_tokens=True) == text


# ---- folders ---------------------------------------------------------------------------------------


def test_from_checkpoint_and_sha256(tmp_path):
    p = write(tmp_path / "ck", sentencepiece_json())
    (tmp_path / "ck" / "config.json").write_text("{}")
    t = tokdyn.Tokenizer.from_checkpoint(tmp_path / "ck")  # a PathLike
    assert t.source == str(p)
    assert t.sha256 == hashlib.sha256(p.read_bytes()).hexdigest()
    assert tokdyn.Tokenizer.from_checkpoint(str(tmp_path / "ck")).encode("ab").ids.tolist() == [1, 8]
    assert tokdyn.Tokenizer.from_file(tmp_path / "ck").sha256 == t.sha256  # from_file takes the folder too
    f = tokdyn.Tokenizer.from_json(p.read_text(encoding="utf-8"), "mine")
    assert f.source == "mine" and f.sha256 == t.sha256


# ---- errors ----------------------------------------------------------------------------------------


def test_bad_files_raise_value_error_naming_them(tmp_path):
    j = byte_level_json()
    j["model"]["type"] = "WordPiece"
    p = write(tmp_path / "wp", j)
    with pytest.raises(ValueError, match=r'model type "WordPiece" is not supported') as ei:
        tokdyn.Tokenizer.from_file(p)
    assert str(p) in str(ei.value)
    (tmp_path / "broken").mkdir()
    (tmp_path / "broken" / "tokenizer.json").write_text('{"model": ')
    with pytest.raises(ValueError, match="not valid JSON"):
        tokdyn.Tokenizer.from_checkpoint(tmp_path / "broken")
    j = byte_level_json()
    j["model"]["merges"].append("x yz")
    with pytest.raises(ValueError, match="names 'yz', which is not in the vocabulary"):
        tokdyn.Tokenizer.from_file(write(tmp_path / "merge", j))
    with pytest.raises(ValueError, match="no such file or folder"):
        tokdyn.Tokenizer.from_file(tmp_path / "nowhere.json")


def test_from_checkpoint_without_tokenizer_json(tmp_path):
    (tmp_path / "ck").mkdir()
    (tmp_path / "ck" / "config.json").write_text("{}")
    with pytest.raises(ValueError, match=f"no tokenizer.json in {tmp_path / 'ck'}"):
        tokdyn.Tokenizer.from_checkpoint(tmp_path / "ck")
    with pytest.raises(ValueError, match="no such folder"):
        tokdyn.Tokenizer.from_checkpoint(tmp_path / "missing")
    with pytest.raises(ValueError, match="not a folder"):
        tokdyn.Tokenizer.from_checkpoint(tmp_path / "ck" / "config.json")


def test_unknown_ids_and_bad_ids(gpt2ish):
    with pytest.raises(ValueError, match="token id 5000 is not in the vocabulary"):
        gpt2ish.decode([98, 5000])
    with pytest.raises(ValueError, match="token id -1 is not in the vocabulary"):
        gpt2ish.decode(np.array([-1]))
    with pytest.raises(ValueError, match="token id 265 is not in the vocabulary"):
        gpt2ish.id_to_token(265)
    with pytest.raises(ValueError, match=r"ids\[1\]: type str; expected an integer token id"):
        gpt2ish.decode([98, "x"])
    with pytest.raises(ValueError, match=r"ids\[0\]: type float"):
        gpt2ish.decode([1.0])
    with pytest.raises(ValueError, match="dtype float64; expected integer token ids"):
        gpt2ish.decode(np.array([1.0, 2.0]))
    with pytest.raises(ValueError, match=r"shape \[1, 2\]; expected one sequence"):
        gpt2ish.decode(np.array([[1, 2]]))
    with pytest.raises(ValueError, match=r"ids\[0\] is 18446744073709551615"):
        gpt2ish.decode(np.array([2 ** 64 - 1], dtype=np.uint64))
    with pytest.raises(ValueError, match="ids: type str; expected a list or a NumPy array"):
        gpt2ish.decode("98")


def test_text_that_is_not_utf8(gpt2ish):
    # A str holding a lone surrogate has no UTF-8 form: refused with the tokenizer's message.
    with pytest.raises(ValueError, match=r"text: invalid UTF-8 at byte 1 \(byte 0xed\)"):
        gpt2ish.encode("a\udc80b")
    # bytes are taken as UTF-8.
    assert gpt2ish.encode(b"hello world").ids.tolist() == [98, 103]
    with pytest.raises(ValueError, match="invalid UTF-8 at byte 2"):
        gpt2ish.encode(b"ab\xff")
    with pytest.raises(ValueError, match=r"texts\[1\]: invalid UTF-8 at byte 0 \(byte 0xc0\)"):
        gpt2ish.encode_batch(["ok", b"\xc0\xaf"], threads=2)
    with pytest.raises(ValueError, match=r"texts\[1\]: type int; expected a str"):
        gpt2ish.encode_batch(["ok", 5])
    with pytest.raises(ValueError, match=r"texts: type str; expected a list of str"):
        gpt2ish.encode_batch("hello")
    with pytest.raises(ValueError, match="threads: expected 0"):
        gpt2ish.encode_batch(["a"], threads=-1)
    with pytest.raises(ValueError, match="text: type int; expected a str"):
        gpt2ish.encode(5)


def test_stubs_declare_the_classes_as_they_are():
    """python/tokdyn/__init__.pyi declares every public attribute of Tokenizer and Encoding, and no other."""
    import ast
    from pathlib import Path

    stub = ast.parse((Path(__file__).resolve().parents[2] / "python" / "tokdyn" / "__init__.pyi").read_text())
    for cls in (tokdyn.Tokenizer, tokdyn.Encoding):
        node = next(n for n in stub.body if isinstance(n, ast.ClassDef) and n.name == cls.__name__)
        declared = {f.name for f in node.body if isinstance(f, ast.FunctionDef) and not f.name.startswith("_")}
        assert declared == {n for n in dir(cls) if not n.startswith("_")}, cls.__name__
    assert {"Tokenizer", "Encoding"} <= set(tokdyn.__all__)
