"""Recovery on each institution's own range, and CYCle's fall-back to local-only in private calibration."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import torch
import yaml

from abm.populations import load_region
from abm.private_calibration.evaluation import estimates, protocol_table
from abm.private_calibration.federation import run_protocol
from abm.private_calibration.institutions import build_institution, build_institutions, model_scenario
from abm.private_calibration.scenario import CalibrationProtocolSpec, load_scenario

TINY = Path(__file__).parent / "tiny.yaml"


def _tiny(**evaluation) -> dict:
    data = yaml.safe_load(TINY.read_text())
    data["model"]["scenario"] = str((TINY.parent / data["model"]["scenario"]).resolve())
    data["evaluation"].update(evaluation)
    return data


@pytest.fixture(scope="module")
def setup():
    scenario, base = load_scenario(_tiny())
    institutions, _ = build_institutions(scenario, base)
    return scenario, institutions


def test_own_prior_holdout_lies_in_the_prior_and_leaves_the_other_draws_alone():
    """Seattle's prior is transmission [0.6, 1.0] = bin 0 of [0.6, 1.4] in 2 bins; its own-prior
    held-out set must hold only that bin, while the full-range held-out set holds both. Drawing
    the own-prior set (last) must not change the training, validation, held-out or observed data."""
    with_own, base = load_scenario(_tiny(own_holdout_simulations=12))
    without, _ = load_scenario(_tiny(own_holdout_simulations=0))
    model = model_scenario(with_own, base)
    county = load_region(model.population.region)
    a = build_institution(with_own, model, county, 0)
    b = build_institution(without, model, county, 0)
    assert b.own_test is None and a.own_test is not None and len(a.own_test) == 12
    for part in ("train", "val", "test"):
        assert torch.equal(getattr(a.data, part).x, getattr(b.data, part).x)
        assert torch.equal(getattr(a.data, part).y, getattr(b.data, part).y)
    assert torch.equal(a.observed_x, b.observed_x)
    grid = with_own.grid()
    t = grid.names.index("transmission")
    assert set(grid.bins_of(a.own_test.y)[:, t].tolist()) == {0}
    assert set(grid.bins_of(a.data.test.y)[:, t].tolist()) == {0, 1}
    assert a.simulations == b.simulations + 12


def test_report_gives_recovery_and_gains_on_the_own_range(setup):
    scenario, institutions = setup
    runs = [run_protocol(scenario, institutions, CalibrationProtocolSpec(name=n)) for n in ("local", "vpdl")]
    grid = scenario.grid()
    per = {r.key: estimates(r, institutions, grid) for r in runs}
    for rows in per.values():
        for row in rows:
            row["fit"] = {"cases": {"nd_weekly": 0.0, "rmse_log1p_weekly": 0.0}}
    table = protocol_table(runs, per, institutions)
    local = [p.own_score() for p in runs[0].participants]
    for key, run in zip(("local", "vpdl"), runs, strict=True):
        own = [p.own_score() for p in run.participants]
        rows = table[key]["institutions"]
        assert [r["recovery_own"] for r in rows] == own
        assert [r["gain_own"] for r in rows] == pytest.approx(np.subtract(own, local).tolist())
        assert table[key]["mcg_own"] == pytest.approx(float(np.mean(np.subtract(own, local))))
        assert table[key]["min_gain_own"] == pytest.approx(float(np.min(np.subtract(own, local))))
        # the own-range score is measured on the own-prior set, not on the full-range one
        p = run.participants[0]
        assert p.own_score() == pytest.approx(float(np.mean(list(p.recovery(institutions[0].own_test).values()))))
    assert table["local"]["mcg_own"] == 0.0


def _params(run) -> list[torch.Tensor]:
    return [torch.cat([q.detach().reshape(-1) for q in p.model.parameters()]) for p in run.participants]


@pytest.mark.parametrize("batch_size", [16, 31])
def test_cycle_with_zero_trust_is_local_only_for_mixed_calibrators(setup, batch_size):
    """With every reputation 0 (tau_opt < tau_max < 0, so h(s) = 0 on [0, 1]) no peer's
    predictions enter any loss: each institution's MLP / CNN / GRU calibrator ends with exactly
    its local-only weights (same data, epochs, batches and optimizer), so CYCle's gain is 0. With
    full trust (VPDL) the weights differ: distillation is the only channel, and it is live.
    Batch size 31 on 32 training pairs leaves a final batch of one, which local-only merges into
    the previous batch: CYCle must batch the same way (it used to drop that sample)."""
    scenario, institutions = setup
    data = _tiny()
    data["rounds"] = 5  # warm-up 1 round, then 4 rounds with distillation
    data["training"]["batch_size"] = batch_size
    assert len(institutions[0].data.train) % batch_size in (0, 1)
    scenario, _ = load_scenario(data)
    local = run_protocol(scenario, institutions, CalibrationProtocolSpec(name="local"))
    zero = run_protocol(
        scenario,
        institutions,
        CalibrationProtocolSpec(name="cycle", params={"tau_opt": -1.0, "tau_max": -0.5}),
    )
    vpdl = run_protocol(scenario, institutions, CalibrationProtocolSpec(name="vpdl"))
    rep = np.array(zero.summary["reputation"], dtype=float)
    assert np.all(rep[~np.eye(len(institutions), dtype=bool)] == 0.0)
    for a, b, c in zip(_params(local), _params(zero), _params(vpdl), strict=True):
        assert torch.equal(a, b)
        assert not torch.allclose(a, c)
    assert [p.score() for p in zero.participants] == [p.score() for p in local.participants]
