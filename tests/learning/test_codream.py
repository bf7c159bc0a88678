"""CoDream: losses, model-agnostic input gradients, and a gain over local-only."""

import torch

from abm.learning.models import build_model
from abm.learning.protocols.codream import CoDreamConfig, input_gradient, jsd
from abm.learning.runner import run_all
from abm.learning.scenario import load_scenario


def test_jsd_bounds():
    a = torch.tensor([[10.0, -10.0]])
    b = torch.tensor([[-10.0, 10.0]])
    assert float(jsd(a, a)) < 1e-6
    assert abs(float(jsd(a, b)) - torch.log(torch.tensor(2.0)).item()) < 1e-4


def test_input_gradients_have_the_data_shape_for_any_architecture():
    torch.manual_seed(0)
    x = torch.randn(5, 64)
    cfg = CoDreamConfig()
    for kind in ("mlp", "cnn"):
        model = build_model(kind, (1, 8, 8), 10, hidden=[16], channels=[4, 8])
        before = [p.detach().clone() for p in model.parameters()]
        g = input_gradient(model, x, cfg, student=None)
        assert g.shape == x.shape and torch.isfinite(g).all() and g.abs().sum() > 0
        # the model is frozen: its weights and BatchNorm statistics do not change
        assert all(torch.equal(a, b) for a, b in zip(before, model.parameters(), strict=True))


def test_codream_beats_local_only_on_label_skew():
    sc = {
        "name": "cd",
        "seed": 0,
        "data": {
            "source": "gaussian_mixture",
            "n_samples": 1000,
            "n_classes": 4,
            "n_features": 6,
            "modes_per_class": 1,
            "separation": 3.0,
        },
        "split": {"participants": 3, "label_skew": {"alpha": 0.3}},
        "models": [{"kind": "mlp", "hidden": [16]}, {"kind": "mlp", "hidden": [32, 16]}],
        "rounds": 6,
        "evaluate_on": "global",
        "protocols": [
            {"name": "codream", "params": {"dream_steps": 30, "n_dreams": 64}},
            {"name": "codream_fast", "params": {"n_dreams": 64}},
        ],
    }
    r = run_all(load_scenario(sc)[0])["protocols"]
    # seed 0: local 0.516, CoDream 0.784, CoDream-fast 0.811 (global test set, 4 classes)
    assert r["codream"]["mean_score"] > r["local"]["mean_score"] + 0.1
    assert r["codream_fast"]["mean_score"] > r["local"]["mean_score"] + 0.1
    # nothing but dreams' gradients, logits and (for fast) generator weights leave a client
    for p in r["codream"]["participants"]:
        assert set(p["kinds_sent"]) <= {"model_update", "input_gradients", "logits"}
