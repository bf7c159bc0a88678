"""Plots against the run tables, the Python API, and `abm compare` on ni, sq, vacc and ct runs:
its table against the runs' summaries."""

from __future__ import annotations

import json
import math
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from conftest import fixed_seeds_note
from typer.testing import CliRunner, Result

import abm
from abm.cli import app
from abm.outputs import plots
from abm.outputs.compare import CompareError, comparison_table, format_cell
from abm.outputs.run_folder import MARK

SCENARIOS = Path("scenarios/king_county").resolve()
SMALL = ["--agents", "3000", "--days", "40", "--replicates", "2", "--seed", "3"]


def abm_cli(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "abm", *args], capture_output=True, text=True, check=False)


def compare(*args: str | Path) -> Result:
    """`abm compare ARGS` run in this process (the command as a process: test_compare_cli_table_matches_summaries)."""
    return CliRunner().invoke(app, ["compare", *map(str, args)])


@pytest.fixture(scope="module")
def runs(tmp_path_factory):
    """ni, sq, vacc and ct written by `abm run` (plots and map skipped for speed except in ni)."""
    root = tmp_path_factory.mktemp("runs")
    folders = {}
    for name in ("ni", "sq", "vacc", "ct"):
        # The thesis's rate (5.02, faster than King County's calibrated 3.137), so that 40 days
        # at 3,000 agents fill hospitals and the columns compared below are not all zero.
        sets = ["disease.transmission_rate=5.02"]
        with fixed_seeds_note():
            result = abm.run(SCENARIOS / f"{name}.yaml", agents=3000, days=40, replicates=2, seed=6, sets=sets)
        folders[name] = result.write(root / name, figures=name == "ni")
    return folders


@pytest.fixture(scope="module")
def vacc_result():
    with fixed_seeds_note():
        return abm.run(SCENARIOS / "vacc.yaml", agents=3000, days=40, replicates=3, seed=4)


def test_plot_data_match_the_run_tables(vacc_result):
    r = vacc_result
    n = r.summary["agents"]
    figs = r.plot()
    assert set(figs) == set(plots.FIGURES)

    ts = r.timeseries.pivot(index="day", columns="replicate", values="hospital_occupancy") * 1e5 / n
    ax = figs["hospital_occupancy"].axes[0]
    mean = ax.lines[0]
    assert np.allclose(mean.get_xdata(), np.arange(40))
    assert np.allclose(mean.get_ydata(), ts.mean(axis=1))
    band = ax.collections[0].get_paths()[0].vertices  # fill_between: low then high
    assert np.isclose(band[:, 1].min(), ts.min(axis=1).min()) and np.isclose(band[:, 1].max(), ts.max(axis=1).max())
    capacity = ax.lines[1]
    assert np.allclose(capacity.get_ydata(), 55.0)  # the region's beds per 100k

    new = r.timeseries.groupby("day").new_infections.mean() * 1e5 / n
    assert np.allclose(figs["new_infections"].axes[0].lines[0].get_ydata(), new)
    cum = r.timeseries.groupby("day").cumulative_infected.mean() * 100 / n
    cum_line = figs["cumulative_infections"].axes[0].lines[0].get_ydata()
    assert np.allclose(cum_line, cum) and cum_line[-1] == pytest.approx(100 * r.summary["cumulative_infected"]["share"])

    by_age = r.by_age[r.by_age.age_group == "80+"]
    age80 = by_age.groupby("day").cumulative_infected.mean() * 100 / by_age.agents.iloc[0]
    assert np.allclose(figs["cumulative_by_age"].axes[8].lines[0].get_ydata(), age80)

    cost = figs["cumulative_cost"].axes[0].lines[0].get_ydata()
    assert cost[-1] == pytest.approx(r.summary["total_cost"]["mean"]) and r.summary["total_cost"]["mean"] > 0
    daily = r.costs.assign(c=r.costs["count"] * r.costs["unit_cost"]).groupby("day").c.sum() / 3
    assert np.allclose(np.diff(cost), daily.reindex(range(40), fill_value=0).to_numpy()[1:])


def test_plots_written_from_folder_equal_those_from_the_result(runs):
    folder = plots.RunTables.from_folder(runs["ni"])
    fig = plots.hospital_occupancy([folder])
    ts = pd.read_csv(runs["ni"] / "timeseries.csv")
    want = ts.groupby("day").hospital_occupancy.mean() * 1e5 / 3000
    assert np.allclose(fig.axes[0].lines[0].get_ydata(), want)


def test_compare_cli_table_matches_summaries(runs, tmp_path):
    out = tmp_path / "cmp"
    proc = abm_cli("compare", *(str(runs[k]) for k in ("ni", "sq", "vacc", "ct")), "--out", str(out))
    assert proc.returncode == 0, proc.stderr
    files = {MARK, "comparison.csv", "comparison_by_age.csv", "comparison.md", "report.html", "plots"}
    assert {p.name for p in out.iterdir()} == files
    assert {p.name for p in (out / "plots").iterdir()} == set(plots.PLOT_FILES.values())
    table = pd.read_csv(out / "comparison.csv")
    assert list(table.run) == ["ni", "sq", "vacc", "ct"]
    summaries = {k: json.loads((runs[k] / "summary.json").read_text()) for k in runs}
    hosp = {}
    for name, s in summaries.items():
        row = table[table.run == name].iloc[0]
        ts = pd.read_csv(runs[name] / "timeseries.csv")
        assert row.peak_hospital_occupancy == pytest.approx(s["peak_hospital_occupancy"]["value"])
        # Every run has someone in hospital (the zero-curve case: tests/test_sweep.py).
        assert s["peak_hospital_occupancy"]["day"] is not None
        assert row.peak_hospital_day == s["peak_hospital_occupancy"]["day"]
        assert row.peak_share_of_capacity == pytest.approx(s["peak_hospital_occupancy"]["value"] / (55.0 * 3000 / 1e5))
        assert row.days_over_capacity == s["hospital_capacity"]["days_over_capacity"]
        assert row.share_of_days_over_capacity == pytest.approx(s["hospital_capacity"]["days_over_capacity"] / 40)
        assert row.cumulative_infected_share == pytest.approx(s["cumulative_infected"]["share"])
        assert row.deaths == pytest.approx(s["deaths"]["mean"])
        assert row.total_cost == pytest.approx(s["total_cost"]["mean"])
        if "hospitalizations" in s:
            hosp[name] = s["hospitalizations"]["mean"]
        else:
            hosp[name] = ts.groupby("replicate").new_hospitalizations.sum().mean()
        assert row.hospitalizations == pytest.approx(hosp[name])
    assert summaries["ni"]["total_cost"]["mean"] == 0 and summaries["ct"]["total_cost"]["mean"] > 0
    for name in ("sq", "vacc", "ct"):
        row = table[table.run == name].iloc[0]
        averted = hosp["ni"] - hosp[name]
        cost = summaries[name]["total_cost"]["mean"]
        if averted > 0:
            assert row.cost_per_averted_hospitalization == pytest.approx(cost / averted)
        else:
            assert math.isnan(row.cost_per_averted_hospitalization)
    assert math.isnan(table.cost_per_averted_hospitalization.iloc[0])
    # Scaled to the county: the total cost x residents / agents, the averted counts (and their
    # intervals' ends) per 100,000 x residents / 100,000; the first run averts nothing.
    people = 2_252_782
    assert list(table.region) == ["King County, WA"] * 4
    assert table.total_cost_region.to_numpy() == pytest.approx(table.total_cost * people / table.agents)
    for m in ("hospitalizations", "deaths"):
        for per_100k, region in (
            (f"{m}_averted_per_100k", f"{m}_averted_region"),
            (f"{m}_averted_low", f"{m}_averted_region_low"),
            (f"{m}_averted_high", f"{m}_averted_region_high"),
        ):
            assert table[region].iloc[1:].to_numpy() == pytest.approx(table[per_100k].iloc[1:] * people / 1e5)
            assert math.isnan(table[region].iloc[0])
    md = (out / "comparison.md").read_text()
    lines = md.splitlines()
    assert lines[0].startswith("| run |") and lines[5].startswith("| ct |") and lines[6] == ""
    assert "total_cost_region" not in lines[0] and "in the region" not in lines[0]
    # The region's table follows the note: run, region, cost and averted counts in whole numbers.
    assert lines[9] == (
        "| run | region | total cost $ in the region | hospitalizations averted in the region (95% interval) | "
        "deaths averted in the region (95% interval) |"
    )
    ct = table[table.run == "ct"].iloc[0]
    h = [
        f"{v:,.0f}"
        for v in (
            ct.hospitalizations_averted_region,
            ct.hospitalizations_averted_region_low,
            ct.hospitalizations_averted_region_high,
        )
    ]
    assert lines[14].startswith(f"| ct | King County, WA | {ct.total_cost_region:,.0f} | {h[0]} ({h[1]} to {h[2]}) |")
    assert lines[11] == "| ni | King County, WA | 0 |  |  |"
    assert lines[16].startswith("Scaled to each run's region:") and lines[17] == ""
    # then deaths by age (tests/test_compare_by_age.py): a heading, the table (2 + 9 age groups + the
    # long-term-care residents), its caption
    assert lines[18] == "## Deaths by age" and lines[22].startswith("| 0-9 |") and lines[30].startswith("| 80+ |")
    assert lines[31].startswith("| long-term-care residents |")
    assert lines[33].startswith("deaths by the last day per 100,000 agents") and len(lines) == 34
    assert "<h2>In the region</h2>" in (out / "report.html").read_text()
    # The costs' note names the items booked (tests and doses here) and what costs nothing.
    assert "(test_rt_pcr, vaccine_dose)" in lines[7] and "cost_per_interview" in lines[7]
    assert "The first run, the baseline of every comparison here, is ni." in lines[7]  # named in the file too
    assert "(test_rt_pcr, vaccine_dose)" in (out / "report.html").read_text()
    # A cost per averted hospitalization of a few dollars keeps its cents.
    assert format_cell("cost_per_averted_hospitalization", 0.2854) == "0.29"
    assert format_cell("total_cost", 193914.4) == "193,914" and format_cell("total_cost", 0.0) == "0"
    # Small shares and counts keep two digits: 0.04% of the agents is hundreds of residents.
    assert format_cell("cumulative_infected_share", 0.0004) == "0.04%" and format_cell("deaths", 0.04) == "0.04"
    assert format_cell("cumulative_infected_share", 0.0) == "0.0%" and format_cell("deaths", 12.34) == "12.3"
    # The note says the counts are the agents', with the factor to the county's.
    agents = table["agents"].iloc[0]
    assert f"2,252,782 residents / {agents:,} agents = x {2252782 / agents:,.1f}" in lines[7]
    report = (out / "report.html").read_text()
    for name in runs:  # each run is a row of the table and an item of the run list
        assert f"<tr><td>{name}</td>" in report and f"<li><b>{name}</b>: " in report
    # Links are relative to the report's folder; only the ni run folder has its map.
    rel = os.path.relpath(runs["ni"].resolve(), out.resolve())
    assert f'<a href="{rel}/map.html">map</a>' in report
    assert report.count(">map</a>") == 1
    for png in plots.PLOT_FILES.values():
        assert f'src="plots/{png}"' in report


def test_compare_bad_input_exits_2_and_writes_nothing(runs, tmp_path):
    out = tmp_path / "cmp"
    result = compare(runs["ni"], tmp_path / "missing", "--out", out)
    assert result.exit_code == 2
    assert "missing: no such run folder" in result.stderr
    assert not out.exists()
    result = compare(runs["ni"], runs["sq"] / "summary.json", "--out", out)
    assert result.exit_code == 2 and "summary.json: is a file, not a run folder" in result.stderr and not out.exists()
    (tmp_path / "empty").mkdir()
    result = compare(runs["ni"], tmp_path / "empty", "--out", out)
    assert result.exit_code == 2 and "not a run folder" in result.stderr and not out.exists()
    with fixed_seeds_note():
        short = abm.run(SCENARIOS / "ni.yaml", agents=3000, days=20, replicates=1, seed=3).write(
            tmp_path / "short", figures=False
        )
    result = compare(runs["ni"], short, "--out", out)
    assert result.exit_code == 2 and "different numbers of days" in result.stderr and not out.exists()


def test_a_full_disk_while_the_report_is_written_gets_one_message_exit_1_and_writes_nothing(
    runs, tmp_path, monkeypatch
):
    """A write that fails part-way (the disk is full) ends `abm compare` with one line naming the
    folder and the cause and exit code 1, not a traceback; no folder, staging or complete, is left."""
    import errno

    from typer.testing import CliRunner

    from abm.cli import app

    def full(*_args, **_kwargs):
        raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr("abm.outputs.compare.write_plots", full)
    out = tmp_path / "cmp"
    result = CliRunner().invoke(app, ["compare", str(runs["ni"]), str(runs["sq"]), "--out", str(out)])
    flat = " ".join(result.output.split())
    assert result.exit_code == 1, result.output
    assert f"error: output folder '{out}': writing failed (No space left on device); nothing was written" in flat
    assert flat.count("error:") == 1 and "Traceback" not in result.output
    assert list(tmp_path.iterdir()) == []


def test_compare_refuses_a_single_run(runs, tmp_path):
    """`abm compare runs/ni` wrote a comparison with nothing to compare (exit code 0). A report needs
    a second run: one line, exit code 2, nothing written; from Python too. A single run's table
    (in memory) is still its row alone."""
    out = tmp_path / "cmp"
    result = compare(runs["ni"], "--out", out)
    assert result.exit_code == 2 and not out.exists()
    assert result.stderr == (
        f"error: only one run given ({runs['ni']}): a comparison needs at least two runs, the first the reference "
        "the others are compared with; give the runs to compare it with too\n"
    )
    with pytest.raises(CompareError, match=re.escape(f"only one run given ({runs['ni']}): a comparison needs")):
        abm.compare(runs["ni"], out=out)
    assert not out.exists()
    assert list(abm.compare(runs["ni"]).table.run) == ["ni"]


def test_compare_names_a_comparison_folder_given_as_a_run(runs, tmp_path):
    """A comparison folder given to `abm compare` was "not a run folder (missing summary.json,
    by_age.csv, costs.csv)": it is named a comparison, by its mark's kind or (a comparison abm
    marked before marks had kinds) its comparison.csv."""
    cmp = tmp_path / "cmp"
    assert compare(runs["ni"], runs["sq"], "--out", cmp).exit_code == 0
    # comparison.csv keeps the numbers in full (the Markdown and HTML round them).
    written, table = pd.read_csv(cmp / "comparison.csv"), abm.compare([runs["ni"], runs["sq"]]).table
    for column in ("total_cost", "cumulative_infected_share", "hospitalizations_averted_low"):
        pd.testing.assert_series_equal(written[column], table[column], check_exact=True)
    out = tmp_path / "again"
    said = f"error: {cmp}: is a comparison folder, not a run folder; compare takes run folders, written by `abm run`\n"
    result = compare(runs["ni"], cmp, "--out", out)
    assert (result.exit_code, result.stderr) == (2, said) and not out.exists()
    mark = cmp / MARK
    mark.write_text("".join(line for line in mark.read_text().splitlines(True) if not line.startswith("kind: ")))
    result = compare(cmp, runs["ni"], "--out", out)
    assert (result.exit_code, result.stderr) == (2, said) and not out.exists()
    (tmp_path / "empty").mkdir()
    result = compare(runs["ni"], tmp_path / "empty", "--out", out)
    assert result.stderr == (
        f"error: {tmp_path / 'empty'}: not a run folder (missing summary.json, by_age.csv, costs.csv); give folders "
        "written by `abm run`\n"
    )


def test_compare_names_the_default_report_folder_given_as_a_run_for_what_it_is(runs, tmp_path, monkeypatch):
    """After the tutorial's `abm compare ... --out runs/comparison`, giving runs/comparison among
    the runs with no --out said "--out runs/comparison is one of the runs or holds one", an option
    the user had not given: the folder is named for what it is, a comparison and no run."""
    monkeypatch.chdir(tmp_path)
    cmp = Path("runs/comparison")
    assert compare(runs["ni"], runs["sq"]).exit_code == 0 and (cmp / "comparison.csv").is_file()
    before = sorted(p.name for p in cmp.iterdir())
    result = compare(runs["ni"], cmp)
    assert (result.exit_code, result.stderr) == (
        2,
        f"error: {cmp}: is a comparison folder, not a run folder; compare takes run folders, written by `abm run`\n",
    )
    assert sorted(p.name for p in cmp.iterdir()) == before
    # A true run given as the report folder is refused as before, named as the report folder.
    result = compare(runs["ni"], runs["sq"], "--out", runs["sq"])
    assert result.exit_code == 2 and result.stderr == (
        f"error: --out {runs['sq']} (the report folder) is one of the runs or holds one; give another with --out\n"
    )


def test_compare_says_a_run_folder_lacks_a_file_removed_since_abm_wrote_it(runs, tmp_path):
    """A run folder (its mark says so and lists the file) from which summary.json, or both
    timeseries files, were removed was "not a run folder (missing summary.json); give folders
    written by `abm run`", though `abm run` wrote it: it is named a run folder that lacks them,
    to be run again. A folder without abm's mark is as before."""
    out = tmp_path / "cmp"
    for name, removed in (("summary", ("summary.json",)), ("tables", ("timeseries.parquet", "timeseries.csv"))):
        bad = _edited_copy(runs["sq"], tmp_path / name)
        for file in removed:
            (bad / file).unlink()
        result = compare(runs["ni"], bad, "--out", out)
        assert (result.exit_code, result.stderr) == (
            2,
            f"error: {bad}: is a run folder that lacks {', '.join(removed)}, removed since `abm run` wrote it; run "
            "it again\n",
        )
        assert not out.exists()
    (tmp_path / "tables" / MARK).unlink()
    result = compare(runs["ni"], tmp_path / "tables", "--out", out)
    assert result.stderr == (
        f"error: {tmp_path / 'tables'}: not a run folder (missing timeseries.parquet, timeseries.csv); give folders "
        "written by `abm run`\n"
    )


def test_compare_refuses_the_hidden_folder_of_an_unfinished_write(runs, tmp_path):
    """A run killed (SIGKILL) while it drew its plots leaves .ni.partial-HOST-PID with its tables
    and summary but a mark that lists nothing; given to `abm compare` it was compared as a run
    (exit code 0). It is refused in one line: killed, or still being written by a live process."""
    from abm.outputs.run_folder import MARK_TEXT

    gone = subprocess.Popen(["true"])
    gone.wait()  # a process id that no longer runs
    out = tmp_path / "cmp"
    for pid, message in (
        (gone.pid, "is the hidden folder of a write of sq that did not finish (its process was killed): it may lack "
                   "files or hold them cut short; run it again"),
        (os.getpid(), f"is the hidden folder in which abm (process {os.getpid()}) is writing sq; give sq once it has "
                      "finished"),
    ):  # fmt: skip
        staging = tmp_path / f".sq.partial-some_host-{pid}"
        shutil.copytree(runs["sq"], staging)
        (staging / MARK).write_text(MARK_TEXT)
        result = compare(runs["ni"], staging, "--out", out)
        assert (result.exit_code, result.stderr) == (2, f"error: {staging}: {message}\n")
        assert not out.exists()
    result = compare(runs["ni"], _edited_copy(runs["sq"], tmp_path / ".sq.partial-some_host-1-old"), "--out", out)
    assert result.exit_code == 0, result.stderr  # an earlier output, complete, that a write set aside


def test_python_compare_of_results_and_folders(runs, vacc_result):
    with pytest.raises(CompareError, match="the result of 'vacc' is given twice; give each run once"):
        abm.compare([vacc_result, runs["ni"], vacc_result])  # as a folder given twice is refused
    comp = abm.compare([runs["ni"], vacc_result])
    assert list(comp.table.run) == ["ni", "vacc"]
    direct = comparison_table([plots.RunTables.from_folder(runs["ni"]), plots.RunTables.from_result(vacc_result)])
    pd.testing.assert_frame_equal(comp.table, direct)
    fig = comp.plot("cumulative_infections")
    assert [line.get_label() for line in fig.axes[0].lines] == ["ni", "vacc"]


def test_python_compare_takes_one_result_as_it_takes_one_folder(runs, vacc_result):
    """A single result, like a single folder, is one run (it raised TypeError: 'RunResult' object
    is not iterable); anything else that is no run is named in a CompareError, not a TypeError."""
    assert list(abm.compare(vacc_result).table.run) == list(abm.compare([vacc_result]).table.run) == ["vacc"]
    with pytest.raises(CompareError, match=re.escape("5: not a run; give run folders or results of abm.run")):
        abm.compare(5)


def test_python_results_of_different_horizons_are_named_apart(vacc_result):
    """Two results of one scenario over different days: the message told them apart only by
    their days ('vacc: 40, vacc: 20') and asked for abm run's --days; it names them as the
    comparison labels them and how to re-run from Python too."""
    with fixed_seeds_note():
        short = abm.run(SCENARIOS / "vacc.yaml", agents=3000, days=20, replicates=1, seed=4)
    message = (
        "the runs simulate different numbers of days (vacc: 40, vacc #2: 20); totals, costs and days over "
        "capacity compare only over the same horizon: re-run them with the same number of days (`abm run "
        "--days`, `abm.run(days=...)`)"
    )
    with pytest.raises(CompareError, match=re.escape(message)):
        abm.compare([vacc_result, short])


def test_result_map_api(vacc_result, tmp_path):
    page = vacc_result.map(tmp_path / "m.html", days=[20])
    assert (tmp_path / "m.html").read_text() == page.html
    assert 20 in page.data.days and "<iframe" in page._repr_html_()
    fig = page.snapshot(20)
    assert "day 20" in fig.axes[0].get_title()


def test_compare_out_inside_a_run_folder_is_refused(runs):
    """A report inside a run folder would add an entry abm did not write to the run, which
    abm then never replaces: refused, and the run folder keeps exactly what it had."""
    before = sorted(p.name for p in runs["ni"].iterdir())
    out = runs["ni"] / "cmp"
    result = compare(runs["ni"], runs["sq"], "--out", out)
    assert result.exit_code == 2, result.stderr
    assert f"lies inside '{runs['ni'].resolve()}', which holds a run" in result.stderr
    assert "Traceback" not in result.stderr and result.stdout == ""
    assert sorted(p.name for p in runs["ni"].iterdir()) == before


def _edited_copy(run: Path, dest: Path, summary: object = None, drop: tuple[str, ...] = ()) -> Path:
    """A copy of a run folder with summary.json replaced and timeseries columns dropped."""
    shutil.copytree(run, dest)
    if summary is not None:
        (dest / "summary.json").write_text(summary if isinstance(summary, str) else json.dumps(summary))
    if drop:
        (dest / "timeseries.parquet").unlink()
        ts = pd.read_csv(dest / "timeseries.csv")
        ts.drop(columns=list(drop)).to_csv(dest / "timeseries.csv", index=False)
    return dest


def test_compare_of_an_edited_run_says_what_it_lacks(runs, tmp_path):
    """A summary.json or table that was edited gets one message naming the folder, the file and
    the entries (it was a traceback and exit code 1), and nothing is written."""
    good = json.loads((runs["sq"] / "summary.json").read_text())
    odd = {**good, "peak_hospital_occupancy": 5, "deaths": {"mean": "x"}, "days": 0}
    cases = {
        "list": ([], "summary.json holds a JSON list, not an object"),
        "odd": (
            odd,
            "summary.json lacks the numbers days (above 0), peak_hospital_occupancy.value, "
            "peak_hospital_occupancy.day, peak_hospital_occupancy.per_100k, deaths.mean",
        ),
        "broken": ("{", "cannot read the run (summary.json: Expecting property name"),
    }
    out = tmp_path / "cmp"
    for name, (summary, message) in cases.items():
        bad = _edited_copy(runs["sq"], tmp_path / name, summary=summary)
        result = compare(runs["ni"], bad, "--out", out)
        assert result.exit_code == 2 and "Traceback" not in result.stderr, result.stderr
        assert f"{bad}: " in result.stderr and message in " ".join(result.stderr.split()), result.stderr
        assert not out.exists()
    bad = _edited_copy(runs["sq"], tmp_path / "columns", drop=("hospital_occupancy", "new_infections"))
    message = "timeseries.parquet (or .csv) lacks the columns hospital_occupancy, new_infections; it was not"
    with pytest.raises(CompareError, match=re.escape(message)):
        abm.compare([runs["ni"], bad], out=out)
    assert not out.exists()


def test_compare_of_a_run_without_the_columns_the_averted_counts_read_says_so(runs, tmp_path):
    """The hospitalizations and deaths averted read each replicate's new_hospitalizations and
    deaths: a timeseries without them was let through and ended in a traceback (KeyError)."""
    bad = _edited_copy(runs["sq"], tmp_path / "columns", drop=("new_hospitalizations", "deaths"))
    out = tmp_path / "cmp"
    result = compare(runs["ni"], bad, "--out", out)
    assert result.exit_code == 2 and "Traceback" not in result.stderr, result.stderr
    message = f"{bad}: cannot be compared: timeseries.parquet (or .csv) lacks the columns new_hospitalizations, deaths;"
    assert message in " ".join(result.stderr.split()), result.stderr
    assert not out.exists()


def test_compare_of_a_table_cut_short_or_with_a_word_for_a_number_says_so(runs, tmp_path):
    """A timeseries.csv cut off in its last row (a copy that stopped half-way) was read with empty
    cells and compared: hospitalizations summed over the cells left (wrong numbers, exit code 0);
    a word in a count column ended in a traceback. Both get one line and exit code 2."""
    cut = _edited_copy(runs["sq"], tmp_path / "cut")
    (cut / "timeseries.parquet").unlink()
    lines = (cut / "timeseries.csv").read_text().rstrip("\n").split("\n")
    stop = lines[0].split(",").index("new_infections")  # the last row ends before its new_infections
    (cut / "timeseries.csv").write_text("\n".join([*lines[:-1], ",".join(lines[-1].split(",")[:stop])]))
    rows = len(pd.read_csv(runs["sq"] / "timeseries.csv"))
    word = _edited_copy(runs["sq"], tmp_path / "word")
    (word / "timeseries.parquet").unlink()
    ts = pd.read_csv(word / "timeseries.csv").astype({"new_hospitalizations": object})
    ts.loc[4, "new_hospitalizations"] = "four"
    ts.to_csv(word / "timeseries.csv", index=False)
    out = tmp_path / "cmp"
    for bad, message in (
        (cut, f"cells in hospital_occupancy, icu, new_infections, cumulative_infected, new_hospitalizations, deaths, "
              f"secondary_infections, the first in row {rows:,} of its {rows:,} rows"),
        (word, f"holds 1 empty or non-number cell in new_hospitalizations, the first in row 5 of its {rows:,} rows"),
    ):  # fmt: skip
        result = compare(runs["ni"], bad, "--out", out)
        assert result.exit_code == 2 and "Traceback" not in result.stderr, result.stderr
        assert result.stderr.count("\n") == 1, result.stderr  # one line
        said = result.stderr.strip()
        assert f"{bad}: cannot be compared: timeseries.parquet (or .csv) holds " in said and message in said, said
        assert not out.exists()


def test_compare_help_says_what_runs_are_and_the_exit_codes():
    """typer 0.20 with click 8.5 drops the RUNS argument's own help, so the command's text says it.
    The first run is the reference of every figure compared (it said: for the cost per averted
    hospitalization; the averted counts, the deaths' cost and the changes are taken against it too)."""
    from typer.testing import CliRunner

    from abm.cli import app

    text = " ".join(CliRunner().invoke(app, ["compare", "--help"]).output.replace("│", " ").split())
    assert "RUNS are run folders written by `abm run`, of the same number of days; the first is the reference" in text
    assert "the first is the reference: what the others avert (hospitalizations, deaths), their cost per" in text
    assert "Exit code 0 when done; 2 for bad input (nothing is written); 130 after Ctrl-C, 143 after SIGTERM" in text


@pytest.mark.parametrize("n", [4, 11, 23])
def test_overlaid_runs_each_get_their_own_colour(runs, n):
    """Eleven runs (the ten thesis scenarios and one more) had two lines of one colour."""
    import dataclasses

    one = plots.RunTables.from_folder(runs["ni"])
    many = [dataclasses.replace(one, label=f"run {k}") for k in range(n)]
    fig = plots.hospital_occupancy(many)
    colours = {line.get_color() if isinstance(line.get_color(), str) else tuple(line.get_color())
               for line in fig.axes[0].lines if line.get_label().startswith("run ")}  # fmt: skip
    assert len(colours) == n


def test_comparison_csv_writes_the_peak_day_as_a_day(runs, tmp_path):
    """A run without a hospital peak made the column float: comparison.csv read "day 54.0"."""
    flat = _edited_copy(runs["sq"], tmp_path / "flat")
    summary = json.loads((flat / "summary.json").read_text())
    summary["peak_hospital_occupancy"] = {"value": 0.0, "day": None, "per_100k": 0.0, "at_end": False}
    (flat / "summary.json").write_text(json.dumps(summary))
    comp = abm.compare([runs["ni"], flat], out=tmp_path / "cmp")
    day = json.loads((runs["ni"] / "summary.json").read_text())["peak_hospital_occupancy"]["day"]
    rows = (tmp_path / "cmp" / "comparison.csv").read_text().splitlines()
    assert rows[1].split(",")[5] == str(day) and rows[2].split(",")[5] == ""
    assert comp.table["peak_hospital_day"].iloc[0] == day and math.isnan(comp.table["peak_hospital_day"].iloc[1])


def test_compare_notes_a_hospital_peak_held_to_the_last_day(runs, tmp_path):
    """A peak first reached before the last day and held to it (at_end): the peak may come later;
    the curve is at its maximum again, not said to be rising."""
    held = _edited_copy(runs["sq"], tmp_path / "held")
    summary = json.loads((held / "summary.json").read_text())
    summary["peak_hospital_occupancy"] = {"value": 2.5, "day": 30, "per_100k": 83.3, "at_end": True}
    (held / "summary.json").write_text(json.dumps(summary))
    abm.compare([runs["ni"], held], out=tmp_path / "cmp")
    note = (tmp_path / "cmp" / "comparison.md").read_text()
    # (ni's own curve may still be rising on its last day: "... of ni is still rising and that of sq ...")
    again = r"On the last simulated day (?:.* is still rising and that|the hospital curve) of ([\w, ]*?) "
    again += "is at its maximum again: "
    late = re.search(again, note)
    assert late is not None and "sq" in late.group(1).split(", ")  # the copy keeps its label, sq
    assert not re.search(r"\bsq(, \w+)* is still rising", note)


def test_report_says_what_each_run_simulated(runs, vacc_result, tmp_path):
    """report.html named each run and linked its files, but said nothing of what was simulated:
    no description, horizon, seed or link to the resolved scenario. Each run's item now gives them."""
    out = tmp_path / "cmp"
    comp = abm.compare([runs["ni"], runs["sq"], vacc_result], out=out)
    assert [r.label for r in comp.runs] == ["ni", "sq", "vacc"]
    report = (out / "report.html").read_text()
    items = dict(re.findall(r"<li><b>(.*?)</b>: (.*?)</li>", report))
    for label in ("ni", "sq"):
        resolved = (runs[label] / "scenario.resolved.yaml").read_text()
        description = re.search(r"^description: (.*)$", resolved, re.M).group(1).rstrip(".")
        facts = (
            f"{description}; 40 days (day 0 to 39), 3,000 agents (x 750.9 for the region&#x27;s 2,252,782 "
            "residents), 2 replicates, seed 6. "
        )
        assert items[label].startswith(facts), items[label]
        rel = os.path.relpath((runs[label] / "scenario.resolved.yaml").resolve(), out.resolve())
        assert f'<a href="{rel}">scenario</a>' in items[label]
    # A result of abm.run has no folder to link to, but says what it simulated.
    assert items["vacc"] == (
        "Vaccination from day 10, first doses first, so no second dose within its 180 days (second doses on "
        "schedule in vacc_on_schedule); 40 days (day 0 to 39), 3,000 agents (x 750.9 for the region&#x27;s "
        "2,252,782 residents), 3 replicates, seed 4"
    )


def test_a_negative_figure_that_rounds_to_zero_reads_zero():
    """An interval's end of -0.3 deaths in the region is 0 whole people: "0", not "-0"."""
    assert format_cell("deaths_averted_region", -0.3, 0) == "0" and format_cell("deaths_averted_region", -0.6) == "-1"
    assert format_cell("deaths_averted_per_100k", -0.04, 1) == "0.0" and format_cell("total_cost", -0.2, 0) == "0"
    assert format_cell("cumulative_infected_share", -0.0001, 1) == "0.0%"
