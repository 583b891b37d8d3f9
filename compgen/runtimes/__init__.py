"""What runs an exported (or eager) model: ONNX Runtime, TorchScript, the AOTInductor-compiled
step, the C++ runner and the eager stepper, for generators, predictors and inflection models
alike; the export folder's format (``artifact``), the graphs traced into it and the load
check. Below both ``compgen.export`` (which validates through these) and ``compgen.sampling``."""
