#!/usr/bin/python3
"""`cmake --install BUILD --prefix P` gives a self-contained tokdyn (CMakeLists.txt, install section).

Installs into a temporary prefix, moves the prefix elsewhere (nothing may name the install path),
and runs the installed programs from a folder outside the source tree with an environment that
names neither the source nor the build tree (no PYTHONPATH, no user site folder, no TOKDYN_*):

- `P/bin/tokdyn run rope-fig4a --set points=5` draws its figure with the installed plotting package;
- `P/bin/tokdyn train --help` runs the installed tokdyn_train;
- `/usr/bin/python3 -c 'import tokdyn'` with PYTHONPATH=P/lib/python3/dist-packages imports the
  installed package, whose _paths name P's binary and sources, and runs a preset with figures in
  process (the module finds P/share/tokdyn/python from its own file).

The binary still knows its source tree (the compile-time fallback), which this test leaves in place.
So that a run served by the source tree cannot pass, the test marks the installed copies of
tokdyn_plot and tokdyn_train: their __init__.py, once installed, also write their own path to the
file named by TOKDYN_INSTALL_TEST_MARK; the source tree's copies do not.

Usage: install_test.py --build BUILD --source SOURCE"""
import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

MARK = '''
# Added by tests/scripts/install_test.py to the installed copy only: which copy was imported.
import os as _install_test_os
if _install_test_os.environ.get("TOKDYN_INSTALL_TEST_MARK"):
    with open(_install_test_os.environ["TOKDYN_INSTALL_TEST_MARK"], "a") as _f:
        _f.write(__name__ + " " + _install_test_os.path.abspath(__file__) + "\\n")
'''

failures = []


def check(ok, what, detail=""):
    print(("ok   " if ok else "FAIL ") + what + ("" if ok or not detail else "\n" + detail))
    if not ok:
        failures.append(what)


def run(argv, env, cwd, timeout=240):
    return subprocess.run(argv, env=env, cwd=cwd, capture_output=True, text=True, timeout=timeout)


def marks(path):
    """{module: file} from the mark file (empty when nothing marked)."""
    if not path.exists():
        return {}
    return dict(line.split(" ", 1) for line in path.read_text().splitlines() if line)


def under(path, root):
    return Path(path).resolve().is_relative_to(root.resolve())


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--build", required=True, type=Path)
    ap.add_argument("--source", required=True, type=Path)
    args = ap.parse_args()
    source, build = args.source.resolve(), args.build.resolve()

    tmp = Path(tempfile.mkdtemp(prefix="tokdyn-install-test-"))
    try:
        first = tmp / "first-prefix"
        r = subprocess.run(["cmake", "--install", str(build), "--prefix", str(first)], capture_output=True, text=True)
        check(r.returncode == 0, "cmake --install", r.stdout + r.stderr)
        if r.returncode != 0:
            return 1
        # Moved after installing: the installed files may not name where they were installed.
        prefix = tmp / "moved" / "prefix"
        prefix.parent.mkdir()
        shutil.move(str(first), str(prefix))
        share = prefix / "share" / "tokdyn" / "python"
        site = prefix / "lib" / "python3" / "dist-packages"
        for rel in ["bin/tokdyn", "share/tokdyn/python/plot.py", "share/tokdyn/python/tokdyn_plot/__init__.py",
                    "share/tokdyn/python/tokdyn_train/__main__.py", "share/tokdyn/python/tokdyn_train/models/gpt2.py",
                    "lib/python3/dist-packages/tokdyn/__init__.py", "lib/python3/dist-packages/tokdyn/_paths.py"]:
            check((prefix / rel).is_file(), f"installed {rel}")
        check(any(site.glob("tokdyn/_core*.so")), "installed lib/python3/dist-packages/tokdyn/_core*.so")
        for pkg in ["tokdyn_plot", "tokdyn_train"]:
            if (share / pkg / "__init__.py").is_file():
                with open(share / pkg / "__init__.py", "a") as f:
                    f.write(MARK)

        work = tmp / "work"
        home = tmp / "home"
        work.mkdir()
        home.mkdir()
        mark = tmp / "mark.txt"
        env = {"PATH": "/usr/bin:/bin", "HOME": str(home), "TMPDIR": str(tmp), "LANG": "C.UTF-8",
               "PYTHONNOUSERSITE": "1", "OMP_NUM_THREADS": "2", "TOKDYN_INSTALL_TEST_MARK": str(mark)}
        for v in env.values():
            check(str(source) not in v and str(build) not in v, f"the environment does not name the trees ({v})")
        tokdyn = str(prefix / "bin" / "tokdyn")

        # 1. A preset with figures, by the installed binary.
        out = work / "fig4a"
        r = run([tokdyn, "run", "rope-fig4a", "--set", "points=5", "--out", str(out)], env, work)
        check(r.returncode == 0, "tokdyn run rope-fig4a --set points=5", r.stdout + r.stderr)
        png = out / "fig4a_nonmonotone.png"
        check(png.is_file() and png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n", "the figure fig4a_nonmonotone.png is a PNG")
        m = marks(mark)
        check("tokdyn_plot" in m and under(m["tokdyn_plot"].strip(), prefix),
              "the figure was drawn by the installed tokdyn_plot", f"imported: {m}")
        try:
            manifest = json.loads((out / "manifest.json").read_text())
            plotting = manifest.get("versions", {}).get("plotting")
        except (OSError, ValueError) as e:
            plotting = None
            print(f"manifest: {e}")
        check(isinstance(plotting, dict) and "matplotlib" in plotting, "manifest versions.plotting", f"{plotting}")

        # 2. tokdyn train --help: the installed tokdyn_train.
        mark.unlink(missing_ok=True)
        r = run([tokdyn, "train", "--help"], env, work)
        check(r.returncode == 0 and "usage" in r.stdout.lower(), "tokdyn train --help", r.stdout + r.stderr)
        m = marks(mark)
        check("tokdyn_train" in m and under(m["tokdyn_train"].strip(), prefix),
              "tokdyn train ran the installed tokdyn_train", f"imported: {m}")

        # 3. The Python package from P/lib/python3/dist-packages, and a preset with figures in process.
        mark.unlink(missing_ok=True)
        penv = dict(env, PYTHONPATH=str(site))
        code = ("import json, sys, tokdyn; from tokdyn import _paths\n"
                "r = tokdyn.run('rope-fig4a', sys.argv[1], figures=True, points=5)\n"
                "print(json.dumps({'file': tokdyn.__file__, 'binary': _paths.TOKDYN_BINARY,"
                " 'sources': _paths.TOKDYN_PYTHON_SOURCES}))\n")
        r = run(["/usr/bin/python3", "-c", code, str(work / "py-fig4a")], penv, work)
        check(r.returncode == 0, "/usr/bin/python3: import tokdyn; tokdyn.run(..., figures=True)", r.stdout + r.stderr)
        if r.returncode == 0:
            got = json.loads(r.stdout.strip().splitlines()[-1])
            check(under(got["file"], site), "import tokdyn: the installed package", got["file"])
            check(Path(got["binary"]).resolve() == Path(tokdyn).resolve(), "tokdyn._paths.TOKDYN_BINARY: P/bin/tokdyn", got["binary"])
            check(Path(got["sources"]).resolve() == share.resolve(), "tokdyn._paths.TOKDYN_PYTHON_SOURCES: P/share/tokdyn/python",
                  got["sources"])
        check((work / "py-fig4a" / "fig4a_nonmonotone.png").is_file(), "tokdyn.run drew fig4a_nonmonotone.png")
        m = marks(mark)
        check("tokdyn_plot" in m and under(m["tokdyn_plot"].strip(), prefix),
              "tokdyn.run drew with the installed tokdyn_plot", f"imported: {m}")
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    print(f"{len(failures)} failure(s)" if failures else "all ok")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
