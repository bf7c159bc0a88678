"""Calibration to observed data: targets, the observation model, losses and optimizers.
Entry point: :func:`abm.calibration.optimize.calibrate` (the ``abm calibrate`` command)."""
