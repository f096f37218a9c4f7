#!/usr/bin/python3
"""The figure package python/tokdyn_plot against the C++ presets (issue 18, item 7).

    plot_kinds.py SOURCE_DIR [--tokdyn BIN]

Checks, without drawing anything:
  * the package imports, and no file of it imports the entry script `plot` (or an old flat
    `plot_*` module): the package is free of the old import circle;
  * every figure kind is declared once, in one module's KINDS, and the registry holds exactly those;
  * the set of kinds equals the set of figure kinds the presets name in the C++ sources
    (src/**/*.cpp, parsed here: the 5th member of every `Experiment{...}` aggregate, a designated
    `.figure_kind = "..."` or an assignment `figure_kind = "..."`), so a preset naming a kind the
    package does not draw fails here, and so does a kind no preset uses;
  * `plot.py` and `python3 -m tokdyn_plot` refuse an unknown kind and a wrong argument count with
    exit status 1 and their one-line messages.
With --tokdyn, the preset names parsed from the sources must also be those `tokdyn presets` lists
(a check of the parser itself). Exit status 0 when everything holds, 1 otherwise (problems listed).
"""
import argparse
import os
import pkgutil
import re
import subprocess
import sys

# --- C++ sources ---------------------------------------------------------------------------------

STRING = re.compile(r'"((?:[^"\\\n]|\\.)*)"')


def code_only(text):
    """`text` with comments blanked and string/char literals kept verbatim (so a brace or comma
    inside a literal or a comment is not seen as code). Offsets are preserved."""
    out = list(text)
    i, n = 0, len(text)
    while i < n:
        c = text[i]
        if text.startswith("//", i):
            j = text.find("\n", i)
            j = n if j < 0 else j
            out[i:j] = " " * (j - i)
            i = j
        elif text.startswith("/*", i):
            j = text.find("*/", i + 2)
            j = n if j < 0 else j + 2
            out[i:j] = [ch if ch == "\n" else " " for ch in text[i:j]]
            i = j
        elif c == "R" and text.startswith('R"', i) and (i == 0 or not (text[i - 1].isalnum() or text[i - 1] == "_")):
            m = re.match(r'R"([^()\\ ]{0,16})\(', text[i:])
            if not m:
                i += 1
                continue
            end = text.find(")" + m.group(1) + '"', i)
            i = n if end < 0 else end + len(m.group(1)) + 2
        elif c == '"' or (c == "'" and not (i > 0 and text[i - 1].isalnum())):  # not 1'000
            j = i + 1
            while j < n and text[j] != c:
                j += 2 if text[j] == "\\" else 1
            i = j + 1
        else:
            i += 1
    return "".join(out)


def skip_literal(code, i):
    """Index just past the string or char literal that starts at code[i]."""
    q = code[i]
    j = i + 1
    while j < len(code) and code[j] != q:
        j += 2 if code[j] == "\\" else 1
    return j + 1


def aggregate_args(code, start):
    """The top-level members of the brace initializer whose '{' is at code[start], as text."""
    depth, i, args, begin = 0, start, [], start + 1
    while i < len(code):
        c = code[i]
        if c in "\"'" and not (c == "'" and i > 0 and code[i - 1].isalnum()):  # 1'000 digit separators
            i = skip_literal(code, i)
            continue
        if c in "([{":
            depth += 1
        elif c in ")]}":
            depth -= 1
            if depth == 0:
                args.append(code[begin:i])
                return [a.strip() for a in args if a.strip()]
        elif c == "," and depth == 1:
            args.append(code[begin:i])
            begin = i + 1
        i += 1
    raise ValueError("unbalanced Experiment{...} at offset %d" % start)


def literal(arg):
    """The value of a (possibly concatenated) string literal, or None when `arg` is not one."""
    parts = STRING.findall(arg)
    if not parts or STRING.sub("", arg).strip():
        return None
    return "".join(parts)


FIELDS = ["name", "description", "params", "run", "figure_kind"]


def preset_kinds(src):
    """{preset name: figure kind ('' = no figures)} of every `Experiment{...}` in src, and the set
    of kinds assigned elsewhere (`x.figure_kind = "..."`). Problems (a kind that is not a string
    literal, ...) are returned as a list of messages."""
    presets, assigned, problems = {}, set(), []
    for root, _, files in os.walk(src):
        for f in sorted(files):
            if not f.endswith((".cpp", ".hpp", ".h", ".cc")):
                continue
            path = os.path.join(root, f)
            with open(path, encoding="utf-8") as fh:
                code = code_only(fh.read())
            rel = os.path.relpath(path, os.path.dirname(src))
            for m in re.finditer(r"\bExperiment\s*\{", code):
                line = code.count("\n", 0, m.start()) + 1
                args = aggregate_args(code, m.end() - 1)
                fields = {}
                for k, a in enumerate(args):
                    d = re.match(r"\.(\w+)\s*=\s*(.*)$", a, re.S)
                    if d:
                        fields[d.group(1)] = d.group(2)
                    elif k < len(FIELDS):
                        fields[FIELDS[k]] = a
                name = literal(fields.get("name", ""))
                if name is None:
                    problems.append("%s:%d: Experiment{...} whose name is not a string literal: %r"
                                    % (rel, line, fields.get("name", "")[:60]))
                    continue
                kind = "" if "figure_kind" not in fields else literal(fields["figure_kind"])
                if kind is None:
                    problems.append("%s:%d: preset %s: figure kind is not a string literal: %r (teach this test)"
                                    % (rel, line, name, fields["figure_kind"][:60]))
                    continue
                if name in presets:
                    problems.append("%s:%d: preset %s registered twice" % (rel, line, name))
                presets[name] = kind
            for m in re.finditer(r'\bfigure_kind\s*=\s*("(?:[^"\\\n]|\\.)*")', code):
                assigned.add(literal(m.group(1)))
            for m in re.finditer(r"\.figure_kind\s*=\s*(?!\")(?!=)", code):
                line = code.count("\n", 0, m.start()) + 1
                problems.append("%s:%d: figure_kind assigned something other than a string literal" % (rel, line))
    return presets, assigned, problems


def apps_kinds(apps):
    """Kinds the command line draws itself: `draw_figures("kind", ...)` in apps/ (tokdyn sweep --plot)."""
    kinds = set()
    for root, _, files in os.walk(apps):
        for f in sorted(files):
            if f.endswith(".cpp"):
                with open(os.path.join(root, f), encoding="utf-8") as fh:
                    kinds |= set(re.findall(r'\bdraw_figures\(\s*"([a-z0-9_-]+)"', fh.read()))
    return kinds


# --- the package ---------------------------------------------------------------------------------

IMPORTS_PLOT = re.compile(r"^\s*(from\s+plot(_\w+)?\s+import\b|import\s+plot(_\w+)?\b)", re.M)


def package_problems(python_dir):
    problems = []
    pkg_dir = os.path.join(python_dir, "tokdyn_plot")
    for f in sorted(os.listdir(pkg_dir)):
        if f.endswith(".py"):
            with open(os.path.join(pkg_dir, f), encoding="utf-8") as fh:
                for m in IMPORTS_PLOT.finditer(fh.read()):
                    problems.append("tokdyn_plot/%s imports the entry script or an old module: %r" % (f, m.group(0).strip()))
    for f in sorted(os.listdir(python_dir)):
        if re.match(r"plot_\w+\.py$", f):
            problems.append("python/%s: an old flat plot module is still there (moved into tokdyn_plot)" % f)
    return problems


def declared_kinds(pkg):
    """{kind: [module, ...]} over every module's KINDS, read directly (not through the registry)."""
    import importlib
    out, problems = {}, []
    for info in sorted(pkgutil.iter_modules(pkg.__path__), key=lambda i: i.name):
        if info.name in ("common", "__main__"):
            continue
        mod = importlib.import_module(pkg.__name__ + "." + info.name)
        kinds = getattr(mod, "KINDS", None)
        if not isinstance(kinds, dict) or not kinds:
            problems.append("tokdyn_plot.%s declares no KINDS dict" % info.name)
            continue
        for k, fn in kinds.items():
            out.setdefault(k, []).append(info.name)
            if not callable(fn):
                problems.append("tokdyn_plot.%s: KINDS[%r] is not callable" % (info.name, k))
    return out, problems


def cli_problems(python_dir):
    problems = []
    env = dict(os.environ, MPLBACKEND="Agg")
    for argv, where in (([os.path.join(python_dir, "plot.py")], "plot.py"),
                        (["-m", "tokdyn_plot"], "python3 -m tokdyn_plot")):
        for args, want in ((["no-such-kind", python_dir], "plot.py: unknown figure kind 'no-such-kind'"),
                           ([], "usage: ")):
            r = subprocess.run([sys.executable] + argv + args, cwd=python_dir, env=env, capture_output=True, text=True, timeout=120)
            last = r.stderr.strip().splitlines()[-1] if r.stderr.strip() else ""
            if r.returncode != 1 or not last.startswith(want):
                problems.append("%s %s: exit %d, stderr %r; expected exit 1 and %r"
                                % (where, " ".join(args), r.returncode, last, want + ("..." if want.endswith(" ") else "")))
    return problems


def report(problems):
    print("plot_kinds: %d problem(s):" % len(problems))
    for m in problems:
        print("  " + m)
    return 1


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("source_dir")
    ap.add_argument("--tokdyn", help="the tokdyn binary: its `presets` must list the presets parsed from the sources")
    a = ap.parse_args()
    src = os.path.join(a.source_dir, "src")
    python_dir = os.path.join(a.source_dir, "python")
    problems = []

    presets, assigned, p = preset_kinds(src)
    problems += p
    if len(presets) < 10:
        problems.append("only %d presets parsed from %s: the parser no longer matches the sources" % (len(presets), src))
    cpp_kinds = {k for k in presets.values() if k} | assigned | apps_kinds(os.path.join(a.source_dir, "apps"))
    if a.tokdyn:
        out = subprocess.run([a.tokdyn, "presets"], capture_output=True, text=True, check=True).stdout
        listed = {line.split()[0] for line in out.splitlines() if line.strip()}
        if listed != set(presets):
            problems.append("presets parsed from the sources %s differ from `tokdyn presets`: only parsed %s, only listed %s"
                            % (src, sorted(set(presets) - listed), sorted(listed - set(presets))))

    problems += package_problems(python_dir)
    sys.path.insert(0, python_dir)
    try:
        import tokdyn_plot
    except Exception as e:  # a kind declared twice, a module without KINDS, a broken import
        problems.append("tokdyn_plot does not import: %s: %s" % (type(e).__name__, e))
        return report(problems)
    declared, p = declared_kinds(tokdyn_plot)
    problems += p
    for k, mods in sorted(declared.items()):
        if len(mods) > 1:
            problems.append("kind %s declared by %d modules: %s" % (k, len(mods), ", ".join(mods)))
    if set(tokdyn_plot.KINDS) != set(declared):
        problems.append("registry %s differs from the modules' KINDS %s" % (sorted(tokdyn_plot.KINDS), sorted(declared)))
    for k in sorted(cpp_kinds - set(tokdyn_plot.KINDS)):
        users = sorted(n for n, v in presets.items() if v == k)
        problems.append("figure kind %s (preset %s) has no module in tokdyn_plot" % (k, ", ".join(users) or "assigned in src"))
    for k in sorted(set(tokdyn_plot.KINDS) - cpp_kinds):
        problems.append("tokdyn_plot draws kind %s, which no preset in %s names" % (k, src))

    problems += cli_problems(python_dir)
    if problems:
        return report(problems)
    print("plot_kinds: %d kinds in %d modules, one per kind; the %d presets of the sources use exactly these (%d with figures)"
          % (len(tokdyn_plot.KINDS), len({m for v in declared.values() for m in v}), len(presets),
             sum(1 for v in presets.values() if v)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
