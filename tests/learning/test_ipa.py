"""IPA: alignment term properties and the ring protocol."""

import torch

from abm.learning.protocols.ipa import alignment
from abm.learning.runner import run_all
from abm.learning.scenario import load_scenario


def test_alignment_gradients_cancel_across_peers():
    """The alignment gradient is antisymmetric, so the mean of theta* moves only through CE."""
    torch.manual_seed(0)
    thetas = [[torch.randn(3, 4, requires_grad=True), torch.randn(4, requires_grad=True)] for _ in range(3)]
    for p in (1, 2):
        total = sum(alignment(thetas[i], thetas[j], p, "sum") for i in range(3) for j in range(3) if i != j)
        grads = torch.autograd.grad(total, [t for th in thetas for t in th])
        w = sum(grads[0::2])
        b = sum(grads[1::2])
        assert torch.allclose(w, torch.zeros_like(w), atol=1e-5)
        assert torch.allclose(b, torch.zeros_like(b), atol=1e-5)


def _scenario(**params):
    return {
        "name": "ipa",
        "seed": 0,
        "data": {
            "source": "gaussian_mixture",
            "n_samples": 600,
            "n_classes": 4,
            "n_features": 6,
            "modes_per_class": 1,
        },
        "split": {"participants": 3},
        "models": [{"kind": "mlp", "hidden": [8], "batchnorm": False}],
        "rounds": 3,
        "evaluate_on": "global",
        "protocols": [{"name": "ipa", "params": params}],
    }


def test_strong_coupling_aligns_models_and_early_stop_freezes():
    weak = run_all(load_scenario(_scenario(lam=0.0, p=2))[0])["protocols"]["ipa"]["summary"]
    strong = run_all(load_scenario(_scenario(lam=1.0, p=2, lr=0.05))[0])["protocols"]["ipa"]
    d_weak = weak["mean_abs_param_distance"][-1]
    d_strong = strong["summary"]["mean_abs_param_distance"][-1]
    assert d_strong < 0.1 * d_weak  # squared coupling with 2 eta lam (N-1) = 0.2 < 1
    stopped = run_all(load_scenario(_scenario(stop_round=1))[0])["protocols"]["ipa"]
    assert stopped["summary"]["stopped_at"] == 1
    assert len(set(stopped["history"])) == 1  # frozen after round 1
    # the token carries all N models: N x |theta| x 4 bytes per hop, N hops per round
    n_params = 6 * 8 + 8 + 8 * 4 + 4
    assert stopped["bytes_total"] == 3 * 3 * n_params * 4


def test_ipa_peers_with_disjoint_classes_approach_centralized():
    """ipa.md E1: each peer alone knows 5 of 10 classes (about 50 % on the global test set); with
    IPA both reach centralized accuracy within 5 points (seeds 0-2: IPA 97.9/94.5/97.8 vs
    centralized 98.8/97.0/98.6; the benchmark gmm_ipa_disjoint)."""
    from pathlib import Path

    import yaml

    path = Path(__file__).resolve().parents[2] / "scenarios" / "learning" / "gmm_ipa_disjoint.yaml"
    sc = yaml.safe_load(path.read_text())
    sc["protocols"] = [{"name": "centralized"}, {"name": "ipa", "params": {"lam": 1.0, "p": 1}}]
    r = run_all(load_scenario(sc)[0])["protocols"]
    assert r["local"]["mean_score"] < 0.55
    central = r["centralized"]["mean_score"]
    assert all(p["collaborative"] > central - 0.05 for p in r["ipa"]["participants"])
