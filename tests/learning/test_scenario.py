"""Learning scenarios: validation messages, the report, atomic output, the CLI function."""

import json
from pathlib import Path

import numpy as np
import pytest

from abm.learning import LearningScenarioError, run_scenario
from abm.learning.scenario import load_scenario
from abm.set_options import PYTHON

SCENARIOS = Path(__file__).resolve().parents[2] / "scenarios" / "learning"


def _tiny(**over):
    sc = {
        "name": "tiny",
        "seed": 0,
        "data": {"source": "iris"},
        "split": {"participants": 2},
        "models": [{"kind": "mlp", "hidden": [8], "batchnorm": False}],
        "rounds": 2,
        "protocols": [{"name": "fedavg"}, {"name": "cycle"}],
    }
    sc.update(over)
    return sc


def test_unknown_key_names_file_path_and_allowed_keys(tmp_path):
    f = tmp_path / "bad.yaml"
    f.write_text("name: x\ndata: {source: iris}\nsplit: {participants: 2, labelskew: {alpha: 1}}\n")
    with pytest.raises(LearningScenarioError) as e:
        load_scenario(f)
    msg = str(e.value)
    assert str(f) in msg and "split.labelskew" in msg and "label_skew" in msg


def test_bad_value_names_path_value_and_what_is_allowed():
    with pytest.raises(LearningScenarioError) as e:
        load_scenario(_tiny(data={"source": "mnist"}))
    msg = str(e.value)
    assert "<dict>" in msg and "data" in msg and "mnist" in msg and "digits" in msg
    with pytest.raises(LearningScenarioError, match=r"split\.label_skew\.alpha.*-1"):
        load_scenario(_tiny(split={"participants": 2, "label_skew": {"alpha": -1}}))
    with pytest.raises(LearningScenarioError, match=r"protocols\[0\]\.params\.muu"):
        load_scenario(_tiny(protocols=[{"name": "fedprox", "params": {"muu": 1}}]))
    with pytest.raises(LearningScenarioError, match=r"protocols\[0\]\.params\.mu.*'x'"):
        load_scenario(_tiny(protocols=[{"name": "fedprox", "params": {"mu": "x"}}]))


def test_every_problem_is_named_on_its_own_line():
    """Like an epidemic scenario's, a learning scenario's message names every problem pydantic
    found (a protocol's params too), each with its key path, its value and what is allowed; a
    section with variants and no tag names the tag as the missing key."""
    with pytest.raises(LearningScenarioError) as e:
        load_scenario(_tiny(seed=-1, rounds=0, colour=2))
    lines = str(e.value).splitlines()
    assert lines[0] == "<dict>: invalid scenario:"
    assert "  seed: -1 is not allowed: must be at least 0" in lines
    assert "  rounds: 0 is not allowed: must be at least 1" in lines
    assert any(line.startswith("  colour: unknown key; allowed keys: name, description, seed,") for line in lines)
    with pytest.raises(LearningScenarioError) as e:
        load_scenario(_tiny(protocols=[{"name": "fedprox", "params": {"mu": -1, "muu": 2}}]))
    lines = str(e.value).splitlines()
    assert "  protocols[0].params.mu: -1 is not allowed: must be at least 0" in lines
    assert (
        "  protocols[0].params.muu: unknown key; did you mean 'mu'? allowed keys: mu, server_lr, weighting, bn_stats"
        in lines
    )
    with pytest.raises(LearningScenarioError, match=r"<dict>: invalid scenario: data\.source: required key is missing"):
        load_scenario(_tiny(data={"n_samples": 30}))
    # a protocol's params are named with the rest of the file's problems
    with pytest.raises(LearningScenarioError) as e:
        load_scenario(_tiny(seed=-1, protocols=[{"name": "fedprox", "params": {"mu": -1}}]))
    lines = str(e.value).splitlines()
    assert "  seed: -1 is not allowed: must be at least 0" in lines
    assert "  protocols[0].params.mu: -1 is not allowed: must be at least 0" in lines
    # true/false for a number (YAML's true would be read as 1) is named with the schema's problems
    with pytest.raises(LearningScenarioError) as e:
        load_scenario(_tiny(rounds=True, seed=-1))
    lines = str(e.value).splitlines()
    assert lines[1:] == [
        "  rounds: true is not allowed: must be a whole number",
        "  seed: -1 is not allowed: must be at least 0",
    ]


def test_semantic_errors():
    mixed = [{"kind": "mlp", "hidden": [8]}, {"kind": "mlp", "hidden": [16]}]
    with pytest.raises(LearningScenarioError, match="one architecture"):
        load_scenario(_tiny(models=mixed, protocols=[{"name": "fedavg"}]))
    with pytest.raises(LearningScenarioError, match="whose aggregation is a sum"):
        load_scenario(_tiny(protocols=[{"name": "cycle", "privacy": {"secure_aggregation": True}}]))
    alone = {"name": "codream", "params": {"collaborate": False}, "privacy": {"secure_aggregation": True}}
    with pytest.raises(LearningScenarioError, match=r"protocols\[0\]\.privacy.*shared in the clear"):
        load_scenario(_tiny(protocols=[alone]))
    load_scenario(_tiny(protocols=[{**alone, "params": {"collaborate": False, "independent_labels": "all"}}]))
    # CoDream-fast has no independent-dreams variant: collaborate: false would run the collaborative
    # method (same scores, same bytes) under an ablation's label
    fast_alone = {"name": "codream_fast", "label": "fast_no_collaboration", "params": {"collaborate": False}}
    with pytest.raises(
        LearningScenarioError, match=r"protocols\[0\]\.params\.collaborate: false is not allowed for codream_fast"
    ):
        load_scenario(_tiny(protocols=[fast_alone]))
    load_scenario(_tiny(protocols=[{"name": "codream_fast", "params": {"collaborate": True}}]))
    with pytest.raises(LearningScenarioError, match="CNN needs image data"):
        load_scenario(_tiny(models=[{"kind": "cnn"}]))
    # a protocol's own models too: they were built only when the protocol ran, which failed with a
    # traceback (exit 1) after the protocols before it had run
    with pytest.raises(LearningScenarioError, match=r"protocols\[1\]\.models\[0\]\.kind: 'cnn' is not allowed"):
        load_scenario(
            _tiny(protocols=[{"name": "fedavg"}, {"name": "fedavg", "label": "f", "models": [{"kind": "cnn"}]}])
        )


def test_run_scenario_writes_report_and_plots(tmp_path):
    out = tmp_path / "runs" / "tiny"
    report = run_scenario(_tiny(), out)
    data = json.loads((out / "report.json").read_text())
    assert set(data["protocols"]) == {"local", "fedavg", "cycle"}
    for r in data["protocols"].values():
        for p in r["participants"]:
            assert p["gain"] == pytest.approx(p["collaborative"] - p["standalone"])
        assert {"mcg", "cgs", "bytes_total", "wall_time_s"} <= set(r)
        b = np.array([p["standalone"] for p in r["participants"]])
        a = np.array([p["collaborative"] for p in r["participants"]])
        assert r["cgs_sample"] == pytest.approx(np.std(a - b, ddof=1))
        if np.ptp(a) == 0 or np.ptp(b) == 0:  # a correlation with a constant is undefined
            assert r["cf"] is None
        else:
            assert r["cf"] == pytest.approx(np.corrcoef(b, a)[0, 1])
    assert data["protocols"]["local"]["cf"] == pytest.approx(1.0)  # local-only against itself
    assert (out / "scores.png").stat().st_size > 1000 and (out / "gains.png").exists()
    assert report["protocols"]["fedavg"]["bytes_total"] > 0
    assert not [p for p in out.parent.iterdir() if p.name.startswith(".")]  # no temp folder


def test_failed_run_leaves_nothing(tmp_path, monkeypatch):
    import abm.learning.runner as runner

    def boom(*a, **k):
        raise RuntimeError("boom")

    monkeypatch.setattr(runner, "run_protocol", boom)
    out = tmp_path / "runs" / "tiny"
    with pytest.raises(RuntimeError):
        run_scenario(_tiny(), out)
    assert list(tmp_path.iterdir()) == []  # nothing written, not even the parent folder
    with pytest.raises(LearningScenarioError):
        run_scenario(_tiny(rounds=0), tmp_path / "x")
    assert not (tmp_path / "x").exists()


@pytest.mark.parametrize(
    ("split", "message"),
    [
        # min_size for each of 40 participants needs 400 of the 300 samples shared: a ValueError's
        # traceback and exit code 1 before.
        (
            {"participants": 40, "quantity_skew": {"alpha": 1.0}},
            "split.quantity_skew.min_size: 10 is not allowed: 40 participants x 10 samples each is 400, more "
            "than the 300 samples shared",
        ),
        # No Dirichlet(0.3) draw gives each of 4 participants 70 of the 300 samples: the run went on
        # with the last draw (a participant of about 20 samples) without a word.
        (
            {"participants": 4, "label_skew": {"alpha": 0.3, "min_size": 70}},
            "split.label_skew.min_size: 70 is not allowed here: in 100 draws of Dirichlet(0.3) label shares "
            "none gave each of the 4 participants at least 70 of the 300 samples shared (participant 1 got 16)",
        ),
    ],
)
def test_a_min_size_the_split_cannot_give_is_refused(tmp_path, split, message):
    data = {"source": "gaussian_mixture", "n_samples": 400, "n_classes": 4, "n_features": 5}
    out = tmp_path / "out"
    with pytest.raises(LearningScenarioError) as e:
        run_scenario(_tiny(data=data, split=split, protocols=[{"name": "fedavg"}]), out)
    assert message in str(e.value), str(e.value)
    assert list(tmp_path.iterdir()) == []


def test_a_scenario_needs_its_protocols():
    """Left out, the protocols were none (the report held the local-only baseline alone)."""
    sc = _tiny()
    del sc["protocols"]
    with pytest.raises(LearningScenarioError, match=r"protocols: required key is missing"):
        load_scenario(sc)


def test_the_oracle_policy_is_allowed_where_the_groups_are_known():
    shift = {"participants": 2, "concept_shift": {"participants": [1], "swaps": [[0, 1]]}}
    oracle = {"name": "p2p_selection", "params": {"policy": "oracle"}}
    assert load_scenario(_tiny(split=shift, protocols=[oracle]))[0].split.concept_shift is not None


def test_an_ipa_stop_at_the_last_round_is_allowed():
    assert load_scenario(_tiny(protocols=[{"name": "ipa", "params": {"stop_round": 2}}]))[0].rounds == 2


@pytest.mark.parametrize(
    ("rounds", "protocol"),
    [
        # the last round (rounds count from 0) still has the mechanism on
        (2, {"name": "cycle", "params": {"warmup_rounds": 1}}),
        (2, {"name": "vpdl", "params": {"warmup_rounds": 1}}),
        (2, {"name": "mapl", "params": {"warmup_rounds": 1}}),
        (2, {"name": "codream", "params": {"dream_start": 1, "adv_start": 1}}),
        (2, {"name": "codream_fast", "params": {"dream_start": 1, "adv_start": 1}}),
        (9, {"name": "cycle", "rounds": 4, "params": {"warmup_rounds": 3}}),
        # a setting that switches nothing off: the mechanism is off anyway
        (2, {"name": "mapl", "params": {"warmup_rounds": 5, "learn_graph": False}}),
        (2, {"name": "mapl", "params": {"warmup_rounds": 5, "aggregate_prototypes": False}}),
        (2, {"name": "codream", "params": {"adv_start": 5, "w_adv": 0.0}}),
        # the defaults in a short run (a fifth or a quarter of 1 round; codream's dream_start 1, adv_start 2):
        # not the user's mistake, and tiny test runs use them
        (1, {"name": "cycle"}),
        (1, {"name": "mapl"}),
        (1, {"name": "codream"}),
        (2, {"name": "codream_fast"}),
        (1, {"name": "cycle", "params": {"warmup_rounds": None}}),
    ],
)
def test_a_start_before_the_last_round_or_a_default_is_allowed(rounds, protocol):
    assert load_scenario(_tiny(rounds=rounds, protocols=[protocol]))[0].protocols[0].name == protocol["name"]


def test_concept_shift_of_disjoint_swaps_is_allowed():
    shift = {"participants": 3, "concept_shift": {"participants": [2, 1], "swaps": [[2, 0], [1, 3]]}}
    sc = load_scenario(_tiny(data={"source": "digits"}, split=shift, protocols=[{"name": "fedavg"}]))[0]
    assert sc.split.concept_shift.swaps == [(2, 0), (1, 3)]


@pytest.mark.parametrize(
    ("over", "message"),
    [
        ({"protocols": []}, "protocols: has 0 items; give at least 1"),
        ({"protocols": [{"name": "ipa", "params": {"stop_round": 3}}]}, "params.stop_round: 3 is not allowed"),
        ({"protocols": [{"name": "codream", "params": {"dream_start": 2}}]}, "params.dream_start: 2 is not allowed"),
        (
            {"split": {"participants": 2, "concept_shift": {"participants": [1], "swaps": [[0, 1], [1, 2]]}}},
            "split.concept_shift.swaps: [[0, 1], [1, 2]] is not allowed: class 1 is in swaps[0] and swaps[1]",
        ),
        ({"name": "a/b"}, "name: 'a/b' is not allowed: write a folder name"),
        (
            {
                "split": {"participants": 3},
                "protocols": [{"name": "p2p_selection", "params": {"topology": "ring", "collaborators": 5}}],
            },
            "params.collaborators: 5 is not allowed with topology ring",
        ),
    ],
)
def test_cli_learn_refuses_what_used_to_run_silently(over, message, tmp_path):
    """Exit code 2, the one message naming the file, and no output folder."""
    import yaml
    from typer.testing import CliRunner

    from abm.cli import app

    f, out = tmp_path / "bad.yaml", tmp_path / "out"
    f.write_text(yaml.safe_dump(_tiny(**over)))
    res = CliRunner().invoke(app, ["learn", str(f), "--out", str(out)])
    assert res.exit_code == 2, res.output
    text = " ".join(res.output.split())
    assert text.startswith(f"error: {f}: ") and message in text, text
    assert not out.exists()


def test_cli_learn_notes_participants_scored_on_few_test_samples(tmp_path, capsys):
    """Iris (150 samples) less a global test set of a quarter, shared by 2 participants, leaves each
    an own test split of about 11 samples: a score moves in steps of about 0.09, and a user read
    gains of -1.0 or +0.5 without a word. report.json now holds the scored set's sizes, and
    ``abm learn`` notes those below 20; scored on the global test set (37 samples), no note."""
    import yaml

    from abm.learning.cli import learn
    from abm.learning.runner import prepare_data

    scenario = _tiny(protocols=[{"name": "fedavg"}])
    own = [len(p.test) for p in prepare_data(load_scenario(scenario)[0]).parts]
    assert max(own) < 20
    for evaluate_on, sizes in (("own", own), ("global", [37, 37])):
        f, out = tmp_path / f"{evaluate_on}.yaml", tmp_path / evaluate_on
        f.write_text(yaml.safe_dump({**scenario, "evaluate_on": evaluate_on}))
        learn(f, out)
        assert json.loads((out / "report.json").read_text())["test_sizes"] == sizes
        notes = [line for line in capsys.readouterr().err.splitlines() if line.startswith("note:")]
        expected = (
            "note: 2 of 2 participants are scored on fewer than 20 test samples of their own: participant "
            f"(samples) 0 ({own[0]}), 1 ({own[1]}); a score moves in steps of 1/n, so their gains say little; give "
            "the participants more data, a larger split.test_fraction, or evaluate_on: global"
        )
        assert notes == ([expected] if evaluate_on == "own" else [])


def test_abm_learn_gives_the_few_test_samples_note_as_a_result_note(tmp_path):
    """`abm learn` notes participants scored on fewer than 20 test samples; abm.learn said nothing.
    Now it gives the same text, once the report folder is written, as a ResultNote at this line
    holding the result; scored on the global test set (37 samples), none. The command itself gives
    no Python warning."""
    import warnings

    import yaml

    import abm
    from abm.learning.cli import learn
    from abm.learning.runner import prepare_data

    scenario = _tiny(protocols=[{"name": "fedavg"}])
    own = [len(p.test) for p in prepare_data(load_scenario(scenario)[0]).parts]
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        result = abm.learn(scenario, tmp_path / "own")
    notes = [w for w in caught if issubclass(w.category, abm.ResultNote)]
    assert [str(w.message) for w in notes] == [
        f"2 of 2 participants are scored on fewer than 20 test samples of their own: participant (samples) "
        f"0 ({own[0]}), 1 ({own[1]}); a score moves in steps of 1/n, so their gains say little; give the participants "
        "more data, a larger split.test_fraction, or evaluate_on: global"
    ]
    assert notes[0].filename == __file__ and notes[0].message.result is result
    assert (tmp_path / "own" / "report.json").exists()
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        abm.learn({**scenario, "evaluate_on": "global"}, tmp_path / "global")
        f = tmp_path / "own.yaml"
        f.write_text(yaml.safe_dump(scenario))
        learn(f, tmp_path / "cli")
    assert [w for w in caught if issubclass(w.category, abm.ScenarioNote)] == []


def test_the_few_test_samples_note_names_the_global_set_and_lists_ten_participants_at_most():
    from abm.learning.report import few_test_samples

    assert few_test_samples({"test_sizes": [15, 15], "evaluate_on": "global"}) == (
        "every participant is scored on the global test set of 15 samples (fewer than 20): a score moves in steps "
        "of 1/15, so the gains say little; give a larger global_test_fraction or more data"
    )
    assert few_test_samples({"test_sizes": [20, 20], "evaluate_on": "global"}) is None
    note = few_test_samples({"test_sizes": [5] * 11 + [20], "evaluate_on": "own"})
    assert note is not None and note.startswith("11 of 12 participants ")
    assert "9 (5), ...;" in note and "10 (5)" not in note and "11 (" not in note


def test_cli_learn_exits_2_on_bad_file(tmp_path, capsys):
    import typer

    from abm.learning.cli import learn

    f = tmp_path / "bad.yaml"
    f.write_text("name: x\ndata: {source: iris}\nsplit: {participants: 1}\n")
    with pytest.raises(typer.Exit) as e:
        learn(f, tmp_path / "out")
    assert e.value.exit_code == 2
    assert "split.participants" in capsys.readouterr().err
    assert not (tmp_path / "out").exists()


@pytest.mark.parametrize("scenario", ["gmm_fedavg_private.yaml", "private_calibration.yaml"])
def test_cli_learn_names_a_bad_runner_option_as_the_option(scenario, tmp_path):
    """`abm learn --runner grpc`: the option is at fault, not the file's ``runner`` key; exit
    code 2 and nothing written, for both kinds of learning scenario."""
    from typer.testing import CliRunner

    from abm.cli import app

    out = tmp_path / "out"
    res = CliRunner().invoke(app, ["learn", str(SCENARIOS / scenario), "--runner", "grpc", "--out", str(out)])
    assert res.exit_code == 2
    assert " ".join(res.output.split()) == (
        "error: --runner: 'grpc' is not allowed; allowed: inprocess, flower-sim, flower"
    )
    assert not out.exists()


def test_each_registered_protocol_is_run_by_its_own_class_with_the_registry_config():
    """The scenario checks read a protocol's config and flags from the registry (torch-free,
    abm/learning/protocols/traits.py); the run takes the class the registry names, whose config
    must be the one the params were checked with."""
    from abm.learning.protocols import protocol_class
    from abm.learning.protocols.traits import PROTOCOLS

    # the order the messages list them in ("allowed: ...")
    order = "local centralized fedavg fedprox codream codream_fast mapl cycle vpdl ipa p2p_selection"
    assert list(PROTOCOLS) == order.split()
    for name, traits in PROTOCOLS.items():
        cls = protocol_class(name)
        assert (cls.name, cls.traits, cls.Config) == (name, traits, traits.config), name
    assert protocol_class("fedprox").Config().mu == 0.01 and protocol_class("fedavg").Config().mu == 0


@pytest.mark.parametrize("path", sorted(SCENARIOS.glob("*.yaml")), ids=lambda p: p.stem)
def test_shipped_scenarios_validate(path):
    import yaml

    from abm.private_calibration import is_private_calibration
    from abm.private_calibration import load_scenario as load_private_calibration

    load = load_private_calibration if is_private_calibration(yaml.safe_load(path.read_text())) else load_scenario
    scenario, _ = load(path)
    assert scenario.name == path.stem


def test_cli_learn_writes_report(tmp_path, capsys):
    import yaml

    from abm.learning.cli import learn

    f = tmp_path / "ok.yaml"
    f.write_text(yaml.safe_dump(_tiny(protocols=[{"name": "fedavg"}])))
    out = tmp_path / "out"
    learn(f, out)
    assert {"report.json", "scenario.json", "scores.png", "gains.png", "curves.png"} <= {p.name for p in out.iterdir()}
    report = json.loads((out / "report.json").read_text())
    assert set(report["protocols"]) == {"local", "fedavg"}
    fedavg = report["protocols"]["fedavg"]
    # iris MLP 4-8-3: 67 parameters of 4 bytes. Weights: participant 0's initial model to the
    # server and its broadcast to 2, then a new global model to each of 2 in each of 2 rounds;
    # updates: 2 rounds x 2 participants; data sizes: each one's to the server and the total back.
    n = (4 * 8 + 8 + 8 * 3 + 3) * 4
    kinds = {"data_size": 2 * 2 * 8, "model_weights": (1 + 2 + 2 * 2) * n, "model_update": 2 * 2 * n}
    assert fedavg["bytes_by_kind"] == kinds
    assert fedavg["bytes_total"] == 11 * n + 32
    gains = [p["collaborative"] - p["standalone"] for p in fedavg["participants"]]
    assert [p["gain"] for p in fedavg["participants"]] == pytest.approx(gains)
    assert fedavg["mcg"] == pytest.approx(np.mean(gains)) and fedavg["min_gain"] == pytest.approx(min(gains))
    assert fedavg["mean_score"] == pytest.approx(np.mean([p["collaborative"] for p in fedavg["participants"]]))
    assert "fedavg" in capsys.readouterr().out


@pytest.mark.parametrize(
    ("over", "message"),
    [
        ({"protocols": [{"name": "fedavg"}, {"name": "fedavg"}]}, "protocols[1]: 'fedavg' is already protocols[0]"),
        (
            {"protocols": [{"name": "fedprox", "params": {"mu": -1}}]},
            "protocols[0].params.mu: -1 is not allowed: must be at least 0",
        ),
        ({"protocols": [{"name": "codream", "params": {"n_dreams": 0}}]}, "protocols[0].params.n_dreams"),
        (
            {"protocols": [{"name": "ipa", "params": {"p": 3}}]},
            "protocols[0].params.p: 3 is not allowed: must be 1 or 2",
        ),
        ({"protocols": [{"name": "ipa", "params": {"reduction": "avg"}}]}, "protocols[0].params.reduction"),
        ({"protocols": [{"name": "cycle", "params": {"period": 0}}]}, "protocols[0].params.period"),
        (
            {"protocols": [{"name": "p2p_selection", "params": {"policy": "bogus"}}]},
            "params.policy: 'bogus' is not allowed: must be 'random'",
        ),
        ({"seed": -1}, "seed: -1 is not allowed: must be at least 0"),
        # FedAvg's setup refused it with a ValueError traceback, once the protocols before it had run
        (
            {
                "protocols": [
                    {
                        "name": "fedprox",
                        "params": {"bn_stats": "shared"},
                        "privacy": {"secure_aggregation": True, "dp": {"clip": 1.0, "noise_multiplier": 1.0}},
                    }
                ]
            },
            "protocols[0].params.bn_stats: 'shared' is not allowed with privacy.dp: BatchNorm running statistics "
            "would either be noised (corrupting them) or leave without noise (outside the guarantee); use "
            "bn_stats: auto (the default) or local, which keep them with each participant under DP",
        ),
        # its generator's BatchNorm on a batch of one dream: torch's ValueError traceback as the protocol ran
        (
            {"protocols": [{"name": "codream_fast", "params": {"n_dreams": 1}}]},
            "protocols[0].params.n_dreams: 1 is not allowed for codream_fast: its generator (Linear-BatchNorm-ReLU-"
            "Linear) makes each batch of dreams at once, and BatchNorm needs at least 2 in a batch; give at least 2",
        ),
        ({"models": []}, "models: has 0 items; give at least 1"),
        (
            {"split": {"participants": 2, "class_groups": {"groups": [[0], [1, 2]], "assignment": [0, 2]}}},
            "split: class_groups.assignment: bad groups [2]: groups are 0..1",
        ),
        (
            {"split": {"participants": 2, "class_groups": {"groups": [[0], [1, 20]], "assignment": [0, 1]}}},
            "split.class_groups.groups[1]: 20 is not allowed: classes are 0..2",
        ),
        (
            {"split": {"participants": 2, "concept_shift": {"participants": [1], "swaps": [[0, 99]]}}},
            "split.concept_shift.swaps[0]: 99 is not allowed",
        ),
        (
            {"protocols": [{"name": "fedavg", "privacy": {"secure_aggregation": True, "dropouts": {1: [17]}}}]},
            "protocols[0].privacy.dropouts[1]: bad participants [17]",
        ),
        (
            {"protocols": [{"name": "fedavg", "privacy": {"secure_aggregation": True, "dropouts": {99: [1]}}}]},
            "protocols[0].privacy.dropouts: bad round 99: rounds are 0..1",
        ),
        # DP noise is split into shares that only the masked sum hides; codream_fast sums weights,
        # not updates; only fedavg and fedprox simulate dropouts.
        (
            {"protocols": [{"name": "fedavg", "privacy": {"dp": {"clip": 1.0, "noise_multiplier": 1.0}}}]},
            "protocols[0].privacy.dp: not allowed without secure_aggregation: true",
        ),
        (
            {
                "protocols": [
                    {
                        "name": "codream_fast",
                        "privacy": {"secure_aggregation": True, "dp": {"clip": 1.0, "noise_multiplier": 1.0}},
                    }
                ]
            },
            "protocols[0].privacy.dp: not allowed for codream_fast: it sums the generator's weights",
        ),
        (
            {"protocols": [{"name": "codream", "privacy": {"secure_aggregation": True, "dropouts": {1: [0]}}}]},
            "protocols[0].privacy.dropouts: not allowed for codream: dropouts are simulated for fedavg, fedprox",
        ),
        (
            {"split": {"participants": 4, "quantity_skew": {"fractions": [0.5, 0.5, 0.5, 0.5]}}},
            "split.quantity_skew: fractions are shares of the data and must sum to 1; these sum to 2",
        ),
        (
            {"split": {"participants": 4, "quantity_skew": {"fractions": [0.5, 0.5]}}},
            "quantity_skew.fractions needs one share per participant (4), not 2",
        ),
        # A section with variants (data by its source): the user's key path, not pydantic's member name.
        (
            {"data": {"source": "gaussian_mixture", "n_samples": -5}},
            "<dict>: invalid scenario: data.n_samples: -5 is not allowed: must be at least 20",
        ),
        (
            {"data": {"source": "gaussian_mixture", "colour": 1}},
            "data.colour: unknown key; allowed keys: source, n_samples, n_classes, n_features, "
            "modes_per_class, separation",
        ),
        (
            {"data": {"source": "mnist"}},
            "data.source: 'mnist' is not allowed: must be one of 'gaussian_mixture', 'digits', 'wine', "
            "'breast_cancer', 'iris'",
        ),
        # The baseline's name: a protocol so labelled replaced local-only's row in the report.
        (
            {"protocols": [{"name": "fedprox", "label": "local"}]},
            "<dict>: protocols[0].label: 'local' is not allowed for fedprox: it is the name of the local-only baseline",
        ),
        (
            {"protocols": [{"name": "fedavg", "params": {"lr": 1}}]},
            "protocols[0].params.lr: unknown key; allowed keys: mu, server_lr, weighting, bn_stats",
        ),
        # these ran every protocol, then failed (exit 1): a traceback, or a plot file under a/
        (
            {"selection_toy": {"policies": ["random", "bogus"]}},
            "<dict>: invalid scenario: selection_toy.policies[1]: 'bogus' is not allowed: must be 'random'",
        ),
        ({"selection_toy": {"policies": []}}, "selection_toy.policies: has 0 items; give at least 1"),
        (
            {"protocols": [{"name": "p2p_selection", "params": {"policy": "oracle"}}]},
            "<dict>: protocols[0].params.policy: 'oracle' is not allowed without known groups: it picks within a "
            "participant's group, given by split.class_groups or split.concept_shift; give one, or another policy",
        ),
        (
            {"protocols": [{"name": "fedavg", "label": "a/b"}]},
            "<dict>: invalid scenario: protocols[0].label: 'a/b' is not allowed: write a name for the protocol's "
            "plot files: letters, digits, _, - and . (not first), no spaces or /",
        ),
        # nothing to compare: the report held the local-only baseline alone
        ({"protocols": []}, "<dict>: invalid scenario: protocols: has 0 items; give at least 1"),
        # an early stop after the last round never stopped (stopped_at null), without a word
        (
            {"protocols": [{"name": "ipa", "params": {"stop_round": 3}}]},
            "<dict>: protocols[0].params.stop_round: 3 is not allowed: the run has 2 rounds (rounds); "
            "stop_round is the number of rounds trained before the models are frozen: 1..2",
        ),
        (
            {"rounds": 9, "protocols": [{"name": "ipa", "rounds": 4, "params": {"stop_round": 5}}]},
            "<dict>: protocols[0].params.stop_round: 5 is not allowed: the run has 4 rounds (protocols[0].rounds); "
            "stop_round is the number of rounds trained before the models are frozen: 1..4",
        ),
        # a start or warm-up at or past the last round switched the protocol's mechanism off, without a word
        (
            {"protocols": [{"name": "cycle", "params": {"warmup_rounds": 2}}]},
            "<dict>: protocols[0].params.warmup_rounds: 2 is not allowed: the run has 2 rounds (rounds), counted "
            "from 0, and the participants share no prediction before round warmup_rounds, so they would never "
            "share: 0..1",
        ),
        (
            {"rounds": 9, "protocols": [{"name": "vpdl", "rounds": 4, "params": {"warmup_rounds": 7}}]},
            "<dict>: protocols[0].params.warmup_rounds: 7 is not allowed: the run has 4 rounds (protocols[0].rounds), "
            "counted from 0,",
        ),
        (
            {"protocols": [{"name": "mapl", "params": {"warmup_rounds": 2}}]},
            "<dict>: protocols[0].params.warmup_rounds: 2 is not allowed: the run has 2 rounds (rounds), counted "
            "from 0, and the graph is learned from round warmup_rounds, so it would never be learned (the prototypes "
            "stay averaged with equal weights): 0..1",
        ),
        (
            {"protocols": [{"name": "codream", "params": {"dream_start": 2}}]},
            "<dict>: protocols[0].params.dream_start: 2 is not allowed: the run has 2 rounds (rounds), counted from "
            "0, and dreams are made from round dream_start, so none would be (every round local training): 0..1",
        ),
        (
            {"rounds": 3, "protocols": [{"name": "codream_fast", "params": {"adv_start": 5}}]},
            "<dict>: protocols[0].params.adv_start: 5 is not allowed: the run has 3 rounds (rounds), counted from 0, "
            "and the adversarial term applies from round adv_start, so it would never apply: 0..2; or w_adv: 0 for "
            "no adversarial term",
        ),
        # concept shift: a swap that changes nothing, or swaps whose result depends on their order
        (
            {"split": {"participants": 2, "concept_shift": {"participants": [1], "swaps": [[0, 0]]}}},
            "<dict>: invalid scenario: split.concept_shift.swaps: [[0, 0]] is not allowed: swaps[0] swaps class 0 "
            "with itself (no change); give two different classes",
        ),
        (
            {"split": {"participants": 2, "concept_shift": {"participants": [1], "swaps": [[0, 1], [1, 2]]}}},
            "<dict>: invalid scenario: split.concept_shift.swaps: [[0, 1], [1, 2]] is not allowed: class 1 is in "
            "swaps[0] and swaps[1], so the labels would depend on their order; give each class in one swap at most",
        ),
        (
            {"split": {"participants": 2, "concept_shift": {"participants": [1], "swaps": [[0, 1], [1, 0]]}}},
            "class 1 is in swaps[0] and swaps[1]",
        ),
        (
            {"split": {"participants": 2, "concept_shift": {"participants": [1], "swaps": []}}},
            "<dict>: invalid scenario: split.concept_shift.swaps: has 0 items; give at least 1",
        ),
        (
            {"split": {"participants": 2, "concept_shift": {"participants": [], "swaps": [[0, 1]]}}},
            "<dict>: invalid scenario: split.concept_shift.participants: has 0 items; give at least 1",
        ),
        (
            {"split": {"participants": 2, "concept_shift": {"participants": [1, 0], "swaps": [[0, 1]]}}},
            "concept_shift.participants: [1, 0] shifts all 2 participants: they would all learn the same swapped "
            "labels, with no shift between them; leave at least one out",
        ),
        (
            {"split": {"participants": 3, "concept_shift": {"participants": [1, 2, 1], "swaps": [[0, 1]]}}},
            "<dict>: invalid scenario: split.concept_shift.participants: [1, 2, 1] is not allowed: participant 1 is "
            "listed twice; list each once",
        ),
        # a wait beyond about 9.2e9 s overflows Python's waits: the run ended in a traceback when one was needed
        (
            {"flower_timeout": 1e30},
            "<dict>: invalid scenario: flower_timeout: 1e+30 is not allowed: must be at most 2592000",
        ),
        # the scenario's name names its run folder; pydantic's "String should match pattern" said it to few
        (
            {"name": "my run"},
            "<dict>: invalid scenario: name: 'my run' is not allowed: write a folder name: letters, digits, _, - and "
            ". (not first), no spaces or /",
        ),
    ],
)
def test_bad_learning_values_get_one_message(over, message):
    with pytest.raises(LearningScenarioError) as e:
        load_scenario(_tiny(**over))
    assert message in str(e.value), str(e.value)


@pytest.mark.parametrize("written", ["inf", "+Infinity", float("inf")])
def test_a_protocol_param_that_is_not_a_finite_number_is_named_once(written):
    """A protocol's params are a plain mapping in the scenario's schema and a number only in the
    protocol's config: "inf" written as text passed (FedProx's mu became infinity), and YAML's
    .inf was named twice."""
    with pytest.raises(LearningScenarioError) as e:
        load_scenario(_tiny(protocols=[{"name": "fedprox", "params": {"mu": written}}]))
    line = "protocols[0].params.mu: inf is not allowed: a finite number is expected here"
    assert str(e.value).count(line) == 1, str(e.value)


@pytest.mark.parametrize(
    ("params", "line"),
    [
        # pydantic read true as 1: FedProx ran with mu 1.0, CoDream with one dream
        ({"name": "fedprox", "params": {"mu": True}}, "protocols[0].params.mu: true is not allowed: must be a number"),
        (
            {"name": "codream", "params": {"n_dreams": True}},
            "protocols[0].params.n_dreams: true is not allowed: must be a whole number",
        ),
        (
            {"name": "codream", "params": {"collaborate": 0}},
            "protocols[0].params.collaborate: 0 is not allowed: write true or false",
        ),
        # named once, not also as "must be 'random', ..."
        ({"name": "p2p_selection", "params": {"policy": True}}, "protocols[0].params.policy: true is not allowed"),
    ],
)
def test_true_or_false_mixed_up_with_a_protocol_param_is_named_once(params, line):
    with pytest.raises(LearningScenarioError) as e:
        load_scenario(_tiny(protocols=[params]))
    assert str(e.value).count("protocols[0].params.") == 1 and line in str(e.value), str(e.value)


@pytest.mark.parametrize("name", ["digits", "wine", "breast_cancer", "iris"])
def test_the_class_counts_the_checks_use_are_those_of_the_data(name):
    from abm.learning.sources import SKLEARN_CLASSES, sklearn_arrays

    assert sklearn_arrays(name).n_classes == SKLEARN_CLASSES[name]


@pytest.mark.parametrize("name", ["digits", "wine", "breast_cancer", "iris"])
def test_the_labels_validate_reads_without_scikit_learn_are_those_a_run_splits(name, monkeypatch):
    """`abm validate` reads the labels of scikit-learn's sets from its data files (importing
    scikit-learn took 1-4 s of the command); they, and the shape of a sample, are the data's,
    in order. Where the files are not found (another version of scikit-learn), it builds the data."""
    import importlib.util

    from abm.learning.scenario import SklearnSpec
    from abm.learning.sources import sklearn_arrays, sklearn_labels, source_labels

    arrays = sklearn_arrays(name)
    labels, shape = sklearn_labels(name)
    np.testing.assert_array_equal(labels, arrays.y)
    assert labels.dtype == arrays.y.dtype and shape == arrays.input_shape
    monkeypatch.setattr(importlib.util, "find_spec", lambda name, package=None: None)
    assert sklearn_labels(name) is None
    labels, shape = source_labels(SklearnSpec(source=name), seed=0)
    np.testing.assert_array_equal(labels, arrays.y)
    assert shape == arrays.input_shape


def test_reports_write_strict_json():
    from abm.outputs.strict_json import jsonable

    assert jsonable({"a": float("nan"), 1: [np.float32(0.5), float("inf")], "b": np.arange(2)}) == {
        "a": None,
        "1": [0.5, None],
        "b": [0, 1],
    }
    assert jsonable([np.float64("nan"), np.float32("inf"), np.array([1.5, np.nan])]) == [None, None, [1.5, None]]


def test_cli_learn_says_what_runs_and_when_each_protocol_ends(tmp_path):
    """`abm learn` on stderr: one line of what runs and where, then a line per protocol as it
    ends, with its rounds and the mean score the report holds; the table on stdout."""
    import subprocess
    import sys

    import yaml

    f = tmp_path / "tiny.yaml"
    f.write_text(yaml.safe_dump(_tiny(rounds=3, evaluate_on="global")))  # 37 test samples: no note
    out = tmp_path / "out"
    proc = subprocess.run(
        [sys.executable, "-m", "abm", "learn", str(f), "--out", str(out)], capture_output=True, text=True, timeout=300
    )
    assert proc.returncode == 0, proc.stderr
    report = json.loads((out / "report.json").read_text())
    lines = proc.stderr.splitlines()
    assert lines[0] == f"running tiny: 2 participants, 3 protocols (local-only included), runner inprocess -> {out}"
    assert lines[1:] == [f"{k}: 3 rounds, mean score {r['mean_score']:.3f}" for k, r in report["protocols"].items()]
    assert list(report["protocols"]) == ["local", "fedavg", "cycle"]
    assert proc.stdout.splitlines()[-1] == f"report: {out / 'report.json'}"


def test_cli_learn_a_kill_as_its_progress_bar_closes_keeps_the_written_report(tmp_path, monkeypatch):
    """The report is written when the work returns; a SIGTERM while the progress bar is then taken
    down is ignored as after any complete output (abm.entry). It ended in a TypeError ('dict' object
    is not callable): the report had taken the name of the function that says an interrupt."""
    import contextlib
    import signal

    import abm.cli
    from abm import entry, interrupts
    from abm.learning.cli import run_or_exit

    bar_of = abm.cli.progress_bar

    @contextlib.contextmanager
    def killed_as_it_closes(unit: str):
        with bar_of(unit) as bar:
            yield bar
        entry._interrupt(signal.SIGTERM, None)  # raises KeyboardInterrupt unless the output is complete

    monkeypatch.setattr(abm.cli, "progress_bar", killed_as_it_closes)
    report = run_or_exit(lambda: {"protocols": {}}, tmp_path / "out", tmp_path / "tiny.yaml")
    assert interrupts.interrupted() is None
    assert report == {"protocols": {}}


@pytest.mark.parametrize("earlier", [False, True], ids=["new_folder", "earlier_report"])
@pytest.mark.parametrize(
    ("error", "code", "said"),
    [
        ("interrupt", 130, "interrupted: "),
        ("flower", 1, "error: {file}: the Flower run failed: a client went away; "),
        ("secure", 1, "error: {file}: round 2 cannot be summed; "),
    ],
    ids=["interrupted", "flower_run_failed", "secure_aggregation_failed"],
)
def test_cli_learn_says_whether_an_earlier_report_is_kept(tmp_path, capsys, error, code, said, earlier):
    """`abm learn` stopped by Ctrl-C or a failed run writes nothing; where the folder holds an
    earlier report, which stays as it was, its line says so, in `abm run`'s words."""
    import typer

    from abm.learning.cli import run_or_exit
    from abm.learning.errors import FlowerRunError, SecureAggregationError
    from abm.outputs.run_folder import atomic_folder

    raised = {
        "interrupt": KeyboardInterrupt(),
        "flower": FlowerRunError("a client went away"),
        "secure": SecureAggregationError("round 2 cannot be summed"),
    }[error]
    out, file = tmp_path / "out", tmp_path / "tiny.yaml"

    def work() -> dict:
        raise raised

    if earlier:
        with atomic_folder(out, "learning") as tmp:
            (tmp / "report.json").write_text("{}")
    with pytest.raises(typer.Exit) as e:
        run_or_exit(work, out, file)
    assert e.value.exit_code == code
    end = (
        f"no results were written; the earlier results in {out} are kept"
        if earlier
        else f"no results were written to {out}"
    )
    assert capsys.readouterr().err == said.format(file=file) + end + "\n"
    if earlier:
        assert (out / "report.json").read_text() == "{}"
    else:
        assert not out.exists()


@pytest.mark.parametrize("key", ["n_features", "modes_per_class", "separation"])
def test_true_for_a_number_of_the_data_section_is_refused(key):
    """The data section takes one of several forms (by its source); true/false for one of its
    numbers is refused as it is elsewhere, not read as 1."""
    data = {"source": "gaussian_mixture", "n_samples": 300, "n_classes": 3, "n_features": 4, key: True}
    with pytest.raises(LearningScenarioError) as e:
        load_scenario(_tiny(data=data))
    kind = "a number" if key == "separation" else "a whole number"
    assert f"data.{key}: true is not allowed: must be {kind}" in str(e.value)


def test_cli_learn_with_a_bad_output_folder_says_one_line(tmp_path):
    """--out on a file: the one error line, not the line of what would run before it."""
    import yaml
    from typer.testing import CliRunner

    from abm.cli import app

    f, out = tmp_path / "tiny.yaml", tmp_path / "a_file"
    f.write_text(yaml.safe_dump(_tiny()))
    out.write_text("mine")
    res = CliRunner().invoke(app, ["learn", str(f), "--out", str(out)])
    assert res.exit_code == 2
    assert res.output.strip().splitlines() == [
        f"error: output folder '{out}': is a file; give a folder path (an output is a folder)"
    ]
    assert out.read_text() == "mine"


def _cli(*args: str):
    from typer.testing import CliRunner

    from abm.cli import app

    return CliRunner().invoke(app, list(args))


def _error_line(output: str) -> str:
    return next(line for line in output.splitlines() if line.startswith("error:"))


@pytest.mark.parametrize(
    ("data", "split", "message"),
    [
        # 20 samples, a quarter held out as the global test set: 15 for 10 participants
        (
            {"n_samples": 20},
            {"participants": 10},
            "split: participant 0 gets 0 training, 1 validation and 1 test samples (10 of 10 participants are "
            "that small; 15 samples shared); each needs at least 2 training samples and 1 of each other: use more "
            "samples (data.n_samples) or fewer participants (split.participants)",
        ),
        (
            {"n_samples": 400},
            {"participants": 2, "label_skew": {"alpha": 1.0, "min_size": 500}},
            "split.label_skew.min_size: 500 is not allowed: 2 participants x 500 samples each is 1000, more than "
            "the 300 samples shared (the data less the global test set); give a smaller min_size, fewer "
            "participants (split.participants) or more samples (data.n_samples)",
        ),
    ],
)
def test_validate_refuses_the_split_learn_refuses(tmp_path, data, split, message):
    """`abm validate` said such a scenario was valid; `abm learn` then refused it once the data
    were built. Both now say the same line, exit code 2."""
    import yaml

    f, out = tmp_path / "s.yaml", tmp_path / "out"
    gmm = {"source": "gaussian_mixture", "n_classes": 3, "n_features": 4, **data}
    f.write_text(yaml.safe_dump(_tiny(data=gmm, split=split, protocols=[{"name": "fedavg"}])))
    checked, learned = _cli("validate", str(f)), _cli("learn", str(f), "--out", str(out))
    assert checked.exit_code == 2 and learned.exit_code == 2, (checked.output, learned.output)
    assert _error_line(checked.output) == _error_line(learned.output) == f"error: {f}: {message}"
    assert not out.exists()


@pytest.mark.parametrize(
    ("samples", "min_size", "starts", "ends"),
    [
        # 40 samples (30 shared) for 10 participants of at least 20 each: the message blamed a
        # participant's 0 training samples and advised a milder skew, not the min_size
        (
            40,
            20,
            "split.label_skew.min_size: 20 is not allowed: 10 participants x 20 samples each is 200, more than the "
            "30 samples shared",
            "",
        ),
        # a share too small under a skew whose min_size can be met: the skew's keys are the advice
        (
            60,
            1,
            "split: participant",
            "use more samples (data.n_samples), fewer participants (split.participants) or a milder label skew (a "
            "larger split.label_skew.alpha or split.label_skew.min_size)",
        ),
    ],
)
def test_a_split_too_small_names_what_to_change(samples, min_size, starts, ends):
    from abm.learning.split import check_split

    data = {"source": "gaussian_mixture", "n_samples": samples, "n_classes": 3, "n_features": 4}
    split = {"participants": 10, "label_skew": {"alpha": 0.5, "min_size": min_size}}
    with pytest.raises(LearningScenarioError) as e:
        check_split(load_scenario(_tiny(data=data, split=split))[0])
    assert str(e.value).startswith(starts) and str(e.value).endswith(ends), str(e.value)


def test_cf_of_the_same_scores_is_exactly_one():
    """np.corrcoef of these scores with themselves is 0.9999999999999999: local-only's cf was."""
    from abm.learning.metrics import collaborative_fairness

    scores = [0.5436249914654229, 0.9350724237877682, 0.8158535541215322, 0.002738500170148095]
    assert collaborative_fairness(scores, scores) == 1.0
    assert collaborative_fairness(scores, [1.0 - s for s in scores]) == pytest.approx(-1.0)


def test_learn_set_changes_the_file_and_the_outputs_record_it(tmp_path):
    import yaml

    f, out = tmp_path / "s.yaml", tmp_path / "out"
    f.write_text(yaml.safe_dump(_tiny(rounds=3, protocols=[{"name": "fedprox", "params": {"mu": 0.5}}])))
    res = _cli("learn", str(f), "--out", str(out), "--set", "rounds=1", "--set", "protocols[0].params.mu=0.25")
    assert res.exit_code == 0, res.output
    report = json.loads((out / "report.json").read_text())
    assert report["source"] == str(f) and report["sets"] == ["rounds=1", "protocols[0].params.mu=0.25"]
    assert [len(p["history"]) for p in report["protocols"].values()] == [1, 1]
    ran = json.loads((out / "scenario.json").read_text())
    assert ran["rounds"] == 1 and ran["protocols"][0]["params"] == {"mu": 0.25}


@pytest.mark.parametrize(
    ("setting", "message"),
    [
        (
            "protocols[3].params.mu=0.1",
            "--set: protocols[3].params.mu: protocols is a list of 1; '3' is not allowed, give an index 0..0",
        ),
        ("rounds", "--set: 'rounds' is not allowed; write key.path=value"),
        # an item of a list the file leaves out: named as the user writes it, and the file that shows the
        # defaults (it said 'protocols.0.models' and named a scenario.resolved.yaml, which abm learn never writes)
        (
            "protocols[0].models[0].hidden=[8]",
            "--set: protocols[0].models[0].hidden: protocols[0].models is not in the file, so it has no item to "
            "set; give the whole list in the file (a report's scenario.json holds the defaults)",
        ),
    ],
)
def test_learn_and_validate_refuse_a_bad_set(tmp_path, setting, message):
    import yaml

    f, out = tmp_path / "s.yaml", tmp_path / "out"
    f.write_text(yaml.safe_dump(_tiny(protocols=[{"name": "fedavg"}])))
    for args in (["learn", str(f), "--out", str(out)], ["validate", str(f)]):
        res = _cli(*args, "--set", setting)
        assert res.exit_code == 2, res.output
        assert _error_line(res.output) == f"error: {f}: {message}"
    assert not out.exists()


def test_validate_set_on_learning_and_private_calibration_scenarios(tmp_path):
    """`abm validate FILE --set` refused learning and private-calibration files."""
    for name, kind in (("gmm_mapl.yaml", "learning"), ("private_calibration.yaml", "private calibration")):
        path = SCENARIOS / name
        res = _cli("validate", str(path), "--set", "rounds=3")
        assert res.exit_code == 0 and f"{kind} scenario" in res.output, res.output
        res = _cli("validate", str(path), "--set", "rounds=0")
        assert res.exit_code == 2
        assert _error_line(res.output) == (
            f"error: {path} (with --set rounds=0): invalid scenario: rounds: 0 is not allowed: must be at least 1"
        )
    shown = _cli("validate", str(SCENARIOS / "gmm_mapl.yaml"), "--set", "rounds=7", "--show")
    assert shown.exit_code == 0 and "\nrounds: 7\n" in shown.output


def test_the_progress_bar_is_not_drawn_again_after_its_line():
    """A protocol's line ('fedavg: 3 rounds, ...') was followed by its bar as last drawn (1/3),
    stale: rich draws the live display it last rendered under a printed line."""
    import io

    from rich.console import Console
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn

    from abm.cli import learning_progress

    buf = io.StringIO()
    console = Console(file=buf, force_terminal=True, width=80, markup=False)
    bar = Progress(TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(), console=console)
    bar.auto_refresh = False
    listen = learning_progress(bar)
    with bar:
        listen("fedavg", 1, 3, "")
        bar.refresh()  # as rich's refresh thread does, at 10 Hz
        listen("fedavg", 2, 3, "")
        listen("fedavg", 3, 3, "3 rounds, mean score 0.927")
        listen("", 0, 0, "a line alone")
    text = buf.getvalue()
    after = text[text.index("fedavg: 3 rounds, mean score 0.927") :]
    assert "1/3" in text and "/3" not in after, repr(after)
    assert "\x1b[2Ka line alone\n" in after  # the note alone, after the line that clears the bar


def test_learning_rounds_logged_to_a_file_are_told_in_lines(monkeypatch, capsys):
    """Off a terminal (stderr a log file) a protocol's rounds had no line until the protocol
    ended: now a line per tenth of them, where the run is long enough (the rules' 5 s and 30 s,
    abm.progress_lines, set to 0 here), before the protocol's own line."""
    from abm import progress_lines
    from abm.cli import learning_progress, progress_bar

    monkeypatch.setattr(progress_lines, "QUIET_S", 0.0)
    monkeypatch.setattr(progress_lines, "EVERY_S", 0.0)
    with progress_bar("") as bar:
        listen = learning_progress(bar)
        for done in (1, 2, 3):
            listen("fedavg", done, 3, "3 rounds, mean score 0.927" if done == 3 else "")
    assert [line.split(" (")[0] for line in capsys.readouterr().err.splitlines()] == [
        "fedavg: 1 of 3 done",
        "fedavg: 2 of 3 done",
        "fedavg: 3 rounds, mean score 0.927",
    ]


def test_an_interrupt_as_the_header_is_written_gets_a_line_of_its_own(tmp_path, monkeypatch):
    """abm learn says "running ..." and then, after Ctrl-C, "interrupted: ...". print() wrote the
    header and its newline in two writes, and a Ctrl-C between them glued the two lines together
    (CI caught it once: ".../learninterrupted: no results were written"). The header is now one
    write; a stream that is interrupted at a lone newline, as that Ctrl-C was, shows it."""
    import io
    import sys

    import typer

    from abm.learning.cli import run_or_exit

    class Interrupted(io.StringIO):
        def write(self, text: str) -> int:
            if text == "\n":
                raise KeyboardInterrupt
            return super().write(text)

    def work() -> dict:
        raise KeyboardInterrupt

    stream = Interrupted()
    monkeypatch.setattr(sys, "stderr", stream)
    with pytest.raises(typer.Exit) as e:
        run_or_exit(work, tmp_path / "out", tmp_path / "tiny.yaml", header="running tiny")
    assert e.value.exit_code == 130
    assert stream.getvalue().splitlines() == [
        "running tiny",
        f"interrupted: no results were written to {tmp_path / 'out'}",
    ]


def test_the_package_entry_point_takes_sets_as_abm_learn_does(tmp_path):
    """``abm.learning.run_scenario``, the entry point docs/learning.md names, took no ``sets``:
    only the report module's function did, so a scripted sweep could not override a key."""
    out = tmp_path / "out"
    report = run_scenario(_tiny(), out, None, ["rounds=1"])
    assert report["sets"] == ["rounds=1"] and len(report["protocols"]["fedavg"]["history"]) == 1
    assert json.loads((out / "scenario.json").read_text())["rounds"] == 1


def test_a_shifted_participant_is_scored_on_the_global_test_set_with_its_own_labels():
    """With ``evaluate_on: global`` a participant under concept shift was scored on the global
    test set's unshifted labels, so learning its own task well cost it the swapped classes (the
    docs' example scenario has both): a shifted participant's local-only score was 0.64 against
    0.93 for the others. It is now scored on the same samples labelled with its swaps."""
    from abm.learning.runner import prepare_data, run_all, scored_on

    sc = _tiny(
        data={"source": "gaussian_mixture", "n_samples": 800, "n_classes": 4, "n_features": 5, "modes_per_class": 1},
        split={"participants": 3, "concept_shift": {"participants": [1], "swaps": [[0, 1]]}},
        models=[{"kind": "mlp", "hidden": [16], "batchnorm": False}],
        rounds=5,
        evaluate_on="global",
        protocols=[{"name": "fedavg"}],
    )
    scenario, _ = load_scenario(sc)
    data = prepare_data(scenario)
    plain, shifted = scored_on(scenario, data, 0), scored_on(scenario, data, 1)
    assert np.array_equal(plain.x.numpy(), shifted.x.numpy())  # the same samples
    y, ys = plain.y.numpy(), shifted.y.numpy()
    assert np.array_equal(ys[y == 0], np.ones((y == 0).sum())) and np.array_equal(ys[y == 1], np.zeros((y == 1).sum()))
    assert np.array_equal(ys[y >= 2], y[y >= 2])
    standalone = [p["standalone"] for p in run_all(scenario)["protocols"]["local"]["participants"]]
    assert abs(standalone[1] - np.mean([standalone[0], standalone[2]])) < 0.1, standalone


def test_a_protocol_of_one_round_ends_with_1_round():
    """The line each protocol ends with (the one `abm learn` prints) counts its rounds in the right
    number: '1 round', not '1 rounds'. In this process, through the progress listener the command
    prints from (a second `abm learn` process, as above, took 10 s for this word)."""
    from abm.learning import progress
    from abm.learning.runner import run_all

    heard: list[tuple[str, int, int, str]] = []
    scenario, _ = load_scenario(_tiny(rounds=1, protocols=[{"name": "fedavg"}]))
    with progress.listening(lambda *step: heard.append(step)):
        report = run_all(scenario)
    ends = [(label, note) for label, done, total, note in heard if label and done == total]
    assert ends == [(k, f"1 round, mean score {r['mean_score']:.3f}") for k, r in report["protocols"].items()]


def test_local_listed_with_the_label_local_is_the_baseline_and_runs_once():
    """``{name: local, label: local}`` was not taken for the baseline: a second local-only ran
    under the same key, the report's 'local' row was the listed one (here 1 round) and its gains
    were against the other (2 rounds), so local-only showed a nonzero MCG against itself."""
    from abm.learning.runner import protocol_specs, run_all

    scenario, _ = load_scenario(_tiny(protocols=[{"name": "local", "label": "local", "rounds": 1}, {"name": "fedavg"}]))
    assert [s.key for s in protocol_specs(scenario)] == ["local", "fedavg"]
    local = run_all(scenario)["protocols"]["local"]
    assert len(local["history"]) == 1
    assert local["mcg"] == 0.0 and all(p["gain"] == 0.0 for p in local["participants"])


def test_mapl_with_two_embedding_widths_is_refused_before_any_training(tmp_path):
    """MAPL compares every participant's embeddings with shared prototypes: models whose body
    outputs differ in width (an mlp's last hidden width, a cnn's embed_dim) crashed `abm learn` with
    a ValueError after the data were split; `abm validate` and `abm learn` now refuse them with one
    line naming the file and the key, and write nothing."""
    path = SCENARIOS / "gmm_mapl.yaml"
    setting = "models=[{kind: mlp, hidden: [32]}, {kind: mlp, hidden: [64, 16]}]"
    out = tmp_path / "out"
    for args in (("validate", str(path)), ("learn", str(path), "--out", str(out))):
        res = _cli(*args, "--set", setting)
        assert res.exit_code == 2, res.output
        assert _error_line(res.output) == (
            f"error: {path} (with --set {setting}): models: embedding widths [16, 32] are not allowed for "
            "protocols[0]: mapl compares every participant's embeddings with shared prototypes, so they need "
            "one width (an mlp's last hidden width, a cnn's embed_dim); give every model the same"
        )
    assert not out.exists()
    same = _cli("validate", str(path), "--set", "models=[{kind: mlp, hidden: [32]}, {kind: mlp, hidden: [64, 32]}]")
    assert same.exit_code == 0, same.output


def test_class_groups_that_leave_a_class_to_no_one_are_refused_where_everyone_is_scored_on_it(tmp_path):
    """iris has classes 0..2; groups [[0], [2]] assign class 1 to no participant, yet with
    evaluate_on: global everyone was scored on the global test set's class-1 samples, which no
    protocol (centralized included) could learn: the run went ahead, every accuracy capped without a
    word. Refused at load, naming the classes; evaluate_on: own (each scored on its own classes) runs."""
    import yaml

    split = {"participants": 2, "class_groups": {"groups": [[0], [2]], "assignment": [0, 1]}}
    f, out = tmp_path / "s.yaml", tmp_path / "out"
    f.write_text(yaml.safe_dump(_tiny(split=split, evaluate_on="global")))
    for args in (["learn", str(f), "--out", str(out)], ["validate", str(f)]):
        res = _cli(*args)
        assert res.exit_code == 2, res.output
        assert _error_line(res.output) == (
            f"error: {f}: split.class_groups: classes [1] are in no group a participant is assigned (assignment "
            "[0, 1]), so no participant holds them, while with evaluate_on: global everyone is scored on the global "
            "test set, which has them: no protocol could learn them; put every class 0..2 in an assigned group, or "
            "use evaluate_on: own"
        )
    assert not out.exists()
    load_scenario(_tiny(split=split, evaluate_on="own"))
    covered = {"participants": 2, "class_groups": {"groups": [[0, 1], [1, 2]], "assignment": [0, 1]}}
    load_scenario(_tiny(split=covered, evaluate_on="global"))


def test_a_label_too_long_for_its_plot_files_is_refused_before_the_run(tmp_path):
    """A label names its protocol's plot files (LABEL_graph.png for MAPL, the longest
    LABEL_collaboration.png): one of 260 letters passed `abm validate`, and `abm learn` ran every
    protocol, then failed writing the plot ('File name too long'). Labels of at most 237 characters
    (255 less '_collaboration.png') are allowed; a longer one is refused at load, exit 2, nothing
    written."""
    import yaml

    f, out = tmp_path / "s.yaml", tmp_path / "out"
    long = "a" * 238
    f.write_text(yaml.safe_dump(_tiny(protocols=[{"name": "mapl", "label": long}])))
    for args in (["learn", str(f), "--out", str(out)], ["validate", str(f)]):
        res = _cli(*args)
        assert res.exit_code == 2, res.output
        assert _error_line(res.output) == (
            f"error: {f}: invalid scenario: protocols[0].label: '{long}' is not allowed: must be at most 237 "
            "characters long"
        )
    assert not out.exists()
    longest = "b" * 237
    f.write_text(yaml.safe_dump(_tiny(rounds=1, protocols=[{"name": "p2p_selection", "label": longest}])))
    res = _cli("learn", str(f), "--out", str(out))
    assert res.exit_code == 0, res.output
    assert (out / f"{longest}_collaboration.png").is_file()


def test_a_refusal_the_runner_option_caused_names_it(tmp_path):
    """`abm learn FILE --runner flower-sim` on a file with a protocol the Flower runners do not carry
    said 'FILE: protocols[0].name: 'cycle' is not allowed for runner 'flower-sim'' as if the file
    asked for that runner; the option is now named with the file, as --set options are."""
    import yaml

    f, out = tmp_path / "s.yaml", tmp_path / "out"
    f.write_text(yaml.safe_dump(_tiny(protocols=[{"name": "cycle"}])))
    res = _cli("learn", str(f), "--out", str(out), "--runner", "flower-sim", "--set", "rounds=1")
    assert res.exit_code == 2, res.output
    assert _error_line(res.output) == (
        f"error: {f} (with --set rounds=1 --runner flower-sim): protocols[0].name: 'cycle' is not allowed for runner "
        "'flower-sim': the Flower runners carry only local, fedavg, fedprox, codream, codream_fast; use runner: "
        "inprocess"
    )
    assert not out.exists()
    with pytest.raises(LearningScenarioError) as e:
        load_scenario(f, "flower", names=PYTHON)
    assert str(e.value).startswith(f"{f} (with runner='flower'): protocols[0].name: 'cycle' is not allowed")


def test_a_private_calibration_scenario_given_to_the_learning_runner_is_named_in_one_line(tmp_path):
    """abm.learning.run_scenario (and load_scenario) on a private-calibration file listed every key
    a learning scenario lacks or forbids (data, split, kind, mode, model...); it now says what the
    file is and what runs it, and writes nothing."""
    from abm.learning import LearningScenarioError, run_scenario

    path = SCENARIOS / "private_calibration.yaml"
    with pytest.raises(LearningScenarioError) as info:
        run_scenario(path, tmp_path / "out")
    assert str(info.value) == (
        f"{path}: this is a private calibration scenario (kind: private_calibration), not a learning one; run it "
        "with abm.learn (`abm learn`), or abm.private_calibration.report.run_private_calibration"
    )
    assert list(tmp_path.iterdir()) == []
