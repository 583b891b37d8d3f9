// The step loops of the training LSTMs (compgen/models/packed_lstm.py) in C++: the same
// computation as the Python loops there, with each step's gate nonlinearities and state
// updates fused into one pass over the rows, and no interpreter between the steps.
// Products run in the dtype of the weights (bf16 under autocast, else fp32); cell states
// and nonlinearities in fp32.
#include "linear.h"
#include "pointwise.h"

#include <torch/extension.h>
#include <ATen/Parallel.h>

#include <optional>
#include <type_traits>
#include <vector>

namespace {

using namespace compgen;  // Linear (linear.h); load, store, sigmoid, tanh_ (pointwise.h)

// One LSTM step for the rows of one direction: gates = gates_in + hw -> acts (i, f, g, o),
// c = f * c_prev + i * g, h = o * tanh(c).
template <typename Gemm>
void cell_forward_row(const Gemm* __restrict gin, const Gemm* __restrict hw, float* __restrict act,
                      const float* __restrict c_prev, float* __restrict c, float* __restrict tanh_c,
                      Gemm* __restrict h, int64_t H) {
#pragma GCC ivdep
  for (int64_t k = 0; k < H; ++k) {
    float i = sigmoid(load(gin[k]) + load(hw[k]));
    float f = sigmoid(load(gin[H + k]) + load(hw[H + k]));
    float g = tanh_(load(gin[2 * H + k]) + load(hw[2 * H + k]));
    float o = sigmoid(load(gin[3 * H + k]) + load(hw[3 * H + k]));
    act[k] = i; act[H + k] = f; act[2 * H + k] = g; act[3 * H + k] = o;
    float cv = f * c_prev[k] + i * g;
    float t = tanh_(cv);
    c[k] = cv;
    tanh_c[k] = t;
    store(&h[k], o * t);
  }
}

// Its backward pass: from dh (from the step's output and the next step) and dc (from the
// next step), the gate gradients and the cell gradient into the previous step.
// d_out: the gradient of the step's output h (in the product dtype), d_c_out that of its
// cell state (nullptr: none).
template <typename Gemm>
void cell_backward_row(const float* __restrict act, const float* __restrict c_prev,
                       const float* __restrict tanh_c, const Gemm* __restrict d_out,
                       const float* __restrict d_h, const float* __restrict d_c_out,
                       float* __restrict d_c, Gemm* __restrict d_gates, int64_t H) {
#pragma GCC ivdep
  for (int64_t k = 0; k < H; ++k) {
    float i = act[k], f = act[H + k], g = act[2 * H + k], o = act[3 * H + k], t = tanh_c[k];
    float dh = load(d_out[k]) + d_h[k];
    float dc = d_c[k] + dh * o * (1.f - t * t);
    if (d_c_out) dc += d_c_out[k];
    store(&d_gates[k], dc * g * i * (1.f - i));
    store(&d_gates[H + k], dc * c_prev[k] * f * (1.f - f));
    store(&d_gates[2 * H + k], dc * i * (1.f - g * g));
    store(&d_gates[3 * H + k], dh * t * o * (1.f - o));
    d_c[k] = dc * f;
  }
}

// Rows of a (D, n, width) tensor whose last dimension is contiguous.
template <typename T>
struct Rows {
  T* base;
  int64_t stride0, stride1;
  explicit Rows(const at::Tensor& x)
      : base(static_cast<T*>(x.data_ptr())), stride0(x.stride(0)), stride1(x.stride(1)) {}
  T* operator()(int64_t d, int64_t r) const { return base + d * stride0 + r * stride1; }
};

// Runs run(d0, d1) for the directions [0, D): with as many torch threads as directions,
// each direction's whole step loop on its own thread (its products and row loops then
// run single-threaded inside the parallel region): the directions never wait for each
// other, where splitting every small step across the threads syncs them at each step.
template <typename Run>
void by_direction(int64_t D, const Run& run) {
  if (D > 1 && at::get_num_threads() >= D && !at::in_parallel_region()) {
    at::parallel_for(0, D, 1, [&](int64_t begin, int64_t end) { run(begin, end); });
  } else {
    run(0, D);
  }
}

// The products' dtype of a loop over Gemm (uint16_t holds bf16).
template <typename Gemm>
constexpr at::ScalarType kGemmDtype = std::is_same_v<Gemm, float> ? at::kFloat : at::kBFloat16;

// gates_in (D, P, 4H) (the input part of the gates) and w (D, 4H, H) = W_hh in the product
// dtype, h0, c0 (D, n_0, H) fp32 -> acts (D, P, 4H), hs (D, P, H) in the product dtype,
// cs, tanh(cs).
template <typename Gemm>
std::vector<at::Tensor> lstm_forward(const at::Tensor& gates_in, const at::Tensor& w,
                                     const at::Tensor& h0, const at::Tensor& c0,
                                     const std::vector<int64_t>& batch_sizes) {
  TORCH_CHECK(w.scalar_type() == kGemmDtype<Gemm> && gates_in.scalar_type() == w.scalar_type() &&
              h0.scalar_type() == at::kFloat && c0.scalar_type() == at::kFloat,
              "lstm_forward: fp32 states, gates and weights in the loop's dtype");
  TORCH_CHECK(gates_in.stride(2) == 1 && c0.stride(2) == 1, "lstm_forward: rows must be contiguous");
  const int64_t D = gates_in.size(0), P = gates_in.size(1), H = w.size(2);
  std::vector<std::optional<Linear>> w_hh(D);  // packed by the thread of its direction
  const auto fp32 = gates_in.options().dtype(at::kFloat);
  auto acts = at::empty({D, P, 4 * H}, fp32);
  auto hs = at::empty({D, P, H}, w.options());
  auto cs = at::empty({D, P, H}, fp32);
  auto tanh_cs = at::empty_like(cs);
  const at::Tensor h_start = h0.to(w.scalar_type());
  // directions [d0, d1) over every step
  auto run = [&](int64_t d0, int64_t d1) {
    for (int64_t d = d0; d < d1; ++d) w_hh[d].emplace(w[d]);
    at::Tensor h = h_start, c = c0;
    int64_t offset = 0;
    for (int64_t n : batch_sizes) {
      std::vector<const Gemm*> hw(D);  // h_{t-1} W_hh^T (n, 4H) of each direction
      std::vector<at::Tensor> products;
      for (int64_t d = d0; d < d1; ++d) {
        products.push_back((*w_hh[d])(h[d].narrow(0, 0, n)));
        hw[d] = static_cast<const Gemm*>(products.back().data_ptr());
      }
      const Rows<float> act(acts), c_prev(c), c_new(cs), tc(tanh_cs);
      const Rows<Gemm> gin(gates_in), h_new(hs);
      at::parallel_for(d0 * n, d1 * n, 16, [&](int64_t begin, int64_t end) {
        for (int64_t j = begin; j < end; ++j) {
          const int64_t d = j / n, r = j % n, p = offset + r;
          cell_forward_row(gin(d, p), hw[d] + r * 4 * H, act(d, p), c_prev(d, r), c_new(d, p),
                           tc(d, p), h_new(d, p), H);
        }
      });
      h = hs.narrow(1, offset, n);
      c = cs.narrow(1, offset, n);
      offset += n;
    }
  };
  by_direction(D, run);
  return {acts, hs, cs, tanh_cs};
}

// d_hs (D, P, H) in the product dtype, d_cs fp32 or None (no gradient) -> d_gates
// (D, P, 4H) in the product dtype, the packed previous states (for the weight gradient),
// and the gradients of h0 and c0.
template <typename Gemm>
std::vector<at::Tensor> lstm_backward(const at::Tensor& acts, const at::Tensor& hs,
                                      const at::Tensor& cs, const at::Tensor& tanh_cs,
                                      const at::Tensor& h0, const at::Tensor& c0,
                                      const at::Tensor& d_hs,
                                      const c10::optional<at::Tensor>& d_cs_or_none,
                                      const at::Tensor& w, const std::vector<int64_t>& batch_sizes) {
  const at::Tensor d_cs = d_cs_or_none.value_or(at::Tensor());
  for (const auto& x : {acts, cs, tanh_cs, h0, c0})
    TORCH_CHECK(x.scalar_type() == at::kFloat && x.stride(-1) == 1,
                "lstm_backward: contiguous fp32 rows expected");
  TORCH_CHECK(w.scalar_type() == kGemmDtype<Gemm> && d_hs.scalar_type() == w.scalar_type() &&
              d_hs.stride(-1) == 1 &&
              (!d_cs.defined() || (d_cs.scalar_type() == at::kFloat && d_cs.stride(-1) == 1)),
              "lstm_backward: weights and output gradients in the loop's dtype, cell gradients fp32");
  const int64_t D = acts.size(0), H = w.size(2);
  // d_gates (n, 4H) -> (n, H): the weight (4H, H) read as (H, 4H)^T, transposed and packed
  // by the thread of its direction
  std::vector<std::optional<Linear>> w_hh_t(D);
  auto d_gates = at::empty(acts.sizes(), w.options());
  auto h_prev = at::empty_like(hs);  // the state each step read, packed like the steps
  auto d_h = at::zeros_like(h0), d_c = at::zeros_like(c0);
  auto h0_gemm = h0.to(w.scalar_type());
  std::vector<int64_t> ends{0};
  for (int64_t n : batch_sizes) ends.push_back(ends.back() + n);
  auto run = [&](int64_t d0, int64_t d1) {
    for (int64_t d = d0; d < d1; ++d) w_hh_t[d].emplace(w[d].t());
    for (int64_t t = static_cast<int64_t>(batch_sizes.size()) - 1; t >= 0; --t) {
      const int64_t n = batch_sizes[t], start = ends[t];
      const at::Tensor c_prev = t > 0 ? cs.narrow(1, ends[t - 1], n) : c0.narrow(1, 0, n);
      const at::Tensor h_before = t > 0 ? hs.narrow(1, ends[t - 1], n) : h0_gemm.narrow(1, 0, n);
      for (int64_t d = d0; d < d1; ++d) h_prev[d].narrow(0, start, n).copy_(h_before[d]);
      const Rows<float> act(acts), cp(c_prev), tc(tanh_cs), dh(d_h), dc(d_c);
      const Rows<Gemm> dho(d_hs), dg(d_gates);
      const bool cell_grad = d_cs.defined();
      at::parallel_for(d0 * n, d1 * n, 16, [&](int64_t begin, int64_t end) {
        for (int64_t j = begin; j < end; ++j) {
          const int64_t d = j / n, r = j % n, p = start + r;
          const float* dco = cell_grad ? Rows<float>(d_cs)(d, p) : nullptr;
          cell_backward_row(act(d, p), cp(d, r), tc(d, p), dho(d, p), dh(d, r), dco, dc(d, r),
                            dg(d, p), H);
        }
      });
      for (int64_t d = d0; d < d1; ++d)
        d_h[d].narrow(0, 0, n).copy_((*w_hh_t[d])(d_gates[d].narrow(0, start, n)));
    }
  };
  by_direction(D, run);
  return {d_gates, h_prev, d_h, d_c};
}

}  // namespace

void bind_lstm_loops(pybind11::module_& m) {
  // one entry per products' dtype: the caller picks by its weights' dtype
  m.def("lstm_forward_fp32", &lstm_forward<float>, "LSTM directions over packed steps (training)");
  m.def("lstm_forward_bf16", &lstm_forward<uint16_t>, "the same, bf16 products");
  m.def("lstm_backward_fp32", &lstm_backward<float>, "their backward pass");
  m.def("lstm_backward_bf16", &lstm_backward<uint16_t>, "the same, bf16 products");
}
