"""What leaves an institution, secure aggregation, and `abm learn` end to end on a tiny scenario."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import torch
import yaml
from typer.testing import CliRunner

from abm.cli import app
from abm.learning.messages import SERVER, MessageKind
from abm.learning.models import flat_params
from abm.learning.privacy.aggregation import SumAggregator
from abm.learning.privacy.secure_aggregation import SecureSum
from abm.private_calibration.federation import run_protocol
from abm.private_calibration.institutions import build_institutions
from abm.private_calibration.scenario import CalibrationProtocolSpec, load_scenario

TINY = Path(__file__).parent / "tiny.yaml"


@pytest.fixture(scope="module")
def setup():
    scenario, base = load_scenario(TINY)
    institutions, _ = build_institutions(scenario, base)
    return scenario, institutions


def _rows_match(t: torch.Tensor, x: torch.Tensor) -> bool:
    """Does any width-d window of the flat payload equal (to 1e-6) a row of ``x``?"""
    flat = t.detach().reshape(-1).double()
    d = x.shape[1]
    if flat.numel() < d:
        return False
    windows = flat.unfold(0, d, 1)
    return bool((torch.cdist(windows, x.double()) < 1e-6).any())


def _private(inst) -> dict[str, torch.Tensor]:
    d = inst.data
    return {
        "observed": inst.observed_x,
        "train": d.train.x,
        "val": d.val.x,
        "test": d.test.x,
        "own_test": inst.own_test.x,
    }


def _population_arrays(inst) -> list[np.ndarray]:
    p = inst.population
    return [p.age, p.tract, p.household, p.group]


K = MessageKind
SENT = {
    "fedavg": {K.MASKED_VECTOR, K.PUBLIC_KEY, K.DATA_SIZE},  # tiny.yaml's FedAvg has secure aggregation
    "fedprox": {K.MODEL_UPDATE, K.DATA_SIZE},
    "codream": {K.MASKED_VECTOR, K.PUBLIC_KEY, K.DATA_SIZE},
    "codream_fast": {K.GENERATOR, K.DREAMS, K.LOGITS, K.DATA_SIZE},
    "mapl": {K.CLASSIFIER_HEAD, K.PROTOTYPES, K.REQUEST, K.DATA_SIZE},
    "mapl+": {K.CLASSIFIER_HEAD, K.PROTOTYPES, K.MODEL_WEIGHTS, K.REQUEST, K.DATA_SIZE},
    "cycle": {K.PREDICTION_REQUEST, K.PREDICTIONS},
    "vpdl": {K.PREDICTION_REQUEST, K.PREDICTIONS},
    "ipa": {K.TOKEN},
}
"""What every institution sends under each protocol, kind by kind (docs/private_calibration.md,
"What leaves an institution"); FedAvg and FedProx add institution 0's initial model, once; IPA adds
the initial models of every institution but the first, and the last institution's return of each
middle institution's own model (calibrator weights, as the token carries). A data size is the
institution's number of training pairs (8 bytes, before round 0: to the server under FedAvg,
FedProx and CoDream, to every other institution under MAPL); a request (MAPL's, for the prototypes
of a peer its row weights) carries nothing."""


def _audited_spec(scenario, name: str) -> CalibrationProtocolSpec:
    """The protocol as the audit runs it: tiny.yaml's entry where it has one; FedProx, MAPL+ (MAPL
    averaging the feature bodies, which needs one architecture) and CoDream-fast as the file's
    FedAvg, MAPL and CoDream give them."""
    listed = {s.name: s for s in scenario.protocols}
    if name in listed:
        return listed[name]
    if name == "fedprox":
        return CalibrationProtocolSpec(name="fedprox", models=listed["fedavg"].models)
    if name == "mapl+":
        params = {**listed["mapl"].params, "aggregate_backbone": True}
        return CalibrationProtocolSpec(name="mapl", label="mapl_plus", models=listed["fedavg"].models, params=params)
    if name == "codream_fast":
        return CalibrationProtocolSpec(name="codream_fast", params={"n_dreams": 16, "dream_start": 1})
    return CalibrationProtocolSpec(name=name)


@pytest.mark.parametrize(
    "name",
    ["local", "centralized", "fedavg", "fedprox", "codream", "codream_fast", "mapl", "mapl+", "cycle", "vpdl", "ipa"],
)
def test_what_leaves_an_institution(setup, name):
    scenario, institutions = setup
    run = run_protocol(scenario, institutions, _audited_spec(scenario, name))
    sent_by = {i.index: [m for m in run.network.messages if m.sender == i.index] for i in institutions}
    if name in ("local", "centralized"):
        # centralized is the upper bound that pools data in process; nothing travels as messages
        assert run.network.messages == []
        return
    for inst in institutions:
        msgs = sent_by[inst.index]
        assert msgs, f"{name}: institution {inst.name} sent nothing"
        kinds = {m.kind for m in msgs}
        initial = [m for m in msgs if m.kind == K.MODEL_WEIGHTS] if name in ("fedavg", "fedprox") else []
        if initial:  # the shared initialisation: institution 0's initial calibrator, once, before round 0
            assert inst.index == 0 and [(m.receiver, m.round) for m in initial] == [(SERVER, -1)]
            kinds -= {K.MODEL_WEIGHTS}
        if name == "ipa":  # theta* assembled at institution 0, and the own models returned at the end
            last, one = len(institutions) - 1, flat_params(run.participants[0].model).numel()
            own = [m for m in msgs if m.kind == K.MODEL_WEIGHTS]
            expected = [(0, -1)] if inst.index > 0 else []
            if inst.index == last:
                expected += [(j, scenario.rounds - 1) for j in range(1, last)]
            assert [(m.receiver, m.round) for m in own] == expected
            assert all(m.payload["theta"].numel() == one for m in own)
            kinds -= {K.MODEL_WEIGHTS}
        assert kinds == SENT[name], f"{name}: {inst.name} sent {sorted(kinds)}"
        if name == "ipa":  # the token holds every institution's calibrator
            every = sum(flat_params(p.model).numel() for p in run.participants)
            assert all(m.payload["theta"].numel() == every for m in msgs if m.kind == K.TOKEN)
        for m in msgs:
            if m.kind == K.DATA_SIZE:
                assert (m.round, m.nbytes, int(m.payload["n"])) == (-1, 8, len(inst.data.train))
            if m.kind == K.REQUEST:
                assert m.payload == {} and m.nbytes == 0 and m.round >= 0
            if name in ("cycle", "vpdl") and m.kind == MessageKind.PREDICTION_REQUEST:
                # CYCle's request (and its VPDL baseline's) carries the requester's training inputs, which
                # the protocol encrypts (HE); this in-process implementation only accounts their size. It
                # is the one exception.
                assert list(m.payload) == ["x"] and torch.equal(m.payload["x"], inst.data.train.x)
                continue
            for t in m.payload.values():
                for arr in _population_arrays(inst):
                    assert not (t.numel() == arr.size and np.array_equal(t.reshape(-1).numpy(), arr))
                for what, x in _private(inst).items():
                    assert not _rows_match(t, x), f"{name}: {inst.name} sent its {what} series in a {m.kind}"
    if name in ("fedavg", "codream"):
        # with secure aggregation, updates (fedavg), input gradients and logits (codream) reach the
        # server only masked
        assert {m.kind for m in run.network.messages if m.receiver == SERVER} <= {
            MessageKind.MASKED_VECTOR,
            MessageKind.PUBLIC_KEY,
            MessageKind.MODEL_WEIGHTS,  # the shared initial model, sent once by institution 0
            MessageKind.DATA_SIZE,  # the institutions' sizes, which the weights of the sums need
        }


class _Recording(SumAggregator):
    """Wraps a SecureSum and keeps the plain contributions (test only)."""

    def __init__(self, inner: SecureSum) -> None:
        self.inner = inner
        self.calls: list[tuple[dict[int, torch.Tensor], torch.Tensor]] = []

    def aggregate(self, contributions, round_, network, kind=MessageKind.MODEL_UPDATE, dropped=frozenset(), quorum=1):
        total = self.inner.aggregate(contributions, round_, network, kind, dropped, quorum)
        masked = {pid: self.inner.decode(y) for pid, y in self.inner.last_masked.items()}
        self.calls.append(({k: v.clone() for k, v in contributions.items()}, total, masked))
        return total


def test_ipa_fair_stop_on_calibrators_takes_phi_from_local_training_of_its_architecture(setup):
    """IPA's fair_stop works on calibrators: phi is exactly the validation accuracy of local-only
    run with IPA's one calibrator architecture (not local-only's mixed calibrators), and rho(t)
    and xi(t) are recorded each round."""
    from abm.learning.training import accuracy

    scenario, institutions = setup
    spec = next(s for s in scenario.protocols if s.name == "ipa")
    fair = spec.model_copy(update={"params": {"fair_stop": {"rule": "first_all_gain", "rho_min": 0.0}}})
    summary = run_protocol(scenario, institutions, fair).summary["fair_stop"]
    local = run_protocol(scenario, institutions, CalibrationProtocolSpec(name="local", models=spec.models))
    assert summary["standalone_val_accuracy"] == [accuracy(p.model, p.data.val) for p in local.participants]
    assert len(summary["rho"]) == len(summary["val_accuracy"]) == (summary["kept_round"] or scenario.rounds)


@pytest.mark.parametrize("name", ["fedavg", "fedavg_secure_dp", "codream"])
def test_secure_aggregation_server_sees_only_sums(setup, monkeypatch, name):
    """With secure aggregation the server gets one masked vector per institution and sum: each far
    from the contribution it hides, their sum the plain sum. FedAvg's updates, the same under DP
    (the shipped fedavg_secure_dp: each institution's clipped, noised update is what is masked),
    and CoDream's input gradients and logits on the dreams."""
    from abm.learning.privacy.dp import DifferentiallyPrivateSum
    from abm.learning.runner import build_aggregator

    scenario, institutions = setup
    spec = next(s for s in scenario.protocols if s.name == name.removesuffix("_secure_dp"))
    if name == "fedavg_secure_dp":
        dp = {"clip": 0.4, "epsilon": 8.0, "delta": 1.0e-5}
        spec = spec.model_validate({**spec.model_dump(), "privacy": {"secure_aggregation": True, "dp": dp}})
    recorders = []

    def build(privacy, ids, seed, rounds=None):
        agg = build_aggregator(privacy, ids, seed, rounds)
        if isinstance(agg, DifferentiallyPrivateSum):  # DP around the secure sum: record the inner sum
            agg.inner = _Recording(agg.inner)
            recorders.append(agg.inner)
            return agg
        recorders.append(_Recording(agg))
        return recorders[-1]

    monkeypatch.setattr("abm.private_calibration.federation.build_aggregator", build)
    run = run_protocol(scenario, institutions, spec)
    assert isinstance(recorders[0].inner, SecureSum)
    calls = recorders[0].calls
    if name == "codream":  # every dream step's input gradients, and each round's logits on the dreams
        assert len(calls) == (spec.params["dream_steps"] + 1) * (scenario.rounds - 1)
    else:  # one update a round
        assert len(calls) == scenario.rounds
        assert (run.epsilon is not None) == (name == "fedavg_secure_dp")
    for contributions, total, masked in calls:
        assert sorted(contributions) == sorted(masked) == [i.index for i in institutions]
        plain = torch.stack(list(contributions.values())).double().sum(0)
        assert torch.allclose(total.double(), plain, atol=1e-5)
        for pid, vec in contributions.items():
            # what the server receives from one institution is far from what it hides
            assert (masked[pid].double() - vec.double()).abs().max() > 1e3
    # from round 0 on (FedAvg's shared initial model goes before it) the server receives the
    # institutions' public keys and masked vectors, nothing else
    to_server = {m.kind for m in run.network.messages if m.receiver == SERVER and m.round >= 0}
    assert to_server == {MessageKind.MASKED_VECTOR, MessageKind.PUBLIC_KEY}
    # the keys travel in the round of the first aggregation (CoDream's first dreaming round)
    first = spec.params.get("dream_start", 0) if name == "codream" else 0
    assert {m.round for m in run.network.messages if m.kind == MessageKind.PUBLIC_KEY} == {first}


def _with_dropout(scenario) -> CalibrationProtocolSpec:
    """tiny.yaml's FedAvg (secure aggregation) with institution 2 dropping out of round 1."""
    fedavg = next(s for s in scenario.protocols if s.name == "fedavg")
    privacy = {"secure_aggregation": True, "dropouts": {1: [2]}}
    return fedavg.model_validate({**fedavg.model_dump(), "label": "fedavg_dropout", "privacy": privacy})


def test_secure_aggregation_audit_holds_every_exchange_and_no_unmasked_update(setup, monkeypatch):
    """FedAvg with secure aggregation, institution 2 dropping out of round 1: every exchange of the
    masking is an audited message of its kind and size, and the server gets no update in the
    clear. Public keys, 32 bytes, once in round 0 (each institution's to the server, relayed to
    both others); each round a masked update from each survivor (8 bytes a value); in round 1 the
    server's recovery request to each survivor (the dropped id, 8 bytes) and each survivor's
    32-byte pair seed with institution 2. The audited messages alone give the server the plain sum
    of the survivors' updates (to the 2^-24 fixed point), and each masked update is far from the
    update it hides. Before all this, the size weights: each institution's size to the server and
    their total back (8 bytes each). Everything else is the shared model (institution 0's initial
    one, then the server's broadcasts)."""
    from abm.learning.privacy.secure_aggregation import mask_from_seed
    from abm.learning.runner import build_aggregator

    scenario, institutions = setup
    recorders = []

    def build(privacy, ids, seed, rounds=None):
        recorders.append(_Recording(build_aggregator(privacy, ids, seed, rounds)))
        return recorders[-1]

    monkeypatch.setattr("abm.private_calibration.federation.build_aggregator", build)
    run = run_protocol(scenario, institutions, _with_dropout(scenario))
    secure, calls = recorders[0].inner, recorders[0].calls
    size = calls[0][0][0].numel()
    ids = [i.index for i in institutions]
    survivors = {t: [0, 1] if t == 1 else ids for t in range(scenario.rounds)}
    expected = [(K.DATA_SIZE, i, SERVER, -1, 8) for i in ids] + [(K.DATA_SIZE, SERVER, i, -1, 8) for i in ids]
    for i in ids:
        expected += [(K.PUBLIC_KEY, i, SERVER, 0, 32)] + [(K.PUBLIC_KEY, SERVER, j, 0, 32) for j in ids if j != i]
    for t, alive in survivors.items():
        expected += [(K.MASKED_VECTOR, i, SERVER, t, 8 * size) for i in alive]
        if t == 1:
            expected += [(K.RECOVERY_REQUEST, SERVER, i, 1, 8) for i in alive]
            expected += [(K.MASK_SEED, i, SERVER, 1, 32) for i in alive]
    audited = [m for m in run.network.messages if m.kind != K.MODEL_WEIGHTS]
    assert [(m.kind, m.sender, m.receiver, m.round, m.nbytes) for m in audited] == expected
    shared = [(m.sender, m.receiver, m.round) for m in run.network.messages if m.kind == K.MODEL_WEIGHTS]
    assert shared == [(0, SERVER, -1)] + [(SERVER, i, t) for t in range(-1, scenario.rounds) for i in ids]
    assert [m.payload["dropped"].tolist() for m in audited if m.kind == K.RECOVERY_REQUEST] == [[2], [2]]
    for t, (contributions, _total, _masked) in enumerate(calls):
        at = [m for m in audited if m.round == t]
        with np.errstate(over="ignore"):
            server = np.zeros(size, dtype=np.uint64)
            for m in at:
                if m.kind == K.MASKED_VECTOR:
                    server = server + m.payload["y"].numpy().view(np.uint64)
                    hidden = contributions[m.sender].double()
                    assert (secure.decode(m.payload["y"].numpy()).double() - hidden).abs().max() > 1e3
                elif m.kind == K.MASK_SEED:  # institution 2 > every survivor: each survivor added the mask
                    server = server - mask_from_seed(m.payload["seed"].numpy().tobytes(), size)
        plain = torch.stack([contributions[i] for i in survivors[t]]).double().sum(0)
        assert torch.allclose(secure.decode(server).double(), plain, atol=1e-5)


def test_the_reported_bytes_are_the_audited_messages(setup, monkeypatch):
    """report.json's bytes (the total, by kind, and each institution's sent and received) are sums
    over the audited messages, and the audit holds every kind of exchange: FedAvg with secure
    aggregation and a dropout (the sizes, keys, masked updates, the recovery request and seeds),
    CYCle (a request to every peer, the predictions of those that share), IPA under fair_stop with
    size pair weights (the sizes, the token, the models assembled and returned, the published
    validation accuracies), MAPL (the sizes, heads, and prototypes each on a request) and CoDream
    with secure aggregation (the sizes, the dreams, keys, masked gradients and logits, the soft
    labels, the server's student for the adversarial term)."""
    from collections import defaultdict

    import abm.private_calibration.report as report_module

    scenario, _ = setup
    listed = {s.name: s for s in scenario.protocols}
    params = {"fair_stop": {"rho_min": 0.0}, "pair_weights": "size"}
    fair = listed["ipa"].model_copy(update={"label": "ipa_fair", "params": params})
    cycle = CalibrationProtocolSpec(name="cycle")
    protocols = [_with_dropout(scenario), cycle, fair, listed["mapl"], listed["codream"]]
    scenario = scenario.model_copy(update={"protocols": protocols})
    runs = []

    def keep(*args, **kwargs):
        runs.append(run_protocol(*args, **kwargs))
        return runs[-1]

    monkeypatch.setattr(report_module, "run_protocol", keep)
    report = report_module.run_all(scenario, TINY.parent)[0]["protocols"]
    kinds = {
        "local": set(),
        "fedavg_dropout": {
            "data_size",
            "model_weights",
            "public_key",
            "masked_vector",
            "recovery_request",
            "mask_seed",
        },
        "cycle": {"prediction_request", "predictions"},
        "ipa_fair": {"data_size", "token", "model_weights", "validation_accuracy"},
        "mapl": {"data_size", "classifier_head", "request", "prototypes"},
        "codream": {"data_size", "dreams", "public_key", "masked_vector", "soft_labels", "model_weights"},
    }
    assert [r.key for r in runs] == list(kinds)
    for r in runs:
        by_kind: dict[str, int] = defaultdict(int)
        for m in r.network.messages:
            by_kind[m.kind.value] += m.nbytes
        row = report[r.key]
        assert row["bytes_by_kind"] == by_kind and set(by_kind) == kinds[r.key], r.key
        assert row["bytes_total"] == sum(m.nbytes for m in r.network.messages)
        for i, inst in enumerate(row["institutions"]):
            assert inst["bytes_sent"] == sum(m.nbytes for m in r.network.messages if m.sender == i)
            assert inst["bytes_received"] == sum(m.nbytes for m in r.network.messages if m.receiver == i)
    audit = {r.key: r.network.messages for r in runs}
    assert {m.nbytes for m in audit["ipa_fair"] if m.kind == K.VALIDATION_ACCURACY} == {8}
    # the sizes: once, before round 0, 8 bytes each; to the server and the total back, or to every peer
    n = len(report["local"]["institutions"])
    for key, count in [("fedavg_dropout", 2 * n), ("codream", 2 * n), ("ipa_fair", n * (n - 1)), ("mapl", n * (n - 1))]:
        assert [(m.round, m.nbytes) for m in audit[key] if m.kind == K.DATA_SIZE] == [(-1, 8)] * count, key
    # MAPL: each prototypes message answers the receiver's request of its round (0 bytes)
    for k, m in enumerate(audit["mapl"]):
        if m.kind == K.PROTOTYPES:
            ask = audit["mapl"][k - 1]
            assert (ask.kind, ask.sender, ask.receiver, ask.round, ask.nbytes) == (
                K.REQUEST,
                m.receiver,
                m.sender,
                m.round,
                0,
            )
    # CoDream: in each dreaming round each institution gets a step's dreams per dream step and the
    # final dreams, then the soft labels alone (not the dreams again)
    steps, start = listed["codream"].params["dream_steps"], listed["codream"].params["dream_start"]
    for t in range(start, scenario.rounds):
        got = [m for m in audit["codream"] if m.receiver == 0 and m.round == t and m.kind in (K.DREAMS, K.SOFT_LABELS)]
        assert [m.kind for m in got] == [K.DREAMS] * (steps + 1) + [K.SOFT_LABELS]
        assert list(got[-1].payload) == ["y"] and got[-1].payload["y"].shape[0] == got[-2].payload["x"].shape[0]


def test_protocols_with_equal_estimates_get_equal_nd():
    """The end-to-end fits use common random numbers: an estimate's ND depends on the estimate
    only, not on which protocol gave it or on the other protocols' estimates."""
    from abm.private_calibration.evaluation import end_to_end

    scenario, base = load_scenario(TINY)
    institutions, model = build_institutions(scenario, base)
    same = {"transmission": 1.1, "seeding": 12.0, "ascertainment": 0.2}
    other = {"transmission": 0.7, "seeding": 40.0, "ascertainment": 0.1}

    def rows(est):
        return [{"estimate": dict(est)} for _ in institutions]

    a = end_to_end(scenario, model, institutions, {"x": rows(same), "y": rows(other)})
    b = end_to_end(scenario, model, institutions, {"z": rows(other), "w": rows(same)})

    def fit(run, key, i):  # as text, so that a NaN (no admissions observed) equals itself
        return json.dumps(run[key][i]["fit"], sort_keys=True)

    for i in range(len(institutions)):
        assert fit(a, "x", i) == fit(b, "w", i) and fit(a, "y", i) == fit(b, "z", i)
        assert fit(a, "x", i) != fit(a, "y", i)


def test_the_fit_at_an_estimate_simulates_all_its_parameters(setup):
    """End to end, an estimate is simulated with its own transmission, seeding and ascertainment:
    two estimates that differ only in ascertainment (0.1 and 0.3) give the same admissions and
    expected cases in the ratio 1 : 3 (the same seed, so the same onsets), and each fit is the
    losses of its curve against the institution's observed series."""
    from abm.calibration.observed import losses
    from abm.private_calibration.evaluation import end_to_end
    from abm.private_calibration.institutions import model_scenario

    scenario, institutions = setup
    model = model_scenario(scenario, TINY.parent)
    low = {"transmission": 1.1, "seeding": 12.0, "ascertainment": 0.1}
    rows = {"low": [{"estimate": low}], "high": [{"estimate": {**low, "ascertainment": 0.3}}]}
    out = end_to_end(scenario, model, institutions[:1], rows)
    a, b = out["low"][0]["curve"], out["high"][0]["curve"]
    assert a["cases"].sum() > 0
    np.testing.assert_allclose(b["cases"], 3 * a["cases"], rtol=1e-12)
    np.testing.assert_array_equal(a["hospital_admissions"], b["hospital_admissions"])
    for key in ("low", "high"):
        row = out[key][0]
        expected = losses(row["curve"], institutions[0].observed_daily, scenario.model.window)
        # as text, so that an ND of a series with no observed count (NaN) equals itself
        assert json.dumps(row["fit"], sort_keys=True) == json.dumps(expected, sort_keys=True)


def test_the_fit_at_an_estimate_runs_its_transmission_and_seeding(setup, monkeypatch):
    """Each of the estimate_replicates replicates runs the estimate's transmission multiplier and
    its seeding rounded to whole agents."""
    import abm.private_calibration.evaluation as evaluation
    from abm.private_calibration.institutions import model_scenario

    scenario, institutions = setup
    model = model_scenario(scenario, TINY.parent)
    calls = []
    real = evaluation.simulate

    def recorded(population, model, section, multipliers, seeds, seed):
        calls.append((multipliers.tolist(), seeds.tolist()))
        return real(population, model, section, multipliers, seeds, seed)

    monkeypatch.setattr(evaluation, "simulate", recorded)
    estimate = {"transmission": 1.3, "seeding": 11.6, "ascertainment": 0.2}
    evaluation.end_to_end(scenario, model, institutions[:1], {"p": [{"estimate": estimate}]})
    reps = scenario.evaluation.estimate_replicates
    assert calls == [([1.3] * reps, [12] * reps)]


def test_protocol_table_by_hand():
    """The report's per-protocol block on hand-made runs: gains against local-only on the full
    range and on the own prior (each against its own standalone score), MCG and CGS (population
    sd) of each, ND as the mean over the channels that have one, and each institution's bytes as
    sent and received on the network."""
    from types import SimpleNamespace

    from abm.learning.messages import Message, Network
    from abm.private_calibration.evaluation import protocol_table
    from abm.private_calibration.federation import ProtocolRun

    class Scored:
        def __init__(self, score: float, own: float) -> None:
            self._score, self._own = score, own

        def score(self) -> float:
            return self._score

        def own_score(self) -> float:
            return self._own

        def recovery(self) -> dict[str, float]:
            return {"transmission": self._score}

    def run(key: str, scores: list[tuple[float, float]], network: Network) -> ProtocolRun:
        params = {"mu": 0.0} if key == "fedavg" else {}
        return ProtocolRun(key, key, [Scored(*s) for s in scores], [], network, 1.0, None, None, {}, params=params)

    net = Network()
    net.send(Message(MessageKind.MODEL_UPDATE, 0, SERVER, {"v": torch.zeros(25)}))  # 100 bytes
    net.send(Message(MessageKind.MODEL_WEIGHTS, SERVER, 1, {"w": torch.zeros(10)}))  # 40 bytes
    net.send(Message(MessageKind.MODEL_UPDATE, 1, SERVER, {"v": torch.zeros(2, dtype=torch.float64)}))  # 16
    runs = [run("local", [(0.5, 0.7), (0.6, 0.8)], Network()), run("fedavg", [(0.6, 0.75), (0.9, 0.7)], net)]
    fit = {
        "cases": {"nd_weekly": 0.2, "rmse_log1p_weekly": 0.3},
        "hospital_admissions": {"nd_weekly": float("nan"), "rmse_log1p_weekly": 0.1},
    }
    rows = [{"estimate": {"transmission": 1.0}, "fit": fit} for _ in range(2)]
    institutions = [SimpleNamespace(name=n, truth=None) for n in ("A", "B")]
    table = protocol_table(runs, {"local": rows, "fedavg": rows}, institutions)
    fedavg = table["fedavg"]
    assert [r["gain"] for r in fedavg["institutions"]] == pytest.approx([0.1, 0.3])
    assert (fedavg["mcg"], fedavg["cgs"], fedavg["min_gain"]) == pytest.approx((0.2, 0.1, 0.1))
    assert [r["gain_own"] for r in fedavg["institutions"]] == pytest.approx([0.05, -0.1])
    assert (fedavg["mcg_own"], fedavg["cgs_own"], fedavg["min_gain_own"]) == pytest.approx((-0.025, 0.075, -0.1))
    assert [(r["bytes_sent"], r["bytes_received"]) for r in fedavg["institutions"]] == [(100, 0), (16, 40)]
    assert fedavg["bytes_total"] == 156 and table["local"]["bytes_total"] == 0
    assert fedavg["institutions"][0]["nd_mean"] == pytest.approx(0.2) and fedavg["mean_nd"] == pytest.approx(0.2)
    assert table["local"]["mcg"] == 0.0
    assert (fedavg["params"], table["local"]["params"]) == ({"mu": 0.0}, {})  # the protocol's params as run


def test_abm_learn_end_to_end(tmp_path):
    out = tmp_path / "pc"
    proc = subprocess.run(
        [sys.executable, "-m", "abm", "learn", str(TINY), "--out", str(out)], capture_output=True, text=True
    )
    assert proc.returncode == 0, proc.stderr

    def strict(token: str) -> None:
        raise AssertionError(f"report.json holds {token}, which is not JSON")

    report = json.loads((out / "report.json").read_text(), parse_constant=strict)
    assert report["kind"] == "private_calibration" and report["mode"] == "known_truth"
    assert [i["name"] for i in report["institutions"]] == ["Seattle", "East", "South"]
    expected = ["local", "centralized", "fedavg", "codream", "mapl", "cycle", "ipa"]
    assert list(report["protocols"]) == expected
    for key, r in report["protocols"].items():
        rows = r["institutions"]
        assert len(rows) == 3
        for row in rows:
            assert 0.0 <= row["recovery"] <= 1.0
            assert set(row["nd"]) == {"cases", "hospital_admissions"} and row["nd_mean"] >= 0
            assert set(row["estimate"]) == {"transmission", "seeding", "ascertainment"}
            assert row["gain"] == pytest.approx(row["recovery"] - row["standalone"])
            assert 0.0 <= row["recovery_own"] <= 1.0
            assert row["gain_own"] == pytest.approx(row["recovery_own"] - row["standalone_own"])
        assert r["mcg"] == pytest.approx(np.mean([row["gain"] for row in rows]))
        assert r["cgs"] == pytest.approx(np.std([row["gain"] for row in rows]))
        assert r["mcg_own"] == pytest.approx(np.mean([row["gain_own"] for row in rows]))
        if key in ("local", "centralized"):
            assert r["bytes_total"] == 0
        else:
            assert r["bytes_total"] > 0
    assert report["protocols"]["local"]["mcg"] == 0.0
    assert "masked_vector" in report["protocols"]["fedavg"]["bytes_by_kind"]
    # each protocol's params as run: the file's (tiny.yaml gives mapl two) with the defaults filled in
    from abm.learning.protocols.mapl import MAPLConfig

    assert report["protocols"]["mapl"]["params"] == MAPLConfig(proto_dim=8, projector_hidden=8).model_dump(mode="json")
    assert report["protocols"]["mapl"]["params"]["proto_dim"] == 8 and report["protocols"]["local"]["params"] == {}
    assert not {"input_gradients", "logits"} & report["protocols"]["codream"]["bytes_by_kind"].keys()  # only masked
    md = (out / "report.md").read_text()
    assert "| codream |" in md and "| truth |" in md and "mean recovery (own prior)" in md
    page = (out / "report.html").read_text()  # report.md's tables rendered, then the plots
    assert page.count("<table>") == md.count("\n|---") == 3 and "<td>codream</td>" in page
    assert all(f'<img src="{name}"' in page for name in report["plots"]) and "regions.png" in report["plots"]
    for f in ("recovery.png", "gains.png", "gains_own.png", "nd.png", "fits.png", "curves.png", "regions.png"):
        assert (out / f).stat().st_size > 1000
    assert "codream" in proc.stdout and "report:" in proc.stdout
    # docs/private_calibration.md names every key (it named a few: not plots, timings_s, nd_mean,
    # truth_bin_hit, an institution's train_pairs...), and every key its tables list is written
    doc = (Path(__file__).resolve().parents[2] / "docs" / "private_calibration.md").read_text()
    section = doc[doc.index("`report.json`'s keys, by name") : doc.index("## Results and what does not hold")]
    fedavg, parameter = report["protocols"]["fedavg"], next(iter(report["parameters"].values()))
    keys = set(report) | set(report["institutions"][0]) | set(report["timings_s"]) | set(parameter)
    keys |= set(fedavg) | set(fedavg["institutions"][0]) | set(fedavg["privacy"])
    assert sorted(k for k in keys if f"`{k}`" not in section) == []
    firsts = [line.split(" | ")[0] for line in section.splitlines() if line.startswith("| `")]
    assert sorted({n for cell in firsts for n in re.findall(r"`(\w+)`", cell)} - keys) == []


@pytest.mark.parametrize(
    ("edit", "message"),
    [
        (lambda d: d.update(colour=1), "colour: unknown key; allowed keys: kind, name,"),
        (
            lambda d: d["institutions"][0]["prior"].update(transmission=[0.1, 1.0]),
            "institutions[0].prior.transmission: [0.1, 1.0] is not allowed: must lie in [0.6, 1.4] with low < high",
        ),
        (
            lambda d: d["institutions"][1].pop("truth"),
            "institutions[1].truth: missing ['ascertainment', 'seeding', 'transmission']: known_truth mode needs",
        ),
        (
            lambda d: d["institutions"][0].update(tracts="west"),
            "institutions[0].tracts: 'west' is not allowed: must be 'seattle', 'north', 'east' or 'south'; "
            "or must be a list",
        ),
        (
            lambda d: d["protocols"].append(
                {"name": "mapl", "label": "mapl_sa", "privacy": {"secure_aggregation": True}}
            ),
            "privacy: not allowed for mapl: privacy wrappers apply only to protocols whose aggregation is a sum",
        ),
        (
            lambda d: d["institutions"][1].update(tracts=d["institutions"][0]["tracts"]),
            "institutions[1].tracts: 132 tracts (e.g. 53033000100) also belong to institutions[0] (Seattle); "
            "institutions hold disjoint tracts",
        ),
        (
            lambda d: d["institutions"][0].update(tracts=["53033000100", "53033000100"]),
            "institutions[0].tracts: ['53033000100'] listed twice",
        ),
        (
            lambda d: d["institutions"][0].update(tracts=[53033000100]),
            "institutions[0].tracts: [53033000100] is not allowed: tract GEOIDs are text: quote them",
        ),
        (
            lambda d: d["parameters"]["seeding"].update(high=1000),
            "institutions[0].agents: 600 is not allowed: fewer agents than the seeding range's 1000 initial infections",
        ),
        (
            lambda d: d["parameters"]["seeding"].update(low=0.2),
            "parameters.seeding.low: 0.2 is not allowed: seeding counts",
        ),
        (lambda d: d.update(models=[]), "models: has 0 items; give at least 1"),
        (lambda d: d.update(institutions=d["institutions"][:1]), "institutions: has 1 item; give at least 2"),
        (
            lambda d: d["model"].update(scenario=str(TINY.resolve())),
            "a private_calibration scenario; give an epidemic scenario",
        ),
        (
            lambda d: d["protocols"].append({"name": "p2p_selection"}),  # refused, and not listed as allowed
            "name: 'p2p_selection' is not allowed: must be 'local', 'centralized', 'fedavg', 'fedprox', "
            "'codream', 'codream_fast', 'mapl', 'cycle', 'vpdl' or 'ipa'",
        ),
        (
            lambda d: d["model"].update(window=["2020-02-29", "2020-03-30"]),
            "window 2020-02-29..2020-03-30 is 31 days; give whole weeks",
        ),
        (
            lambda d: d.update(mode="kc2020"),
            "institutions[0].truth: not used in kc2020 mode",
        ),
        (
            lambda d: d["protocols"].append(
                {
                    "name": "fedavg",
                    "label": "x",
                    "models": d["protocols"][1]["models"],
                    "privacy": {"dropouts": {0: [7]}},
                },
            ),
            "privacy.dropouts[0]: bad institutions [7]: 0..2",
        ),
        (
            lambda d: d["protocols"].append(
                {
                    "name": "fedavg",
                    "label": "x",
                    "models": d["protocols"][1]["models"],
                    "privacy": {"secure_aggregation": True, "dropouts": {0: [0, 1]}},
                }
            ),
            "privacy.dropouts[0]: [0, 1] is not allowed: secure aggregation needs at least two institutions left",
        ),
        (
            lambda d: d["protocols"].append(
                {
                    "name": "fedavg",
                    "label": "x",
                    "models": d["protocols"][1]["models"],
                    "privacy": {"dropouts": {0: [0, 1]}},
                }
            ),
            "privacy.dropouts[0]: [0, 1] is not allowed: the round's sum needs at least two institutions left",
        ),
        (
            lambda d: d["parameters"]["ascertainment"].update(high=1.5),
            "parameters.ascertainment.high: 1.5 is not allowed: ascertainment is a share, at most 1",
        ),
    ],
)
def test_bad_scenario_exits_2_and_writes_nothing(tmp_path, edit, message):
    data = yaml.safe_load(TINY.read_text())
    data["model"]["scenario"] = str((TINY.parent / data["model"]["scenario"]).resolve())
    edit(data)
    bad = tmp_path / "bad.yaml"
    bad.write_text(yaml.safe_dump(data))
    out = tmp_path / "out"
    result = CliRunner().invoke(app, ["learn", str(bad), "--out", str(out)])
    assert result.exit_code == 2
    assert str(bad) in result.stderr and message in result.stderr
    assert result.stderr.count("\n") == 1
    assert not out.exists()


def protocol_figures(estimate: dict[str, float]) -> dict[str, object]:
    """A protocol's entry in a report as markdown() reads it: one institution with ``estimate``
    (recovery 0.5, ND 0.3), no gains, no bytes."""
    row = {"recovery": 0.5, "estimate": estimate, "nd_mean": 0.3}
    return {
        "institutions": [row],
        "mean_recovery": 0.5,
        "mcg": 0.0,
        "cgs": 0.0,
        "min_gain": 0.0,
        "mean_nd": 0.3,
        "bytes_total": 0,
        "wall_time_s": 0.1,
    }


def test_markdown_names_the_estimated_parameters_only():
    """The estimates table's caption lists the scenario's free parameters, in the order of the
    values in its cells: without ascertainment it must not promise an ascertainment value."""
    from abm.private_calibration.report import markdown

    prot = protocol_figures({"transmission": 1.1, "seeding": 12.0})
    report = {
        "scenario": "s",
        "mode": "known_truth",
        "note": "n",
        "joint_classes": 4,
        "parameters": {"transmission": {}, "seeding": {}},
        "institutions": [{"name": "A", "truth": {"transmission": 1.2, "seeding": 10.0}}],
        "protocols": {"local": prot},
    }
    md = markdown(report)
    assert "Estimates (transmission multiplier, seeding) and ND per institution:" in md
    assert "| local | 1.1, 12 (ND 0.30) |" in md


def test_markdown_says_centralized_pools_the_simulations():
    """centralized's bytes sent are 0 because it pools every institution's simulations in
    process, not because nothing would move: report.md says so under the table (it said nothing,
    so the upper bound read as the cheapest private protocol); a report without it has no such line."""
    from abm.private_calibration.report import markdown

    prot = protocol_figures({"transmission": 1.1})
    report = {
        "scenario": "s",
        "mode": "kc2020",
        "note": "n",
        "joint_classes": 4,
        "parameters": {"transmission": {}},
        "institutions": [{"name": "A", "truth": None}],
        "protocols": {"local": {**prot, "protocol": "local"}, "pooled": {**prot, "protocol": "centralized"}},
    }
    note = (
        "pooled: the upper bound, not a private protocol: one calibrator trained on every institution's "
        "training simulations pooled in this process. Its 0 B sent count no messages"
    )
    assert note in markdown(report)
    del report["protocols"]["pooled"]
    assert "the upper bound" not in markdown(report)


def test_round_curves_tick_whole_rounds(tmp_path, monkeypatch):
    """curves.png's x axis counts rounds: a run of a few rounds must not tick 1.5 rounds."""
    from abm.learning import report as learning_report

    figures = []
    monkeypatch.setattr(learning_report, "save_figure", lambda fig, path, files=None: figures.append(fig))
    protocols = {"local": {"history": [0.4, 0.5, 0.5, 0.6]}, "fedavg": {"history": [0.5, 0.6, 0.6, 0.7]}}
    learning_report.plot_round_curves(protocols, "mean recovery accuracy", tmp_path / "curves.png")
    ax = figures[0].axes[0]
    lo, hi = ax.get_xlim()
    ticks = [t for t in ax.get_xticks() if lo <= t <= hi]
    assert ticks and all(float(t).is_integer() for t in ticks), ticks
    assert ax.get_xlabel() == "round"


def test_console_summary_says_n_a_where_no_own_prior_evaluation_ran():
    """With own_holdout_simulations: 0 the own-prior figures are NaN: the console table says
    "n/a" there (it printed "nan" and "+nan"), and the figures it has, to 3 decimals."""
    from abm.private_calibration.cli import summary_lines

    row = {
        "mean_recovery": 0.5,
        "institutions": [{"recovery": 0.25}, {"recovery": 0.75}],
        "mcg": 0.125,
        "cgs": 0.0,
        "mean_recovery_own": float("nan"),
        "mcg_own": float("nan"),
        "mean_nd": 0.3,
        "bytes_total": 2_000_000,
    }
    with_own = {**row, "mean_recovery_own": 0.625, "mcg_own": -0.125, "bytes_total": 3_200}  # 0.00 in MB
    report = {"institutions": [{"name": "Seattle"}, {"name": "South"}], "protocols": {"fedavg": row, "ipa": with_own}}
    lines = summary_lines(report)
    figures = ["0.500", "0.250", "0.750", "+0.125", "0.000"]
    assert lines[1].split() == ["fedavg", *figures, "n/a", "n/a", "0.30", "2.00", "MB"]
    assert lines[2].split() == ["ipa", *figures, "0.625", "-0.125", "0.30", "3.2", "kB"]
    assert "nan" not in "\n".join(lines)
    assert len(lines) == 4  # the header, a row per protocol and what the columns mean: no DP, no DP line


def test_console_summary_heads_each_institution_by_its_whole_name():
    """Institution columns were headed by the first 9 letters of the name: 'Institution A' and
    'Institution B' both read 'Instituti'. Each column is now as wide as its name (at least 10)."""
    from abm.private_calibration.cli import summary_lines

    row = {
        "mean_recovery": 0.5,
        "institutions": [{"recovery": 0.25}, {"recovery": 0.75}],
        "mcg": 0.0,
        "cgs": 0.0,
        "mean_recovery_own": 0.5,
        "mcg_own": 0.0,
        "mean_nd": 0.3,
        "bytes_total": 0,
    }
    report = {"institutions": [{"name": "Institution A"}, {"name": "Institution B"}], "protocols": {"local": row}}
    lines = summary_lines(report)
    assert lines[0].split()[:6] == ["protocol", "recovery", "Institution", "A", "Institution", "B"]
    assert lines[0].index("Institution A") + len("Institution A") == lines[1].index("0.250") + len("0.250")
    assert lines[0].index("Institution B") + len("Institution B") == lines[1].index("0.750") + len("0.750")
    assert len(lines[0]) == len(lines[1])


def test_console_summary_gives_the_epsilon_of_a_dp_protocol():
    """A DP protocol's epsilon was in report.json and report.md but not on the console: it now
    gets a line after the table, per institution (the level the guarantee is for)."""
    from abm.private_calibration.cli import summary_lines

    row = {
        "mean_recovery": 0.5,
        "institutions": [{"recovery": 0.5}],
        "mcg": 0.0,
        "cgs": 0.0,
        "mean_recovery_own": 0.5,
        "mcg_own": 0.0,
        "mean_nd": 0.3,
        "bytes_total": 1_000_000,
    }
    dp = {"clip": 0.4, "delta": 1e-5, "noise_multiplier": 4.03, "rounds": 40, "releases": 40, "accountant": "rdp"}
    private = {**row, "epsilon": 7.99, "delta": 1e-5, "privacy": {"secure_aggregation": True, "dp": dp}}
    report = {"institutions": [{"name": "Seattle"}], "protocols": {"local": row, "fedavg_secure_dp": private}}
    assert summary_lines(report)[-1] == (
        "fedavg_secure_dp: differential privacy, epsilon 7.99 at delta 1e-05 per institution over 40 noisy "
        "releases in 40 rounds (rdp accountant, clip 0.4, noise multiplier 4.03)"
    )
    assert len(summary_lines(report)) == 5


def test_mean_nd_skips_an_institution_without_any_nd():
    """ND = sum |sim - obs| / sum obs has no value for a channel observed as all zeros; an
    institution with no channel that has one gets ``nd_mean`` NaN, and the protocol's mean ND is
    the mean over the institutions that have one: A's 0.2 and 0.4 give nd_mean 0.3, B has none,
    so mean ND = 0.3 (not NaN); and numpy's warning about B's empty mean does not reach the user."""
    import warnings
    from types import SimpleNamespace

    from abm.learning.messages import Network
    from abm.private_calibration.evaluation import protocol_table
    from abm.private_calibration.federation import ProtocolRun

    class Scored:
        def score(self) -> float:
            return 0.5

        def own_score(self) -> float:
            return 0.5

        def recovery(self) -> dict[str, float]:
            return {"transmission": 0.5}

    nan = float("nan")
    fit_a = {
        "cases": {"nd_weekly": 0.2, "rmse_log1p_weekly": 0.1},
        "deaths": {"nd_weekly": 0.4, "rmse_log1p_weekly": 0.1},
    }
    fit_b = {
        "cases": {"nd_weekly": nan, "rmse_log1p_weekly": 0.1},
        "deaths": {"nd_weekly": nan, "rmse_log1p_weekly": 0.1},
    }
    rows = [{"estimate": {}, "fit": fit_a}, {"estimate": {}, "fit": fit_b}]
    runs = [ProtocolRun("local", "local", [Scored(), Scored()], [], Network(), 1.0, None, None, {})]
    institutions = [SimpleNamespace(name=n, truth=None) for n in ("A", "B")]
    with warnings.catch_warnings():
        warnings.simplefilter("error", RuntimeWarning)  # B's empty set of NDs: no "Mean of empty slice" warning
        table = protocol_table(runs, {"local": rows}, institutions)["local"]
    assert table["institutions"][0]["nd_mean"] == pytest.approx(0.3)
    assert np.isnan(table["institutions"][1]["nd_mean"])
    assert table["mean_nd"] == pytest.approx(0.3)


def test_report_json_lists_the_sets_and_the_file_as_learning_reports_do(tmp_path):
    """docs/learning.md: ``report.json`` lists the ``--set`` options (``sets``) beside the file
    (``source``). A learning report did; a private-calibration one, also written by ``abm learn``,
    had neither, so only scenario.json's values told that a run was not the file's."""
    from abm.private_calibration.report import run_private_calibration

    sets = ["rounds=1", "protocols=[{name: centralized}]"]
    report = run_private_calibration(TINY, tmp_path / "out", None, sets)
    written = json.loads((tmp_path / "out" / "report.json").read_text())
    assert written["sets"] == report["sets"] == sets and written["source"] == str(TINY)
    assert list(written["protocols"]) == ["local", "centralized"]


def test_the_institution_bar_plots_name_the_scenario_and_what_they_measure():
    """recovery.png, gains.png, gains_own.png and nd.png had no title: gains.png and gains_own.png
    differed only by ", own prior" in the y label, and none said the scenario or that the gain is in
    recovery on held-out simulations."""
    import matplotlib.pyplot as plt

    from abm.private_calibration.report import institution_bars

    row = {"recovery": 0.5, "gain": 0.1, "gain_own": -0.1, "nd_mean": 0.4}
    report = {
        "scenario": "pc",
        "protocols": {"local": {"institutions": [row, row]}, "fedavg": {"institutions": [row, row]}},
    }
    titles = {}
    for metric in ("recovery", "gain", "gain_own", "nd_mean"):
        fig = institution_bars(report, ["A", "B"], metric)
        titles[metric] = (fig.axes[0].get_title(), fig.axes[0].get_ylabel())
        assert [p.get_height() for p in fig.axes[0].patches] == [row[metric]] * 4
        plt.close(fig)
    assert titles == {
        "recovery": ("pc: recovery (held-out simulations, full range)", "recovery accuracy"),
        "gain": (
            "pc: gain in recovery (held-out, full range)",
            "gain in recovery over local-only",
        ),
        "gain_own": (
            "pc: gain in recovery (held-out, own prior)",
            "gain in recovery over local-only",
        ),
        "nd_mean": ("pc: normalized deviation of the fit at the estimate", "ND at the estimate (mean of channels)"),
    }


def test_scenario_json_runs_the_same_calibration_again_from_any_folder(tmp_path, monkeypatch):
    """``scenario.json`` holds the scenario as run: ``abm learn`` on it gives the same report, from
    another working folder too. It kept ``model.scenario`` as the file gave it, relative to the
    file's folder (``../../scenarios/king_county/calibrate_2020.yaml``), which from the report
    folder names no file: "model.scenario: ... is not allowed: no such file". Then it named the
    model file by its full path, so a model file changed after the run (a later commit's rate, an
    edit) ran another calibration silently; the folder now keeps the model scenario resolved
    (``model.resolved.yaml``, its overrides applied) and scenario.json names that."""
    from abm.private_calibration.report import run_private_calibration
    from abm.scenario import load_scenario as load_model

    model = tmp_path / "model.yaml"
    shipped = (TINY.parent / "../../scenarios/king_county/calibrate_2020.yaml").resolve()
    model.write_text(f"extends: {shipped}\nname: kc\n", encoding="utf-8")
    sets = ["rounds=1", "protocols=[{name: centralized}]", f"model.scenario={model}"]
    # the fewest held-out and validation simulations allowed, none of one's own prior: it runs twice
    sets += ["evaluation.holdout_simulations=4", "evaluation.val_simulations=4", "evaluation.own_holdout_simulations=0"]
    run_private_calibration(TINY, tmp_path / "first", None, sets)
    model.write_text(f"extends: {shipped}\nname: kc\ncontacts: {{community: {{weight: 3.0}}}}\n", encoding="utf-8")
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    monkeypatch.chdir(elsewhere)
    run_private_calibration(tmp_path / "first" / "scenario.json", tmp_path / "again")
    ran = json.loads((tmp_path / "first" / "scenario.json").read_text())
    assert (ran["model"]["scenario"], ran["model"]["set"]) == ("model.resolved.yaml", [])
    as_run = load_model(tmp_path / "first" / "model.resolved.yaml")
    assert as_run.name == "kc" and as_run.disease.transmission_rate == 3.0  # tiny.yaml's model.set applied
    assert as_run.contacts.community.weight == load_model(shipped).contacts.community.weight
    for name in ("scenario.json", "model.resolved.yaml"):
        assert (tmp_path / "again" / name).read_text() == (tmp_path / "first" / name).read_text()
    assert found(tmp_path / "again") == found(tmp_path / "first")
    # the model file as changed runs another calibration: the check above can tell
    run_private_calibration(TINY, tmp_path / "changed", None, sets)
    assert found(tmp_path / "changed") != found(tmp_path / "first")


def found(folder: Path) -> object:
    """A report.json as written (an undefined figure as null), less where its scenario came from
    and how long each part took."""
    how_run = {"timings_s", "wall_time_s", "source", "sets"}

    def strip(value: object) -> object:
        if isinstance(value, dict):
            return {k: strip(v) for k, v in value.items() if k not in how_run}
        return [strip(v) for v in value] if isinstance(value, list) else value

    return strip(json.loads((folder / "report.json").read_text()))


def test_the_fits_plot_says_what_it_draws_by_date_with_its_legend_beside_the_panels():
    """fits.png had no title (nothing said the lines are each protocol's estimate simulated, nor
    of how many replicates), counted "week of window" 0-7 instead of naming the weeks' dates, and
    its legend lay inside the first panel over the observed weeks. Each protocol's line keeps its
    colour of curves.png where a protocol has no fit to draw."""
    from types import SimpleNamespace

    import matplotlib.pyplot as plt
    import pandas as pd

    from abm.learning.report import line_style
    from abm.private_calibration.report import fits_figure

    days = pd.date_range("2020-02-29", "2020-04-24")
    frame = pd.DataFrame({"cases": 10.0, "hospital_admissions": 1.0}, index=days)
    institutions = [SimpleNamespace(name=name, observed_daily=frame * 3) for name in ("A", "B")]
    report = {
        "scenario": "pc",
        "mode": "known_truth",
        "window": ["2020-02-29", "2020-04-24"],
        "protocols": {"local": {}, "fedavg": {}, "mapl": {}},
    }
    fig = fits_figure(report, {"local": [frame, frame], "mapl": [frame * 2, frame * 2]}, institutions, 3)
    fig.tight_layout()
    fig.draw_without_rendering()
    title = " ".join(fig.get_suptitle().split())
    assert title == (
        "pc: weekly cases and hospital admissions per 100,000; dots: observed (simulated at the truth); "
        "lines: simulated at each protocol's estimate (the mean of 3 replicates)"
    )
    legend = next(ax.get_legend() for ax in fig.axes if ax.get_legend() is not None)
    assert [t.get_text() for t in legend.get_texts()] == ["observed", "local", "mapl"]
    box = legend.get_window_extent()
    assert not any(box.overlaps(ax.get_window_extent()) for ax in fig.axes)
    ax = fig.axes[0]
    # eight weeks from 2020-02-29, each dot on the date its week starts
    dots = ax.lines[0].get_xdata()
    assert [pd.Timestamp(x).date().isoformat() for x in dots[:2]] == ["2020-02-29", "2020-03-07"] and len(dots) == 8
    assert "Mar" in [t.get_text() for t in ax.get_xticklabels()]
    assert ax.xaxis.get_major_formatter().get_offset() == "2020"
    assert fig.axes[len(institutions)].get_xlabel() == "week starting"
    mapl = next(line for line in ax.lines if line.get_label() == "mapl")
    assert mapl.get_color() == line_style(2)["color"]  # mapl is the third protocol, as in curves.png
    plt.close(fig)


def test_round_curves_keep_their_legend_off_the_curves(tmp_path, monkeypatch):
    """Ten protocols whose curves cross the whole axes: the legend, wherever matplotlib put it
    inside, lay over some of them; it goes beside the axes. Two curves leave room inside."""
    from abm.learning import report as learning_report

    figures = []
    monkeypatch.setattr(learning_report, "save_figure", lambda fig, path, files=None: figures.append(fig))
    crossing = {f"p{k}": {"history": [k / 10, 1 - k / 10, k / 10, 1 - k / 10]} for k in range(10)}
    learning_report.plot_round_curves(crossing, "accuracy", tmp_path / "curves.png")
    few = {"local": {"history": [0.4, 0.5, 0.5, 0.6]}, "fedavg": {"history": [0.5, 0.6, 0.6, 0.7]}}
    learning_report.plot_round_curves(few, "accuracy", tmp_path / "few.png")
    for fig, outside in zip(figures, (True, False), strict=True):
        ax = fig.axes[0]
        fig.draw_without_rendering()
        legend, box = ax.get_legend().get_window_extent(), ax.get_window_extent()
        assert (legend.x0 >= box.x1) == outside


def test_round_curves_of_one_round_mark_it_and_tick_round_1_alone(tmp_path, monkeypatch):
    """`abm learn ... --set rounds=1`: curves.png drew nothing (lines of one point) over an axis
    ticked 0.945 ... 1.05 rounds."""
    from abm.learning import report as learning_report

    figures = []
    monkeypatch.setattr(learning_report, "save_figure", lambda fig, path, files=None: figures.append(fig))
    one = {"local": {"history": [0.4]}, "fedavg": {"history": [0.5]}}
    learning_report.plot_round_curves(one, "accuracy", tmp_path / "curves.png")
    ax = figures[0].axes[0]
    assert [line.get_marker() for line in ax.lines] == ["o", "o"]
    lo, hi = ax.get_xlim()
    assert [t for t in ax.get_xticks() if lo <= t <= hi] == [1]


@pytest.mark.slow
def test_the_smaller_run_of_the_docs_gives_the_figures_they_quote(tmp_path, monkeypatch):
    """docs/private_calibration.md's smaller run for a first look, its command read from the doc
    and run as written (but --out), about 20 s: it quoted local-only 0.281, FedAvg 0.331 and
    centralized 0.508, the recovery of the populations before session 37's care-facility rings
    (0.312, 0.341 and 0.510 since), and the DP run's noise multiplier for 10 releases (2.02)."""
    import shlex

    root = Path(__file__).resolve().parents[2]
    doc = (root / "docs" / "private_calibration.md").read_text()
    block = doc[doc.index("A smaller run for a first look") :]
    command = block[block.index("abm learn") : block.index("```", block.index("abm learn"))]
    args = shlex.split(command.replace("\\\n", " "))[1:]
    args[args.index("--out") + 1] = str(tmp_path / "pc_small")
    monkeypatch.chdir(root)
    res = CliRunner().invoke(app, args)
    assert res.exit_code == 0, res.output
    report = json.loads((tmp_path / "pc_small" / "report.json").read_text())["protocols"]
    quoted = re.search(r"local-only ([\d.]+), FedAvg ([\d.]+),\s+centralized ([\d.]+)", block)
    for protocol, figure in zip(("local", "fedavg", "centralized"), quoted.groups(), strict=True):
        assert f"{report[protocol]['mean_recovery']:.3f}" == figure, protocol
    sigma = re.search(r"set for 10 releases \(([\d.]+)\)", block)[1]
    assert f"{report['fedavg_secure_dp']['privacy']['dp']['noise_multiplier']:.2f}" == sigma
