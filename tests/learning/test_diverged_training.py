"""Training that diverges (a loss that is NaN or inf, at too high a learning rate) scored without a
word: abm learn now warns on the console with the protocol, the participants and the round, and
report.json (nonfinite_losses) and report.md say so; the run goes on."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import torch
import yaml
from typer.testing import CliRunner

from abm.cli import app
from abm.learning.data import Dataset
from abm.learning.report import diverged_lines
from abm.learning.training import LossWatch, TrainConfig, make_optimizer, train_epochs

# A protocol of each training loop of its own: FedAvg's (Participant.train), CYCle's distillation
# epochs, IPA's alignment turns, CoDream's distillation on the dreams, centralized's pooled model.
PROTOCOLS = [{"name": n} for n in ("fedavg", "cycle", "ipa", "codream", "centralized")]


def scenario(tmp_path: Path, lr: float) -> Path:
    sc = {
        "name": "diverge",
        "seed": 0,
        "data": {"source": "gaussian_mixture", "n_samples": 600, "n_classes": 4, "n_features": 8},
        "split": {"participants": 3},
        "models": [{"kind": "mlp", "hidden": [16], "batchnorm": False}],
        "rounds": 3,
        "training": {"optimizer": "sgd", "lr": lr},
        "protocols": PROTOCOLS,
    }
    path = tmp_path / f"lr{lr:g}.yaml"
    path.write_text(yaml.safe_dump(sc))
    return path


def test_train_epochs_counts_every_loss_that_is_not_finite():
    """Features that are NaN make every minibatch's loss NaN: 40 rows in batches of 16 (the last
    8 kept) over 3 epochs are 9 losses, each counted; finite features count none."""
    torch.manual_seed(0)
    model = torch.nn.Linear(4, 2)
    data = Dataset(torch.full((40, 4), float("nan")), torch.zeros(40, dtype=torch.int64))
    watch = LossWatch()
    opt = make_optimizer(model.parameters(), TrainConfig())
    train_epochs(model, opt, data, 3, 16, torch.Generator().manual_seed(0), watch=watch)
    assert watch.take() == 9 and watch.take() == 0  # taken once
    finite = Dataset(torch.zeros(40, 4), torch.zeros(40, dtype=torch.int64))
    train_epochs(torch.nn.Linear(4, 2), opt, finite, 3, 16, torch.Generator().manual_seed(0), watch=watch)
    assert watch.take() == 0


def warnings_expected(key: str, record: list[dict[str, Any]]) -> list[str]:
    """The console's warning lines for ``record``: one per round in which participants' training
    first diverged, naming them."""
    first: dict[int, int] = {}
    for entry in record:
        first.setdefault(entry["participant"], entry["round"])
    lines = []
    for t in sorted(set(first.values())):
        ids = sorted(pid for pid, r in first.items() if r == t)
        whom = f"participant{'s' if len(ids) > 1 else ''} {', '.join(map(str, ids))}"
        lines.append(
            f"warning: {key}: the training loss of {whom} was not finite (NaN or inf) in round {t} (rounds 0..2): "
            "training diverged (too high a learning rate?); the run goes on, but the scores after it mean little "
            "(report.json: nonfinite_losses)"
        )
    return lines


def test_a_diverging_run_warns_and_says_so_in_its_reports(tmp_path):
    """A learning rate of 10^6: every protocol's training loss turns NaN. Each protocol and
    participant gets its rounds in report.json's nonfinite_losses (each with a count of at least
    one), the console a warning per round in which some first diverged, report.md a line; exit 0,
    all rounds scored. At 0.01 there are none."""
    out = tmp_path / "out"
    result = CliRunner().invoke(app, ["learn", str(scenario(tmp_path, 1e6)), "--out", str(out)])
    assert result.exit_code == 0, result.output
    report = json.loads((out / "report.json").read_text())
    warned = [line for line in result.stderr.splitlines() if line.startswith("warning:")]
    expected = []
    for key in ("local", *(p["name"] for p in PROTOCOLS)):
        prot = report["protocols"][key]
        record = prot["nonfinite_losses"]
        assert {e["participant"] for e in record} == {0, 1, 2}, key
        assert all(e["losses"] >= 1 and 0 <= e["round"] <= 2 for e in record), key
        assert len(prot["history"]) == 3, key  # the run went on
        expected += warnings_expected(key, record)
    assert warned == expected
    md = (out / "report.md").read_text()
    assert md.count("Warning: ") == len(report["protocols"])
    assert "Warning: fedavg: training diverged, its loss not finite (NaN or inf) for participants 0, 1, 2 from" in md

    sane = CliRunner().invoke(app, ["learn", str(scenario(tmp_path, 0.01)), "--out", str(tmp_path / "sane")])
    assert sane.exit_code == 0, sane.output
    assert "warning:" not in sane.stderr
    report = json.loads((tmp_path / "sane" / "report.json").read_text())
    assert all(prot["nonfinite_losses"] == [] for prot in report["protocols"].values())


def test_report_md_names_diverged_institutions_by_the_round_they_first_did():
    record = [
        {"round": 1, "participant": 2, "losses": 3},
        {"round": 2, "participant": 0, "losses": 1},
        {"round": 2, "participant": 2, "losses": 4},
    ]
    protocols = {"fedavg": {"nonfinite_losses": record}, "local": {"nonfinite_losses": []}}
    assert diverged_lines(protocols, "institution") == [
        "Warning: fedavg: training diverged, its loss not finite (NaN or inf) for institution 2 from round 1; "
        "institution 0 from round 2 (rounds from 0): the scores after it mean little (nonfinite_losses in "
        "report.json)."
    ]
