"""The occupation settings a scenario's interventions name (closures, a vaccination priority
list) checked against those its population has: a setting of ``contacts.occupation.degree`` that
the population lacks (a King County sector in a scenario run on a region without it) closed
nothing and vaccinated no one, without a word. Likewise the age ranges of a priority list
(``65+``) against the age bands its population's ages were drawn in: a range that cuts a band
would be rounded to bands."""

from __future__ import annotations

from typing import TYPE_CHECKING

from abm.interventions.config.age_ranges import OLDEST, Band, band_text, bands_problem, group_range
from abm.interventions.config.vaccination import RESIDENTS
from abm.populations.population import LONG_TERM_CARE, SCHOOL
from abm.set_options import ScenarioError

if TYPE_CHECKING:
    from abm.populations import Region
    from abm.scenario import Scenario


def population_settings(scenario: Scenario, region: Region) -> tuple[list[str], bool, str]:
    """The occupation settings the scenario's population has (its sectors, and schools and care
    facilities where the region has them), whether it has long-term-care residents, and what
    names its settings in a message."""
    from abm.populations.reference import CATEGORIES

    if scenario.population.kind == "reference":
        return list(CATEGORIES), False, "the reference population (population.kind: reference)"
    figures = region.figures
    schools = bool(figures.school_types) and any(share > 0 for _, _, share in figures.school_enrollment)
    care = any(share > 0 for _, _, share in figures.long_term_care.residence_rate)
    settings = [*([SCHOOL] if schools else []), *([LONG_TERM_CARE] if care else []), *figures.sectors]
    return settings, care, f"{figures.name} ({region.path / 'region.yaml'})"


def check_named_settings(scenario: Scenario, region: Region, source: str) -> None:
    """Refuse a closure or a vaccination priority entry naming a setting (or the long-term-care
    residents) that the scenario's population does not have, naming the key, the entries and
    the settings allowed."""
    settings, care, whose = population_settings(scenario, region)
    multipliers = getattr(scenario.interventions, "contact_multipliers", None)
    vaccination = getattr(scenario.interventions, "vaccination", None)
    named = [
        (f"interventions.contact_multipliers.closures[{i}].settings", list(closure.settings), "close nothing")
        for i, closure in enumerate(multipliers.closures if multipliers is not None else [])
    ]
    if vaccination is not None and isinstance(vaccination.priority, list):
        named.append(("interventions.vaccination.priority", vaccination.priority_names(), "vaccinate no one"))
    for key, names, effect in named:
        here = [*settings, RESIDENTS] if key.endswith("priority") and care else settings
        missing = [x for x in names if x not in here]
        if missing:
            raise ScenarioError(
                f"{source}: {key}: {missing} not allowed; {whose} has no such "
                f"{'setting' if len(missing) == 1 else 'settings'}, so {'it' if len(missing) == 1 else 'they'} "
                f"would {effect}; allowed: {', '.join(here)}"
            )


def population_age_bands(scenario: Scenario, region: Region) -> tuple[Band, ...]:
    """The age bands the scenario's population draws its ages in (as its ``Population.age_bands``
    will be): the reference's ten-year groups, or the region's ``age_bands``."""
    from abm.populations.reference import AGE_BANDS

    if scenario.population.kind == "reference":
        return AGE_BANDS
    return tuple((lo, hi) for lo, hi in region.figures.age_bands.values())


def check_priority_ages(scenario: Scenario, region: Region, source: str) -> None:
    """Refuse an age range of a vaccination priority list (``65+``) that the population's ages
    cannot tell exactly (:func:`abm.interventions.config.age_ranges.bands_problem`), naming the
    key, the entry, the band it cuts and the ages allowed."""
    vaccination = getattr(scenario.interventions, "vaccination", None)
    if vaccination is None:
        return
    bands = population_age_bands(scenario, region)
    whose = population_settings(scenario, region)[2]
    for ages in vaccination.priority_ranges():
        problem = bands_problem(ages, bands, whose)
        if problem is not None:
            raise ScenarioError(f"{source}: interventions.vaccination.priority: {problem}")


def priority_group_notes(scenario: Scenario, region: Region) -> list[str]:
    """Notes (without ``note: ``) on the plain age groups of a vaccination priority list (``6``:
    ages 60-69) whose ages cut the population's age bands. Unlike a written range (``'65+'``,
    refused where it cuts a band: :func:`check_priority_ages`), a group is kept: the age groups
    are the model's own classes (susceptibility and severity are by group, and ``oldest_first``
    orders the groups), taken from the agents' drawn ages, uniform within each band. So the class
    holds the agents whose drawn age falls in the group, a share of each band it cuts that the
    region's figures do not give; the note names the entry and those bands. None for whole
    bands (King County's five-year bands, the reference population's ten-year groups)."""
    vaccination = getattr(scenario.interventions, "vaccination", None)
    if vaccination is None or not vaccination.enabled or not isinstance(vaccination.priority, list):
        return []
    bands = population_age_bands(scenario, region)
    whose = population_settings(scenario, region)[2]
    notes = []
    for entry in vaccination.priority:
        if not isinstance(entry, int):
            continue
        ages = group_range(entry)
        last = OLDEST if ages.last is None else ages.last
        spans = [(band, band[0], OLDEST if band[1] is None else band[1]) for band in bands]
        # the bands that share an age with the group without lying within it
        cut = [band for band, lo, hi in spans if lo <= last and hi >= ages.first and not ages.first <= lo <= hi <= last]
        if cut:
            notes.append(
                f"interventions.vaccination.priority: {entry} (ages {ages}) cuts the age "
                f"{'band' if len(cut) == 1 else 'bands'} {', '.join(band_text(b) for b in cut)} of {whose}, "
                f"which counts residents by band only: the class holds the agents whose age, drawn uniformly within "
                f"the band, falls in {ages}; for a class of whole bands, give an age range that starts and ends where "
                "the bands do"
            )
    return notes
