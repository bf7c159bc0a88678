"""Privacy wrappers for protocols whose aggregation is a sum: secure aggregation and DP.

``SecureSum`` needs the ``cryptography`` package; it is imported on first use.
"""

from typing import Any

from abm.learning.privacy.aggregation import PlainSum, SumAggregator
from abm.learning.privacy.dp import (
    DifferentiallyPrivateSum,
    DPAccountant,
    PrivacyBudgetExceeded,
    clip_l2,
    noise_multiplier_for,
)


def __getattr__(name: str) -> Any:
    if name == "SecureSum":
        from abm.learning.privacy.secure_aggregation import SecureSum

        return SecureSum
    raise AttributeError(name)


__all__ = [
    "DPAccountant",
    "DifferentiallyPrivateSum",
    "PlainSum",
    "PrivacyBudgetExceeded",
    "SecureSum",
    "SumAggregator",
    "clip_l2",
    "noise_multiplier_for",
]
