"""Settings that depend on the population, on any device: an app adoption the age weights can or
cannot reach, and an occupation setting of mean degree 0 against 1e-4 (the same contacts: none,
so the same epidemic). Session 22 ran it on an H200 and on the CPU (BENCHMARKS.md, "The engine on
a GPU: session 22's changes").

    python benchmarks/population_settings.py [--device cpu|cuda]
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

import torch

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

import abm  # noqa: E402
from abm.scenario import ScenarioError  # noqa: E402

KC = ROOT / "scenarios/king_county"
ZERO_YOUNG = "interventions.digital_tracing.age_weights=[0,0,1,1,1,1,1,1,1]"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    device = ap.parse_args().device
    out: dict = {"device": torch.cuda.get_device_name(0) if device.startswith("cuda") else "cpu"}
    t0 = time.perf_counter()
    adoption = "interventions.digital_tracing.app_adoption"
    r = abm.run(
        KC / "vacc_ct.yaml", agents=20000, days=40, replicates=2, device=device, sets=[ZERO_YOUNG, f"{adoption}=0.5"]
    )
    out["reachable_adoption"] = {
        "cumulative_infected": r.summary["cumulative_infected"]["mean"],
        "app_notifications": int(r.timeseries["app_notifications"].sum()),
        "cost_count_dtype": str(r.costs["count"].dtype),
        "seconds": round(time.perf_counter() - t0, 2),
    }
    try:
        abm.run(
            KC / "vacc_ct.yaml",
            agents=20000,
            days=5,
            replicates=1,
            device=device,
            sets=[ZERO_YOUNG, f"{adoption}=0.95"],
        )
        out["unreachable_adoption"] = "ran (it should have been refused)"
    except ScenarioError as exc:
        out["unreachable_adoption"] = str(exc).split(": ", 1)[1]
    finals = {}
    for degree, written in (("0", "0"), ("1e-4", "1.0e-4")):  # YAML 1.1 reads 1e-4 as text: the scenario refuses it
        sets = [f"contacts.occupation.degree.HEALTHCARE={written}", "disease.transmission_rate=4.567"]
        r = abm.run(KC / "no_intervention.yaml", agents=20000, days=120, replicates=2, device=device, sets=sets)
        finals[degree] = r.summary["cumulative_infected"]["mean"]
    out["healthcare_degree_final_size"] = finals
    out["degree_0_same_as_1e-4"] = finals["0"] == finals["1e-4"]
    print(json.dumps(out, indent=1))


if __name__ == "__main__":
    main()
