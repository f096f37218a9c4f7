#!/usr/bin/python3
"""Layering check (docs/design.md, "Layers"): every #include "tokdyn/..." of a header or source
points to its own layer or a lower one. The layers, lowest first:

  core        tokens, sphere, nn, rng, linalg, half, norms, error, array_sink, ... (the rest)
  models      dynamics.hpp, schedule.hpp, models/*
  observers   observers.hpp (they see states, never which model produced them)
  drivers     drivers.hpp (iterate the models, feed the observers)
  analysis    analysis/*
  io          io/* (readers build models' inputs and weights, writers take tables and arrays)
  experiments experiment.hpp, experiments/*, params, registry, run, figures, resources,
              output_folder, step_notes
  apps        apps/* (the CLI and the Python module: they may include anything; nothing includes them)

So models and observers never include io (they hand arrays to an ArraySink), io may include
models (a loader fills a model's weights), no analysis knows a preset.

Usage: layering.py SOURCE_DIR   (exit 1 listing every upward include)."""
import os
import re
import sys

ORDER = ["core", "models", "observers", "drivers", "analysis", "io", "experiments", "apps"]
TOP = {"outputs": "core", "dynamics": "models", "schedule": "models", "observers": "observers", "drivers": "drivers",
       "experiment": "experiments", "params": "experiments", "registry": "experiments", "run": "experiments",
       "figures": "experiments", "resources": "experiments", "output_folder": "experiments",
       "step_notes": "experiments"}
# Known exceptions, each with its reason; a new upward include fails the test.
ALLOWED = {
    ("src/models/mamba2_config.cpp", "io/json_strict.hpp"):
        "the config.json reader's messages use json_strict's byte escaping; fuzzed standalone with it",
}


def layer(rel):
    if rel.startswith("apps/"):
        return "apps"
    m = re.match(r"(?:include/tokdyn|src)/(.*)", rel)
    if not m:
        return None
    q = m.group(1)
    for sub in ("models", "analysis", "io", "experiments"):
        if q.startswith(sub + "/"):
            return sub
    return TOP.get(os.path.splitext(q)[0], "core")


def main():
    root = os.path.abspath(sys.argv[1] if len(sys.argv) > 1 else ".")
    bad, seen = [], 0
    for top in ("include/tokdyn", "src", "apps"):
        for dp, _, fs in os.walk(os.path.join(root, top)):
            for f in sorted(fs):
                if not f.endswith((".hpp", ".cpp", ".h")):
                    continue
                rel = os.path.relpath(os.path.join(dp, f), root)
                own = layer(rel)
                with open(os.path.join(dp, f), encoding="utf-8") as fh:
                    for i, line in enumerate(fh, 1):
                        m = re.match(r'\s*#\s*include\s+"tokdyn/([^"]+)"', line)
                        if not m:
                            continue
                        seen += 1
                        tgt = layer("include/tokdyn/" + m.group(1))
                        if ORDER.index(tgt) > ORDER.index(own) and (rel, m.group(1)) not in ALLOWED:
                            bad.append(f"{rel}:{i}: {own} includes {tgt} (tokdyn/{m.group(1)})")
    if seen < 100:
        print(f"layering: only {seen} includes found under {root}; wrong folder?")
        return 1
    for b in bad:
        print(b)
    print(f"layering: {seen} includes checked, {len(bad)} upward")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
