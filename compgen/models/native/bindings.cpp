// The Python module of the compiled training loops (compgen/models/native/__init__.py).
#include <torch/extension.h>
#include <xmmintrin.h>

#include <vector>

std::vector<at::Tensor> lstm_forward(const at::Tensor& gates_in, const at::Tensor& w,
                                     const at::Tensor& h0, const at::Tensor& c0,
                                     const std::vector<int64_t>& batch_sizes);
std::vector<at::Tensor> lstm_backward(const at::Tensor& acts, const at::Tensor& hs,
                                      const at::Tensor& cs, const at::Tensor& tanh_cs,
                                      const at::Tensor& h0, const at::Tensor& c0,
                                      const at::Tensor& d_hs, const c10::optional<at::Tensor>& d_cs,
                                      const at::Tensor& w, const std::vector<int64_t>& batch_sizes);

std::vector<at::Tensor> decoder_forward(const at::Tensor& gates_ez, const at::Tensor& query_ez,
                                        const at::Tensor& w_feed_h, const at::Tensor& w_q_h_feed,
                                        const at::Tensor& w_out, const at::Tensor& b_out,
                                        const at::Tensor& keys_t, const at::Tensor& values,
                                        const at::Tensor& pos_keys, const at::Tensor& pos_values,
                                        const at::Tensor& mask, const c10::optional<at::Tensor>& h_drop,
                                        const c10::optional<at::Tensor>& feed_drop,
                                        const std::vector<int64_t>& batch_sizes);
std::vector<at::Tensor> decoder_backward(const at::Tensor& d_ys, const at::Tensor& d_scores,
                                         const at::Tensor& x_fh, const at::Tensor& acts,
                                         const at::Tensor& cs, const at::Tensor& tanh_cs,
                                         const at::Tensor& qs, const at::Tensor& alphas,
                                         const at::Tensor& w_feed_h, const at::Tensor& w_q_h_feed,
                                         const at::Tensor& w_out, const at::Tensor& keys_t,
                                         const at::Tensor& values, const at::Tensor& pos_keys,
                                         const at::Tensor& pos_values, const at::Tensor& mask,
                                         const c10::optional<at::Tensor>& h_drop,
                                         const c10::optional<at::Tensor>& feed_drop,
                                         const std::vector<int64_t>& batch_sizes);

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
  m.def("lstm_forward", &lstm_forward, "LSTM directions over packed steps (training)");
  m.def("lstm_backward", &lstm_backward, "their backward pass");
  m.def("decoder_forward", &decoder_forward, "the scan decoder's teacher-forced steps (training)");
  m.def("decoder_backward", &decoder_backward, "their backward pass");
  m.def("flush_denormals", &flush_denormals, "FTZ + DAZ on (True) or off in every torch thread");
}
