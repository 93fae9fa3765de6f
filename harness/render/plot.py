"""The leakage map as a picture: does output position t depend on input position s?

For one configuration (width 8, 2 heads, n = 8 tokens, batch 2), the child computes the gradient of every output
position with respect to every input position (`Instance.influence`, from the same Jacobian the causal-leakage check
uses); the picture shows its size, relative to the largest, on a log scale: one panel for the module as a whole and,
when mha-check can transplant weights into it, one per head (the output projection restricted to that head).
The future (s > t, above the diagonal) is hatched and bounded by a red staircase: a causal layer leaves it white
(exactly zero).  Cells that leak are boxed in red; allowed cells with no influence are boxed in orange.

matplotlib is optional (`pip install 'mha-check[plot]'`); it is imported only when a picture is drawn, and only its
object-oriented Agg API is used (no pyplot, no global backend change: safe inside a notebook).

    from harness.render.plot import plot_leakage
    plot_leakage("attn.py:MyAttn", "leakage.png")          # any target harness.api.check takes

From the runner, after the checks and before the subject is closed: `write_leakage_plot(ctx, path)`.
"""
from __future__ import annotations

from dataclasses import replace

import numpy as np

from harness.wire.config import Config

PLOT_CONFIG = Config(d_in=8, d_out=8, heads=2, context_length=12, batch=2, n=8)
INFLUENCE = 1e-12  # as checks/causal_leakage.py: relative size below which an allowed position has "no influence"
MISSING = "the leakage plot needs matplotlib: pip install 'mha-check[plot]'"


def require_matplotlib():
    """matplotlib's Figure and Agg canvas, or RuntimeError(MISSING): the CLI can call it before any work."""
    try:
        from matplotlib.backends.backend_agg import FigureCanvasAgg
        from matplotlib.figure import Figure
    except ImportError:
        raise RuntimeError(MISSING) from None
    return Figure, FigureCanvasAgg


def _panel(label: str, G: np.ndarray | None, note: str = "") -> dict:
    if G is None:
        return {"label": label, "G": None, "leaks": None, "dead": None,
                "verdict": note or "no gradient: the output is not connected to the input"}
    G = np.asarray(G, dtype=float)
    if G.ndim == 3:
        G = G.max(axis=0)  # the worst sequence of the batch
    n = G.shape[0]
    future = np.triu(np.ones((n, n), bool), 1)
    finite = np.isfinite(G)
    scale = float(G[finite].max()) if finite.any() else 0.0
    leaks = int(((G > 0) | ~finite)[future].sum())
    dead = int(((G <= INFLUENCE * scale) & finite)[~future].sum()) if scale > 0 else int((~future).sum())
    if leaks:
        verdict = f"LEAKS: {leaks} future cell{'s' if leaks != 1 else ''}"
    elif dead:
        verdict = f"{dead} allowed cell{'s' if dead != 1 else ''} without influence"
        verdict = verdict if len(verdict) < 36 else f"{dead} allowed cells dead"
    else:
        verdict = "causal: no leak"
    return {"label": label, "G": G, "leaks": leaks, "dead": dead, "verdict": verdict + (f" ({note})" if note else "")}


def leakage_maps(ctx, heads: bool = True, cfg: Config | None = None) -> dict:
    """The (n, n) influence maps for the module and, where weights can be transplanted, each head.

    `ctx` is the runner's `checks._context.Context`.  Student failures propagate as TargetFailure / WorkerDied."""
    from harness.sandbox.subject import TargetFailure

    cfg = cfg or PLOT_CONFIG
    ctx.subject.load()
    inst = ctx.build(cfg)
    x = ctx.input(cfg, "plot")
    r = ctx.rng("plot-r", cfg).standard_normal(cfg.d_out)
    panels = [_panel("module", inst.influence(x, r))]
    notes = []
    if heads and cfg.heads > 1:
        if inst.layout is None:
            notes.append("per-head maps need the weights mapped (Q, K, V, output projection); they were not")
        else:
            if not ctx.mapping.proven:
                notes.append("heads isolated through a weight mapping that was not proven on the module's own "
                             "output (expected when the module has a bug)")
            w = ctx.weights_for(inst, "plot")
            dh = cfg.head_width
            try:
                for h in range(cfg.heads):
                    only_h = w.wo.copy()
                    only_h[:, : h * dh] = 0
                    only_h[:, (h + 1) * dh:] = 0
                    ctx.transplant(inst, replace(w, wo=only_h))
                    panels.append(_panel(f"head {h}", inst.influence(x, r)))
            except TargetFailure as e:
                notes.append(f"per-head maps: your code raised {e.message}")
    return {"config": cfg.to_dict(), "panels": panels, "notes": notes}


def render(maps: dict, path, title: str = "") -> None:
    """Draw the maps to `path` (PNG, or any format matplotlib infers from the suffix)."""
    Figure, FigureCanvasAgg = require_matplotlib()
    from matplotlib import colormaps
    from matplotlib.patches import Polygon, Rectangle

    panels = maps["panels"]
    cfg = maps["config"]
    n = cfg["n"]
    values = [p["G"] for p in panels if p["G"] is not None]
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
        ax.set_title(f"{p['label']}\n{p['verdict']}", fontsize=9,
                     color="#cf222e" if p["leaks"] else ("#bc4c00" if p["dead"] else "#1a7f37"))
        ax.set_xlabel("input position s")
        ax.set_ylabel("output position t")
        ax.set_xticks(range(n))
        ax.set_yticks(range(n))
        ax.set_xlim(-0.5, n - 0.5)
        ax.set_ylim(n - 0.5, -0.5)
        if p["G"] is None:
            ax.text((n - 1) / 2, (n - 1) / 2, "no gradient", ha="center", va="center", color="#cf222e")
            continue
        G = p["G"]
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
        ax.plot([a for a, _ in line], [b for _, b in line], color="#cf222e", linewidth=1.6)
        future = np.triu(np.ones((n, n), bool), 1)
        for t, s in np.argwhere(((G > 0) | ~finite) & future):
            ax.add_patch(Rectangle((s - 0.5, t - 0.5), 1, 1, fill=False, edgecolor="#cf222e", linewidth=2.2))
        if scale > 0:
            for t, s in np.argwhere((G <= INFLUENCE * scale) & finite & ~future):
                ax.add_patch(Rectangle((s - 0.5, t - 0.5), 1, 1, fill=False, edgecolor="#fb8f44", linewidth=2.0,
                                       linestyle="--"))
    if image is None:
        cax.set_visible(False)
    else:
        bar = fig.colorbar(image, cax=cax)
        bar.set_label("log10 |d y_t / d x_s| relative to the largest\n(white: exactly 0)", fontsize=8)
    shape = f"d={cfg['d_out']}, {cfg['heads']} heads, n={n} tokens, batch {cfg['batch']}"
    fig.suptitle(f"{title + ': ' if title else ''}does output t depend on input s?  ({shape}; hatched: the future, "
                 "must stay white)", fontsize=9)
    footer = "red boxes: the output depends on a future input (a leak); orange dashed: an allowed input has no " \
             "influence"
    if maps.get("notes"):
        footer += "\n" + "; ".join(maps["notes"])
    fig.text(0.01, 0.01, footer, fontsize=7, color="#57606a", va="bottom")
    fig.savefig(path)


def write_leakage_plot(ctx, path, heads: bool = True, title: str | None = None, cfg: Config | None = None) -> dict:
    """Compute and draw the leakage maps with the runner's Context (call it before the subject is closed).

    Returns {"path", "config", "panels": [{"label", "leaks", "dead", "verdict"}], "notes"} or, when the student's
    module cannot be built or run, {"path": None, "error": ...} (nothing written).  Raises RuntimeError when
    matplotlib is missing (checked first, before any work)."""
    from harness.sandbox.subject import TargetFailure, WorkerDied

    require_matplotlib()
    try:
        maps = leakage_maps(ctx, heads, cfg)
    except (TargetFailure, WorkerDied) as e:
        return {"path": None, "error": f"no leakage plot: your code raised {e.message}"}
    render(maps, path, title if title is not None else str(getattr(ctx.subject, "spec", "")))
    return {"path": str(path), "config": maps["config"], "notes": maps["notes"],
            "panels": [{k: v for k, v in p.items() if k != "G"} for p in maps["panels"]]}


def plot_leakage(target, path, heads: bool = True, *, seed: int = 0, args: dict | None = None,
                 weight_map: dict | None = None, source: bool | None = None) -> dict:
    """Draw the leakage map of `target` (a target string, class, factory function or nn.Module instance, as for
    `harness.api.check`) to `path`; returns what `write_leakage_plot` returns."""
    from harness.engine.context import Context
    from harness.frontends.api import resolved_target
    from harness.sandbox.subject import Subject

    require_matplotlib()
    with resolved_target(target, source) as resolved:
        subject = Subject(resolved.spec, dict(args or {}), seed, weight_map=dict(weight_map or {}))
        try:
            return write_leakage_plot(Context(subject, seed), path, heads, title=resolved.display)
        finally:
            subject.close()
