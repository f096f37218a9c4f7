#!/usr/bin/python3
"""Documentation that cannot drift: every checkable claim of README.md and docs/*.md against tokdyn.

Usage: docs_claims.py --tokdyn BIN --source ROOT --build BUILD [--long] [--doc FILE ...] [--no-runs] [-v]

Scans README.md and every docs/*.md except the generated docs/outputs.md and docs/models.md (their
own tests, outputs_doc and models_doc, compare them with the binary) and except the blocks between
`<!-- BEGIN GENERATED` and `<!-- END GENERATED` (docs/reproduction.md's tables, owned by
scripts/reproduction_tables.py --check) and `<!-- bench_all:begin -->` ... `end` (scripts/bench_all.sh
writes that table). In what remains it checks:

1. Commands. Every `tokdyn ...` / `build/tokdyn ...` command, in code blocks and in inline code
   (after `mpirun ...`, across `&&`): the subcommand exists; every option exists in `tokdyn SUB
   --help` (`tokdyn train --help` for train); an option a synopsis shows outside brackets is
   required; for run / sweep / show / outputs the preset exists (`tokdyn presets`), every `--set`,
   `--grid`, `--zip` key is a parameter of that preset (`tokdyn show PRESET --json`) and the values
   are accepted: `tokdyn run PRESET --set ... --out ''` validates every parameter (resolve_params,
   main.cpp) and then refuses the empty --out, so "--out: an empty path" means "accepted" and costs
   no run (values that are placeholders, or paths that do not exist here, are left out of that
   call). A sweep is validated point by point the same way (its first point, then each axis value
   in turn); `--plot` names a declared summary and swept parameters. A command whose comment or
   row says it is refused ("exit 2", "refused", "unknown", ...) must be refused, and a message it
   quotes ("...") must be in the binary's. `--figure-format`, `--dpi`, `--progress` are checked
   against their rules, `tokdyn models NAME` against the registry, `reproduce PAPER` against its
   help. `scripts/*` commands: the script exists and every `--option` given is in its source.
   `ctest -R NAME` and "CTest `NAME`": a test of that name exists (`ctest -N` in BUILD).
2. Paths. Every repository path in inline code or a command (`docs/x.md`, `tests/...`,
   `python/...`, `scripts/...`, `include/...`, `src/...`, `bench/...`, `fuzz/...`, a bare
   `name.hpp` / `name.cpp`, or `models/rope/attention.hpp` relative to include/tokdyn or src)
   exists; every Markdown link and image to a local file exists, and a `#fragment` is a heading of
   that page.
3. Results files. Every result file named in inline code (`*.csv`, `*.npy`, `*.png`, `*.svg`,
   `*.pdf`, `dir/<x>/layer_<K>.npy` patterns) is declared by its preset (`tokdyn show PRESET
   --json`, "outputs": the declarations docs/outputs.md is generated from): the presets named
   before it in the same paragraph or table row, else the nearest preset named before it in the
   same section; with no preset in the section, by some preset. `FILE:column` names a column of it.
   A column list in inline code right after a file name (`spectrum.csv` (`q,lambda,reachable`))
   must be its header, in order (a subset when the list ends in `, …`). Files written by something
   other than a preset's run (summary.csv, manifest.json, sweep.csv, ...) are in NOT_A_PRESET_FILE
   below, each with the command that writes it; summary.csv's columns are checked too.
4. Numbers. "N CTest tests" equals `ctest -N` in BUILD. Any "N checks" / "N of M pass" /
   "N verdicts" claim must be covered by a check marker (below) whose values include N. Numbers
   from runs are checked through markers, an HTML comment on the line(s) before the claim:

       <!-- check: SOURCE | ASSERT | ASSERT ... -->
       <!-- check long: SOURCE | ASSERT ... -->        (only with --long: full-size runs)

   SOURCE is one of
       run PRESET [--set k=v ...] [smoke]   a run (--no-figures; `smoke`: the preset's smoke
                                            parameters from `tokdyn show --json` first); runs of a
                                            coupling-* preset at its defaults are read from
                                            coupling-all's sub-folders when that run is made too
       refuse ARGS...                       `tokdyn ARGS...` (a run into a temporary --out) must fail
       show PRESET                          the schema (`tokdyn show PRESET --json`); `show * [except
                                            P,Q]`: every preset that declares the FILE of a `columns`
                                            assertion
       ctest                                `ctest -N` in BUILD
       edges sample|full                    `tests/scripts/param_edges.py --list` (probe counts)
       file PATH                            a file of the repository
   and ASSERT one of
       FILE [col=v, col=v] COLUMN OP VALUE  the one row of a run's FILE matching the filter
       FILE [filter] rows OP N              its number of rows; also sum(COL), max(COL), min(COL)
       manifest.json KEY.KEY OP VALUE       a value of the run's manifest
       default KEY = V | choices KEY = a, b | columns FILE = a,b,c     (show)
       tests = N (ctest) | probes OP N (edges) | contains TEXT (file)
       exit = N | message = TEXT (refuse; TEXT may elide with …: its pieces in order)
       requires PATH                        skip the marker (with a note) when PATH does not exist
   with OP `=` (the same text, or the same number), `≈` (equal at the precision written: 0.919
   means 0.9185 to 0.9195; `≈ 1400 (10 %)` or `(± 0.01)` give the tolerance), `<=`, `>=`.
   Every `=` / `≈` value must also appear in the paragraph, list or table right after the marker
   (or, with `VALUE @ "phrase"`, in that phrase of it), so the marker and the text cannot drift
   apart. Runs are kept cheap (under a minute in all on 2
   cores); the full-size claims are `check long` and run only with --long (minutes to an hour:
   ssm-random-silu and mamba2-fig3 at full size, coupling-e6, coupling-e1).

Times (seconds, minutes) are not checked: they depend on the machine. --no-runs skips the markers
that run presets (a quick check while writing); --doc FILE checks one page. Exit status 0 when every
claim holds, 1 otherwise, with one line per failing claim: file:line, what it says, what is true.
"""

import argparse
import concurrent.futures
import csv
import fnmatch
import glob
import json
import re
import shlex
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

SKIP_DOCS = {"docs/outputs.md", "docs/models.md"}  # generated and compared by outputs_doc / models_doc
GENERATED = [("<!-- BEGIN GENERATED", "<!-- END GENERATED"), ("<!-- bench_all:begin -->", "<!-- bench_all:end -->")]
SOURCE_ROOTS = ("scripts", "tests", "python", "docs", "bench", "fuzz", "include", "src", "apps", "cmake", "examples")
ROOT_FILES = ("README.md", "LICENSE", "CITATION.cff", "CMakeLists.txt", "mkdocs.yml")
RESULT_EXT = ("csv", "npy", "png", "svg", "pdf")

# Result files written by something other than a preset's run (so no preset declares them).
NOT_A_PRESET_FILE = {
    "summary.csv": "every run (run.cpp finish_outputs: the declared summaries, quantity,value,paper)",
    "sweep.csv": "tokdyn sweep (docs/sweeps.md)",
    "loss.csv": "tokdyn train (docs/training.md)",
    "loss.png": "tokdyn train (docs/training.md)",
    "reproduction.csv": "tokdyn reproduce",
    "index.html": "tokdyn report",
}
SUMMARY_COLUMNS = ["quantity", "value", "paper"]
# Per page: names that are not results of a preset there, with the reason.
PAGE_FILES = {
    "docs/python.md": {
        "exponents.csv": "DepthSpectrum.save (Python), not a preset",
        "running.csv": "DepthSpectrum.save (Python): its own columns, not depth-spectra's",
        "dichotomy.csv": "DepthSpectrum.save (Python): its own columns, not depth-spectra's",
        "final_state.npy": "DepthSpectrum.save (Python)",
    },
    "docs/reproduction.md": {
        "q<q>_heldout.npy": "an input coupling-e1 writes to inputs/ (named beside inputs/q<q>_train.npy)",
    },
    "docs/reliability.md": {
        "timing.csv": "named as the file rope-table2 no longer writes",
        "zero.npy": "an input file of a refusal example",
        "fifo.npy": "an input file of a refusal example",
    },
}
# Words that say a command or example is meant to be refused.
REFUSAL_WORDS = re.compile(r"\b(exit 2|refused|refuses|refuse|unknown preset|misspelt|did you mean|is refused|are refused|"
                           r"unexpected arguments?|not a parameter)\b", re.I)


def norm_minus(s):
    return s.replace("\u2212", "-").replace("\u2009", " ").replace("\u202f", " ")


class Failure:
    def __init__(self, where, says, truth):
        self.where, self.says, self.truth = where, says, truth


class Report:
    def __init__(self, verbose=False):
        self.counts = {}
        self.failures = []
        self.notes = []
        self.verbose = verbose

    def ok(self, kind, where="", what=""):
        c = self.counts.setdefault(kind, [0, 0])
        c[0] += 1
        if self.verbose:
            print(f"  ok   {kind:10} {where}: {what}")

    def fail(self, kind, where, says, truth):
        c = self.counts.setdefault(kind, [0, 0])
        c[1] += 1
        self.failures.append((kind, Failure(where, says, truth)))

    def note(self, where, what):
        self.notes.append(f"{where}: {what}")


# --------------------------------------------------------------------------------------------
# The binary


def run_cmd(argv, cwd=None, timeout=600, env=None):
    p = subprocess.run(argv, cwd=cwd, capture_output=True, text=True, timeout=timeout, env=env)
    return p.returncode, p.stdout, p.stderr


class Help:
    """Options of one subcommand: name -> takes a value; required options; positional choices."""

    def __init__(self, text):
        self.text = text
        self.options, self.required, self.choices = {}, set(), {}
        self.defaulted = set()  # options whose help names a default
        self.positionals = []
        if text.lstrip().startswith("usage:"):
            self._argparse(text)
        else:
            self._cli11(text)

    def _cli11(self, text):
        section = ""
        for line in text.splitlines():
            if re.match(r"^\S.*:$", line):
                section = line.strip()
                continue
            if section == "Options:":
                m = re.match(r"^  ((?:-{1,2}[\w-]+,)*-{1,2}[\w-]+)( [A-Z]+\S*)?", line)
                if not m:
                    continue
                names = m.group(1).split(",")
                val = (m.group(2) or "").strip()
                ch = re.search(r":\{([^}]*)\}", val)
                for n in names:
                    self.options[n] = bool(val)
                    if ch:
                        self.choices[n] = ch.group(1).split(",")
                if " REQUIRED" in line[:40]:
                    self.required.update(names)
                if re.search(r"\bdefault\b|=\S", line):
                    self.defaulted.update(names)
            elif section == "Positionals:":
                m = re.match(r"^  (\w+) ([A-Z]+)", line)
                if m:
                    self.positionals.append(m.group(1))

    def _argparse(self, text):
        usage, rest = text.split("\n\n", 1) if "\n\n" in text else (text, "")
        flat = " ".join(usage.split())
        # required options: those of the usage line outside brackets
        depth, out = 0, []
        for ch in flat:
            if ch == "[":
                depth += 1
            elif ch == "]":
                depth -= 1
            elif depth == 0:
                out.append(ch)
        self.required = {t for t in "".join(out).split() if t.startswith("-")}
        for line in rest.splitlines():
            m = re.match(r"^  (-[\w-]+(?: [A-Z_]+)?(?:, -[\w-]+(?: [A-Z_]+)?)*)", line)
            if not m:
                continue
            for part in m.group(1).split(", "):
                bits = part.split(" ")
                self.options[bits[0]] = len(bits) > 1
        m = re.search(r"^  model\s+(.*)$", rest, re.M)
        if m:
            self.choices["model"] = [w for w in re.split(r",\s*|\s+or\s+", m.group(1).strip()) if w]


class Tokdyn:
    def __init__(self, exe, source, build):
        self.exe, self.source, self.build = exe, source, build
        rc, out, err = run_cmd([exe, "--help"])
        self.subcommands = []
        sect = False
        for line in out.splitlines():
            if line.startswith("Subcommands:"):
                sect = True
                continue
            if sect:
                m = re.match(r"^  ([\w-]+)\s", line)
                if m:
                    self.subcommands.append(m.group(1))
        self._help = {}
        rc, out, err = run_cmd([exe, "presets"])
        self.presets = [ln.split()[0] for ln in out.splitlines() if ln.strip()]
        rc, out, err = run_cmd([exe, "models"])
        self.models = [ln.split()[0] for ln in out.splitlines() if re.match(r"^[a-z][\w-]*\s{2,}", ln)]
        with concurrent.futures.ThreadPoolExecutor(4) as ex:
            schemas = list(ex.map(lambda p: json.loads(run_cmd([exe, "show", p, "--json"])[1]), self.presets))
        self.schema = dict(zip(self.presets, schemas))
        self._ctest = None

    def help(self, sub):
        if sub not in self._help:
            rc, out, err = run_cmd([self.exe, sub, "--help"], cwd=self.source)
            self._help[sub] = Help(out)
        return self._help[sub]

    def params(self, preset):
        return {p["key"]: p for p in self.schema[preset]["params"]}

    def outputs(self, preset):
        return self.schema[preset]["outputs"]

    def ctest(self):
        if self._ctest is None:
            rc, out, err = run_cmd(["ctest", "-N"], cwd=self.build)
            names = re.findall(r"^\s*Test\s+#\d+: (\S+)", out, re.M)
            m = re.search(r"Total Tests: (\d+)", out)
            self._ctest = (int(m.group(1)) if m else None, names)
        return self._ctest

    def declares(self, preset, name):
        """The declaration of result file `name` by `preset`: ('table', columns) / ('array',) / ('figure',)."""
        o = self.outputs(preset)
        for t in o["tables"]:
            if t["file"] == name or ("*" in name and fnmatch.fnmatch(t["file"], name)):
                return ("table", [c["name"] for c in t["columns"]])
        for f in o["figures"]:
            base = f["file"].rsplit(".", 1)[0]
            if name == f["file"] or (name.rsplit(".", 1)[0] == base and name.rsplit(".", 1)[-1] in ("png", "svg", "pdf")):
                return ("figure",)
        for a in o["arrays"]:
            rx = "^" + "[^/]+".join(re.escape(x) for x in re.split(r"<[^>]*>", a["pattern"])) + "$"
            if re.match(rx, name) or fnmatch.fnmatch(a["pattern"], name):
                return ("array",)
        return None

    def files_of(self, preset):
        o = self.outputs(preset)
        return [t["file"] for t in o["tables"]] + [a["pattern"] for a in o["arrays"]] + [f["file"] for f in o["figures"]]


# --------------------------------------------------------------------------------------------
# The documents


class Block:
    """A paragraph, a list item, a table row, a heading, a code block or an HTML comment."""

    def __init__(self, kind, lines, lang="", table=None):
        self.kind, self.lines, self.lang, self.table = kind, lines, lang, table  # lines: [(lineno, text)]

    @property
    def text(self):
        return "\n".join(t for _, t in self.lines)

    @property
    def start(self):
        return self.lines[0][0]


def parse_blocks(text):
    raw = text.split("\n")
    keep = [True] * len(raw)
    for begin, end in GENERATED:
        inside = False
        for i, ln in enumerate(raw):
            if ln.strip().startswith(begin):
                inside = True
            if inside:
                keep[i] = False
            if inside and ln.strip().startswith(end):
                inside = False
    blocks, cur, fence, table_id, last_table_line = [], None, None, 0, -1

    def flush():
        nonlocal cur
        if cur and cur.lines and (not blocks or blocks[-1] is not cur):
            blocks.append(cur)
        cur = None

    i = 0
    while i < len(raw):
        no, ln = i + 1, raw[i] if keep[i] else ""
        if fence:
            if ln.strip().startswith(fence[0]):
                flush()
                fence = None
            else:
                cur.lines.append((no, ln))
            i += 1
            continue
        m = re.match(r"^\s*(```+|~~~+)\s*([\w+-]*)", ln)
        if m:
            flush()
            fence = (m.group(1), m.group(2))
            cur = Block("code", [], m.group(2))
            i += 1
            continue
        s = ln.strip()
        if not s:
            flush()
            i += 1
            continue
        if s.startswith("<!--"):
            flush()
            com = [(no, ln)]
            while "-->" not in raw[i] and i + 1 < len(raw):
                i += 1
                com.append((i + 1, raw[i]))
            blocks.append(Block("comment", com))
            i += 1
            continue
        if re.match(r"^#{1,6} ", s):
            flush()
            blocks.append(Block("heading", [(no, ln)]))
            i += 1
            continue
        if s.startswith("|"):
            if last_table_line != no - 1:
                table_id += 1
            last_table_line = no
            flush()
            if not re.match(r"^\|[\s:|-]+\|$", s):
                blocks.append(Block("row", [(no, ln)], table=table_id))
            i += 1
            continue
        if re.match(r"^\s*(?:[-*+]|\d+\.)\s", ln):
            # a list item: one block; the items of one list share a group (a marker's claim is the list)
            if not (blocks and blocks[-1].table and str(blocks[-1].table).startswith("list") and (cur is None or cur is blocks[-1])):
                table_id += 1
            flush()
            cur = Block("para", [(no, ln)], table=f"list{table_id}")
            blocks.append(cur)
            i += 1
            continue
        if cur is None or cur.kind != "para":
            flush()
            cur = Block("para", [])
        cur.lines.append((no, ln))
        i += 1
    flush()
    return blocks


SPAN_RE = re.compile(r"(?<!`)(`+)(?!`)(.+?)(?<!`)\1(?!`)", re.S)


def spans_of(block):
    """Inline code spans of a block: (content, lineno, start, end) in order."""
    text = block.text
    starts = [0]
    for ln in text.split("\n")[:-1]:
        starts.append(starts[-1] + len(ln) + 1)
    out = []
    for m in SPAN_RE.finditer(text):
        k = sum(1 for s in starts if s <= m.start()) - 1
        out.append((" ".join(m.group(2).split("\n")).strip(), block.lines[k][0], m.start(), m.end()))
    return out


def slug(title):
    t = re.sub(r"<[^>]+>", "", title)
    t = re.sub(r"[`*_]", "", t).strip().lower()
    t = re.sub(r"[^\w\s-]", "", t)
    return re.sub(r"[\s]+", "-", t)


# --------------------------------------------------------------------------------------------
# Commands


def split_comment(line):
    """(code, comment) of a shell line: the first # outside quotes that starts a word."""
    q = None
    for i, ch in enumerate(line):
        if q:
            if ch == q:
                q = None
        elif ch in "'\"":
            q = ch
        elif ch == "#" and (i == 0 or line[i - 1].isspace()):
            return line[:i], line[i + 1:]
    return line, ""


def shell_words(text):
    text = re.sub(r"<[^<>]*>", "PLACEHOLDER", text)
    try:
        return shlex.split(text)
    except ValueError:
        return text.split()


PLACEHOLDER_WORDS = {"CK", "PRESET", "DIR", "FILE", "NEW", "REPORT", "OUT", "PAPER", "MODEL", "NAME", "SUB", "CK", "KIND", "N", "K",
                     "D", "SEL", "I/N", "SPEC", "BIN", "PATH", "TEXT", "REF", "P"}


def is_placeholder(v):
    if v is None:
        return True
    if any(x in v for x in ("…", "...", "<", "$", "/path/to", "FILE", "PRESET", "DIR")):
        return True
    if v in PLACEHOLDER_WORDS:
        return True
    return bool(re.fullmatch(r"[A-Z]|[A-Z]{3,}(?:_[A-Z]+)*(?:\.\w+)?", v))


def placeholder_key(k):
    return k in ("k", "key", "KEY", "") or any(x in k for x in ("…", "...", "<", "$"))


def expand_spec(spec):
    """A few values of a sweep axis spec (its list, or a range's ends); None for a placeholder."""
    if is_placeholder(spec):
        return None
    m = re.fullmatch(r"(linspace|logspace)\(([^,]+),([^,]+),([^,)]+)\)", spec.replace(" ", ""))
    if m:
        a, b = float(m.group(2)), float(m.group(3))
        if m.group(1) == "logspace":
            a, b = 10 ** a, 10 ** b
        return [fmt_value(a), fmt_value(b)]
    m = re.fullmatch(r"(-?[\d.e+-]+):(-?[\d.e+-]+)(?::(x?)([\d.e+-]+))?", spec)
    if m:
        return [m.group(1), m.group(2)] if m.group(1) != m.group(2) else [m.group(1)]
    if ";" in spec:
        return spec.split(";")
    return spec.split(",")


def fmt_value(x):
    return str(int(x)) if float(x).is_integer() and abs(x) < 1e15 else repr(float(x))


class CommandChecker:
    def __init__(self, tk, rep, source):
        self.tk, self.rep, self.source = tk, rep, source
        self.validations = {}  # (preset, tuple(sets), expect_fail, messages) -> [where ...]

    # --- one command ------------------------------------------------------------------------
    def check(self, words, where, context, synopsis=False):
        """words: one command's words; context: the comment / row text around it (refusals, messages)."""
        words = [w for w in words if not re.match(r"^\d?>", w) and w not in ("\\",)]
        if not words:
            return None
        # mpirun and environment assignments before tokdyn
        i = 0
        while i < len(words) and re.match(r"^[A-Z_]+=", words[i]):
            i += 1
        if i < len(words) and words[i] == "mpirun":
            while i < len(words) and not self.is_tokdyn(words[i]):
                i += 1
        if i >= len(words):
            return None
        if self.is_tokdyn(words[i]):
            return self.check_tokdyn(words[i + 1:], where, context, synopsis)
        w = words[i]
        if w in ("/usr/bin/python3", "python3") and i + 1 < len(words):
            i += 1
            w = words[i]
            if w == "-m" or w == "-c":
                return None
        if re.match(r"^(\./)?scripts/", w):
            self.check_script(w, words[i + 1:], where)
        elif w == "ctest":
            self.check_ctest_args(words[i + 1:], where)
        return None

    @staticmethod
    def is_tokdyn(w):
        return w in ("tokdyn", "build/tokdyn", "./build/tokdyn") or w.endswith("/bin/tokdyn")

    def check_script(self, path, args, where):
        p = self.source / path.lstrip("./") if path.startswith("./") else self.source / path
        if not p.exists():
            self.rep.fail("path", where, f"`{path}`", "no such script in the repository")
            return
        self.rep.ok("path", where, path)
        texts = [p.read_text(errors="replace")]
        stem = p.stem
        for extra in list(p.parent.glob(stem + ".py")) + list(p.parent.glob(stem + "_lib/*.py")) + list(p.parent.glob("*_lib.sh")):
            texts.append(extra.read_text(errors="replace"))
        text = "\n".join(texts)
        for a in args:
            a = a.strip("[]")
            if a.startswith("--") and not is_placeholder(a):
                opt = a.split("=")[0]
                if opt in text:
                    self.rep.ok("option", where, f"{path} {opt}")
                else:
                    self.rep.fail("option", where, f"`{path} {opt}`", f"{path} has no option {opt}")

    def check_ctest_args(self, args, where):
        if "-R" in args and args.index("-R") + 1 < len(args):
            self.check_test_name(args[args.index("-R") + 1], where)

    def check_test_name(self, name, where):
        total, names = self.tk.ctest()
        rx = name if any(c in name for c in "^$.[") else None
        hit = [n for n in names if (re.search(rx, n) if rx else fnmatch.fnmatch(n, name))]
        if hit:
            self.rep.ok("ctest", where, name)
        else:
            self.rep.fail("ctest", where, f"CTest test `{name}`", "no such test in `ctest -N`")

    def check_tokdyn(self, words, where, context, synopsis):
        tk, rep = self.tk, self.rep
        refused = bool(REFUSAL_WORDS.search(context or ""))
        if not words:
            return None
        sub = words[0]
        if sub in ("-h", "--help", "--version"):
            return None
        if sub not in tk.subcommands:
            if is_placeholder(sub):
                return None
            rep.fail("command", where, f"`tokdyn {sub}`", f"no subcommand {sub} (tokdyn --help: {', '.join(tk.subcommands)})")
            return None
        rep.ok("command", where, "tokdyn " + sub)
        h = tk.help(sub)
        if not h.options:
            # `tokdyn train --help` is PyTorch's side (python/tokdyn_train): without python3-torch
            # there is no help to check against
            rep.note(where, f"options of `tokdyn {sub}` not checked: `tokdyn {sub} --help` printed no options")
            return None
        opts, pos, depth = [], [], 0
        k = 1
        while k < len(words):
            w = words[k]
            opt_in_brackets = depth > 0 or w.startswith("[")
            depth += w.count("[") - w.count("]")
            w = w.strip("[]")
            k += 1
            if not w or w in ("...", "…", "|") or set(w) <= set(".…"):
                continue
            if w.startswith("-") and not re.match(r"^-\d", w):
                name, _, inline = w.partition("=")
                if name not in h.options:
                    rep.fail("option", where, f"`tokdyn {sub} {name}`", f"tokdyn {sub} has no option {name} (tokdyn {sub} --help)")
                    continue
                rep.ok("option", where, f"{sub} {name}")
                val = None
                if h.options[name]:
                    if inline:
                        val = inline
                    elif k < len(words):
                        val = words[k].strip("[]")
                        depth += words[k].count("[") - words[k].count("]")
                        k += 1
                opts.append((name, val, opt_in_brackets))
            else:
                pos.append(w)
        if synopsis:
            # a synopsis that shows an option with a placeholder value outside brackets says it is
            # required: wrong for an option with a default
            for name, val, optional in opts:
                if not optional and val is not None and is_placeholder(val) and name in h.defaulted and name not in h.required:
                    rep.fail("option", where, f"synopsis `tokdyn {sub} ... {name} {val}` (outside brackets: required)",
                             f"{name} is optional, it has a default (tokdyn {sub} --help)")
                elif not optional and val is not None and is_placeholder(val):
                    rep.ok("option", where, f"{sub} {name} shown as needed")
        return self.check_sub(sub, opts, pos, where, context, refused, synopsis)

    def check_sub(self, sub, opts, pos, where, context, refused, synopsis):
        tk, rep = self.tk, self.rep
        h = tk.help(sub)
        for name, val, _ in opts:
            if val is None or is_placeholder(val):
                continue
            if name in h.choices and val not in h.choices[name] and "|" not in val:
                rep.fail("value", where, f"`{name} {val}`", f"expected one of {', '.join(h.choices[name])}")
            elif name in h.choices:
                rep.ok("value", where, f"{name} {val}")
            if name in ("--figure-format",):
                bad = [f for f in val.split(",") if f not in ("png", "svg", "pdf")]
                (rep.fail("value", where, f"`--figure-format {val}`", "formats are png, svg, pdf") if bad
                 else rep.ok("value", where, f"--figure-format {val}"))
            if name == "--dpi":
                good = val.isdigit() and 20 <= int(val) <= 1200
                (rep.ok("value", where, f"--dpi {val}") if good else rep.fail("value", where, f"`--dpi {val}`", "20 to 1200"))
        names = {n for n, _, _ in opts}
        if "--no-figures" in names and names & {"--figure-format", "--dpi"} and not refused:
            rep.fail("value", where, "--no-figures with --figure-format/--dpi", "refused: they do not apply without figures")
        if sub == "models" and pos and not is_placeholder(pos[0]):
            (rep.ok("preset", where, pos[0]) if pos[0] in tk.models
             else rep.fail("preset", where, f"`tokdyn models {pos[0]}`", f"no model {pos[0]} ({', '.join(tk.models)})"))
        if sub == "reproduce" and pos and not is_placeholder(pos[0]):
            m = re.search(r"paper TEXT REQUIRED\s+(.*)$", h.text, re.M)
            papers = [w for w in re.split(r",\s*|\s+or\s+", m.group(1).strip()) if w] if m else []
            for paper in pos[0].split("|"):
                (rep.ok("value", where, paper) if paper in papers
                 else rep.fail("value", where, f"`tokdyn reproduce {paper}`", f"papers: {', '.join(papers)} (tokdyn reproduce --help)"))
        if sub == "train" and pos:
            for alt in pos[0].split("|"):
                if not is_placeholder(alt) and "model" in h.choices and alt not in h.choices["model"]:
                    rep.fail("value", where, f"`tokdyn train {alt}`", f"models: {', '.join(h.choices['model'])}")
        if sub == "make-checkpoint":
            model = next((v for n, v, _ in opts if n == "--model"), "mamba2")
            size = next((v for n, v, _ in opts if n == "--size"), None)
            if not is_placeholder(model) and size and not is_placeholder(size):
                rc, out, err = run_cmd([tk.exe, "make-checkpoint", "--model", model, "--size", size, "--out", ""])
                if "--out" in err and "--size" not in err and "--model" not in err:
                    rep.ok("value", where, f"make-checkpoint {model} {size}")
                else:
                    rep.fail("value", where, f"`make-checkpoint --model {model} --size {size}`", err.strip())
        if sub not in ("run", "sweep", "show", "outputs"):
            return None
        if sub == "sweep" and not pos:
            return None
        if not pos:
            return None
        target = pos[0]
        if sub == "run" and len(pos) > 1:
            if refused:
                rep.ok("command", where, "extra arguments refused")
                self.queue_raw([tk.exe, "run"] + pos + ["--out", ""], where, context, expect_fail=True)
            else:
                rep.fail("command", where, f"`tokdyn run {' '.join(pos)}`", "run takes one target")
            return None
        if is_placeholder(target) or "|" in target:
            return None
        if target.endswith(".toml") or target.endswith(".json"):
            return None
        if target not in tk.presets:
            if refused:
                self.queue_raw([tk.exe, sub, target] + (["--out", ""] if sub == "run" else []), where, context, expect_fail=True)
                return target
            close = [p for p in tk.presets if p.startswith(target.split("-")[0])]
            rep.fail("preset", where, f"`tokdyn {sub} {target}`", f"no preset {target}" + (f" ({', '.join(close[:6])}, ...)" if close else ""))
            return None
        rep.ok("preset", where, target)
        sets = []
        for name, val, _ in opts:
            if name in ("--set", "-s") and val:
                if "=" not in val:
                    if not is_placeholder(val):
                        rep.fail("param", where, f"`--set {val}`", "expected key=value")
                    continue
                key, value = val.split("=", 1)
                if placeholder_key(key):
                    continue
                if self.check_key(target, key, where, refused):
                    sets.append((key, value))
        if sub == "run":
            self.queue_validation(target, sets, where, context, refused)
        elif sub == "sweep":
            axes = []
            for name, val, _ in opts:
                if name in ("--grid", "-g", "--zip", "-z") and val and "=" in val:
                    key, spec = val.split("=", 1)
                    if placeholder_key(key):
                        continue
                    if self.check_key(target, key, where, refused):
                        axes.append((name.lstrip("-")[0], key, expand_spec(spec)))
            swept = {a[1] for a in axes}
            summaries = {s["name"] for s in tk.outputs(target)["summaries"]}
            for name, val, _ in opts:
                if name == "--plot" and val and not is_placeholder(val):
                    for part in val.split(","):
                        role, _, what = part.partition("=")
                        if is_placeholder(what) or not what:
                            continue
                        if role == "y":
                            (rep.ok("param", where, f"plot y={what}") if what in summaries
                             else rep.fail("param", where, f"`--plot y={what}`", f"{target} declares no summary {what}"))
                        elif role in ("x", "hue"):
                            (rep.ok("param", where, f"plot {role}={what}") if what in swept
                             else rep.fail("param", where, f"`--plot {role}={what}`", f"{what} is not a swept parameter"))
            self.queue_sweep(target, sets, axes, where, context, refused)
        return target

    def check_key(self, preset, key, where, refused):
        params = self.tk.params(preset)
        renamed = self.tk.schema[preset].get("renamed", {})
        if key in params:
            self.rep.ok("param", where, f"{preset} {key}")
            return True
        if key in renamed and refused:
            self.rep.ok("param", where, f"{preset} {key} (old name, refused)")
            return True
        why = f"renamed '{renamed[key]}'" if key in renamed else "not a parameter"
        self.rep.fail("param", where, f"`{preset} --set {key}=…`", f"{key} is {why} of {preset} (tokdyn show {preset})")
        return False

    def validation_sets(self, preset, sets):
        params = self.tk.params(preset)
        out = []
        for key, value in sets:
            spec = params.get(key)
            if spec is None and key in self.tk.schema[preset].get("renamed", {}):
                out.append((key, value))
                continue
            if spec is None or is_placeholder(value):
                continue
            if spec.get("path") and not (self.source / value).exists() and not Path(value).exists():
                continue
            out.append((key, value))
        return out

    def queue_validation(self, preset, sets, where, context, refused):
        vs = self.validation_sets(preset, sets)
        argv = [self.tk.exe, "run", preset]
        for k, v in vs:
            argv += ["--set", f"{k}={v}"]
        self.queue_raw(argv + ["--out", ""], where, context, refused)

    def queue_sweep(self, preset, sets, axes, where, context, refused):
        grids = [(kind, key, vals) for kind, key, vals in axes if vals]
        base = dict(sets)
        for kind, key, vals in grids:
            base.setdefault(key, vals[0])
        points = [dict(base)]
        for kind, key, vals in grids:
            for v in vals[1:8]:
                p = dict(base)
                p[key] = v
                points.append(p)
        # zipped axes move together: the i-th values of every --zip
        zips = [(key, vals) for kind, key, vals in grids if kind == "z"]
        if zips:
            n = min(len(v) for _, v in zips)
            for i in range(n):
                p = dict(base)
                for key, vals in zips:
                    p[key] = vals[i]
                points.append(p)
        for p in points:
            self.queue_validation(preset, list(p.items()), where, context, refused)

    def queue_raw(self, argv, where, context, expect_fail):
        msgs = []
        if expect_fail and context:
            for q in re.findall(r"\"([^\"]{6,})\"", context):
                msgs.append(q)
        key = (tuple(argv), expect_fail, tuple(msgs))
        self.validations.setdefault(key, []).append(where)

    def validation_path_works(self):
        """The --out '' trick: a bad value must be refused before the empty --out, a good one not."""
        preset = self.tk.presets[0]
        key = next(p["key"] for p in self.tk.schema[preset]["params"] if p["type"] == "int" and p["min"] is not None)
        low = int(self.tk.params(preset)[key]["min"]) - 1
        rc1, _, bad = run_cmd([self.tk.exe, "run", preset, "--set", f"{key}={low}", "--out", ""])
        rc2, _, good = run_cmd([self.tk.exe, "run", preset, "--out", ""])
        if "--out: an empty path" in bad or "--out: an empty path" not in good:
            self.rep.fail("value", "tests/scripts/docs_claims.py", "`tokdyn run P --set k=bad --out ''` validates every "
                          "parameter before refusing the empty --out", f"no longer ({bad.strip() or good.strip()}): "
                          "find another way to validate values without a run (apps/tokdyn/main.cpp)")
            return False
        return True

    def run_validations(self, jobs):
        if not self.validation_path_works():
            return
        items = list(self.validations.items())

        def one(item):
            (argv, expect_fail, msgs), wheres = item
            rc, out, err = run_cmd(list(argv), cwd=self.source)
            return item, rc, err

        with concurrent.futures.ThreadPoolExecutor(jobs) as ex:
            for ((argv, expect_fail, msgs), wheres), rc, err in ex.map(one, items):
                accepted = "--out: an empty path" in err or "--out '': empty path" in err
                shown = " ".join(shlex.quote(a) for a in argv[1:])
                line = err.strip().splitlines()[-1] if err.strip() else f"exit {rc}"
                for where in wheres:
                    if not expect_fail:
                        (self.rep.ok("value", where, shown) if accepted
                         else self.rep.fail("value", where, f"`tokdyn {shown}` is accepted", line))
                    elif accepted:
                        self.rep.fail("value", where, f"`tokdyn {shown}` is refused", "accepted (tokdyn run ... --out '' got past every parameter)")
                    else:
                        missing = [m for m in msgs if not message_in(m, err)]
                        if msgs and len(missing) == len(msgs):
                            self.rep.fail("message", where, f"message \"{msgs[0]}\"", line)
                        else:
                            self.rep.ok("message" if msgs else "value", where, shown)


def message_in(quote, err):
    """A quoted message example is in the binary's message: every piece between ellipses, in order."""
    err = norm_minus(" ".join(err.split()))
    pos = 0
    for piece in re.split(r"\s*(?:…|\.\.\.)\s*", norm_minus(quote)):
        piece = piece.strip(" ;:,")
        if not piece:
            continue
        j = err.find(piece, pos)
        if j < 0:
            return False
        pos = j + len(piece)
    return True


# --------------------------------------------------------------------------------------------
# Markers


def split_marker(body):
    """SOURCE | ASSERT | ...: split at " | " outside double quotes (a phrase may hold table bars)."""
    parts, cur, q, i = [], "", False, 0
    while i < len(body):
        if body[i] == '"':
            q = not q
        if not q and body.startswith(" | ", i):
            parts.append(cur.strip())
            cur, i = "", i + 3
            continue
        cur += body[i]
        i += 1
    parts.append(cur.strip())
    return parts


class Marker:
    def __init__(self, where, body, long, claim_text):
        self.where, self.body, self.long, self.claim_text = where, body, long, claim_text


def parse_literal(v):
    """(text, value, tolerance) of a number as written: 0.919 -> 0.0005; '1400 (10 %)' -> 140."""
    v = norm_minus(v.strip())
    tol = None
    m = re.match(r"^(.*?)\s*\((?:±\s*([\d.e+-]+)|([\d.]+)\s*%)\)\s*$", v)
    if m:
        v = m.group(1).strip()
    num = number(v)
    if "/" in v and not m:
        return v, num, 1e-12 * max(1.0, abs(num))
    if m and m.group(2):
        tol = float(m.group(2))
    elif m and m.group(3):
        tol = abs(num) * float(m.group(3)) / 100
    else:
        mant = v.lower().split("e")[0]
        exp = int(v.lower().split("e")[1]) if "e" in v.lower() else 0
        dec = len(mant.split(".")[1]) if "." in mant else 0
        tol = 0.5 * 10 ** (exp - dec)
    return v, num, tol


def number(text):
    """A number as written: 0.919, 1e-6, 1,373, or a fraction 3/4."""
    t = norm_minus(str(text)).replace(",", "").strip()
    if re.fullmatch(r"-?\d+/\d+", t):
        a, b = t.split("/")
        return int(a) / int(b)
    return float(t)


def compare(actual, op, expected_text):
    """(holds, shown actual)."""
    if op == "=":
        try:
            a, e = float(actual), number(expected_text)
            return a == e, actual
        except (TypeError, ValueError):
            return str(actual).strip() == expected_text.strip(), actual
    try:
        a = float(actual)
    except (TypeError, ValueError):
        return False, actual
    if op == "≈":
        text, num, tol = parse_literal(expected_text)
        return abs(a - num) <= tol * (1 + 1e-9), actual
    e = number(expected_text)
    return {"<=": a <= e, ">=": a >= e, "<": a < e, ">": a > e}[op], actual


def literal_in(text, lit):
    text = norm_minus(text)
    lit = norm_minus(lit)
    return re.search(r"(?<![\d.])" + re.escape(lit) + r"(?!\d|\.\d)", text) is not None


ASSERT_RE = re.compile(r"^(?P<file>[\w./<>-]+)\s*(?:\[(?P<filter>[^\]]*)\])?\s+(?P<what>\S+)\s*(?P<op>=|≈|<=|>=|<|>)\s*(?P<value>.+)$")


class MarkerRunner:
    def __init__(self, tk, rep, tmp, long):
        self.tk, self.rep, self.tmp, self.long = tk, rep, tmp, long
        self.runs = {}  # key -> folder or error
        self.n = 0
        self.run_seconds = 0.0

    def source_runs(self, markers):
        keys = []
        for m in markers:
            src = split_marker(m.body)[0].split()
            if src and src[0] == "run":
                keys.append(self.run_key(src[1:]))
        return keys

    def run_key(self, args):
        preset, rest = args[0], args[1:]
        sets = []
        smoke = False
        i = 0
        while i < len(rest):
            if rest[i] in ("--set", "-s") and i + 1 < len(rest):
                sets.append(rest[i + 1])
                i += 2
            elif rest[i] == "smoke":
                smoke = True
                i += 1
            else:
                sets.append(rest[i])
                i += 1
        if smoke:
            sm = self.tk.schema[preset]["smoke"]
            keys = {s.split("=")[0] for s in sets}
            sets = [f"{k}={v}" for k, v in sorted(sm.items()) if k not in keys] + sets
        return (preset, tuple(sets))

    def folder(self, key, all_keys):
        if key in self.runs:
            return self.runs[key]
        preset, sets = key
        if preset.startswith("coupling-") and preset != "coupling-all" and not sets and ("coupling-all", ()) in all_keys:
            f = self.folder(("coupling-all", ()), all_keys)
            if isinstance(f, Path) and (f / preset).is_dir():
                self.runs[key] = f / preset
                return self.runs[key]
        self.n += 1
        out = self.tmp / f"run{self.n}-{preset}"
        argv = [self.tk.exe, "run", preset, "--out", str(out), "--no-figures", "-q", "--threads", "2"]
        for s in sets:
            argv += ["--set", s]
        t0 = time.time()
        rc, o, e = run_cmd(argv, cwd=self.tk.source, timeout=7200)
        self.run_seconds += time.time() - t0
        print(f"  ran {' '.join(argv[1:3] + [s for s in sets])}: exit {rc}, {time.time() - t0:.1f} s", flush=True)
        self.runs[key] = out if rc == 0 else f"exit {rc}: {e.strip().splitlines()[-1] if e.strip() else ''}"
        return self.runs[key]

    def check(self, m, all_keys):
        parts = split_marker(m.body)
        src = parts[0].split()
        asserts = parts[1:]
        if not src or not asserts:
            self.rep.fail("marker", m.where, f"<!-- check: {m.body} -->", "expected SOURCE | ASSERT ...")
            return
        plain = []
        claim = " ".join(norm_minus(m.claim_text).split())
        for a in asserts:
            # `VALUE @ "phrase"`: the value must appear in that phrase of the claim (for small numbers
            # that occur elsewhere in the same table too)
            ph = re.search(r'\s@\s*"([^"]+)"\s*$', a)
            a = a[:ph.start()] if ph else a
            plain.append(a)
            lit = self.literal(a)
            if ph:
                phrase = " ".join(norm_minus(ph.group(1)).split())
                if phrase not in claim:
                    self.rep.fail("marker", m.where, f"marker phrase {ph.group(1)!r}", "not in the paragraph or table after the marker")
                elif lit is not None and not literal_in(phrase, lit):
                    self.rep.fail("marker", m.where, f"marker value {lit!r}", f"not in its phrase {ph.group(1)!r}")
            elif lit is not None and not literal_in(m.claim_text, lit):
                self.rep.fail("marker", m.where, f"marker value {lit!r}", "not in the paragraph or table after the marker")
        asserts = plain
        kind = src[0]
        need = [a.split(None, 1)[1] for a in asserts if a.startswith("requires ")]
        asserts = [a for a in asserts if not a.startswith("requires ")]
        missing = [n for n in need if not (self.tk.source / n).exists()]
        if missing:
            self.rep.note(m.where, f"not checked: needs {', '.join(missing)}")
            return
        if kind == "refuse":
            self.check_refusal(m, src[1:], asserts, parts[0])
            return
        if kind == "run":
            if src[1] not in self.tk.presets:
                self.rep.fail("marker", m.where, parts[0], f"no preset {src[1]}")
                return
            f = self.folder(self.run_key(src[1:]), all_keys)
            if not isinstance(f, Path):
                self.rep.fail("number", m.where, parts[0], f"the run failed: {f}")
                return
            for a in asserts:
                self.assert_run(f, a, m, parts[0])
        elif kind == "show":
            skip = src[3].split(",") if len(src) > 3 and src[2] == "except" else []
            for a in asserts:
                self.assert_show(src[1], a, m, skip)
        elif kind == "ctest":
            total, names = self.tk.ctest()
            for a in asserts:
                mm = re.match(r"^tests\s*(=|≈)\s*(.+)$", a)
                if not mm:
                    self.rep.fail("marker", m.where, a, "expected: tests = N")
                    continue
                self.verdict(m.where, f"ctest -N: {a}", total, mm.group(1), mm.group(2))
        elif kind == "edges":
            mode = src[1] if len(src) > 1 else "sample"
            if ("edges", mode) not in self.runs:
                rc, out, err = run_cmd(["/usr/bin/python3", str(self.tk.source / "tests/scripts/param_edges.py"), "--tokdyn",
                                        self.tk.exe, "--list", "--mode", mode])
                mm = re.search(r"^(\d+) probes of (\d+)", out, re.M)
                self.runs[("edges", mode)] = int(mm.group(1)) if mm else None
            n = self.runs[("edges", mode)]
            for a in asserts:
                ma = re.match(r"^probes\s*(=|≈|<=|>=)\s*(.+)$", a)
                if not ma:
                    self.rep.fail("marker", m.where, a, "expected: probes OP N")
                    continue
                self.verdict(m.where, f"param_edges --mode {mode}: {a}", n, ma.group(1), ma.group(2))
        elif kind == "file":
            p = self.tk.source / src[1]
            text = p.read_text() if p.exists() else None
            for a in asserts:
                mm = re.match(r"^contains\s+(.+)$", a)
                if text is None:
                    self.rep.fail("marker", m.where, parts[0], "no such file")
                elif not mm:
                    self.rep.fail("marker", m.where, a, "expected: contains TEXT")
                elif mm.group(1) in text:
                    self.rep.ok("number", m.where, a)
                else:
                    self.rep.fail("number", m.where, f"{src[1]} {a}", "it does not")
        else:
            self.rep.fail("marker", m.where, parts[0], "unknown source (run, refuse, show, ctest, edges, file)")

    @staticmethod
    def literal(a):
        """The value an assertion states (it must appear in the claim after the marker)."""
        if a.startswith(("contains", "requires")):
            return None
        mm = ASSERT_RE.match(a)
        if mm and mm.group("op") in ("=", "≈"):
            v = mm.group("value")
        else:
            mm = re.search(r"\s(?:=|≈)\s*(.+)$", a) if not mm else None
            if not mm:
                return None
            v = mm.group(1)
        return re.sub(r"\s*\((?:±[^)]*|[\d.]+\s*%)\)\s*$", "", v).strip()

    def verdict(self, where, says, actual, op, expected):
        ok, shown = compare(actual, op, expected)
        if ok:
            self.rep.ok("number", where, says)
        else:
            self.rep.fail("number", where, says, f"{shown}")

    def check_refusal(self, m, argv, asserts, said):
        argv = list(argv)
        if argv and argv[0] == "run" and "--out" not in argv and "-o" not in argv:
            self.n += 1
            argv += ["--out", str(self.tmp / f"refused{self.n}"), "-q", "--no-figures"]
        t0 = time.time()
        try:
            rc, out, err = run_cmd([self.tk.exe] + argv, cwd=self.tk.source, timeout=120)
        except subprocess.TimeoutExpired:
            self.rep.fail("message", m.where, said, "not refused within 120 s")
            return
        self.run_seconds += time.time() - t0
        line = err.strip().splitlines()[-1] if err.strip() else ""
        for a in asserts:
            mm = re.match(r"^(exit|message)\s*=\s*(.+)$", a)
            if not mm:
                self.rep.fail("marker", m.where, a, "expected: exit = N, message = TEXT")
            elif mm.group(1) == "exit":
                self.verdict(m.where, f"{said}: {a}", rc, "=", mm.group(2))
            elif rc != 0 and message_in(mm.group(2), err):
                self.rep.ok("message", m.where, a)
            else:
                self.rep.fail("message", m.where, f"{said}: \"{mm.group(2)}\"", f"exit {rc}: {line}")

    def assert_show(self, preset, a, m, skip=()):
        if preset == "*":
            mm = re.match(r"^columns\s+(\S+)\s*=\s*(.+)$", a)
            if not mm:
                self.rep.fail("marker", m.where, a, "show *: expected columns FILE = a,b,c")
                return
            want = [x.strip() for x in mm.group(2).split(",")]
            owners = [p for p in self.tk.presets if (self.tk.declares(p, mm.group(1)) or ("",))[0] == "table" and p not in skip]
            bad = [f"{p}: {','.join(self.tk.declares(p, mm.group(1))[1])}" for p in owners
                   if self.tk.declares(p, mm.group(1))[1] != want]
            if owners and not bad:
                self.rep.ok("number", m.where, f"{mm.group(1)} of {len(owners)} presets")
            else:
                self.rep.fail("columns", m.where, f"every {mm.group(1)} has columns {mm.group(2)}", "; ".join(bad) or "no preset writes it")
            return
        if preset not in self.tk.presets:
            self.rep.fail("marker", m.where, f"show {preset}", "no such preset")
            return
        mm = re.match(r"^(default|choices|columns)\s+(\S+)\s*=\s*(.+)$", a)
        if not mm:
            self.rep.fail("marker", m.where, a, "expected: default KEY = V, choices KEY = a, b, columns FILE = a,b")
            return
        what, key, val = mm.groups()
        if what == "columns":
            d = self.tk.declares(preset, key)
            actual = ",".join(d[1]) if d and d[0] == "table" else None
            want = ",".join(x.strip() for x in val.split(","))
            (self.rep.ok("number", m.where, a) if actual == want
             else self.rep.fail("number", m.where, f"{preset} {key} columns {want}", f"{actual}"))
            return
        p = self.tk.params(preset).get(key)
        if p is None:
            self.rep.fail("number", m.where, f"{preset} {key}", "no such parameter")
            return
        if what == "default":
            self.verdict(m.where, f"{preset} default {key} = {val}", p["default_text"], "=", val)
        else:
            want = [x.strip() for x in val.split(",")]
            (self.rep.ok("number", m.where, a) if want == p["choices"]
             else self.rep.fail("number", m.where, f"{preset} {key} choices {val}", ", ".join(p["choices"])))

    def assert_run(self, folder, a, m, src):
        mm = ASSERT_RE.match(a)
        if not mm:
            self.rep.fail("marker", m.where, a, "expected: FILE [filter] COLUMN OP VALUE")
            return
        fname, filt, what, op, value = mm.group("file"), mm.group("filter"), mm.group("what"), mm.group("op"), mm.group("value").strip()
        path = folder / fname
        says = f"{src}: {a}"
        if not path.exists():
            self.rep.fail("number", m.where, says, f"the run wrote no {fname}")
            return
        if fname.endswith(".json"):
            obj = json.load(open(path))
            for k in what.split("."):
                obj = obj.get(k) if isinstance(obj, dict) else None
            self.verdict(m.where, says, obj, op, value)
            return
        rows = list(csv.DictReader(open(path, newline="")))
        if filt:
            for cond in re.split(r",\s*(?=[A-Za-z_]\w*\^?=)", filt.strip()):
                k, _, v = cond.partition("=")
                k, v = k.strip(), v.strip()
                if k.endswith("^"):
                    rows = [r for r in rows if (r.get(k[:-1]) or "").startswith(v)]
                else:
                    rows = [r for r in rows if r.get(k) in v.split("|")]
        if what == "rows":
            self.verdict(m.where, says, len(rows), op, value)
            return
        agg = re.match(r"^(sum|max|min)\((\w+)\)$", what)
        if agg:
            vals = [float(r[agg.group(2)]) for r in rows if r.get(agg.group(2)) not in (None, "")]
            v = {"sum": sum, "max": max, "min": min}[agg.group(1)](vals) if vals else None
            self.verdict(m.where, says, v, op, value)
            return
        if len(rows) != 1:
            self.rep.fail("number", m.where, says, f"{len(rows)} rows match the filter (expected one)")
            return
        if what not in rows[0]:
            self.rep.fail("number", m.where, says, f"{fname} has no column {what}")
            return
        self.verdict(m.where, says, rows[0][what], op, value)


# --------------------------------------------------------------------------------------------
# The scan of one document


FILE_RE = re.compile(r"^(?:[\w.<>-]+/)*[\w<>*.-]+\.(?:%s)(?::\w+)?$" % "|".join(RESULT_EXT))
SRC_PATH_RE = re.compile(r"^(?:\./)?(?:%s)/[^\s`'\"]*$" % "|".join(SOURCE_ROOTS))
BARE_SRC_RE = re.compile(r"^[\w-]+\.(?:hpp|cpp|py|sh)$")
REL_SRC_RE = re.compile(r"^(?:tokdyn/)?(?:core|engine|models|analysis|io|runtime|experiments|tokdyn_plot|tokdyn_train|tokdyn)/[\w/<>.*-]+\.(?:hpp|cpp|py)$")
COLS_RE = re.compile(r"^[A-Za-z_][\w]*(?:\s*,\s*[A-Za-z_][\w]*)+$")


class Scanner:
    def __init__(self, tk, rep, source, cmds):
        self.tk, self.rep, self.source, self.cmds = tk, rep, source, cmds
        self.markers = []
        self.count_claims = []  # (where, number, block text)
        self.all_files = None
        self.headings = {}

    def source_files(self):
        if self.all_files is None:
            self.all_files = {}
            for root in SOURCE_ROOTS:
                for p in (self.source / root).rglob("*"):
                    if p.is_file():
                        self.all_files.setdefault(p.name, []).append(p)
        return self.all_files

    def heading_slugs(self, path):
        if path not in self.headings:
            slugs = set()
            if path.exists() and path.suffix == ".md":
                fence = False
                for ln in path.read_text().split("\n"):
                    if ln.strip().startswith("```"):
                        fence = not fence
                    m = re.match(r"^#{1,6} (.*)$", ln)
                    if m and not fence:
                        slugs.add(slug(m.group(1)))
            self.headings[path] = slugs
        return self.headings[path]

    # --- presets named in a span ----------------------------------------------------------
    def presets_in(self, span, last):
        P = self.tk.presets
        s = span.strip()
        if s in P:
            return [s]
        if "*" in s and re.fullmatch(r"[\w*-]+", s):
            return [p for p in P if fnmatch.fnmatch(p, s)]
        m = re.fullmatch(r"([\w-]*?)(\d+)(?:\.\.|…)(\d+)", s)
        if m and f"{m.group(1)}{m.group(2)}" in P:
            return [p for p in (f"{m.group(1)}{k}" for k in range(int(m.group(2)), int(m.group(3)) + 1)) if p in P]
        m = re.fullmatch(r"([\w-]+?)(\w)((?:/\w)+)", s)
        if m and f"{m.group(1)}{m.group(2)}" in P:
            return [p for p in [m.group(1) + m.group(2)] + [m.group(1) + x for x in m.group(3).split("/")[1:]] if p in P]
        if last and re.fullmatch(r"-?[\w]+", s):
            base = last.rsplit("-", 1)[0]
            cand = base + ("" if s.startswith("-") else "-") + s
            if cand in P and s not in ("all",):
                return [cand]
        first = s.split(" ")[0]
        if first in P and re.search(r"\s\w+=", s):
            return [first]
        return []

    def scan(self, rel):
        path = self.source / rel
        text = path.read_text()
        blocks = parse_blocks(text)
        section = []  # presets named in the current section, in order
        for bi, b in enumerate(blocks):
            if b.kind == "heading":
                section = []
            if b.kind == "comment":
                m = re.match(r"^\s*<!--\s*check( long)?:\s*(.*?)\s*-->\s*$", " ".join(t.strip() for _, t in b.lines), re.S)
                if m:
                    claim = self.claim_text(blocks, bi)
                    self.markers.append(Marker(f"{rel}:{b.start}", norm_minus(m.group(2)), bool(m.group(1)), claim))
                continue
            if b.kind == "code":
                self.scan_code(rel, b, section)
                continue
            self.scan_prose(rel, b, section, blocks, bi)

    def claim_text(self, blocks, bi):
        """The paragraph, list item or table (all its rows) after a marker (markers in between skipped)."""
        j = bi + 1
        while j < len(blocks) and blocks[j].kind == "comment":
            j += 1
        if j >= len(blocks):
            return ""
        b = blocks[j]
        if b.table:
            return "\n".join(x.text for x in blocks if x.table == b.table)
        return b.text

    def marked_numbers(self, rel, block_text):
        out = set()
        for m in self.markers:
            if m.where.startswith(rel + ":") and m.claim_text == block_text:
                for a in split_marker(m.body)[1:]:
                    lit = MarkerRunner.literal(re.sub(r'\s@\s*"[^"]*"\s*$', "", a))
                    if lit:
                        out.add(lit)
        return out

    # --- code blocks ------------------------------------------------------------------------
    def scan_code(self, rel, b, section):
        if b.lang not in ("", "sh", "bash", "shell", "console"):
            return
        logical = []
        for no, ln in b.lines:
            code, comment = split_comment(ln)
            if logical and (logical[-1][1].rstrip().endswith("\\") or (re.match(r"^\s{4,}[\[-]", ln) and logical[-1][3])):
                prev = logical[-1]
                logical[-1] = (prev[0], prev[1].rstrip().rstrip("\\") + " " + code.strip(), prev[2] + " " + comment, prev[3])
            else:
                synopsis = "[" in code and "--" in code
                logical.append((no, code, comment, synopsis))
        for no, code, comment, synopsis in logical:
            where = f"{rel}:{no}"
            if code.strip().startswith("#"):
                code = ""
            for cmd in re.split(r"\s*(?:&&|\|\||;)\s*", code):
                words = shell_words(cmd)
                if not words:
                    continue
                preset = self.cmds.check(words, where, comment, synopsis=synopsis)
                if preset and preset in self.tk.presets:
                    section.append(preset)
                    for w in shell_words(comment):
                        w = w.strip("(),;:")
                        if FILE_RE.match(w) and not w.startswith(("results/", "/")):
                            self.check_result_file(rel, no, w, [preset], None)
                for w in words:
                    self.check_path_word(w, where, quiet=True)

    # --- prose ------------------------------------------------------------------------------
    def scan_prose(self, rel, b, section, blocks, bi):
        text = b.text
        spans = spans_of(b)
        here = []
        last = section[-1] if section else None
        for idx, (s, no, st, en) in enumerate(spans):
            found = self.presets_in(s, last)
            # `A` … `B`: every preset between
            if found and idx + 1 < len(spans):
                between = text[en:spans[idx + 1][2]]
                if between.strip() in ("…", "...", "to") :
                    nxt = self.presets_in(spans[idx + 1][0], found[-1])
                    if nxt:
                        P = self.tk.presets
                        lo, hi = P.index(found[0]), P.index(nxt[-1])
                        found = P[lo:hi + 1]
            if found:
                here.extend(found)
                section.extend(found)
                last = found[-1]
            context = text if b.kind == "row" else self.sentence(text, st, en)
            self.scan_span(rel, no, s, here, section, context, spans, idx, text, b.kind)
        self.scan_links(rel, b)
        self.scan_numbers(rel, b, blocks, bi)

    @staticmethod
    def sentence(text, st, en):
        a = max(text.rfind(". ", 0, st), text.rfind("\n\n", 0, st))
        z = text.find(". ", en)
        return text[a + 1: z if z >= 0 else len(text)]

    def scan_span(self, rel, no, s, here, section, context, spans, idx, text, kind):
        where = f"{rel}:{no}"
        words = shell_words(s)
        if not words:
            return
        first = words[0]
        if CommandChecker.is_tokdyn(first) or (first == "mpirun" and "tokdyn" in s):
            for cmd in re.split(r"\s*(?:&&|;)\s*", s):
                cw = shell_words(cmd)
                synopsis = "[" in cmd
                preset = self.cmds.check(cw, where, context, synopsis=synopsis)
                if preset and preset in self.tk.presets:
                    here.append(preset)
                    section.append(preset)
            return
        if re.match(r"^(?:\./)?scripts/\S+\.(?:sh|py)\b", first) or first in ("/usr/bin/python3", "ctest"):
            self.cmds.check(words, where, context)
            return
        if first in ("--set", "-s") and len(words) > 1 and "=" in words[1]:
            key = words[1].split("=")[0]
            self.check_loose_key(key, where, here, section, context)
            return
        # a test name after "CTest"
        pre = text[:spans[idx][2]].rstrip()
        if re.search(r"\bCTest( test)?$", pre) and re.fullmatch(r"[\w*]+", s):
            self.cmds.check_test_name(s, where)
            return
        if FILE_RE.match(s) and not s.startswith(("results/", "build/", "/", "DIR/", "P/", "~", "<")) and not SRC_PATH_RE.match(s):
            # a table row: the presets it names before the file (a row that names none may hold any
            # preset's file); a paragraph or list item: every preset named before it in its section
            cands = list(dict.fromkeys(here)) if kind == "row" else list(dict.fromkeys(section))
            self.check_result_file(rel, no, s, cands, (spans, idx, text), any_preset=(kind == "row" and not here))
            return
        self.check_path_word(s, where)

    def check_loose_key(self, key, where, here, section, context):
        if placeholder_key(key):
            return
        cands = list(dict.fromkeys(here)) or list(dict.fromkeys(section))
        pool = cands or self.tk.presets
        if any(key in self.tk.params(p) or key in self.tk.schema[p].get("renamed", {}) for p in pool):
            self.rep.ok("param", where, key)
        elif not cands and any(key in self.tk.params(p) for p in self.tk.presets):
            self.rep.ok("param", where, key)
        else:
            owners = [p for p in self.tk.presets if key in self.tk.params(p)]
            self.rep.fail("param", where, f"`--set {key}=…` (of {', '.join(cands) or 'any preset'})",
                          "not a parameter there" + (f" (it is one of {', '.join(owners[:4])})" if owners else " of any preset"))

    def check_path_word(self, s, where, quiet=False):
        s = s.strip().rstrip(".,;:)")
        if s.startswith("./"):
            s = s[2:]
        s = re.sub(r"(:\d+|#[\w-]+)$", "", s)
        if not s:
            return
        cand = None
        if SRC_PATH_RE.match(s) or s in ROOT_FILES:
            cand = [s]
        elif REL_SRC_RE.match(s):
            cand = [s, "include/" + s, "include/tokdyn/" + s, "src/" + s, "python/" + s, "apps/" + s]
        elif BARE_SRC_RE.match(s) and not quiet:
            hits = self.source_files().get(s) or self.source_files().get(s + ".in")
            (self.rep.ok("path", where, s) if hits else self.rep.fail("path", where, f"`{s}`", "no file of that name in the repository"))
            return
        if cand is None:
            return
        for c in cand:
            pat = re.sub(r"<[^>]+>", "*", c)
            pat = re.sub(r"(?<=/)[A-Z][A-Z0-9_]*(?=\.|/|$)", "*", pat)
            if "*" in pat:
                if glob.glob(str(self.source / pat)):
                    self.rep.ok("path", where, s)
                    return
            elif (self.source / pat.rstrip("/")).exists():
                self.rep.ok("path", where, s)
                return
        if s.startswith(("build/", "results/")):
            return
        self.rep.fail("path", where, f"`{s}`", "no such file or folder in the repository")

    def check_result_file(self, rel, no, s, cands, col_ctx, any_preset=False):
        where = f"{rel}:{no}"
        name, _, col = s.partition(":")
        if name.startswith("inputs/") or name.startswith("figures/"):
            return
        page = PAGE_FILES.get(rel, {})
        columns = None
        if name in page:
            self.rep.ok("file", where, f"{name} ({page[name]})")
            return
        decl = [(p, self.tk.declares(p, name)) for p in cands]
        decl = [(p, d) for p, d in decl if d]
        if name == "summary.csv":
            columns = [("every preset", SUMMARY_COLUMNS)]
            self.rep.ok("file", where, name)
        elif decl:
            self.rep.ok("file", where, f"{name} of {decl[0][0]}")
            columns = [(p, d[1]) for p, d in decl if d[0] == "table"]
        elif name in NOT_A_PRESET_FILE or fnmatch.fnmatch(name, "sweep_*.png"):
            self.rep.ok("file", where, f"{name} ({NOT_A_PRESET_FILE.get(name, 'tokdyn sweep --plot')})")
            return
        elif cands and not (any_preset and any(self.tk.declares(p, name) for p in self.tk.presets)):
            files = sorted(set(f for p in cands for f in self.tk.files_of(p)))
            self.rep.fail("file", where, f"`{name}` (of {', '.join(dict.fromkeys(cands))})",
                          f"not declared by {', '.join(dict.fromkeys(cands))}; its files: {', '.join(files)}")
            return
        else:
            owners = [p for p in self.tk.presets if self.tk.declares(p, name)]
            if owners:
                self.rep.ok("file", where, f"{name} of {owners[0]}")
                columns = [(p, d[1]) for p in owners for d in [self.tk.declares(p, name)] if d[0] == "table"]
            else:
                self.rep.fail("file", where, f"`{name}`", "no preset declares it (tokdyn show PRESET --json, outputs)")
                return
        if col:
            if any(col in c for _, c in columns or []):
                self.rep.ok("columns", where, s)
            else:
                self.rep.fail("columns", where, f"`{s}`", f"{name} has no column {col}: " + "; ".join(f"{p}: {','.join(c)}" for p, c in columns or []))
        if col_ctx and columns is not None:
            self.check_columns(rel, name, columns, col_ctx)

    def check_columns(self, rel, name, columns, ctx):
        spans, idx, text = ctx
        if idx + 1 >= len(spans):
            return
        s, no, st, en = spans[idx + 1]
        between = text[spans[idx][3]:st]
        if not re.fullmatch(r"\s*[(:]?\s*", between):
            return
        where = f"{rel}:{no}"
        cols = None
        subset = False
        if COLS_RE.match(s):
            cols = [c.strip() for c in s.split(",")]
            subset = bool(re.match(r"^\s*,?\s*(?:…|\.\.\.)", text[en:]))
        else:
            # `a`, `b`, `c` as separate spans
            run_cols = []
            j = idx + 1
            while j < len(spans) and re.fullmatch(r"[A-Za-z_]\w*", spans[j][0]):
                run_cols.append(spans[j][0])
                if j + 1 < len(spans) and not re.fullmatch(r",\s*(?:and\s+)?|\s+and\s+", text[spans[j][3]:spans[j + 1][2]]):
                    break
                j += 1
            if len(run_cols) >= 2:
                cols, subset = run_cols, True
        if not cols:
            return
        ok = []
        for p, c in columns:
            if (subset and all(x in c for x in cols)) or (not subset and cols == c):
                ok.append(p)
        claim = ",".join(cols) + (", …" if subset else "")
        if ok:
            self.rep.ok("columns", where, f"{name}: {claim}")
        else:
            self.rep.fail("columns", where, f"{name} (`{claim}`)", "; ".join(f"{p} writes {','.join(c)}" for p, c in columns))

    def scan_links(self, rel, b):
        base = (self.source / rel).parent
        for m in re.finditer(r"!?\[[^\]]*\]\(([^)\s]+)\)", b.text):
            target = m.group(1)
            no = b.lines[0][0] + b.text[:m.start()].count("\n")
            where = f"{rel}:{no}"
            if re.match(r"^[a-z]+:", target):
                continue
            path, _, frag = target.partition("#")
            p = (base / path) if path else (self.source / rel)
            if not p.exists():
                self.rep.fail("link", where, f"link ({target})", "no such file")
                continue
            if frag and frag not in self.heading_slugs(p):
                self.rep.fail("link", where, f"link ({target})", f"{path or rel} has no heading #{frag}")
                continue
            self.rep.ok("link", where, target)

    def scan_numbers(self, rel, b, blocks, bi):
        text = norm_minus(b.text)
        for m in re.finditer(r"\b([\d,]+) CTest tests\b", text):
            no = b.lines[0][0] + text[:m.start()].count("\n")
            total, _ = self.tk.ctest()
            n = int(m.group(1).replace(",", ""))
            (self.rep.ok("number", f"{rel}:{no}", m.group(0)) if n == total
             else self.rep.fail("number", f"{rel}:{no}", m.group(0), f"ctest -N in the build folder: {total} tests"))
        claim = b.text if not b.table else "\n".join(x.text for x in blocks if x.table == b.table)
        for m in re.finditer(r"\b(\d+) (?:checks|verdicts)\b|\b(\d+) of (\d+) (?:checks |rows |applicable rows )?pass", text):
            no = b.lines[0][0] + text[:m.start()].count("\n")
            nums = [g for g in m.groups() if g]
            self.count_claims.append((rel, f"{rel}:{no}", nums, claim, m.group(0)))

    def check_count_claims(self):
        for rel, where, nums, claim, said in self.count_claims:
            marked = self.marked_numbers(rel, claim)
            if all(n in marked for n in nums):
                self.rep.ok("number", where, said)
            else:
                missing = [n for n in nums if n not in marked]
                self.rep.fail("number", where, f"\"{said}\"",
                              f"unchecked count ({', '.join(missing)}): put a <!-- check: run PRESET | ... --> marker before it")


# --------------------------------------------------------------------------------------------


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--tokdyn", required=True)
    ap.add_argument("--source", required=True)
    ap.add_argument("--build", required=True)
    ap.add_argument("--long", action="store_true", help="also the full-size claims (check long markers)")
    ap.add_argument("--doc", action="append", default=[], help="only this document (repeatable; relative to --source)")
    ap.add_argument("--no-runs", action="store_true", help="skip the markers that run presets (a quick check while writing)")
    ap.add_argument("--jobs", type=int, default=2)
    ap.add_argument("-v", "--verbose", action="store_true")
    args = ap.parse_args()
    t0 = time.time()
    source = Path(args.source).resolve()
    exe = str(Path(args.tokdyn).resolve())
    rep = Report(args.verbose)
    tk = Tokdyn(exe, source, Path(args.build).resolve())
    docs = args.doc or (["README.md"] + sorted(str(p.relative_to(source)) for p in (source / "docs").glob("*.md")))
    docs = [d for d in docs if d not in SKIP_DOCS]
    cmds = CommandChecker(tk, rep, source)
    sc = Scanner(tk, rep, source, cmds)
    for d in docs:
        sc.scan(d)
    t_scan = time.time() - t0
    cmds.run_validations(args.jobs)
    t_valid = time.time() - t0 - t_scan
    sc.check_count_claims()
    markers = [m for m in sc.markers if (args.long or not m.long) and not (args.no_runs and m.body.startswith("run "))]
    skipped = len(sc.markers) - len(markers)
    tmp = Path(tempfile.mkdtemp(prefix="docs_claims."))
    try:
        mr = MarkerRunner(tk, rep, tmp, args.long)
        keys = set(mr.source_runs(markers))
        # coupling-all first, so the coupling-* presets at their defaults come from its folders
        markers.sort(key=lambda m: 0 if m.body.startswith("run coupling-all ") or m.body.startswith("run coupling-all|") else 1)
        for m in markers:
            mr.check(m, keys)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    elapsed = time.time() - t0
    n_long = sum(1 for m in sc.markers if m.long)
    print(f"docs_claims: {len(docs)} documents, {len(sc.markers)} check markers ({n_long} long: "
          f"{'run' if args.long else 'skipped, --long runs them'}; {skipped} not run), {len(cmds.validations)} parameter validations, "
          f"{mr.n} runs ({mr.run_seconds:.1f} s)")
    print("claims by kind (held / failed):")
    for kind in sorted(rep.counts):
        good, bad = rep.counts[kind]
        print(f"  {kind:9} {good:5} / {bad}")
    print(f"time: {elapsed:.1f} s (scan {t_scan:.1f} s, validations {t_valid:.1f} s)")
    for n in rep.notes:
        print("note:", n)
    if rep.failures:
        print(f"\n{len(rep.failures)} claim(s) do not hold:")
        def order(x):
            path, _, line = x[1].where.partition(":")
            return (path, int(line) if line.isdigit() else 0)

        for kind, f in sorted(rep.failures, key=order):
            print(f"{f.where}: [{kind}] says {f.says}; true: {f.truth}")
        return 1
    print("every claim holds")
    return 0


if __name__ == "__main__":
    sys.exit(main())
