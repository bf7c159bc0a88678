"""How many of the region's residents an agent stands for, where a scenario simulates more agents
than the region has residents: the run then scales its figures for the region down (each count
times residents / agents, below 1), which ``abm run``, ``abm sweep``, ``abm validate`` and ``abm
calibrate`` note in numbers rather than leave to the summary's column header, and :func:`abm.run`
gives as a warning (:class:`MoreAgentsThanResidents`, a :class:`abm.scenario_notes.ScenarioNote`)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from abm.populations.region import load_region
from abm.scenario_notes import ScenarioNote

if TYPE_CHECKING:
    from abm.scenario import Scenario


def more_agents_than_residents(sc: Scenario) -> str | None:
    """A note's text (without ``note: ``) where ``sc`` has more agents than its region's residents
    (the reference population's are King County's): each agent stands for fewer than one
    resident, and the figures for the region scale down by that factor; None otherwise."""
    region = load_region(sc.population.region)
    residents, agents = region.figures.population, sc.population.agents
    if agents <= residents:
        return None
    share = f"{residents / agents:.2g}"
    return (
        f"population.agents: {agents:,} agents is more than the {residents:,} residents of {region.name}: each "
        f"agent stands for {share} residents, and figures for the region scale down (x {share}) from the agents' own"
    )


class MoreAgentsThanResidents(ScenarioNote):
    """The note (and :func:`abm.run`'s warning) for a scenario with more agents than its
    region's residents (:func:`more_agents_than_residents`); a :class:`ScenarioNote` like the
    others."""
