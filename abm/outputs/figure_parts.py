"""Parts that several of abm's figures share: calendar-date ticks, a date axis over an axis of
simulation days, and a legend that keeps clear of the data it explains."""

from __future__ import annotations

import contextlib
from datetime import date
from pathlib import Path
from typing import Any

import matplotlib.dates as mdates
import numpy as np
from matplotlib.legend import Legend
from matplotlib.path import Path as MplPath
from matplotlib.transforms import Bbox


def date_ticks(axis: Any, span_days: float, maxticks: int = 7) -> None:
    """Ticks of whole calendar days on ``axis`` (an x axis whose values are matplotlib date
    numbers) spanning ``span_days``: days a few apart where the span is short (the automatic
    locator would tick hours there, each written as the same date), else days, weeks or months as
    the span asks, at most ``maxticks``. Written short ("Apr", "15"), the year given once at the
    axis's end, so that every tick says which date it is."""
    if span_days < 2 * maxticks:
        locator: Any = mdates.DayLocator(interval=max(1, int(np.ceil(span_days / maxticks))))
    else:
        locator = mdates.AutoDateLocator(minticks=3, maxticks=maxticks)
    axis.set_major_locator(locator)
    # the offset names the year alone: ticks of days name their month where it starts ("Apr", "08")
    offsets = ["", "%Y", "%Y", "%Y-%b-%d", "%Y-%b-%d", "%Y-%b-%d %H:%M"]
    axis.set_major_formatter(mdates.ConciseDateFormatter(locator, offset_formats=offsets, show_offset=True))


def date_axis(ax: Any, start: date, days: int, maxticks: int = 7) -> Any:
    """A second x axis on top of ``ax`` (whose x axis counts simulation days) that gives the
    calendar date of each day, day 0 being ``start``; returns it. The days stay below: the
    scenario's day settings (``start_day``...) are written in them."""
    origin = mdates.date2num(start)
    top = ax.secondary_xaxis("top", functions=(lambda d: d + origin, lambda n: n - origin))
    date_ticks(top.xaxis, days, maxticks)
    top.tick_params(axis="x", labelsize=8)
    return top


def _display_paths(ax: Any) -> list[tuple[MplPath, str]]:
    """The axes' data as paths in display coordinates, each with what it draws: "points" (a line
    of markers only), "line" or "filled" (a band); every line with points and every collection
    (bands, error bars); a line broken by NaN gives a path per piece."""
    paths = []
    for line in ax.lines:
        xy = np.asarray(line.get_xydata(), dtype=float)
        if xy.size == 0:
            continue  # a legend-only entry
        shown = line.get_transform().transform(xy)
        ok = np.isfinite(shown).all(axis=1)
        kind = "points" if line.get_linestyle() in ("None", "", " ") else "line"
        pieces = np.split(np.arange(len(ok)), np.flatnonzero(np.diff(ok.astype(int))) + 1)
        paths += [(MplPath(shown[piece]), kind) for piece in pieces if ok[piece[0]]]
    for coll in ax.collections:
        transform = coll.get_transform()
        for path in coll.get_paths():
            shown = transform.transform(path.vertices)
            shown = shown[np.isfinite(shown).all(axis=1)]
            if len(shown):
                paths.append((MplPath(shown), "filled"))
    return paths


def lay_out(fig: Any) -> None:
    """Place ``fig``'s axes as drawing it would (its layout engine: constrained, compressed...),
    without drawing: what a legend's place and size need, at about half the cost of
    :meth:`~matplotlib.figure.Figure.draw_without_rendering` (which draws every tick and text as
    well). A figure without a layout engine keeps its axes where they are. Either way each axes'
    limits are brought up to date with what it holds, as drawing does (autoscaling is deferred to
    the first read of the limits)."""
    for ax in fig.axes:
        ax.get_xlim()  # reading the limits applies the pending autoscale (both x and y)
    engine = fig.get_layout_engine()
    if fig.axes and engine is not None:
        with contextlib.suppress(ValueError):  # as Figure.draw: a layout that cannot be made is skipped
            engine.execute(fig)


def save_png(fig: Any, path: str | Path, dpi: int = 100) -> None:
    """Write ``fig`` to ``path`` as PNG at ``dpi``, the same image as ``fig.savefig(path, dpi=dpi)``
    for half the work where the figure has a layout engine: savefig then draws the figure twice,
    once without rendering to run the layout, once to render; here the layout runs alone
    (:func:`lay_out`, at ``dpi``) and the figure is drawn once, its layout engine set aside for the
    draw. The figure keeps ``dpi`` and its layout engine."""
    fig.set_dpi(dpi)
    lay_out(fig)
    engine = fig.get_layout_engine()
    fig.set_layout_engine("none")
    try:
        fig.savefig(path, dpi=dpi)
    finally:
        fig.set_layout_engine(engine)


def covers_data(ax: Any, legend: Legend) -> bool:
    """Whether ``legend``, where it is drawn, lies over any of ``ax``'s points, lines or bands
    (the figure is laid out, not drawn, to know where: :func:`lay_out`); shaded spans (a
    held-out window) are not data."""
    lay_out(ax.figure)
    box = Bbox(legend.get_window_extent().get_points())
    for path, kind in _display_paths(ax):
        if box.count_contains(path.vertices) or (kind != "points" and path.intersects_bbox(box, kind == "filled")):
            return True
    return False


def legend_clear_of_data(ax: Any, **kwargs: Any) -> Legend:
    """``ax``'s legend (``kwargs``: :meth:`~matplotlib.axes.Axes.legend`'s, but ``loc``) where
    matplotlib finds it the best place inside the axes, or, where that place still covers a
    line or band (many runs, or bands across the whole axes), outside them on the right. Call it
    once the axes' limits are set."""
    legend = ax.legend(loc="best", **kwargs)
    if covers_data(ax, legend):
        legend.remove()
        legend = ax.legend(loc="upper left", bbox_to_anchor=(1.01, 1.0), borderaxespad=0.0, **kwargs)
    return legend
