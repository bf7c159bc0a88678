"""A region: a folder of figures from which a synthetic population is built.

A region folder holds two files:

``region.yaml``
    County-level figures (see :class:`RegionFigures` for every key): age bands, school
    enrolment and sizes, employment by age and by sector, workplace sizes, long-term care.
``tracts.csv``
    One row per census tract: ``geoid, name, lat, lon, land_km2``, one column per age band
    named in ``region.yaml`` (people) and ``hh_1 .. hh_6, hh_7up`` (households by size); a
    ``households`` column (the total) may be there, but households are drawn from ``hh_*``.
    Spaces around a column name are ignored; every row has one cell per column; cells are read
    as written (``NaN`` is no figure).

Another county needs only another folder; no code changes.
"""

from __future__ import annotations

import csv
from dataclasses import dataclass, replace
from functools import lru_cache
from pathlib import Path

import numpy as np
import pandas as pd
import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationInfo, field_validator, model_validator

from abm.populations.population import LONG_TERM_CARE, SCHOOL
from abm.validation_errors import likely_meant, validated
from abm.yaml_loader import load_yaml, yaml_error_text

REGIONS_DIR = Path(__file__).parent / "regions"
HOUSEHOLD_COLUMNS = ["hh_1", "hh_2", "hh_3", "hh_4", "hh_5", "hh_6", "hh_7up"]
# The most members ``household_size_7up`` may give a household counted as 7 or more: larger groups
# that live together (care homes, dormitories) are group quarters, not households (care homes are
# built apart, from long_term_care), and a household's members all meet every day.
MAX_HOUSEHOLD_SIZE = 20


class RegionError(ValueError):
    """A region folder is missing, unreadable or inconsistent."""


def check_age_rates(rows: list[tuple[int, int, float]]) -> list[tuple[int, int, float]]:
    """``[first age, last age, share]`` rows: ages from 0 with the first at most the last, shares
    between 0 and 1 (a share outside would be drawn as 0 or 1 without a word), and no age in two
    rows (the later row would replace the earlier one's share without a word)."""
    for lo, hi, share in rows:
        if not (0 <= lo <= hi and 0 <= share <= 1):
            raise ValueError(
                f"row [{lo}, {hi}, {share}] is not allowed; a row is [first age, last age, share] with "
                "0 <= first age <= last age and the share between 0 and 1"
            )
    why = "the later row would replace the earlier one's share there"
    check_no_overlap([(lo, hi) for lo, hi, _ in rows], [list(r) for r in rows], "row", why)
    return rows


def check_no_overlap(spans: list[tuple[int, int]], shown: list[object], what: str, why: str) -> None:
    """No age in two of ``spans`` (``[first age, last age]``, in the order given). ``shown`` is
    how each entry is named in the message (its row, or its name), ``what`` what an entry is, and
    ``why`` what an overlap would do."""
    for j, (lo, hi) in enumerate(spans):
        for i in range(j):
            first, last = max(lo, spans[i][0]), min(hi, spans[i][1])
            if first <= last:
                ages = f"age {first}" if first == last else f"ages {first}-{last}"
                raise ValueError(
                    f"{what}s {shown[i]} and {shown[j]} both cover {ages}; each age may be in one {what} only ({why})"
                )


def age_spans(ages: list[int]) -> str:
    """Ascending ages as text: ``age 5``, ``ages 18-19``, ``ages 3, 18-19``."""
    spans: list[list[int]] = []
    for a in ages:
        if spans and a == spans[-1][1] + 1:
            spans[-1][1] = a
        else:
            spans.append([a, a])
    text = ", ".join(f"{lo}" if lo == hi else f"{lo}-{hi}" for lo, hi in spans)
    return ("age " if len(ages) == 1 else "ages ") + text


def check_size_rows(rows: list[tuple[int, int, float]]) -> list[tuple[int, int, float]]:
    """``[fewest, most, weight]`` size brackets, each with 1 <= fewest <= most and a weight of at
    least 0."""
    for lo, hi, weight in rows:
        if not (1 <= lo <= hi and weight >= 0):
            raise ValueError(
                f"row [{lo}, {hi}, {weight}] is not allowed; a row is [fewest, most, weight] with "
                "1 <= fewest <= most and the weight at least 0"
            )
    return rows


def check_size_weights(rows: list[tuple[int, int, float]]) -> list[tuple[int, int, float]]:
    """Size brackets as :func:`check_size_rows` wants them, with some weight above 0 (sizes are
    drawn from these brackets)."""
    if sum(w for _, _, w in check_size_rows(rows)) <= 0:
        raise ValueError("the weights must add up to more than 0")
    return rows


class LongTermCare(BaseModel):
    """Who lives in long-term care facilities, and how large the facilities are."""

    model_config = ConfigDict(extra="forbid")
    residence_rate: list[tuple[int, int, float]] = Field(
        description="[first age, last age, share living in a facility]"
    )
    sizes: list[tuple[int, int, float]] = Field(description="[fewest residents, most residents, share of facilities]")
    residents_per_staff: float = Field(gt=0)

    _rates = field_validator("residence_rate")(check_age_rates)

    @field_validator("sizes")
    @classmethod
    def _sizes(cls, v: list[tuple[int, int, float]], info: ValidationInfo) -> list[tuple[int, int, float]]:
        """Size brackets as :func:`check_size_weights` wants them; a region without care homes (no
        ``residence_rate`` share above 0) may give none, as it has no facility to size."""
        check_size_rows(v)
        rates = info.data.get("residence_rate")  # absent where it was refused
        if sum(w for _, _, w in v) <= 0 and (rates is None or any(share > 0 for _, _, share in rates)):
            raise ValueError(
                "the weights must add up to more than 0, as residence_rate puts people in care homes (a region "
                "without care homes gives residence_rate: [], and may then give sizes: [])"
            )
        return v


class RegionFigures(BaseModel):
    """County-level figures of a region (the contents of ``region.yaml``)."""

    model_config = ConfigDict(extra="forbid")
    name: str
    fips: str = ""
    population: int = Field(gt=0, description="residents the full-region population represents")
    age_bands: dict[str, tuple[int, int]]
    household_size_7up: int = Field(
        7, ge=7, le=MAX_HOUSEHOLD_SIZE, description='members of a household counted as "7 or more"'
    )
    school_enrollment: list[tuple[int, int, float]]
    school_types: dict[str, tuple[int, int]]
    school_size_brackets: list[tuple[int, int]]
    school_size_shares: dict[str, list[float]]
    pupils_per_staff: float = Field(gt=0)
    employment_rate: list[tuple[int, int, float]]
    sectors: dict[str, float]
    workplace_sizes: list[tuple[int, int, float]]
    long_term_care: LongTermCare
    hospital_beds_per_100k: float = Field(gt=0)
    icu_beds_per_100k: float | None = Field(None, gt=0)  # none: no ICU capacity line
    bounds: tuple[float, float, float, float] | None = Field(
        None, description="the region's extent [west, south, east, north] in decimal degrees; map cells stay inside"
    )

    @field_validator("age_bands")
    @classmethod
    def _contiguous_bands(cls, v: dict[str, tuple[int, int]]) -> dict[str, tuple[int, int]]:
        bounds = list(v.values())
        if not bounds:
            raise ValueError("no band is not allowed; give the tract table's age bands, from age 0")
        names = list(v)
        for i, (name, (lo, hi)) in enumerate(v.items()):
            start = 0 if i == 0 else bounds[i - 1][1] + 1
            if hi < lo or lo != start:
                where = "the first band" if i == 0 else f"the band after {names[i - 1]}: {list(bounds[i - 1])}"
                raise ValueError(
                    f"{name}: [{lo}, {hi}] is not allowed; the bands are [first age, last age], contiguous and in "
                    f"order of age, so {where} starts at age {start}"
                    + (" (and a band's first age is at most its last)" if hi < lo else "")
                )
        if bounds[-1][1] < 80:  # else the population has no one in the oldest groups, without a word
            raise ValueError(
                f"age bands must reach age 80 or beyond (the model's oldest age group is 80 and over); they end at "
                f"{bounds[-1][1]}: give the census's last bands too (e.g. age_85_up: [85, 100])"
            )
        return v

    _rates = field_validator("school_enrollment", "employment_rate")(check_age_rates)

    @field_validator("bounds")
    @classmethod
    def _extent(cls, v: tuple[float, float, float, float] | None) -> tuple[float, float, float, float] | None:
        """``[west, south, east, north]``: longitudes -180..180 with west < east, latitudes -90..90
        with south < north."""
        if v is not None:
            west, south, east, north = v
            if not (-180 <= west < east <= 180 and -90 <= south < north <= 90):
                raise ValueError(
                    f"{list(v)} is not allowed; bounds are [west, south, east, north] in decimal degrees, with "
                    "-180 <= west < east <= 180 and -90 <= south < north <= 90"
                )
        return v

    _sizes = field_validator("workplace_sizes")(check_size_weights)

    @field_validator("school_types")
    @classmethod
    def _school_ages(cls, v: dict[str, tuple[int, int]]) -> dict[str, tuple[int, int]]:
        """Pupil ages ``[first, last]`` with 0 <= first <= last, no age in two types."""
        for kind, (lo, hi) in v.items():
            if not 0 <= lo <= hi:
                raise ValueError(
                    f"{kind}: [{lo}, {hi}] is not allowed; a school type's ages are [first age, last age] with "
                    "0 <= first age <= last age"
                )
        why = "a pupil of that age would go to the earlier type only"
        check_no_overlap(list(v.values()), [f"{k!r} {list(a)}" for k, a in v.items()], "school type", why)
        return v

    @field_validator("school_size_brackets")
    @classmethod
    def _school_brackets(cls, v: list[tuple[int, int]]) -> list[tuple[int, int]]:
        for lo, hi in v:
            if not 1 <= lo <= hi:
                raise ValueError(
                    f"bracket [{lo}, {hi}] is not allowed; a bracket is [fewest, most] with 1 <= fewest <= most"
                )
        return v

    @field_validator("sectors")
    @classmethod
    def _sector_weights(cls, v: dict[str, float]) -> dict[str, float]:
        for name in v:
            if name in (SCHOOL, LONG_TERM_CARE):
                raise ValueError(
                    f"{name!r} is not allowed; SCHOOL and LONG_TERM_CARE are the settings of schools and care "
                    "facilities (their contacts.occupation.degree entries and closures), so a sector needs another name"
                )
        bad = {k: w for k, w in v.items() if w < 0}
        if bad or sum(v.values()) <= 0:
            raise ValueError(
                f"{bad or v} is not allowed; workers by sector must be at least 0 and add up to more than 0"
            )
        return v

    @model_validator(mode="after")
    def _enrolled_ages_have_schools(self) -> RegionFigures:
        """Every age that ``school_enrollment`` enrols (a share above 0, up to the last age band's
        last age) is in a ``school_types`` range: pupils of an age without one were left out of
        school without a word."""
        oldest = max((hi for _, hi in self.age_bands.values()), default=0)
        covered = {a for lo, hi in self.school_types.values() for a in range(lo, hi + 1)}
        for lo, hi, share in self.school_enrollment:
            left_out = [a for a in range(lo, min(hi, oldest) + 1) if a not in covered]
            if share > 0 and left_out:
                raise ValueError(
                    f"school_enrollment: row [{lo}, {hi}, {share}] enrols {age_spans(left_out)}, which no school_types "
                    f"range covers ({', '.join(f'{k}: {list(a)}' for k, a in self.school_types.items())}); "
                    "those pupils would be left out of school. Give every enrolled age a school type, or "
                    "enrol nobody of that age (a share of 0)"
                )
        return self

    @model_validator(mode="after")
    def _school_shares_per_type(self) -> RegionFigures:
        """Every school type has one share per size bracket (at least 0, adding up to more than 0),
        and every entry is a school type's (one of another name, a misspelt type, was never read)."""
        n = len(self.school_size_brackets)
        for kind in self.school_size_shares:
            if kind not in self.school_types:
                meant = likely_meant(kind, list(self.school_types))
                raise ValueError(
                    f"school_size_shares.{kind}: {self.school_size_shares[kind]} is not allowed"
                    + (f" (did you mean {meant!r}?)" if meant else "")
                    + f"; {kind!r} is no type of school_types, so its shares would not be read: the entries are "
                    f"the school types ({', '.join(self.school_types) or 'none'})"
                )
        for kind in self.school_types:
            shares = self.school_size_shares.get(kind)
            if shares is None:
                raise ValueError(
                    f"school_size_shares: no entry for school type {kind!r}; "
                    f"every type of school_types needs one ({', '.join(self.school_types)})"
                )
            if len(shares) != n or min(shares, default=0) < 0 or sum(shares) <= 0:
                raise ValueError(
                    f"school_size_shares.{kind}: {shares} is not allowed; it needs {n} shares (one per "
                    "school_size_brackets entry), each at least 0, adding up to more than 0"
                )
        return self


@dataclass(frozen=True)
class Region:
    """A region's figures and its tract table, ordered along a space-filling curve."""

    path: Path
    figures: RegionFigures
    tracts: pd.DataFrame

    @property
    def name(self) -> str:
        return self.figures.name

    def band_counts(self) -> np.ndarray:
        """People per tract and age band, shape [tracts, bands]."""
        return self.tracts[list(self.figures.age_bands)].to_numpy(dtype=np.float64)

    def household_counts(self) -> np.ndarray:
        """Households per tract by size 1..7+, shape [tracts, 7]."""
        return self.tracts[HOUSEHOLD_COLUMNS].to_numpy(dtype=np.float64)


def resolve_region_path(region: str | Path) -> Path:
    """A bundled region name (``king_county``) or a path to a region folder."""
    candidate = REGIONS_DIR / str(region)
    if isinstance(region, str) and candidate.is_dir():
        return candidate
    return Path(region)


def hilbert_index(x: np.ndarray, y: np.ndarray, order: int = 16) -> np.ndarray:
    """Position of points (scaled to [0, 1]) along a Hilbert curve, so nearby points get
    nearby positions."""
    n = 1 << order
    xi = np.clip((x * (n - 1)).astype(np.int64), 0, n - 1)
    yi = np.clip((y * (n - 1)).astype(np.int64), 0, n - 1)
    d = np.zeros_like(xi)
    s = n >> 1
    while s > 0:
        rx = ((xi & s) > 0).astype(np.int64)
        ry = ((yi & s) > 0).astype(np.int64)
        d += s * s * ((3 * rx) ^ ry)
        flip = ry == 0
        swap_x = np.where(flip & (rx == 1), n - 1 - xi, xi)
        swap_y = np.where(flip & (rx == 1), n - 1 - yi, yi)
        xi, yi = np.where(flip, swap_y, swap_x), np.where(flip, swap_x, swap_y)
        s >>= 1
    return d


def load_region(region: str | Path) -> Region:
    """Read and check a region folder; tracts come back in space-filling-curve order. A folder
    read before is not read again while its files are unchanged (every scenario validation and
    every run reads its region); each caller gets its own copy of the tract table."""
    path = resolve_region_path(region)
    fig_file, tract_file = path / "region.yaml", path / "tracts.csv"
    for f in (fig_file, tract_file):
        if not f.is_file():
            raise RegionError(f"{f}: region file not found (a region folder needs region.yaml and tracts.csv)")
    read = _read_region(path.resolve(), fig_file.stat().st_mtime_ns, tract_file.stat().st_mtime_ns)
    return replace(read, path=path, tracts=read.tracts.copy())


@lru_cache(maxsize=8)
def _read_region(path: Path, figures_mtime: int, tracts_mtime: int) -> Region:
    """The region folder's files read and checked (cached by path and modification times)."""
    fig_file, tract_file = path / "region.yaml", path / "tracts.csv"
    figures = _read_figures(fig_file)
    try:
        header, lines = _tract_layout(tract_file)
        text = {column: str for column in header if column.strip() in ("geoid", "name")}
        # a cell is read as written: NaN, NA or null is no figure, named as such, not an empty cell
        tracts = pd.read_csv(tract_file, dtype=text, keep_default_na=False)
    except RegionError:
        raise
    except (ValueError, pd.errors.ParserError) as exc:
        raise RegionError(f"{tract_file}: not a readable CSV table ({' '.join(str(exc).split())})") from None
    tracts.columns = [str(c).strip() for c in tracts.columns]  # "geoid, name, lat": spaces around names
    if len(lines) != len(tracts):  # not expected: then rows are counted as if the file had no blank line
        lines = list(range(2, len(tracts) + 2))
    needed = ["geoid", "lat", "lon", "land_km2", *figures.age_bands, *HOUSEHOLD_COLUMNS]
    _check_columns(tracts, tract_file, needed, list(figures.age_bands))
    _check_no_other_columns(tracts, tract_file, needed, list(figures.age_bands))
    if "households" in tracts.columns:  # optional and not used (households come from hh_*), but checked
        needed.append("households")
    numeric = tracts[needed[1:]].apply(pd.to_numeric, errors="coerce")
    # not a number, infinite (inf, 1e999: the synthesis would fail on it), or a negative count or area
    bad = ~np.isfinite(numeric.astype(float)) | (numeric[needed[3:]] < 0).reindex(
        columns=numeric.columns, fill_value=False
    )
    if bad.any().any():
        row, column = next((r, c) for r in range(len(tracts)) for c in numeric.columns if bad.iloc[r][c])
        value = tracts[column].iloc[row]
        empty = isinstance(value, str) and not value.strip()
        shown = "an empty cell" if empty else repr(value.item() if hasattr(value, "item") else value)
        finite = "finite " if np.isinf(numeric[column].iloc[row]) else ""
        raise RegionError(
            f"{tract_file}: row {lines[row]} (tract {tracts['geoid'].iloc[row]}), column {column}: "
            f"{shown} is not allowed; figures must be {finite}numbers"
            + (", and counts and areas at least 0" if column in needed[3:] else "")
        )
    tracts[needed[1:]] = numeric
    _check_tract_places(tracts, tract_file, lines)
    _check_within_bounds(tracts, tract_file, lines, figures.bounds)
    _check_households_have_residents(tracts, tract_file, lines, list(figures.age_bands))
    tracts = tracts[tracts[list(figures.age_bands)].sum(axis=1) > 0]
    if tracts.empty:
        raise RegionError(
            f"{tract_file}: no tract has residents (the age band columns {list(figures.age_bands)} are 0 or "
            "there are no rows); a region needs at least one tract with people"
        )
    if tracts[HOUSEHOLD_COLUMNS].to_numpy().sum() <= 0:
        raise RegionError(
            f"{tract_file}: columns {HOUSEHOLD_COLUMNS} are 0 in every tract with residents, which is not allowed; "
            "a region needs households by size in at least one tract (a tract without them takes the sizes of "
            "the region's households)"
        )
    lat, lon = tracts["lat"].to_numpy(), tracts["lon"].to_numpy()
    x = (lon - lon.min()) / max(np.ptp(lon), 1e-9)
    y = (lat - lat.min()) / max(np.ptp(lat), 1e-9)
    order = np.argsort(hilbert_index(x, y), kind="stable")
    tracts = tracts.iloc[order].reset_index(drop=True)
    return Region(path=path, figures=figures, tracts=tracts)


def _read_figures(fig_file: Path) -> RegionFigures:
    """``region.yaml`` read and checked; a problem raises :class:`RegionError` with one message
    naming the file and, for each problem, the key, the value and what is allowed."""
    try:
        data = load_yaml(fig_file.read_text(encoding="utf-8-sig"))
    except yaml.YAMLError as exc:
        raise RegionError(f"{fig_file}: {yaml_error_text(exc)}") from None
    # as scenarios are: true/false for a number, and infinite or NaN numbers, are named too
    return validated(RegionFigures, data, str(fig_file), RegionError, heading="")


def _tract_layout(tract_file: Path) -> tuple[list[str], list[int]]:
    """The column names of ``tract_file`` as written and the line of the file each row of the
    table is on (pandas skips blank lines, so messages count lines rather than rows). No column
    name is there twice (spaces around a name aside):
    pandas reads the second as ``name.1``, which nothing uses, so figures pasted twice (or a
    wrong column under a right name) went unread. Every row has one cell per column: pandas took
    a first row with a cell too many (``1,200`` for 1200) as one whose first cell names the row,
    and read every figure under the next column's name; a row with too few cells was read as
    empty cells at its end."""
    with tract_file.open(encoding="utf-8-sig", newline="") as f:
        reader = csv.reader(f)
        header = next(reader, [])
        lines: list[int] = []
        for row in reader:
            if not row or (len(row) == 1 and not row[0].strip()):  # a blank line, which pandas skips
                continue
            lines.append(reader.line_num)
            if len(row) != len(header):
                hint = " (a number written with a comma, 1,200, makes two cells: write 1200)"
                raise RegionError(
                    f"{tract_file}: row {reader.line_num}: {len(row)} cells is not allowed; every row needs one "
                    f"cell per column, {len(header)} as in the header" + (hint if len(row) > len(header) else "")
                )
    seen: dict[str, int] = {}
    for i, column in enumerate(c.strip() for c in header):
        if column in seen:
            raise RegionError(
                f"{tract_file}: column {column} is there twice (columns {seen[column] + 1} and {i + 1}); "
                "each column may be there once"
            )
        seen[column] = i
    return header, lines


def _check_columns(tracts: pd.DataFrame, tract_file: Path, needed: list[str], bands: list[str]) -> None:
    """Every column a tract table needs is there (``needed``, and ``name``); a missing one is
    named with the columns a table needs and, for a column of another name close to it
    (``hh4``), the one it likely meant."""
    missing = [c for c in [*needed[:1], "name", *needed[1:]] if c not in tracts.columns]
    if not missing:
        return
    others = [c for c in tracts.columns if c not in (*needed, "name", "households")]
    guesses = [f"did you mean {meant!r} for the column {c!r}?" for c in others if (meant := likely_meant(c, missing))]
    raise RegionError(
        f"{tract_file}: missing columns {missing}"
        + (f" ({' '.join(guesses)})" if guesses else "")
        + f"; a tract table needs the columns geoid, name, lat, lon, land_km2, one per age band of region.yaml "
        f"({', '.join(bands)}) and {', '.join(HOUSEHOLD_COLUMNS)} (households by size)"
    )


def _check_no_other_columns(tracts: pd.DataFrame, tract_file: Path, needed: list[str], bands: list[str]) -> None:
    """No column but those a tract table has (``needed``, ``name`` and the optional ``households``):
    any other was left unread without a word, so people of an age band that ``region.yaml`` does
    not name (a column ``age_95_plus`` beside bands that end at 94) were left out of the region."""
    known = [*needed[:1], "name", *needed[1:], "households"]
    other = [c for c in tracts.columns if c not in known]
    if not other:
        return
    column = other[0]  # every needed column is there, so only the optional one may be misspelt
    hint = " (did you mean 'households'?)" if likely_meant(column, ["households"]) else ""
    band = (
        "; an age band's column needs its entry in region.yaml's age_bands, [first age, last age]"
        if column.lower().startswith("age")
        else ""
    )
    raise RegionError(
        f"{tract_file}: column {column!r} is not allowed{hint}; it would not be read: a tract table has the "
        f"columns geoid, name, lat, lon, land_km2, one per age band of region.yaml ({', '.join(bands)}), "
        f"{', '.join(HOUSEHOLD_COLUMNS)} and, optionally, households{band}"
    )


def _check_households_have_residents(
    tracts: pd.DataFrame, tract_file: Path, lines: list[int], bands: list[str]
) -> None:
    """A tract with households by size has residents: a tract whose age band columns are all 0 is
    left out as one without people, so households there meant people lost without a word (their
    ages missing from the row, or the row's figures shifted)."""
    empty = (tracts[bands].sum(axis=1) <= 0) & (tracts[HOUSEHOLD_COLUMNS].sum(axis=1) > 0)
    if not empty.any():
        return
    row = int(np.flatnonzero(empty.to_numpy())[0])
    held = {c: tracts[c].iloc[row] for c in HOUSEHOLD_COLUMNS if tracts[c].iloc[row] > 0}
    shown = ", ".join(f"{c} {v:g}" for c, v in held.items())
    raise RegionError(
        f"{tract_file}: row {lines[row]} (tract {tracts['geoid'].iloc[row]}): households ({shown}) with no "
        f"residents in the age band columns ({', '.join(bands)}, all 0) is not allowed; give the tract's "
        "people by age band, or 0 households for a tract without residents (such a tract is left out)"
    )


def _check_tract_places(tracts: pd.DataFrame, tract_file: Path, lines: list[int]) -> None:
    """Every tract has its own geoid and a centroid on the globe (latitude -90..90, longitude
    -180..180, decimal degrees): tables and maps key tracts by geoid and draw them by centroid.
    ``lines`` gives the line of the file each row is on, as messages name it."""
    geoid = tracts["geoid"]
    empty = geoid.isna() | (geoid.astype(str).str.strip() == "")
    if empty.any():
        row = int(np.flatnonzero(empty.to_numpy())[0])
        raise RegionError(f"{tract_file}: row {lines[row]}, column geoid: is empty; every tract needs a geoid")
    repeated = geoid.duplicated(keep=False).to_numpy()
    if repeated.any():
        at = np.flatnonzero(repeated)
        rows = [lines[int(r)] for r in at]
        value = geoid.iloc[int(at[0])]
        raise RegionError(f"{tract_file}: column geoid: {value!r} is on rows {rows}; every tract needs its own geoid")
    for column, limit in (("lat", 90), ("lon", 180)):
        outside = (tracts[column].abs() > limit).to_numpy()
        if outside.any():
            row = int(np.flatnonzero(outside)[0])
            raise RegionError(
                f"{tract_file}: row {lines[row]} (tract {geoid.iloc[row]}), column {column}: "
                f"{tracts[column].iloc[row]} is not allowed; {column} is in decimal degrees, from -{limit} to {limit}"
            )


def _check_within_bounds(
    tracts: pd.DataFrame, tract_file: Path, lines: list[int], bounds: tuple[float, float, float, float] | None
) -> None:
    """Every tract's centroid lies within the region's ``bounds`` (``region.yaml``), if it gives
    them: maps clip the tracts' cells to the bounds, so a tract outside would have no cell."""
    if bounds is None:
        return
    west, south, east, north = bounds
    lat, lon = tracts["lat"].to_numpy(float), tracts["lon"].to_numpy(float)
    outside = (lon < west) | (lon > east) | (lat < south) | (lat > north)
    if outside.any():
        row = int(np.flatnonzero(outside)[0])
        raise RegionError(
            f"{tract_file}: row {lines[row]} (tract {tracts['geoid'].iloc[row]}): the centroid lat {lat[row]:g}, "
            f"lon {lon[row]:g} is not allowed; it lies outside the region's bounds {list(bounds)} "
            "([west, south, east, north] in region.yaml), and every tract must lie within them (correct the "
            "bounds, or leave them out and maps draw the cells without them)"
        )


def subset_region(region: Region, geoids: list[str] | np.ndarray, name: str) -> Region:
    """The part of ``region`` made of the tracts ``geoids`` (kept in the region's curve order).

    The county-level figures carry over unchanged (they are rates and size distributions);
    ``population`` becomes the residents of the kept tracts scaled by the region's ratio of
    ``population`` to its tracts' residents, so counts scale to the sub-region's residents.
    """
    wanted = {str(g) for g in geoids}
    unknown = sorted(wanted - set(region.tracts["geoid"]))
    if unknown:
        raise RegionError(f"{region.path}: tracts {unknown[:5]} are not in the region ({len(unknown)} unknown)")
    if not wanted:
        raise RegionError(f"{region.path}: a sub-region needs at least one tract")
    keep = region.tracts["geoid"].isin(wanted).to_numpy()
    tracts = region.tracts[keep].reset_index(drop=True)
    bands = list(region.figures.age_bands)
    ratio = region.figures.population / float(region.tracts[bands].to_numpy().sum())
    population = max(1, round(float(tracts[bands].to_numpy().sum()) * ratio))
    figures = region.figures.model_copy(update={"name": name, "population": population})
    return Region(path=region.path, figures=figures, tracts=tracts)
