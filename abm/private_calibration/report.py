"""Running a private-calibration scenario end to end: report.json, report.md and plots.

Everything is written into a temporary sibling folder that is renamed at the end
(:func:`abm.outputs.run_folder.atomic_folder`), so a failed run leaves nothing behind.
"""

from __future__ import annotations

import textwrap
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np

from abm.byte_sizes import size_text
from abm.learning.report import (
    diverged_lines,
    figure_axes,
    gain_shown,
    line_style,
    plot_round_curves,
    provenance,
    save_figure,
)
from abm.learning.withheld import withheld_lines
from abm.outputs.figure_parts import date_ticks
from abm.outputs.html_pages import markdown_page_html
from abm.outputs.run_folder import atomic_folder, check_target
from abm.outputs.strict_json import dumps
from abm.private_calibration.evaluation import end_to_end, estimate_is_finite, estimates, protocol_table
from abm.private_calibration.federation import ProtocolRun, calibration_specs, run_protocol
from abm.private_calibration.institutions import Institution, build_institutions
from abm.private_calibration.observed import KC2020_NOTE, model_scenario
from abm.private_calibration.scenario import MODEL_FILE, PrivateCalibrationScenario, load_scenario, saved
from abm.set_options import PYTHON, OptionNames
from abm.threads import torch_threads

if TYPE_CHECKING:
    from matplotlib.figure import Figure


def run_all(
    scenario: PrivateCalibrationScenario, base: Path
) -> tuple[dict[str, Any], list[Institution], list[ProtocolRun]]:
    """Build the institutions, run local-only and every listed protocol (in process or over
    Flower, as ``scenario.runner`` says), evaluate.

    Runs with one torch thread (tiny models; simulations are batched) and restores the setting.
    """
    with torch_threads(1):
        t0 = time.perf_counter()
        institutions, model = build_institutions(scenario, base)
        t_sim = time.perf_counter() - t0
        requests = None
        if scenario.runner == "inprocess":
            runs = [run_protocol(scenario, institutions, s) for s in calibration_specs(scenario)]
        else:
            from abm.private_calibration.flower import run_protocols_flower

            runs, requests = run_protocols_flower(scenario, base, institutions, scenario.runner)
        t_learn = time.perf_counter() - t0 - t_sim
        grid = scenario.grid()
        per_protocol = {r.key: estimates(r, institutions, grid) for r in runs}
        end_to_end(scenario, model, institutions, per_protocol)
        t_eval = time.perf_counter() - t0 - t_sim - t_learn
    report: dict[str, Any] = {
        "scenario": scenario.name,
        "kind": "private_calibration",
        "mode": scenario.mode,
        "seed": scenario.seed,
        "runner": scenario.runner,
        "flower_requests": requests,
        "note": KC2020_NOTE if scenario.mode == "kc2020" else "known_truth mode: observed series simulated at truth",
        "parameters": {
            p.name: {"low": p.low, "high": p.high, "bins": p.bins, "log": p.log, "edges": p.edges().tolist()}
            for p in grid.params
        },
        "joint_classes": grid.n_classes,
        "window": [str(d) for d in scenario.model.window],
        "institutions": [
            {
                "name": inst.name,
                "tracts": len(inst.region.tracts),
                "residents": inst.region.figures.population,
                "agents": inst.population.size,
                "prior": {k: list(v) for k, v in inst.prior.items()},
                "truth": inst.truth,
                "train_pairs": len(inst.data.train),
                "simulations": inst.simulations,
            }
            for inst in institutions
        ],
        "timings_s": {"simulations": t_sim, "protocols": t_learn, "end_to_end": t_eval},
        "protocols": protocol_table(runs, per_protocol, institutions),
    }
    for run in runs:
        if run.privacy is not None and run.key in report["protocols"]:
            report["protocols"][run.key]["privacy"] = institution_privacy(run.privacy)
    return report, institutions, _curves(per_protocol)


def institution_privacy(settings: dict[str, Any] | None) -> dict[str, Any] | None:
    """A run's privacy settings (learning's ``privacy_settings``) with the DP level named: one
    institution's whole contribution."""
    out = None if settings is None else dict(settings)
    if out is not None and out["dp"] is not None:
        out["dp"] = {"level": "institution (participant-level: one institution's whole contribution)", **out["dp"]}
    return out


def _curves(per_protocol: dict[str, list[dict[str, Any]]]) -> Any:
    return {k: [row.pop("curve") for row in rows] for k, rows in per_protocol.items()}


_ESTIMATE_LABELS = {"transmission": "transmission multiplier"}
"""How the estimates table's caption names a free parameter (default: its name)."""


def markdown(report: dict[str, Any]) -> str:
    """The report's results table and per-institution details as Markdown."""
    names = [i["name"] for i in report["institutions"]]
    lines = [
        f"# Private calibration: {report['scenario']} ({report['mode']})",
        "",
        report["note"],
        "",
        "Recovery: mean over parameters of the share of held-out simulations (full parameter range, "
        "each institution's own population) whose marginal arg-max bin is the true bin "
        f"({report['joint_classes']} joint classes). ND: normalized deviation of the simulated weekly series "
        "at the estimate against the observed series, mean of cases and admissions. Sent: the bytes of every "
        "message (kB: 10^3 bytes, MB: 10^6).",
        "",
        "| protocol | mean recovery | " + " | ".join(names) + " | MCG | CGS | min gain | mean ND | sent | wall s |",
        "|---|---:|" + "---:|" * len(names) + "---:|---:|---:|---:|---:|---:|",
    ]
    for key, r in report["protocols"].items():
        per = " | ".join(f"{row['recovery']:.3f}" for row in r["institutions"])
        lines.append(
            f"| {key} | {r['mean_recovery']:.3f} | {per} | {gain_shown(r['mcg']):+.3f} | {r['cgs']:.3f} "
            f"| {gain_shown(r['min_gain']):+.3f} "
            f"| {r['mean_nd']:.2f} | {size_text(r['bytes_total'])} | {r['wall_time_s']:.1f} |"
        )
    pooled = [key for key, r in report["protocols"].items() if r.get("protocol") == "centralized"]
    if pooled:
        lines += [
            "",
            f"{', '.join(pooled)}: the upper bound, not a private protocol: one calibrator trained on every "
            "institution's training simulations pooled in this process. Its 0 B sent count no messages; the pooled "
            "simulations are what no institution sends.",
        ]
    if any(not np.isnan(r.get("mean_recovery_own", float("nan"))) for r in report["protocols"].values()):
        lines += [
            "",
            "Recovery on each institution's own range: the same measure on held-out simulations drawn under the "
            "institution's own prior (its own part of the parameter space); gains against local-only's on the "
            "same set.",
            "",
            "| protocol | mean recovery (own prior) | " + " | ".join(names) + " | MCG | CGS | min gain |",
            "|---|---:|" + "---:|" * len(names) + "---:|---:|---:|",
        ]
        for key, r in report["protocols"].items():
            per = " | ".join(f"{row['recovery_own']:.3f}" for row in r["institutions"])
            lines.append(
                f"| {key} | {r['mean_recovery_own']:.3f} | {per} | {gain_shown(r['mcg_own']):+.3f} "
                f"| {r['cgs_own']:.3f} "
                f"| {gain_shown(r['min_gain_own']):+.3f} |"
            )
    for key, r in report["protocols"].items():
        dp = (r.get("privacy") or {}).get("dp")
        if dp is not None and r.get("epsilon") is not None:
            lines += [
                "",
                f"DP ({key}): epsilon {r['epsilon']:.3g} at delta {r['delta']:g} per institution over "
                f"{dp['releases']} noisy releases in {dp['rounds']} rounds ({dp['accountant']} accountant), clip "
                f"{dp['clip']:g}, noise multiplier {dp['noise_multiplier']:.3g}.",
            ]
    estimated = ", ".join(_ESTIMATE_LABELS.get(name, name) for name in report["parameters"])
    lines += ["", f"Estimates ({estimated}) and ND per institution:", ""]
    lines.append("| protocol | " + " | ".join(names) + " |")
    lines.append("|---|" + "---|" * len(names))
    for key, r in report["protocols"].items():
        cells = []
        for row in r["institutions"]:
            e = row["estimate"]
            if not estimate_is_finite(e):
                cells.append("not finite (training diverged): not simulated")
                continue
            cells.append(", ".join(f"{v:.3g}" for v in e.values()) + f" (ND {row['nd_mean']:.2f})")
        lines.append(f"| {key} | " + " | ".join(cells) + " |")
    if report["mode"] == "known_truth":
        truths = [", ".join(f"{v:.3g}" for v in i["truth"].values()) for i in report["institutions"]]
        lines.append("| truth | " + " | ".join(truths) + " |")
    for line in [
        *diverged_lines(report["protocols"], "institution"),
        *withheld_lines(report["protocols"], "institution"),
    ]:
        lines += ["", line]
    lines.append("")
    return "\n".join(lines)


# Per institution bar plots: the figure of report.json's institutions[*] they show, the y axis, the title.
INSTITUTION_BARS = {
    "recovery": ("recovery accuracy", "recovery (held-out simulations, full range)"),
    "gain": ("gain in recovery over local-only", "gain in recovery (held-out, full range)"),
    "gain_own": (
        "gain in recovery over local-only",
        "gain in recovery (held-out, own prior)",
    ),
    "nd_mean": ("ND at the estimate (mean of channels)", "normalized deviation of the fit at the estimate"),
}


def institution_bars(report: dict[str, Any], names: list[str], metric: str) -> Figure:
    """A bar per protocol and institution (``names``, in the report's order) of ``metric``, one of
    :data:`INSTITUTION_BARS`, titled with the scenario and what is measured."""

    prots = report["protocols"]
    keys = list(prots)
    ylabel, title = INSTITUTION_BARS[metric]
    fig, ax = figure_axes(figsize=(max(6, 1.1 * len(keys)), 4))
    width = 0.8 / len(names)
    for i, name in enumerate(names):
        vals = [prots[k]["institutions"][i][metric] for k in keys]
        ax.bar(np.arange(len(keys)) + i * width, vals, width, label=name)
    if metric.startswith("gain"):
        ax.axhline(0, color="k", lw=0.8)
    ax.set_xticks(np.arange(len(keys)) + 0.4 - width / 2)
    ax.set_xticklabels(keys, rotation=30, ha="right")
    ax.set_ylabel(ylabel)
    ax.set_title(f"{report['scenario']}: {title}", fontsize=9)
    ax.legend(fontsize=7, ncol=2)
    return fig


def fits_figure(
    report: dict[str, Any], curves: dict[str, list[Any]], institutions: list[Institution], replicates: int
) -> Figure:
    """Each institution's weekly cases and admissions per 100,000 (a column each): observed
    (dots; in known_truth mode simulated at the truth) and simulated at each protocol's estimate
    (``curves``: a line per protocol, the mean of ``replicates`` replicates, in the colour it has
    in curves.png), by the date each week starts; the legend beside the panels, the scenario and
    what is drawn in the title."""
    import pandas as pd

    from abm.calibration.observed import weekly

    keys = list(report["protocols"])
    n = len(institutions)
    fig, axes = figure_axes(2, n, figsize=(3.2 * n + 1.8, 6.0), squeeze=False)
    window = tuple(np.datetime64(d) for d in report["window"])
    for i, inst in enumerate(institutions):
        obs = weekly(inst.observed_daily, window)
        weeks = pd.date_range(report["window"][0], periods=len(obs), freq="7D")
        for c, channel in enumerate(("cases", "hospital_admissions")):
            ax = axes[c, i]
            ax.plot(weeks, obs[channel].to_numpy(), "ko", ms=4, label="observed")
            for k in keys:
                if k in curves and curves[k][i] is not None:  # None: not simulated, the estimate not finite
                    line = weekly(curves[k][i], window)[channel].to_numpy()
                    ax.plot(weeks, line, label=k, lw=1, **line_style(keys.index(k)))
            ax.set_title(f"{inst.name}: {channel.replace('_', ' ')}", fontsize=9)
            date_ticks(ax.xaxis, 7 * max(len(obs) - 1, 1), maxticks=4)
            if c == 1:
                ax.set_xlabel("week starting")
            if i == 0:
                ax.set_ylabel("per 100k per week")
    # beside the panels: inside the first it lay over the observed weeks it explains
    axes[0, -1].legend(fontsize=7, loc="upper left", bbox_to_anchor=(1.03, 1.0), borderaxespad=0.0)
    truth = " (simulated at the truth)" if report.get("mode") == "known_truth" else ""
    each = "one replicate" if replicates == 1 else f"the mean of {replicates} replicates"
    title = (
        f"{report['scenario']}: weekly cases and hospital admissions per 100,000; dots: observed{truth}; "
        f"lines: simulated at each protocol's estimate ({each})"
    )
    fig.suptitle("\n".join(textwrap.wrap(title, int(11 * fig.get_figwidth()))), fontsize=10)
    return fig


def _plots(
    report: dict[str, Any], curves: dict[str, list[Any]], institutions: list[Institution], out: Path, replicates: int
) -> list[str]:
    """Every plot of the report into ``out``; their file names (``replicates``: of each fit at an
    estimate)."""

    prots = report["protocols"]
    keys = list(prots)
    names = [i.name for i in institutions]
    files = []
    own = any(not np.isnan(prots[k].get("mean_recovery_own", float("nan"))) for k in keys)
    for metric, fname in (
        ("recovery", "recovery.png"),
        ("gain", "gains.png"),
        ("gain_own", "gains_own.png"),
        ("nd_mean", "nd.png"),
    ):
        if metric == "gain_own" and not own:  # no own-prior held-out set (own_holdout_simulations: 0)
            continue
        save_figure(institution_bars(report, names, metric), out / fname, files)

    save_figure(fits_figure(report, curves, institutions, replicates), out / "fits.png", files)

    plot_round_curves(
        prots,
        "mean recovery accuracy",
        out / "curves.png",
        f"{report['scenario']}: after each round, on held-out simulations (full range)",
    )
    files.append("curves.png")

    fig, ax = figure_axes(figsize=(5, 5))
    for inst in institutions:
        t = inst.region.tracts
        ax.scatter(t["lon"], t["lat"], s=6, label=inst.name)
    ax.set_xlabel("longitude")
    ax.set_ylabel("latitude")
    ax.set_title("institutions' tracts")
    ax.legend(fontsize=7)
    save_figure(fig, out / "regions.png", files)
    return files


PRIVATE_FILES = {
    "report.json": "every figure, per protocol and institution",
    "report.md": "this page's text and tables",
    "scenario.json": "the scenario as run",
    MODEL_FILE: "its model scenario as run, every value",
}
"""The private calibration folder's files its report.html links to, with what each holds."""


def run_private_calibration(
    path_or_dict: str | Path | dict[str, Any],
    out: str | Path | None = None,
    runner: str | None = None,
    sets: list[str] | None = None,
    *,
    names: OptionNames = PYTHON,
) -> dict[str, Any]:
    """Validate, run and write a private-calibration scenario; returns the report.

    Writes ``report.json``, ``report.md``, ``report.html`` (its text, tables and plots on one
    page), ``scenario.json`` and the plots into ``out``
    (default ``runs/<name>``). ``runner`` overrides the scenario's ``runner`` key; ``sets``
    (``key.path=value``, as ``abm learn --set``) override any key: ``report.json`` lists them
    (``sets``) beside the file (``source``), and ``scenario.json`` holds the scenario as run.
    Messages name the sets as ``names`` says: by default as the Python argument
    (``sets=['rounds=0']``, :data:`abm.set_options.PYTHON`); ``abm learn`` gives ``COMMAND_LINE``
    (``--set rounds=0``).
    """
    scenario, base = load_scenario(path_or_dict, runner, sets, names)
    target = check_target(Path(out) if out is not None else Path("runs") / scenario.name, "private_calibration")
    start = time.perf_counter()
    report, institutions, curves = run_all(scenario, base)
    report["timings_s"]["total"] = time.perf_counter() - start
    report.update(provenance(path_or_dict, sets))
    with atomic_folder(target, "private_calibration") as tmp:
        report["plots"] = _plots(report, curves, institutions, tmp, scenario.evaluation.estimate_replicates)
        # strict JSON: a figure that cannot be computed (NaN) is written as null
        (tmp / "report.json").write_text(dumps(report), encoding="utf-8")
        text = markdown(report)
        (tmp / "report.md").write_text(text, encoding="utf-8")
        # the model scenario resolved beside it: `abm learn` on this file, from any folder, runs it again
        (tmp / MODEL_FILE).write_text(model_scenario(scenario, base).resolved_yaml(), encoding="utf-8")
        (tmp / "scenario.json").write_text(saved(scenario).model_dump_json(indent=2) + "\n", encoding="utf-8")
        page = markdown_page_html(f"{report['scenario']}: abm learn", text, report["plots"], PRIVATE_FILES)
        (tmp / "report.html").write_text(page, encoding="utf-8")
    return report


__all__ = ["markdown", "run_all", "run_private_calibration"]
