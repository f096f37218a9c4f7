#!/usr/bin/python3
"""Side by side, the summaries and verdicts of OUT/<preset>-trained and OUT/<preset>-init (written by
scripts/trained_vs_init.sh), as Markdown. Usage: compare_runs.py OUT PRESET..."""
import csv
import json
import os
import sys


def rows(path):
    if not os.path.exists(path):
        return []
    with open(path, newline="") as f:
        return list(csv.DictReader(f))


def main():
    out, presets = sys.argv[1], sys.argv[2:]
    tb = json.load(open(os.path.join(out, presets[0] + "-trained", "manifest.json")))["notes"].get("trained_by", {})
    print(f"# Trained against initialisation: {tb.get('model')} {tb.get('size')}, {tb.get('parameters', 0) / 1e6:.2f}M "
          f"parameters, {tb.get('tokens_seen', 0) / 1e6:.2f}M tokens, held-out loss {tb.get('heldout_loss', float('nan')):.3f} "
          f"nats/token (unigram entropy {tb.get('unigram_entropy', float('nan')):.3f})\n")
    for p in presets:
        t, i = os.path.join(out, p + "-trained"), os.path.join(out, p + "-init")
        print(f"## {p}\n\n| quantity | trained | initialisation | paper |\n| --- | ---: | ---: | --- |")
        init = {r["quantity"]: r["value"] for r in rows(os.path.join(i, "summary.csv"))}
        for r in rows(os.path.join(t, "summary.csv")):
            print(f"| {r['quantity']} | {r['value']} | {init.get(r['quantity'], '')} | {r.get('paper', '')} |")
        ct, ci = rows(os.path.join(t, "checks.csv")), {r["check"]: r for r in rows(os.path.join(i, "checks.csv"))}
        if ct:
            print("\n| check | trained: value, verdict | initialisation: value, verdict | expected |\n| --- | --- | --- | --- |")
            for r in ct:
                o = ci.get(r["check"], {})
                print(f"| {r['check']} | {r['value']} {r['pass']} | {o.get('value', '')} {o.get('pass', '')} | "
                      f"{r['expected']} |")
        print()


if __name__ == "__main__":
    main()
