"""The figures of ``edge report`` and ``edge profile`` (matplotlib, Agg; imported only to draw).

One look everywhere: white background, light grid, the Okabe-Ito colour-blind-safe palette,
units in every axis label, 110 dpi PNGs of at most ~1400 px width.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

# Okabe & Ito (2008), colour-blind safe
PALETTE = ("#0072B2", "#E69F00", "#009E73", "#D55E00", "#CC79A7", "#56B4E9", "#F0E442", "#000000")
GREY = "#8C8C8C"
DPI = 110


def _plt():
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    plt.rcParams.update({
        "figure.facecolor": "white", "axes.facecolor": "white", "axes.grid": True, "grid.alpha": 0.3,
        "grid.linewidth": 0.6, "axes.spines.top": False, "axes.spines.right": False, "font.size": 9,
        "axes.titlesize": 10, "axes.labelsize": 9, "legend.fontsize": 8, "legend.frameon": False,
        "xtick.labelsize": 8, "ytick.labelsize": 8,
    })
    return plt


def _plain_log(axis: Any) -> None:
    """Plain numbers (0.1, 2, 30) instead of powers of ten on a log axis, minor ticks included
    when the axis spans less than two decades."""
    from matplotlib.ticker import FuncFormatter, LogLocator, NullFormatter

    fmt = FuncFormatter(lambda v, _pos: f"{v:g}")
    axis.set_major_formatter(fmt)
    lo, hi = axis.get_view_interval()
    if lo > 0 and hi / lo < 100:
        axis.set_minor_locator(LogLocator(subs=(2, 3, 5)))
        axis.set_minor_formatter(fmt)
    else:
        axis.set_minor_formatter(NullFormatter())


def _save(fig: Any, path: Path) -> Path:
    fig.savefig(path, dpi=DPI, bbox_inches="tight")
    import matplotlib.pyplot as plt

    plt.close(fig)
    return path


# ------------------------------------------------------------------------------------ edge report
GRIP_CLOSED = 0.15  # measured gripper (0 open .. 1 closed) above this: the fingers hold something or are shut
PHASE_COLOURS = {"approach": "#dbe9f6", "holding": "#fde2c4", "released": "#e2f0d9"}


def gripper_phases(t: Sequence[float], gripper: Sequence[float | None],
                   closed: float = GRIP_CLOSED) -> list[tuple[float, float, str]]:
    """Task phases from what the robot itself measures, so they exist on a real arm too:
    ``approach`` until the gripper first closes, ``holding`` while it is closed, ``released``
    after it opens again (a re-grasp starts a new ``holding``). Returns (t_start, t_end, phase)."""
    out: list[tuple[float, float, str]] = []
    state, start = "approach", t[0] if len(t) else 0.0
    for x, g in zip(t, gripper):
        now = "holding" if (g is not None and g > closed) else ("approach" if state == "approach" else "released")
        if now != state:
            out.append((start, x, state))
            state, start = now, x
    if len(t):
        out.append((start, t[-1], state))
    return [seg for seg in out if seg[1] > seg[0]]


def timeline_title(ep: Mapping[str, Any]) -> str:
    """An episode timeline's title: its index, seed and how it ended (or that it did not)."""
    title = f"episode {ep['ep']}"
    if ep.get("seed") is not None:
        title += f" (seed {ep['seed']})"
    if ep.get("success") is not None:
        title += " — success" if ep["success"] else " — failure"
    elif ep.get("interrupted"):
        title += " — interrupted (no episode record)"
    return title


def episode_timeline(ep: Mapping[str, Any], path: Path) -> Path:
    """Six stacked panels over episode time: K and C per query; inference latency; queue depth with
    starved ticks; safety interventions by kind; TCP height; gripper — with the task phases shaded
    (:func:`gripper_phases`). ``ep`` holds lists built by :func:`edge.profiler.report.episode_series`."""
    plt = _plt()
    fig, axes = plt.subplots(6, 1, figsize=(10, 10.5), sharex=True,
                             gridspec_kw={"height_ratios": [1.1, 1, 1, 0.9, 1, 0.7]})
    ax_kc, ax_lat, ax_q, ax_iv, ax_z, ax_g = axes
    tq = ep["query_t_s"]
    if tq:
        ax_kc.step(tq, ep["K"], where="post", color=PALETTE[0], lw=1.4, label="K (denoising steps)")
        ax_kc.step(tq, ep["C"], where="post", color=PALETTE[1], lw=1.4, label="C (actions to execute)")
        ax_kc.plot(tq, ep["K"], "o", color=PALETTE[0], ms=2.5)
        ax_kc.plot(tq, ep["C"], "o", color=PALETTE[1], ms=2.5)
        top = max(max(ep["K"]), max(ep["C"]))
        ax_kc.set_ylim(0, top * 1.4 + 0.5)
    from matplotlib.ticker import MaxNLocator

    ax_kc.yaxis.set_major_locator(MaxNLocator(integer=True))
    ax_kc.set_ylabel("steps / actions")
    ax_kc.legend(loc="upper right", ncol=2)
    ax_kc.set_title(timeline_title(ep), loc="left")

    if tq:
        ax_lat.plot(tq, ep["latency_ms"], "o-", color=PALETTE[2], ms=2.5, lw=1, label="latency (obs → ready)")
        ax_lat.plot(tq, ep["compute_ms"], "s", color=PALETTE[4], ms=2.5, label="host compute")
        top = max(max(ep["latency_ms"]), max(ep["compute_ms"]), 1e-3)
        ax_lat.set_ylim(0, top * 1.4)  # room for the legend above the points
    ax_lat.set_ylabel("inference (ms)")
    ax_lat.legend(loc="upper right", ncol=2)

    t = ep["t_s"]
    ax_q.step(t, ep["queue_depth"], where="post", color=PALETTE[0], lw=1)
    starved = [x for x, s in zip(t, ep["starved"]) if s]
    if starved:
        ax_q.plot(starved, [0] * len(starved), "|", color=PALETTE[3], ms=10, mew=1.2,
                  label=f"starved tick ({len(starved)})")
        ax_q.legend(loc="upper right")
    ax_q.set_ylabel("queue depth\n(actions)")
    ax_q.set_ylim(bottom=-0.8)

    kinds = ep["intervention_kinds"]
    for row, kind in enumerate(kinds):
        xs = ep["interventions"][kind]
        ax_iv.plot(xs, [row] * len(xs), "|", ms=9, mew=1.2, color=PALETTE[(row + 3) % len(PALETTE)])
    ax_iv.set_yticks(range(len(kinds)), [f"{k} ({len(ep['interventions'][k])})" for k in kinds] or [])
    ax_iv.set_ylim(-0.7, max(len(kinds), 1) - 0.3)
    if not kinds:
        ax_iv.text(0.5, 0.5, "no safety interventions", transform=ax_iv.transAxes, ha="center",
                   va="center", color=GREY)
        ax_iv.set_yticks([])
    ax_iv.set_ylabel("safety")
    ax_iv.grid(axis="y", alpha=0)

    if any(z is not None for z in ep["tcp_z_m"]):
        ax_z.plot(t, [None if z is None else 100.0 * z for z in ep["tcp_z_m"]], color=PALETTE[5], lw=1.3)
    else:
        ax_z.text(0.5, 0.5, "no TCP position in the tick records", transform=ax_z.transAxes,
                  ha="center", va="center", color=GREY)
    ax_z.set_ylabel("TCP height (cm)")
    ax_g.plot(t, ep["gripper"], color=PALETTE[7], lw=1.2)
    ax_g.set_ylabel("gripper\n(0 open, 1 closed)")
    ax_g.set_ylim(-0.1, 1.1)
    ax_g.set_xlabel("episode time (s)")
    seen = set()
    for t0, t1, phase in gripper_phases(t, ep["gripper"]):
        for ax in axes:
            ax.axvspan(t0, t1, color=PHASE_COLOURS[phase], alpha=0.55, lw=0, zorder=0)
        if phase not in seen:  # one legend entry per phase, on the gripper panel
            seen.add(phase)
            ax_g.fill_between([], [], color=PHASE_COLOURS[phase], label=phase)
    if seen:
        ax_g.legend(loc="upper left", ncol=3, title="phase (from the measured gripper)", title_fontsize=7)
    for ax in axes:
        ax.label_outer()
    fig.align_ylabels(axes)
    fig.tight_layout(h_pad=0.6)
    return _save(fig, path)


def latency_histogram(latency_ms: Sequence[float], compute_ms: Sequence[float], path: Path,
                      title: str = "inference latency per query") -> Path:
    plt = _plt()
    import numpy as np

    fig, ax = plt.subplots(figsize=(7, 3.4))
    lat = np.asarray(latency_ms, float)
    comp = np.asarray(compute_ms, float)
    hi = float(max(lat.max() if lat.size else 1.0, comp.max() if comp.size else 1.0))
    bins = np.linspace(0, hi * 1.05 + 1e-9, 40)
    series = [(comp, PALETTE[4], "host compute"), (lat, PALETTE[2], "latency charged")]
    for xs, colour, name in series:
        if xs.size:
            ax.hist(xs, bins=bins, color=colour, alpha=0.6, label=f"{name} (n={xs.size})")
    top = ax.get_ylim()[1]
    for row, (xs, colour, name) in enumerate(series):
        if not xs.size:
            continue
        p50, p99 = (float(np.percentile(xs, q)) for q in (50, 99))
        ax.axvline(p50, color=colour, ls="--", lw=1.1)
        ax.axvline(p99, color=colour, ls=":", lw=1.1)
        text = f" {name}: all {p50:.1f} ms" if p99 - p50 < 1e-9 else f" {name}: p50 {p50:.1f}, p99 {p99:.1f} ms"
        ax.text(p50, top * (0.97 - 0.09 * row), text, color=colour, va="top", fontsize=8)
    ax.set_xlabel("ms")
    ax.set_ylabel("queries")
    ax.set_title(title, loc="left")
    ax.legend(loc="center right")
    fig.tight_layout()
    return _save(fig, path)


# ------------------------------------------------------------------------------------ edge profile
def success_vs_nfe(arms: Sequence[Mapping[str, Any]], grid: Mapping[str, Any] | None, path: Path) -> Path:
    """Arms (success with 95 % CI against NFE per executed action) over the fixed K x C grid."""
    plt = _plt()
    fig, ax = plt.subplots(figsize=(7.5, 4.4))
    if grid:
        cells = list(grid.get("cells", {}).values())
        cs = sorted({c["C"] for c in cells})
        markers = "v^<>sdph"
        for i, c in enumerate(cs):
            pts = sorted((x["nfe_per_action"], x["success_rate"]) for x in cells
                         if x["C"] == c and x.get("nfe_per_action"))
            if pts:
                shade = str(0.75 - 0.5 * i / max(1, len(cs) - 1))  # light (small C) .. dark (large C)
                ax.plot(*zip(*pts), "-", color=shade, lw=1, marker=markers[i % len(markers)], ms=3.5,
                        label=f"grid C={c}")
        # the Pareto front of the grid: best success at or below each NFE
        pts = sorted((x["nfe_per_action"], x["success_rate"]) for x in cells if x.get("nfe_per_action"))
        front, best = [], -1.0
        for x, y in pts:
            if y > best:
                front.append((x, y))
                best = y
        if front:
            ax.step(*zip(*front), where="post", color=GREY, ls="--", lw=1.2,
                    label=f"grid Pareto front ({grid.get('episodes', '?')} ep/cell)")
    for i, a in enumerate(arms):
        x, y = a.get("nfe_per_action"), a["success_rate"]
        if x is None:
            continue
        lo, hi = a["ci95"]
        ax.errorbar([x], [y], yerr=[[y - lo], [hi - y]], fmt="o", ms=7, capsize=4, color=PALETTE[i % 8],
                    label=f"{a['label']}: {a['successes']}/{a['episodes']}")
    ax.set_xscale("log")
    _plain_log(ax.xaxis)
    ax.set_xlabel("NFE per executed action (log)")
    ax.set_ylabel("success rate (95 % Wilson CI)")
    ax.set_ylim(-0.02, 1.02)
    ax.set_title("success vs compute", loc="left")
    title = None
    if grid:
        ks = sorted({c["K"] for c in grid.get("cells", {}).values()})
        title = f"fixed K x C grid, K = {', '.join(map(str, ks))}\nalong each line"
    ax.legend(loc="center left", bbox_to_anchor=(1.01, 0.5), fontsize=7.5, title=title, title_fontsize=7.5)
    fig.tight_layout()
    return _save(fig, path)


def kc_histograms(arms: Sequence[Mapping[str, Any]], path: Path) -> Path:
    """Per arm: how often each K and each C was planned (per query)."""
    plt = _plt()
    import numpy as np

    n = max(1, len(arms))
    fig, axes = plt.subplots(n, 2, figsize=(8, 1.9 * n + 0.6), squeeze=False)
    kmax = max([max(a["K_values"] or [1]) for a in arms] + [1])
    cmax = max([max(a["C_values"] or [1]) for a in arms] + [1])
    for row, a in enumerate(arms):
        for col, (key, top, colour, what) in enumerate((("K_values", kmax, PALETTE[0], "K (denoising steps)"),
                                                        ("C_values", cmax, PALETTE[1], "C (actions executed)"))):
            ax = axes[row][col]
            vals = np.asarray(a[key], int)
            counts = np.bincount(vals, minlength=top + 1)[1:] if vals.size else np.zeros(top)
            ax.bar(np.arange(1, top + 1), counts, color=colour, width=0.8)
            ax.set_xlim(0.3, top + 0.7)
            ax.set_xticks(range(1, top + 1, max(1, top // 10)))
            ax.set_ylabel(f"{a['label']}\nqueries", fontsize=8)
            if row == n - 1:
                ax.set_xlabel(what)
    fig.suptitle("planned K and C per query", x=0.01, ha="left", fontsize=10)
    fig.tight_layout()
    return _save(fig, path)


def latency_by_backend(series: Mapping[str, Sequence[float]], path: Path,
                       ylabel: str = "host compute per query (ms)") -> Path:
    plt = _plt()
    fig, ax = plt.subplots(figsize=(max(4.5, 1.6 * len(series) + 2), 3.6))
    labels = list(series)
    data = [list(series[k]) or [0.0] for k in labels]
    bp = ax.boxplot(data, showfliers=True, patch_artist=True, widths=0.55,
                    flierprops={"markersize": 2.5, "alpha": 0.5}, medianprops={"color": "black"})
    for i, box in enumerate(bp["boxes"]):
        box.set_facecolor(PALETTE[i % 8])
        box.set_alpha(0.55)
    ax.set_xticks(range(1, len(labels) + 1), labels, rotation=15 if len(labels) > 3 else 0)
    # log: the first queries of a run (session warm-up, scene locator) sit 10-100x above the rest
    ax.set_yscale("log")
    _plain_log(ax.yaxis)
    ax.set_ylabel(ylabel + " (log)")
    for i, xs in enumerate(data, start=1):
        med = sorted(xs)[len(xs) // 2]
        ax.text(i + 0.3, med, f"p50 {med:.2f}", va="center", fontsize=7.5)
    ax.set_title("inference time per query, by arm and backend", loc="left")
    fig.tight_layout()
    return _save(fig, path)


def cost_breakdown(rows: Sequence[Mapping[str, Any]], path: Path) -> Path:
    """Stacked ms per executed action (encoder / denoising steps or search passes / scene locator or
    first frame / search tree / scheduler + other), per arm on the host (measured) and per projected
    device."""
    plt = _plt()
    import numpy as np

    labels = [r["label"] for r in rows]
    parts = (("encoder_ms", "encoder", PALETTE[0]), ("steps_ms", "denoising steps / search passes", PALETTE[1]),
             ("locator_ms", "scene locator / first frame", PALETTE[5]),
             ("tree_ms", "search tree (host CPU, measured)", PALETTE[3]),
             ("other_ms", "scheduler + other", PALETTE[4]))
    fig, ax = plt.subplots(figsize=(8, 0.42 * len(rows) + 1.6))
    y = np.arange(len(rows))[::-1]
    left = np.zeros(len(rows))
    for key, name, colour in parts:
        vals = np.asarray([r.get(key) or 0.0 for r in rows])
        if not vals.any():
            continue
        ax.barh(y, vals, left=left, color=colour, label=name, height=0.65)
        left += vals
    for yi, total in zip(y, left):
        ax.text(total, yi, f" {total:.2f}", va="center", fontsize=7.5)
    ax.set_yticks(y, labels, fontsize=7.5)
    ax.set_xlabel("inference ms per executed action")
    ax.set_xlim(0, left.max() * 1.15 + 1e-9)
    ax.set_title("where the inference time goes (host: measured; devices: projected)", loc="left")
    ax.legend(loc="lower right")
    ax.grid(axis="y", alpha=0)
    fig.tight_layout()
    return _save(fig, path)


def device_projection(arms: Sequence[Mapping[str, Any]], devices: Sequence[str], path: Path) -> Path:
    """Projected ms and mJ per executed action, per device, grouped by arm (log scale)."""
    plt = _plt()
    import numpy as np

    fig, (a1, a2) = plt.subplots(1, 2, figsize=(10, 3.8))
    width = 0.8 / max(1, len(arms))
    x = np.arange(len(devices))
    for i, arm in enumerate(arms):
        proj = arm.get("projected", {})
        ms = [proj.get(d, {}).get("ms_per_action") or 0.0 for d in devices]
        mj = [proj.get(d, {}).get("mj_per_action") or 0.0 for d in devices]
        off = (i - (len(arms) - 1) / 2) * width
        a1.bar(x + off, ms, width, color=PALETTE[i % 8], label=arm["label"])
        a2.bar(x + off, mj, width, color=PALETTE[i % 8], label=arm["label"])
    for ax, what in ((a1, "ms per executed action"), (a2, "mJ per executed action")):
        ax.set_xticks(x, devices, rotation=20)
        ax.set_yscale("log")
        _plain_log(ax.yaxis)
        ax.set_ylabel(what + " (log)")
        ax.grid(axis="x", alpha=0)
    a1.set_title("projected inference time", loc="left")
    a2.set_title("projected inference energy", loc="left")
    handles, labels = a1.get_legend_handles_labels()
    fig.legend(handles, labels, loc="upper center", ncol=min(4, len(labels)), bbox_to_anchor=(0.5, 1.06))
    fig.tight_layout()
    return _save(fig, path)
