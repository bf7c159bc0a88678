"""Running a learning scenario end to end: report.json, report.md, report.html and PNG plots,
written atomically."""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from abm.byte_sizes import size_text
from abm.learning.errors import LearningScenarioError
from abm.learning.scenario import load_scenario
from abm.learning.withheld import withheld_lines
from abm.outputs.html_pages import markdown_page_html
from abm.outputs.run_folder import atomic_folder, check_target
from abm.outputs.strict_json import dumps, jsonable
from abm.plurals import counted, plural

if TYPE_CHECKING:
    from matplotlib.figure import Figure

    from abm.set_options import OptionNames


# Below this many samples a participant's accuracy moves in steps of more than 0.05: its gains say little.
FEW_TEST_SAMPLES = 20


def few_test_samples(report: dict[str, Any]) -> str | None:
    """A note when some participant is scored on fewer than :data:`FEW_TEST_SAMPLES` samples
    (``report["test_sizes"]``): its score moves in steps of 1/n; else None."""
    sizes = report["test_sizes"]
    few = [(k, n) for k, n in enumerate(sizes) if n < FEW_TEST_SAMPLES]
    if not few:
        return None
    if report["evaluate_on"] == "global":
        return (
            f"every participant is scored on the global test set of {sizes[0]} samples (fewer than "
            f"{FEW_TEST_SAMPLES}): a score moves in steps of 1/{sizes[0]}, so the gains say little; give a larger "
            "global_test_fraction or more data"
        )
    listed = ", ".join(f"{k} ({n})" for k, n in few[:10]) + (", ..." if len(few) > 10 else "")
    return (
        f"{len(few)} of {len(sizes)} participants are scored on fewer than {FEW_TEST_SAMPLES} test samples of "
        f"their own: participant (samples) {listed}; a score moves in steps of 1/n, so their gains say little; "
        "give the participants more data, a larger split.test_fraction, or evaluate_on: global"
    )


def gain_shown(value: float) -> float:
    """A gain for a table of 3 decimals: rounded there, so that the float noise of a mean of gains
    that cancel (-1.9e-17) reads 0.000, not -0.000, a loss that is not there."""
    return round(value, 3) + 0.0  # -0.0 + 0.0 is 0.0


def key_width(keys: Iterable[str], least: int) -> int:
    """The width of a console table's protocol column: ``least``, or the longest of ``keys`` and
    two spaces, so that a long label does not push its row's figures out of their columns."""
    return max([least, *(len(k) + 2 for k in keys)])


def privacy_lines(protocols: dict[str, Any], member: str = "participant") -> list[str]:
    """A console line per protocol of a report's ``protocols`` that ran with differential privacy:
    the epsilon spent at its delta (the guarantee is per ``member``), the noisy releases and rounds
    it was spent on, the accountant, the clip and the noise multiplier; protocols without DP get none."""
    lines = []
    for key, r in protocols.items():
        dp = (r.get("privacy") or {}).get("dp")
        if dp is None or r.get("epsilon") is None:
            continue
        releases = dp["releases"] if dp["releases"] is not None else dp["rounds"]
        lines.append(
            f"{key}: differential privacy, epsilon {r['epsilon']:.3g} at delta {r['delta']:g} per {member} over "
            f"{counted(releases, 'noisy release')} in {counted(dp['rounds'], 'round')} "
            f"({dp['accountant']} accountant, clip {dp['clip']:g}, "
            f"noise multiplier {dp['noise_multiplier']:.3g})"
        )
    return lines


def diverged_lines(protocols: dict[str, Any], member: str = "participant") -> list[str]:
    """A line per protocol of a report's ``protocols`` whose training losses were not finite
    (``nonfinite_losses``): each ``member`` whose training diverged, by the round it first did."""
    lines = []
    for key, r in protocols.items():
        first: dict[int, int] = {}
        for entry in r.get("nonfinite_losses") or []:
            first.setdefault(entry["participant"], entry["round"])
        by_round: dict[int, list[int]] = {}
        for pid, t in first.items():
            by_round.setdefault(t, []).append(pid)
        if by_round:
            whom = "; ".join(
                f"{plural(member, len(ids))} {', '.join(map(str, sorted(ids)))} from round {t}"
                for t, ids in sorted(by_round.items())
            )
            lines.append(
                f"Warning: {key}: training diverged, its loss not finite (NaN or inf) for {whom} (rounds from 0): the "
                "scores after it mean little (nonfinite_losses in report.json)."
            )
    return lines


def figure_axes(*grid: int, figsize: tuple[float, float], squeeze: bool = True) -> tuple[Figure, Any]:
    """A figure of ``figsize`` inches and its axes (``grid``: rows and columns, as
    :meth:`~matplotlib.figure.Figure.subplots` takes them), drawn for a file only: not pyplot's,
    so a report written from a notebook leaves its backend and open figures as they were."""
    from matplotlib.figure import Figure

    fig = Figure(figsize=figsize)
    return fig, fig.subplots(*grid, squeeze=squeeze)


SHOWN_NAME_LENGTH = 40
"""The most characters of a protocol's name a plot shows (its tick label, legend entry or title);
a label may have up to 237, which no figure of a few inches can lay out."""


def shown_name(name: str) -> str:
    """``name`` as a plot shows it: whole up to :data:`SHOWN_NAME_LENGTH` characters, else cut to
    that length with an ellipsis (the report's tables and file names keep it whole)."""
    return name if len(name) <= SHOWN_NAME_LENGTH else name[: SHOWN_NAME_LENGTH - 1] + "\u2026"


def save_figure(fig: Figure, path: Path, files: list[str] | None = None) -> None:
    """Lay ``fig`` out and write it at 100 dpi; its file name goes into ``files``."""
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    if files is not None:
        files.append(path.name)


def line_style(k: int) -> dict[str, str]:
    """The k-th line's colour and dash: ten colours, then the same with another dash, so that
    every protocol's line differs however many there are (up to 40)."""
    return {"color": f"C{k % 10}", "linestyle": ("-", "--", ":", "-.")[(k // 10) % 4]}


def plot_round_curves(protocols: dict[str, Any], ylabel: str, path: Path, title: str = "") -> None:
    """One line per protocol: its ``history`` (the mean score after each round), saved to ``path``
    under ``title``."""
    from matplotlib.ticker import MaxNLocator

    from abm.outputs.figure_parts import legend_clear_of_data

    fig, ax = figure_axes(figsize=(6, 4))
    for k, (name, prot) in enumerate(protocols.items()):
        rounds = np.arange(1, len(prot["history"]) + 1)
        single = len(rounds) == 1  # a line of one point draws nothing: mark it
        ax.plot(rounds, prot["history"], label=shown_name(name), marker="o" if single else None, **line_style(k))
    if max(len(p["history"]) for p in protocols.values()) == 1:
        ax.set_xlim(0.5, 1.5)  # round 1 alone, not ticks of 0.945 ... 1.05 rounds
    ax.xaxis.set_major_locator(MaxNLocator(integer=True, min_n_ticks=1))  # rounds are whole
    ax.set_xlabel("round")
    ax.set_ylabel(ylabel)
    if title:
        ax.set_title(title, fontsize=10)
    legend_clear_of_data(ax, fontsize=7)  # ten protocols' legend lay over their curves
    save_figure(fig, path)


LEARNING_FILES = {
    "report.json": "every figure, per protocol and participant",
    "report.md": "this page's text and tables",
    "scenario.json": "the scenario as run",
}
"""The learning folder's files its report.html links to, with what each holds."""


def markdown(report: dict[str, Any]) -> str:
    """A learning report's results as Markdown: what the scores are measured on, one row per
    protocol (as ``abm learn`` prints it: mean score, MCG, CGS, the lowest gain, the bytes of every message),
    the differential-privacy lines and the note on small test sets."""
    lines = [
        f"# Learning: {report['scenario']}",
        "",
        f"{report['participants']} participants; scores are accuracies on {scored_on_text(report)}, as fractions "
        "(gains too: 0.010 is one percentage point). MCG: mean "
        "collaboration gain over local-only; CGS: collaboration gain spread, the standard deviation of the gains "
        "over participants; min gain: the lowest participant's gain; sent: the bytes of every message sent, the "
        "server's to the participants included (kB: 10^3 bytes, MB: 10^6).",
        "",
        "| protocol | mean | MCG | CGS | min gain | sent |",
        "|---|---:|---:|---:|---:|---:|",
    ]
    for key, r in report["protocols"].items():
        lines.append(
            f"| {key} | {r['mean_score']:.3f} | {gain_shown(r['mcg']):.3f} | {r['cgs']:.3f} | "
            f"{gain_shown(r['min_gain']):.3f} "
            f"| {size_text(r['bytes_total'])} |"
        )
    extra = [
        *privacy_lines(report["protocols"]),
        *diverged_lines(report["protocols"]),
        *withheld_lines(report["protocols"]),
    ]
    note = few_test_samples(report)
    if note:
        extra.append(f"Note: {note}.")
    for line in extra:
        lines += ["", line]
    return "\n".join(lines) + "\n"


def console_legend(report: dict[str, Any]) -> str:
    """The line under ``abm learn``'s table: what its columns measure, in which units."""
    return (
        f"mean: accuracy on {scored_on_text(report)} (a fraction); MCG, CGS, min gain: gains over local-only in "
        "the same units (0.010 is one percentage point); sent: the bytes of every message (kB: 10^3, MB: 10^6)"
    )


def scored_on_text(report: dict[str, Any]) -> str:
    """What a learning report's scores are measured on, for the plots' labels (``evaluate_on``)."""
    return "the global test set" if report["evaluate_on"] == "global" else "each one's own test split"


def _plots(report: dict[str, Any], out: Path) -> list[str]:

    files = []
    prots = report["protocols"]
    keys = list(prots)
    n = report["participants"]

    fig, ax = figure_axes(figsize=(max(6, 1.2 * len(keys)), 4))
    width = 0.8 / n
    for i in range(n):
        vals = [prots[k]["participants"][i]["collaborative"] for k in keys]
        ax.bar(np.arange(len(keys)) + i * width, vals, width, label=f"participant {i}")
    ax.set_xticks(np.arange(len(keys)) + 0.4 - width / 2)
    ax.set_xticklabels([shown_name(k) for k in keys], rotation=30, ha="right")
    scored_on = scored_on_text(report)
    ax.set_ylabel("accuracy")
    ax.set_title(f"{report['scenario']}: final accuracy per participant (on {scored_on})", fontsize=10)
    ax.legend(fontsize=7, ncol=2)
    save_figure(fig, out / "scores.png", files)

    fig, ax = figure_axes(figsize=(max(6, 1.2 * len(keys)), 4))
    for i in range(n):
        vals = [prots[k]["participants"][i]["gain"] for k in keys]
        ax.bar(np.arange(len(keys)) + i * width, vals, width, label=f"participant {i}")
    ax.axhline(0, color="k", lw=0.8)
    ax.set_xticks(np.arange(len(keys)) + 0.4 - width / 2)
    ax.set_xticklabels([shown_name(k) for k in keys], rotation=30, ha="right")
    ax.set_ylabel("gain over local-only (accuracy)")
    ax.set_title(f"{report['scenario']}: collaboration gain G_n = A_n - B_n (accuracy on {scored_on})", fontsize=10)
    ax.legend(fontsize=7, ncol=2)
    save_figure(fig, out / "gains.png", files)

    plot_round_curves(
        prots,
        "mean accuracy over participants",
        out / "curves.png",
        f"{report['scenario']}: after each round, on {scored_on}",
    )
    files.append("curves.png")

    for k in keys:
        summary = prots[k].get("summary", {})
        for field, title in (
            ("graph", "MAPL collaboration graph W"),
            ("reputation", "CYCle reputation r[n, k]"),
        ):
            if field in summary:
                values = np.array(summary[field], dtype=float)  # null (no value) becomes NaN: left blank
                fig, ax = figure_axes(figsize=(4.5, 4))
                im = ax.imshow(np.ma.masked_invalid(values), vmin=0, vmax=1, cmap="viridis")
                ax.set_xticks(range(len(values)))
                ax.set_yticks(range(len(values)))
                ax.set_xlabel("peer k" if field == "reputation" else "peer j")
                ax.set_ylabel("participant n (who rates)" if field == "reputation" else "participant i")
                ax.set_title(f"{shown_name(k)}: {title}", fontsize=9)
                fig.colorbar(im)
                save_figure(fig, out / f"{k}_{field}.png", files)
        if summary.get("collaboration"):
            save_figure(collaboration_figure(k, summary["collaboration"]), out / f"{k}_collaboration.png", files)
    return files


# The rounds the collaboration plot sums, as the record's collapse indicators count them
# (distinct_partners_last10, cliques_last10: abm.learning.collaboration).
COLLABORATION_WINDOW = 10


def collaboration_figure(key: str, matrices: list[list[list[int]]]) -> Figure:
    """Protocol ``key``'s collaboration record (``matrices[r][i][j]`` = 1 when user i chose j in
    round r) as a heat map: how many times each user chose each peer over the last
    :data:`COLLABORATION_WINDOW` rounds (or all, when fewer ran), with a colour bar of the counts."""
    from matplotlib.ticker import MaxNLocator

    mats = np.array(matrices)
    window = min(COLLABORATION_WINDOW, len(mats))
    counts = mats[-window:].sum(0)
    fig, ax = figure_axes(figsize=(4.5, 4))
    im = ax.imshow(counts, cmap="Greys", vmin=0, vmax=max(1, int(counts.max())))
    for axis in (ax.xaxis, ax.yaxis):
        axis.set_major_locator(MaxNLocator(integer=True))  # users are whole
    ax.set_title(f"{shown_name(key)}: times chosen, last {window} rounds", fontsize=9)
    ax.set_xlabel("chosen")
    ax.set_ylabel("chooser")
    bar = fig.colorbar(im)
    bar.locator = MaxNLocator(integer=True)
    bar.update_ticks()
    bar.set_label("times chosen")
    return fig


def provenance(path_or_dict: str | Path | dict[str, Any], sets: list[str] | None) -> dict[str, Any]:
    """Where a run's scenario came from, for its ``report.json``: ``source`` (the file, or
    ``<dict>``) and ``sets``, the ``key.path=value`` overrides applied to it."""
    return {"source": "<dict>" if isinstance(path_or_dict, dict) else str(path_or_dict), "sets": list(sets or [])}


def run_scenario(
    path_or_dict: str | Path | dict[str, Any],
    out_dir: str | Path,
    runner: str | None = None,
    sets: list[str] | None = None,
    *,
    names: OptionNames | None = None,
) -> dict[str, Any]:
    """Validate and run a learning scenario; write ``report.json``, ``report.md``, ``report.html``
    (the results table and the plots on one page) and PNG plots to ``out_dir``.

    Everything is written into a temporary sibling folder that is renamed to ``out_dir`` at the
    end, so a failure leaves nothing half-written (an existing ``out_dir`` is replaced only on
    success). Raises :class:`LearningScenarioError` for an invalid scenario, before any output.
    ``runner`` overrides the scenario's ``runner`` key (inprocess, flower-sim, flower); ``sets``
    (``key.path=value``, as ``abm learn --set``) override any key: ``report.json`` lists them
    (``sets``) beside the file (``source``), and ``scenario.json`` holds the scenario as run.
    Messages name the sets as ``names`` says: by default as the Python argument
    (``sets=['rounds=0']``, :data:`abm.set_options.PYTHON`); ``abm learn`` gives ``COMMAND_LINE``
    (``--set rounds=0``).
    """
    from abm.learning.runner import run_all
    from abm.set_options import PYTHON

    scenario, _ = load_scenario(path_or_dict, runner, sets, names or PYTHON)
    out = check_target(out_dir, "learning")
    report = run_all(scenario)
    report.update(provenance(path_or_dict, sets))
    with atomic_folder(out, "learning") as tmp:
        report["plots"] = _plots(report, tmp)
        report = jsonable(report)
        (tmp / "report.json").write_text(dumps(report, indent=1), encoding="utf-8")
        (tmp / "scenario.json").write_text(scenario.model_dump_json(indent=1), encoding="utf-8")
        text = markdown(report)
        (tmp / "report.md").write_text(text, encoding="utf-8")
        page = markdown_page_html(f"{report['scenario']}: abm learn", text, report["plots"], LEARNING_FILES)
        (tmp / "report.html").write_text(page, encoding="utf-8")
    return report


__all__ = ["LearningScenarioError", "markdown", "run_scenario"]
