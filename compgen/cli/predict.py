"""`compgen predict`: outputs of a predictor for new inputs."""

from __future__ import annotations

from pathlib import Path

import typer

from compgen.cli.common import DeviceOption, console
from compgen.device import resolve_device
from compgen.errors import UserError
from compgen.evaluation.evaluate import predictor_source
from compgen.io import atomic_open, read_inputs

# its commands, listed in compgen.cli.commands
commands = typer.Typer()


@commands.command("predict")
def predict_cmd(
    model: Path = typer.Argument(..., help="predictor export folder (compgen export PRED.pt) or predictor checkpoint"),
    input: Path = typer.Option(..., "--input", "-i", help="one input per line, tokens separated by spaces (a TSV's first column is the input; a samples file's #x header is skipped)"),
    output: Path | None = typer.Option(None, "-o", "--output", help="write input<TAB>prediction lines here (default: print them)"),
    backend: str | None = typer.Option(None, "--backend", help="export folders: onnx (default) | torchscript | torch"),
    beam: int = typer.Option(0, "--beam", help="beam width (0 = greedy)"),
    batch_size: int = typer.Option(256, "--batch-size", help="inputs decoded per batch"),
    threads: int | None = typer.Option(None, "--threads", help="CPU threads"),
    seed: int = typer.Option(0, "--seed", help="accepted for uniformity; decoding is deterministic"),
    device: str | None = DeviceOption,
) -> None:
    """Predict outputs for new inputs with an exported (or eager) predictor."""
    if batch_size < 1 or beam < 0:
        raise UserError("--batch-size must be >= 1 and --beam >= 0")
    dev = resolve_device(device)
    sources = read_inputs(input)
    predict_sources, _, _ = predictor_source(model, backend, beam, batch_size, threads, dev)
    lines = [f"{' '.join(s)}\t{' '.join(p)}" for s, p in zip(sources, predict_sources(sources))]
    if output is None:
        for line in lines:
            console.print(line, highlight=False, markup=False, soft_wrap=True)
        return
    with atomic_open(output, "w", encoding="utf-8") as f:
        f.write("\n".join(lines) + "\n")
    console.print(f"{len(lines)} predictions on {dev} -> {output}", highlight=False, markup=False)
