"""Derive the King County 2020 daily series the project carries from public extracts.

Run once, by a maintainer, against the public King County extracts (not shipped with the
project)::

    python tools/derive_king_county_series.py ../shared/data/king_county [--check]

It writes

* ``abm/calibration/data/king_county_2020.csv``: per day from 2020-01-22 to 2020-12-31, new
  cases and deaths (JHU CSSE's daily differences of the cumulative counts, a negative difference,
  which is a revision of earlier days whose dates the series does not give, set to 0) and new
  hospital admissions (PHSKC, as published); a column is empty where its source has no value;
* ``abm/interventions/data/king_county_mobility_2020.csv``: the 132 daily contact multipliers
  of the OpenABM-Covid19 parameter table (day index, the assumed date, the multiplier).

``--check`` writes nothing and says whether the committed files are what the extracts give.
It also prints what setting negative differences to 0 adds to the 2020 totals.
"""

from __future__ import annotations

import argparse
import csv
import datetime as dt
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
OBSERVED = ROOT / "abm/calibration/data/king_county_2020.csv"
MOBILITY = ROOT / "abm/interventions/data/king_county_mobility_2020.csv"
FIRST, LAST = dt.date(2020, 1, 22), dt.date(2020, 12, 31)


def rows(path: Path) -> list[dict[str, str]]:
    with path.open(newline="", encoding="utf-8") as fh:
        return list(csv.DictReader(fh))


def observed_text(source: Path) -> str:
    """The observed series file's text, and a note of what the clipping added."""
    jhu = {r["date"]: r for r in rows(source / "king_county_covid_jhu_2020.csv")}
    admissions = {
        r["date"]: r["new_hospital_admissions"] for r in rows(source / "king_county_hospital_admissions_phskc_2020.csv")
    }
    lines = ["date,cases,deaths,hospital_admissions"]
    added = {"cases": 0, "deaths": 0}
    day = FIRST
    while day <= LAST:
        key = day.isoformat()
        counts = []
        for column in ("cases", "deaths"):
            if key in jhu:
                new = int(float(jhu[key][f"new_{column}"]))
                added[column] += max(0, -new)
                counts.append(str(max(0, new)))
            else:
                counts.append("")
        lines.append(",".join([key, *counts, admissions.get(key, "")]))
        day += dt.timedelta(days=1)
    last = max(jhu)
    totals = {c: int(float(jhu[last][f"cum_{c}"])) for c in ("cases", "deaths")}
    print(
        f"negative daily differences set to 0 add {added['cases']} cases and {added['deaths']} deaths to JHU's "
        f"cumulative totals on {last} ({totals['cases']:,} cases, {totals['deaths']:,} deaths)"
    )
    return "\n".join(lines) + "\n"


def mobility_text(source: Path) -> str:
    """The multiplier series file's text."""
    lines = ["day_index,date,multiplier"]
    for r in rows(source / "king_county_mobility_contact_scalars_2020.csv"):
        lines.append(f"{r['day_index']},{r['date_assumed']},{float(r['mobility_contact_scalar']):.6f}")
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> None:
    """Write the two files from the extracts' folder given first, or with ``--check`` compare them."""
    parser = argparse.ArgumentParser(description="Derive the King County 2020 daily series from public extracts.")
    parser.add_argument("extracts", type=Path, help="the folder of the public King County extracts")
    parser.add_argument("--check", action="store_true", help="write nothing; say whether the files are as derived")
    args = parser.parse_args(argv)
    source = args.extracts
    outputs = {OBSERVED: observed_text(source), MOBILITY: mobility_text(source)}
    differ = False
    for path, text in outputs.items():
        if args.check:
            same = path.read_text(encoding="utf-8") == text
            differ |= not same
            print(f"{path.relative_to(ROOT)}: {'as derived' if same else 'DIFFERS from the extracts'}")
        else:
            path.write_text(text, encoding="utf-8")
            print(f"wrote {path.relative_to(ROOT)}")
    sys.exit(1 if differ else 0)


if __name__ == "__main__":
    main()
