"""Privacy wrappers for protocols whose aggregation is a sum: secure aggregation and DP.

Each name is imported from its module on first use: the wrappers need torch (and ``SecureSum``
the ``cryptography`` package), while a scenario's checks read only the accountant
(:mod:`abm.learning.privacy.accountant`) and go without them.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from abm.learning.privacy.accountant import DPAccountant, noise_multiplier_for
    from abm.learning.privacy.aggregation import PlainSum, SumAggregator
    from abm.learning.privacy.dp import DifferentiallyPrivateSum, PrivacyBudgetExceeded, clip_l2
    from abm.learning.privacy.secure_aggregation import SecureSum

_EXPORTS = {
    "DPAccountant": "accountant",
    "noise_multiplier_for": "accountant",
    "PlainSum": "aggregation",
    "SumAggregator": "aggregation",
    "DifferentiallyPrivateSum": "dp",
    "PrivacyBudgetExceeded": "dp",
    "clip_l2": "dp",
    "SecureSum": "secure_aggregation",
}


def __getattr__(name: str) -> Any:
    if name in _EXPORTS:
        return getattr(importlib.import_module(f"{__name__}.{_EXPORTS[name]}"), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


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
