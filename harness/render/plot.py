"""The leakage map as a picture: does output position t depend on input position s?

For one configuration (width 8, 2 heads, n = 8 tokens, batch 2), the engine measures the gradient of every output
position with respect to every input position (harness.engine.leakage, from the same Jacobian the causal-leakage
check uses) and stores it in the report; this module draws it: its size, relative to the largest, on a log scale,
one panel for the module and, where the weights are mapped with certainty, one per head.  The future (s > t) is
hatched behind a blue staircase, the causal boundary; a causal layer leaves it white (exactly zero).  Cells that
leak are boxed in red; allowed cells with no influence are boxed in dashed orange; a legend says so, and the title
names the finding.

matplotlib is optional (`pip install 'mha-check[plot]'`); it is imported only when a picture is drawn, and only its
object-oriented Agg API is used (no pyplot, no global backend change: safe inside a notebook).
"""
from __future__ import annotations

import numpy as np

from harness.engine.leakage import INFLUENCE

MISSING = "the leakage plot needs matplotlib: pip install 'mha-check[plot]'"
LEAK, DEAD, BOUNDARY = "#cf222e", "#fb8f44", "#0969da"


def require_matplotlib():
    """matplotlib's Figure and Agg canvas, or RuntimeError(MISSING): the CLI can call it before any work."""
    try:
        from matplotlib.backends.backend_agg import FigureCanvasAgg  # noqa: PLC0415 - matplotlib is optional
        from matplotlib.figure import Figure  # noqa: PLC0415 - matplotlib is optional
    except ImportError:
        raise RuntimeError(MISSING) from None
    return Figure, FigureCanvasAgg


def finding(maps) -> str:
    """The picture's headline: what its pattern means (`maps`: a report's Leakage, harness.engine.leakage)."""
    module = maps.panels[0]
    if module.G is None:
        return "no gradient: the output is not connected to the input"
    leaky = [p.label for p in maps.panels if p.leaks]
    if leaky:
        return "LEAK: " + ", ".join(leaky) + " depend" + ("s" if len(leaky) == 1 else "") + \
               " on future tokens (red boxes above the blue boundary)"
    dead = [p.label for p in maps.panels if p.dead]
    if dead:
        return "no leak, but some allowed tokens have no influence in " + ", ".join(dead) + " (orange boxes)"
    return "causal: every output depends on all earlier tokens and on no later one"


def draw(maps, path, title: str = "") -> str:
    """Draw the maps to `path` (PNG, or any format matplotlib infers from the suffix)."""
    Figure, FigureCanvasAgg = require_matplotlib()
    from matplotlib import colormaps  # noqa: PLC0415 - matplotlib is optional
    from matplotlib.lines import Line2D  # noqa: PLC0415
    from matplotlib.patches import Patch, Polygon, Rectangle  # noqa: PLC0415

    panels = maps.panels
    cfg = maps.config
    n = cfg["n"]
    values = [np.asarray(p.G, dtype=float) for p in panels if p.G is not None]
    positive = np.concatenate([v[np.isfinite(v) & (v > 0)].ravel() / max(float(np.nanmax(v[np.isfinite(v)])), 1e-300)
                               for v in values]) if values else np.array([])
    vmin = max(-17.0, float(np.floor(np.log10(positive.min()))) - 0.5) if positive.size else -16.0
    vmin = min(vmin, -3.0)
    cmap = colormaps["viridis"].with_extremes(bad="white")

    k = len(panels)
    fig = Figure(figsize=(3.5 * k + 1.2, 4.3), dpi=130)
    FigureCanvasAgg(fig)
    grid = fig.subplots(1, k + 1, squeeze=False, gridspec_kw={"width_ratios": [1] * k + [0.06]})[0]
    axes, cax = grid[:k], grid[k]
    fig.subplots_adjust(left=0.5 / (3.5 * k + 1.2) + 0.03, right=0.93, bottom=0.2, top=0.83, wspace=0.35)
    image = None
    for ax, p in zip(axes, panels):
        ax.set_title(f"{p.label}\n{p.verdict}", fontsize=9,
                     color=LEAK if p.leaks else ("#bc4c00" if p.dead else "#1a7f37"))
        ax.set_xlabel("input position s")
        ax.set_ylabel("output position t")
        ax.set_xticks(range(n))
        ax.set_yticks(range(n))
        ax.set_xlim(-0.5, n - 0.5)
        ax.set_ylim(n - 0.5, -0.5)
        if p.G is None:
            ax.text((n - 1) / 2, (n - 1) / 2, "no gradient", ha="center", va="center", color="#cf222e")
            continue
        G = np.asarray(p.G, dtype=float)
        finite = np.isfinite(G)
        scale = float(G[finite].max()) if finite.any() else 1.0
        with np.errstate(divide="ignore", invalid="ignore"):
            rel = np.log10(G / (scale if scale > 0 else 1.0))
        shown = np.ma.masked_where(~np.isfinite(rel), rel)
        image = ax.imshow(shown, cmap=cmap, vmin=vmin, vmax=0.0, interpolation="nearest")
        # the future: hatched, bounded by a red staircase (the causal boundary)
        corners = [(0.5, -0.5), (n - 0.5, -0.5), (n - 0.5, n - 1.5)]
        path_pts = corners + [pt for t in range(n - 2, -1, -1) for pt in ((t + 0.5, t + 0.5), (t + 0.5, t - 0.5))]
        ax.add_patch(Polygon(path_pts, closed=True, facecolor="none", edgecolor="#8c959f", hatch="///",
                             linewidth=0, alpha=0.6))
        line = [(n - 0.5, n - 1.5)] + [pt for t in range(n - 2, -1, -1) for pt in ((t + 0.5, t + 0.5),
                                                                                   (t + 0.5, t - 0.5))]
        ax.plot([a for a, _ in line], [b for _, b in line], color=BOUNDARY, linewidth=1.6)
        future = np.triu(np.ones((n, n), bool), 1)
        for t, s in np.argwhere(((G > 0) | ~finite) & future):
            ax.add_patch(Rectangle((s - 0.5, t - 0.5), 1, 1, fill=False, edgecolor=LEAK, linewidth=2.2))
        if scale > 0:
            for t, s in np.argwhere((G <= INFLUENCE * scale) & finite & ~future):
                ax.add_patch(Rectangle((s - 0.5, t - 0.5), 1, 1, fill=False, edgecolor=DEAD, linewidth=2.0,
                                       linestyle="--"))
    if image is None:
        cax.set_visible(False)
    else:
        bar = fig.colorbar(image, cax=cax)
        bar.set_label("log10 |d y_t / d x_s| relative to the largest\n(white: exactly 0)", fontsize=8)
    shape = f"d={cfg['d_out']}, {cfg['heads']} heads, n={n} tokens, batch {cfg['batch']}"
    headline = finding(maps)
    fig.suptitle(f"{title + ': ' if title else ''}{headline}\ndoes output t depend on input s?  ({shape})",
                 fontsize=9, color=LEAK if headline.startswith("LEAK") else "#24292f")
    legend = [Patch(facecolor="none", edgecolor="#8c959f", hatch="///", label="the future (s > t): must stay white"),
              Line2D([0], [0], color=BOUNDARY, linewidth=1.6, label="causal boundary"),
              Patch(facecolor="none", edgecolor=LEAK, linewidth=2.2, label="future, leaks (a bug)"),
              Patch(facecolor="none", edgecolor=DEAD, linewidth=2.0, linestyle="--",
                    label="allowed, no influence")]
    fig.legend(handles=legend, loc="lower center", ncol=4, fontsize=7, frameon=False)
    if maps.notes:
        fig.text(0.01, 0.01, "; ".join(maps.notes), fontsize=7, color="#57606a", va="bottom")
    fig.savefig(path)
    return headline
