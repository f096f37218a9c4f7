"""Figure of the preset coupling-e1 (coupling paper §6 "Scaling laws, conditionally", experiment E1),
drawn from the written CSV files only: e1.png with three panels
  (a) held-out loss against training steps at the largest size trained, one colour per latent
      persistence q, the gate learned (solid) or off (dashed), mean over seeds; the Bayes risk
      R_full (dotted) and R_gateoff (dash-dotted: the Bayes risk of what the gate-off model sees, its
      floor) of each q;
  (b) the trained gate against q (log x): the injection norm |rho psi(y)| (the gate's use, filled
      markers) and |rho| (open markers), mean +- standard deviation over seeds, per size;
  (c) excess loss (held-out loss - R_full) against parameters (log-log), one colour per q, gate
      learned (filled, solid fit) and off (open, dashed fit), with the fitted exponents alpha.
Colours: the package's Okabe-Ito palette (colour-blind safe); every series also has its own marker or line style."""
import math
import os

from .common import MARKERS as Q_MARKERS, OKABE_ITO, manifest, num, plt, read_csv, save
SIZE_ORDER = ["s", "m", "l"]
SIZE_STYLE = {"s": ("#56B4E9", "o"), "m": ("#0072B2", "s"), "l": ("#000000", "^")}


def _mean_sd(values):
    v = [x for x in values if not math.isnan(x)]
    if not v:
        return float("nan"), float("nan")
    m = sum(v) / len(v)
    sd = math.sqrt(sum((x - m) ** 2 for x in v) / (len(v) - 1)) if len(v) > 1 else 0.0
    return m, sd


def _q_label(q):
    return "$q = %g$" % q + (" (i.i.d.)" if q == 0.5 else "")


def plot_e1(d):
    cfg = manifest(d).get("params", {})
    runs = read_csv(os.path.join(d, "runs.csv"))
    curves = read_csv(os.path.join(d, "curves.csv"))
    fits = read_csv(os.path.join(d, "fits.csv"))
    hmm = read_csv(os.path.join(d, "hmm.csv"))
    qs = [num(r["q"]) for r in hmm]
    colour = {q: OKABE_ITO[i % len(OKABE_ITO)] for i, q in enumerate(qs)}
    marker = {q: Q_MARKERS[i % len(Q_MARKERS)] for i, q in enumerate(qs)}
    ref = {num(r["q"]): (num(r["bayes_risk"]), num(r["gateoff_risk"])) for r in hmm}

    fig, ax = plt.subplots(1, 3, figsize=(18, 5.6))

    # (a) curves at the largest size.
    sizes = [s for s in SIZE_ORDER if any(r["size"] == s for r in runs)]
    big = sizes[-1] if sizes else "?"
    lo_y, hi_y = float("inf"), -float("inf")
    for q in qs:
        c = colour[q]
        for mode, ls in (("learn", "-"), ("off", "--")):
            rows = [r for r in curves if num(r["q"]) == q and r["size"] == big and r["rho"] == mode]
            if not rows:
                continue
            steps = sorted({int(r["step"]) for r in rows})
            mean = [_mean_sd([num(r["heldout_loss"]) for r in rows if int(r["step"]) == s])[0] for s in steps]
            ax[0].plot(steps, mean, color=c, ls=ls, marker=marker[q], ms=3.5, lw=1.4, label=_q_label(q) if mode == "learn" else None)
            hi_y = max(hi_y, mean[-1])
        bayes, local = ref[q]
        ax[0].axhline(bayes, color=c, ls=":", lw=1.1)
        ax[0].axhline(local, color=c, ls="-.", lw=0.8, alpha=0.6)
        lo_y, hi_y = min(lo_y, bayes), max(hi_y, local)
    if math.isfinite(lo_y):
        # Room above the last values for the legend; the first steps (from ln V) run off the top.
        span = hi_y - lo_y + 0.01
        ax[0].set_ylim(lo_y - 0.15 * span, hi_y + 0.55 * span)
    ax[0].set_xlabel("optimizer step")
    ax[0].set_ylabel("held-out loss (nats / token, tokens after block 1)")
    ax[0].set_title("(a) size %s: gate learned (solid) vs off (dashed); dotted: Bayes $R_{\\rm full}$,\n"
                    "dash-dotted: gate-off floor $R_{\\rm off}$ (mean over seeds; before the last step: first 256 sequences)"
                    % big, fontsize=9)
    ax[0].legend(fontsize=7, ncol=3, loc="upper right", framealpha=0.9)

    # (b) the trained gate against q.
    learn = [r for r in runs if r["rho"] == "learn"]
    for s in sizes:
        c, m = SIZE_STYLE[s]
        rows = [r for r in learn if r["size"] == s]
        xs = sorted({num(r["q"]) for r in rows})
        for col, filled, ls, lab in (("injection_norm", True, "-", "injection norm $|\\rho\\,\\psi(y)|$"), ("abs_rho", False, "--", "$|\\rho|$")):
            ms = [_mean_sd([num(r[col]) for r in rows if num(r["q"]) == q]) for q in xs]
            # log axis: the lower bar stops above 0 (at a tenth of the mean)
            ax[1].errorbar(xs, [a for a, _ in ms], yerr=[[min(b, 0.9 * a) for a, b in ms], [b for _, b in ms]], color=c, ls=ls, marker=m, ms=6, capsize=3,
                           mfc=c if filled else "white", mec=c, label="size %s: %s" % (s, lab))
    ax[1].axvline(0.5, color="0.5", ls=":", lw=1.0)
    ax[1].text(0.5, 0.97, " i.i.d. blocks", transform=ax[1].get_xaxis_transform(), fontsize=7, color="0.4", ha="right", va="top")
    ax[1].set_xscale("log")
    ax[1].set_yscale("log")
    ax[1].set_xlabel("latent persistence $q$ (redraw probability $2q$ per block; log scale)")
    ax[1].set_ylabel("trained gate (dimensionless; log scale)")
    ax[1].set_title("(b) the learned gate opens as $q$ falls below 1/2\n(mean $\\pm$ s.d. over seeds)", fontsize=9)
    if learn:
        ax[1].legend(fontsize=7)

    # (c) excess loss against parameters, with the fitted lines.
    fit = {(num(r["q"]), r["rho"]): r for r in fits}
    style_note = False
    for q in qs:
        c = colour[q]
        for mode, filled, ls in (("learn", True, "-"), ("off", False, "--")):
            rows = [r for r in runs if num(r["q"]) == q and r["rho"] == mode]
            pts = [(num(r["params"]), num(r["excess"])) for r in rows if num(r["excess"]) > 0]
            if not pts:
                continue
            f = fit.get((q, mode), {})
            alpha, lo, hi = num(f.get("alpha", "")), num(f.get("alpha_lo", "")), num(f.get("alpha_hi", ""))
            if mode == "learn":
                lab = "%s: $\\alpha = %.2f$" % (_q_label(q), alpha) if not math.isnan(alpha) else _q_label(q)
                if not math.isnan(lo):
                    lab += " [%.2f, %.2f]" % (lo, hi)
            else:
                lab = None
            ax[2].plot([p for p, _ in pts], [e for _, e in pts], ls="none", marker=marker[q], ms=6, color=c,
                       mfc=c if filled else "white", mec=c, label=lab)
            if not math.isnan(alpha):
                c0 = num(f["intercept"])
                xs = [min(p for p, _ in pts), max(p for p, _ in pts)]
                ax[2].plot(xs, [math.exp(c0 - alpha * math.log(x)) for x in xs], color=c, ls=ls, lw=1.3)
            style_note = True
    ax[2].set_xscale("log")
    ax[2].set_yscale("log")
    counts = sorted({num(r["params"]) for r in runs if num(r["excess"]) > 0})
    if 0 < len(counts) <= 6:  # the model sizes themselves as ticks (not 10^k minor labels that crowd)
        ax[2].set_xticks(counts, ["{:,}".format(int(c)) if c < 1e7 else "%.3g" % c for c in counts])
        ax[2].minorticks_off()
        ax[2].set_xlim(counts[0] / 1.6, counts[-1] * 1.6)
    pos = [num(r["excess"]) for r in runs if num(r["excess"]) > 0]
    if pos:  # room below the points for the legend
        ax[2].set_ylim(min(pos) / 4.0, max(pos) * 1.5)
    ax[2].set_xlabel("trained parameters (count; log scale)")
    ax[2].set_ylabel("excess loss: held-out $-\\,R_{\\rm full}$ (nats / token; log scale)")
    ax[2].set_title("(c) $\\log(\\mathrm{excess}) = c - \\alpha \\log(\\mathrm{params})$, every seed a point\n"
                    "filled, solid: gate learned ($\\alpha$, 95 % CI); open, dashed: gate off", fontsize=9)
    if style_note:
        ax[2].legend(fontsize=7, title="gate learned", title_fontsize=7, loc="lower left", ncol=2, framealpha=0.9)
    fig.suptitle("E1, conditional scaling law: block HMM with S = %s states, V = %s, P = %s, %s blocks; %s steps"
                 % (cfg.get("states", "?"), cfg.get("vocab", "?"), cfg.get("block", "?"), cfg.get("blocks", "?"), cfg.get("steps", "?")),
                 fontsize=10)
    save(fig, ax, d, "e1.png")


KINDS = {"coupling-e1": plot_e1}
