"""DP in private calibration: the scenario states its budget, the run spends it, the report says so."""

from __future__ import annotations

from pathlib import Path

import yaml

from abm.learning.privacy.accountant import noise_multiplier_for, rdp_epsilon
from abm.learning.runner import privacy_settings
from abm.private_calibration.federation import run_protocol
from abm.private_calibration.institutions import build_institutions
from abm.private_calibration.report import institution_privacy, markdown
from abm.private_calibration.scenario import CalibrationProtocolSpec, load_scenario

ROOT = Path(__file__).resolve().parents[2]
TINY = Path(__file__).parent / "tiny.yaml"


def test_default_scenario_states_the_dp_budget():
    scenario, _ = load_scenario(ROOT / "scenarios/learning/private_calibration.yaml")
    spec = next(s for s in scenario.protocols if s.key == "fedavg_secure_dp")
    assert spec.privacy is not None and spec.privacy.secure_aggregation
    dp = spec.privacy.dp
    assert dp is not None and (dp.epsilon, dp.delta, dp.noise_multiplier) == (8.0, 1e-5, None)
    settings = institution_privacy(privacy_settings(spec, scenario.rounds, len(scenario.institutions)))
    sigma = settings["dp"]["noise_multiplier"]
    assert sigma == noise_multiplier_for(8.0, scenario.rounds, 1e-5)
    assert 8.0 - 1e-6 < rdp_epsilon(sigma, scenario.rounds, 1e-5) <= 8.0
    assert settings["dp"]["target_epsilon"] == 8.0 and settings["dp"]["rounds"] == scenario.rounds == 40
    assert settings["dp"]["level"].startswith("institution") and settings["dp"]["releases"] is None  # not yet run


def test_tiny_federation_spends_exactly_the_target_epsilon():
    data = yaml.safe_load(TINY.read_text())
    data["model"]["scenario"] = str((TINY.parent / data["model"]["scenario"]).resolve())
    data["protocols"] = [{"name": "local"}]  # the run below is given its own
    scenario, base = load_scenario(data)
    institutions, _ = build_institutions(scenario, base)
    privacy = {"secure_aggregation": True, "dp": {"clip": 0.3, "epsilon": 2.0, "delta": 1e-5}}
    spec = CalibrationProtocolSpec.model_validate(
        {
            "name": "fedavg",
            "label": "dp",
            "models": [{"kind": "mlp", "hidden": [16], "embed_dim": 8}],
            "privacy": privacy,
        }
    )
    run = run_protocol(scenario, institutions, spec)
    assert 2.0 - 1e-6 < run.epsilon <= 2.0 and run.delta == 1e-5
    # what the server received: masked vectors only, one per institution and round
    sent = [m for m in run.network.messages if m.sender in (0, 1, 2)]
    assert not [m for m in sent if m.kind.value == "model_update"]
    masked = [m for m in sent if m.kind.value == "masked_vector"]
    want = sorted((k, t) for k in range(3) for t in range(scenario.rounds))
    assert sorted((m.sender, m.round) for m in masked) == want
    row = {
        "institutions": [{"recovery": 0.5, "estimate": {"transmission": 1.0}, "nd_mean": 0.1}],
        "mean_recovery": 0.5,
        "mcg": 0.0,
        "cgs": 0.0,
        "min_gain": 0.0,
        "mean_nd": 0.1,
        "bytes_total": 0,
        "wall_time_s": 0.0,
        "epsilon": run.epsilon,
        "delta": run.delta,
        "privacy": institution_privacy(run.privacy),
    }
    md = markdown(
        {
            "scenario": "t",
            "mode": "kc2020",
            "note": "",
            "joint_classes": 8,
            "parameters": {"transmission": {}},
            "institutions": [{"name": "A"}],
            "protocols": {"dp": row},
        }
    )
    sigma = noise_multiplier_for(2.0, scenario.rounds, 1e-5)
    assert run.privacy["dp"]["releases"] == scenario.rounds  # FedAvg: one noisy sum a round
    assert f"DP (dp): epsilon 2 at delta 1e-05 per institution over {scenario.rounds} noisy releases in" in md
    assert f"clip 0.3, noise multiplier {sigma:.3g}." in md


def test_abm_learn_refuses_dp_without_a_noise_setting(tmp_path):
    from typer.testing import CliRunner

    from abm.cli import app

    data = yaml.safe_load(TINY.read_text())
    data["model"]["scenario"] = str((TINY.parent / data["model"]["scenario"]).resolve())
    data["protocols"] = [
        {"name": "fedavg", "models": [{"kind": "mlp", "hidden": [16]}], "privacy": {"dp": {"clip": 1}}}
    ]
    bad = tmp_path / "bad.yaml"
    bad.write_text(yaml.safe_dump(data))
    out = tmp_path / "out"
    result = CliRunner().invoke(app, ["learn", str(bad), "--out", str(out)])
    assert result.exit_code == 2
    assert str(bad) in result.stderr and "protocols[0].privacy.dp" in result.stderr
    assert "exactly one of noise_multiplier and epsilon" in result.stderr
    assert not out.exists()
