"""Sampling on a local 2-worker Ray cluster writes the single-process file."""

from pathlib import Path

import pytest

from compgen.errors import UserError
from compgen.sampling.run import sample_export

ray = pytest.importorskip("ray", reason="the ray extra is not installed (pip install 'compgen[ray]')")
from compgen.sampling.ray import ray_decoder_factory

SHIPPED = Path(__file__).resolve().parents[1] / "exported" / "scan-jump-recomb2"


@pytest.fixture(scope="module")
def actors_tmp(tmp_path_factory):
    """The temp folder of the cluster's workers: nothing may be left in it."""
    return tmp_path_factory.mktemp("ray-workers-tmp")


@pytest.fixture(scope="module")
def local_cluster(actors_tmp):
    env = {"PYTHONPATH": str(SHIPPED.parents[1]), "TMPDIR": str(actors_tmp)}
    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False, configure_logging=False,
             runtime_env={"env_vars": env})
    yield
    ray.shutdown()


@pytest.mark.parametrize("strategy", ["greedy", "temperature"])
def test_two_ray_workers_write_the_single_process_file(local_cluster, actors_tmp, tmp_path,
                                                      strategy):
    options = {"backend": "onnx", "strategy": strategy, "nsamples": 50, "batch_size": 16,
               "seed": 3, "threads": 1, "log": lambda m: None}
    one = sample_export(SHIPPED, n=40, out=tmp_path / "one.tsv", **options)
    two = sample_export(SHIPPED, n=40, out=tmp_path / "ray.tsv",
                        decoder_factory=ray_decoder_factory(None, 2, lookahead=3), **options)
    assert len(one.samples) == 40
    assert (tmp_path / "ray.tsv").read_bytes() == (tmp_path / "one.tsv").read_bytes()
    assert [s.logprob for s in two.samples] == [s.logprob for s in one.samples]
    assert not [p.name for p in actors_tmp.iterdir() if p.name.startswith("compgen-")]


def test_the_c_plus_plus_backend_is_not_sharded(local_cluster, tmp_path):
    with pytest.raises(UserError, match="backend cpp is not sharded"):
        sample_export(SHIPPED, n=4, backend="cpp", strategy="greedy", seed=0,
                      decoder_factory=ray_decoder_factory(None, 2), log=lambda m: None)
