"""coupling-all: every coupling preset's own figure (drawn in its folder) and one summary figure of
all checks (coupling_all.png): per preset the number of checks that pass, fail and do not apply, per check family
(the R-number / flag) the same, and per preset the checks by reference kind (what each value is
compared against: paper, closed form, independent implementation, consistency, bound, qualitative).
The presets' figures are drawn through the registry: `draw(kind, dir)` is handed in by the package
(this module declares it needs it with `draws_kinds`)."""
import os
import re

from .common import GREEN, GREY, VERMILLION, draws_kinds, plt, read_csv, save


@draws_kinds
def plot_coupling_all(d, draw):
    presets = read_csv(os.path.join(d, "presets.csv"))
    for r in presets:
        if r["figure_kind"]:
            draw(r["figure_kind"], os.path.join(d, r["preset"]))
    rows = read_csv(os.path.join(d, "checks.csv"))

    fig, ax = plt.subplots(1, 3, figsize=(20, max(4.5, 0.32 * max(len(presets), 12))))
    names = [r["preset"] for r in presets]
    # A check that does not apply with the preset's defaults (pass = n/a) is neither passed nor failed.
    na = {n: 0 for n in names}
    for r in rows:
        if r["preset"] in na and r["pass"] == "n/a":
            na[r["preset"]] += 1
    bad = [int(r["failed"]) for r in presets]
    nas = [na[n] for n in names]
    ok = [int(r["checks"]) - b - a for r, b, a in zip(presets, bad, nas)]
    y = range(len(names))
    ax[0].barh(list(y), ok, color=GREEN, label="pass" if sum(ok) else None)
    ax[0].barh(list(y), bad, left=ok, color=VERMILLION, hatch="xx", edgecolor="white", label="fail" if sum(bad) else None)
    ax[0].barh(list(y), nas, left=[a + b for a, b in zip(ok, bad)], color=GREY, hatch="..", edgecolor="white",
               label="not applicable" if sum(nas) else None)
    ax[0].set_yticks(list(y))
    ax[0].set_yticklabels(names, fontsize=8)
    ax[0].invert_yaxis()
    ax[0].set_xlabel("checks (count)")
    ax[0].set_ylabel("preset")
    title = "checks per preset: %d of %d pass" % (sum(ok), sum(ok) + sum(bad) + sum(nas))
    if sum(nas):
        title += ", %d not applicable" % sum(nas)
    ax[0].set_title(title)
    ax[0].set_xlim(0, 1.05 * max([a + b + c for a, b, c in zip(ok, bad, nas)] + [1]))
    ax[0].legend(loc="lower right")

    fam = {}
    for r in rows:
        m = re.match(r"([A-Z]+[0-9]+)", r["check"])
        key = m.group(1) if m else r["check"].split()[0]
        p, f, a = fam.get(key, (0, 0, 0))
        fam[key] = (p + (r["pass"] == "true"), f + (r["pass"] == "false"), a + (r["pass"] == "n/a"))

    def order(k):
        m = re.match(r"([A-Z]+)([0-9]+)", k)
        return (m.group(1), int(m.group(2))) if m else (k, 0)

    keys = sorted(fam, key=order)
    yk = range(len(keys))
    ax[1].barh(list(yk), [fam[k][0] for k in keys], color=GREEN)
    ax[1].barh(list(yk), [fam[k][1] for k in keys], left=[fam[k][0] for k in keys], color=VERMILLION, hatch="xx",
               edgecolor="white")
    ax[1].barh(list(yk), [fam[k][2] for k in keys], left=[fam[k][0] + fam[k][1] for k in keys], color=GREY, hatch="..",
               edgecolor="white")  # colours as in the left panel's legend
    ax[1].set_yticks(list(yk))
    ax[1].set_yticklabels(keys, fontsize=8)
    ax[1].invert_yaxis()
    ax[1].set_xlim(0, 1.05 * max([sum(v) for v in fam.values()] + [1]))
    ax[1].set_xlabel("checks (count)")
    ax[1].set_ylabel("statement (check family)")
    ax[1].set_title("checks per statement (R: paper's results, F: flags)")

    kinds = ["paper", "closed_form", "independent", "consistency", "bound", "qualitative"]
    # Okabe-Ito colours and hatches: the six kinds apart in colour and in greyscale
    colors = {"paper": "#009E73", "closed_form": "#56B4E9", "independent": "#0072B2", "consistency": "#E69F00",
              "bound": "#CC79A7", "qualitative": "#BBBBBB"}
    hatches = {"paper": "", "closed_form": "//", "independent": "..", "consistency": "\\\\", "bound": "xx", "qualitative": "--"}
    per = {n: {k: 0 for k in kinds} for n in names}
    for r in rows:
        m = re.search(r"\[([^\]]+)\]$", r["check"])
        if m and m.group(1) in per and r.get("reference_kind") in colors:
            per[m.group(1)][r["reference_kind"]] += 1
    left = [0] * len(names)
    for k in kinds:
        v = [per[n][k] for n in names]
        ax[2].barh(list(y), v, left=left, color=colors[k], hatch=hatches[k], edgecolor="white",
                   label="%s (%d)" % (k.replace("_", " "), sum(v)) if sum(v) else None)
        left = [a + b for a, b in zip(left, v)]
    ax[2].set_yticks(list(y))
    ax[2].set_yticklabels(names, fontsize=8)
    ax[2].invert_yaxis()
    ax[2].set_xlim(0, 1.05 * max(left + [1]))
    ax[2].set_xlabel("checks (count)")
    ax[2].set_ylabel("preset")
    indep = sum(per[n][k] for n in names for k in ("paper", "closed_form", "independent"))
    ax[2].set_title("reference kinds: %d of %d independent of tokdyn" % (indep, sum(left)))
    ax[2].legend(loc="lower right", fontsize=8)
    save(fig, ax, d, "coupling_all.png")


KINDS = {"coupling-all": plot_coupling_all}
