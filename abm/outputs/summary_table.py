"""The table of a run's main results, as `abm run` prints it and `report.html` shows it.

:func:`summary_table` turns a run's summary (``summary.json``) into titled rows of text, so the
console (``rich``) and the HTML report give the same figures in the same words.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from abm.outputs.peaks import AT_END_WORDS, PEAK_MAY_COME_LATER, peak_at_end
from abm.outputs.reproduction import PLOTTED_LEAST
from abm.plurals import counted


@dataclass(frozen=True)
class SummaryTable:
    """A run's main results as text: a title, column headers, rows (one text per column) and a
    caption saying what the columns count."""

    title: str
    columns: list[str]
    rows: list[list[str]]
    caption: str

    def markdown(self) -> str:
        """The table in Markdown: its title as a second-level heading, the first column to the
        left and the others to the right, and its caption below."""
        rule = "|" + "|".join("---" if i == 0 else "---:" for i in range(len(self.columns))) + "|"
        lines = [f"## {self.title}", "", "| " + " | ".join(self.columns) + " |", rule]
        lines += ["| " + " | ".join(row) + " |" for row in self.rows]
        return "\n".join(lines) + (f"\n\n{self.caption}.\n" if self.caption else "\n")


# The row of long-term-care residents after the age groups (they are in their age groups too).
RESIDENTS = "long-term-care residents"


def count(v: float) -> str:
    """A count: whole with thousands separators, or two significant digits under 10 (0.3 deaths
    must not read as 0)."""
    return f"{v:,.0f}" if v == 0 or abs(v) >= 10 else f"{v:.2g}"


def without_minus_zero(text: str) -> str:
    """A formatted number without the sign of a negative value that rounds to 0 ("-0" and
    "-0.0" read as "0" and "0.0": an interval's end of -0.3 deaths is 0 to whole people)."""
    return text[1:] if text.startswith("-") and all(c in "0.,%" for c in text[1:]) else text


def fixed(v: float, decimals: int) -> str:
    """``v`` with ``decimals`` decimals, or down to its first significant digit where that would
    read as 0 (a peak of 0.03 beds, 0.04% infected)."""
    text = f"{v:,.{decimals}f}"
    if v == 0 or any(c not in "0.,-" for c in text):
        return text
    return f"{v:.{max(decimals, -math.floor(math.log10(abs(v))))}f}"


def summary_table(s: dict, engine_seconds: float | None = None) -> SummaryTable:
    """The main results of summary ``s``. A peak whose curve is at its maximum on the last day
    says so (:func:`abm.outputs.summary.peak_at_end`): still rising then, or that maximum reached
    again (a flat top); either way the peak may come later. A third column, headed by the region's
    name and factor, gives each count and cost scaled to the region (the summary's
    ``region_scaled``, in whole numbers); rows that are no counts leave it empty. A summary without
    ``region_scaled`` has no such column. ``engine_seconds``, when given, adds its row."""
    n = s["agents"]
    scaled = s.get("region_scaled")
    replicates = counted(s["replicates"], "replicate")
    title = f"{s['scenario']}: {n:,} agents, {counted(s['days'], 'day')}, {replicates}"
    columns = ["measure", "simulated agents"]
    if scaled is None:
        caption = f"counts and costs are for the {n:,} simulated agents"
    else:
        region = f"{s['region']} (x {scaled['factor']:,.1f})"
        columns.append(region)
        caption = (
            f"simulated agents: counts and costs of the {n:,} agents simulated; {region}: each count and cost "
            f"multiplied by the region's {s['region_population']:,} residents / {n:,} agents, which assumes the "
            "agents are a representative sample of the residents, rounded to whole numbers"
        )
    caption += "; ± is the sd over replicates" if s["replicates"] > 1 else ""
    rows: list[list[str]] = []

    def ms(x: dict) -> str:
        return count(x["mean"]) + (f" ± {count(x['sd'])}" if s["replicates"] > 1 else "")

    def whole(x: float | dict) -> str:  # a scaled count is an estimate: whole people, beds or dollars
        if isinstance(x, dict):
            return f"{x['mean']:,.0f}" + (f" ± {x['sd']:,.0f}" if s["replicates"] > 1 else "")
        return f"{x:,.0f}"

    def add(measure: str, value: str, key: str | None = None) -> None:  # key: its figure in region_scaled
        region = [] if scaled is None else ["" if key is None else whole(scaled[key])]
        rows.append([measure, value, *region])

    ci = s["cumulative_infected"]
    add("cumulative infected", f"{ms(ci)} ({fixed(100 * ci['share'], 1)}%)", "cumulative_infected")
    if "replicates_epidemic_over" in s:  # a summary written before abm had it has none
        add("epidemic over by the last day", f"{s['replicates_epidemic_over']} of {replicates}")

    def when(p: dict) -> str:  # the peak's day, and how the curve ends against it
        end = peak_at_end(p, s["days"])
        later = f" ({AT_END_WORDS[end]} on the last day: {PEAK_MAY_COME_LATER})" if end else ""
        dated = f", {p['date']}" if p.get("date") else ""  # with simulation.start_date
        return f" on day {p['day']}{dated} ({fixed(p['per_100k'], 0)}/100k){later}" if p["value"] > 0 else ""

    ph = s["peak_hospitalized"]
    add(
        "peak hospitalized (mean curve)",
        f"{fixed(ph['value'], 1)}{when(ph) or ' (no one hospitalized)'}",
        "peak_hospitalized",
    )
    po = s["peak_hospital_occupancy"]
    add(
        "peak hospital beds incl. ICU",
        f"{fixed(po['value'], 1)}{when(po) or ' (no one in hospital)'}",
        "peak_hospital_occupancy",
    )

    def capacity_rows(cap: dict, kind: str, key: str) -> None:  # the beds, and the days the mean curve is over them
        add(f"{kind}capacity (beds)", f"{fixed(cap['beds'], 1)} ({count(cap['beds_per_100k'])}/100k)", key)
        over = cap.get("replicates_over_capacity", 0)
        crossed = f" ({over} of {replicates} went over)" if over else ""
        add(f"days over {kind.removeprefix('hospital ')}capacity (mean curve)", f"{cap['days_over_capacity']}{crossed}")

    capacity_rows(s["hospital_capacity"], "hospital ", "hospital_capacity_beds")
    pi = s["peak_icu"]
    add("peak ICU beds", f"{fixed(pi['value'], 1)}{when(pi) or ' (no one in ICU)'}", "peak_icu")
    if s.get("icu_capacity"):  # none where the region gives no ICU figure
        capacity_rows(s["icu_capacity"], "ICU ", "icu_capacity_beds")
    rn = s.get("reproduction_number")  # none where infections were not put down to infectors
    if rn:

        def spread(x: dict, decimals: int) -> str:  # ± over the replicates it is taken from
            sd = f" ± {fixed(x['sd'], decimals)}" if x["replicates"] > 1 else ""
            some = "" if x["replicates"] == s["replicates"] else f" ({x['replicates']} of {replicates})"
            return f"{fixed(x['mean'], decimals)}{sd}{some}"

        if rn["initial"]:
            cell, why = few_infections(rn["initial"])
            add("reproduction number, first week", spread(rn["initial"], 2) + cell)
            caption += f"; {why}" if why else ""
        if rn["generation_interval_days"]:
            add("generation interval (days)", spread(rn["generation_interval_days"], 1))
    add("hospitalizations (admissions)", ms(s["hospitalizations"]), "hospitalizations")
    add("deaths", ms(s["deaths"]), "deaths")
    add("total cost ($)", ms(s["total_cost"]), "total_cost")
    if engine_seconds is not None:
        add("engine seconds", f"{engine_seconds:.2f}")
    return SummaryTable(title, columns, rows, caption)


def few_infections(initial: dict) -> tuple[str, str]:
    """For the first week's reproduction number (summary.json's ``reproduction_number.initial``)
    where a replicate's first week holds fewer than :data:`PLOTTED_LEAST` infections: what its cell
    adds (the infections it rests on: ``(first weeks of 8 and 10 infections)``) and what the
    caption adds (how far chance alone moves a ratio of so few; replicates that agree exactly do
    so by chance). Empty texts otherwise, and for a summary written before abm recorded them."""
    counts = initial.get("infections") or []
    if not counts or min(counts) >= PLOTTED_LEAST:
        return "", ""
    fewest, most, mean = min(counts), max(counts), initial["mean"]
    if len(counts) <= 2:
        of = " and ".join(str(n) for n in counts)
    else:
        of = f"{fewest}-{most}" if most > fewest else str(most)
    cell = f" (first week{'s' if len(counts) > 1 else ''} of {of} infections)"
    why = (
        f"the first week's reproduction number is a ratio of few infections (under {PLOTTED_LEAST} in a replicate's "
        "first week), which chance alone moves by about sqrt(R / n) or more"
        + (f" (±{math.sqrt(mean / fewest):.1f} at R = {fixed(mean, 2)} and n = {fewest})" if mean > 0 else "")
    )
    if len(counts) > 1 and initial.get("sd") == 0:
        why += ", so replicates can agree exactly by chance (± 0.00), not for want of variation"
    return cell, why


def by_age_table(s: dict) -> SummaryTable | None:
    """Who was infected and who died, by age group (summary ``s``'s ``by_age``; None for a
    summary without it): the group's agents, those infected by the end with their share of the
    group, deaths, and deaths per 100 infected."""
    groups = s.get("by_age")
    if not groups:
        return None
    spread = s["replicates"] > 1

    def ms(x: dict) -> str:
        return count(x["mean"]) + (f" ± {count(x['sd'])}" if spread else "")

    def row(label: str, g: dict) -> list[str]:
        share = g["infected"]["share"]
        return [
            label,
            f"{g['agents']:,}",
            ms(g["infected"]),
            "" if share is None else f"{fixed(100 * share, 1)}%",
            ms(g["deaths"]),
            _per_100(g["deaths_per_100_infected"]),
        ]

    rows = [row(g["age_group"], g) for g in groups]
    caption = (
        f"counts are for the {s['agents']:,} simulated agents, infected by the last day (seeded infections too)"
        + ("; ± is the sd over replicates" if spread else "")
        + "; deaths per 100 infected is of the means, and infections of the last weeks may not have ended yet"
    )
    care = s.get("long_term_care_residents")  # none without residents, or in a summary from before
    if care:
        rows.append(row(RESIDENTS, care))
        of_deaths = care["share_of_deaths"]
        caption += "; long-term-care residents are counted in their age groups too" + (
            "" if of_deaths is None else f", and are {fixed(100 * of_deaths, 1)}% of the deaths"
        )
    columns = ["age group", "agents", "infected", "% of the group", "deaths", "deaths per 100 infected"]
    return SummaryTable("Who was infected and who died, by age", columns, rows, caption)


def _per_100(x: float | None) -> str:
    """Deaths per 100 infected: one decimal (or down to the first significant digit), "0" for
    none, empty where no one was infected."""
    return "" if x is None else "0" if x == 0 else fixed(x, 1)
