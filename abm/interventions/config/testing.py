"""Testing's settings and checks: the test types and who takes them (run by
:mod:`abm.interventions.testing`)."""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

from abm.engine.config import MAX_DAYS
from abm.interventions.registry import ENABLED_HELP, MAX_DAILY_COUNT, InterventionBase, register


class TestType(BaseModel):
    """One kind of test."""

    __test__ = False  # not a pytest test class
    model_config = ConfigDict(extra="forbid")
    name: str = Field(
        pattern=r"^[a-z0-9_]+$",
        description="names the cost item: test_<name> (each test type its own name)",
        json_schema_extra={"allowed": "lower-case letters, digits and _ (e.g. rt_pcr)"},
    )
    sensitivity: float = Field(ge=0, le=1, description="P(positive | infected)")
    specificity: float = Field(
        1.0,
        ge=0,
        le=1,
        description="P(negative | not infected); symptomatic agents are all infected, so it acts only on traced "
        "contacts' tests (given_to traced, and a tracing with test_contacts)",
    )
    result_delay_days: list[int] = Field(description="possible days until the result", min_length=1)
    result_delay_probs: list[float] = Field(description="probability of each delay", min_length=1)
    cost: float = Field(5.0, ge=0, description="US$ per test")
    daily_capacity: int | None = Field(
        None,
        ge=0,
        le=MAX_DAILY_COUNT,
        description="tests per day per replicate, for the simulated agents (not the region's residents); when more "
        "are due this test, those tested are drawn at random among them (symptomatic and traced alike), the others "
        "take the next test type given to them, if any, and are not tested that day otherwise (a symptomatic agent "
        "is a candidate again the next day; a traced contact's request lapses); none: unlimited",
    )
    given_to: list[Literal["symptomatic", "traced"]] = Field(
        ["symptomatic"],
        min_length=1,
        description="who takes this test: symptomatic agents, traced contacts (those a tracing with test_contacts "
        "asks to test); no one else is tested: there is no screening of agents without symptoms who were not "
        "traced, and daily_capacity caps these tests rather than testing that many",
    )

    @model_validator(mode="after")
    def _delays(self) -> TestType:
        if len(self.result_delay_days) != len(self.result_delay_probs):
            raise ValueError(
                f"result_delay_days {self.result_delay_days} and result_delay_probs {self.result_delay_probs} "
                "must have the same length"
            )
        if any(not 0 <= d <= MAX_DAYS for d in self.result_delay_days):
            raise ValueError(f"result delays must be 0 to {MAX_DAYS} days, not {self.result_delay_days}")
        if any(p < 0 for p in self.result_delay_probs) or abs(sum(self.result_delay_probs) - 1) > 1e-6:
            raise ValueError(
                f"result_delay_probs {self.result_delay_probs} must be probabilities summing to 1 "
                f"(they sum to {sum(self.result_delay_probs):g})"
            )
        return self


def rt_pcr() -> TestType:
    """RT-PCR: sensitivity 0.99, result after 1-3 days (0.3, 0.4, 0.3), $5 (thesis)."""
    return TestType(name="rt_pcr", sensitivity=0.99, result_delay_days=[1, 2, 3], result_delay_probs=[0.3, 0.4, 0.3])


class TestingConfig(BaseModel):
    """Who is tested with which tests, from when."""

    __test__ = False  # not a pytest test class
    model_config = ConfigDict(extra="forbid")
    enabled: bool = Field(True, description=ENABLED_HELP)
    start_day: int = Field(0, ge=0, description="first day of testing")
    tests: list[TestType] = Field(
        default_factory=lambda: [rt_pcr()],
        min_length=1,
        description="test types, tried in order; default: one, rt_pcr (sensitivity 0.99, specificity 1, result "
        "after 1, 2 or 3 days with probabilities 0.3, 0.4, 0.3, cost 5, no daily capacity, given to symptomatic)",
    )
    validity_days: int | None = Field(
        None,
        ge=0,
        le=MAX_DAYS,
        description="days after the day a result arrives during which it stays valid (no retest; 0: retest from "
        "the next day); none: retest on the day the result arrives",
    )
    test_quarantined: bool = Field(False, description="whether quarantined agents are tested")
    retest_positives: bool = Field(
        False,
        description="false (intended): an agent who has had a positive result is not tested again (unless infected "
        "after a false positive); true: a "
        "symptomatic positive is tested again as soon as its result is in, even on the day it arrives, before that "
        "day's quarantine (reproduces the reference code's repeat tests, docs/reference.md §7.1)",
    )
    never_tested_day: int = Field(
        -1,
        ge=-1,
        le=0,
        description="the day recorded as last test of an agent never tested (field last_test_day, read by tracing "
        "that skips contacts tested since): -1 (intended); 0 reproduces the reference code, where contacts of day "
        "0 are then never traced (docs/reference.md §11 Q10)",
    )

    @model_validator(mode="after")
    def _distinct_names(self) -> TestingConfig:
        """Each test type its own name: it names the cost item (test_<name>), so two types of one
        name would be booked as one item at two prices."""
        names = [t.name for t in self.tests]
        for i, name in enumerate(names):
            if name in names[:i]:
                raise ValueError(
                    f"tests[{names.index(name)}] and tests[{i}] are both named {name!r}; each test type needs a "
                    "name of its own (it names the cost item test_<name>)"
                )
        return self


@register("testing")
class TestingSpec(InterventionBase):
    """Testing as a scenario gives it: its settings, its place in a phase and the notes on them
    (run by :class:`abm.interventions.testing.Testing`)."""

    config_model = TestingConfig
    order = 0
    runner_path = "abm.interventions.testing:Testing"

    @classmethod
    def unused_settings(cls, cfg: TestingConfig, on: dict, days: int) -> list[str]:
        """A note for each test type of ``daily_capacity`` 0 (it is given to no one); when every
        test type has 0, one note: no one is tested, so what acts on the results does nothing."""
        closed = [i for i, test in enumerate(cfg.tests) if test.daily_capacity == 0]
        if closed and len(closed) == len(cfg.tests):
            after = [name for name in ("quarantine", "digital_tracing", "manual_tracing") if name in on]
            listed = ", ".join(f"interventions.{n}" for n in after)
            also = f", and neither do {listed}, which act on its results" if after else ""
            return [
                f"interventions.{cls.name}: every test's daily_capacity is 0: no one is tested, so it does nothing in "
                f"this run{also}"
            ]
        return [
            f"interventions.{cls.name}.tests[{i}].daily_capacity is 0: the {cfg.tests[i].name} test is given to no one"
            for i in closed
        ]
