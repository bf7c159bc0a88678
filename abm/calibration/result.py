"""A calibration from Python: :func:`calibrate` (``abm.calibrate``, what ``abm calibrate`` runs)
and the :class:`CalibrationResult` it returns. Light to import: the optimizer (Optuna, torch)
loads when :func:`calibrate` is called."""

from __future__ import annotations

import reprlib
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import pandas as pd

    from abm.set_options import OptionNames

# What a calibration tells ``progress``: (trials or steps done, of how many, the last loss).
Progress = Callable[[int, int, float], None] | None


@dataclass(frozen=True)
class CalibrationResult:
    """A finished calibration: ``summary``, what ``calibration.json`` holds (with ``folder`` and
    each free parameter's ``bounds`` added), and ``folder``, the output folder written. Its key
    figures are properties: :attr:`best_parameters`, :attr:`loss_fit`, :attr:`fit_losses`,
    :attr:`holdout_losses`; :attr:`table` and :attr:`fit_weekly` read the folder's tables."""

    summary: dict[str, Any]
    folder: Path

    @property
    def best_parameters(self) -> dict[str, float]:
        """The calibrated values, by key path (``disease.transmission_rate``)."""
        return dict(self.summary["best_parameters"])

    @property
    def loss_fit(self) -> float:
        """The fit's loss over the fit window: what the calibration minimised."""
        return float(self.summary["loss_fit"])

    @property
    def fit_losses(self) -> dict[str, Any]:
        """Each target's losses over the fit window (``calibration.json``'s ``fit``)."""
        return dict(self.summary["fit"])

    @property
    def holdout_losses(self) -> dict[str, Any] | None:
        """Each target's losses over the held-out window; None without one."""
        holdout = self.summary.get("holdout")
        return None if holdout is None else dict(holdout)

    @property
    def calibrated_yaml(self) -> Path:
        """The calibrated scenario's file (``calibrated.yaml``), which ``abm.run`` takes."""
        return self.folder / "calibrated.yaml"

    @property
    def table(self) -> pd.DataFrame:
        """One row per Optuna trial (``trials.csv``) or gradient step (``steps.csv``)."""
        import pandas as pd

        name = "steps.csv" if self.summary["method"] == "gradient" else "trials.csv"
        return pd.read_csv(self.folder / name)

    @property
    def fit_weekly(self) -> pd.DataFrame:
        """The weekly counts the losses compare, observed and simulated (``fit_weekly.csv``)."""
        import pandas as pd

        return pd.read_csv(self.folder / "fit_weekly.csv")

    def __repr__(self) -> str:
        """The method, the calibrated values, the loss and the folder in one line."""
        s = self.summary
        count = s.get("trials", s.get("steps", "?"))
        unit = "step" if s.get("method") == "gradient" else "trial"
        values = ", ".join(f"{k}={v:g}" for k, v in s["best_parameters"].items())
        return (
            f"<CalibrationResult of {s['scenario']!r} ({s['method']}, {count} {unit}{'s' if count != 1 else ''}): "
            f"{values}; loss_fit {s['loss_fit']:.4g}; in {self.folder}>"
        )


def calibrate(
    scenario: str | Path,
    out: str | Path | None = None,
    *,
    trials: int | None = None,
    method: str = "optuna",
    agents: int | None = None,
    replicates: int | None = None,
    device: str | None = None,
    sets: list[str] | None = None,
    backend: str = "local",
    workers: int | None = None,
    ray_address: str | None = None,
    progress: Progress = None,
    note: Callable[[str], None] | None = None,
    rerun_progress: Progress = None,
    reused: Callable[[int], None] | None = None,
    names: OptionNames | None = None,
    warn: bool = True,
) -> CalibrationResult:
    """Fit a scenario's free parameters to observed data and write the calibration folder, as
    ``abm calibrate`` does (it calls this); return the calibrated values, losses and folder.

    Arguments:
        scenario: a scenario file with a calibration section (docs/calibration.md).
        out: the output folder (None: ``runs/<name>-calibration``); a new or empty folder, or a
            calibration abm wrote, which is replaced.
        trials: Optuna trials, or gradient steps (None: ``calibration.trials``).
        method: ``optuna`` (TPE over the free parameters) or ``gradient`` (the transmission rate
            and weekly multipliers, through the differentiable engine).
        agents: the agents of each trial, as ``--agents`` (None: the scenario's).
        replicates: the replicates of each trial, as ``--replicates`` (None: the scenario's).
        device: ``cpu``, ``cuda`` or ``cuda:N``, as ``--device`` (None: the scenario's).
        sets: ``key.path=value`` texts, as ``abm calibrate --set`` takes them.
        backend: where Optuna trials run: ``local`` (worker processes here) or ``ray``.
        workers: Optuna trials at once (None: as ``abm calibrate``; the trials do not depend on it).
        ray_address: the address of a running Ray cluster (``ray`` only).
        progress: called as ``progress(done, total, loss)`` after each trial or step.
        note: told (a text) what ``abm calibrate`` prints as notes on its work: kept trials
            found and reused, the re-ranking as it starts (with ``warn`` False, the notes on the
            inputs too, as ``abm calibrate`` prints them).
        rerun_progress: called as ``progress`` is, for each re-run of the best trials
            (``calibration.rerank_trials``).
        reused: told how many kept trials were reused, as the first new trial starts.
        names: how messages name the arguments: :data:`abm.set_options.PYTHON` (``sets=[...]``,
            None's default) or ``COMMAND_LINE`` (``--set``, as ``abm calibrate`` gives).
        warn: give each note ``abm calibrate`` prints on the scenario (a ``sets`` item that drops
            the file's keys, a setting not used, more ``workers`` than CPUs, more agents than the
            region's residents, the free parameters ``method="gradient"`` holds at the scenario's
            values, trials at once that may need more memory than this machine has) as a warning
            of class :class:`abm.ScenarioNote`, with its text, before the first trial (False:
            ``abm calibrate``, which prints them, and ``note`` is told of the last three); and,
            once the folder is written, the note ``abm
            calibrate`` prints after its tables (fitted values at a bound of their range) as a
            warning of class :class:`abm.ResultNote` (:mod:`abm.result_notes`) that holds the
            result as ``note.result``.

    Optuna trials that finish are kept beside ``out`` until it is written, so that a calibration
    stopped before its end continues from them (:mod:`abm.calibration.journal`). Bad input raises
    :class:`abm.scenario.ScenarioError` or :class:`abm.calibration.errors.CalibrationError` (both
    ``ValueError``) with the message ``abm calibrate`` prints; nothing is printed or written then.
    """
    from abm.set_options import PYTHON, ScenarioError

    if isinstance(scenario, bool) or not isinstance(scenario, str | Path):
        # a calibration reads its scenario as a file (the files of its observed data are named relative to it)
        raise ScenarioError(
            f"scenario: {reprlib.repr(scenario)} is not allowed; give the path of a scenario file with a calibration "
            "section (plain data: write it to a YAML file first)"
        )
    from abm.calibration import optimize

    summary = optimize.calibrate(
        scenario,
        out,
        trials,
        sets,
        progress,
        note=note,
        method=method,
        backend=backend,
        workers=workers,
        ray_address=ray_address,
        names=names or PYTHON,
        agents=agents,
        replicates=replicates,
        device=device,
        rerun_progress=rerun_progress,
        reused=reused,
        warn=warn,
    )
    result = CalibrationResult(summary, Path(summary["folder"]))
    if warn:  # once the folder is written: a filter that makes the note an error loses nothing
        from abm import result_notes, scenario_notes

        scenario_notes.warn(result_notes.with_result(result_notes.calibration_notes(summary), result))
    return result
