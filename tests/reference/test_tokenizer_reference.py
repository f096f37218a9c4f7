"""tokdyn's tokenizers against Hugging Face's own library: `tokdyn tokenize PATH --jsonl IN --json`
must give the ids, the pieces (vocabulary strings of the ids) and decode(ids) of Hugging Face's
tokenizers 0.22.2 (its Node binding, run by tokenizer/ref.js) on every string, with zero
differences. The pieces are the library's getTokens(), except at an added token: there the library
gives the text the token matched (normalized, with the whitespace lstrip / rstrip took) and the test
expects the vocabulary string (the places are counted and shown at the end).

  * GPT-2, Llama 2 and Llama 3 (the published tokenizer.json files of the @lenml/tokenizer-*
    packages; the `llama2` package's vocabulary is Mistral 7B's, a Llama-2-style SentencePiece BPE
    with the Prepend/Replace normalizer and byte fallback) on tests/data/tokenizer_corpus.jsonl and
    100 000 generated strings (tokenizer/gen_strings.py, seed 0), with special tokens added; the
    corpus also without; decode(encode(s)) == s on every string for the byte-level GPT-2 and Llama 3;
  * GPT-2 against GPT-2's original encoder (gpt-3-encoder) on the corpus lines where the two
    references agree;
  * variants (tokenizer/variants.py) written from those vocabularies by editing the JSON (normalizers, added-token
    flags, Metaspace, ignore_merges, every Split behaviour, Digits, Whitespace(Split), the
    post-processors, byte fallback, unk and fuse_unk), each on the corpus and 5000 generated strings
    (seed 1); a variant the reference itself refuses is skipped with the reference's message;
  * types tokdyn does not implement, and broken files: exit code 2, one `tokdyn: error:` line
    naming the type or the problem, nothing on stdout.

Everything runs in batches: one node process for all reference encodings, one tokdyn process per
tokenizer file, the two sides at the same time. Environment: TOKDYN_BIN (the CLI), TOKDYN_NPM (the
folder tests/scripts/tokenizer_refs.sh installed the references into; default: the npm folder next to
TOKDYN_BIN), TOKDYN_TOKREF_N (generated strings for the three tokenizers, default 100000).
Run by CTest (test `tokenizer_reference`, after the fixture `tokenizer_refs_install`)."""
import copy
import json
import os
import re
import shutil
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE / "tokenizer"))
import gen_strings  # noqa: E402
# The variants (edits of the published files) and the splicing of added tokens into the strings.
from variants import BYTELEVEL_NOREGEX, BYTELEVEL_REGEX, MAY_REFUSE, VARIANTS, added, splice  # noqa: E402

CLI = os.environ.get("TOKDYN_BIN", "tokdyn")
_cli_path = Path(shutil.which(CLI) or CLI).resolve()
NPM = Path(os.environ.get("TOKDYN_NPM") or _cli_path.parent / "npm")
REF_JS = HERE / "tokenizer" / "ref.js"
CORPUS = HERE.parent / "data" / "tokenizer_corpus.jsonl"
# Generated strings per published tokenizer: 50 000 in the suite (its time budget); TOKDYN_TOKREF_N=100000
# is the longer check docs/tokenizers.md reports (0 differences either way).
N_MAIN = int(os.environ.get("TOKDYN_TOKREF_N", "50000"))
N_VARIANT = 5000
MODELS = {m: NPM / "node_modules" / "@lenml" / f"tokenizer-{m}" / "models" / "tokenizer.json"
          for m in ("gpt2", "llama2", "llama3")}
TOKDYN_TIMEOUT = 300


def _npm_ready():
    return shutil.which("node") is not None and all(p.is_file() for p in MODELS.values()) and \
        (NPM / "node_modules" / "@anush008" / "tokenizers" / "index.js").is_file()


LOSSLESS_MAIN = {"gpt2", "llama3"}
PIECE_NOTES = []  # where HF's tokens are not the vocabulary strings (added tokens), shown at the end


# ---- running both sides --------------------------------------------------------------------------

class Job:
    def __init__(self, name, tokenizer, texts_file, no_special, lossless):
        self.name, self.tokenizer, self.texts_file = name, tokenizer, texts_file
        self.no_special, self.lossless = no_special, lossless
        self.ref_out = texts_file.parent / f"{name}.ref.jsonl"
        self.tok_out = texts_file.parent / f"{name}.tokdyn.jsonl"
        self.rc, self.stderr, self.ref_crash = None, "", None
        self.added_ids, self.piece_notes = set(), {}


def _main_jobs():
    return [f"{m}-{kind}" for m in ("gpt2", "llama2", "llama3") for kind in ("special", "nospecial")]


ALL_JOBS = _main_jobs() + list(VARIANTS)


def _run_tokdyn(job):
    cmd = [CLI, "tokenize", str(job.tokenizer), "--jsonl", str(job.texts_file), "--json"]
    if job.no_special:
        cmd.append("--no-special")
    with open(job.tok_out, "wb") as out:
        try:
            p = subprocess.run(cmd, stdout=out, stderr=subprocess.PIPE, timeout=TOKDYN_TIMEOUT)
            job.rc, job.stderr = p.returncode, p.stderr.decode("utf-8", "replace")
        except subprocess.TimeoutExpired:
            job.rc, job.stderr = "timeout", f"no answer in {TOKDYN_TIMEOUT} s"
        except OSError as e:
            job.rc, job.stderr = "oserror", str(e)


@pytest.fixture(scope="session")
def runs(tmp_path_factory):
    if not _npm_ready():
        pytest.fail(f"the reference tokenizers are not installed in {NPM} (tests/scripts/tokenizer_refs.sh {NPM}) "
                    "or node is missing")
    work = tmp_path_factory.mktemp("tokref")
    t0 = time.time()
    corpus = gen_strings.read_jsonl(CORPUS)
    main = corpus + gen_strings.generate(N_MAIN, seed=0)
    var = gen_strings.generate(N_VARIANT, seed=1)
    texts, files = {}, {}

    def texts_file(key, strings):
        if key not in files:
            files[key] = work / f"in-{len(files)}.jsonl"
            gen_strings.write_jsonl(strings, files[key])
        return files[key]

    bases = {m: json.loads(p.read_text(encoding="utf-8")) for m, p in MODELS.items()}
    jobs = {}
    for m in ("gpt2", "llama2", "llama3"):
        jobs[f"{m}-special"] = Job(f"{m}-special", MODELS[m], texts_file("main", main), False, m in LOSSLESS_MAIN)
        jobs[f"{m}-nospecial"] = Job(f"{m}-nospecial", MODELS[m], texts_file("corpus", corpus), True, m in LOSSLESS_MAIN)
        texts[f"{m}-special"], texts[f"{m}-nospecial"] = main, corpus
        for k in ("special", "nospecial"):
            jobs[f"{m}-{k}"].added_ids = {t["id"] for t in bases[m]["added_tokens"]}
    for name, (base, edit, tokens, lossless) in VARIANTS.items():
        d = edit(copy.deepcopy(bases[base]))
        tok = work / f"{name}.tokenizer.json"
        tok.write_text(json.dumps(d, ensure_ascii=False), encoding="utf-8")
        key = "var-" + ("|".join(tokens) if tokens else "plain")
        strings = corpus + (splice(var, list(tokens), seed=2) if tokens else var)
        jobs[name] = Job(name, tok, texts_file(key, strings), False, lossless)
        jobs[name].added_ids = {t["id"] for t in d["added_tokens"]}
        texts[name] = strings
    prep = time.time() - t0

    # The reference: two node processes (each in a thread, the jobs split by text count) while tokdyn
    # runs the same jobs.
    ref_result = {}

    def reference(part, todo):
        # A job that crashes node (a panic inside the library) leaves no output: it is noted, and the
        # jobs after it run in a new process.
        t = time.time()
        spec = work / f"jobs-{part}.json"
        env = dict(os.environ, TOKDYN_NPM=str(NPM))
        while todo:
            spec.write_text(json.dumps([{"tokenizer": str(j.tokenizer), "input": str(j.texts_file),
                                         "output": str(j.ref_out), "no_special": j.no_special} for j in todo]))
            p = subprocess.run(["node", str(REF_JS), "batch", str(spec)], env=env, capture_output=True, timeout=900)
            if p.returncode == 0:
                break
            done = [j.ref_out.is_file() for j in todo]
            if all(done):
                ref_result["error"] = p.stderr.decode("utf-8", "replace")
                break
            k = done.index(False)
            todo[k].ref_crash = p.stderr.decode("utf-8", "replace").strip()[:1000]
            todo = todo[k + 1:]
        ref_result[f"seconds-{part}"] = time.time() - t

    parts, load = [[], []], [0, 0]
    for j in sorted(jobs.values(), key=lambda j: -len(texts[j.name])):  # largest first, to the lighter part
        i = 0 if load[0] <= load[1] else 1
        parts[i].append(j)
        load[i] += len(texts[j.name])
    threads = [threading.Thread(target=reference, args=(i, part)) for i, part in enumerate(parts)]
    for th in threads:
        th.start()
    t = time.time()
    for j in jobs.values():
        _run_tokdyn(j)
    tok_seconds = time.time() - t
    for th in threads:
        th.join()
    ref_result["seconds"] = max(ref_result.get("seconds-0", 0.0), ref_result.get("seconds-1", 0.0))
    assert "error" not in ref_result, f"ref.js batch failed: {ref_result['error']}"
    costs = (f"inputs {prep:.1f} s; reference (two node processes, {len(jobs)} files, "
             f"{sum(len(texts[n]) for n in jobs)} texts) {ref_result['seconds']:.1f} s; tokdyn ({len(jobs)} processes, "
             f"at the same time) {tok_seconds:.1f} s")
    return {"jobs": jobs, "texts": texts, "work": work, "corpus": corpus, "costs": costs}


def read_lines(path):
    data = Path(path).read_bytes().decode("utf-8")
    return [json.loads(line) for line in data.split("\n") if line != ""]


def stdout_lines(data):
    """JSON lines of a process's output (split on \n only: U+2028 may stand raw inside a string)."""
    return [json.loads(line) for line in data.decode("utf-8").split("\n") if line != ""]


def _short(s, n=160):
    r = repr(s)
    return r if len(r) <= n else r[:n] + f"... ({len(s)} chars)"


def raw_lines(path):
    data = Path(path).read_bytes()
    lines = data.split(b"\n")
    if lines and lines[-1] == b"":
        lines.pop()
    return lines


def compare(job, strings):
    if job.ref_crash:
        pytest.skip(f"the reference crashes on {job.name}: {job.ref_crash}")
    ref_raw = raw_lines(job.ref_out)
    if len(ref_raw) == 1 and b'"error"' in ref_raw[0] and len(strings) != 1:
        pytest.skip(f"the reference refuses {job.name}: {json.loads(ref_raw[0])['error']}")
    if job.name in MAY_REFUSE and job.rc == 2:
        lines = job.stderr.rstrip("\n").split("\n")
        assert len(lines) == 1 and lines[0].startswith("tokdyn: error:"), job.stderr
        assert job.tok_out.stat().st_size == 0
        pytest.skip(f"tokdyn refuses {job.name} (allowed): {lines[0]}")
    assert job.rc == 0, f"tokdyn exit {job.rc} on {job.tokenizer}: {job.stderr.strip()[:2000]}"
    got_raw = raw_lines(job.tok_out)
    assert len(ref_raw) == len(strings)
    assert len(got_raw) == len(strings), f"tokdyn wrote {len(got_raw)} lines for {len(strings)} texts"
    diffs, lossy, inconsistent = [], [], []
    for i, (s, rb, gb) in enumerate(zip(strings, ref_raw, got_raw)):
        # ref.js writes the keys in tokdyn's order: an equal line is an equal result (and the reference
        # marks a decoded text that is not the input with "lossy"); only the other lines are parsed.
        if rb == gb:
            if job.lossless and b'"lossy":true' in rb and json.loads(rb)["decoded"] != s:
                lossy.append((s, json.loads(rb)["decoded"]))
            continue
        r = json.loads(rb)
        try:
            g = json.loads(gb)
        except ValueError as e:
            pytest.fail(f"tokdyn's line {i + 1} of {job.tok_out} is not JSON: {e}: {gb[:200]!r}")
        if "error" in r:
            pytest.fail(f"the reference fails on {_short(s)}: {r['error']}")
        if "vocab" in r:
            # tokdyn's pieces are the vocabulary strings of the ids. The library's tokens are too, except
            # for an added token, whose token is the text it matched (normalized, with the whitespace
            # lstrip / rstrip took): there the vocabulary string is expected (counted in job.piece_notes).
            for k, (tk, v) in enumerate(zip(r["pieces"], r["vocab"])):
                if tk != v:
                    if r["ids"][k] not in job.added_ids:
                        inconsistent.append((s, r["ids"][k], tk, v))
                    job.piece_notes[(r["ids"][k], tk, v)] = job.piece_notes.get((r["ids"][k], tk, v), 0) + 1
            r = dict(r, pieces=r["vocab"])
        fields = [k for k in ("ids", "pieces", "decoded") if r.get(k) != g.get(k)]
        if fields:
            diffs.append((i, s, r, g, fields))
        if job.lossless and g.get("decoded") != s:
            lossy.append((s, g.get("decoded")))
    assert not inconsistent, "the reference's tokens differ from its vocabulary strings outside added tokens: " + \
        "; ".join(f"{_short(s, 60)}: id {i} token {t!r} vocabulary {v!r}" for s, i, t, v in inconsistent[:5])
    if job.piece_notes:
        notes = sorted(job.piece_notes.items(), key=lambda kv: -kv[1])
        PIECE_NOTES.append(f"{job.name}: {sum(job.piece_notes.values())} added-token pieces where HF's token is the "
                           "matched text, not the vocabulary string, e.g. "
                           + ", ".join(f"id {i}: {t!r} for {v!r}" for (i, t, v), _ in notes[:4]))
    msg = []
    if diffs:
        msg.append(f"{job.name}: {len(diffs)} of {len(strings)} strings differ from Hugging Face tokenizers; the first 5:")
        for i, s, r, g, fields in diffs[:5]:
            msg.append(f"  line {i + 1}: {_short(s)} [{', '.join(fields)}]\n    expected ids {r['ids'][:60]}\n"
                       f"    tokdyn   ids {g.get('ids', [])[:60]}")
            if "ids" not in fields:
                for k in fields:
                    msg.append(f"    {k}: expected {_short(r[k])}, tokdyn {_short(g.get(k))}")
    if lossy:
        msg.append(f"{job.name}: decode(encode(s)) != s on {len(lossy)} strings, e.g. "
                   + "; ".join(f"{_short(a, 80)} -> {_short(b, 80)}" for a, b in lossy[:3]))
    assert not msg, "\n".join(msg)


@pytest.mark.parametrize("name", _main_jobs())
def test_published_tokenizers_match_hugging_face(runs, name):
    compare(runs["jobs"][name], runs["texts"][name])


@pytest.mark.parametrize("name", list(VARIANTS))
def test_variants_match_hugging_face(runs, name):
    compare(runs["jobs"][name], runs["texts"][name])


def test_gpt2_against_the_original_encoder(runs, capsys):
    """GPT-2's original encoder (gpt-3-encoder) on the corpus: where it agrees with Hugging Face,
    tokdyn gives the same ids. It knows no special tokens and uses JavaScript's \\s and Unicode
    tables, so a few lines differ between the two references (counted and shown)."""
    job = runs["jobs"]["gpt2-nospecial"]
    out = runs["work"] / "corpus.gpt3.jsonl"
    subprocess.run(["node", str(REF_JS), "gpt3", str(job.texts_file), str(out)], check=True,
                   env=dict(os.environ, TOKDYN_NPM=str(NPM)), timeout=300)
    corpus = runs["corpus"]
    orig = [x["ids"] for x in read_lines(out)]
    hf = [x["ids"] for x in read_lines(job.ref_out)]
    assert job.rc == 0, job.stderr
    got = [x["ids"] for x in read_lines(job.tok_out)]
    disagree = [i for i in range(len(corpus)) if orig[i] != hf[i]]
    with capsys.disabled():
        print(f"\n[tokenizer_reference] gpt-3-encoder and Hugging Face disagree on {len(disagree)} of "
              f"{len(corpus)} corpus lines: " + ", ".join(_short(corpus[i], 40) for i in disagree[:12]))
    # The known differences: special tokens (<|endoftext|> is plain text to the original encoder) and
    # whitespace outside ASCII (\s differs between JavaScript and Oniguruma).
    for i in disagree:
        s = corpus[i]
        assert "<|endoftext|>" in s or any(ord(c) > 127 and c.isspace() or c == "\ufeff" for c in s), \
            f"unexpected disagreement between the references on {_short(s)}: HF {hf[i]}, gpt-3-encoder {orig[i]}"
    skip = set(disagree)
    bad = [(corpus[i], orig[i], got[i]) for i in range(len(corpus)) if i not in skip and got[i] != orig[i]]
    assert not bad, "tokdyn differs from both references on: " + "; ".join(
        f"{_short(s)} expected {e[:40]} tokdyn {g[:40]}" for s, e, g in bad[:5])


def test_escaped_json_input_gives_the_same_output(runs, tmp_path):
    """The texts as ASCII-only JSON (\\uXXXX escapes, surrogate pairs) read as the UTF-8 ones."""
    job = runs["jobs"]["gpt2-nospecial"]
    f = tmp_path / "ascii.jsonl"
    gen_strings.write_jsonl(runs["corpus"], f, ascii_only=True)
    p = subprocess.run([CLI, "tokenize", str(MODELS["gpt2"]), "--jsonl", str(f), "--json", "--no-special"],
                       capture_output=True, timeout=120)
    assert p.returncode == 0, p.stderr
    assert job.rc == 0, job.stderr
    assert p.stdout == job.tok_out.read_bytes()


# ---- refused types and broken files ----------------------------------------------------------------

def _gpt2_small():
    """A tiny byte-level BPE file in GPT-2's format (valid: the refusal cases edit one part of it)."""
    vocab = {c: i for i, c in enumerate(["a", "b", "c", "Ġ", "ab", "Ġa", "<|endoftext|>"])}
    return {"version": "1.0", "truncation": None, "padding": None,
            "added_tokens": [added(6, "<|endoftext|>", True)],
            "normalizer": None, "pre_tokenizer": dict(BYTELEVEL_REGEX), "post_processor": None,
            "decoder": {"type": "ByteLevel", "add_prefix_space": True, "trim_offsets": True, "use_regex": True},
            "model": {"type": "BPE", "dropout": None, "unk_token": None, "continuing_subword_prefix": None,
                      "end_of_word_suffix": None, "fuse_unk": False, "byte_fallback": False, "ignore_merges": False,
                      "vocab": vocab, "merges": ["a b", "Ġ a"]}}


def _edit(**parts):
    def f():
        d = _gpt2_small()
        for k, v in parts.items():
            if k.startswith("model_"):
                d["model"][k[len("model_"):]] = v
            else:
                d[k] = v
        return d
    return f


def _without_model():
    d = _gpt2_small()
    del d["model"]
    return d


# name: (file content: a dict or raw text, a word the error line must contain (case-insensitive))
REFUSED = {
    "wordpiece": (_edit(model={"type": "WordPiece", "unk_token": "[UNK]", "continuing_subword_prefix": "##",
                               "max_input_chars_per_word": 100, "vocab": {"[UNK]": 0, "a": 1, "##b": 2}}), "WordPiece"),
    "wordlevel": (_edit(model={"type": "WordLevel", "vocab": {"[UNK]": 0, "a": 1}, "unk_token": "[UNK]"}), "WordLevel"),
    "unigram": (_edit(model={"type": "Unigram", "unk_id": 0, "vocab": [["<unk>", 0.0], ["a", -1.0], ["b", -2.0]],
                             "byte_fallback": False}), "Unigram"),
    "lowercase": (_edit(normalizer={"type": "Lowercase"}), "Lowercase"),
    "lowercase-in-sequence": (_edit(normalizer={"type": "Sequence", "normalizers": [{"type": "NFC"},
                                                                                   {"type": "Lowercase"}]}), "Lowercase"),
    "bertnormalizer": (_edit(normalizer={"type": "BertNormalizer", "clean_text": True, "handle_chinese_chars": True,
                                         "strip_accents": None, "lowercase": True}), "BertNormalizer"),
    "precompiled": (_edit(normalizer={"type": "Precompiled", "precompiled_charsmap": "AAAAAA=="}), "Precompiled"),
    "stripaccents": (_edit(normalizer={"type": "StripAccents"}), "StripAccents"),
    "nmt": (_edit(normalizer={"type": "Nmt"}), "Nmt"),
    "bertpretokenizer": (_edit(pre_tokenizer={"type": "BertPreTokenizer"}), "BertPreTokenizer"),
    "punctuation": (_edit(pre_tokenizer={"type": "Punctuation", "behavior": "Isolated"}), "Punctuation"),
    "punctuation-in-sequence": (_edit(pre_tokenizer={"type": "Sequence", "pretokenizers": [
        {"type": "Punctuation", "behavior": "Isolated"}, BYTELEVEL_NOREGEX]}), "Punctuation"),
    "chardelimitersplit": (_edit(pre_tokenizer={"type": "CharDelimiterSplit", "delimiter": " "}), "CharDelimiterSplit"),
    "unicodescripts": (_edit(pre_tokenizer={"type": "UnicodeScripts"}), "UnicodeScripts"),
    "wordpiece-decoder": (_edit(decoder={"type": "WordPiece", "prefix": "##", "cleanup": True}), "WordPiece"),
    "ctc-decoder": (_edit(decoder={"type": "CTC", "pad_token": "<pad>", "word_delimiter_token": "|",
                                   "cleanup": True}), "CTC"),
    "bpe-dropout": (_edit(model_dropout=0.1), "dropout"),
    "malformed-json": (lambda: json.dumps(_gpt2_small())[:-40], None),
    "not-an-object": (lambda: "[1, 2, 3]", None),
    "missing-model": (_without_model, "model"),
    "merge-not-in-vocab": (_edit(model_merges=["a b", "Ġ zq"]), "zq"),
}


def _check_refusal(cmd, word, what):
    p = subprocess.run(cmd, capture_output=True, timeout=60)
    err = p.stderr.decode("utf-8", "replace")
    lines = err.rstrip("\n").split("\n") if err else []
    assert p.returncode == 2, f"{what}: exit {p.returncode}, stderr {err[:500]!r}"
    assert p.stdout == b"", f"{what}: stdout {p.stdout[:300]!r}"
    assert len(lines) == 1 and lines[0].startswith("tokdyn: error:"), f"{what}: stderr {err[:500]!r}"
    if word:
        assert word.lower() in lines[0].lower(), f"{what}: the error line does not name {word!r}: {lines[0]}"
    return lines[0]


@pytest.mark.parametrize("name", list(REFUSED))
def test_refused_types_and_broken_files(name, tmp_path):
    make, word = REFUSED[name]
    content = make()
    folder = tmp_path / name
    folder.mkdir()
    f = folder / "tokenizer.json"
    f.write_text(content if isinstance(content, str) else json.dumps(content, ensure_ascii=False), encoding="utf-8")
    texts = tmp_path / "texts.jsonl"
    gen_strings.write_jsonl(["ab a", "hello"], texts)
    _check_refusal([CLI, "tokenize", str(f), "--jsonl", str(texts), "--json"], word, f"{name} (--jsonl)")
    _check_refusal([CLI, "tokenize", str(folder), "ab a"], word, f"{name} (folder, TEXT)")


def test_the_small_file_itself_is_accepted(tmp_path):
    """The base of the refusal cases is valid: tokdyn and the reference encode it alike."""
    f = tmp_path / "tokenizer.json"
    f.write_text(json.dumps(_gpt2_small()), encoding="utf-8")
    texts = tmp_path / "t.jsonl"
    gen_strings.write_jsonl(["ab a", "aab ba", "", "<|endoftext|>a"], texts)
    ref = tmp_path / "ref.jsonl"
    subprocess.run(["node", str(REF_JS), "encode", str(f), str(texts), str(ref)], check=True,
                   env=dict(os.environ, TOKDYN_NPM=str(NPM)), timeout=120)
    p = subprocess.run([CLI, "tokenize", str(f), "--jsonl", str(texts), "--json"], capture_output=True, timeout=60)
    assert p.returncode == 0, p.stderr
    assert stdout_lines(p.stdout) == [{k: o[k] for k in ("decoded", "ids", "pieces")} for o in read_lines(ref)]


def test_invalid_utf8_text_is_refused(tmp_path):
    bad = tmp_path / "bad.jsonl"
    bad.write_bytes(b'"ok"\n"caf\xe9 \xff"\n')
    _check_refusal([CLI, "tokenize", str(MODELS["gpt2"]), "--jsonl", str(bad), "--json"], None, "raw invalid UTF-8 line")
    lone = tmp_path / "lone.jsonl"
    lone.write_bytes(b'"ok"\n"\\ud800x"\n')
    _check_refusal([CLI, "tokenize", str(MODELS["gpt2"]), "--jsonl", str(lone), "--json"], None, "lone surrogate escape")
    _check_refusal([CLI, "tokenize", str(MODELS["gpt2"]), b"caf\xe9"], None, "invalid UTF-8 TEXT argument")


def test_folder_and_table_mode(tmp_path):
    folder = tmp_path / "gpt2"
    folder.mkdir()
    shutil.copy(MODELS["gpt2"], folder / "tokenizer.json")
    p = subprocess.run([CLI, "tokenize", str(folder), "Hello world"], capture_output=True, timeout=60)
    assert p.returncode == 0, p.stderr
    out = p.stdout.decode()
    assert "15496" in out and "995" in out, out  # "Hello", "Ġworld"


def test_throughput_line(tmp_path):
    texts = tmp_path / "t.jsonl"
    gen_strings.write_jsonl(gen_strings.generate(200, seed=3), texts)
    p = subprocess.run([CLI, "tokenize", str(MODELS["gpt2"]), "--jsonl", str(texts), "--throughput"],
                       capture_output=True, timeout=60)
    assert p.returncode == 0, p.stderr
    line = p.stdout.decode().strip()
    m = re.fullmatch(r"tokdyn: encoded (\d+) texts, (\d+) bytes, (\d+) tokens in ([0-9.e+-]+) s: ([0-9.e+-]+) MB/s \(one thread\)",
                     line)
    assert m, line
    assert int(m.group(1)) == 200
    assert int(m.group(2)) == sum(len(s.encode()) for s in gen_strings.read_jsonl(texts))


def test_zz_summary(runs, capsys):
    """Shows what the run cost and where Hugging Face's tokens are not vocabulary strings (last)."""
    with capsys.disabled():
        print(f"\n[tokenizer_reference] {runs['costs']}")
        for n in PIECE_NOTES:
            print(f"[tokenizer_reference] {n}")
