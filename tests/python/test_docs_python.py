"""docs/python.md's examples run (issue 38 §5): every ```python block whose previous line is the
marker <!-- runnable --> is run, in the page's order, in one fresh interpreter, in an empty folder,
so an example that stops working (an API renamed, a PyTorch feature the installed version lacks)
fails the suite instead of rotting in the page."""
import ast
import os
import subprocess
from pathlib import Path

import pytest

DOC = Path(__file__).resolve().parents[2] / "docs" / "python.md"
MARK = "<!-- runnable -->"


def runnable_blocks(text):
    """[(line, code)] of the marked blocks; ValueError for a marker not followed by a ```python
    block, or a marked block that is never closed."""
    lines = text.splitlines()
    blocks = []
    for i, line in enumerate(lines):
        if line.strip() != MARK:
            continue
        if i + 1 >= len(lines) or lines[i + 1].strip() != "```python":
            raise ValueError(f"{DOC.name}:{i + 1}: {MARK} is not followed by a ```python block")
        end = next((j for j in range(i + 2, len(lines)) if lines[j].strip() == "```"), None)
        if end is None:
            raise ValueError(f"{DOC.name}:{i + 2}: the marked block is never closed")
        blocks.append((i + 3, "\n".join(lines[i + 2:end])))
    return blocks


def test_the_marker_parser():
    good = f"text\n{MARK}\n```python\nx = 1\n```\n```python\nnot run\n```\n{MARK}\n```python\ny = x\n```\n"
    assert runnable_blocks(good) == [(4, "x = 1"), (11, "y = x")]
    with pytest.raises(ValueError, match="not followed"):
        runnable_blocks(f"{MARK}\n```sh\nls\n```\n")
    with pytest.raises(ValueError, match="never closed"):
        runnable_blocks(f"{MARK}\n```python\nx = 1\n")


def test_the_marked_examples_of_docs_python_md_run(tmp_path):
    blocks = runnable_blocks(DOC.read_text())
    # The page's runnable examples: run() and its temporary folder, Gram metrics of hidden states,
    # the depth spectrum's result, the PyTorch model. A marker lost in an edit fails here.
    assert len(blocks) >= 4, f"{DOC}: {len(blocks)} blocks marked {MARK}"
    names = ["tokdyn.run(", "gram_metrics(H)", ".save(", "fjvp"]
    for name in names:
        assert any(name in code for _, code in blocks), f"no runnable block of {DOC.name} uses {name}"
    script = []
    for line, code in blocks:
        ast.parse(code, filename=f"{DOC.name}:{line}")  # each block stands alone as Python
        # A failure's traceback points into the page: the block compiled at its own line numbers.
        script.append(f"exec(compile({chr(10) * (line - 1) + code!r}, {str(DOC)!r}, 'exec'), ns)")
    work, tmp = tmp_path / "work", tmp_path / "tmp"
    work.mkdir()
    tmp.mkdir()
    (tmp_path / "run_blocks.py").write_text("ns = {'__name__': '__main__'}\n" + "\n".join(script) + "\nprint('ok')\n")
    env = dict(os.environ, TMPDIR=str(tmp))  # run() without out= makes its temporary folders here
    r = subprocess.run(["/usr/bin/python3", str(tmp_path / "run_blocks.py")], cwd=work, env=env, capture_output=True,
                       text=True, timeout=600)
    assert r.returncode == 0 and r.stdout.strip().endswith("ok"), r.stdout + r.stderr
    assert (work / "spectrum" / "manifest.json").is_file()  # the save example wrote where it said
