"""The experiment driver: a tiny SCAN jump recomb-2 pipeline end to end (generator ->
samples -> predictor -> metrics -> results table), resuming, and the run catalogue."""

import dataclasses
import json

import polars as pl
import pytest
from typer.main import get_command
from typer.testing import CliRunner

from compgen.cli import app
from compgen.cli.common import flag_of, flags_in
from compgen.cli.pipeline import parse_seeds
from compgen.errors import SettingError, UserError
from compgen.io import read_samples_tsv
from compgen.pipelines.runs import RUNS, PipelineOptions, find_run, run_pipeline

TINY_GENERATOR = """kind = "recombine"
[model]
variant = "scan"
nproto = 2
copy = true
hidden = 32
embed = 16
attdim = 16
kpos = 4
pdrop = 0.0
outdrop = 0.0
writedrop = 0.0
[train]
batch_size = 64
lr = 0.01
epochs = 1
[sample]
strategy = "beam"
batch_size = 64
n = 20
nsamples = 20
novel = true
"""

TINY_PREDICTOR = """kind = "seq2seq"
[model]
hidden = 32
embed = 16
pdrop = 0.0
[train]
batch_size = 256
lr = 0.01
epochs = 1
patience = 0
"""


@pytest.fixture(scope="module")
def tiny_run(tmp_path_factory, data_dir):
    root = tmp_path_factory.mktemp("pipeline")
    (root / "gen.toml").write_text(TINY_GENERATOR)
    (root / "pred.toml").write_text(TINY_PREDICTOR)
    lines = []
    opts = PipelineOptions(root=root / "runs", data_dir=data_dir,
                           generator_preset=str(root / "gen.toml"),
                           predictor_preset=str(root / "pred.toml"), generator_steps=30,
                           threads=1, log=lines.append)
    rows = run_pipeline("jump-recomb2", [0], opts)
    return root, opts, rows, lines


def test_tiny_pipeline_runs_every_step(tiny_run):
    root, _, rows, _ = tiny_run
    folder = root / "runs" / "jump-recomb2" / "seed0"
    for name in ("generator.pt", "samples.tsv", "predictor.pt", "metrics.csv", "timing.json"):
        assert (folder / name).is_file(), name
    samples = read_samples_tsv(folder / "samples.tsv")
    assert 0 < len(samples) <= 20
    # resampling: every kept sample contains the rare word
    assert all("jump" in x for x, _ in samples)
    timing = json.loads((folder / "timing.json").read_text())
    assert set(timing) == {"generator", "sample", "predictor", "evaluate"}
    (row,) = rows
    assert row["set"] == "test" and row["n"] == 7706 and row["label"] == "+ recomb-2"
    assert 0.0 <= row["exact_match"] <= 1.0 and 0.0 < row["f1"] <= 1.0
    results = pl.read_csv(root / "runs" / "results.csv")
    assert results.filter(pl.col("run") == "jump-recomb2").height == 1
    assert "+ recomb-2" in (root / "runs" / "results.md").read_text()


def test_pipeline_resumes_without_redoing_steps(tiny_run):
    root, opts, rows, _ = tiny_run
    folder = root / "runs" / "jump-recomb2" / "seed0"
    stamps = {p.name: p.stat().st_mtime_ns for p in folder.iterdir()}
    again = run_pipeline("jump-recomb2", [0], opts)
    assert again == rows
    assert {p.name: p.stat().st_mtime_ns for p in folder.iterdir()} == stamps
    # merging the same (run, seed) again replaces its rows instead of appending
    assert pl.read_csv(root / "runs" / "results.csv").height == 1


def test_training_the_generator_on_drops_its_stale_outputs(tiny_run, tmp_path):
    import dataclasses
    import shutil

    from compgen.pipelines.runs import Timer, make_generator
    from compgen.training.checkpoint import load_checkpoint

    root, opts, _, _ = tiny_run
    folder = tmp_path / "jump-recomb2" / "seed0"
    shutil.copytree(root / "runs" / "jump-recomb2" / "seed0", folder)
    longer = dataclasses.replace(opts, root=tmp_path, generator_steps=35)
    timer = Timer(folder / "timing.json")
    make_generator(find_run("jump-recomb2"), 0, folder, longer, timer)
    assert load_checkpoint(folder / "generator.pt").train_state["step"] == 35
    for name in ("samples.tsv", "predictor.pt", "metrics.csv"):
        assert not (folder / name).exists(), name
    assert set(json.loads((folder / "timing.json").read_text())) == {"generator"}


def test_another_p_aug_retrains_only_the_predictor(tiny_run, tmp_path):
    import dataclasses
    import shutil

    from compgen.training.predictor import load_predictor

    root, opts, _, _ = tiny_run
    folder = tmp_path / "jump-recomb2" / "seed0"
    shutil.copytree(root / "runs" / "jump-recomb2" / "seed0", folder)
    kept = {name: (folder / name).stat().st_mtime_ns for name in ("generator.pt", "samples.tsv")}
    assert load_predictor(folder / "predictor.pt")[2]["p_aug"] == 0.01
    mixed_more = dataclasses.replace(opts, root=tmp_path, p_aug=0.3)
    (row,) = run_pipeline("jump-recomb2", [0], mixed_more)
    assert load_predictor(folder / "predictor.pt")[2]["p_aug"] == 0.3
    assert {name: (folder / name).stat().st_mtime_ns for name in kept} == kept
    assert set(json.loads((folder / "timing.json").read_text())) == {
        "generator", "sample", "predictor", "evaluate"}
    assert row["n"] == 7706
    # the same value again: nothing is retrained
    stamp = (folder / "predictor.pt").stat().st_mtime_ns
    run_pipeline("jump-recomb2", [0], mixed_more)
    assert (folder / "predictor.pt").stat().st_mtime_ns == stamp


def tiny_generator(run, preset: str, tmp_path, data_dir, name: str):
    """(pipeline options with the tiny ``preset``, the path of its generator trained 30
    updates for ``run``'s seed 0 in ``tmp_path / name``)."""
    from compgen.pipelines.runs import Timer, make_generator

    (tmp_path / "gen.toml").write_text(preset)
    opts = PipelineOptions(root=tmp_path, data_dir=data_dir, generator_preset=str(tmp_path / "gen.toml"),
                           generator_steps=30, threads=1, log=lambda line: None)
    (tmp_path / name).mkdir()
    return opts, make_generator(run, 0, tmp_path / name, opts, Timer(tmp_path / name / "timing.json"))


def test_sampling_options_reach_the_sampler(tmp_path, data_dir):
    """A generator with decoder dropout kept on while sampling (the scan presets) samples
    other data once --no-test-dropout switches it off; the same seed otherwise. --n with
    --nsamples keeps the n most probable of nsamples accepted candidates; --max-rounds
    bounds the batches decoded."""
    import dataclasses

    from compgen.pipelines.runs import Timer, make_samples

    run = find_run("jump-recomb2")
    opts, generator = tiny_generator(
        run, TINY_GENERATOR.replace("outdrop = 0.0", "outdrop = 0.5\noutdrop_test = true"),
        tmp_path, data_dir, "with-dropout")
    samples = {}
    for name, test_dropout in (("with-dropout", None), ("without-dropout", False)):
        (tmp_path / name).mkdir(exist_ok=True)
        path = make_samples(run, 0, generator, tmp_path / name,
                            dataclasses.replace(opts, test_dropout=test_dropout),
                            Timer(tmp_path / name / "timing.json"))
        samples[name] = read_samples_tsv(path)
        assert samples[name] and all("jump" in x for x, _ in samples[name])
    assert samples["with-dropout"] != samples["without-dropout"]
    # --nsamples: the 5 most probable of the same 15 accepted candidates (files are sorted
    # most probable first), not the 5 first accepted
    kept = {}
    for name, n, nsamples in (("all15", 15, 15), ("best5", 5, 15), ("first5", 5, None)):
        (tmp_path / name).mkdir()
        path = make_samples(run, 0, generator, tmp_path / name,
                            dataclasses.replace(opts, samples=n, nsamples=nsamples),
                            Timer(tmp_path / name / "timing.json"))
        kept[name] = read_samples_tsv(path)
    assert len(kept["all15"]) == 15
    assert kept["best5"] == kept["all15"][:5] != kept["first5"]
    # --max-rounds: the sampler gives up after that many batches, short of --nsamples
    lines = []
    (tmp_path / "two-rounds").mkdir()
    try:
        make_samples(run, 0, generator, tmp_path / "two-rounds",
                     dataclasses.replace(opts, samples=1000, max_rounds=2, log=lines.append),
                     Timer(tmp_path / "two-rounds" / "timing.json"))
    except UserError as error:  # two rounds of a 30-update generator may accept nothing
        assert "no sample that passes the filter" in str(error)
    assert any("of the 1000 samples asked for" in line or "filter in 2 rounds" in line
               for line in lines), lines
    # --fixed-temperature: the sampler keeps the run's strategy and temperature when stalled
    # and names --raise-temperature as the way out; by default it names only --max-rounds
    for name, raise_temperature in (("fixed", False), ("raised", None)):
        lines = []
        (tmp_path / name).mkdir()
        try:
            make_samples(run, 0, generator, tmp_path / name,
                         dataclasses.replace(opts, samples=1000, max_rounds=6, log=lines.append,
                                             raise_temperature=raise_temperature),
                         Timer(tmp_path / name / "timing.json"))
        except UserError:
            pass
        shortfall = [line for line in lines if "`max_rounds` (now 6)" in line]
        assert len(shortfall) == 1, lines
        assert ("`raise_temperature`" in shortfall[0]) == (raise_temperature is False)
        if raise_temperature is False:
            assert not any("no new samples" in line for line in lines), lines
    with pytest.raises(UserError, match="nsamples 3 must be >= n 5"):
        make_samples(run, 0, generator, tmp_path / "selective-too-few",
                     dataclasses.replace(opts, samples=5, nsamples=3),
                     Timer(tmp_path / "timing-too-few.json"))
    result = CliRunner().invoke(app, ["pipeline", "jump-recomb2", "--backend", "onnx",
                                      "--test-dropout", "--root", str(tmp_path / "cli")])
    assert result.exit_code != 0
    assert "exported graphs sample without dropout" in str(result.exception)
    # --rare-prototypes: Omega keeps the tuples whose prototypes contain 'jump'
    from compgen.data import load_dataset
    from compgen.neighborhoods.omega_source import prototype_source
    from compgen.training.checkpoint import load_generator

    config = load_generator(generator)[2]
    table = load_dataset(config["data"], data_dir)
    covering = prototype_source(config, table, 2, 0, "rare", None, rare_prototypes=True)(300)
    assert all("jump" in first + second for first, second in covering)
    everything = prototype_source(config, table, 2, 0, "rare", None)(300)
    assert any("jump" not in first + second for first, second in everything)
    with pytest.raises(UserError, match="rare_prototypes: needs resample rare"):
        prototype_source(config, table, 2, 0, "none", None, rare_prototypes=True)
    # --prototype-cut mean+std: Omega also draws prototypes longer than the mean cut
    at_mean = prototype_source(config, table, 2, 0)(2000)
    at_mean_std = prototype_source(config, table, 2, 0, prototype_cut="mean+std")(2000)
    longest = max(len(first) for first, _ in at_mean)
    assert max(len(first) for first, _ in at_mean_std) > longest
    uncut = prototype_source(config, table, 2, 0, prototype_cut="none")(2000)
    assert (max(len(first) for first, _ in uncut)
            > max(len(first) for first, _ in at_mean_std))
    with pytest.raises(UserError, match="prototype_cut: only SCAN generators with prototypes"):
        prototype_source(config, table, 0, 0, prototype_cut="mean+std")
    with pytest.raises(UserError, match="prototype_cut median: unknown"):
        make_samples(run, 0, generator, tmp_path / "median-cut",
                     dataclasses.replace(opts, prototype_cut="median"),
                     Timer(tmp_path / "timing-median.json"))
    (tmp_path / "rare-prototypes").mkdir()
    path = make_samples(run, 0, generator, tmp_path / "rare-prototypes",
                        dataclasses.replace(opts, samples=5, rare_prototypes=True),
                        Timer(tmp_path / "rare-prototypes" / "timing.json"))
    assert all("jump" in x for x, _ in read_samples_tsv(path))
    for argv in (["pipeline", "jump-baseline", "--rare-prototypes"],
                 ["pipeline", "jump-geca", "--prototype-cut", "mean+std"]):
        result = CliRunner().invoke(app, [*argv, "--root", str(tmp_path / "cli")])
        option = argv[-2] if argv[-1] == "mean+std" else argv[-1]
        # the library's error names the setting; the command line prints it as the option
        assert result.exit_code != 0 and isinstance(result.exception, SettingError)
        assert option in flags_in(result.exception, get_command(app))


def test_no_accepted_sample_stops_at_the_sample_step(tmp_path, data_dir, monkeypatch):
    """A generator that makes nothing the filter accepts: one error at the sample step, and
    no empty samples.tsv left behind for a rerun to train the predictor on."""
    import compgen.sampling.eager
    from compgen.pipelines.runs import Timer, make_samples
    from compgen.sampling.eager import SampleRun

    def sample_nothing(checkpoint, n=None, *, out=None, **options):
        out.write_text("#x\ty\tlogprob\n")
        return SampleRun([], 0.0, str(out))

    monkeypatch.setattr(compgen.sampling.eager, "sample_checkpoint", sample_nothing)
    opts = PipelineOptions(root=tmp_path, data_dir=data_dir, threads=1, log=lambda line: None)
    with pytest.raises(UserError, match="no sample that passes the filter"):
        make_samples(find_run("around_right-recomb2"), 0, tmp_path / "generator.pt", tmp_path,
                     opts, Timer(tmp_path / "timing.json"))
    assert not (tmp_path / "samples.tsv").exists()


def test_run_catalogue_covers_the_papers_rows():
    for split in ("jump", "around_right"):
        for row in ("baseline", "geca", "basic", "basic-resample", "recomb1", "recomb2",
                    "recomb2-vae", "recomb2-nocopy", "direct"):
            assert f"{split}-{row}" in RUNS
    for lang in ("spanish", "swahili", "turkish"):
        for hints in (4, 8, 16):
            assert f"{lang}-h{hints}-recomb1" in RUNS
    run = find_run("swahili-h8-recomb1")
    assert run.data_for(3) == "sigmorphon/swahili/hints-8.3"
    assert run.table_data == "sigmorphon/swahili/hints-8"
    assert run.sample["resample"] == "rare"
    assert find_run("jump-recomb2").p_aug == 0.01  # the reference's jump mixing
    # samples kept: around_right 300 of 500 (reference), jump the presets' 400 of 500
    assert {find_run(f"around_right-{row}").sample["n"] for row in ("basic", "recomb1", "recomb2",
                                                                     "recomb2-noresample")} == {300}
    assert "n" not in find_run("jump-recomb2").sample
    # the reference's samplers (rr-spec §5.2): (strategy, temperature) per SCAN row
    samplers = {"jump-basic": ("mixed", 0.5), "jump-recomb1": ("mixed", 0.4),
                "jump-recomb2": ("beam", None), "jump-recomb2-vae": ("beam", None),
                "around_right-basic": ("mixed", 0.5), "around_right-recomb1": ("mixed", 0.5),
                "around_right-recomb2": ("mixed", 0.2), "around_right-recomb2-vae": ("mixed", 0.2),
                "around_right-recomb2-noresample": ("mixed", 0.2)}
    assert {name: (RUNS[name].sample["strategy"], RUNS[name].sample.get("temperature"))
            for name in samplers} == samplers
    from compgen.training.checkpoint import load_preset
    assert load_preset("recombine_scan_around_right")["sample"]["strategy"] == "mixed"
    with pytest.raises(UserError, match="unknown run"):
        find_run("jump-recomb3")


def test_seed_parsing_and_cli_errors():
    assert parse_seeds("0-4") == [0, 1, 2, 3, 4]
    assert parse_seeds("2,5") == [2, 5]
    with pytest.raises(UserError):
        parse_seeds("a")
    result = CliRunner().invoke(app, ["pipeline", "jump-nope"])
    assert result.exit_code != 0
    assert isinstance(result.exception, UserError)
    result = CliRunner().invoke(app, ["pipeline", "jump-recomb2", "--p-aug", "1.5"])
    assert result.exit_code != 0
    assert "--p-aug must be in [0, 1)" in str(result.exception)
    result = CliRunner().invoke(app, ["pipeline", "jump-recomb2", "--keep-every", "-1"])
    assert "--keep-every must be >= 0" in str(result.exception)


def test_rerun_with_other_settings_names_the_difference(tiny_run, tmp_path):
    """A finished run asked again with another predictor preset, --n or generator preset
    stops with one line naming the option, instead of printing the old metrics."""
    import dataclasses
    import shutil

    root, opts, _, _ = tiny_run
    folder = tmp_path / "jump-recomb2" / "seed0"
    shutil.copytree(root / "runs" / "jump-recomb2" / "seed0", folder)
    (tmp_path / "pred2.toml").write_text(TINY_PREDICTOR.replace("hidden = 32", "hidden = 48"))
    (tmp_path / "gen2.toml").write_text(TINY_GENERATOR.replace("hidden = 32", "hidden = 48"))
    stamps = {p.name: p.stat().st_mtime_ns for p in folder.iterdir()}
    changes = {"predictor_config": {"predictor_preset": str(tmp_path / "pred2.toml")},
               "n": {"samples": 7},
               "generator_config": {"generator_preset": str(tmp_path / "gen2.toml")}}
    for setting, change in changes.items():
        other = dataclasses.replace(opts, root=tmp_path, **change)
        with pytest.raises(SettingError, match=rf"\({setting} .* -> ") as excinfo:
            run_pipeline("jump-recomb2", [0], other)
        assert "\n" not in str(excinfo.value)
        assert f"({flag_of(setting)} " in excinfo.value.text(flag_of)
    assert {p.name: p.stat().st_mtime_ns for p in folder.iterdir()} == stamps
    for name in ("generator.pt", "samples.tsv", "predictor.pt", "metrics.csv"):
        assert (folder / f"{name}.settings.json").is_file(), name


def test_csl_rows_use_their_predictor_preset():
    from compgen.pipelines.runs import presets

    for split in ("length", "jump", "around_right"):
        for row in ("csl", "csl-uniform"):
            run = find_run(f"{split}-{row}")
            assert run.p_aug == 0.5 and run.augment == row
            assert presets(run, "cpu")[1] == "seq2seq_scan_csl_cpu"
            assert presets(run, "reference")[1] == "seq2seq_scan"
    assert presets(find_run("length-baseline"), "cpu")[1] == "seq2seq_scan_csl_cpu"
    assert presets(find_run("jump-baseline"), "cpu")[1] == "seq2seq_scan_cpu"


# the same tiny generator as a SIGMORPHON recomb-1 one (its attention needs attdim == hidden)
TINY_SIG_GENERATOR = (TINY_GENERATOR.split("[sample]")[0]
                      .replace('"scan"', '"sig"').replace("nproto = 2", "nproto = 1")
                      .replace("attdim = 16", "attdim = 32").replace("kpos = 4\n", "")
                      + """[sample]
strategy = "mixed"
temperature = 1.0
batch_size = 64
n = 40
nsamples = 40
novel = false
resample = "rare"
rare = "auto"
""")


def test_sig_rare_tags_reach_the_sampler(tmp_path, data_dir):
    """--rare fixed keeps only samples with PST or FUT (the paper's); the default (the
    reference's code) admits every tag seen 2-20 times in training; a tag the data lack
    is one error before any training."""
    import dataclasses

    from compgen.data import load_dataset
    from compgen.neighborhoods.omega_sig import rare_tags
    from compgen.pipelines.runs import Timer, make_samples
    from compgen.sampling.eager import sample_checkpoint

    run = find_run("swahili-h8-recomb1")
    opts, generator = tiny_generator(run, TINY_SIG_GENERATOR, tmp_path, data_dir, "gen")
    train = load_dataset(run.data_for(0), data_dir).filter(pl.col("split") == "train")
    automatic = set(rare_tags(train))
    assert {"PST", "FUT"} < automatic
    carried = {}
    for name, rare in (("auto", None), ("fixed", "fixed")):
        (tmp_path / name).mkdir()
        path = make_samples(run, 0, generator, tmp_path / name,
                            dataclasses.replace(opts, rare=rare), Timer(tmp_path / name / "t.json"))
        carried[name] = [set(x) & automatic for x, _ in read_samples_tsv(path)]
    assert carried["fixed"] and all(tags & {"PST", "FUT"} for tags in carried["fixed"])
    assert all(carried["auto"]) and any(not tags & {"PST", "FUT"} for tags in carried["auto"])
    with pytest.raises(SettingError, match="^rare PST,XYZ: XYZ is not a tag of sigmorphon/swahili"
                       ) as refused:
        sample_checkpoint(generator, 5, data_dir=data_dir, rare="PST,XYZ", resample="rare")
    assert refused.value.text(flag_of).startswith("--rare PST,XYZ: ")
    for argv, message in ((["swahili-h8-recomb1", "--rare", "XYZ"], "XYZ is not a tag"),
                          (["swahili-h8-baseline", "--rare", "fixed"], "not a SIGMORPHON row"),
                          (["jump-recomb2", "--rare", "fixed"], "not a SIGMORPHON row")):
        result = CliRunner().invoke(app, ["pipeline", *argv, "--root", str(tmp_path / "cli"),
                                          "--data-dir", str(data_dir)])
        assert result.exit_code != 0 and message in str(result.exception), result.output
    assert not (tmp_path / "cli").exists()


REFERENCE_ROWS = ("around_right-recomb2-reference", "around_right-recomb2-noresample")


def test_reference_rows_resolve_to_the_reference_script():
    """The around_right rows of the reference's own script (rr-spec §3.1, §5.2-5.4, §6.2,
    §8): its generator and predictor at every --size, the mixed sampler at a fixed T 0.2
    on the checkpoint with test-time dropout, no rare filter, no round cap, 300 of 500;
    command-line options still win."""
    from compgen.configs.predictor_train import PredictorTrainConfig
    from compgen.decoding.options import NO_ROUND_CAP, SampleOptions
    from compgen.pipelines.runs import presets, resolved_options, sampling_request
    from compgen.training.checkpoint import apply_overrides, load_preset

    for name in REFERENCE_ROWS:
        run = find_run(name)
        assert run.augment == "generator" and run.p_aug == 0.2 and run.task == "scan"
        assert presets(run, "cpu") == presets(run, "reference") == (
            "recombine_scan_around_right", "seq2seq_scan")
        generator = apply_overrides(load_preset(presets(run, "cpu")[0]), run.generator)
        assert generator["model"]["nproto"] == 2 and generator["model"]["copy"]
        assert not generator["model"]["vae"]
        assert (generator["model"]["hidden"], generator["model"]["attdim"]) == (512, 128)
        assert generator["model"]["outdrop_test"] and generator["model"]["outdrop"] == 0.7
        assert {k: generator["train"][k] for k in ("epochs", "batch_size", "lr")} == {
            "epochs": 3, "batch_size": 64, "lr": 0.001}
        predictor = load_preset(presets(run, "cpu")[1])
        assert (predictor["model"]["hidden"], predictor["model"]["pdrop"]) == (512, 0.5)
        train = PredictorTrainConfig.from_dict(predictor["train"])
        assert (train.epochs, train.patience, train.restore_best) == (150, 10, False)
        opts = resolved_options(run, PipelineOptions())
        assert (opts.max_rounds, opts.raise_temperature, opts.test_dropout, opts.backend) == (
            NO_ROUND_CAP, False, True, "torch")
        n, asked = sampling_request(run, opts)
        options = SampleOptions.resolve(generator, n=n, test_dropout=opts.test_dropout, **asked)
        assert (options.strategy, options.temperature, options.resample) == ("mixed", 0.2, "none")
        assert (options.n, options.nsamples, options.batch_size) == (300, 500, 128)
        assert options.max_rounds == NO_ROUND_CAP and not options.raise_temperature
        assert options.test_dropout and options.prototype_cut == "mean"
        assert not options.rare_prototypes
        # departures stay available, off unless asked for
        departed = resolved_options(run, PipelineOptions(max_rounds=1500, raise_temperature=True))
        assert (departed.max_rounds, departed.raise_temperature) == (1500, True)
        assert sampling_request(run, departed)[1]["raise_temperature"] is True
    # the project's rows keep the pipeline's defaults: the sampler's cap, warmer when stalled
    plain = resolved_options(find_run("around_right-recomb2"), PipelineOptions())
    assert plain.max_rounds is None and plain.test_dropout is None
    assert sampling_request(find_run("around_right-recomb2"), plain)[1]["raise_temperature"]
    assert presets(find_run("around_right-recomb2"), "cpu")[0] == "recombine_scan_cpu"
    result = CliRunner().invoke(app, ["pipeline", REFERENCE_ROWS[0], "--max-rounds", "-1"])
    assert result.exit_code != 0 and "max_rounds must be >= 0" in str(result.exception)
    result = CliRunner().invoke(app, ["pipeline", REFERENCE_ROWS[0], "--backend", "onnx"])
    assert result.exit_code != 0 and "no_test_dropout departs" in str(result.exception)


def test_reference_row_samples_until_nsamples_are_accepted(tiny_run, tmp_path, monkeypatch):
    """The reference row's sampling step on a toy generator (the tiny jump one: the step
    samples the checkpoint's own data): no round cap, a fixed T, every novel unique sample
    (no rare filter); it stops in the round that reaches --nsamples accepted and keeps the
    --n most probable."""
    from compgen.pipelines.runs import Timer, make_samples, resolved_options
    from compgen.sampling import collection

    monkeypatch.setattr(collection, "PROGRESS_ROUNDS", 1)  # a line after every round
    root, tiny_opts, _, _ = tiny_run
    generator = root / "runs" / "jump-recomb2" / "seed0" / "generator.pt"
    run = find_run("around_right-recomb2-reference")
    lines = []
    opts = resolved_options(run, dataclasses.replace(tiny_opts, root=tmp_path, samples=12,
                                                     nsamples=150, log=lines.append))
    path = make_samples(run, 0, generator, tmp_path, opts, Timer(tmp_path / "timing.json"))
    samples = read_samples_tsv(path)
    assert len(samples) == 12 and len(set(map(str, samples))) == 12
    assert any("jump" not in x for x, _ in samples)  # no rare filter
    progress = [line for line in lines if line.startswith("sampling: ")]
    counts = [int(line.split()[1]) for line in progress]
    assert len(progress) >= 3 and all(line.endswith("(no cap)") for line in progress), lines
    assert counts[-1] >= 150 > max(counts[:-1], default=0), progress
    assert not any("no new samples" in line or "warning" in line for line in lines), lines
    settings = json.loads((tmp_path / "samples.tsv.settings.json").read_text())
    assert settings["--max-rounds"] == 0 and settings["--raise-temperature"] is False
    assert settings["--test-dropout"] is True
