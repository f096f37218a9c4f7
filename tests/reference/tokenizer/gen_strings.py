#!/usr/bin/python3
"""Deterministic generator of test strings for tokdyn's tokenizers (tests/reference/
test_tokenizer_reference.py, scripts/bench_tokenizer.sh): N strings (default 100000) from a seed,
each built from fragments of the hard categories of tests/data/tokenizer_corpus.jsonl (English
words and punctuation, contractions in every case, numbers, whitespace runs with Unicode spaces,
code, URLs, emoji sequences, combining marks, CJK / kana / Hangul, right-to-left scripts, Indic and
Thai, the special tokens spelled in text and misspelled) and of random code points from assigned
Unicode blocks. Lengths run from 0 to a few hundred code points; about one string in 500 is much
longer (1000 to 8000 code points).

Random code points are drawn only from characters assigned in Unicode 3.2 (Python's
unicodedata.ucd_3_2_0), plus emoji ranges assigned by Unicode 7: never unassigned code points,
surrogates or noncharacters. Hugging Face's tokenizers classify characters with Oniguruma's Unicode
tables (tokdyn uses the same tables), and characters assigned since Unicode 12 at the latest keep
the test free of differences that come only from the version of those tables.

    gen_strings.py [-n N] [--seed S] [-o OUT.jsonl]      (default: stdout)

OUT holds one JSON string per line (write_jsonl: UTF-8, with the controls and the line
separators U+0085, U+2028, U+2029 escaped, so that any line splitter sees one string per line).
"""
import argparse
import itertools
import json
import random
import sys
import unicodedata

# ---- JSON lines ----------------------------------------------------------------------------------

_ESCAPE = {c: "\\u%04x" % c for c in list(range(0x7F, 0xA0)) + [0x2028, 0x2029]}


def to_json_line(s, ascii_only=False):
    """One string as one line of JSON (no raw line breaks or C1 controls)."""
    return json.dumps(s, ensure_ascii=ascii_only).translate(_ESCAPE)


def write_jsonl(strings, path, ascii_only=False):
    with open(path, "w", encoding="utf-8", newline="\n") as f:
        for s in strings:
            f.write(to_json_line(s, ascii_only) + "\n")


def read_jsonl(path):
    """The strings of a JSON-lines file (split on \\n only: U+2028 and friends are not line ends)."""
    with open(path, "rb") as f:
        data = f.read().decode("utf-8")
    return [json.loads(line) for line in data.split("\n") if line != ""]


# ---- random code points from assigned blocks -----------------------------------------------------

BLOCKS = [  # (first, last, weight)
    (0x0020, 0x007E, 6), (0x00A0, 0x00FF, 4), (0x0100, 0x024F, 3), (0x0250, 0x02FF, 1),
    (0x0300, 0x036F, 3),  # combining diacritical marks
    (0x0370, 0x03FF, 2), (0x0400, 0x04FF, 3), (0x0530, 0x058F, 1), (0x0590, 0x05FF, 2),
    (0x0600, 0x06FF, 3), (0x0700, 0x074F, 1), (0x0900, 0x097F, 2), (0x0980, 0x09FF, 1),
    (0x0B80, 0x0BFF, 1), (0x0E00, 0x0E7F, 2), (0x0E80, 0x0EFF, 1), (0x0F00, 0x0FFF, 1),
    (0x10A0, 0x10FF, 1), (0x1100, 0x11FF, 1), (0x1200, 0x137F, 1), (0x13A0, 0x13FF, 1),
    (0x1400, 0x167F, 1), (0x1680, 0x169F, 1), (0x16A0, 0x16FF, 1), (0x1780, 0x17FF, 1),
    (0x1800, 0x18AF, 1), (0x1E00, 0x1EFF, 2), (0x1F00, 0x1FFF, 1),
    (0x2000, 0x206F, 3),  # general punctuation: spaces, zero widths, marks
    (0x2070, 0x209F, 1), (0x20A0, 0x20CF, 1), (0x2100, 0x214F, 1), (0x2150, 0x218F, 1),
    (0x2190, 0x21FF, 1), (0x2200, 0x22FF, 1), (0x2460, 0x24FF, 1), (0x2500, 0x257F, 1),
    (0x2600, 0x26FF, 1), (0x2700, 0x27BF, 1), (0x3000, 0x303F, 2), (0x3040, 0x309F, 3),
    (0x30A0, 0x30FF, 3), (0x3130, 0x318F, 1), (0x3200, 0x33FF, 1), (0x4E00, 0x9FA5, 6),
    (0xAC00, 0xD7A3, 4), (0xE000, 0xE0FF, 1),  # private use (assigned as Co)
    (0xF900, 0xFAFF, 1), (0xFB00, 0xFB4F, 1), (0xFE00, 0xFE0F, 1), (0xFE30, 0xFE4F, 1),
    (0xFE70, 0xFEFF, 1), (0xFF00, 0xFFEF, 2), (0x10300, 0x1032F, 1), (0x1D400, 0x1D7FF, 1),
    (0x20000, 0x2A6D6, 1),  # CJK extension B
    (0x1F300, 0x1F64F, 3), (0x1F680, 0x1F6C5, 1),  # emoji (Unicode 6 and 7)
]
_EMOJI = [(0x1F300, 0x1F64F), (0x1F680, 0x1F6C5)]
_POOLS = None


def _assigned(cp):
    if any(a <= cp <= b for a, b in _EMOJI):
        return True
    if 0xD800 <= cp <= 0xDFFF or (cp & 0xFFFE) == 0xFFFE or 0xFDD0 <= cp <= 0xFDEF:
        return False
    return unicodedata.ucd_3_2_0.category(chr(cp)) not in ("Cn", "Cs")


def _pools():
    global _POOLS
    if _POOLS is None:
        pools = ["".join(chr(c) for c in range(a, b + 1) if _assigned(c)) for a, b, _ in BLOCKS]
        _POOLS = (pools, list(itertools.accumulate(w for _, _, w in BLOCKS)))
    return _POOLS


# ---- fragments ---------------------------------------------------------------------------------

WORDS = ("the of and to in is was for that with as on by at from his her an were which this be are "
         "not or have had it they their been one all would there we when who will more no if out so said "
         "what up its about into than them can only other new some could time these two may then do first "
         "any my now such like our over man me even most made after also did many before must through back "
         "years where much your way well down should because each just those people how too little state "
         "good very make world still own see men work long get here between both life being under never day "
         "same another know while last might us great old year off come since against go came right used take "
         "three tokenizer Hello World GPT Llama Pythia UTF encoding decoding naïve café résumé Zürich façade "
         "coöperate São Paulo München Ångström Dvořák Łódź İstanbul straße ÉCOLE Ῥόδος").split()
CONTRACTIONS = ["'s", "'t", "'re", "'ve", "'m", "'ll", "'d", "’s", "’t", "’re", "’ve", "’m", "’ll", "’d"]
PUNCT = list(".,;:!?-()[]{}\"'/\\@#$%^&*_+=<>|~`") + ["...", "--", "—", "–", "…", "«", "»", "“", "”", "‘", "’", "¿", "¡"]
SPACES = [" ", " ", " ", "  ", "   ", "\t", "\n", "\n\n", "\n\n\n", "\r\n", "\r", " \n", "\n ", "\u00a0", "\u2003",
          "\u3000", "\u0085", "\u180e", "\u200b", "\u2028", "\u2029", "\u000b", "\u000c", "\u1680", "\u2002",
          "\u2009", "\u200a", "\u202f", "\u205f", "\ufeff", "\u200c", "\u200d", "\u2060"]
SPECIALS = ["<|endoftext|>", "<s>", "</s>", "<unk>", "<|begin_of_text|>", "<|end_of_text|>",
            "<|reserved_special_token_7|>", "<|reserved_special_token_0|>", "<|start_header_id|>",
            "<|end_header_id|>", "<|eot_id|>", "<|endoftext|", "<|endoftext", "|endoftext|>", "<s >", "< s>",
            "<S>", "</s", "<|begin_of_text", "<|reserved_special_token_250|>", "<|ENDOFTEXT|>", "<<s>>",
            "<0x41>", "▁", "▁▁", "Ġ", "Ċ"]
EMOJI = ["😀", "😂", "🤔", "👍", "👍🏻", "👍🏽", "👍🏿", "👋🏼", "👨‍👩‍👧‍👦", "👩‍💻", "👩🏾‍💻", "🏳️‍🌈", "🏴‍☠️", "❤️",
         "❤", "☺️", "🇫🇷", "🇯🇵", "🇺🇸", "🇩🇪🇮🇹", "1️⃣", "#️⃣", "*️⃣", "🧑‍🤝‍🧑", "🐈‍⬛", "🙂", "🦀", "🚀", "🎉",
         "👁️‍🗨️", "🤷‍♀️", "🤷🏽‍♂️", "🏊‍♀", "✌️", "™️", "©", "🔥🔥🔥"]
COMBINING = ["e\u0301", "a\u0308", "o\u0302\u0323", "n\u0303", "u\u0308\u0301", "A\u030a", "\u212b", "\u00c5",
             "Z\u0337\u0322\u031ba\u0336l\u0335g\u0338o\u0334", "\u0915\u094d\u0937", "\u0627\u064e", "\u05e9\u05c1",
             "\u1100\u1161\u11a8", "\uac01", "\u0301", "\u0301\u0301\u0301", "i\u0307", "\u1e9b\u0323", "ﬁ", "ﬀ",
             "①", "㍿", "Ⅻ", "²", "½", "ｶ", "ﾞ", "Ａ", "𝐀", "ǅ", "ẞ", "ς", "ΐ"]
SCRIPTS = ["你好，世界！", "我爱北京天安门。", "漢字と仮名の混在した文章です。", "こんにちは", "カタカナ", "ｶﾀｶﾅ",
           "안녕하세요 세계", "한국어 문장입니다.", "مرحبا بالعالم", "שלום עולם", "नमस्ते दुनिया", "สวัสดีชาวโลก",
           "Привет, мир!", "Γειά σου Κόσμε", "გამარჯობა", "Բարեւ", "ሰላም", "ᏣᎳᎩ", "ᠮᠣᠩᠭᠣᠯ", "ភាសាខ្មែរ",
           "தமிழ்", "বাংলা", "ພາສາລາວ", "བོད་ཡིག", "٠١٢٣٤٥٦٧٨٩", "०१२३४५६७८९", "𝟘𝟙𝟚", "¹²³", "Ⅳ"]
CODE = ["def f(x):\n    return x ** 2\n", "for (int i = 0; i < n; ++i) {\n\tsum += a[i];\n}",
        "template <typename T>\nstd::vector<T> v{1, 2, 3};", '{"key": [1, 2.5, null, true], "k2": {"a": "b"}}',
        "<div class=\"x\">Hello &amp; <b>bye</b></div>", "SELECT * FROM t WHERE id = 42;", "x = [i for i in range(10)]",
        "if (a && b || !c) { return -1; }", "#include <stdio.h>\nint main(void) { printf(\"%d\\n\", 1); }",
        "    indented\n        more\n", "\tcase 'a': break;", "lambda x: x@y", "a->b::c<d>()", "// comment\n/* block */",
        "$ ls -la | grep '^d' > out.txt 2>&1", "regex: ^\\s*(\\d+)\\.(\\d{2,})$", "0x1F; 0b1010; 1e-10; 3.14f"]
URLS = ["https://example.com/path?q=1&r=2#frag", "http://xn--nxasmq6b.com/", "ftp://ftp.example.org/pub/",
        "https://en.wikipedia.org/wiki/Byte_pair_encoding", "user.name+tag@example.co.uk", "www.example.com",
        "https://github.com/huggingface/tokenizers/blob/main/README.md", "file:///usr/share/dict/words"]


def _number(rng):
    k = rng.random()
    if k < 0.4:
        return str(rng.randrange(10 ** rng.randint(1, 6)))
    if k < 0.55:
        return "".join(rng.choice("0123456789") for _ in range(rng.randint(7, 40)))
    if k < 0.7:
        return "%d.%0*d" % (rng.randrange(1000), rng.randint(1, 6), rng.randrange(10 ** 6) % 10 ** rng.randint(1, 6))
    if k < 0.8:
        return "{:,}".format(rng.randrange(10 ** 9))
    if k < 0.9:
        return rng.choice(["-", "+", "$", "€", "#", "v", "x"]) + str(rng.randrange(10 ** 4))
    return rng.choice(["1e-10", "2024-01-01", "10:30pm", "3/4", "1st", "22nd", "0.5%", "19.99$", "007", "1_000"])


def _random_chars(rng, n):
    pools, cum = _pools()
    return "".join(p[int(rng.random() * len(p))] for p in rng.choices(pools, cum_weights=cum, k=n))


def _fragment(rng, cat):
    if cat == "words":
        w = rng.choice(WORDS)
        k = rng.random()
        if k < 0.1:
            w = w.upper()
        elif k < 0.25:
            w = w.capitalize()
        return w + (rng.choice(PUNCT) if rng.random() < 0.15 else "") + " "
    if cat == "contraction":
        c = rng.choice(CONTRACTIONS)
        k = rng.random()
        c = c.upper() if k < 0.3 else (c[:2] + c[2:].upper() if k < 0.4 else c)
        return rng.choice(["it", "IT", "we", "they", "I", "you", "", " ", "don", "O", "rock "]) + c + rng.choice([" ", "", "'", "s", "\n"])
    if cat == "number":
        return _number(rng) + rng.choice([" ", "", ".", ",", "\n", "abc"])
    if cat == "space":
        return rng.choice(SPACES) * (1 if rng.random() < 0.8 else rng.randint(2, 12))
    if cat == "code":
        return rng.choice(CODE)
    if cat == "url":
        return rng.choice(URLS) + rng.choice([" ", "", "\n", ")."])
    if cat == "random":
        return _random_chars(rng, rng.randint(1, 12))
    if cat == "emoji":
        return "".join(rng.choice(EMOJI) for _ in range(rng.randint(1, 4))) + rng.choice(["", " ", "!"])
    if cat == "combining":
        return rng.choice(COMBINING) + rng.choice(["", " ", "x", "\u0301"])
    if cat == "script":
        return rng.choice(SCRIPTS) + rng.choice(["", " ", "。", "\n"])
    if cat == "special":
        return rng.choice(["", " ", "\n", "x"]) + rng.choice(SPECIALS) + rng.choice(["", " ", "\n", "y", "  "])
    if cat == "punct":
        return "".join(rng.choice(PUNCT) for _ in range(rng.randint(1, 5)))
    raise ValueError(cat)


CATEGORIES = [("words", 30), ("contraction", 6), ("number", 8), ("space", 10), ("code", 5), ("url", 3),
              ("random", 14), ("emoji", 6), ("combining", 5), ("script", 8), ("special", 4), ("punct", 5)]


_CAT_NAMES = [c for c, _ in CATEGORIES]
_CAT_CUM = list(itertools.accumulate(w for _, w in CATEGORIES))


def _pick_category(rng):
    return rng.choices(_CAT_NAMES, cum_weights=_CAT_CUM)[0]


def _one(rng):
    k = rng.random()
    if k < 0.01:
        return rng.choice(["", " ", "  ", "\n", "\t", "a", "'s", "<s>", "<|endoftext|>", "😀", "\u00a0", "0"])
    if k < 0.012:  # much longer: a long run of one character, a long word, or long mixed text
        n = rng.randint(1000, 8000)
        kind = rng.random()
        if kind < 0.3:
            return rng.choice(["a", " ", "\n", "9", "中", "😀", "-", "▁", "é", "\t"]) * n
        if kind < 0.5:
            return "".join(rng.choice("abcdefghijklmnopqrstuvwxyz") for _ in range(n))
        length = n
    else:
        length = min(int(rng.expovariate(1 / 70.0)) + 1, 400)
    single = rng.random() < 0.4
    cat = _pick_category(rng)
    parts, size = [], 0
    while size < length:
        if not single:
            cat = _pick_category(rng)
        f = _fragment(rng, cat)
        parts.append(f)
        size += len(f)
    s = "".join(parts)
    # Cut to the target length most of the time (which also cuts inside emoji and ZWJ sequences),
    # keep the fragment whole otherwise.
    return s[:length] if rng.random() < 0.7 else s


def generate(n=100000, seed=0):
    rng = random.Random(seed)
    return [_one(rng) for _ in range(n)]


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("-n", type=int, default=100000)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("-o", "--out", default="-")
    a = ap.parse_args()
    strings = generate(a.n, a.seed)
    if a.out == "-":
        for s in strings:
            sys.stdout.write(to_json_line(s) + "\n")
    else:
        write_jsonl(strings, a.out)


if __name__ == "__main__":
    main()
