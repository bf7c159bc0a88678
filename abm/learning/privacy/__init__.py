"""Privacy wrappers for protocols whose aggregation is a sum: secure aggregation and DP."""

from abm.learning.privacy.aggregation import PlainSum, SumAggregator
from abm.learning.privacy.dp import DifferentiallyPrivateSum, DPAccountant, clip_l2
from abm.learning.privacy.secure_aggregation import SecureSum

__all__ = [
    "DPAccountant",
    "DifferentiallyPrivateSum",
    "PlainSum",
    "SecureSum",
    "SumAggregator",
    "clip_l2",
]
