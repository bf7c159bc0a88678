"""The calibration's error, apart from the modules that raise it (which load pandas and torch), so
that a command that only catches it (``abm validate``) loads neither."""

from __future__ import annotations


class CalibrationError(ValueError):
    """Bad calibration data or windows; the message is meant for the user as is."""
