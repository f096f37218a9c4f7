"""The variants of tests/reference/test_tokenizer_reference.py: tokenizer.json files written from the
published GPT-2, Llama 2 and Llama 3 vocabularies by editing their JSON (normalizers, added-token
flags, Metaspace, ignore_merges, every Split behaviour, Digits, Whitespace(Split), the
post-processors, byte fallback, unk and fuse_unk), and `splice`, which puts added tokens into the
generated strings. VARIANTS: name -> (base, edit, added-token contents spliced into the generated
strings, lossless)."""
import random


# ---- variants: edits of the published files --------------------------------------------------------

GPT2_EOT = 50256
BYTELEVEL_NOREGEX = {"type": "ByteLevel", "add_prefix_space": False, "trim_offsets": True, "use_regex": False}
BYTELEVEL_REGEX = {"type": "ByteLevel", "add_prefix_space": False, "trim_offsets": True, "use_regex": True}


def added(i, content, special, lstrip=False, rstrip=False, single_word=False, normalized=None):
    return {"id": i, "content": content, "single_word": single_word, "lstrip": lstrip, "rstrip": rstrip,
            "normalized": (not special) if normalized is None else normalized, "special": special}


def with_added(d, tokens):
    """Adds tokens: one that is in the vocabulary keeps its vocabulary id (as the library assigns),
    the others get ids after the vocabulary and the existing added tokens."""
    vocab = d["model"]["vocab"]
    nxt = max(max(vocab.values()), max((t["id"] for t in d["added_tokens"]), default=-1)) + 1
    for t in tokens:
        t = dict(t)
        if t["content"] in vocab:
            t["id"] = vocab[t["content"]]
        else:
            t["id"], nxt = nxt, nxt + 1
        d["added_tokens"].append(t)
    return d


def gpt2_pre(split):
    return {"type": "Sequence", "pretokenizers": [split, BYTELEVEL_NOREGEX]}


# Added tokens of the GPT-2 variants (content, special, lstrip, rstrip, single_word, normalized).
GPT2_ADDED = [
    ("<mask>", True, True, False, False, False), ("[R]", True, False, True, False, False),
    ("<both>", True, True, True, False, False), ("hello", False, False, False, True, True),
    ("world", False, False, False, False, True), ("the", False, False, False, True, False),
    ("Wörld", False, False, False, False, False), ("ab cd", False, False, False, False, True),
    ("<x>", True, False, False, False, False), ("<x><y>", False, False, False, False, False),
    ("😀👍", False, False, False, False, False), ("[sw]", True, True, True, True, False),
    ("é", False, False, False, False, True),
]
GPT2_ADDED_NFKC = [  # matched after NFKC when normalized: the library normalizes their content too
    ("ﬁne", False, False, False, False, True), ("Ｘ", False, False, False, False, False),
    ("①", False, False, False, False, True), ("Å", False, False, False, True, True),
    ("<ＭＡＳＫ>", True, True, False, False, True),
]
LLAMA2_ADDED = [
    ("<|im_start|>", True, False, False, False, False), ("<|im_end|>", True, False, True, False, False),
    ("[INST]", False, True, True, False, False), ("hello", False, False, False, True, True),
    (" world", False, False, False, False, True), ("<<SYS>>", True, True, False, False, False),
]
NEOX_SPACES = [" " * k for k in range(24, 1, -1)]  # GPT-NeoX / Pythia: runs of spaces as added tokens


def added_list(rows):
    return [added(0, c, s, lstrip=l, rstrip=r, single_word=w, normalized=n) for c, s, l, r, w, n in rows]


def v_gpt2_added(d):
    return with_added(d, added_list(GPT2_ADDED))


def v_gpt2_added_nfkc(d):
    d["normalizer"] = {"type": "NFKC"}
    return with_added(d, added_list(GPT2_ADDED_NFKC))


def v_neox_like(d):
    d["normalizer"] = {"type": "NFC"}
    return with_added(d, [added(0, "<|padding|>", True)] + [added(0, s, False) for s in NEOX_SPACES])


def v_llama2_added(d):
    return with_added(d, added_list(LLAMA2_ADDED))


def v_normalizer(n):
    def f(d):
        d["normalizer"] = n
        return d
    return f


def v_split(pattern, behavior, invert):
    def f(d):
        d["pre_tokenizer"] = gpt2_pre({"type": "Split", "pattern": pattern, "behavior": behavior, "invert": invert})
        return d
    return f


def v_pre(pre):
    def f(d):
        d["pre_tokenizer"] = pre
        return d
    return f


def v_post(post, tokens=()):
    def f(d):
        d["post_processor"] = post
        return with_added(d, [added(0, t, True) for t in tokens])
    return f


def v_bytelevel_prefix(d):
    d["pre_tokenizer"] = dict(BYTELEVEL_REGEX, add_prefix_space=True)
    d["decoder"] = dict(d["decoder"], add_prefix_space=True)
    return d


def v_decoder_sequence(d):
    d["decoder"] = {"type": "Sequence", "decoders": [
        {"type": "ByteLevel", "add_prefix_space": True, "trim_offsets": True, "use_regex": True},
        {"type": "Replace", "pattern": {"String": "Hello"}, "content": "Bye"},
        # stop = 0: Hugging Face tokenizers 0.22.2 panics (aborting the process) in a Strip decoder with
        # stop >= 1 on an empty or short decoded string (decoders/strip.rs).
        {"type": "Strip", "content": " ", "start": 2, "stop": 0}]}
    return d


def v_metaspace(scheme, split):
    def f(d):
        d["normalizer"] = None
        d["pre_tokenizer"] = {"type": "Metaspace", "replacement": "\u2581", "prepend_scheme": scheme, "split": split}
        d["decoder"] = {"type": "Metaspace", "replacement": "\u2581", "prepend_scheme": scheme, "split": split}
        return d
    return f


def v_unk(fuse):
    def f(d):
        d["model"].update(byte_fallback=False, unk_token="<unk>", fuse_unk=fuse)
        return d
    return f


def v_llama2_template(d):
    d["post_processor"] = {
        "type": "TemplateProcessing",
        "single": [{"SpecialToken": {"id": "<s>", "type_id": 0}}, {"Sequence": {"id": "A", "type_id": 0}},
                   {"SpecialToken": {"id": "</s>", "type_id": 0}}],
        "pair": [{"SpecialToken": {"id": "<s>", "type_id": 0}}, {"Sequence": {"id": "A", "type_id": 0}},
                 {"SpecialToken": {"id": "</s>", "type_id": 0}}, {"SpecialToken": {"id": "<s>", "type_id": 1}},
                 {"Sequence": {"id": "B", "type_id": 1}}, {"SpecialToken": {"id": "</s>", "type_id": 1}}],
        "special_tokens": {"<s>": {"id": "<s>", "ids": [1], "tokens": ["<s>"]},
                           "</s>": {"id": "</s>", "ids": [2], "tokens": ["</s>"]}}}
    return d


def v_llama3_template(d):  # the format of the current Llama 3 files: ByteLevel, then the BOS template
    d["post_processor"] = {"type": "Sequence", "processors": [
        {"type": "ByteLevel", "add_prefix_space": True, "trim_offsets": False, "use_regex": True},
        {"type": "TemplateProcessing",
         "single": [{"SpecialToken": {"id": "<|begin_of_text|>", "type_id": 0}}, {"Sequence": {"id": "A", "type_id": 0}}],
         "pair": [{"SpecialToken": {"id": "<|begin_of_text|>", "type_id": 0}}, {"Sequence": {"id": "A", "type_id": 0}},
                  {"SpecialToken": {"id": "<|begin_of_text|>", "type_id": 1}}, {"Sequence": {"id": "B", "type_id": 1}}],
         "special_tokens": {"<|begin_of_text|>": {"id": "<|begin_of_text|>", "ids": [128000],
                                                  "tokens": ["<|begin_of_text|>"]}}}]}
    return d


def v_ignore_merges_false(d):
    d["model"]["ignore_merges"] = False
    return d


def v_truncation(d):
    d["truncation"] = {"direction": "Right", "max_length": 16, "strategy": "LongestFirst", "stride": 0}
    return d


SPLIT_REGEX = {"Regex": "\\s+|\\p{P}"}
BEHAVIORS = ["Removed", "Isolated", "MergedWithPrevious", "MergedWithNext", "Contiguous"]
GPT2_TEMPLATE = {
    "type": "TemplateProcessing",
    "single": [{"SpecialToken": {"id": "<|endoftext|>", "type_id": 0}}, {"Sequence": {"id": "A", "type_id": 0}},
               {"SpecialToken": {"id": "<|endoftext|>", "type_id": 0}}],
    "pair": [{"Sequence": {"id": "A", "type_id": 0}}, {"Sequence": {"id": "B", "type_id": 1}}],
    "special_tokens": {"<|endoftext|>": {"id": "<|endoftext|>", "ids": [GPT2_EOT], "tokens": ["<|endoftext|>"]}}}

# name: (base, edit, added-token contents spliced into the generated strings, lossless)
VARIANTS = {
    "gpt2-nfc": ("gpt2", v_normalizer({"type": "NFC"}), (), False),
    "gpt2-nfkc": ("gpt2", v_normalizer({"type": "NFKC"}), (), False),
    "gpt2-nfd": ("gpt2", v_normalizer({"type": "NFD"}), (), False),
    "gpt2-nfkd": ("gpt2", v_normalizer({"type": "NFKD"}), (), False),
    "gpt2-strip-replace": ("gpt2", v_normalizer({"type": "Sequence", "normalizers": [
        {"type": "Strip", "strip_left": True, "strip_right": True},
        {"type": "Replace", "pattern": {"String": "\t"}, "content": "    "},
        {"type": "Replace", "pattern": {"String": "é"}, "content": "e"}]}), (), False),
    "gpt2-strip-left": ("gpt2", v_normalizer({"type": "Strip", "strip_left": True, "strip_right": False}), (), False),
    "gpt2-replace-regex": ("gpt2", v_normalizer({"type": "Replace", "pattern": {"Regex": "\\d{3,}|\\s{2,}"},
                                                 "content": "#"}), (), False),
    "gpt2-prepend": ("gpt2", v_normalizer({"type": "Prepend", "prepend": " "}), (), False),
    "gpt2-added": ("gpt2", v_gpt2_added, tuple(r[0] for r in GPT2_ADDED), False),
    "gpt2-added-nfkc": ("gpt2", v_gpt2_added_nfkc, tuple(r[0] for r in GPT2_ADDED_NFKC) + ("fine", "X", "1"), False),
    "neox-like": ("gpt2", v_neox_like, tuple(NEOX_SPACES[::4]) + ("<|padding|>",), False),
    "gpt2-bytelevel-prefix": ("gpt2", v_bytelevel_prefix, (), False),
    "gpt2-decoder-sequence": ("gpt2", v_decoder_sequence, (), False),
    **{f"gpt2-split-{b.lower()}-{'invert' if inv else 'plain'}": ("gpt2", v_split(SPLIT_REGEX, b, inv), (), False)
       for b in BEHAVIORS for inv in (False, True)},
    "gpt2-split-string-removed": ("gpt2", v_split({"String": " "}, "Removed", False), (), False),
    "gpt2-split-string-contiguous": ("gpt2", v_split({"String": "ab"}, "Contiguous", False), (), False),
    "gpt2-digits-individual": ("gpt2", v_pre({"type": "Sequence", "pretokenizers": [
        {"type": "Digits", "individual_digits": True}, BYTELEVEL_REGEX]}), (), True),
    "gpt2-digits-grouped": ("gpt2", v_pre({"type": "Sequence", "pretokenizers": [
        {"type": "Digits", "individual_digits": False}, BYTELEVEL_REGEX]}), (), True),
    "gpt2-whitespace": ("gpt2", v_pre(gpt2_pre({"type": "Whitespace"})), (), False),
    "gpt2-whitespacesplit": ("gpt2", v_pre(gpt2_pre({"type": "WhitespaceSplit"})), (), False),
    "gpt2-template": ("gpt2", v_post(GPT2_TEMPLATE), (), False),
    "gpt2-bert": ("gpt2", v_post({"type": "BertProcessing", "sep": ["[SEP]", 50258], "cls": ["[CLS]", 50257]},
                                 ("[CLS]", "[SEP]")), ("[CLS]", "[SEP]"), False),
    "gpt2-roberta": ("gpt2", v_post({"type": "RobertaProcessing", "sep": ["</s>", 50258], "cls": ["<s>", 50257],
                                     "trim_offsets": True, "add_prefix_space": True}, ("<s>", "</s>")), (), False),
    "gpt2-post-sequence": ("gpt2", v_post({"type": "Sequence", "processors": [
        {"type": "ByteLevel", "add_prefix_space": True, "trim_offsets": False, "use_regex": True}, GPT2_TEMPLATE]}),
        (), False),
    "gpt2-truncation": ("gpt2", v_truncation, (), False),
    **{f"llama2-metaspace-{s}-{'split' if sp else 'nosplit'}": ("llama2", v_metaspace(s, sp), ("<s>", "</s>"), False)
       for s in ("first", "always", "never") for sp in (True, False)},
    "llama2-unk-fuse": ("llama2", v_unk(True), (), False),
    "llama2-unk-nofuse": ("llama2", v_unk(False), (), False),
    "llama2-template": ("llama2", v_llama2_template, (), False),
    "llama2-added": ("llama2", v_llama2_added, tuple(r[0] for r in LLAMA2_ADDED), False),
    "llama3-merges": ("llama3", v_ignore_merges_false, (), True),
    "llama3-template": ("llama3", v_llama3_template, (), False),
}
# Variants where tokdyn may refuse the file instead of matching (exit 2, one line): a field outside
# the brief (truncation).
MAY_REFUSE = {"gpt2-truncation"}



def splice(strings, tokens, seed):
    """Inserts added-token contents into the strings: alone, between words, inside words, next to
    spaces and newlines."""
    rng = random.Random(seed)
    out = []
    for s in strings:
        if tokens and rng.random() < 0.6:
            for _ in range(rng.randint(1, 3)):
                t = rng.choice(tokens)
                t = rng.choice(["", " ", "  ", "\n", "x", ",", "\t"]) + t + rng.choice(["", " ", "  ", "\n", "y", "."])
                i = rng.randint(0, len(s))
                s = s[:i] + t + s[i:]
        out.append(s)
    return out
