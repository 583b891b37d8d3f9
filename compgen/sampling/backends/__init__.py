"""The decoders of ``compgen sample --backend``: eager torch, TorchScript, ONNX Runtime,
AOTInductor-compiled, the C++ runner, and Ray actors over any of them."""
