"""Deaths by age in `abm compare` (abm.outputs.compare_by_age): exact figures on hand-made runs,
paired and independent intervals, and the files a comparison writes."""

from __future__ import annotations

import json
import math

import numpy as np
import pandas as pd
import pytest
from conftest import fixed_seeds_note
from scipy import stats

from abm.outputs.compare_by_age import COLUMNS, RESIDENTS, by_age_summary, by_age_table
from abm.outputs.plots import RunTables

T_2DF = 4.302652729911275  # t quantile 0.975 with 2 degrees of freedom


def hand_made(label: str, deaths: list[int], infected: list[int], seed: int | None, old: int = 500) -> RunTables:
    """A run of 3 replicates and two age groups (0-9: 1,000 agents, nobody dies; 80+: ``old``
    agents, ``deaths`` and ``infected`` per replicate by the last day, day 1)."""
    rows = []
    for rep, (d, i) in enumerate(zip(deaths, infected, strict=True)):
        for day in (0, 1):
            rows.append({"day": day, "replicate": rep, "age_group": "0-9", "agents": 1000,
                         "cumulative_infected": 10 * day, "deaths": 0})  # fmt: skip
            rows.append({"day": day, "replicate": rep, "age_group": "80+", "agents": old,
                         "cumulative_infected": i * day, "deaths": d * day})  # fmt: skip
    scenario = {"simulation": {"seed": seed}, "population": {"agents": 1000 + old, "region": "king_county"}}
    summary = {"agents": 1000 + old, "days": 2, "replicates": len(deaths)}
    return RunTables(label, pd.DataFrame(), pd.DataFrame(rows), pd.DataFrame(), summary, scenario)


def test_deaths_by_age_against_the_first_run():
    """80+ of 500 agents: the first run's deaths 1, 2, 3 (200, 400, 600 per 100,000), the second's
    0, 0, 0. Same seed: paired differences 200, 400, 600, mean 400, sd 200, interval 400 -+ t(2)
    x 200 / sqrt 3. Another seed: Welch, the second run without spread, so 2 degrees of freedom
    and the same interval here; a run of 2 replicates against 3: Welch, with 1.68 degrees of freedom."""
    first = hand_made("a", [1, 2, 3], [50, 60, 70], seed=1)
    same = hand_made("b", [0, 0, 0], [20, 20, 20], seed=1)
    table = by_age_table([first, same])
    assert list(table.columns) == COLUMNS
    old = table[(table.run == "b") & (table.age_group == "80+")].iloc[0]
    half = T_2DF * 200 / math.sqrt(3)
    assert old["deaths_per_100k"] == 0 and old["infected_share"] == pytest.approx(20 / 500)
    assert old["deaths_averted_per_100k"] == pytest.approx(400)
    assert (old["deaths_averted_low"], old["deaths_averted_high"]) == pytest.approx((400 - half, 400 + half))
    assert old["averted_by"] == "paired replicates"
    base = table[(table.run == "a") & (table.age_group == "80+")].iloc[0]
    assert base["deaths_per_100k"] == pytest.approx(400) and base["infected_share"] == pytest.approx(0.12)
    assert math.isnan(base["deaths_averted_per_100k"]) and base["averted_by"] == ""
    young = table[(table.run == "b") & (table.age_group == "0-9")].iloc[0]
    assert young["deaths_averted_per_100k"] == 0 and young["infected_share"] == pytest.approx(0.01)
    other = by_age_table([first, hand_made("c", [0, 0, 0], [20, 20, 20], seed=2)])
    welch = other[(other.run == "c") & (other.age_group == "80+")].iloc[0]
    assert welch["averted_by"] == "independent runs"
    assert (welch["deaths_averted_low"], welch["deaths_averted_high"]) == pytest.approx((400 - half, 400 + half))
    short = by_age_table([first, hand_made("d", [1, 3], [20, 20], seed=1)])
    two = short[(short.run == "d") & (short.age_group == "80+")].iloc[0]
    # 200, 600 per 100,000: mean 400, sd 282.8; Welch: va = 200^2 / 3, vb = 282.8^2 / 2
    va, vb = 200**2 / 3, 2 * 200**2 / 2
    df = (va + vb) ** 2 / (va**2 / 2 + vb**2 / 1)
    assert two["averted_by"] == "independent runs" and two["deaths_averted_per_100k"] == pytest.approx(0)
    wide = stats.t.ppf(0.975, df) * math.sqrt(va + vb)  # Welch-Satterthwaite: df = 1.68
    assert (two["deaths_averted_low"], two["deaths_averted_high"]) == pytest.approx((-wide, wide))
    assert wide > T_2DF * math.sqrt(va + vb)  # wider than with 2 degrees of freedom
    text = by_age_summary(table)
    assert text.columns == ["age group", "a: deaths /100k", "b: deaths /100k", "b: averted /100k (95%)"]
    assert text.rows[1] == ["80+", "400", "0", f"400 ({400 - half:.0f} to {400 + half:.0f})"]
    assert text.rows[0] == ["0-9", "0", "0", "0 (0 to 0)"]


def test_deaths_averted_by_age_take_each_run_per_100000_of_its_own_group():
    """Runs of different sizes compare per 100,000 of each run's own group: the first run's 80+
    (500 agents) lose 1, 2, 3 (200, 400, 600 per 100,000), the second's (1,000 agents) 2 in each
    replicate (200 per 100,000): 200 averted per 100,000, with Welch's interval (2 degrees of
    freedom, the second run without spread)."""
    first = hand_made("a", [1, 2, 3], [50, 60, 70], seed=1)
    bigger = hand_made("b", [2, 2, 2], [40, 40, 40], seed=1, old=1000)
    table = by_age_table([first, bigger])
    row = table[(table.run == "b") & (table.age_group == "80+")].iloc[0]
    assert row["agents"] == 1000 and row["deaths_per_100k"] == pytest.approx(200)
    assert row["averted_by"] == "independent runs"
    half = T_2DF * 200 / math.sqrt(3)
    assert row["deaths_averted_per_100k"] == pytest.approx(200)
    assert (row["deaths_averted_low"], row["deaths_averted_high"]) == pytest.approx((200 - half, 200 + half))


def test_the_caption_says_what_a_negative_number_averted_is():
    """A run with more deaths in a group than the first shows a negative number averted there
    (-400 per 100,000 of 80+); the caption said only 'averted: against a', so '-400' read as a
    count averted."""
    first = hand_made("a", [0, 0, 0], [20, 20, 20], seed=1)
    more = hand_made("b", [1, 2, 3], [50, 60, 70], seed=1)
    text = by_age_summary(by_age_table([first, more]))
    assert text.rows[1][3].startswith("-400 (")
    assert "averted: against a (a negative number: that many more deaths than a), with its 95%" in text.caption


def test_an_age_group_without_agents_is_left_empty():
    """A run with no agents of 80+ (a small population): its row has no rates (NaN in the CSV)
    and the table shows empty cells for it, not "nan"; the first run's figures stay."""
    first = hand_made("a", [1, 2, 3], [50, 60, 70], seed=1)
    empty = hand_made("b", [0, 0, 0], [0, 0, 0], seed=1)
    old = empty.by_age["age_group"] == "80+"
    empty.by_age.loc[old, "agents"] = 0
    table = by_age_table([first, empty])
    row = table[(table.run == "b") & (table.age_group == "80+")].iloc[0]
    assert row["agents"] == 0 and math.isnan(row["deaths_per_100k"]) and math.isnan(row["infected_share"])
    assert math.isnan(row["deaths_averted_per_100k"]) and row["averted_by"] == ""
    text = by_age_summary(table)
    assert text.rows[1] == ["80+", "400", "", ""]
    assert "nan" not in text.markdown()
    reversed_ = by_age_summary(by_age_table([empty, first]))
    assert reversed_.rows[1] == ["80+", "", "400", ""]


def test_compare_writes_deaths_by_age(tmp_path):
    """`abm.compare` of two runs writes comparison_by_age.csv (9 age groups a run, then the
    long-term-care residents) and the table in comparison.md and report.html; each group's deaths
    per 100,000 are the run's by_age.csv's last day, means over replicates, and the residents' are
    their summary's, replicate by replicate."""
    import abm

    ni = "scenarios/king_county/no_intervention.yaml"
    with fixed_seeds_note():
        a = abm.run(ni, agents=3000, days=30, replicates=2, seed=5, sets=["disease.transmission_rate=8"])
    with fixed_seeds_note():
        b = abm.run(ni, agents=3000, days=30, replicates=2, seed=5, sets=["disease.transmission_rate=4"])
    out = tmp_path / "cmp"
    abm.compare([a.write(tmp_path / "a", figures=False), b.write(tmp_path / "b", figures=False)], out=out)
    written = pd.read_csv(out / "comparison_by_age.csv")
    assert list(written.columns) == COLUMNS and len(written) == 20
    assert list(written["age_group"])[9::10] == [RESIDENTS, RESIDENTS]
    runs = list(dict.fromkeys(written["run"]))
    ages = pd.read_csv(tmp_path / "a" / "by_age.csv")
    last = ages[ages.day == ages.day.max()]
    for group, part in last.groupby("age_group"):
        row = written[(written.run == runs[0]) & (written.age_group == group)].iloc[0]
        assert row["deaths_per_100k"] == pytest.approx(part["deaths"].mean() * 1e5 / part["agents"].iloc[0])
        assert row["agents"] == part["agents"].iloc[0]
    assert (written[written.run == runs[1]]["averted_by"] == "paired replicates").all()
    care = [json.loads((tmp_path / run / "summary.json").read_text())["long_term_care_residents"] for run in "ab"]
    per_100k = [np.asarray(c["by_replicate"]["deaths"]) * 1e5 / c["agents"] for c in care]
    row = written[(written.run == runs[1]) & (written.age_group == RESIDENTS)].iloc[0]
    assert row["agents"] == care[1]["agents"] and row["infected_share"] == pytest.approx(care[1]["infected"]["share"])
    assert row["deaths_per_100k"] == pytest.approx(per_100k[1].mean())
    assert row["deaths_averted_per_100k"] == pytest.approx((per_100k[0] - per_100k[1]).mean())
    md = (out / "comparison.md").read_text()
    assert "## Deaths by age" in md and "| 80+ |" in md
    page = (out / "report.html").read_text()
    assert "<h2>Deaths by age</h2>" in page and '<a href="comparison_by_age.csv">' in page


def test_a_by_age_table_without_deaths_is_refused_with_one_line(small_comparison, tmp_path):
    """Deaths by age read by_age.csv's deaths: a run folder whose by_age.csv lacks the column, or
    has an empty cell in it, ended `abm compare` in a traceback (KeyError) or NaN deaths; now one
    line naming the folder, the file and the column, exit code 2, nothing written."""
    from conftest import copy_output
    from typer.testing import CliRunner

    from abm.cli import app

    table = pd.read_csv(small_comparison["b"] / "by_age.csv")
    dropped = copy_output(small_comparison["b"], tmp_path / "dropped")
    table.drop(columns=["deaths"]).to_csv(dropped / "by_age.csv", index=False)
    blank = copy_output(small_comparison["b"], tmp_path / "blank")
    table.astype({"deaths": object}).assign(deaths=lambda t: t["deaths"].where(t.index != 3, "")).to_csv(
        blank / "by_age.csv", index=False
    )
    out = tmp_path / "cmp"
    for bad, said in (
        (dropped, "by_age.csv lacks the columns deaths"),
        (blank, "by_age.csv holds 1 empty or non-number cell in deaths, the first in row 4"),
    ):
        result = CliRunner().invoke(app, ["compare", str(small_comparison["a"]), str(bad), "--out", str(out)])
        assert result.exit_code == 2 and "Traceback" not in result.stderr, result.stderr
        text = " ".join(result.stderr.split())
        assert text.startswith(f"error: {bad}: cannot be compared: ") and said in text, text
        assert not out.exists()


def test_residents_get_a_row_where_every_run_has_them():
    """Residents (200 agents) dying 2, 4, 6 in the first run and 0, 0, 0 in the second, paired:
    1,000, 2,000, 3,000 per 100,000 averted, mean 2,000, sd 1,000; their row follows the age
    groups. A run without residents (or from before abm kept them per replicate) drops the row
    for every run."""

    def with_residents(run: RunTables, deaths: list[int]) -> RunTables:
        infected = [10, 10, 10]
        run.summary["long_term_care_residents"] = {
            "agents": 200,
            "infected": {"mean": 10.0, "sd": 0.0, "share": 0.05},
            "by_replicate": {"infected": infected, "deaths": deaths},
        }
        return run

    first = with_residents(hand_made("a", [1, 2, 3], [50, 60, 70], seed=1), [2, 4, 6])
    second = with_residents(hand_made("b", [0, 0, 0], [20, 20, 20], seed=1), [0, 0, 0])
    table = by_age_table([first, second])
    assert list(table["age_group"]) == ["0-9", "80+", RESIDENTS] * 2
    row = table.iloc[-1]
    half = T_2DF * 1000 / math.sqrt(3)
    assert row["agents"] == 200 and row["infected_share"] == pytest.approx(0.05) and row["deaths_per_100k"] == 0
    assert row["deaths_averted_per_100k"] == pytest.approx(2000)
    assert (row["deaths_averted_low"], row["deaths_averted_high"]) == pytest.approx((2000 - half, 2000 + half))
    assert table.iloc[2]["deaths_per_100k"] == pytest.approx(2000)
    text = by_age_summary(table)
    assert text.rows[-1][0] == RESIDENTS and text.caption.endswith("residents are in their age groups too")
    old = hand_made("c", [0, 0, 0], [20, 20, 20], seed=1)
    old.summary["long_term_care_residents"] = {"agents": 200}  # a summary from before by_replicate
    for runs in ([first, hand_made("c", [0, 0, 0], [20, 20, 20], seed=1)], [first, old]):
        table = by_age_table(runs)
        assert RESIDENTS not in set(table["age_group"])
        assert not by_age_summary(table).caption.endswith("age groups too")


def test_a_run_of_one_replicate_says_it_has_no_interval():
    """One replicate each: 80+ deaths 200 per 100,000 in the first run, none in the second. The
    cell read "200" under "averted /100k (95%)", as if it were the interval's mean with its ends
    left out; the main table's cells say "(one replicate: no interval)", and so does this one."""
    first = hand_made("a", [1], [50], seed=1)
    other = hand_made("b", [0], [20], seed=1)
    text = by_age_summary(by_age_table([first, other]))
    assert text.rows[1] == ["80+", "200", "0", "200 (one replicate: no interval)"]
    assert text.rows[0] == ["0-9", "0", "0", "0 (one replicate: no interval)"]
