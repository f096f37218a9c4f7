"""Figures of the decoder families (GPT-2, GPT-NeoX / Pythia, Llama): transformer-clustering,
the Gram metrics of The Attention Within §VI (lambda_bar_1, participation ratio r) and the
distance to the attention models' consensus manifold against depth, positions on and off."""
import os

from .common import by, manifest, num, plt, read_csv, save

_STYLE = {"positions_on": dict(color="#0072B2", ls="-", marker="o", label="positions on (as published)"),
          "positions_off": dict(color="#D55E00", ls="--", marker="s", label="positions off")}


def plot_transformer_clustering(d):
    man = manifest(d)
    p, notes = man.get("params", {}), man.get("notes", {})
    rows = by(read_csv(os.path.join(d, "metrics.csv")), "variant")
    fig, ax = plt.subplots(3, 1, figsize=(6.4, 7.6), sharex=True)
    for v, rs in rows.items():
        st = dict(_STYLE.get(v, dict(label=v)))
        k = [num(r["layer"]) for r in rs]
        st["markevery"] = max(1, len(k) // 12)
        st["markersize"] = 4
        for a, m, s in ((ax[0], "lambda1_mean", "lambda1_std"), (ax[1], "pr_mean", "pr_std"),
                        (ax[2], "consensus_dist_mean", None)):
            mu = [num(r[m]) for r in rs]
            a.plot(k, mu, **st)
            if s:
                sd = [num(r[s]) for r in rs]
                a.fill_between(k, [x - y for x, y in zip(mu, sd)], [x + y for x, y in zip(mu, sd)],
                               color=st.get("color"), alpha=0.15, lw=0)
    ax[0].set_ylabel(r"$\bar\lambda_1$ (1: consensus)")
    ax[1].set_ylabel(r"participation ratio $r$")
    ax[2].set_ylabel(r"distance to $\{(x,\dots,x)\}$")
    ax[2].set_xlabel(r"depth step $l$ (layers cycled)")
    ax[0].set_ylim(0, 1.02)
    ax[0].legend(fontsize=8)
    model = p.get("model", "?")
    src = "checkpoint " + os.path.basename(str(p.get("checkpoint", "")).rstrip("/")) if p.get("checkpoint") else \
        "freshly initialised, untrained (size %s, seed %s)" % (p.get("size", "?"), p.get("model_seed", "?"))
    ax[0].set_title("transformer-clustering: %s, %s\n%s tokens, mean ± std over %s runs, update %s" % (
        model, src, p.get("tokens", "?"), p.get("runs", "?"), p.get("update", "?")), fontsize=9)
    if notes.get("synthetic_model"):
        fig.text(0.5, 0.003, "untrained: a freshly initialised %s (tokdyn make-checkpoint), not trained weights" % model,
                 ha="center", va="bottom", fontsize=7, color="#D55E00")
    save(fig, ax, d, "clustering.png")



KINDS = {"transformer-clustering": plot_transformer_clustering}
