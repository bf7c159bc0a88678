"""DP-FedAvg on the private-calibration institutions: the clip heuristic and recovery against epsilon.

    python benchmarks/private_calibration_dp.py [--scenario scenarios/learning/private_calibration.yaml]
        [--label fedavg_secure_dp] [--seeds 0 1 2] [--epsilons 1 8 100 1000 3000 10000] [--rounds 40 10]

Per seed it builds the institutions once (their simulations), then runs local-only, the scenario's
non-private ``fedavg`` entry, and the DP entry (``--label``; secure aggregation as the entry says)
with its target epsilon replaced by each ``--epsilons`` value and its rounds by each ``--rounds``
value; the accountant sets the noise multiplier for each (epsilon, rounds). It also records, for
the clip heuristic, the median L2 norm of the size-weighted trainable updates that the DP entry's
model sends in non-private FedAvg. Prints per (rounds, epsilon) the mean recovery over seeds, the
paired difference to local-only (mean +- sd over seeds) and the seeds above local-only, and the
smallest epsilon of the grid at which DP-FedAvg beats local-only on average.
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path

import numpy as np
import torch
import yaml

from abm.learning.messages import MessageKind, Network
from abm.learning.privacy.accountant import noise_multiplier_for
from abm.learning.privacy.aggregation import PlainSum
from abm.private_calibration.federation import run_protocol
from abm.private_calibration.institutions import build_institutions
from abm.private_calibration.scenario import CalibrationProtocolSpec, load_scenario

ROOT = Path(__file__).resolve().parents[1]


class NormRecorder(PlainSum):
    """A plain sum that records each contribution's L2 norm. ``adds_noise`` is set so that FedAvg
    sends what it sends under DP (trainable parameters only), but nothing is clipped or noised."""

    adds_noise = True

    def __init__(self) -> None:
        self.norms: list[float] = []

    def aggregate(
        self,
        contributions: dict[int, torch.Tensor],
        round_: int,
        network: Network,
        kind: MessageKind = MessageKind.MODEL_UPDATE,
        dropped: frozenset[int] = frozenset(),
        quorum: int = 1,
    ) -> torch.Tensor | None:
        self.norms += [float(v.norm()) for v in contributions.values()]
        return super().aggregate(contributions, round_, network, kind, dropped, quorum)


def mean_recovery(run) -> float:
    """Mean over institutions of the held-out parameter recovery."""
    return float(np.mean([p.score() for p in run.participants]))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--scenario", type=Path, default=ROOT / "scenarios/learning/private_calibration.yaml")
    ap.add_argument("--label", default="fedavg_secure_dp")
    ap.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    ap.add_argument("--epsilons", type=float, nargs="+", default=[1, 8, 100, 1000, 3000, 10000])
    ap.add_argument("--rounds", type=int, nargs="+", default=None, help="default: the DP entry's rounds")
    args = ap.parse_args()
    torch.set_num_threads(1)
    data = yaml.safe_load(args.scenario.read_text(encoding="utf-8"))
    data["model"]["scenario"] = str((args.scenario.parent / data["model"]["scenario"]).resolve())
    base, _ = load_scenario(data)
    specs = {s.key: s for s in base.protocols}
    dp_spec, fedavg = specs[args.label], specs["fedavg"]
    assert dp_spec.privacy is not None and dp_spec.privacy.dp is not None, f"{args.label} has no DP"
    dp = dp_spec.privacy.dp
    rounds_list = args.rounds or [dp_spec.rounds or base.rounds]
    local_rec, fedavg_rec, norms = [], [], []
    dp_rec: dict[tuple[int, float], list[float]] = {(t, e): [] for t in rounds_list for e in args.epsilons}
    start = time.perf_counter()
    for seed in args.seeds:
        scenario, folder = load_scenario(dict(data, seed=seed))
        institutions, _ = build_institutions(scenario, folder)
        local_rec.append(mean_recovery(run_protocol(scenario, institutions, CalibrationProtocolSpec(name="local"))))
        fedavg_rec.append(mean_recovery(run_protocol(scenario, institutions, fedavg)))
        recorder = NormRecorder()
        plain = dp_spec.model_copy(update={"privacy": None})
        run_protocol(scenario, institutions, plain, aggregator=recorder)
        norms.append(float(np.median(recorder.norms)))
        for t in rounds_list:
            for e in args.epsilons:
                privacy = dp_spec.privacy.model_copy(update={"dp": dp.model_copy(update={"epsilon": e})})
                spec = dp_spec.model_copy(update={"privacy": privacy, "rounds": t})
                dp_rec[(t, e)].append(mean_recovery(run_protocol(scenario, institutions, spec)))
        print(
            f"seed {seed}: local {local_rec[-1]:.3f}, fedavg {fedavg_rec[-1]:.3f}, median update norm "
            f"{norms[-1]:.3f}, {time.perf_counter() - start:.0f} s",
            flush=True,
        )
    loc = np.array(local_rec)
    n = len(args.seeds)
    lines = [
        f"Seeds {args.seeds}; clip {dp.clip:g}, delta {dp.delta:g}, secure aggregation "
        f"{dp_spec.privacy.secure_aggregation}, accountant {dp.accountant}. Median L2 norm of the non-private "
        f"size-weighted trainable updates per seed: {', '.join(f'{x:.3f}' for x in norms)}.",
        "",
        f"local-only {loc.mean():.3f} +- {loc.std(ddof=1) if n > 1 else 0:.3f}; fedavg (no privacy) "
        f"{np.mean(fedavg_rec):.3f} +- {np.std(fedavg_rec, ddof=1) if n > 1 else 0:.3f}",
        "",
        "| rounds | epsilon | noise multiplier | mean recovery | difference to local-only | seeds above local |",
        "|---:|---:|---:|---:|---:|---:|",
    ]
    breaks = []
    for t in rounds_list:
        even = None
        for e in args.epsilons:
            r = np.array(dp_rec[(t, e)])
            d = r - loc
            sigma = noise_multiplier_for(e, t, dp.delta, dp.accountant)
            lines.append(
                f"| {t} | {e:g} | {sigma:.3g} | {r.mean():.3f} | {d.mean():+.3f} +- "
                f"{d.std(ddof=1) if n > 1 else 0:.3f} | {int((d > 0).sum())}/{n} |"
            )
            if even is None and d.mean() > 0:
                even = e
        breaks.append(f"- {t} rounds: smallest epsilon of the grid with mean recovery above local-only: {even}")
    print("\n".join([*lines, "", *breaks]))


if __name__ == "__main__":
    main()
