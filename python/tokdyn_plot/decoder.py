"""Figures of the decoder families (GPT-2, GPT-NeoX / Pythia, Llama): transformer-clustering,
the Gram metrics of The Attention Within §VI (lambda_bar_1, participation ratio r) and the
distance to the attention models' consensus manifold against depth, positions on and off."""
import os

from .common import VERMILLION, by, footer, manifest, num, plt, read_csv, save, synthetic_note

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
    ax[2].legend(fontsize=8)
    ax[0].set_ylim(0, 1.02)
    ax[0].legend(fontsize=8)
    model = p.get("model", "?")
    src = "checkpoint " + os.path.basename(str(p.get("checkpoint", "")).rstrip("/")) if p.get("checkpoint") else \
        "freshly initialised, untrained (size %s, seed %s)" % (p.get("size", "?"), p.get("model_seed", "?"))
    ax[0].set_title("transformer-clustering: %s, %s\n%s tokens, mean ± std over %s runs, update %s" % (
        model, src, p.get("tokens", "?"), p.get("runs", "?"), p.get("update", "?")), fontsize=9)
    if notes.get("trained_by"):
        synthetic_note(fig, man)
    elif notes.get("synthetic_model"):
        footer(fig, "untrained: a freshly initialised %s (tokdyn make-checkpoint), not trained weights" % model, color=VERMILLION)
    footer(fig, "Lines: mean over runs; bands: ±1 standard deviation over runs.")
    save(fig, ax, d, "clustering.png", keys=_keys(p))



def token_labels(notes, run, count):
    """The labels of run `run`'s tokens: the tokenizer's pieces (each decoded alone) when the run
    started from a prompt, else the token ids."""
    prompts = notes.get("text", {}).get("prompts", [])
    if run < len(prompts):
        return [repr(x)[1:-1] if x.strip() else repr(x) for x in prompts[run]["labels"]]
    return ["id %d" % i for i in range(count)]


def plot_prompt_trajectories(d):
    import numpy as np
    man = manifest(d)
    p, notes = man.get("params", {}), man.get("notes", {})
    proj = np.load(os.path.join(d, "projection.npy"))  # [layer, run, token, 2]
    cos = np.load(os.path.join(d, "cosine.npy"))        # [layer, run, token, token]
    L, _, T, _ = proj.shape
    labels = token_labels(notes, 0, T)
    if "text" not in notes:
        ids = np.load(os.path.join(d, "token_ids.npy"))[0]
        labels = ["id %d" % i for i in ids]
    fig = plt.figure(figsize=(12.5, 5.4))
    gs = fig.add_gridspec(1, 3, width_ratios=[1.35, 1, 1])
    a0 = fig.add_subplot(gs[0])
    cmap = plt.get_cmap("viridis")
    for t in range(T):
        xy = proj[:, 0, t, :]
        c = cmap(t / max(1, T - 1))
        a0.plot(xy[:, 0], xy[:, 1], "-", color=c, lw=1.0, alpha=0.8)
        a0.plot(xy[0, 0], xy[0, 1], "o", color=c, ms=4, mfc="white")
        a0.plot(xy[-1, 0], xy[-1, 1], "s", color=c, ms=4)
        a0.annotate(labels[t], xy[0], fontsize=7, color=c, xytext=(3, 3), textcoords="offset points")
        a0.annotate(labels[t], xy[-1], fontsize=7, color=c, xytext=(3, -9), textcoords="offset points", fontweight="bold")
    ev = (notes.get("explained_variance") or [0, 0])[:2]  # [run, 2] flattened: run 0
    a0.set_xlabel("principal direction 1 (%.0f%% of the variance)" % (100 * ev[0]))
    a0.set_ylabel("principal direction 2 (%.0f%% of the variance)" % (100 * ev[1]))
    a0.set_title("each token over depth: ○ layer 0 → ■ layer %d" % (L - 1), fontsize=9)
    a0.plot([], [], "o", color="grey", mfc="white", label="layer 0 (embedded)")
    a0.plot([], [], "s", color="grey", label="layer %d" % (L - 1))
    a0.legend(fontsize=7, loc="best")
    for k, (layer, name) in enumerate(((0, "layer 0"), (L - 1, "layer %d" % (L - 1)))):
        a = fig.add_subplot(gs[k + 1])
        im = a.imshow(cos[layer, 0], vmin=-1, vmax=1, cmap="RdBu_r")
        a.set_xticks(range(T))
        a.set_yticks(range(T))
        fs = 7 if T <= 24 else 5
        a.set_xticklabels(labels, rotation=90, fontsize=fs)
        a.set_yticklabels(labels, fontsize=fs)
        a.set_title(r"$\langle \hat x_i, \hat x_j \rangle$ at %s" % name, fontsize=9)
        a.set_xlabel("token $j$")
        a.set_ylabel("token $i$")
        fig.colorbar(im, ax=a, fraction=0.046, pad=0.04, label="cosine")
    model = p.get("model", "?")
    src = "checkpoint " + os.path.basename(str(p.get("checkpoint", "")).rstrip("/")) if p.get("checkpoint") else \
        "fresh %s (size %s, seed %s)" % (model, p.get("size", "?"), p.get("model_seed", "?"))
    text = notes.get("text", {}).get("prompts", [{}])[0].get("text")
    fig.suptitle("prompt-trajectories: %s, %s, depth %s%s" % (
        model, src, p.get("depth", "?"), (", prompt %r" % text) if text else ", random token ids"), fontsize=10)
    if notes.get("trained_by"):
        synthetic_note(fig, man)
    elif notes.get("synthetic_model"):
        footer(fig, "untrained model: " + (notes.get("synthetic_model_note") or "freshly initialised weights"), color=VERMILLION)
    save(fig, [a0], d, "trajectories.png", keys=_keys(p))


def _keys(p):
    """The parameters of a decoder run that say what was computed."""
    keys = ["model"] + (["checkpoint"] if p.get("checkpoint") else ["size", "model_seed"])
    keys += [k for k in ("runs", "tokens", "depth", "seed", "update", "layers", "sublayers", "variants", "use_positions",
                         "prompt", "prompts", "token_ids") if p.get(k) not in (None, "", [])]
    if p.get("update") == "sphere":
        keys.append("tau")
    return keys


KINDS = {"transformer-clustering": plot_transformer_clustering, "prompt-trajectories": plot_prompt_trajectories}
