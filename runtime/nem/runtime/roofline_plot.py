"""The roofline report as a picture (D-RT-ROOFLINE; `nem-run --roofline-plot`):
per group, its cycles beside its bound, its share of the critical path and
its ideal bound.  Apart from the report (`nem.runtime.roofline`), which a
timed run builds without matplotlib."""

from __future__ import annotations

from typing import Any

from nem.dialect.semantics.units import UNIT_TYPES
from nem.runtime.roofline import LATENCY, Report, shown_bound

PLOT_GROUPS = 40
"""The bar chart shows at most this many groups (the longest): a picture of
ResNet-50's 534 would be 19,000 pixels tall."""


def bar_chart_png(rep: Report, path: str) -> None:
    """`bar_chart` written to `path`; needs matplotlib."""
    fig = bar_chart(rep)
    fig.savefig(path, dpi=100, bbox_inches="tight")  # the legend too
    import matplotlib.pyplot as plt

    plt.close(fig)


def kind_colors() -> dict[str, tuple[float, ...]]:
    """One colour per unit kind and `latency`, the same in every chart (a
    kind's colour followed the program's sorted kinds before session 40,
    so `latency` was red in one chart and purple in the next)."""
    import matplotlib

    cmap = matplotlib.colormaps["tab10"]
    return {k: tuple(cmap(i)) for i, k in enumerate((*UNIT_TYPES, LATENCY))}


def bar_chart(rep: Report) -> Any:
    """Per group: the cycles taken beside the bound (one pair of horizontal
    bars per group, coloured by the binding kind, `kind_colors`; the
    `PLOT_GROUPS` longest groups of a larger program), the group's share of
    the critical path hatched over its busy bar from 0 (`critical`: the
    bars a user shortens to shorten the run; a group beside a longer one
    has none), and a black tick
    across the pair at the group's ideal bound where the report has one
    (`--onnx`: how far the compiled bound itself is from the node's least
    work); the legend right of the axes where it hides no bar; a matplotlib
    Figure."""
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError as e:
        raise RuntimeError(
            "not supported: --roofline-plot needs matplotlib; install it with "
            "pip install 'nem-toolchain[viz]'"
        ) from e
    rows = rep.groups
    if len(rows) > PLOT_GROUPS:  # the longest, in program order
        keep = set(map(id, sorted(rows, key=lambda r: -r.cycles)[:PLOT_GROUPS]))
        rows = [r for r in rows if id(r) in keep]
    colors = kind_colors()
    fig, ax = plt.subplots(figsize=(12, 1.5 + 0.35 * max(len(rows), 1)))
    seen: set[str] = set()
    ideal_label = "ideal bound (the node's least work)"  # once in the legend
    path_label = "on the critical path"
    for y, r in enumerate(rows):
        ax.barh(
            y - 0.2,
            r.cycles,
            height=0.4,
            color=colors[r.binds],
            label=f"busy cycles, binds {r.binds}" if r.binds not in seen else None,
        )
        seen.add(r.binds)
        if r.critical:  # its share of the critical path, over its busy cycles
            ax.barh(
                y - 0.2,
                r.critical,
                height=0.4,
                fill=False,
                hatch="///",
                edgecolor="black",
                linewidth=0,
                label=path_label,
            )
            path_label = "_nolegend_"
        ax.barh(
            y + 0.2,
            r.bound,
            height=0.4,
            color="lightgray",
            label="bound (D-RT-COST)" if y == 0 else None,
        )
        if r.ideal_bound:  # a tick across the pair (`--onnx`, D-RT-ROOFLINE)
            ax.vlines(
                r.ideal_bound,
                y - 0.45,
                y + 0.45,
                colors="black",
                linewidth=1.5,
                label=ideal_label,
            )
            ideal_label = "_nolegend_"  # matplotlib's name for no entry
    ax.set_yticks(range(len(rows)))
    ax.set_yticklabels([r.name for r in rows], fontsize="small")
    ax.set_ylim(len(rows) - 0.5, -0.5)  # program order, top down
    ax.set_xlabel("cycles")
    shown = (
        f" ({len(rows)} of {len(rep.groups)} groups, the longest)"
        if len(rows) < len(rep.groups)
        else ""
    )
    ideal = f", ideal {shown_bound(rep.total.ideal_bound)}" if rep.total.ideal_bound else ""
    ax.set_title(
        f"{rep.program} on {rep.device}: {rep.total.cycles} cycles, bound "
        f"{shown_bound(rep.total.bound)}{ideal}{shown}"
    )
    ax.legend(loc="upper left", bbox_to_anchor=(1.01, 1.0), borderaxespad=0, fontsize="small")
    fig.tight_layout()
    return fig
