"""Disease progression samplers against the distributions they encode."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch

from abm.engine.disease import DiseaseConfig, DiseaseModel, Stage


def model() -> DiseaseModel:
    return DiseaseModel(DiseaseConfig(), horizon=180, device=torch.device("cpu"))


def test_branching_follows_the_age_table():
    m = model()
    n = 200_000
    gen = torch.Generator().manual_seed(1)
    u = torch.rand(n, generator=gen)
    age = torch.full((n,), 8)
    nxt = m.next_stage(age, torch.full((n,), int(Stage.SEVERE_SYMPTOMS)), u)
    share = (nxt == Stage.HOSPITALIZED).float().mean().item()
    assert set(nxt.unique().tolist()) == {Stage.HOSPITALIZED, Stage.RECOVERED}
    assert abs(share - 0.379) < 4 * math.sqrt(0.379 * 0.621 / n)
    first = m.next_stage(torch.zeros(n, dtype=torch.long), torch.zeros(n, dtype=torch.long), u)
    counts = torch.bincount(first, minlength=11)[1:4].double() / n
    assert torch.allclose(
        counts, torch.tensor([0.456, 0.533, 0.011], dtype=torch.float64), atol=4 * math.sqrt(0.25 / n)
    )


def test_dwell_times_have_the_configured_means():
    m = model()
    n = 200_000
    u = torch.rand(n, generator=torch.Generator().manual_seed(2))
    gamma = m.dwell(torch.full((n,), int(Stage.ASYMPTOMATIC)), torch.full((n,), int(Stage.RECOVERED)), u).double()
    # round(G), G ~ gamma(mean 15, sd 5): mean 15 (rounding is unbiased away from 0), sd 5.
    assert abs(gamma.mean().item() - 15.0) < 4 * 5 / math.sqrt(n)
    assert abs(gamma.std().item() - 5.0) < 0.05
    two = m.dwell(torch.full((n,), int(Stage.SEVERE_SYMPTOMS)), torch.full((n,), int(Stage.HOSPITALIZED)), u)
    assert set(two.unique().tolist()) == {5, 6}
    assert abs(two.double().mean().item() - 5.14) < 4 * math.sqrt(0.14 * 0.86 / n)


def test_infectiousness_profile_is_a_gamma_pmf_starting_at_zero():
    m = model()
    g = m.profile.double()
    assert g[0].item() == 0.0
    assert abs(g.sum().item() - 1.0) < 1e-6
    mean = (torch.arange(g.shape[0], dtype=torch.float64) * g).sum().item()
    # g(k) = P(k - 1 < G <= k) for G ~ gamma(mean 5.5, sd 2.14): its mean is E[ceil(G)], computed
    # here independently with scipy's gamma (shape 5.5^2 / 2.14^2, scale 2.14^2 / 5.5).
    from scipy.stats import gamma

    k = np.arange(200)
    want = np.diff(gamma.cdf(k, 5.5**2 / 2.14**2, scale=2.14**2 / 5.5), prepend=0.0)
    assert np.allclose(g.numpy()[:20], want[:20], atol=1e-6)
    assert mean == pytest.approx((k * want).sum(), abs=1e-4)


def test_branching_rows_must_be_probabilities():
    bad = DiseaseConfig().branching
    bad[0][0][1] = 0.9
    try:
        DiseaseConfig(branching=bad)
    except ValueError as exc:
        assert "sum to 1" in str(exc)
    else:
        raise AssertionError("a row summing to more than 1 was accepted")
    assert np.isclose(sum(DiseaseConfig().branching[3][5]), 1.0)


def test_a_bad_branching_row_is_named_in_the_message():
    from abm.scenario import ScenarioError, validate

    rows = DiseaseConfig().branching
    rows[2][5][6] += 0.1  # 20-29, severe_symptoms: 0.115 to hospitalized + 0.985 to recovered
    with pytest.raises(
        ScenarioError, match=r"branching\[2\]\[5\] \(age group 20-29, from severe_symptoms\) sums to 1\.1$"
    ):
        validate({"name": "x", "disease": {"branching": rows}}, "x.yaml")
    rows = DiseaseConfig().branching
    rows[4][7][8] = 1.5
    with pytest.raises(
        ScenarioError, match=r"branching\[4\]\[7\]\[8\] \(age group 40-49, critical_icu to death\) is 1\.5$"
    ):
        validate({"name": "x", "disease": {"branching": rows}}, "x.yaml")


def test_infectiousness_of_a_stage_that_never_infects_is_refused():
    """Only infected agents (not susceptible, recovered or dead) infect others: a value for those
    stages would be ignored, so it is refused, naming the stage and value; 0 is accepted."""
    from abm.scenario import ScenarioError, validate

    with pytest.raises(
        ScenarioError,
        match=r"disease\.infectiousness_by_stage: death is 0\.5: only the stages of an ongoing infection can be "
        r"infectious \(susceptible, death and recovered must be 0 or left out\)$",
    ):
        validate({"name": "x", "disease": {"infectiousness_by_stage": {"death": 0.5, "mild_symptoms": 1}}}, "x.yaml")
    ok = validate(
        {"name": "x", "disease": {"infectiousness_by_stage": {"recovered": 0, "hospitalized": 0.1}}}, "x.yaml"
    )
    assert DiseaseModel(ok.disease, horizon=5, device=torch.device("cpu")).infectiousness[Stage.HOSPITALIZED] > 0


@pytest.mark.parametrize(
    ("cells", "message"),
    [
        # A row for a final stage: no one leaves death or recovered, so it would be ignored.
        ({(3, 10, 4): 1.0}, r"branching\[3\]\[10\] \(age group 30-39, from recovered\) sums to 1$"),
        # An all-0 row for a stage of an infection: its agents went on to recovered, after the
        # dwell time of another pair.
        ({(3, 2, 4): 0.0}, r"branching\[3\]\[2\] \(age group 30-39, from presymptomatic_mild\) sums to 0$"),
        # Back to susceptible: an infection that leaves the agent susceptible, or waning immunity.
        (
            {(3, 1, 0): 0.2, (3, 1, 10): 0.8},
            r"branching\[3\]\[1\]\[0\] \(age group 30-39, asymptomatic to susceptible\) is 0\.2$",
        ),
    ],
)
def test_branching_rows_the_engine_cannot_follow_are_refused(cells, message):
    """Rows must sum to 1, except the final stages' (death, recovered), which must be all 0, and
    no stage leads to susceptible: the engine moves no one out of a final stage and sends an
    agent whose row is all 0 to recovered, so such tables were accepted and not followed."""
    from abm.scenario import ScenarioError, validate

    rows = DiseaseConfig().branching
    for (a, frm, to), value in cells.items():
        rows[a][frm][to] = value
    with pytest.raises(ScenarioError, match=message) as exc:
        validate({"name": "x", "disease": {"branching": rows}}, "x.yaml")
    # One line that names the entry, without the 9 x 11 x 11 table (about 20,000 characters).
    assert str(exc.value).startswith("x.yaml: invalid scenario: disease.branching: ") and len(str(exc.value)) < 300


# The thesis model's branching table (specs: epidemic model section 3.2), typed from the spec, not
# read from the code: rows 0-9 .. 80+; (S->ASYMP, S->PRE_MILD, S->PRE_SEV), SEV->HOSP,
# (HOSP->ICU, HOSP->DEATH, HOSP->REC), ICU->DEATH.
SPEC_BRANCHING = [
    ((0.456, 0.533, 0.011), 0.001, (0.05, 0.0, 0.95), 0.33),
    ((0.412, 0.569, 0.019), 0.006, (0.05, 0.0, 0.95), 0.25),
    ((0.370, 0.597, 0.033), 0.015, (0.045, 0.005, 0.95), 0.5),
    ((0.332, 0.614, 0.054), 0.069, (0.045, 0.005, 0.95), 0.5),
    ((0.296, 0.616, 0.088), 0.219, (0.0504, 0.0126, 0.937), 0.5),
    ((0.265, 0.602, 0.133), 0.279, (0.0976, 0.0244, 0.878), 0.69),
    ((0.238, 0.571, 0.191), 0.370, (0.1096, 0.1644, 0.726), 0.65),
    ((0.214, 0.523, 0.263), 0.391, (0.1728, 0.2592, 0.568), 0.88),
    ((0.192, 0.461, 0.347), 0.379, (0.03545, 0.67355, 0.291), 1.0),
]


# The thesis model's dwell times (specs: epidemic model section 3.3), typed from the spec, not
# read from the code: (from, to): gamma (mean, sd) of the days beyond the first, or a two-point mean.
SPEC_DWELL = {
    ("asymptomatic", "recovered"): (15, 5),
    ("presymptomatic_mild", "mild_symptoms"): (5.42, 2.7),
    ("presymptomatic_severe", "severe_symptoms"): (5.42, 2.7),
    ("mild_symptoms", "recovered"): (12, 5),
    ("severe_symptoms", "hospitalized"): 5.14,
    ("severe_symptoms", "recovered"): (12, 5),
    ("hospitalized", "critical_icu"): 2.27,
    ("hospitalized", "death"): 2.27,
    ("hospitalized", "recovered"): (8.75, 8.75),
    ("critical_icu", "death"): (11.74, 8.79),
    ("critical_icu", "hospitalized_recovering"): (18.8, 12.21),
    ("hospitalized_recovering", "recovered"): (8.75, 8.75),
}


def test_default_branching_is_the_spec_table_exactly():
    """Every entry of the default [age][from][to] table against the spec's, exactly. The
    sampling test below cannot see a small slip: at n = 40,000 its 4 sd for SEV->HOSP of age
    30-39 (p = 0.069) is 0.005, so 0.069 typed as 0.066 passed it; here it cannot."""
    from abm.engine.disease import NUM_STAGES, default_branching

    S, A, PM, PS, M, SEV, H, ICU, D, HR, R = (int(s) for s in Stage)
    table = default_branching()
    assert len(table) == len(SPEC_BRANCHING) == 9
    for age, (s_to, sev_hosp, hosp_to, icu_death) in enumerate(SPEC_BRANCHING):
        want = [[0.0] * NUM_STAGES for _ in range(NUM_STAGES)]
        want[S][A], want[S][PM], want[S][PS] = s_to
        want[A][R] = want[PM][M] = want[PS][SEV] = want[M][R] = want[HR][R] = 1.0
        want[SEV][H], want[SEV][R] = sev_hosp, 1 - sev_hosp
        want[H][ICU], want[H][D], want[H][R] = hosp_to
        want[ICU][D], want[ICU][HR] = icu_death, 1 - icu_death
        for frm in range(NUM_STAGES):
            # 1 - p is stored rounded to 6 places (0.931 for 1 - 0.069): equal to 1e-12
            assert table[age][frm] == pytest.approx(want[frm], abs=1e-12), (age, Stage(frm).name)


def test_default_dwell_times_are_the_spec_table():
    """The default dwell times, the ones every King County scenario runs with, against the spec:
    each (from, to) pair once, a gamma of the spec's mean and sd (shape mean^2/sd^2, scale
    sd^2/mean) or a two-point law of the spec's mean; and the model's draws of D have the mean of
    that law (round(G) for a gamma: P(D = k) = F(k + 0.5) - F(k - 0.5)). The mean of n = 100,000
    draws has sd sd(D) / sqrt(n): within 4 of them (a false alarm below 1e-4 per pair). Only two
    pairs were checked before: the mean and sd of critical_icu -> death swapped, or 12 days for
    mild_symptoms -> recovered typed as 12.5, passed every test."""
    from scipy.stats import gamma

    from abm.engine.disease import default_dwell_times

    dwell = default_dwell_times()
    assert sorted((d.from_stage, d.to_stage) for d in dwell) == sorted(SPEC_DWELL)
    m = model()
    n = 100_000
    u = torch.rand(n, generator=torch.Generator().manual_seed(4))
    k = np.arange(400)
    for d in dwell:
        want = SPEC_DWELL[(d.from_stage, d.to_stage)]
        if isinstance(want, float):
            assert (d.distribution, d.mean) == ("two_point", want)
            mean, sd = want, math.sqrt((want % 1) * (1 - want % 1))
        else:
            mu, sigma = want
            assert d.distribution == "gamma"
            assert (d.shape, d.scale) == pytest.approx((mu**2 / sigma**2, sigma**2 / mu), rel=1e-5)
            pmf = np.diff(gamma.cdf(k + 0.5, mu**2 / sigma**2, scale=sigma**2 / mu), prepend=0.0)
            mean, sd = (k * pmf).sum(), math.sqrt(((k - (k * pmf).sum()) ** 2 * pmf).sum())
        frm, to = Stage[d.from_stage.upper()], Stage[d.to_stage.upper()]
        got = m.dwell(torch.full((n,), int(frm)), torch.full((n,), int(to)), u).double().numpy()
        assert abs(got.mean() - mean) < 4 * sd / math.sqrt(n), (d.from_stage, d.to_stage, got.mean(), mean)


def test_every_age_groups_branching_follows_the_spec_table():
    """Draws of the next stage, for every age group and every branching row, against the spec's
    table: each share within 4 binomial sd of its probability (n draws per row), and a
    probability of 0 never drawn. A swapped column (HOSP->ICU and HOSP->DEATH) or a row read at
    the wrong age moves some share by far more than 4 sd (n = 40,000: sd at most 0.0025)."""
    m = model()
    n = 40_000
    rows = {
        Stage.SUSCEPTIBLE: lambda r: dict(
            zip([Stage.ASYMPTOMATIC, Stage.PRESYMPTOMATIC_MILD, Stage.PRESYMPTOMATIC_SEVERE], r[0], strict=True)
        ),
        Stage.SEVERE_SYMPTOMS: lambda r: {Stage.HOSPITALIZED: r[1], Stage.RECOVERED: 1 - r[1]},
        Stage.HOSPITALIZED: lambda r: dict(zip([Stage.CRITICAL_ICU, Stage.DEATH, Stage.RECOVERED], r[2], strict=True)),
        Stage.CRITICAL_ICU: lambda r: {Stage.DEATH: r[3], Stage.HOSPITALIZED_RECOVERING: 1 - r[3]},
    }
    gen = torch.Generator().manual_seed(5)
    for age, spec in enumerate(SPEC_BRANCHING):
        for frm, want in rows.items():
            u = torch.rand(n, generator=gen)
            nxt = m.next_stage(torch.full((n,), age), torch.full((n,), int(frm)), u)
            share = torch.bincount(nxt, minlength=11).double() / n
            for to, p in want(spec).items():
                got = share[to].item()
                assert abs(got - p) <= 4 * math.sqrt(p * (1 - p) / n) + 1e-12, (age, frm.name, to.name, got, p)
            assert share[[s for s in range(11) if s not in want(spec)]].sum().item() == 0, (age, frm.name)


def test_a_transition_happens_one_plus_the_dwell_days_after_entry():
    """The engine moves an agent 1 + D days after it entered its stage (D: the dwell draw). With
    two-point dwell times of whole means D is exact: seeded presymptomatic on day 2, D = 3 gives
    mild symptoms on day 2 + 1 + 3 = 6, then D = 1 gives recovery on day 6 + 1 + 1 = 8; one agent,
    so the stage counts recorded at the end of each day are exact."""
    from conftest import make_population, quiet_contacts

    from abm.engine import SeedingConfig, Simulation

    dwell = [d.model_dump(by_alias=True) for d in DiseaseConfig().dwell_times]
    for d in dwell:
        if d["from"] == "presymptomatic_mild":
            d.update(distribution="two_point", mean=3.0, shape=None, scale=None)
        if d["from"] == "mild_symptoms":
            d.update(distribution="two_point", mean=1.0, shape=None, scale=None)
    sim = Simulation(
        make_population([[0]]),
        DiseaseConfig(dwell_times=dwell),
        quiet_contacts(),
        SeedingConfig(day=2, infections={"presymptomatic_mild": 1}),
        days=10,
    )
    stage = sim.run().stages[:, 0, :].argmax(1).tolist()
    pre, mild, rec = int(Stage.PRESYMPTOMATIC_MILD), int(Stage.MILD_SYMPTOMS), int(Stage.RECOVERED)
    assert stage == [0, 0, pre, pre, pre, pre, mild, mild, rec, rec]


def test_reference_dwell_times_read_the_second_gamma_parameter_as_a_rate():
    """The reference profile's dwell times are the spec's table (section 3.3) with the reference
    code's Gamma(mean^2/sd^2, sd^2/mean) read as (shape, rate): scale mean/sd^2, gamma mean
    mean^3/sd^4. D is the rounded draw, whose mean falls below the gamma's where that is under 1:
    8.75 +- 8.75 gives 0.114 days before rounding and 0.013 after (D = 0 on 98.7% of draws)."""
    from pathlib import Path

    import yaml
    from scipy.stats import gamma

    root = Path(__file__).resolve().parents[1]
    dwell = yaml.safe_load((root / "scenarios/reference/base.yaml").read_text())["disease"]["dwell_times"]
    spec = SPEC_DWELL
    assert sorted((d["from"], d["to"]) for d in dwell) == sorted(spec)
    m = DiseaseModel(DiseaseConfig(dwell_times=dwell), horizon=180, device=torch.device("cpu"))
    n = 100_000
    u = torch.rand(n, generator=torch.Generator().manual_seed(3))
    k = np.arange(400)
    for d in dwell:
        want = spec[(d["from"], d["to"])]
        frm, to = Stage[d["from"].upper()], Stage[d["to"].upper()]
        got = m.dwell(torch.full((n,), int(frm)), torch.full((n,), int(to)), u).double().numpy()
        if isinstance(want, float):
            assert d["distribution"] == "two_point" and d["mean"] == want
            mean, sd = want, math.sqrt((want % 1) * (1 - want % 1))
        else:
            mu, sigma = want
            assert d["distribution"] == "gamma"
            assert d["shape"] == pytest.approx(mu**2 / sigma**2, rel=1e-5)
            assert d["scale"] == pytest.approx(mu / sigma**2, rel=1e-5)  # the rate sigma^2/mu, inverted
            pmf = np.diff(gamma.cdf(k + 0.5, d["shape"], scale=d["scale"]), prepend=0.0)
            mean, sd = (k * pmf).sum(), math.sqrt(((k - (k * pmf).sum()) ** 2 * pmf).sum())
        assert abs(got.mean() - mean) < 4 * sd / math.sqrt(n) + 1e-12, (d["from"], d["to"], got.mean(), mean)
    hosp = m.dwell(torch.full((n,), int(Stage.HOSPITALIZED)), torch.full((n,), int(Stage.RECOVERED)), u).double()
    assert abs(hosp.mean().item() - 0.0126) < 0.002 and abs((hosp == 0).double().mean().item() - 0.9874) < 0.002


def test_each_agent_progresses_by_its_own_age_groups_branching_rows():
    """The engine reads an agent's branching row at its own age group, both for the first stage of
    an infection drawn by age and for every stage after it. A table that sends even age groups one
    way and odd ones the other makes this exact: one agent in each group 0-9 .. 80+ (ages 5 .. 85),
    infected with its first stage drawn (asymptomatic or presymptomatic mild), or put in severe
    symptoms (next: hospitalized or recovered). The sampling tests above call the model directly,
    so an engine that read the row of a neighbouring group passed them."""
    from conftest import make_population, sim_of

    S, A, PM, SEV, H, R = (int(s) for s in (Stage.SUSCEPTIBLE, Stage.ASYMPTOMATIC, Stage.PRESYMPTOMATIC_MILD,
                                               Stage.SEVERE_SYMPTOMS, Stage.HOSPITALIZED, Stage.RECOVERED))  # fmt: skip
    table = DiseaseConfig().branching
    for g, rows in enumerate(table):
        rows[S][A : Stage.PRESYMPTOMATIC_SEVERE + 1] = [1.0, 0.0, 0.0] if g % 2 == 0 else [0.0, 1.0, 0.0]
        rows[SEV][H], rows[SEV][R] = (1.0, 0.0) if g % 2 == 0 else (0.0, 1.0)
    pop = make_population([[i] for i in range(9)], ages=[10 * g + 5 for g in range(9)])
    even = [g % 2 == 0 for g in range(9)]
    everyone = torch.arange(9)
    sim = sim_of(pop, [], days=5, disease=DiseaseConfig(branching=table))
    sim.infect(everyone, None, 0)
    assert sim.state.stage.tolist() == [A if e else PM for e in even]
    sim = sim_of(pop, [], days=5, disease=DiseaseConfig(branching=table))
    sim.infect(everyone, torch.full((9,), SEV), 0)
    assert sim.state.next_stage.tolist() == [H if e else R for e in even]


def test_a_row_summing_just_below_1_never_draws_a_stage_of_probability_0():
    """Validation takes a branching row that sums to 1 within 1e-6. The cdf of such a row ended
    below 1 at its last stage of positive probability, and a draw above that went to the row's
    last column: here, S -> (asymptomatic 0.4, presymptomatic mild 0.5999995) sent the top 5e-7
    of the uniforms to recovered, an infection that was never infectious. The largest uniforms
    (the largest float32 below 1 among them) now give the last stage of positive probability."""
    table = DiseaseConfig().branching
    for rows in table:
        rows[Stage.SUSCEPTIBLE][Stage.ASYMPTOMATIC : Stage.PRESYMPTOMATIC_SEVERE + 1] = [0.4, 0.5999995, 0.0]
    m = DiseaseModel(DiseaseConfig(branching=table), horizon=10, device=torch.device("cpu"))
    u = torch.tensor([0.0, 0.3999, 0.4001, 0.9999995, float(np.nextafter(np.float32(1), np.float32(0)))])
    for age in range(9):
        nxt = m.next_stage(torch.full((5,), age), torch.zeros(5, dtype=torch.long), u)
        assert nxt.tolist() == [Stage.ASYMPTOMATIC] * 2 + [Stage.PRESYMPTOMATIC_MILD] * 3, age


def test_two_dwell_times_for_one_pair_are_refused():
    """The engine keeps one dwell time per (from, to) pair: of two entries it used the last and
    ignored the first without a word (a list written as two halves, an edit that added an entry
    instead of changing one). Two entries for a pair are refused, naming it."""
    from abm.scenario import ScenarioError, validate

    dwell = [d.model_dump(by_alias=True) for d in DiseaseConfig().dwell_times]
    dwell.append({"from": "mild_symptoms", "to": "recovered", "distribution": "two_point", "mean": 3.0})
    with pytest.raises(ScenarioError, match=r"dwell_times has two entries from mild_symptoms to recovered; give one$"):
        validate({"name": "x", "disease": {"dwell_times": dwell}}, "x.yaml")
    assert len(validate({"name": "x", "disease": {"dwell_times": dwell[:-1]}}, "x.yaml").disease.dwell_times) == 12
