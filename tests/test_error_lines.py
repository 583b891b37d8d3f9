"""Failures that used to end in a traceback, an abort or a long silent wait, each one
`error:` line with exit status 2 and nothing left behind: a full disk under `sample`,
`augment geca`, `lm train` and `export` (a real tmpfs of 64 KiB, filled), a CSL grammar
whose rules all hold a nonterminal, an unreachable `--ray` head."""

import os
import subprocess
import time
from pathlib import Path

import pytest
from cli_subprocess import compgen, one_error_line

ROOT = Path(__file__).resolve().parents[1]
SHIPPED = ROOT / "exported" / "scan-jump-recomb2"
NO_SPACE = "no space left on the device"


@pytest.fixture
def full_disk(tmp_path):
    """A 64 KiB tmpfs filled to the last byte (mounting needs root or CAP_SYS_ADMIN)."""
    mount = tmp_path / "full"
    mount.mkdir()
    done = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=64k", "tmpfs", str(mount)],
                          capture_output=True, check=False)
    if done.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here: {done.stderr.decode().strip()}")
    try:
        with open(mount / "filler", "wb", buffering=0) as filler:
            try:
                while True:
                    filler.write(b"\0" * 4096)
            except OSError:
                pass
        yield mount
    finally:
        subprocess.run(["umount", str(mount)], check=False)


@pytest.fixture(scope="module")
def tiny_generator(tmp_path_factory):
    import torch

    from compgen.data import Vocab, load_dataset
    from compgen.training.checkpoint import build_recombine, load_preset, save_checkpoint

    table = load_dataset("scan/jump")
    config = load_preset("recombine_scan_cpu")
    config["data"] = "scan/jump"
    config["model"].update(hidden=16, embed=8, attdim=8)
    vocab = Vocab.from_table(table)
    torch.manual_seed(0)
    model = build_recombine(config, len(vocab))
    path = tmp_path_factory.mktemp("generator") / "g.pt"
    save_checkpoint(path, model, config, vocab, "recombine", torch.optim.Adam(model.parameters()),
                    train_state={"step": 1, "epoch": 0, "batch": 1, "done": False, "curve": []})
    return path


def test_a_full_disk_is_one_error_line_in_every_writer(full_disk, tiny_generator, data_dir):
    for args in (["sample", SHIPPED, "--n", "5", "-o", full_disk / "s.tsv"],
                 ["augment", "geca", "scan/jump", "--n-sample", "5", "-o", full_disk / "g.tsv"],
                 ["lm", "train", "lm/kin", "--order", "3", "-o", full_disk / "m.arpa"],
                 ["export", tiny_generator, "--no-cpp", "-o", full_disk / "exp"]):
        one_error_line(compgen(*args), NO_SPACE)
        assert sorted(os.listdir(full_disk)) == ["filler"], args


def test_a_grammar_of_nonterminal_rules_only_is_refused(tmp_path, data_dir):
    grammar = tmp_path / "nt.grammar"
    grammar.write_text("NT_1 and NT_2 ### NT_1 NT_2\nNT_1 twice ### NT_1 NT_1\n")
    for extra in (["--uniform"], []):
        proc = compgen("augment", "csl", "scan/jump", "--grammar", grammar, *extra, "--n", "10",
                       "-o", tmp_path / "out.tsv")
        one_error_line(proc, "nonterminal", "no derivation can end")
    assert sorted(os.listdir(tmp_path)) == ["nt.grammar"]


def test_csl_refuses_a_pair_too_long_for_its_chart_before_any_work(tmp_path):
    from compgen.augment.csl.run import MAX_TOKENS, check_lengths

    words = ["walk", "jump", "look", "run"]
    data = tmp_path / "long.tsv"
    data.write_text("".join(" ".join(words[(i + j) % 4] for j in range(3000)) + "\t"
                            + " ".join(["I_WALK"] * 3000) + "\n" for i in range(3)))
    start = time.perf_counter()
    proc = compgen("augment", "csl", data, "--n", "10", "-o", tmp_path / "out.tsv")
    one_error_line(proc, f"{data}: training example 1", "3,000 input tokens", str(MAX_TOKENS))
    assert time.perf_counter() - start < 30      # induction alone would take many minutes
    assert sorted(os.listdir(tmp_path)) == ["long.tsv"]
    check_lengths([(["a"] * MAX_TOKENS, ["A"] * MAX_TOKENS)], "training")   # the limit is kept


@pytest.mark.parametrize("address,needle", [("nohost.invalid:6379", "unknown host"),
                                            ("127.0.0.1:1", "cannot connect")])
def test_an_unreachable_ray_head_is_one_error_line_within_seconds(address, needle, tmp_path):
    pytest.importorskip("ray")
    start = time.perf_counter()
    proc = compgen("sample", SHIPPED, "--n", "2", "--ray", address, "-o", tmp_path / "s.tsv")
    one_error_line(proc, f"--ray {address}", needle)
    assert time.perf_counter() - start < 60   # Ray alone retries for minutes
    assert not any(tmp_path.iterdir())


@pytest.fixture
def http_server():
    """A real TCP server on this machine that answers as a web server, not as Ray."""
    import socket
    import threading

    server = socket.create_server(("127.0.0.1", 0))

    def answer():
        while True:
            try:
                client, _ = server.accept()
            except OSError:
                return
            with client:
                client.recv(1024)
                client.sendall(b"HTTP/1.1 400 Bad Request\r\nContent-Length: 0\r\n\r\n")

    threading.Thread(target=answer, daemon=True).start()
    yield f"127.0.0.1:{server.getsockname()[1]}"
    server.close()


def test_a_server_that_is_no_ray_head_is_one_error_line_within_seconds(http_server, tmp_path):
    pytest.importorskip("ray")
    start = time.perf_counter()
    proc = compgen("sample", SHIPPED, "--n", "2", "--ray", http_server, "-o", tmp_path / "s.tsv")
    one_error_line(proc, f"--ray {http_server}", "not as a Ray head")
    assert time.perf_counter() - start < 20   # Ray alone retries such a server for ~30 s
    assert not any(tmp_path.iterdir())


def test_a_running_ray_head_passes_the_check():
    ray = pytest.importorskip("ray")
    from compgen.system.ray_cluster import check_reachable

    context = ray.init(num_cpus=1, include_dashboard=False, configure_logging=False)
    try:
        check_reachable(context.address_info["gcs_address"])   # raises on a refusal
    finally:
        ray.shutdown()
