"""FedAvg with BatchNorm under differential privacy: running statistics never go through the noisy sum.

Before the fix, FedAvg sent parameters and BatchNorm running statistics as one vector through the DP
sum; the noise made running variances negative and the models' outputs NaN. Now only trainable
parameters are clipped, noised and summed, and every participant keeps its own running statistics.
"""

from __future__ import annotations

import math

import pytest
import torch

from abm.learning.messages import Message, MessageKind, Network
from abm.learning.models import flat_params, trainable_flat
from abm.learning.protocols import RunContext
from abm.learning.protocols.configs import FedAvgConfig
from abm.learning.protocols.fedavg import FedAvg
from abm.learning.runner import build_aggregator, build_participants, prepare_data
from abm.learning.scenario import PrivacySpec, load_scenario


class _Log(Network):
    def __init__(self) -> None:
        super().__init__()
        self.log: list[Message] = []

    def send(self, msg: Message) -> Message:
        self.log.append(msg)
        return super().send(msg)


def _setup(privacy: dict | None, bn_stats: str = "auto", rounds: int = 3):
    s = load_scenario(
        {
            "name": "bn_dp",
            "seed": 2,
            "data": {
                "source": "gaussian_mixture",
                "n_samples": 600,
                "n_classes": 4,
                "n_features": 6,
                "modes_per_class": 1,
                "separation": 3.0,
            },
            "split": {"participants": 3, "label_skew": {"alpha": 0.5}},
            "models": [{"kind": "mlp", "hidden": [16, 8], "batchnorm": True}],
            "rounds": rounds,
            "protocols": [{"name": "local"}],  # FedAvg is run below
        }
    )[0]
    data = prepare_data(s)
    ps = build_participants(s, data, s.models)
    spec = PrivacySpec.model_validate(privacy) if privacy is not None else None
    agg = build_aggregator(spec, [p.pid for p in ps], s.seed)
    ctx = RunContext(ps, 4, (6,), rounds, 1, s.seed, network=_Log(), aggregator=agg)
    fa = FedAvg(FedAvgConfig(bn_stats=bn_stats))
    return ps, ctx, fa


def _buffers(model: torch.nn.Module) -> dict[str, torch.Tensor]:
    return {k: v for k, v in model.state_dict().items() if "running" in k}


def test_dp_noise_never_touches_batchnorm_statistics():
    dp = {"secure_aggregation": True, "dp": {"clip": 1.0, "noise_multiplier": 2.0, "delta": 1e-5}}
    ps, ctx, fa = _setup(dp)
    fa.setup(ctx)
    for t in range(ctx.rounds):
        fa.run_round(ctx, t)
    n_trainable = sum(q.numel() for q in ps[0].model.parameters())
    assert not fa.share_buffers
    assert fa.global_flat.numel() == n_trainable < flat_params(ps[0].model).numel()
    # what reached the server each round: one masked vector per participant, of trainable parameters only
    masked = [m for m in ctx.network.log if m.kind == MessageKind.MASKED_VECTOR]
    assert len(masked) == ctx.rounds * len(ps)
    assert {m.payload["y"].numel() for m in masked} == {n_trainable}
    for p in ps:
        # everyone holds the global parameters ...
        assert torch.equal(trainable_flat(p.model), fa.global_flat)
        # ... with its own, finite running statistics (variances positive)
        buf = _buffers(p.model)
        assert all(torch.isfinite(v).all() for v in buf.values())
        assert all((v > 0).all() for k, v in buf.items() if k.endswith("running_var"))
        out = p.model.eval()(p.data.test.x)
        assert torch.isfinite(out).all()
        assert math.isfinite(p.score())
    # the statistics stayed local: they differ between participants (label-skewed data)
    a, b = _buffers(ps[0].model), _buffers(ps[1].model)
    assert not torch.allclose(a["body.1.running_mean"], b["body.1.running_mean"])


def test_without_dp_statistics_are_averaged_as_before():
    ps, ctx, fa = _setup(None, rounds=1)
    fa.setup(ctx)
    fa.run_round(ctx, 0)
    assert fa.share_buffers
    for p in ps:  # the whole state, statistics included, is the global average
        assert torch.equal(flat_params(p.model), fa.global_flat)


def test_local_statistics_without_dp_and_shared_statistics_with_dp_refused():
    ps, ctx, fa = _setup(None, bn_stats="local", rounds=1)
    fa.setup(ctx)
    fa.run_round(ctx, 0)
    assert not fa.share_buffers
    assert not torch.equal(_buffers(ps[0].model)["body.1.running_var"], _buffers(ps[2].model)["body.1.running_var"])
    _, ctx, fa = _setup({"dp": {"clip": 1.0, "noise_multiplier": 1.0, "delta": 1e-5}}, bn_stats="shared")
    with pytest.raises(ValueError, match="bn_stats 'shared' with differential privacy"):
        fa.setup(ctx)
