"""Private calibration of the King County model across institutions (the learning specification's task 2).

Each institution (a set of King County tracts) builds its own synthetic population, simulates
(observed window -> parameter bins) training pairs under its own partial prior, and trains an
amortized calibrator; the protocols of :mod:`abm.learning` let the institutions improve their
calibrators together without pooling series, populations or simulations.

Entry points: ``abm learn scenarios/learning/private_calibration.yaml`` and
:func:`abm.private_calibration.report.run_private_calibration`.
"""

from abm.private_calibration.scenario import PrivateCalibrationScenario, is_private_calibration, load_scenario

__all__ = ["PrivateCalibrationScenario", "is_private_calibration", "load_scenario"]
