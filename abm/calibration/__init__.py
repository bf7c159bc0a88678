"""Calibration to observed data: targets, the observation model, losses and optimizers.
Entry point: :func:`abm.calibration.result.calibrate` (``abm.calibrate``; the ``abm calibrate`` command),
which runs :func:`abm.calibration.optimize.calibrate`."""
