"""The command tree of ``compgen``: each command's module and one-line help, in one table.

``compgen --help``, ``compgen GROUP --help`` and shell completion list the commands from
this table alone; a command's module is imported when that command runs or shows its own
help. So every command module imports what it needs at its top, and starting one command
costs none of the others' imports. Each module declares its commands on its own
``commands = typer.Typer()``, by the names used here."""

from __future__ import annotations

import contextlib
import difflib
import importlib
import sys
from dataclasses import dataclass

import typer.main
from typer.core import TyperCommand, TyperGroup

from compgen.cli.checks import check_before_running


@dataclass(frozen=True)
class Command:
    """A command: its module under ``compgen.cli`` and the first sentence of its help
    (tests/test_cli_commands.py keeps the two equal)."""

    module: str
    help: str


@dataclass(frozen=True)
class Group:
    """A group of commands (``compgen train ...``); its help is its own, here."""

    help: str
    commands: dict[str, Command]


# in the order `compgen --help` lists them
COMMANDS: dict[str, Command | Group] = {
    "env": Command("env", "Report the Python, torch, CUDA, GPUs, ONNX Runtime providers, KenLM "
                          "and CPU flags."),
    "evaluate": Command("evaluate", "Exact match and morphology F1 (FUT / PST / FUT+PST / OTHER, "
                                    "all and NOVEL) of predictors; direct inference and attention "
                                    "figures of generators."),
    "export": Command("export", "Export to TorchScript + ONNX, validated against the eager model "
                                "before writing."),
    "evaluate-grammar": Command("csl", "Share of train and test pairs the grammar derives, and "
                                       "exact match of the Viterbi parse under the latent-state "
                                       "model fitted on train."),
    "inspect": Command("inspect", "Kind, config, vocabulary, training state (checkpoints) or "
                                  "parity figures (exports)."),
    "pipeline": Command("pipeline", "Run one row of the paper's tables (augment -> predictor -> "
                                    "evaluation) for each seed; resumes from what an earlier call "
                                    "left behind and appends to ROOT/results.csv."),
    "predict": Command("predict", "Predict outputs for new inputs with an exported (or eager) "
                                  "predictor."),
    "presets": Command("presets", "List the bundled presets (name, kind, what they are), or print "
                                  "one as TOML."),
    "sample": Command("sample", "Sample unique, novel synthetic data from a generator (optionally "
                                "rare-token resampled)."),
    "select": Command("stem_corrupt", "Choose SIZE synthetic triples of POOL with a selection "
                                      "strategy."),
    "augment": Group("Synthesize training data by recombination (GECA) or from an induced grammar "
                     "(CSL).", {
        "geca": Command("augment", "GECA: put fragments into templates that share an "
                                   "environment; write novel examples."),
        "csl": Command("csl", "CSL: induce a QCFG from the training pairs, fit its latent-state "
                              "model, sample pairs."),
        "stem-corrupt": Command("stem_corrupt", "STEM-CORRUPT: align lemma/form pairs, replace "
                                                "stem characters, write a pool."),
    }),
    "data": Group("List, fetch and describe data sets.", {
        "list": Command("data", "Names of the data sets compgen knows (every SIGMORPHON language "
                                "in the data folder)."),
        "fetch": Command("data", "Download a data set (or copy it from a mirror) and verify its "
                                 "sha256 sums."),
        "stats": Command("data", "Counts, vocabulary sizes and lengths per split."),
    }),
    "lm": Group("KenLM n-gram models: lmplz, interpolation, perplexity.", {
        "train": Command("lm", "Estimate a modified Kneser-Ney model with KenLM's lmplz."),
        "eval": Command("lm", "Perplexity of a model and of its interpolation with an augmented "
                              "model."),
        "experiment": Command("lm", "The GECA LM experiment: augment, two lmplz models, tuned "
                                    "interpolation."),
    }),
    "train": Group("Train generators and the conditional predictor.", {
        "predictor": Command("train", "Train the conditional seq2seq predictor on original "
                                      "(+ augmented) data."),
        "generator": Command("train", "Train an R&R generator (recomb-0/1/2, optional VAE) on "
                                      "prototype neighbourhoods."),
        "inflection": Command("stem_corrupt", "Train the character Transformer inflection model "
                                              "(gold train-low + augment files)."),
    }),
    "inflection": Group("The character Transformer inflection model (STEM-CORRUPT experiments).", {
        "evaluate": Command("stem_corrupt", "Exact-match accuracy of an inflection model (beam "
                                            "search)."),
    }),
}


class LazyGroup(TyperGroup):
    """A group whose commands come from ``COMMANDS``: each is built from its module on first
    use and given the checks of ``compgen.cli.checks``; a subgroup is built from the table."""

    def __init__(self, *, table: dict[str, Command | Group] | None = None,
                 path: tuple[str, ...] = (), **attrs) -> None:
        super().__init__(**attrs)
        self.table = COMMANDS if table is None else table
        self.path = path
        self._listing = False

    def list_commands(self, ctx) -> list[str]:
        return list(self.table)

    def is_imported(self, name: str) -> bool:
        """Whether getting ``name`` imports nothing (a group, or a loaded module)."""
        entry = self.table[name]
        return isinstance(entry, Group) or f"compgen.cli.{entry.module}" in sys.modules

    def get_command(self, ctx, name: str):
        entry = self.table.get(name)
        if entry is None:
            return None
        if name not in self.commands:
            if self._listing and isinstance(entry, Command):
                return TyperCommand(name, help=entry.help)
            self.commands[name] = self._build(name, entry)
        return self.commands[name]

    def _build(self, name: str, entry: Command | Group):
        path = (*self.path, name)
        if isinstance(entry, Group):
            return LazyGroup(table=entry.commands, path=path, name=name, help=entry.help,
                             no_args_is_help=True, rich_markup_mode=self.rich_markup_mode)
        module = importlib.import_module(f"compgen.cli.{entry.module}")
        (info,) = [info for info in module.commands.registered_commands if info.name == name]
        command = typer.main.get_command_from_info(info, pretty_exceptions_short=True,
                                                   rich_markup_mode=self.rich_markup_mode)
        check_before_running(command, path)
        return command

    @contextlib.contextmanager
    def _listing_only(self):
        """Typer lists what ``get_command`` returns (help, completion): meanwhile a command
        not yet loaded is a stand-in with the table's help, so listing imports nothing."""
        self._listing = True
        try:
            yield
        finally:
            self._listing = False

    def format_commands(self, ctx, formatter) -> None:
        with self._listing_only():
            super().format_commands(ctx, formatter)

    def shell_complete(self, ctx, incomplete: str):
        with self._listing_only():
            return super().shell_complete(ctx, incomplete)

    def resolve_command(self, ctx, args: list[str]):
        name = args[0]
        if name not in self.table and not name.startswith("-"):
            # matched against every command, loaded or not
            close = ", ".join(map(repr, difflib.get_close_matches(name, list(self.table))))
            ctx.fail(f"No such command {name!r}." + (f" Did you mean {close}?" if close else ""))
        return super().resolve_command(ctx, args)


def every_command(group: LazyGroup, imported_only: bool = False) -> dict[str, object]:
    """Every command of ``group`` by name, importing the modules not yet imported; with
    ``imported_only``, only those of modules already imported (that costs no import)."""
    ctx = typer.Context(group)
    return {name: group.get_command(ctx, name) for name in group.list_commands(ctx)
            if not imported_only or group.is_imported(name)}
