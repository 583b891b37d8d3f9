"""The command table (compgen/cli/commands.py): it names every command with its real help,
and listing the commands (help, completion, a mistyped name) imports none of their
modules, nor torch or Polars; running a command imports its own module only."""

import json
import os
import subprocess
import sys
from pathlib import Path

import typer.main

from compgen.cli import app
from compgen.cli.commands import COMMANDS, Command, Group, every_command

ROOT = Path(__file__).resolve().parents[1]
COMMAND_MODULES = {f"compgen.cli.{entry.module}" for group in COMMANDS.values()
                   for entry in (group.commands.values() if isinstance(group, Group) else [group])}
HEAVY = {"torch", "polars", "onnxruntime", "numpy"}


def run_cli(args: list[str], env: dict | None = None):
    """(exit status, stdout, stderr, the modules imported) of ``compgen ARGS`` run in a
    fresh process."""
    code = ("import json, sys\nfrom compgen.cli import main\n"
            f"sys.argv = ['compgen', *{args!r}]\n"
            "try:\n    main()\nexcept SystemExit as exc:\n    status = exc.code\nelse:\n    status = 0\n"
            "print(json.dumps([status, sorted(sys.modules)]), file=sys.stderr)")
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          cwd=ROOT, check=False, timeout=120,
                          env={**os.environ, "PYTHONPATH": str(ROOT), **(env or {})})
    *stderr, last = proc.stderr.splitlines()
    status, modules = json.loads(last)
    return status, proc.stdout, "\n".join(stderr), set(modules)


def leaves(group=None, path=()):
    for name, command in every_command(group or typer.main.get_command(app)).items():
        if hasattr(command, "table"):
            yield from leaves(command, (*path, name))
        else:
            yield (*path, name), command


def test_the_table_holds_each_commands_first_sentence():
    entries = {(*path, name): entry for path, table in
               [((), COMMANDS)] + [((name,), g.commands) for name, g in COMMANDS.items()
                                   if isinstance(g, Group)]
               for name, entry in table.items() if isinstance(entry, Command)}
    built = dict(leaves())
    assert set(built) == set(entries)
    for path, command in built.items():
        assert entries[path].help == command.get_short_help_str(limit=10**6), path
        assert command.callback.__module__ == f"compgen.cli.{entries[path].module}", path


def test_every_command_a_module_declares_is_in_the_table():
    import importlib

    declared = {(module, info.name) for module in COMMAND_MODULES
                for info in importlib.import_module(module).commands.registered_commands}
    listed = {(f"compgen.cli.{entry.module}", name) for group in COMMANDS.values()
              for name, entry in (group.commands.items() if isinstance(group, Group)
                                  else [(n, group) for n, g in COMMANDS.items() if g is group])}
    assert declared == listed


def test_help_imports_no_command_module_nor_torch_polars_or_numpy():
    # bare `compgen` prints the help to stderr, exit status 2
    for args in (["--help"], ["augment", "--help"], ["train", "--help"], []):
        status, out, err, modules = run_cli(args)
        assert status == (2 if not args else 0) and "Commands:" in out + err, (args, out, err)
        assert not modules & COMMAND_MODULES, (args, modules & COMMAND_MODULES)
        assert not {m.split(".")[0] for m in modules} & HEAVY, args
    assert "select  " in run_cli(["--help"])[1] and "stem-corrupt" in run_cli(["augment", "--help"])[1]


def test_a_command_imports_its_own_module_only():
    status, out, _, modules = run_cli(["presets"])
    assert status == 0 and "recombine_scan_cpu" in out
    assert modules & COMMAND_MODULES == {"compgen.cli.presets"}
    status, out, _, modules = run_cli(["augment", "geca", "--help"])
    assert status == 0 and "--wug-limit" in out
    assert modules & COMMAND_MODULES == {"compgen.cli.augment"}


def test_sampling_an_export_with_onnx_runtime_imports_no_torch(tmp_path):
    """The sample command's own imports stay off torch: its ONNX Runtime and C++ paths
    load none (compgen/sampling/run.py)."""
    status, _, err, modules = run_cli(
        ["sample", "exported/scan-jump-recomb2", "--backend", "onnx", "--n", "3", "--nsamples",
         "3", "--batch-size", "32", "--max-rounds", "2", "--threads", "1", "-o",
         str(tmp_path / "samples.tsv"), "--data-dir", str(tmp_path)], env={"OMP_NUM_THREADS": "1"})
    assert status == 0, err
    assert "torch" not in modules and modules & COMMAND_MODULES == {"compgen.cli.sample"}


def test_completion_lists_the_commands_from_the_table():
    status, out, _, modules = run_cli([], env={"_COMPGEN_COMPLETE": "complete_zsh",
                                               "_TYPER_COMPLETE_ARGS": "compgen t"})
    assert status == 0 and "train" in out and "Train generators" in out, out
    assert not modules & COMMAND_MODULES
    status, out, _, modules = run_cli([], env={"_COMPGEN_COMPLETE": "complete_bash",
                                               "COMP_WORDS": "compgen train ", "COMP_CWORD": "2"})
    assert status == 0 and set(out.split()) == {"predictor", "generator", "inflection"}, out
    assert not modules & COMMAND_MODULES
    status, out, _, modules = run_cli([], env={"_COMPGEN_COMPLETE": "complete_bash",
                                               "COMP_WORDS": "compgen sample x --stra",
                                               "COMP_CWORD": "3"})
    assert out.split() == ["--strategy"] and modules & COMMAND_MODULES == {"compgen.cli.sample"}


def test_a_mistyped_command_is_matched_against_every_command():
    status, _, err, modules = run_cli(["smaple"])
    assert status == 2 and "No such command 'smaple'. Did you mean 'sample'?" in err, err
    assert not modules & COMMAND_MODULES
    status, _, err, _ = run_cli(["train", "generater"])
    assert status == 2 and "Did you mean 'generator'?" in err, err
