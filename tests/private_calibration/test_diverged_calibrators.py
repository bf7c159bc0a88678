"""A private calibration whose calibrators' training diverges (a learning rate of 10^12) runs to
its end: MAPL's graph step ended it in an IndexError, and an estimate that is not finite (a
calibrator whose output is NaN) in a RuntimeError as the end-to-end fit simulated it."""

from __future__ import annotations

import json
import math
import subprocess
import sys
from pathlib import Path

import yaml

TINY = Path(__file__).parent / "tiny.yaml"


def learn_at_a_huge_rate(tmp_path, protocols):
    """``abm learn`` of tiny.yaml at training lr 10^12 with ``protocols(its protocols)``, in a
    process of its own; returns the finished process and the output folder."""
    sc = yaml.safe_load(TINY.read_text())
    sc["model"]["scenario"] = str((TINY.parent / sc["model"]["scenario"]).resolve())
    sc["training"]["lr"] = 1e12
    sc["protocols"] = protocols(sc["protocols"])
    path = tmp_path / "diverged.yaml"
    path.write_text(yaml.safe_dump(sc))
    out = tmp_path / "out"
    cmd = [sys.executable, "-m", "abm", "learn", str(path), "--out", str(out)]
    return subprocess.run(cmd, capture_output=True, text=True), out


def test_diverged_calibrators_are_warned_of_and_their_estimates_not_simulated(tmp_path):
    """tiny.yaml with MAPL alone at lr 10^12 (Adam): institution 1's calibrator outputs NaN by
    the end, so its estimate is not finite: null in report.json, with its ND, and "not finite" in
    report.md, not simulated (no curve in fits.png); MAPL's non-finite losses are warned of and
    recorded. Its prototypes, not finite, are left out of the others' averages
    (privacy.withheld): they turned the other two institutions' calibrators NaN with it, now
    those stay finite and are simulated, as local-only's are (Adam's steps are bounded by the
    rate), and mean ND is theirs."""
    proc, out = learn_at_a_huge_rate(
        tmp_path, lambda ps: [{"name": "mapl", "params": {"proto_dim": 8, "projector_hidden": 8}}]
    )
    assert proc.returncode == 0, proc.stderr
    assert "warning: mapl: the training loss of institution" in proc.stderr

    def strict(token: str) -> None:
        raise AssertionError(f"report.json holds {token}, which is not JSON")

    report = json.loads((out / "report.json").read_text(), parse_constant=strict)
    mapl, local = report["protocols"]["mapl"], report["protocols"]["local"]
    assert {e["participant"] for e in mapl["nonfinite_losses"]} == {1}
    assert mapl["privacy"]["withheld"] == [
        {"round": t, "participants": [1], "sums": 1, "skipped": 0, "discarded": 0} for t in range(3)
    ]
    assert mapl["summary"]["nonfinite_similarities"]
    diverged = mapl["institutions"][1]
    assert set(diverged["estimate"].values()) == {None}
    assert diverged["nd_mean"] is None and set(diverged["nd"].values()) == {None}
    finite = [mapl["institutions"][0], mapl["institutions"][2], *local["institutions"]]
    for row in finite:
        assert all(math.isfinite(v) for v in row["estimate"].values()) and row["nd_mean"] >= 0
    assert mapl["mean_nd"] == (finite[0]["nd_mean"] + finite[1]["nd_mean"]) / 2
    cells = (out / "report.md").read_text().split("| mapl | ")[-1].splitlines()[0].split(" | ")
    assert cells[1] == "not finite (training diverged): not simulated"
    assert "(ND " in cells[0] and "(ND " in cells[2]
    assert (out / "fits.png").exists()


def test_diverged_calibrators_under_secure_aggregation_and_dp_run_to_the_end(tmp_path):
    """tiny.yaml's FedAvg and CoDream under secure aggregation, and FedAvg under DP at a target
    epsilon, at lr 10^12: the calibrators' updates leave the fixed-point range, which ended the
    run (exit 1, no results); plain FedAvg's are not finite, which turned its model NaN. Now the
    run exits 0: each institution holds its update back, FedAvg's sums are not released in any
    round (its calibrators stay at the shared initialisation; plain FedAvg's too, its updates held
    back from the plain sum) and CoDream's are recorded as withheld, report.md says so, and DP
    spends no more than its target."""
    mlp = [{"kind": "mlp", "hidden": [16], "embed_dim": 8}]
    dp = {"secure_aggregation": True, "dp": {"clip": 0.4, "epsilon": 8.0, "delta": 1e-5}}
    fedavg_dp = {"name": "fedavg", "label": "fedavg_dp", "models": mlp, "privacy": dp}
    fedavg_plain = {"name": "fedavg", "label": "fedavg_plain", "models": mlp}
    proc, out = learn_at_a_huge_rate(
        tmp_path, lambda ps: [p for p in ps if p["name"] in ("fedavg", "codream")] + [fedavg_dp, fedavg_plain]
    )
    assert proc.returncode == 0, proc.stderr
    assert "warning: fedavg: institutions 0, 1, 2 held back their vectors from the secure sum in round 0" in proc.stderr
    report = json.loads((out / "report.json").read_text())
    fedavg, codream = report["protocols"]["fedavg"], report["protocols"]["codream"]
    assert fedavg["privacy"]["withheld"] == [
        {"round": t, "participants": [0, 1, 2], "sums": 1, "skipped": 1, "discarded": 0} for t in range(3)
    ]
    assert len(set(fedavg["history"])) == 1  # the same model scored after every round
    assert codream["privacy"]["withheld"]
    assert report["protocols"]["fedavg_dp"]["epsilon"] <= 8.0
    plain = report["protocols"]["fedavg_plain"]  # no privacy block: the plain sum leaves them out too
    assert plain["privacy"] == {
        "secure_aggregation": False,
        "dropouts": [],
        "withheld": [
            {"round": t, "participants": [0, 1, 2], "sums": 1, "skipped": 1, "discarded": 0} for t in range(3)
        ],
        "dp": None,
    }
    assert len(set(plain["history"])) == 1
    md = (out / "report.md").read_text()
    assert "Warning: fedavg: institutions 0, 1, 2 held back vectors the secure sum cannot carry" in md
    assert "Warning: codream: institutions" in md
    assert (
        "Warning: fedavg_plain: institutions 0, 1, 2 held back vectors the sum cannot carry (NaN, inf, or so large "
        "the sum could overflow: training diverged) in 3 rounds from round 0, left out as dropouts are; 3 sums not "
        "released" in md
    )
