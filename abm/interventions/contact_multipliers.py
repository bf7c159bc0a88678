"""Changes in contacts: per-layer multipliers from a day, a daily series (the King County
mobility multipliers of 2020, or your own), and school closure."""

from __future__ import annotations

from importlib.resources import files
from pathlib import Path
from typing import TYPE_CHECKING

import pandas as pd
from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from abm.engine.config import Phase
from abm.interventions.registry import ENABLED_HELP, InterventionBase, register
from abm.missing_file import RELATIVE_FILE
from abm.plurals import counted

if TYPE_CHECKING:
    from abm.engine.simulator import Simulation

LAYERS = ("household", "occupation", "community")
BUNDLED_SERIES = {"king_county_mobility_2020": "king_county_mobility_2020.csv"}


class Change(BaseModel):
    """Multiply layers' contact weights from ``from_day`` (until ``until_day``, exclusive); changes
    in effect on the same day multiply."""

    model_config = ConfigDict(extra="forbid")
    from_day: int = Field(ge=0, description="first simulation day of the change")
    until_day: int | None = Field(
        None, ge=0, description="first day without it (after from_day); none: to the end of the run"
    )
    household: float = Field(1.0, ge=0, description="multiplier on household contacts (0: none, 1: unchanged)")
    occupation: float = Field(
        1.0, ge=0, description="multiplier on school, work and care-facility contacts (0: none, 1: unchanged)"
    )
    community: float = Field(1.0, ge=0, description="multiplier on community contacts (0: none, 1: unchanged)")

    @model_validator(mode="after")
    def _order(self) -> Change:
        check_days(self.from_day, self.until_day)
        return self


def check_days(from_day: int, until_day: int | None) -> None:
    """A period must end after it starts."""
    if until_day is not None and until_day <= from_day:
        raise ValueError(f"until_day ({until_day}) must come after from_day ({from_day})")


class Series(BaseModel):
    """A daily multiplier series applied to some layers; before its start and after its end the
    multiplier is 1 and its last value respectively."""

    model_config = ConfigDict(extra="forbid")
    source: str = Field(
        "king_county_mobility_2020",
        description="a bundled series name or a CSV file with a column 'multiplier', one row a day from start_day "
        f"(a 'date' column, if any, must give consecutive days; {RELATIVE_FILE})",
    )
    start_day: int = Field(0, ge=0, description="simulation day of the series' first value")
    strength: float = Field(
        1.0, ge=0, description="scales the reduction: multiplier = max(0, 1 - strength (1 - value))"
    )
    layers: list[str] = Field(
        ["occupation", "community"], description="layers the series multiplies: household, occupation, community"
    )
    hold_last: bool = Field(True, description="keep the last value after the series ends (else 1)")
    household_share: float = Field(
        0.0,
        ge=0,
        le=1,
        description="share of the reduction also applied to household contacts when 'household' is not in layers "
        "(distancing and isolation of the sick at home, hygiene): household multiplier = "
        "1 - household_share strength (1 - value)",
    )
    recovery: float = Field(
        1.0,
        ge=0,
        le=1,
        description="share of the series' rise above its running minimum that returns as contacts: the value "
        "used on a day is min + recovery (value - min), min the lowest value so far; 1 uses the series as is, "
        "0 holds its lowest level (mobility recovered in May-June 2020 while transmission stayed low)",
    )

    @field_validator("layers")
    @classmethod
    def _distinct(cls, layers: list[str]) -> list[str]:
        """Each layer once: a layer named twice would take the multiplier twice (squared)."""
        if len(set(layers)) != len(layers):
            raise ValueError(
                "each layer may be named once (a layer named twice would take the series' multiplier twice); "
                f"allowed: one or more of {', '.join(LAYERS)}"
            )
        return layers

    @model_validator(mode="after")
    def _known(self) -> Series:
        bad = [x for x in self.layers if x not in LAYERS]
        if bad:
            raise ValueError(f"unknown layers {bad}; allowed: {', '.join(LAYERS)}")
        if not self.layers and self.household_share == 0:
            raise ValueError(
                "layers: [] is not allowed with household_share 0: the series would change no contacts; "
                f"name one or more of {', '.join(LAYERS)} (or give a household_share above 0)"
            )
        if self.source not in BUNDLED_SERIES and not Path(self.source).is_file():
            raise ValueError(f"series {self.source!r} is neither bundled ({', '.join(BUNDLED_SERIES)}) nor a file")
        if self.source not in BUNDLED_SERIES:
            self.values()  # a file's column is checked now, not when the run reaches it
        return self

    def values(self) -> list[float]:
        """The daily multipliers of the series, read from its bundled or user CSV file."""
        path = (
            files("abm.interventions") / "data" / BUNDLED_SERIES[self.source]
            if self.source in BUNDLED_SERIES
            else Path(self.source)
        )
        with path.open(encoding="utf-8-sig") as fh:
            frame = pd.read_csv(fh)
        if "multiplier" not in frame.columns or frame.empty:
            raise ValueError(f"{self.source}: needs a column 'multiplier' with one non-negative number per day")
        if "date" in frame.columns:
            check_consecutive_dates(frame["date"], self.source)
        values = pd.to_numeric(frame["multiplier"], errors="coerce")
        bad = values.isna() | (values < 0)
        if bad.any():
            row = int(bad.to_numpy().nonzero()[0][0])
            raise ValueError(
                f"{self.source}: multiplier {str(frame['multiplier'].iloc[row])!r} on line {row + 2} is not allowed; "
                "each day's multiplier must be a number >= 0"
            )
        return values.astype(float).tolist()

    def levels(self, values: list[float]) -> list[float]:
        """The values used day by day: each rise above the running minimum scaled by ``recovery``."""
        out, low = [], float("inf")
        for v in values:
            low = min(low, v)
            out.append(low + self.recovery * (v - low))
        return out


def check_consecutive_dates(dates: pd.Series, source: str) -> None:
    """A series file's ``date`` column must give consecutive days in order: the multipliers are
    used one a day from ``start_day`` in file order, whatever the dates say, so a missing,
    repeated or misordered date would silently move every later value to another day."""
    parsed = pd.to_datetime(dates.astype(str), format="ISO8601", errors="coerce")  # not 03/01/2020
    for row in range(len(parsed)):
        day = parsed.iloc[row]
        expected = None if row == 0 else parsed.iloc[row - 1] + pd.Timedelta(days=1)
        if pd.isna(day) or (expected is not None and day != expected):
            allowed = "a date (YYYY-MM-DD)" if expected is None or pd.isna(expected) else f"{expected.date()}"
            raise ValueError(
                f"{source}: date {str(dates.iloc[row])!r} on line {row + 2} is not allowed; expected {allowed}: "
                "the multipliers are used one a day from start_day in file order, so the 'date' column must give "
                "consecutive days in order (or leave the column out)"
            )


class Closure(BaseModel):
    """Close settings (schools by default) between two days."""

    model_config = ConfigDict(extra="forbid")
    from_day: int = Field(ge=0, description="first simulation day of the closure")
    until_day: int | None = Field(
        None, ge=0, description="first day open again (after from_day); none: closed to the end of the run"
    )
    settings: list[str] = Field(
        ["SCHOOL"], min_length=1, description="occupation settings to close (SCHOOL, a sector name)"
    )

    @model_validator(mode="after")
    def _order(self) -> Closure:
        check_days(self.from_day, self.until_day)
        return self


class ContactMultipliersConfig(BaseModel):
    """Distancing, mobility and closures."""

    model_config = ConfigDict(extra="forbid")
    enabled: bool = Field(True, description=ENABLED_HELP)
    changes: list[Change] = Field([], description="multipliers on the layers' contacts over day ranges")
    series: Series | None = Field(
        None, description="a daily multiplier series (the King County mobility series) on some layers; null: none"
    )
    closures: list[Closure] = Field([], description="settings closed over day ranges")


def active(from_day: int, until_day: int | None, day: int) -> bool:
    """Whether ``day`` falls in [from_day, until_day) (no end when ``until_day`` is None)."""
    return day >= from_day and (until_day is None or day < until_day)


@register("contact_multipliers")
class ContactMultipliers(InterventionBase):
    """Sets the engine's per-layer weight multipliers before each day's transmission."""

    config_model = ContactMultipliersConfig
    order = 40

    def __init__(self, cfg: ContactMultipliersConfig) -> None:
        super().__init__(cfg)
        self.series = cfg.series.values() if cfg.series else []
        self.levels = cfg.series.levels(self.series) if cfg.series else []
        self._closed: tuple[str, ...] = ()  # the settings closed in the simulation attached to

    def attach(self, sim: Simulation) -> None:
        """Start from open settings, as a new simulation's occupation layer does: the settings
        closed are remembered per simulation, so the same object may serve several runs (one
        that remembered another run's closures would not close them in the next)."""
        self._closed = ()

    @classmethod
    def first_day(cls, cfg: ContactMultipliersConfig) -> int | None:
        """The first day of its earliest change, closure or series (None when it has none)."""
        days = [c.from_day for c in [*cfg.changes, *cfg.closures]]
        if cfg.series is not None:
            days.append(cfg.series.start_day)
        return min(days, default=None)

    @classmethod
    def unused_settings(cls, cfg: ContactMultipliersConfig, on: dict, days: int) -> list[str]:
        """A note for each change, closure or series that starts after the last simulated day
        (when another part starts within the run: else the whole intervention is noted), or one
        note when it has none of them."""
        if cls.first_day(cfg) is None:
            return [f"interventions.{cls.name} has no changes, series or closures: it does nothing in this run"]
        starts = [(f"changes[{i}]", c.from_day) for i, c in enumerate(cfg.changes)]
        starts += [(f"closures[{i}]", c.from_day) for i, c in enumerate(cfg.closures)]
        if cfg.series is not None:
            starts.append(("series", cfg.series.start_day))
        return [
            f"interventions.{cls.name}.{key} starts on day {day}, after the {counted(days, 'simulated day')} "
            f"(0..{days - 1}): it does nothing in this run"
            for key, day in starts
            if day >= days
        ]

    def hooks(self) -> dict:
        return {Phase.TRANSMISSION: self.apply}

    def multipliers(self, day: int) -> dict[str, float]:
        """Each layer's multiplier on ``day``."""
        out = dict.fromkeys(LAYERS, 1.0)
        for ch in self.cfg.changes:
            if active(ch.from_day, ch.until_day, day):
                for layer in LAYERS:
                    out[layer] *= getattr(ch, layer)
        s = self.cfg.series
        if s is not None and day >= s.start_day and self.levels:
            i = day - s.start_day
            value = self.levels[i] if i < len(self.levels) else (self.levels[-1] if s.hold_last else 1.0)
            for layer in s.layers:
                out[layer] *= max(0.0, 1 - s.strength * (1 - value))
            if "household" not in s.layers:
                out["household"] *= max(0.0, 1 - s.household_share * s.strength * (1 - value))
        return out

    def apply(self, sim: Simulation, day: int) -> None:
        """Set the day's contact multipliers per layer and close the settings closed that day;
        record the day's closed layers and settings for tracing (``sim.closed``)."""
        scale = self.multipliers(day)
        sim.layer_scale.update(scale)
        closed = tuple(
            sorted({x for c in self.cfg.closures if active(c.from_day, c.until_day, day) for x in c.settings})
        )
        if closed != self._closed:
            sim.occupation.scale_settings(dict.fromkeys(closed, 0.0))
            self._closed = closed
        layers = tuple(name for name, value in scale.items() if value == 0)
        if layers or closed:
            sim.closed[day] = (layers, closed)
