// The Python module of the compiled training loops (compgen/models/native/__init__.py).
#include <torch/extension.h>
#include <xmmintrin.h>

#include <vector>

// Each loops file binds its own entry points (defined next to their loops).
void bind_lstm_loops(pybind11::module_& m);
void bind_decoder_loops(pybind11::module_& m);

// Subnormal floats (|x| < 1.2e-38) cost up to 50x per operation on x86. Attention
// weights far below the softmax's peak reach them, and the products of the decoder's
// backward pass with them ran ~15x slower than with normal values. Flush-to-zero and
// denormals-are-zero (MXCSR bits 15 and 6) are set in the calling thread and in every
// thread of the OpenMP pool that runs torch's kernels. Returns the calling thread's
// previous setting.
bool flush_denormals(bool on) {
  constexpr unsigned kBits = 0x8040;
  const bool was = (_mm_getcsr() & kBits) == kBits;
  auto apply = [on] { _mm_setcsr(on ? (_mm_getcsr() | kBits) : (_mm_getcsr() & ~kBits)); };
  apply();
#pragma omp parallel
  apply();
  return was;
}

PYBIND11_MODULE(TORCH_EXTENSION_NAME, m) {
  bind_lstm_loops(m);
  bind_decoder_loops(m);
  m.def("flush_denormals", &flush_denormals, "FTZ + DAZ on (True) or off in every torch thread");
}
