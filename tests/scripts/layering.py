#!/usr/bin/python3
"""Layering check (docs/design.md, "Layers"): every #include "tokdyn/..." of a header or source
points to its own layer or a lower one. A file's layer is its folder (include/tokdyn/ mirrors
src/), lowest first:

  core        sphere, tokens, random numbers, linear algebra, norms, threads, errors, interrupts
  engine      dynamics (LayerMap, VectorField), schedules, observers, drivers
  models      models/<family>/: the map and its JVP
  analysis    analysis/*
  io          io/* (readers build models' inputs and weights, writers take tables and arrays),
              and in a family folder its readers: checkpoint*, weights_file*, config_json*
  runtime     runtime/* (parameters, runs, output folders, inputs written, the model registry,
              the figure subprocess, resources), and in a family folder its registry entry:
              descriptor*, setup*
  experiments experiments/* (the presets)
  apps        apps/* (the CLI and the Python module: they may include anything; nothing includes them)

So models never include io (they hand arrays to an ArraySink), io may include models (a loader
fills a model's weights), no analysis knows a preset, and a model family's folder holds all of
the family (map, JVP, reader, descriptor) with each file at its own layer.

Usage: layering.py SOURCE_DIR   (exit 1 listing every upward include or file outside a layer)."""
import os
import re
import sys

ORDER = ["core", "engine", "models", "analysis", "io", "runtime", "experiments", "apps"]
FOLDERS = {"core", "engine", "analysis", "io", "runtime", "experiments"}
# A model family's files that belong to a higher layer, by the start of their name.
FAMILY_FILES = [("checkpoint", "io"), ("weights_file", "io"), ("config_json", "io"),
                ("descriptor", "runtime"), ("setup", "runtime")]
# Known exceptions, each with its reason; a new upward include fails the test.
ALLOWED = {
    ("src/models/mamba2/config.cpp", "io/json_strict.hpp"):
        "the config.json reader's messages use json_strict's byte escaping; fuzzed standalone with it",
}


def layer(rel):
    """The layer of a file from its path alone; None for a file outside every layer folder."""
    if rel.startswith("apps/"):
        return "apps"
    m = re.match(r"(?:include/tokdyn|src)/(.*)", rel)
    if not m:
        return None
    parts = m.group(1).split("/")
    if len(parts) >= 2 and parts[0] in FOLDERS:
        return parts[0]
    if len(parts) >= 3 and parts[0] == "models":
        for start, lay in FAMILY_FILES:
            if parts[-1].startswith(start):
                return lay
        return "models"
    return None


def main():
    root = os.path.abspath(sys.argv[1] if len(sys.argv) > 1 else ".")
    bad, seen, files = [], 0, 0
    for top in ("include/tokdyn", "src", "apps"):
        for dp, _, fs in os.walk(os.path.join(root, top)):
            for f in sorted(fs):
                if not f.endswith((".hpp", ".cpp", ".h")):
                    continue
                rel = os.path.relpath(os.path.join(dp, f), root)
                own = layer(rel)
                if own is None:
                    if rel != "include/tokdyn/build_info.hpp":
                        bad.append(f"{rel}: outside every layer folder ({', '.join(ORDER[:-1])}, models/<family>/)")
                    continue
                files += 1
                with open(os.path.join(dp, f), encoding="utf-8") as fh:
                    for i, line in enumerate(fh, 1):
                        m = re.match(r'\s*#\s*include\s+"tokdyn/([^"]+)"', line)
                        if not m or m.group(1) == "build_info.hpp":
                            continue
                        seen += 1
                        tgt = layer("include/tokdyn/" + m.group(1))
                        if tgt is None:
                            bad.append(f"{rel}:{i}: includes tokdyn/{m.group(1)}, outside every layer folder")
                        elif ORDER.index(tgt) > ORDER.index(own) and (rel, m.group(1)) not in ALLOWED:
                            bad.append(f"{rel}:{i}: {own} includes {tgt} (tokdyn/{m.group(1)})")
    if seen < 100 or files < 100:
        print(f"layering: only {seen} includes in {files} files found under {root}; wrong folder?")
        return 1
    for b in bad:
        print(b)
    print(f"layering: {seen} includes in {files} files checked, {len(bad)} problems")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
