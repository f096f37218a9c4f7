"""`tokdyn train` (python/tokdyn_train/train.py) through the CLI: the folder is a checkpoint tokdyn
runs; the same arguments give the same bytes; a run killed mid-way and rerun ends with the weights
of an uninterrupted run; a non-finite loss stops with exit 4 naming the step and keeps the last good
checkpoint; a corpus too small, a bad argument, a foreign --out are refused with one line, exit 2,
nothing written. The corpus is generated here: sentences from a small grammar, so a model that
reads context beats the unigram entropy within a few dozen steps."""
import json
import os
import signal
import subprocess
import time

import numpy as np
import pytest

TOKDYN = os.environ.get("TOKDYN_BIN", "build/tokdyn")


def make_corpus(path, sentences=1500, seed=0):
    rng = np.random.default_rng(seed)
    subj = ["the king", "a man", "the people", "his son", "the prophet", "they", "the woman", "the children"]
    verb = ["went up to", "spake unto", "came out of", "dwelt in", "looked upon", "returned to"]
    obj = ["the city", "the house of the lord", "the land of egypt", "the mountain", "jerusalem", "the river"]
    tail = ["and it was so.", "in that day.", "and they were afraid.", "for ever.", "and he blessed them."]
    lines = []
    for _ in range(sentences):
        s = subj[rng.integers(len(subj))]
        lines.append(f"And {s} {verb[rng.integers(len(verb))]} {obj[rng.integers(len(obj))]}, {tail[rng.integers(len(tail))]}")
    path.write_text("\n".join(lines) + "\n")
    return path


def train(args, **kw):
    return subprocess.run([TOKDYN, "train"] + [str(a) for a in args], capture_output=True, text=True, **kw)


BASE = ["gpt2", "--size", "tiny", "--steps", 24, "--threads", 1, "--batch", 8, "--checkpoint-every", 6, "--eval-every", 6,
        "--quiet"]


@pytest.fixture(scope="module")
def corpus(tmp_path_factory):
    return make_corpus(tmp_path_factory.mktemp("corpus") / "c.txt")


@pytest.fixture(scope="module")
def trained(tmp_path_factory, corpus):
    out = tmp_path_factory.mktemp("runs") / "a"
    r = train(BASE + ["--corpus", corpus, "--out", out])
    assert r.returncode == 0, r.stderr
    return out


def test_the_folder_is_a_checkpoint_with_its_record(trained, corpus, tmp_path):
    for f in ("config.json", "model.safetensors", "tokenizer.json", "loss.csv", "loss.png", "manifest.json"):
        assert (trained / f).is_file(), f
    steps = sorted(os.listdir(trained / "checkpoints"))
    assert steps == [f"step-{s:07d}" for s in (0, 6, 12, 18, 24)]
    m = json.loads((trained / "manifest.json").read_text())
    assert m["model"] == "gpt2" and m["seed"] == 0 and m["steps"] == 24
    assert m["tokens_seen"] == 24 * 8 * 64
    # The data hash is the C++ reader's (train-tokenizer prints it).
    r = subprocess.run([TOKDYN, "train-tokenizer", "--corpus", str(corpus), "--out", str(tmp_path / "t.json"),
                        "--vocab-size", "512", "--json"], capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    assert json.loads(r.stdout)["corpus_sha256"] == m["corpus"]["sha256"]
    # The trained tokenizer is the one train-tokenizer makes from the same corpus.
    assert (tmp_path / "t.json").read_bytes() == (trained / "tokenizer.json").read_bytes()
    # The held-out loss fell below the unigram entropy (a model that ignores context).
    assert m["final"]["heldout_loss"] < m["unigram_entropy"], m
    rows = (trained / "loss.csv").read_text().splitlines()
    assert rows[0] == "step,tokens,lr,train_loss,heldout_loss" and len(rows) == 25
    # tokdyn runs the result: a prompt through the trained model's own tokenizer.
    res = tmp_path / "res"
    r = subprocess.run([TOKDYN, "run", "prompt-trajectories", "--set", "model=gpt2", "--set", f"checkpoint={trained}",
                        "--set", "prompt=And the king went up to the city", "--out", str(res), "--no-figures"],
                       capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    man = json.loads((res / "manifest.json").read_text())
    assert man["notes"]["text"]["tokenizer"]["sha256"] == m["tokenizer"]["sha256"]


def test_the_same_arguments_give_the_same_bytes(trained, corpus, tmp_path):
    out = tmp_path / "b"
    r = train(BASE + ["--corpus", corpus, "--out", out])
    assert r.returncode == 0, r.stderr
    for f in ("model.safetensors", "loss.csv", "checkpoints/step-0000012/model.safetensors"):
        assert (out / f).read_bytes() == (trained / f).read_bytes(), f


def test_a_killed_run_resumes_to_the_same_weights(trained, corpus, tmp_path):
    out = tmp_path / "k"
    p = subprocess.Popen([TOKDYN, "train"] + [str(a) for a in BASE + ["--corpus", corpus, "--out", out]],
                         stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    deadline = time.monotonic() + 120
    # Wait on observable state: the step-12 checkpoint published (its state.json is written last).
    while not (out / "checkpoints" / "step-0000012" / "state.json").exists():
        assert p.poll() is None, "the run ended before it could be killed"
        assert time.monotonic() < deadline
        time.sleep(0.02)
    p.send_signal(signal.SIGKILL)
    p.wait()
    assert not (out / "manifest.json").exists()
    r = train(BASE + ["--corpus", corpus, "--out", out])
    assert r.returncode == 0, r.stderr
    assert (out / "model.safetensors").read_bytes() == (trained / "model.safetensors").read_bytes()
    assert (out / "loss.csv").read_bytes() == (trained / "loss.csv").read_bytes()
    assert json.loads((out / "manifest.json").read_text())["resumed_from"] >= 12


def test_a_non_finite_loss_stops_with_exit_4_and_keeps_the_last_good_checkpoint(corpus, tmp_path):
    out = tmp_path / "nan"
    env = dict(os.environ, TOKDYN_TRAIN_INJECT_NAN_AT="9")
    r = train(BASE + ["--corpus", corpus, "--out", out], env=env)
    assert r.returncode == 4, r.stderr
    assert "step 9: the training loss is nan" in r.stderr
    assert r.stderr.count("\n") == 1
    assert "step-0000006" in r.stderr
    assert sorted(os.listdir(out / "checkpoints")) == ["step-0000000", "step-0000006"]
    assert not (out / "manifest.json").exists()


@pytest.mark.parametrize("extra,says", [
    (["--steps", 0], "--steps: expected an integer in [1,"),
    (["--size", "huge"], "--size: expected tiny or small"),
    (["--lr", 2.0], "--lr: expected a number in (0, 1)"),
    (["--context", 65], "--context: expected an integer in [2, 64]"),
    (["--frobnicate", 1], "unrecognized arguments"),
])
def test_bad_arguments(corpus, tmp_path, extra, says):
    out = tmp_path / "bad"
    args = BASE + ["--corpus", corpus, "--out", out] + extra
    r = train(args)
    assert r.returncode == 2, r.stderr
    assert says in r.stderr, r.stderr
    assert r.stderr.count("\n") == 1
    assert not out.exists()


def test_refusals_before_anything_is_written(corpus, tmp_path):
    small = tmp_path / "small.txt"
    small.write_text("And the king went up to the city.\n" * 20)
    out = tmp_path / "o"
    r = train(BASE + ["--corpus", small, "--out", out])
    assert r.returncode == 2 and "give a larger corpus" in r.stderr, r.stderr
    assert not out.exists()
    r = train(["llama2"] + BASE[1:] + ["--corpus", corpus, "--out", out])
    assert r.returncode == 2 and "expected one of gpt2, neox, llama, mamba2" in r.stderr, r.stderr
    foreign = tmp_path / "foreign"
    foreign.mkdir()
    (foreign / "notes.txt").write_text("mine")
    r = train(BASE + ["--corpus", corpus, "--out", foreign])
    assert r.returncode == 2 and "is not a tokdyn train result" in r.stderr, r.stderr
    assert (foreign / "notes.txt").read_text() == "mine" and len(os.listdir(foreign)) == 1
    r = train(BASE + ["--corpus", tmp_path / "missing.txt", "--out", out])
    assert r.returncode == 2 and "does not exist" in r.stderr, r.stderr
    assert not out.exists()


def test_a_finished_run_is_replaced_only_with_overwrite(trained, corpus):
    r = train(BASE + ["--corpus", corpus, "--out", trained])
    assert r.returncode == 2 and "holds a finished training; give --overwrite" in r.stderr, r.stderr


def test_from_python(corpus, tmp_path):
    import tokdyn
    facts = tokdyn.train_tokenizer(corpus, tmp_path / "t.json", vocab_size=300)
    assert facts["vocab_size"] == 300 and len(facts["corpus_sha256"]) == 64
    with pytest.raises(ValueError, match="exists; expected a new file"):
        tokdyn.train_tokenizer(corpus, tmp_path / "t.json", vocab_size=300)
    m = tokdyn.train("llama", corpus, 4, tmp_path / "run", size="tiny", threads=1, batch=4, quiet=True,
                     tokenizer=tmp_path / "t.json")
    assert m["tokenizer"]["vocab_size"] == 300 and m["steps"] == 4 and not m["tokenizer"]["trained"]
    H = tokdyn.models.llama(checkpoint=str(tmp_path / "run")).hidden_states([5, 6, 7], depth=2)
    assert H.shape[0] == 3 and np.isfinite(H).all()
    with pytest.raises(ValueError, match="--steps"):
        tokdyn.train("llama", corpus, 0, tmp_path / "run2", size="tiny")
