"""An example intervention plug-in for abm: a mask directive (docs/plugins.md).

From ``start_day`` on, a share ``adoption`` of contacts at work, school, care facilities and in
the community are masked, and a mask cuts transmission in a masked contact by ``efficacy``: the
occupation and community layers' contact weights are multiplied by ``1 - adoption * efficacy``
each day. Household contacts are unchanged. Each day, ``adoption`` of the living agents (rounded
down) wear a mask: the daily count ``masks_worn`` (a timeseries column), booked as the cost item
``mask_day`` at ``cost_per_mask_day`` when that is above 0.

It is registered through the ``abm.interventions`` entry point in this folder's pyproject.toml;
abm does not import it.
"""

from __future__ import annotations

import torch
from pydantic import BaseModel, ConfigDict, Field

from abm.engine import Phase, Simulation, Stage
from abm.engine.contacts import flat_nonzero
from abm.interventions.registry import ENABLED_HELP, InterventionBase

MASKED_LAYERS = ("occupation", "community")


class MaskDirectiveConfig(BaseModel):
    """A mask directive (an example plug-in): masks weaken contacts outside the home from a day."""

    model_config = ConfigDict(extra="forbid")
    enabled: bool = Field(True, description=ENABLED_HELP)
    start_day: int = Field(0, ge=0, description="first simulation day of the directive")
    adoption: float = Field(
        0.5, ge=0, le=1, description="share of contacts outside the home that are masked, and of agents wearing one"
    )
    efficacy: float = Field(
        0.5,
        ge=0,
        lt=1,
        description="share of transmission a mask prevents in a masked contact (below 1: a layer's contacts never "
        "vanish, so contact tracing, which skips only layers set to 0, stays right)",
    )
    cost_per_mask_day: float = Field(0.0, ge=0, description="US$ per agent-day of masks (0: not booked)")


class MaskDirective(InterventionBase):
    """Multiplies the occupation and community layers' weights and counts the masks worn."""

    config_model = MaskDirectiveConfig
    order = 50  # after contact_multipliers (40), which sets the day's layer multipliers in the same phase

    @classmethod
    def unused_settings(cls, cfg: MaskDirectiveConfig, on: dict, days: int) -> list[str]:
        """A note when no contact is masked (``abm validate`` and ``abm run`` print it)."""
        if cfg.adoption == 0:
            return [f"interventions.{cls.name}.adoption is 0: no one wears a mask, so it does nothing in this run"]
        return []

    def attach(self, sim: Simulation) -> None:
        """Declare the daily count ``masks_worn`` (zero before ``start_day``)."""
        sim.declare_activity("masks_worn")

    def hooks(self) -> dict:
        return {Phase.TRANSMISSION: self.apply}

    def apply(self, sim: Simulation, day: int) -> None:
        """From ``start_day``: scale today's masked layers, count and book the masks worn."""
        c = self.cfg
        if day < c.start_day:
            return
        factor = 1 - c.adoption * c.efficacy
        for layer in MASKED_LAYERS:
            sim.layer_scale[layer] *= factor
        dead = sim.per_replicate(flat_nonzero(sim.state.stage == Stage.DEATH))
        living = sim.n - dead
        masks = torch.floor(living.to(torch.float64) * c.adoption).to(torch.int64)
        sim.count_activity("masks_worn", day, masks)
        if c.cost_per_mask_day > 0:
            sim.book_cost("mask_day", day, masks, c.cost_per_mask_day)
