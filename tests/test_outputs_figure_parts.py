"""Where a legend goes (abm.outputs.figure_parts): the test of whether it covers the data lays the
figure out without drawing it, and sees the axes where drawing puts them."""

from __future__ import annotations

import matplotlib

matplotlib.use("Agg")

import numpy as np
import pytest
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure

from abm.outputs.figure_parts import covers_data, lay_out, legend_clear_of_data, save_png


def narrowed_figure() -> tuple[Figure, object]:
    """A constrained figure 600 pixels wide whose huge y label narrows the axes from 465 pixels
    before the layout to 274 after it; one point at axes fraction (0.25, 0.94), which a legend of
    79 pixels in the upper left covers once the axes are narrow (up to 0.31 of their width), and
    not before (up to 0.18)."""
    fig = Figure(figsize=(6, 3), dpi=100, layout="constrained")
    FigureCanvasAgg(fig)
    ax = fig.subplots()
    ax.plot([0.25], [0.94], "o", label="a point")
    ax.set_xlim(0, 1)
    ax.set_ylim(0, 1)
    ax.set_ylabel("a label\nof four\nlines\nhere", fontsize=40)
    return fig, ax


def test_lay_out_puts_the_axes_and_legend_where_drawing_does():
    """Two figures alike, one laid out, one drawn: the same axes and legend boxes (a second
    layout may move them again: a legend counts in the layout)."""
    (laid, laid_ax), (drawn, drawn_ax) = narrowed_figure(), narrowed_figure()
    laid_legend, drawn_legend = (
        laid_ax.legend(loc="upper left", fontsize=8),
        drawn_ax.legend(loc="upper left", fontsize=8),
    )
    before = laid_ax.get_position().width
    lay_out(laid)
    drawn.draw_without_rendering()
    assert laid_ax.get_position().width < 0.7 * before  # the layout moved the axes
    assert laid_ax.get_position().bounds == pytest.approx(drawn_ax.get_position().bounds)
    assert laid_legend.get_window_extent().bounds == pytest.approx(drawn_legend.get_window_extent().bounds)


def test_covers_data_judges_the_axes_as_laid_out_not_as_first_placed():
    """Before the layout the legend ends left of the point; once the axes are narrowed it lies
    over it. A test of the unlaid figure would say the legend is clear and leave it there."""
    fig, ax = narrowed_figure()
    legend = ax.legend(loc="upper left", fontsize=8)
    box = legend.get_window_extent(fig.canvas.get_renderer())
    point = ax.transData.transform((0.25, 0.94))
    assert box.x1 < point[0] and box.y0 < point[1] < box.y1  # unlaid: left of the point
    assert covers_data(ax, legend)


def test_a_legend_with_room_only_in_the_unlaid_axes_goes_beside_them():
    """Columns of points at 0.2, 0.4, 0.6 and 0.8 of the width: in the unlaid axes a legend fits
    between them (up to 0.18 of the width in the upper left), in the laid-out ones nowhere. A
    test of the unlaid figure would keep it inside, over a column."""
    fig, ax = narrowed_figure()
    ys = np.linspace(0, 1, 21)
    for x in (0.2, 0.4, 0.6, 0.8):
        ax.plot(np.full_like(ys, x), ys, "o", color="C0")
    legend = legend_clear_of_data(ax, fontsize=8)
    fig.draw_without_rendering()
    assert legend.get_window_extent().x0 >= ax.get_window_extent().x1  # beside the axes
    assert not covers_data(ax, legend)


def test_a_legend_clear_of_the_data_stays_inside():
    fig, ax = narrowed_figure()
    ax.lines[0].set_data([0.9], [0.1])  # in the lower right: the upper left is free
    legend = legend_clear_of_data(ax, fontsize=8)
    fig.draw_without_rendering()
    box, axes = legend.get_window_extent(), ax.get_window_extent()
    assert axes.x0 <= box.x0 and box.x1 <= axes.x1 and axes.y0 <= box.y0 and box.y1 <= axes.y1
    assert not covers_data(ax, legend)


@pytest.mark.parametrize("layout", ["constrained", "compressed", None])
def test_save_png_writes_what_savefig_writes(tmp_path, layout):
    """Laid out once and drawn once, the PNG is savefig's byte for byte (whose layout the huge
    label changes: a figure saved without it differs), and the figure keeps its layout engine."""
    pngs = []
    for name in ("savefig", "save_png", "unlaid"):
        fig, ax = narrowed_figure()
        fig.set_layout_engine(layout)
        legend_clear_of_data(ax, fontsize=8)
        engine = type(fig.get_layout_engine())
        if name == "save_png":
            save_png(fig, tmp_path / f"{name}.png", dpi=80)
            assert type(fig.get_layout_engine()) is engine
        else:
            if name == "unlaid":
                fig.set_layout_engine("none")
            fig.savefig(tmp_path / f"{name}.png", dpi=80)
        pngs.append((tmp_path / f"{name}.png").read_bytes())
    assert pngs[0] == pngs[1]
    assert (pngs[2] == pngs[0]) == (layout is None)
