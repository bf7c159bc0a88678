"""`abm learn` as a user meets it: the console summary of DP runs, the protocols' params as run
in report.json, the plots' labels, and bad input (classes without samples, sizes the memory
cannot hold, a split refused) said in one line with nothing written."""

import json
import re
from pathlib import Path
from typing import Any

import pytest
import yaml
from conftest import tiny_learning

from abm.learning.protocols.cycle import CYCleConfig


def _scenario(tmp_path: Path, **over: Any) -> Path:
    return tiny_learning(tmp_path, **over)


def _cli(*args: str):
    from typer.testing import CliRunner

    from abm.cli import app

    return CliRunner().invoke(app, list(args))


def test_learn_prints_the_epsilon_of_each_protocol_run_with_dp(tmp_path):
    """The console table had no word of privacy: a DP protocol's epsilon was only in report.json.
    Each DP protocol now gets a line after the table with the epsilon the report holds; the
    others none."""
    dp = {"secure_aggregation": True, "dp": {"clip": 1.0, "noise_multiplier": 1.0, "delta": 1.0e-5}}
    protocols = [{"name": "fedavg"}, {"name": "fedavg", "label": "fedavg_dp", "privacy": dp}]
    f, out = _scenario(tmp_path, protocols=protocols), tmp_path / "out"
    res = _cli("learn", str(f), "--out", str(out))
    assert res.exit_code == 0, res.output
    report = json.loads((out / "report.json").read_text())
    eps = report["protocols"]["fedavg_dp"]["epsilon"]
    assert eps > 0 and report["protocols"]["fedavg"]["epsilon"] is None
    lines = [line for line in res.stdout.splitlines() if "differential privacy" in line]
    assert lines == [
        f"fedavg_dp: differential privacy, epsilon {eps:.3g} at delta 1e-05 per participant over 2 noisy releases "
        "in 2 rounds (rdp accountant, clip 1, noise multiplier 1)"
    ]
    assert res.stdout.splitlines()[-1] == f"report: {out / 'report.json'}"
    # report.md and report.html: the console's table, a row per protocol, the DP line, every plot.
    md = (out / "report.md").read_text()
    dp_row = report["protocols"]["fedavg_dp"]
    assert f"| fedavg_dp | {dp_row['mean_score']:.3f} | {dp_row['mcg']:.3f} |" in md and lines[0] in md
    page = (out / "report.html").read_text()
    assert "<table>" in page and "<td>fedavg_dp</td>" in page and f"epsilon {eps:.3g}" in page
    assert sorted(re.findall(r'<img src="([^"]+)"', page)) == sorted(report["plots"])
    assert {"curves.png", "gains.png", "scores.png"} <= set(report["plots"])


def test_report_holds_each_protocols_params_as_run_defaults_filled_in(tmp_path):
    """scenario.json holds the params as written ({} for a protocol given none), so the values a
    protocol ran with (its defaults) were recorded nowhere; report.json now has them."""
    protocols = [{"name": "fedprox", "params": {"mu": 0.05}}, {"name": "cycle", "params": {"period": 3}}]
    f, out = _scenario(tmp_path, protocols=protocols), tmp_path / "out"
    res = _cli("learn", str(f), "--out", str(out))
    assert res.exit_code == 0, res.output
    prots = json.loads((out / "report.json").read_text())["protocols"]
    assert prots["local"]["params"] == {}
    assert prots["fedprox"]["params"] == {"mu": 0.05, "server_lr": 1.0, "weighting": "size", "bn_stats": "auto"}
    cycle = prots["cycle"]["params"]
    assert cycle["period"] == 3 and cycle["tau_max"] == 0.75 and cycle["warmup_rounds"] is None
    assert cycle == CYCleConfig(period=3).model_dump(mode="json")
    # the scenario as written stays as written, so that it loads again as it did
    assert json.loads((out / "scenario.json").read_text())["protocols"][1]["params"] == {"period": 3}


def _gmm(classes: int, samples: int) -> dict[str, Any]:
    return {"source": "gaussian_mixture", "n_samples": samples, "n_classes": classes, "n_features": 4}


def test_fewer_samples_than_classes_is_refused_by_learn_and_validate(tmp_path):
    """500 classes drawn over 300 samples ran, every participant scoring 0 (most classes had no
    sample); now one line naming the key, exit code 2, nothing written."""
    f, out = _scenario(tmp_path, data=_gmm(500, 300)), tmp_path / "out"
    message = (
        f"error: {f}: data.n_classes: 500 is not allowed with n_samples 300: each sample's class is drawn "
        "uniformly, so with fewer samples than classes some classes would have no sample; give at most 300 "
        "classes, or more samples"
    )
    res = _cli("learn", str(f), "--out", str(out))
    assert (res.exit_code, res.output.strip().splitlines()) == (2, [message])
    assert not out.exists()
    res = _cli("validate", str(f))
    assert res.exit_code == 2 and message in res.output
    f = _scenario(tmp_path, data=_gmm(300, 300))  # as many samples as classes: allowed
    assert _cli("validate", str(f)).exit_code == 0


def test_a_split_refused_once_the_data_are_built_is_the_only_line(tmp_path):
    """A split refused once the data were built came after the line announcing the run; it is now
    found first, the one line said."""
    split = {"participants": 40, "label_skew": {"alpha": 0.5}}
    f, out = _scenario(tmp_path, data=_gmm(3, 300), split=split), tmp_path / "out"
    res = _cli("learn", str(f), "--out", str(out))
    assert res.exit_code == 2
    assert res.output.strip().splitlines() == [
        f"error: {f}: split.label_skew.min_size: 10 is not allowed: 40 participants x 10 samples each is 400, more "
        "than the 225 samples shared (the data less the global test set); give a smaller min_size, fewer "
        "participants (split.participants) or more samples (data.n_samples)"
    ]
    assert not out.exists()


TORCH_ALLOCATION = RuntimeError(
    "[enforce fail at alloc_cpu.cpp:127] err == 0. DefaultCPUAllocator: can't allocate memory: you tried to "
    "allocate 1600000000000 bytes. Error code 12 (Cannot allocate memory)"
)


@pytest.mark.parametrize("error", [MemoryError("Unable to allocate 745. GiB"), TORCH_ALLOCATION], ids=repr)
def test_sizes_the_memory_cannot_hold_get_one_line(tmp_path, monkeypatch, error):
    """data.n_samples: 1e11 (NumPy) or a hidden width of 1e11 (torch's CPU allocator) ended in a
    traceback, from abm learn and abm validate alike. Now one line naming what sets the sizes,
    exit code 2, nothing written. (The allocation is made to fail here: a real one of that size
    may be granted by an overcommitting kernel.)"""
    from abm.learning import runner, split

    f, out = _scenario(tmp_path), tmp_path / "out"
    sizes = "data.n_samples, data.n_features, the models' hidden, channels and embed_dim, split.participants"

    def fail(*args: Any, **kwargs: Any) -> Any:
        raise error

    with monkeypatch.context() as m:  # the data are built: abm validate and learn's check before it runs
        m.setattr(split, "source_labels", fail)
        line = f"error: {f}: the run needs more memory than this machine has; give smaller sizes ({sizes})"
        res = _cli("validate", str(f))
        assert res.exit_code == 2 and res.output.strip().splitlines() == [line]
        res = _cli("learn", str(f), "--out", str(out))
        assert (res.exit_code, res.output.strip().splitlines()) == (2, [line])
    monkeypatch.setattr(runner, "run_protocol", fail)  # as the protocols run (a model's layers are built)
    res = _cli("learn", str(f), "--out", str(out))
    assert res.exit_code == 2
    assert res.output.strip().splitlines()[-1] == f"{line}; no results were written to {out}"
    assert not out.exists()


def test_the_size_docs_learning_md_gives_as_too_large_is_refused_for_memory(tmp_path, monkeypatch):
    """docs/learning.md gave `n_samples: 1e11` as a size the memory cannot hold; YAML reads 1e11 as
    text, so a user who wrote it got 'must be a whole number', not the memory line the doc describes.
    The doc's value, read from it, now reaches the memory check. (The data's allocation is made to
    fail, as above.)"""
    from abm.learning import split

    doc = (Path(__file__).resolve().parents[2] / "docs" / "learning.md").read_text()
    n_samples = yaml.safe_load(re.search(r"`n_samples:\s+([^`]+)`", doc)[1])
    f = _scenario(tmp_path, data={"source": "gaussian_mixture", "n_samples": n_samples})

    def fail(*args: Any, **kwargs: Any) -> Any:
        raise MemoryError(f"Unable to allocate {n_samples} samples")

    monkeypatch.setattr(split, "source_labels", fail)
    res = _cli("validate", str(f))
    assert res.exit_code == 2 and "the run needs more memory than this machine has" in res.output, res.output


def test_models_whose_weights_exceed_the_memory_are_refused_before_anything_runs(tmp_path, monkeypatch):
    """A hidden width of 1e11 passed `abm validate` (it builds no model), and `abm learn` said
    'running ...' before it failed to build one. The models' weights are now counted from their
    specs: 4 bytes x (6 x 1e11 + ...) exceed a machine of 1 GB (memory and swap), for the
    scenario's models and a protocol's own alike; one line, exit code 2, nothing written, from both
    commands. A model that fits still passes."""
    import abm.memory

    monkeypatch.setattr(abm.memory, "total_memory_bytes", lambda: 10**9)
    sizes = "data.n_samples, data.n_features, the models' hidden, channels and embed_dim, split.participants"
    huge = [{"kind": "mlp", "hidden": [10**11], "batchnorm": False}]
    for over in ({"models": huge}, {"protocols": [{"name": "fedavg", "models": huge}]}):
        f, out = _scenario(tmp_path, **over), tmp_path / "out"
        line = f"error: {f}: the run needs more memory than this machine has; give smaller sizes ({sizes})"
        for args in (["validate", str(f)], ["learn", str(f), "--out", str(out)]):
            res = _cli(*args)
            assert (res.exit_code, res.output.strip().splitlines()) == (2, [line]), res.output
        assert not out.exists()
    # iris: 4 features x 2e7 + 2e7 biases + 2e7 x 3 classes + 3 = 1.6e8 values, 640 MB: within the 1 GB
    f = _scenario(tmp_path, models=[{"kind": "mlp", "hidden": [2 * 10**7], "batchnorm": False}])
    assert _cli("validate", str(f)).exit_code == 0


def test_a_models_counted_values_are_those_torch_builds():
    """ModelSpec.parameter_count (torch-free, for the memory check) against the float state of the
    model build_model makes: weights, biases and BatchNorm's weight, bias, mean and variance."""
    from abm.learning.models import build_model
    from abm.learning.scenario import ModelSpec

    cases = [
        (ModelSpec(kind="mlp", hidden=[16, 8]), (10,), 4),
        (ModelSpec(kind="mlp", hidden=[5], batchnorm=False), (3,), 2),
        (ModelSpec(kind="cnn", channels=[8, 16], embed_dim=32), (1, 8, 8), 10),
        (ModelSpec(kind="cnn", channels=[4], embed_dim=7, batchnorm=False), (1, 8, 8), 10),
    ]
    for spec, shape, classes in cases:
        model = build_model(spec.kind, shape, classes, spec.hidden, spec.channels, spec.embed_dim, spec.batchnorm)
        built = sum(t.numel() for t in model.state_dict().values() if t.is_floating_point())
        assert spec.parameter_count(shape, classes) == built, spec


def test_another_runtime_error_is_not_taken_for_memory(tmp_path, monkeypatch):
    """Only an allocation that failed is said to be memory: another RuntimeError goes on as it is."""
    from abm.learning import runner
    from abm.learning.cli import out_of_memory

    def fail(*args: Any, **kwargs: Any) -> Any:
        raise RuntimeError("mat1 and mat2 shapes cannot be multiplied")

    monkeypatch.setattr(runner, "run_protocol", fail)
    res = _cli("learn", str(_scenario(tmp_path)), "--out", str(tmp_path / "out"))
    assert isinstance(res.exception, RuntimeError) and "shapes cannot be multiplied" in str(res.exception)
    assert not out_of_memory(ValueError("can't allocate memory"))
    assert out_of_memory(RuntimeError("CUDA out of memory. Tried to allocate 2.00 GiB"))


@pytest.mark.parametrize(("evaluate_on", "scored_on"), [("global", "the global test set"), ("own", None)])
def test_plots_name_the_scenario_and_what_the_scores_are_measured_on(tmp_path, monkeypatch, evaluate_on, scored_on):
    """gains.png and curves.png had no scenario name, and no plot said which test set the
    accuracy is measured on (evaluate_on)."""
    from abm.learning import report as learning_report

    scored_on = scored_on or "each one's own test split"
    titles: dict[str, str] = {}

    def keep(fig: Any, path: Path, files: list[str] | None = None) -> None:
        titles[path.name] = fig.axes[0].get_title()
        if files is not None:
            files.append(path.name)

    monkeypatch.setattr(learning_report, "save_figure", keep)
    row = {"collaborative": 0.5, "gain": 0.1}
    prot = {"participants": [row, row], "history": [0.4, 0.5]}
    report = {"scenario": "demo", "participants": 2, "evaluate_on": evaluate_on, "protocols": {"local": prot}}
    files = learning_report._plots(report, tmp_path)
    assert files == ["scores.png", "gains.png", "curves.png"]
    assert titles == {
        "scores.png": f"demo: final accuracy per participant (on {scored_on})",
        "gains.png": f"demo: collaboration gain G_n = A_n - B_n (accuracy on {scored_on})",
        "curves.png": f"demo: after each round, on {scored_on}",
    }


def test_a_long_label_is_cut_in_the_plots_which_are_laid_out_without_a_warning(tmp_path):
    """A protocol label of 237 characters (the longest allowed) was a tick label of scores.png and
    gains.png wider than the figure: matplotlib's tight layout gave up ("Tight layout not applied",
    a UserWarning `abm learn` printed) and drew the bars squeezed. The plots now show its first
    39 characters and an ellipsis, and lay out; the file names keep the whole label."""
    import warnings

    from abm.learning import report as learning_report

    long = "b" * 237
    row = {"collaborative": 0.5, "gain": 0.1}
    prot = {"participants": [row, row], "history": [0.4, 0.5]}
    report = {"scenario": "demo", "participants": 2, "evaluate_on": "global", "protocols": {long: prot}}
    shown: dict[str, list[str]] = {}
    save = learning_report.save_figure

    def keep(fig: Any, path: Path, files: list[str] | None = None) -> None:
        ax = fig.axes[0]
        shown[path.name] = [t.get_text() for t in ax.get_xticklabels()] + ax.get_legend_handles_labels()[1]
        save(fig, path, files)

    with warnings.catch_warnings():
        warnings.simplefilter("error")
        with pytest.MonkeyPatch.context() as patch:
            patch.setattr(learning_report, "save_figure", keep)
            learning_report._plots(report, tmp_path)
    cut = "b" * 39 + "\u2026"
    assert shown["scores.png"][0] == shown["gains.png"][0] == cut
    assert cut in shown["curves.png"] and long not in shown["curves.png"]
    assert learning_report.shown_name("a" * 40) == "a" * 40


def test_report_md_says_what_cgs_and_mb_are():
    """report.md called CGS "collaborative fairness", the name docs/learning.md gives CF (the
    correlation of standalone and collaborative scores), while the column is the spread of the
    gains; and "MB: megabytes sent" for a total that counts the server's messages too."""
    from abm.learning.report import markdown

    row = {"mean_score": 0.5, "mcg": 0.1, "cgs": 0.05, "min_gain": 0.0, "bytes_total": 2_000_000, "epsilon": None}
    report = {
        "scenario": "s",
        "participants": 2,
        "evaluate_on": "own",
        "test_sizes": [40, 40],
        "protocols": {"fedavg": row, "small": {**row, "bytes_total": 3_200}, "none": {**row, "bytes_total": 0}},
    }
    md = markdown(report)
    assert "collaborative fairness" not in md
    assert "CGS: collaboration gain spread, the standard deviation of the gains over participants" in md
    assert "sent: the bytes of every message sent, the server's to the participants included (kB: 10^3 bytes" in md
    assert "| fedavg | 0.500 | 0.100 | 0.050 | 0.000 | 2.00 MB |" in md
    # 3,200 bytes read 0.00 in megabytes, as if nothing were sent
    assert "| small | 0.500 | 0.100 | 0.050 | 0.000 | 3.2 kB |" in md
    assert "| none | 0.500 | 0.100 | 0.050 | 0.000 | 0 B |" in md


def test_a_long_label_keeps_the_console_tables_columns(tmp_path):
    """The protocol column was 22 characters wide (18 for private calibration), so a label as long
    as gmm_codream's 'codream_nf_no_collaboration' pushed its row's figures right of the header's."""
    from abm.private_calibration.cli import summary_lines

    label = "fedavg_with_a_rather_long_label"
    f, out = _scenario(tmp_path, protocols=[{"name": "fedavg", "label": label}]), tmp_path / "out"
    res = _cli("learn", str(f), "--out", str(out))
    assert res.exit_code == 0, res.output
    table = [line for line in res.stdout.splitlines() if not line.startswith(("report:", "mean:"))]
    assert table[0].startswith("protocol") and table[-1].startswith(label)
    assert len({len(line) for line in table}) == 1, table

    row = {
        "mean_recovery": 0.5,
        "institutions": [{"recovery": 0.5}],
        "mcg": 0.0,
        "cgs": 0.0,
        "mean_recovery_own": 0.5,
        "mcg_own": 0.0,
        "mean_nd": 1.0,
        "bytes_total": 0,
    }
    lines = summary_lines({"institutions": [{"name": "Seattle"}], "protocols": {"local": row, label: row}})
    assert len({len(line) for line in lines[:3]}) == 1, lines[:3]


def test_the_collaboration_plot_says_what_its_shades_count_and_over_how_many_rounds():
    """The collaboration plot had no colour bar (its shades of grey had no scale) and said "last 10
    rounds" however many rounds ran."""
    import matplotlib.pyplot as plt

    from abm.learning.report import collaboration_figure

    rounds = [[[0, 1, 0], [1, 0, 0], [0, 1, 0]], [[0, 1, 0], [0, 0, 1], [0, 1, 0]], [[0, 0, 1], [1, 0, 0], [1, 0, 0]]]
    fig = collaboration_figure("p2p_greedy", rounds)
    heat, bar = fig.axes
    assert heat.get_title() == "p2p_greedy: times chosen, last 3 rounds"
    assert bar.get_ylabel() == "times chosen"
    assert heat.images[0].get_array().tolist() == [[0, 2, 1], [2, 0, 1], [1, 2, 0]]
    plt.close(fig)
    fig = collaboration_figure("p2p_greedy", rounds * 5)  # 15 rounds: the last 10 are summed
    assert fig.axes[0].get_title() == "p2p_greedy: times chosen, last 10 rounds"
    assert fig.axes[0].images[0].get_array().max() == 7
    plt.close(fig)


def test_the_console_and_report_md_say_the_scores_and_gains_are_fractions(tmp_path):
    """The console table had no units, and report.md only "accuracies", while the benchmarks and the
    CYCle paper give percent and percentage points: an MCG of 0.083 could be read as 0.083 points."""
    f, out = _scenario(tmp_path), tmp_path / "out"
    res = _cli("learn", str(f), "--out", str(out))
    assert res.exit_code == 0, res.output
    assert (
        "mean: accuracy on the global test set (a fraction); MCG, CGS, min gain: gains over local-only in the "
        "same units (0.010 is one percentage point); sent: the bytes of every message (kB: 10^3, MB: 10^6)"
    ) in res.stdout.splitlines()
    md = (out / "report.md").read_text()
    assert "accuracies on the global test set, as fractions (gains too: 0.010 is one percentage point)" in md
    assert "(kB: 10^3 bytes, MB: 10^6)" in md


def test_gains_that_cancel_read_zero_not_minus_zero():
    """Gains that cancel have a mean of about -1e-17 in floating point, which every table (learning's
    and private calibration's console and report.md) printed as -0.000: a loss that is not there.
    The gain columns (MCG, min gain, their own-prior twins) read 0.000 now; a real loss keeps its sign."""
    from abm.learning.report import markdown
    from abm.private_calibration.cli import summary_lines

    noise = (1 / 24 - 1 / 24 * 2 + 1 / 24) / 3 - 1.9e-17
    assert f"{noise:.3f}" == "-0.000"  # what was printed
    row = {"mean_score": 0.5, "mcg": noise, "cgs": 0.05, "min_gain": -0.0004, "bytes_total": 0, "epsilon": None}
    report = {"scenario": "s", "participants": 2, "evaluate_on": "own", "test_sizes": [40, 40]}
    assert "| fedavg | 0.500 | 0.000 | 0.050 | 0.000 | 0 B |" in markdown({**report, "protocols": {"fedavg": row}})
    lost = {**row, "mcg": -0.0126}
    assert "| fedavg | 0.500 | -0.013 | 0.050 | 0.000 | 0 B |" in markdown({**report, "protocols": {"fedavg": lost}})
    calibration = {
        "mean_recovery": 0.5,
        "institutions": [{"recovery": 0.5}],
        "mcg": noise,
        "cgs": 0.0,
        "mean_recovery_own": 0.5,
        "mcg_own": noise,
        "mean_nd": 0.3,
        "bytes_total": 0,
    }
    line = summary_lines({"institutions": [{"name": "A"}], "protocols": {"fedavg": calibration}})[1]
    assert line.split() == ["fedavg", "0.500", "0.500", "+0.000", "0.000", "0.500", "+0.000", "0.30", "0", "B"]


def test_docs_learning_md_names_every_key_of_report_json(tmp_path):
    """docs/learning.md described report.json in prose and named few of its keys (not `plots`,
    `flower_requests`, a protocol's `mean_score`, `bytes_by_kind` or `history`, a participant's
    `kinds_sent`, the privacy settings' keys): its table of keys now names, in backticks, every key
    of the report, of a protocol's entry, of a participant's and of the privacy settings (the
    protocols' own `params` and `summary` are described with each protocol), and every key the
    table names is written (`flower_requests` by the Flower runners only); so are its plot files."""
    dp = {"secure_aggregation": True, "dp": {"clip": 1.0, "noise_multiplier": 1.0, "delta": 1.0e-5}}
    toy = {"users_per_domain": 2, "domains": 2, "rounds": 2, "policies": ["random"]}
    protocols = [{"name": "fedavg", "privacy": dp}, {"name": "mapl"}, {"name": "cycle"}, {"name": "p2p_selection"}]
    f = _scenario(tmp_path, protocols=protocols, selection_toy=toy)
    res = _cli("learn", str(f), "--out", str(tmp_path / "out"))
    assert res.exit_code == 0, res.output
    report = json.loads((tmp_path / "out" / "report.json").read_text())
    entry = report["protocols"]["fedavg"]
    keys = (
        set(report) | set(entry) | set(entry["participants"][0]) | set(entry["privacy"]) | set(entry["privacy"]["dp"])
    )
    doc = (Path(__file__).resolve().parents[2] / "docs" / "learning.md").read_text()
    table = doc[doc.index("`report.json`'s keys, by name") : doc.index("Reading the collaboration record")]
    assert sorted(k for k in keys if f"`{k}`" not in table) == []
    firsts = [line.split(" | ")[0] for line in table.splitlines() if line.startswith("| `")]
    participant = next(line for line in table.splitlines() if line.startswith("| `participants` | one entry"))
    listed = {n for cell in [*firsts, participant] for n in re.findall(r"`(\w+)`", cell)}
    assert sorted(listed - keys - {"flower_requests"}) == []
    # and the plot files, a protocol's by its label (the MAPL graph and CYCle reputations were not named)
    plots = {re.sub(f"^({'|'.join(report['protocols'])})_", "<label>_", name) for name in report["plots"]}
    assert sorted(name for name in plots if f"`{name}`" not in doc) == []
