"""ONNX export: ``prototypes.onnx`` (generators), ``encoder.onnx`` and ``decoder_step.onnx``
with dynamic batch and length axes, for generators (``export_onnx``), predictors
(``export_predictor_onnx``) and inflection models (``export_inflection_onnx``).

The decoding loop is not in the graph: the runtime (ONNX Runtime from Python) runs it,
so any strategy (greedy, temperature, mixed, beam) works on the same two graphs.
Inputs a variant never reads (e.g. the self-attention buffers of the scan variant) are
dropped by the exporter; ``graph_io`` reports what each graph really takes.
"""

from __future__ import annotations

import warnings
from pathlib import Path

import onnx
import torch

from compgen.io import quiet_native_stderr
from compgen.runtimes import inflection_graphs, predictor_graphs
from compgen.runtimes.graphs import (
    ENCODER_INPUTS,
    ENCODER_OUTPUTS,
    PROTOTYPE_INPUTS,
    PROTOTYPE_OUTPUTS,
    STEP_INPUTS,
    STEP_OUTPUTS,
    EncoderGraph,
    PrototypeGraph,
    StepGraph,
    example_inputs,
)

OPSET = 17

DYNAMIC_AXES = {
    "protos": {0: "batch", 2: "proto_len"}, "z": {0: "batch"},
    "encoded": {0: "batch", 2: "proto_len"}, "h_final": {0: "batch"}, "c_final": {0: "batch"},
    "keys": {0: "batch", 2: "proto_len"}, "values": {0: "batch", 2: "proto_len"},
    "mask": {0: "batch", 2: "proto_len"}, "tokens": {0: "batch", 2: "proto_len"},
    "h0": {0: "batch"}, "c0": {0: "batch"}, "token": {0: "batch"}, "logp": {0: "batch"},
}
for _name in ("h", "c", "feed", "step"):
    DYNAMIC_AXES[_name] = {0: "batch"}
    DYNAMIC_AXES[f"{_name}_out"] = {0: "batch"}
for _name in ("past_h", "past_key", "past_tok"):
    DYNAMIC_AXES[_name] = {0: "batch", 1: "steps"}
    DYNAMIC_AXES[f"{_name}_out"] = {0: "batch", 1: "steps"}
# the prototype graph's rows are single prototypes, not tuples
PROTOTYPE_AXES = {"seqs": {0: "sequences", 1: "proto_len"},
                  "encoded": {0: "sequences", 1: "proto_len"},
                  "h_final": {0: "sequences"}, "c_final": {0: "sequences"}}
GENERATOR_GRAPHS = ("prototypes.onnx", "encoder.onnx", "decoder_step.onnx")


def export_graph(module, args, path, inputs, outputs, dynamic_axes=DYNAMIC_AXES) -> None:
    """Trace ``module`` on the example ``args`` into the ONNX file ``path``; check it."""
    # tracer warnings about constant sizes, and torch's C++ shape-inference notes on fd 2
    with warnings.catch_warnings(), quiet_native_stderr():
        warnings.simplefilter("ignore")
        torch.onnx.export(module.eval(), args, str(path), dynamo=False, opset_version=OPSET,
                          input_names=list(inputs), output_names=list(outputs),
                          dynamic_axes={k: v for k, v in dynamic_axes.items()
                                        if k in inputs or k in outputs})
    onnx.checker.check_model(str(path), full_check=True)


def export_onnx(model, folder: Path, max_len: int) -> dict:
    """Write the ``GENERATOR_GRAPHS`` into ``folder``; return their IO."""
    proto_args, enc_args, step_args = example_inputs(model, max_steps=max_len)
    export_graph(PrototypeGraph(model), proto_args, folder / "prototypes.onnx", PROTOTYPE_INPUTS,
            PROTOTYPE_OUTPUTS, PROTOTYPE_AXES)
    export_graph(EncoderGraph(model), enc_args, folder / "encoder.onnx", ENCODER_INPUTS,
            ENCODER_OUTPUTS)
    export_graph(StepGraph(model), step_args, folder / "decoder_step.onnx", STEP_INPUTS, STEP_OUTPUTS)
    model.eval()  # torch.onnx.export restores the wrapper's mode recursively
    return {name: graph_io(folder / name) for name in GENERATOR_GRAPHS}


def export_predictor_onnx(model, folder: Path) -> dict:
    """The predictor's ``encoder.onnx`` and ``decoder_step.onnx`` in ``folder``; their IO."""
    g = predictor_graphs
    enc_args, step_args = g.example_inputs(model)
    export_graph(g.PredictorEncoder(model, with_onehot=model.copy), enc_args,
            folder / "encoder.onnx", g.ENCODER_INPUTS, g.encoder_outputs(model.copy),
            g.DYNAMIC_AXES)
    export_graph(g.PredictorStep(model), step_args, folder / "decoder_step.onnx", g.STEP_INPUTS,
            g.STEP_OUTPUTS, g.DYNAMIC_AXES)
    model.eval()  # torch.onnx.export restores the wrapper's mode recursively
    return {"encoder.onnx": graph_io(folder / "encoder.onnx"),
            "decoder_step.onnx": graph_io(folder / "decoder_step.onnx")}


def export_inflection_onnx(net, folder: Path, vocab_size: int) -> None:
    """The inflection model's ``encoder.onnx`` and ``decoder_step.onnx`` in ``folder``."""
    g = inflection_graphs
    encoder_args, step_args = g.example_inputs(net, vocab_size)
    export_graph(g.EncoderGraph(net), encoder_args, folder / "encoder.onnx", g.ENCODER_INPUTS,
                 g.ENCODER_OUTPUTS, g.DYNAMIC_AXES)
    export_graph(g.StepGraph(net), step_args, folder / "decoder_step.onnx", g.STEP_INPUTS,
                 g.STEP_OUTPUTS, g.DYNAMIC_AXES)


def graph_io(path: Path) -> dict:
    """Input/output names, element types and (symbolic) shapes of an ONNX graph."""
    graph = onnx.load(str(path), load_external_data=False).graph

    def describe(values):
        out = []
        for v in values:
            t = v.type.tensor_type
            dims = [d.dim_param or d.dim_value for d in t.shape.dim]
            out.append({"name": v.name, "dtype": onnx.TensorProto.DataType.Name(t.elem_type).lower(),
                        "shape": dims})
        return out

    return {"inputs": describe(graph.input), "outputs": describe(graph.output)}
