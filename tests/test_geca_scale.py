"""GECA at corpus scale: extraction and realisation by example ranges (shards) and the
candidate joins in partitions (spilled to Parquet under a memory budget, or as Ray tasks)
give the in-memory output; the spill folder is removed on success, on error and on
SIGTERM; option errors."""

import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from compgen.augment.geca import (
    Execution,
    GecaConfig,
    augment_file,
    geca_augment,
    load_training,
    make_config,
    parse_memory_budget,
)
from compgen.augment.geca.partitions import SPILL_PREFIX, machine_ram_bytes, spill_folder
from compgen.cli.common import flag_of
from compgen.data.table import make_table
from compgen.errors import SettingError

ROOT = Path(__file__).resolve().parents[1]
WORDS = ["the", "a", "cat", "dog", "sang", "ran", "wug", "dax"]


def _rows(result):
    return list(zip(result.table["x"].to_list(), result.table["y"].to_list())), \
        result.templates, result.fragments


def _spills(folder: Path):
    return sorted(p.name for p in folder.iterdir() if p.name.startswith(SPILL_PREFIX))


corpora = st.lists(st.lists(st.sampled_from(WORDS), min_size=2, max_size=6),
                   min_size=8, max_size=40)
options = st.fixed_dictionaries({
    "wug_size": st.integers(1, 2), "wug_count": st.integers(1, 3),
    "template_sim": st.sampled_from(["none", "window"]), "sim_window_size": st.integers(0, 2),
    "variants": st.sampled_from([None, 1, 2]), "n_sample": st.sampled_from([None, 1, 5, 20]),
    "seed": st.integers(0, 3),
    "wug_limit": st.sampled_from([None, None, 3]),
})


@settings(max_examples=120, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(corpus=corpora, opts=options, parts=st.integers(1, 9), shards=st.integers(1, 7),
       conditional=st.booleans())
def test_partitioned_equals_in_memory_on_random_corpora(tmp_path, corpus, opts, parts, shards,
                                                        conditional):
    if conditional:       # input = the first two words, output = the rest
        table = make_table([s[:2] for s in corpus], [s[2:] or ["end"] for s in corpus], "train")
    else:                 # language modelling
        table = make_table([[] for _ in corpus], corpus, "train")
    cfg = GecaConfig(**opts, output_only=not conditional)
    whole = geca_augment(table, cfg, execution=Execution())
    split = geca_augment(table, cfg, execution=Execution(partitions=parts, shards=shards,
                                                         spill_dir=tmp_path))
    assert _rows(split) == _rows(whole)
    counts = ("instances", "templates", "fragments", "active_templates", "active_fragments",
              "template_fragment_pairs", "kept_ngrams", "proposals")
    assert {k: split.stats.get(k) for k in counts} == {k: whole.stats.get(k) for k in counts}
    assert _spills(tmp_path) == []


def test_budgeted_file_is_the_in_memory_file_with_a_sample_cap(tmp_path, data_dir):
    files = {}
    for name, execution in (("memory", Execution()),
                            ("budget", Execution(memory_budget=64 << 20)),
                            ("parts", Execution(partitions=13)),
                            ("shards", Execution(shards=6, partitions=3))):
        out = tmp_path / f"{name}.tsv"
        result = augment_file("lm/tok", out, make_config("lm", {"seed": 1, "n_sample": 300}),
                              execution=execution)
        files[name] = out.read_bytes()
        assert result.stats["synthesized"] == 300
        if name == "parts":
            assert result.stats["partitions"] == 13
        if name in ("budget", "shards"):   # the budget splits extraction too
            assert result.stats["shards"] > 1
    assert files["memory"] == files["budget"] == files["parts"] == files["shards"]
    assert _spills(tmp_path) == []


def test_spill_folder_removed_when_a_partition_fails(tmp_path, data_dir):
    seen = []

    def progress(msg):
        if "partition" in msg:
            seen.extend(_spills(tmp_path))
            raise RuntimeError("stopped by the caller")

    with pytest.raises(RuntimeError, match="stopped by the caller"):
        geca_augment(load_training("lm/tok"), make_config("lm", {}), progress=progress,
                     execution=Execution(partitions=20, spill_dir=tmp_path))
    assert len(seen) == 1                 # it existed while the partitions ran ...
    assert _spills(tmp_path) == []        # ... and is gone


def test_spill_folder_removed_when_extraction_fails(tmp_path, data_dir):
    seen = []

    def progress(msg):
        if "extraction: shard 2" in msg:
            seen.extend(p.name for p in next(tmp_path.glob(f"{SPILL_PREFIX}*")).iterdir())
            raise RuntimeError("stopped by the caller")

    with pytest.raises(RuntimeError, match="stopped by the caller"):
        geca_augment(load_training("lm/tok"), make_config("lm", {}), progress=progress,
                     execution=Execution(shards=4, spill_dir=tmp_path))
    assert "inst-1.parquet" in seen and "grams-3.parquet" in seen   # shards were spilled ...
    assert _spills(tmp_path) == []                                   # ... and are gone


def test_spill_folder_removed_on_error_and_ctrl_c(tmp_path):
    for exc in (ValueError, KeyboardInterrupt):
        with pytest.raises(exc), spill_folder(tmp_path) as folder:
            (folder / "part-0.parquet").write_bytes(b"x")
            raise exc()
        assert _spills(tmp_path) == []


def test_spill_folder_removed_on_sigterm(tmp_path, data_dir):
    load_training("lm/tok")   # here first: without the corpus the test is skipped, not failed
    child = textwrap.dedent(f"""
        import time
        from compgen.augment.geca import Execution, geca_augment, load_training, make_config
        def progress(msg):
            if "partition" in msg:
                print("spilled", flush=True)
                time.sleep(60)
        geca_augment(load_training("lm/tok"), make_config("lm", {{}}), progress=progress,
                     execution=Execution(partitions=20, spill_dir={str(tmp_path)!r}))
    """)
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")]),
           "COMPGEN_TEST_DATA": str(data_dir), "COMPGEN_DATA": str(data_dir)}
    proc = subprocess.Popen([sys.executable, "-c", child], stdout=subprocess.PIPE, text=True, env=env)
    try:
        assert proc.stdout.readline().strip() == "spilled"
        assert len(_spills(tmp_path)) == 1
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(timeout=60) == 143
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert _spills(tmp_path) == []


def test_ray_local_two_workers_same_output_as_one_process(tmp_path, data_dir):
    pytest.importorskip("ray", reason="the ray extra is not installed (pip install 'compgen[ray]')")
    cfg = make_config("lm", {"seed": 2, "n_sample": None})
    table = load_training("lm/tok")
    one = geca_augment(table, cfg)
    ray = geca_augment(table, cfg, execution=Execution(ray="local", ray_workers=2))
    assert ray.stats["partitions"] >= 2
    assert _rows(ray) == _rows(one) and one.table.height > 100


def test_parse_memory_budget():
    assert parse_memory_budget("4G") == 4 << 30
    assert parse_memory_budget("512m") == 512 << 20
    assert parse_memory_budget("1.5GiB") == int(1.5 * (1 << 30))
    assert parse_memory_budget("100000000") == 100_000_000
    assert parse_memory_budget("none") is None
    total = machine_ram_bytes()
    assert 0 < parse_memory_budget(None) < total
    for bad in ("4X", "-1G", "", "G", "1k"):
        with pytest.raises(SettingError, match="^memory_budget ") as refused:
            parse_memory_budget(bad)
        assert refused.value.text(flag_of).startswith("--memory-budget ")


def test_cli_bad_budget_or_ray_address_is_one_error_line_exit_2(tmp_path):
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")])}
    cases = [(["--memory-budget", "lots"], "--memory-budget"),
             (["--memory-budget", "10k"], "--memory-budget"),
             (["--ray", "nohost"], "--ray"),
             (["--ray", "127.0.0.1:9"], "--ray 127.0.0.1:9")]
    for args, needle in cases:
        out = tmp_path / "o.tsv"
        tic = time.perf_counter()
        proc = subprocess.run([sys.executable, "-m", "compgen", "augment", "geca", "lm/tok",
                               "--preset", "lm", *args, "-o", str(out)],
                              check=False, capture_output=True, text=True, timeout=120, env=env)
        assert proc.returncode == 2, proc.stderr
        lines = proc.stderr.strip().splitlines()
        assert len(lines) == 1 and lines[0].startswith("error:") and needle in lines[0]
        assert not out.exists()
        assert time.perf_counter() - tic < 60
