"""What makes a figure unreadable, found from matplotlib's own text and artist extents.

Three checks, on a drawn figure: texts that overprint each other (tick labels, axis labels,
titles, annotations and legend entries, compared in display pixels); a legend that covers
data (a line's points or a bar's top inside the legend's box); and what the axes cut: a
marker within its radius of an axes edge (memory.png's top point sat half outside), or a
point annotation that runs past its axes (the "400/s" label ran under the legend).
`report/figures.py` calls `FIGURE_HOOKS` on every figure before it is saved, so a test can run
these checks on every figure every recipe draws.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

#: called with (figure, stem) just before a figure is saved; tests append their checks
FIGURE_HOOKS: list[Callable[[Any, str], None]] = []
#: pixels two text boxes may share before they count as overprinting (antialiased edges)
SLACK_PX = 1.0


def run_hooks(fig: Any, stem: str) -> None:
    """Every registered check on `fig` (nothing outside tests)."""
    for hook in FIGURE_HOOKS:
        hook(fig, stem)


def _texts(fig: Any) -> list[Any]:
    out = list(fig.texts)
    for ax in fig.axes:
        for axis in (ax.xaxis, ax.yaxis):
            if axis.get_visible():  # a twin's shared axis is hidden, its labels are not drawn
                out += [*_drawn_tick_labels(axis), axis.label]
        out += [*ax.texts, ax.title, ax._left_title, ax._right_title]
        legend = ax.get_legend()
        if legend is not None:
            out += list(legend.get_texts())
    for legend in fig.legends:
        out += list(legend.get_texts())
    return [t for t in out if t.get_visible() and t.get_text().strip()]


def _drawn_tick_labels(axis: Any) -> list[Any]:
    """The tick labels matplotlib draws: those of ticks inside the view.

    It also keeps labels for the locator's ticks beyond the limits, which are never drawn.
    """
    lo, hi = sorted(axis.get_view_interval())
    span = (hi - lo) * 1e-9
    out = []
    for tick in [*axis.get_major_ticks(), *axis.get_minor_ticks()]:
        if lo - span <= tick.get_loc() <= hi + span:
            out += [lbl for lbl in (tick.label1, tick.label2) if lbl.get_visible()]
    return out


def overlapping_texts(fig: Any) -> list[str]:
    """Pairs of visible texts whose boxes overlap by more than `SLACK_PX` each way."""
    fig.canvas.draw()
    renderer = fig.canvas.get_renderer()
    boxes = [(t.get_text(), t.get_window_extent(renderer).padded(-SLACK_PX)) for t in _texts(fig)]
    found = []
    for i, (a, box_a) in enumerate(boxes):
        for b, box_b in boxes[i + 1 :]:
            if box_a.width > 0 and box_b.width > 0 and box_a.overlaps(box_b):
                found.append(f"{a!r} overprints {b!r}")
    return found


def _data_points(ax: Any) -> list[tuple[float, float]]:
    """Display coordinates of what a reader must see: line vertices and bar tops."""
    pts: list[tuple[float, float]] = []
    for line in ax.get_lines():
        xy = line.get_xydata()
        if len(xy):
            pts += [tuple(p) for p in ax.transData.transform(xy)]
    for patch in ax.patches:
        box = patch.get_window_extent()
        pts.append((box.x0 + box.width / 2, box.y1))
    return pts


def legend_over_data(fig: Any) -> list[str]:
    """Legends (of an axes or the figure) whose box holds a data point of any axes."""
    fig.canvas.draw()
    renderer = fig.canvas.get_renderer()
    legends = [ax.get_legend() for ax in fig.axes if ax.get_legend() is not None]
    legends += list(fig.legends)
    found = []
    for legend in legends:
        box = legend.get_window_extent(renderer)
        for ax in fig.axes:
            hidden = [p for p in _data_points(ax) if box.contains(*p)]
            if hidden:
                found.append(f"the legend covers {len(hidden)} data point(s)")
                break
    return found


def clipped(fig: Any) -> list[str]:
    """Markers the axes edge cuts, and point annotations that run outside their axes."""
    fig.canvas.draw()
    renderer = fig.canvas.get_renderer()
    found = []
    for ax in fig.axes:
        box = ax.get_window_extent(renderer)
        for line in ax.get_lines():
            marker = line.get_marker()
            xy = line.get_xydata()
            if marker in (None, "", "None", " ") or not len(xy):
                continue
            full = (line.get_markersize() + line.get_markeredgewidth()) / 2 * fig.dpi / 72
            thin = line.get_markeredgewidth() / 2 * fig.dpi / 72
            rx = thin if marker == "|" else full  # an error bar's cap is a flat line
            ry = thin if marker == "_" else full
            for x, y in ax.transData.transform(xy):
                inside = box.x0 <= x <= box.x1 and box.y0 <= y <= box.y1
                near = min(x - box.x0, box.x1 - x) < rx or min(y - box.y0, box.y1 - y) < ry
                if line.get_visible() and inside and near:
                    found.append(f"a {line.get_label()!r} marker is cut by the axes edge")
                    break
        for text in ax.texts:
            if not (text.get_visible() and text.get_text().strip()):
                continue
            t = text.get_window_extent(renderer).padded(-SLACK_PX)
            within = box.x0 <= t.x0 and t.x1 <= box.x1 and box.y0 <= t.y0 and t.y1 <= box.y1
            if hasattr(text, "xyann") and not within:
                found.append(f"the label {text.get_text()!r} runs outside its axes")
    return found


def figure_problems(fig: Any) -> list[str]:
    """Everything `overlapping_texts`, `legend_over_data` and `clipped` find."""
    return overlapping_texts(fig) + legend_over_data(fig) + clipped(fig)
