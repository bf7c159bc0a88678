"""Training that diverges (a loss that is NaN or inf, at too high a learning rate) scored without a
word: abm learn now warns on the console with the protocol, the participants and the round, and
report.json (nonfinite_losses) and report.md say so; the run goes on."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import torch
import yaml
from typer.testing import CliRunner

from abm.cli import app
from abm.learning.data import Dataset
from abm.learning.protocols import protocol_names
from abm.learning.protocols.configs import MAPLConfig
from abm.learning.protocols.mapl import graph_step, project_simplex, unjudged_peers
from abm.learning.protocols.traits import protocol_traits
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
    all rounds scored (FedAvg's and CoDream's sums leave the updates that are not finite out, and
    IPA the peers whose turn diverged out of its ring, and say so too). At 0.01 there are none."""
    out = tmp_path / "out"
    result = CliRunner().invoke(app, ["learn", str(scenario(tmp_path, 1e6)), "--out", str(out)])
    assert result.exit_code == 0, result.output
    report = json.loads((out / "report.json").read_text())
    warned = [line for line in result.stderr.splitlines() if line.endswith("(report.json: nonfinite_losses)")]
    expected = []
    for key in ("local", *(p["name"] for p in PROTOCOLS)):
        prot = report["protocols"][key]
        record = prot["nonfinite_losses"]
        assert {e["participant"] for e in record} == {0, 1, 2}, key
        assert all(e["losses"] >= 1 and 0 <= e["round"] <= 2 for e in record), key
        assert len(prot["history"]) == 3, key  # the run went on
        expected += warnings_expected(key, record)
    assert warned == expected
    # the summing protocols leave the updates that are not finite out of their sums, and IPA the
    # peers whose turn diverged out of its ring (privacy.withheld)
    withheld = {k for k, prot in report["protocols"].items() if (prot["privacy"] or {}).get("withheld")}
    assert withheld == {"fedavg", "codream", "ipa"}
    md = (out / "report.md").read_text()
    assert md.count("Warning: ") == len(report["protocols"]) + len(withheld)
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


def run(tmp_path: Path, name: str, training: dict[str, Any], protocols: list[dict[str, Any]]) -> tuple[Any, dict]:
    """``abm learn`` of a tiny scenario with ``training`` and ``protocols``: the CLI's result and
    report.json."""
    sc = {
        "name": name,
        "seed": 0,
        "data": {"source": "gaussian_mixture", "n_samples": 600, "n_classes": 4, "n_features": 8},
        "split": {"participants": 3},
        "models": [{"kind": "mlp", "hidden": [16], "batchnorm": False}],
        "rounds": 3,
        "training": training,
        "protocols": protocols,
    }
    path = tmp_path / f"{name}.yaml"
    path.write_text(yaml.safe_dump(sc))
    result = CliRunner().invoke(app, ["learn", str(path), "--out", str(tmp_path / name)])
    assert result.exit_code == 0, result.output
    return result, json.loads((tmp_path / name / "report.json").read_text())


def test_mapl_whose_heads_turn_nan_warns_and_leaves_them_out_of_the_graph(tmp_path):
    """MAPL trains with Adam, whose steps stay finite at a learning rate of 10^6, but at 10^12 its
    heads turn NaN in round 0 and the graph step ended the run in an IndexError (project_simplex
    of NaN). Now the run goes on, warned of, with every participant's non-finite losses recorded;
    the graph step leaves every peer out of every row (all similarities NaN), so each row is the
    participant alone, every round, and the summary says so."""
    result, report = run(tmp_path, "mapl", {"optimizer": "adam", "lr": 1e12}, [{"name": "mapl"}])
    mapl = report["protocols"]["mapl"]
    assert {e["participant"] for e in mapl["nonfinite_losses"]} == {0, 1, 2}
    assert "warning: mapl: the training loss of participants 0, 1, 2 was not finite" in result.stderr
    assert len(mapl["history"]) == 3
    assert mapl["summary"]["graph"] == [[1.0, 0.0, 0.0], [0.0, 1.0, 0.0], [0.0, 0.0, 1.0]]
    others = [[1, 2], [0, 2], [0, 1]]
    assert mapl["summary"]["nonfinite_similarities"] == [
        {"round": t, "participant": i, "peers": others[i]} for t in range(3) for i in range(3)
    ]


def test_a_mapl_graph_step_leaves_out_the_peers_it_cannot_compare():
    """Row 0 of three, uniform, with peer 1's similarity NaN: the step runs over entries 0 and 2
    alone (w = 1/3 each; s = (1, 0.5) max-normalised to (1, 1); the gradient -mu1 gamma s +
    mu2 beta w / ||w|| is negative for both, so a sign step adds graph_lr to both: 13/30 each,
    projected to 1/2 each), peer 1 gets 0. With no peer comparable the row is self-weight."""
    cfg = MAPLConfig()
    w = np.full(3, 1 / 3)
    gamma = np.full(3, 1 / 3)
    np.testing.assert_allclose(graph_step(w, np.array([1.0, np.nan, 0.5]), gamma, 0, cfg), [0.5, 0.0, 0.5])
    np.testing.assert_array_equal(graph_step(w, np.array([np.nan, 1.0, np.nan]), gamma, 1, cfg), [0.0, 1.0, 0.0])
    assert unjudged_peers(np.array([[1.0, np.nan, 0.5], [np.nan, 1.0, np.nan], [0.5, np.nan, 1.0]])) == [
        [1],
        [0, 2],
        [1],
    ]


def test_a_huge_graph_step_still_projects_onto_the_simplex():
    """A PGD graph step of graph_lr 10^12 from a row on itself (degree 0, so the log-degree
    gradient is -1/eps = -10^6 on each peer) moves the peers by about 10^17, where 1 is below a
    float's resolution: the projection found no entry in its support and raised an IndexError.
    The projection is shift invariant and is now taken from the largest entry (0)."""
    np.testing.assert_array_equal(project_simplex(np.array([1e20, -1e20, 0.0])), [1.0, 0.0, 0.0])
    cfg = MAPLConfig(graph_step="pgd", graph_lr=1e12)
    row = graph_step(np.array([1.0, 0.0, 0.0]), np.array([1.0, 0.9, 0.8]), np.full(3, 1 / 3), 0, cfg)
    assert row.min() >= 0 and row.sum() == pytest.approx(1.0)
    with pytest.raises(ValueError, match="finite"):
        project_simplex(np.array([0.5, np.nan]))


def test_ipa_fair_stop_counts_the_non_finite_losses_of_its_baseline_copies(tmp_path):
    """phi, fair_stop's baseline, is each peer's local-only training on a copy of its model: at a
    training learning rate of 10^6 (SGD) it diverges exactly as local-only's does (the same
    initial models, minibatches and steps), while IPA's own turns run at lr 0.01 and stay finite.
    Its non-finite losses went unreported (ipa's nonfinite_losses empty); now each peer's count
    over the whole copy's training is reported with round 0's, equal to local-only's over its
    three rounds."""
    ipa = {"name": "ipa", "params": {"lr": 0.01, "fair_stop": {"rule": "last_fair"}}}
    result, report = run(tmp_path, "ipa", {"optimizer": "sgd", "lr": 1e6}, [ipa])
    local = report["protocols"]["local"]["nonfinite_losses"]
    per_peer = {k: sum(e["losses"] for e in local if e["participant"] == k) for k in range(3)}
    assert all(per_peer.values())
    assert report["protocols"]["ipa"]["nonfinite_losses"] == [
        {"round": 0, "participant": k, "losses": per_peer[k]} for k in range(3)
    ]
    assert "warning: ipa: the training loss of participants 0, 1, 2 was not finite (NaN or inf) in round 0" in (
        result.stderr
    )


LEARNING_RATES = [("fedavg", "training.lr")] + [
    (name, f"protocols[0].params.{key}")
    for name in protocol_names()
    for key in protocol_traits(name).config.model_fields
    if key.endswith("lr")
]


@pytest.mark.parametrize("value", [0, -0.01])
@pytest.mark.parametrize(("protocol", "key"), LEARNING_RATES)
def test_a_learning_rate_not_above_zero_is_refused_at_load(tmp_path, protocol, key, value):
    """Every learning rate a learning scenario takes (training.lr and each protocol's params
    ending in lr) is refused at 0 or below, in one line naming the file, the key, the value and
    what is allowed, exit code 2, before anything runs."""
    path = tmp_path / "lr.yaml"
    sc = yaml.safe_load(scenario(tmp_path, 0.01).read_text())
    path.write_text(yaml.safe_dump({**sc, "protocols": [{"name": protocol}]}))
    out = tmp_path / "never"
    result = CliRunner().invoke(app, ["learn", str(path), "--out", str(out), "--set", f"{key}={value}"])
    assert result.exit_code == 2, result.output
    line = f"invalid scenario: {key}: {value} is not allowed: must be greater than 0"
    assert result.output.strip() == f"error: {path} (with --set {key}={value}): {line}"
    assert not out.exists()


def test_every_protocol_learning_rate_is_checked():
    """The list the test above walks holds the learning rates of FedAvg, CoDream, MAPL and IPA."""
    keys = {key.split(".")[-1] for _, key in LEARNING_RATES}
    assert keys == {"lr", "server_lr", "dream_lr", "generator_lr", "noise_lr", "meta_lr", "graph_lr"}
