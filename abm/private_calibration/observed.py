"""What a private calibration reads of its epidemic model and of the observed data, without
torch or the engine's simulation code, so that ``abm validate`` checks it: the model scenario
every institution simulates, the observed channels, and the county's 2020 series (kc2020 mode).
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

import pandas as pd

from abm.calibration.config import CalibrationConfig
from abm.calibration.errors import CalibrationError
from abm.calibration.observed import load_observed
from abm.overrides import resolve
from abm.set_options import OptionNames

if TYPE_CHECKING:
    from abm.private_calibration.scenario import ModelSection, PrivateCalibrationScenario
    from abm.scenario import Scenario

CHANNELS = ("cases", "hospital_admissions")
PER = 100_000.0

KC2020_NOTE = (
    "kc2020 mode: King County 2020 daily cases (JHU CSSE) and hospital admissions (Public Health - "
    "Seattle & King County) are published for the county only. Each region's series is derived from "
    "the county series by population share (region count = county count x region residents / county "
    "residents), so per 100,000 residents every region observes the county's rates. The truth is unknown: "
    "only the end-to-end deviation is reported against data."
)


def model_scenario(scenario: PrivateCalibrationScenario, base: Path, source: str | None = None) -> Scenario:
    """The engine scenario every institution simulates, with the scenario's overrides
    (``model.set``). Messages name a bad override by the scenario file ``source`` and its key
    (``FILE: model.set[1]: ...``), not as the command line's ``--set``."""
    names = OptionNames(set_key=f"{source}: model.set" if source else "model.set")
    return resolve(base / scenario.model.scenario, sets=list(scenario.model.set), names=names)


def observed_kc2020(section: ModelSection, county_population: float) -> pd.DataFrame:
    """The county's 2020 daily series per 100k residents over the window (see KC2020_NOTE)."""
    cfg = CalibrationConfig(
        start_date=section.start_date, targets=list(CHANNELS), fit_window=section.window, holdout_window=None
    )
    try:
        frame = load_observed(cfg)
    except CalibrationError as exc:  # the scenario's key is model.window, not a calibration section's
        raise CalibrationError(f"model.window: {str(exc).removeprefix('calibration.fit_window: ')}") from None
    days = pd.date_range(section.window[0], section.window[1], freq="D")
    return frame.reindex(days) * (PER / county_population)
