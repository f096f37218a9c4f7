#!/usr/bin/python3
"""Schema-driven edge test of every preset's parameters (no hand-written cases).

For every preset (`tokdyn presets`) it reads the schema (`tokdyn show P --json`: types, bounds,
choices, list rules, path kinds, conditions, the preset's smoke parameters) and runs the preset at
its smoke size with one parameter at a time set to each edge its schema implies: the bounds and
just outside them, 0, negative, huge, non-finite, empty / one-element / duplicated / reversed
lists, an empty string, a missing file, a directory, an empty and a garbage file; every choice of
a string; and, for a parameter that applies only under some options, once under an option that
disables it (must be refused). Every probe must:

  * exit 0, 2 or 4 (never 1, never a signal; 143 only after this script's own timeout);
  * print exactly one line on stderr when it exits 2 or 4 (and for a disabled knob, name the
    option that disables it);
  * leave nothing beside --out (no lock file, no temporary folder) and, when it fails, no --out;
  * write no NaN/inf cell in a result CSV unless the preset declares that column (`nonfinite_ok`);
  * mark no check row with a non-finite or empty value as pass or fail (such a row is "n/a").

Modes: --mode sample (a fixed, seeded sample sized for the test suite), --mode full (the whole
grid: scripts/param_edges.sh, for CI runs that may take longer). Writes a CSV report of every
probe with --report. Exit status 0 when every probe passed, 1 otherwise (the problems are listed).
"""
import argparse
import csv
import hashlib
import json
import math
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from fnmatch import fnmatch

NONFINITE = {"nan", "-nan", "+nan", "inf", "-inf", "+inf", "infinity", "-infinity", "+infinity"}


def fmt_num(x):
    if isinstance(x, int) or (isinstance(x, float) and x.is_integer() and abs(x) < 1e15):
        return str(int(x))
    return repr(float(x))


def numeric_edges(spec):
    """Values of a numeric parameter at the edges its schema implies (as --set text)."""
    integer = spec["type"] in ("int", "int list")
    lo, hi = spec["min"], spec["max"]
    out = []

    def add(v, why):
        out.append((v, why))

    if integer:
        if lo is not None:
            add(int(lo), "min")
            add(int(lo) - 1, "below min")
            add(int(lo) + 1, "min + 1")
        if hi is not None:
            add(int(hi), "max")
            add(int(hi) + 1, "above max")
        add(0, "zero")
        add(-1, "negative")
        add(10**19, "huge (overflows a long)")
        add(2**53, "huge")
    else:
        if lo is not None:
            if spec["min_exclusive"]:
                add(lo, "min (excluded)")
                add(lo + max(abs(lo), 1.0) * 1e-12, "just above min")
            else:
                add(lo, "min")
                add(lo - max(abs(lo), 1.0) * 1e-9, "just below min")
        if hi is not None:
            if spec.get("max_exclusive"):
                add(hi, "max (excluded)")
                add(hi - max(abs(hi), 1.0) * 1e-12, "just below max")
            else:
                add(hi, "max")
                add(hi + max(abs(hi), 1.0) * 1e-9, "just above max")
        add(0.0, "zero")
        add(-1.0, "negative")
        add(1e300, "huge")
        add(-1e300, "huge negative")
        add(5e-324, "denormal")
        add(float("nan"), "nan")
        add(float("inf"), "inf")
        add(float("-inf"), "-inf")
    seen, uniq = set(), []
    for v, why in out:
        key = fmt_num(v) if not (isinstance(v, float) and math.isnan(v)) else "nan"
        if key not in seen:
            seen.add(key)
            uniq.append((v, why))
    return uniq


def text_of(v):
    if isinstance(v, float):
        if math.isnan(v):
            return "nan"
        if math.isinf(v):
            return "inf" if v > 0 else "-inf"
    return fmt_num(v)


def edges(spec, scratch):
    """(value text, description) pairs for one parameter."""
    t = spec["type"]
    out = []
    if t in ("int", "double"):
        out = [(text_of(v), why) for v, why in numeric_edges(spec)]
        out += [("", "empty"), ("abc", "not a number")]
    elif t == "bool":
        out = [("true", "true"), ("false", "false"), ("", "empty"), ("maybe", "not a bool")]
    elif t == "string":
        if spec["path"]:
            out = [("", "empty (default behaviour)"),
                   (os.path.join(scratch, "missing", "nothing.npy"), "missing file"),
                   (scratch, "a directory") if spec["path"] == "file" else (os.path.join(scratch, "empty.npy"), "a file"),
                   (os.path.join(scratch, "empty.npy"), "empty file"),
                   (os.path.join(scratch, "garbage.npy"), "garbage file")]
            if spec["path"] == "directory" and os.path.isdir(os.path.join(scratch, "ck")):
                out.append((os.path.join(scratch, "ck"), "a tiny checkpoint (tokdyn make-checkpoint --size tiny)"))
        elif spec["choices"]:
            out = [(c, "choice") for c in spec["choices"]]
            out += [("", "empty"), ("bogus-choice", "not a choice")]
        else:
            out = [("", "empty"), ("x" * 300, "long string"), (" ", "blank")]
    else:  # lists
        dflt = spec["default"]
        ints = t == "int list"
        base = [v for v, _ in numeric_edges(spec) if isinstance(v, (int, float)) and not
                (isinstance(v, float) and (math.isnan(v) or math.isinf(v)))]
        lo = spec["min"]
        first = dflt[0] if dflt else (int(lo) if ints and lo is not None else (lo if lo is not None else 1))
        out.append(("", "empty list"))
        out.append((text_of(first), "one element"))
        if dflt:
            out.append((",".join(text_of(x) for x in dflt + [dflt[-1]]), "duplicated last entry"))
            out.append((",".join(text_of(x) for x in reversed(dflt)), "reversed"))
            out.append((",".join(text_of(x) for x in dflt) + ",", "trailing comma"))
            out.append(("," + ",".join(text_of(x) for x in dflt), "leading comma"))
        else:
            out.append((f"{text_of(first)},{text_of(first)}", "duplicated"))
        for v, why in numeric_edges(spec):
            out.append((text_of(v), f"one entry: {why}"))
        out.append(("1,abc", "not a number"))
    return out


def applies(spec, values):
    """Does the parameter apply under these (text) values?"""
    for c in spec["only_when"]:
        listed = values.get(c["key"]) in c["values"]
        if listed == c["negate"]:
            return False
    return True


def enabling_sets(spec, specs_by_key, values):
    """--set pairs that make the parameter apply, or None when that cannot be arranged simply."""
    extra = {}
    for c in spec["only_when"]:
        listed = values.get(c["key"]) in c["values"]
        if listed != c["negate"]:
            continue
        if not c["negate"]:
            extra[c["key"]] = c["values"][0]
        else:
            ctl = specs_by_key[c["key"]]
            alts = [x for x in (ctl["choices"] or []) if x not in c["values"]]
            if not alts:
                return None
            extra[c["key"]] = alts[0]
    return extra


def disabling_sets(spec, specs_by_key, values):
    """--set pairs under which the parameter does not apply (first condition broken), or None."""
    for c in spec["only_when"]:
        ctl = specs_by_key[c["key"]]
        if not c["negate"]:
            alts = [x for x in (ctl["choices"] or []) if x not in c["values"]]
            if ctl["type"] == "bool":
                alts = [x for x in ("true", "false") if x not in c["values"]]
            if ctl["type"] == "string" and not ctl["choices"] and "" not in c["values"]:
                alts = [""]
            if alts:
                return {c["key"]: alts[0]}
        else:
            if c["values"]:
                return {c["key"]: c["values"][0]}
    return None


class Probe:
    def __init__(self, preset, param, value, why, sets, expect=None):
        self.preset, self.param, self.value, self.why = preset, param, value, why
        self.sets = sets            # ordered dict of key -> text
        self.expect = expect        # None, or "refused-not-applicable"
        self.code = None
        self.seconds = 0.0
        self.problems = []
        self.stderr = ""
        self.digest = None          # of the result files (manifest.json aside), exit 0 only

    def ident(self):
        return f"{self.preset} {self.param}={self.value!r} ({self.why})"


def check_outputs(probe, out, schema):
    allowed = list(schema.get("nonfinite_ok", {}).keys())
    for root, _, files in os.walk(out):
        for f in files:
            path = os.path.join(root, f)
            rel = os.path.relpath(path, out)
            if f.endswith(".csv"):
                with open(path, newline="") as fh:
                    rows = list(csv.reader(fh))
                if not rows:
                    continue
                head = rows[0]
                bad_cols = {}
                for r in rows[1:]:
                    for j, cell in enumerate(r):
                        if cell.strip().lower() in NONFINITE:
                            col = head[j] if j < len(head) else f"#{j}"
                            if not any(fnmatch(f"{rel}:{col}", pat) for pat in allowed):
                                bad_cols.setdefault(col, cell)
                for col, cell in bad_cols.items():
                    probe.problems.append(f"{rel}: column '{col}' holds '{cell}' (not declared non-finite)")
                if "value" in head and "pass" in head:
                    iv, ip = head.index("value"), head.index("pass")
                    for r in rows[1:]:
                        if len(r) <= max(iv, ip):
                            continue
                        v, ps = r[iv].strip(), r[ip].strip()
                        if ps not in ("true", "false", "n/a"):
                            probe.problems.append(f"{rel}: check row '{r[0]}' has pass = '{ps}'")
                        finite = v != "" and v.lower() not in NONFINITE
                        if not finite and ps in ("true", "false"):
                            probe.problems.append(f"{rel}: check row '{r[0]}' has value '{v}' and pass = {ps}")


def digest_of(out):
    h = hashlib.sha1()
    for root, dirs, files in sorted(os.walk(out)):
        dirs.sort()
        for f in sorted(files):
            if f == "manifest.json":
                continue
            path = os.path.join(root, f)
            h.update(os.path.relpath(path, out).encode() + b"\0")
            with open(path, "rb") as fh:
                h.update(fh.read())
    return h.hexdigest()


def ignored_knobs(done, schemas):
    """Parameters none of whose accepted values (other than the smoke run's) changed a result file."""
    problems = []
    base = {p.preset: p for p in done if p.param == "(smoke)"}
    groups = {}
    for p in done:
        if p.param == "(smoke)" or p.expect or p.code != 0 or p.digest is None:
            continue
        b = base.get(p.preset)
        if b is None or b.digest is None:
            continue
        extra = {k: v for k, v in p.sets.items() if k != p.param and b.sets.get(k) != v}
        if extra:
            continue  # the probe also changed another knob (to make this one apply)
        spec = next(s for s in schemas[p.preset]["params"] if s["key"] == p.param)
        now = b.sets.get(p.param, spec["default_text"])
        if p.value.strip() == now or p.value.strip() == "":
            continue
        groups.setdefault((p.preset, p.param), []).append(p)
    for (preset, param), ps in sorted(groups.items()):
        if all(p.digest == base[preset].digest for p in ps):
            vals = ", ".join(sorted({p.value for p in ps})[:4])
            problems.append((preset, param, f"no accepted value ({vals}) changed any result file: the knob is ignored "
                                            "at these settings (refuse it where it does not apply)"))
    return problems


def run_probe(probe, tokdyn, schema, workdir, timeout):
    h = hashlib.sha1(f"{probe.preset}|{sorted(probe.sets.items())}".encode()).hexdigest()[:12]
    parent = tempfile.mkdtemp(prefix=f"{probe.preset}-{h}-", dir=workdir)
    out = os.path.join(parent, "out")
    cmd = [tokdyn, "run", probe.preset, "--out", out, "--no-figures", "--quiet", "--threads", "1"]
    for k, v in probe.sets.items():
        cmd += ["--set", f"{k}={v}"]
    t0 = time.monotonic()
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, cwd=parent, text=True,
                            errors="replace")
    timed_out = False
    try:
        _, err = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        timed_out = True
        proc.send_signal(signal.SIGTERM)
        try:
            _, err = proc.communicate(timeout=60)
        except subprocess.TimeoutExpired:
            proc.kill()
            _, err = proc.communicate()
    probe.seconds = time.monotonic() - t0
    probe.code = proc.returncode
    probe.stderr = err
    code = proc.returncode
    lines = [l for l in err.splitlines() if l.strip()]
    if timed_out:
        probe.why += f" [timed out after {timeout:.0f} s]"
        if code != 143:
            probe.problems.append(f"SIGTERM after the timeout gave exit {code} (expected 143)")
    elif code < 0:
        probe.problems.append(f"killed by signal {-code}")
    elif code not in (0, 2, 4):
        probe.problems.append(f"exit {code}: {lines[-1] if lines else ''}")
    if code in (2, 4) and len(lines) != 1:
        probe.problems.append(f"exit {code} with {len(lines)} lines on stderr (expected one)")
    if probe.expect == "refused-not-applicable" and not timed_out:
        if code != 2:
            probe.problems.append(f"a parameter that does not apply was not refused (exit {code})")
        elif "does not apply" not in err:
            probe.problems.append(f"refused, but the message does not say the parameter does not apply: {err.strip()}")
    left = sorted(os.listdir(parent))
    expected_left = ["out"] if code == 0 else []
    if timed_out and left == ["out"] and os.path.isfile(os.path.join(out, "manifest.json")):
        expected_left = ["out"]  # SIGTERM during the commit: the complete result is published (docs/reliability.md §5)
    if left != expected_left:
        probe.problems.append(f"left beside --out: {left} (expected {expected_left})")
    if code == 0 and os.path.isdir(out):
        if not os.path.isfile(os.path.join(out, "manifest.json")):
            probe.problems.append("no manifest.json")
        else:
            # Every preset says where its time went (issue 21): notes.phase_seconds, name -> seconds
            # (>= 0), with "other" (the rest of the run).
            with open(os.path.join(out, "manifest.json")) as f:
                ph = json.load(f).get("notes", {}).get("phase_seconds")
            if not isinstance(ph, dict) or "other" not in ph or \
                    not all(isinstance(v, (int, float)) and v >= 0 for v in ph.values()):
                probe.problems.append(f"manifest.json notes.phase_seconds missing or malformed: {ph!r}")
        check_outputs(probe, out, schema)
        probe.digest = digest_of(out)
    shutil.rmtree(parent, ignore_errors=True)
    return probe


def prune(sets, by_key, keep):
    """Drops the smoke settings that do not apply under the probe's values (never the probed key)."""
    vals = {k: by_key[k]["default_text"] for k in by_key}
    vals.update(sets)
    return {k: v for k, v in sets.items() if k == keep or applies(by_key[k], vals)}


def build_probes(name, schema, scratch, full):
    smoke = dict(schema["smoke"])
    specs = schema["params"]
    by_key = {s["key"]: s for s in specs}
    values = {s["key"]: s["default_text"] for s in specs}
    values.update(smoke)
    probes = [Probe(name, "(smoke)", "", "the smoke run", dict(smoke))]
    for s in specs:
        key = s["key"]
        base = dict(smoke)
        vals = dict(values)
        if not applies(s, vals):
            en = enabling_sets(s, by_key, vals)
            if en is None:
                continue
            base.update(en)
            vals.update(en)
        for text, why in edges(s, scratch):
            sets = dict(base)
            sets[key] = text
            probes.append(Probe(name, key, text, why, prune(sets, by_key, key)))
        if s["only_when"]:
            dis = disabling_sets(s, by_key, values)
            if dis is not None:
                sets = dict(smoke)
                sets.update(dis)
                # a valid value of the knob itself: its default (or a choice that differs from it)
                v = s["default_text"]
                if s["choices"]:
                    v = next((c for c in s["choices"] if c != s["default_text"]), v)
                if s["path"]:
                    v = os.path.join(scratch, "garbage.npy")
                sets[key] = v
                probes.append(Probe(name, key, v, f"set while {dis} disables it", sets,
                                    expect="refused-not-applicable"))
    return probes


# Presets whose every accepted probe trains a model in PyTorch (seconds each, against tens of
# milliseconds for the others): in the sample, a third of the fraction (a fixed rule, not a measured
# time, so the sample is the same on every machine); the full grid runs all their probes.
TRAINING_PRESETS = {"coupling-e1", "coupling-e6"}


def sample(probes, fraction, seed, scratch):
    """A fixed subset: every smoke run and every disabled-knob probe, plus a seeded share of the rest
    (chosen by a hash of preset, parameter and value, the scratch folder's random name left out)."""
    keep = []
    for p in probes:
        if p.param == "(smoke)" or p.expect:
            keep.append(p)
            continue
        value = p.value.replace(scratch, "<scratch>")
        h = int(hashlib.sha1(f"{seed}|{p.preset}|{p.param}|{value}".encode()).hexdigest()[:8], 16)
        if h / 0xFFFFFFFF < (fraction / 3 if p.preset in TRAINING_PRESETS else fraction):
            keep.append(p)
    return keep


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--tokdyn", required=True)
    ap.add_argument("--mode", choices=["sample", "full"], default="sample")
    ap.add_argument("--fraction", type=float, default=0.12, help="share of the edge probes in sample mode")
    ap.add_argument("--seed", default="tokdyn", help="seed of the sample")
    ap.add_argument("--jobs", type=int, default=os.cpu_count() or 1)
    ap.add_argument("--timeout", type=float, default=60.0, help="seconds per probe before SIGTERM")
    ap.add_argument("--presets", default="", help="comma-separated presets (default: all)")
    ap.add_argument("--report", default="", help="write every probe to this CSV")
    ap.add_argument("--list", action="store_true", help="list the probes, run nothing")
    a = ap.parse_args()

    tokdyn = os.path.abspath(a.tokdyn)
    names = [l.split()[0] for l in subprocess.run([tokdyn, "presets"], capture_output=True, text=True,
                                                   check=True).stdout.splitlines() if l.strip()]
    if a.presets:
        want = a.presets.split(",")
        unknown = [w for w in want if w not in names]
        if unknown:
            sys.exit(f"param_edges: unknown presets {unknown}")
        names = want
    work = tempfile.mkdtemp(prefix="tokdyn-edges-")
    scratch = os.path.join(work, "scratch")
    os.makedirs(scratch)
    open(os.path.join(scratch, "empty.npy"), "wb").close()
    with open(os.path.join(scratch, "garbage.npy"), "wb") as fh:
        fh.write(b"\x93NUMPY garbage \x00\xff" * 3)
    # A real (tiny) checkpoint for the directory parameters, so that their presets run on a file.
    subprocess.run([tokdyn, "make-checkpoint", "--size", "tiny", "--seed", "0", "--out", os.path.join(scratch, "ck")],
                   capture_output=True, check=True)
    runs = os.path.join(work, "runs")
    os.makedirs(runs)

    schemas, probes = {}, []
    for n in names:
        schemas[n] = json.loads(subprocess.run([tokdyn, "show", n, "--json"], capture_output=True, text=True,
                                               check=True).stdout)
        probes += build_probes(n, schemas[n], scratch, a.mode == "full")
    total = len(probes)
    if a.mode == "sample":
        probes = sample(probes, a.fraction, a.seed, scratch)
    if a.list:
        for p in probes:
            print(p.ident(), " ".join(f"{k}={v}" for k, v in p.sets.items()))
        print(f"{len(probes)} probes of {total}")
        shutil.rmtree(work, ignore_errors=True)
        return 0
    # The longest presets first keeps both workers busy to the end.
    t0 = time.monotonic()
    done = []
    try:
        with ThreadPoolExecutor(max_workers=max(1, a.jobs)) as pool:
            futs = [pool.submit(run_probe, p, tokdyn, schemas[p.preset], runs, a.timeout) for p in probes]
            for i, f in enumerate(futs):
                done.append(f.result())
                if (i + 1) % 500 == 0:
                    print(f"param_edges: {i + 1} of {len(futs)} probes, {time.monotonic() - t0:.0f} s", file=sys.stderr,
                          flush=True)
    finally:
        shutil.rmtree(work, ignore_errors=True)
    ignored = ignored_knobs(done, schemas)
    bad = [p for p in done if p.problems]
    if a.report:
        with open(a.report, "w", newline="") as fh:
            w = csv.writer(fh)
            w.writerow(["preset", "param", "value", "edge", "exit", "seconds", "problems", "stderr"])
            for p in done:
                w.writerow([p.preset, p.param, p.value[:80], p.why, p.code, f"{p.seconds:.2f}", " | ".join(p.problems),
                            p.stderr.strip()[:300]])
    codes = {}
    for p in done:
        codes[p.code] = codes.get(p.code, 0) + 1
    print(f"param_edges: {len(done)} probes ({a.mode}, {total} in the whole grid) across {len(names)} presets in "
          f"{time.monotonic() - t0:.0f} s; exit codes {dict(sorted(codes.items()))}; {len(bad)} with problems; "
          f"{len(ignored)} suspected ignored knobs (reported, not failed: a knob may be inert at the smoke size)")
    slow = sorted(done, key=lambda p: -p.seconds)[:5]
    print("slowest: " + "; ".join(f"{p.ident()} {p.seconds:.1f} s" for p in slow))
    for p in bad:
        print(f"PROBLEM {p.ident()}: exit {p.code}: " + " | ".join(p.problems))
        print("    tokdyn run " + p.preset + " " + " ".join(f"--set '{k}={v}'" for k, v in p.sets.items()))
    for preset, param, what in ignored:
        print(f"SUSPECT {preset} {param}: {what}")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
