"""`compgen export`: checkpoints to validated TorchScript + ONNX folders."""

from __future__ import annotations

from pathlib import Path

import typer
from rich.table import Table

from compgen.cli.common import DataDir, checkpoint_kind, console, err_console
from compgen.errors import UserError, not_a_file, read_text
from compgen.export.kinds import export_checkpoint
from compgen.runtimes.card import set_card_text
from compgen.runtimes.cpp import build_runner

# its commands, listed in compgen.cli.commands
commands = typer.Typer()


@commands.command("export")
def export_cmd(
    checkpoint: Path = typer.Argument(..., help="generator, predictor or inflection checkpoint (.pt, self-describing), or a generator export folder (exported again in the current format, same weights and prototype order)"),
    output: Path | None = typer.Option(None, "--output", "-o", help="export folder (default: exported/<checkpoint name>)"),
    parity_sets: int = typer.Option(256, "--parity-sets", help="prototype sets (generator) or test sources (predictor) the parity check decodes"),
    cpp: bool = typer.Option(True, "--cpp/--no-cpp", help="also build the C++ runner and check it (generators only)"),
    seed: int = typer.Option(0, "--seed", help="seed of the stored prototype order"),
    prototypes: int = typer.Option(100_000, "--prototypes", help="generators: prototype tuples stored (sampling cycles through them; 25,600 = 200 rounds of 128)"),
    card: Path | None = typer.Option(None, "--card", help="Markdown file: the model card's own text (a '# title' line, what the model is, then '## ' sections), kept in manifest.json; README.md is rendered from the manifest around it"),
    data_dir: Path | None = DataDir,
) -> None:
    """Export to TorchScript + ONNX, validated against the eager model before writing."""
    card_text = None
    if card is not None:
        if not card.is_file():
            raise UserError(f"--card {card}: {not_a_file(card)}")
        card_text = read_text(card)
    if parity_sets < 1:
        raise UserError("--parity-sets must be >= 1")
    if prototypes < 1:
        raise UserError("--prototypes must be >= 1")
    # the C++ runner only runs generators: don't build it for a predictor
    is_generator = checkpoint.is_dir() or checkpoint_kind(checkpoint) == "recombine"
    binary = build_runner(log=err_console.print) if cpp and is_generator else None
    manifest = export_checkpoint(checkpoint, output, parity_sets=parity_sets, seed=seed,
                                 data_dir=data_dir, cpp_binary=binary, log=err_console.print,
                                 max_prototypes=prototypes)
    parity = manifest.parity
    checked = (f"{parity['sets']} prototype sets" if is_generator
               else f"{parity['sources']} {parity['split']} sources")
    table = Table(title=f"parity on {checked} (log-prob tolerance {parity['tolerance']:g})")
    for col in ("backend", "greedy identical", "beam identical", "max |Δ log p|"):
        table.add_column(col)
    for name, f in parity["backends"].items():
        ties = {mode: f" ({f[f'{mode}_near_ties']} near-ties)" if f.get(f"{mode}_near_ties") else ""
                for mode in ("greedy", "beam")}
        table.add_row(name, f"{f.get('greedy_identical', '')}{ties['greedy']}",
                      f"{f.get('beam_identical', '—')}{ties['beam']}",
                      f"{f['max_abs_logp_diff']:.2e}" if "max_abs_logp_diff" in f else "—")
    console.print(table)
    folder = output or Path("exported") / checkpoint.stem
    if card_text is not None:
        set_card_text(folder, card_text)
    console.print(f"wrote {folder} ({', '.join(sorted(manifest.files))}) "
                  f"in {manifest.export_seconds:.1f} s")
