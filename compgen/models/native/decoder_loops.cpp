// The teacher-forced step loops of the scan decoder (compgen/models/scan_decoder.py) in
// C++: the same computation as the Python loops of _FusedDecoder, step for step, with the
// products against the three weight matrices on weights packed once, and each step's
// element-wise work (LSTM cell, query, masked softmax, output) fused into passes over its
// rows. What runs once for all steps (the memories' layouts, every weight's gradient) stays
// in Python.
#include "linear.h"
#include "pointwise.h"

#include <torch/extension.h>
#include <ATen/Parallel.h>

#include <cmath>
#include <type_traits>
#include <vector>

namespace {

using namespace compgen;  // Linear (linear.h); load, store, sigmoid, tanh_ (pointwise.h)

constexpr float MASKED = -1e18f;  // compgen.models.attention.MASKED

template <typename T>
T* ptr(const at::Tensor& x) { return static_cast<T*>(x.data_ptr()); }

// Shapes and the optional dropout masks of one call.
struct Dims {
  int64_t B, K, T, A, H, Fd, E, P;
};

std::vector<int64_t> ends_of(const std::vector<int64_t>& batch_sizes) {
  std::vector<int64_t> ends{0};
  for (int64_t n : batch_sizes) ends.push_back(ends.back() + n);
  return ends;
}

// out[j] += w * (x[j] + y[j]): a memory row plus its position vector, weighted.
inline void add_weighted_sum(float* __restrict out, float w, const float* __restrict x,
                             const float* __restrict y, int64_t n) {
  for (int64_t j = 0; j < n; ++j) out[j] += w * (x[j] + y[j]);
}

// u . (x + y): a gradient against a memory row plus its position vector.
inline float dot_with_sum(const float* __restrict u, const float* __restrict x,
                          const float* __restrict y, int64_t n) {
  float total = 0.f;
#pragma omp simd reduction(+ : total)
  for (int64_t j = 0; j < n; ++j) total += u[j] * (x[j] + y[j]);
  return total;
}

// The attention of one (row, prototype) at one step. keys (A, T) and pos_keys (A, T) are
// that row's memory and the step's relative-position vectors (scaled by 1/sqrt(A)),
// values and pos_values (T, A).
// Forward: scores = q (keys + pos_keys), masked; alpha = softmax; context = alpha (values
// + pos_values).
void attend(const float* __restrict q, const float* __restrict keys, const float* __restrict pos_keys,
            const float* __restrict values, const float* __restrict pos_values, const bool* keep,
            float* __restrict scores, float* __restrict alpha, float* __restrict context, int64_t A,
            int64_t T) {
  for (int64_t i = 0; i < T; ++i) scores[i] = 0.f;
  for (int64_t a = 0; a < A; ++a) add_weighted_sum(scores, q[a], keys + a * T, pos_keys + a * T, T);
  float top = MASKED;
#pragma omp simd reduction(max : top)
  for (int64_t i = 0; i < T; ++i) {
    scores[i] = keep[i] ? scores[i] : MASKED;
    top = scores[i] > top ? scores[i] : top;
  }
  float sum = 0.f;
#pragma omp simd reduction(+ : sum)
  for (int64_t i = 0; i < T; ++i) {
    alpha[i] = compgen::exp_(scores[i] - top);
    sum += alpha[i];
  }
  const float inv = 1.f / sum;
  for (int64_t i = 0; i < T; ++i) alpha[i] *= inv;
  for (int64_t a = 0; a < A; ++a) context[a] = 0.f;
  for (int64_t i = 0; i < T; ++i)
    add_weighted_sum(context, alpha[i], values + i * A, pos_values + i * A, A);
}

// Backward: from the context's and the scores' gradients, d_s (the scores' gradient before
// masking) and the query's gradient dq.
void attend_backward(const float* __restrict d_context, const float* __restrict d_scores,
                     const float* __restrict alpha,
                     const float* __restrict keys, const float* __restrict pos_keys,
                     const float* __restrict values, const float* __restrict pos_values,
                     const bool* keep, float* __restrict d_s, float* __restrict dq, int64_t A,
                     int64_t T) {
  float dot = 0.f;
  for (int64_t i = 0; i < T; ++i) {  // d_alpha[i] = d_context . (values + pos_values)[i]
    d_s[i] = dot_with_sum(d_context, values + i * A, pos_values + i * A, A);
    dot += d_s[i] * alpha[i];
  }
  for (int64_t i = 0; i < T; ++i)
    d_s[i] = keep[i] ? alpha[i] * (d_s[i] - dot) + d_scores[i] : 0.f;
  for (int64_t a = 0; a < A; ++a) dq[a] = dot_with_sum(d_s, keys + a * T, pos_keys + a * T, T);
}

// The products' dtype of a loop over Gemm (uint16_t holds bf16).
template <typename Gemm>
constexpr at::ScalarType kGemmDtype = std::is_same_v<Gemm, float> ? at::kFloat : at::kBFloat16;

// The forward loop of _FusedDecoder: gates_ez (P, 4H) and query_ez (P, K*A) in the
// products' dtype, the weights (out, in) in that dtype, b_out (E,) fp32, keys_t (B, K, A, T)
// (scaled), values (B, K, T, A), pos_keys (steps, K, A, T), pos_values (steps, K, T, A)
// fp32, mask (B, K, T) bool (true = a real position), the dropout masks (P, H) / (P, Fd)
// fp32 or None -> ys, scores and the buffers the backward pass reads.
template <typename Gemm>
std::vector<at::Tensor> decoder_forward(const at::Tensor& gates_ez, const at::Tensor& query_ez,
                                        const at::Tensor& w_feed_h, const at::Tensor& w_q_h_feed,
                                        const at::Tensor& w_out, const at::Tensor& b_out,
                                        const at::Tensor& keys_t, const at::Tensor& values,
                                        const at::Tensor& pos_keys, const at::Tensor& pos_values,
                                        const at::Tensor& mask,
                                        const c10::optional<at::Tensor>& h_drop_or_none,
                                        const c10::optional<at::Tensor>& feed_drop_or_none,
                                        const std::vector<int64_t>& batch_sizes) {
  for (const auto& x : {gates_ez, query_ez, w_feed_h, w_q_h_feed, w_out, b_out, keys_t, values,
                        pos_keys, pos_values, mask})
    TORCH_CHECK(x.is_contiguous(), "decoder_forward: contiguous tensors expected");
  constexpr auto dtype = kGemmDtype<Gemm>;
  TORCH_CHECK(gates_ez.scalar_type() == dtype && query_ez.scalar_type() == dtype &&
              w_feed_h.scalar_type() == dtype && w_q_h_feed.scalar_type() == dtype &&
              w_out.scalar_type() == dtype && mask.scalar_type() == at::kBool &&
              b_out.scalar_type() == at::kFloat,
              "decoder_forward: products' inputs in the loop's dtype, the bias fp32, a bool mask");
  const at::Tensor h_drop = h_drop_or_none.value_or(at::Tensor());
  const at::Tensor feed_drop = feed_drop_or_none.value_or(at::Tensor());
  const int64_t P = gates_ez.size(0), H = gates_ez.size(1) / 4, B = keys_t.size(0),
                K = keys_t.size(1), A = keys_t.size(2), T = keys_t.size(3),
                Fd = w_feed_h.size(1) - H, E = w_out.size(0), KA = K * A;
  const Linear feed_h(w_feed_h), q_h_feed(w_q_h_feed), out(w_out);
  const auto f32 = gates_ez.options().dtype(at::kFloat);
  const auto gemm = w_feed_h.options();
  auto x_fh = at::empty({P, Fd + H}, gemm);   // [feed_{t-1} ; h_{t-1}]
  auto acts = at::empty({P, 4 * H}, f32);     // i, f, g, o
  auto cs = at::empty({P, H}, f32), tanh_cs = at::empty({P, H}, f32);
  auto x_q = at::empty({P, H + Fd}, gemm);    // [h_t ; feed_{t-1}]
  auto qs = at::empty({P, K, A}, f32);
  auto alphas = at::empty({P, K, T}, f32);
  auto x_out = at::empty({P, H + KA}, gemm);  // [dropout(h_t) ; contexts]
  auto ys = at::empty({P, E}, f32);
  auto scores = at::empty({P, K, T}, f32);
  if (P > 0) x_fh.narrow(0, 0, batch_sizes[0]).zero_();  // feed_0 = h_0 = 0
  const bool drop_h = h_drop.defined(), drop_feed = feed_drop.defined();
  const bool* keep = ptr<bool>(mask);
  const float* b = ptr<float>(b_out);
  int64_t start = 0;
  for (size_t t = 0; t < batch_sizes.size(); ++t) {
    const int64_t n = batch_sizes[t], m = t + 1 < batch_sizes.size() ? batch_sizes[t + 1] : 0;
    const int64_t prev = t > 0 ? start - batch_sizes[t - 1] : -1;  // the previous step's rows
    const int64_t next = start + n;
    // LSTM: gates = gates_ez + [feed ; h] W^T; h_t goes to x_q, x_out and the next x_fh
    const at::Tensor hw = feed_h(x_fh.narrow(0, start, n));
    const Gemm* hw_ = ptr<Gemm>(hw);
    at::parallel_for(0, n, 8, [&](int64_t r0, int64_t r1) {
      for (int64_t r = r0; r < r1; ++r) {
        const int64_t p = start + r;
        const Gemm* gin = ptr<Gemm>(gates_ez) + p * 4 * H;
        const Gemm* prod = hw_ + r * 4 * H;
        float* act = ptr<float>(acts) + p * 4 * H;
        const float* c_prev = prev >= 0 ? ptr<float>(cs) + (prev + r) * H : nullptr;
        float* c = ptr<float>(cs) + p * H;
        float* tc = ptr<float>(tanh_cs) + p * H;
        Gemm* xq = ptr<Gemm>(x_q) + p * (H + Fd);
        Gemm* xo = ptr<Gemm>(x_out) + p * (H + KA);
        Gemm* xnext = r < m ? ptr<Gemm>(x_fh) + (next + r) * (Fd + H) + Fd : nullptr;
        const float* hd = drop_h ? ptr<float>(h_drop) + p * H : nullptr;
        for (int64_t k = 0; k < H; ++k) {
          const float i = sigmoid(load(gin[k]) + load(prod[k]));
          const float f = sigmoid(load(gin[H + k]) + load(prod[H + k]));
          const float g = tanh_(load(gin[2 * H + k]) + load(prod[2 * H + k]));
          const float o = sigmoid(load(gin[3 * H + k]) + load(prod[3 * H + k]));
          act[k] = i; act[H + k] = f; act[2 * H + k] = g; act[3 * H + k] = o;
          const float cv = (c_prev ? f * c_prev[k] : 0.f) + i * g;
          const float th = tanh_(cv);
          c[k] = cv;
          tc[k] = th;
          store(&xq[k], o * th);
        }
        const Gemm* feed = ptr<Gemm>(x_fh) + p * (Fd + H);
        for (int64_t k = 0; k < Fd; ++k) xq[H + k] = feed[k];
        for (int64_t k = 0; k < H; ++k) {
          const float h = load(xq[k]);  // the rounded h, as the Python loop reads it
          store(&xo[k], hd ? h * hd[k] : h);
          if (xnext) xnext[k] = xq[k];
        }
      }
    });
    // query, scores, masked softmax
    const at::Tensor qprod = q_h_feed(x_q.narrow(0, start, n));
    const Gemm* qp = ptr<Gemm>(qprod);
    for (int64_t r = 0; r < n; ++r) {
      const Gemm* qe = ptr<Gemm>(query_ez) + (start + r) * KA;
      float* q = ptr<float>(qs) + (start + r) * KA;
      for (int64_t k = 0; k < KA; ++k) q[k] = tanh_(load(qe[k]) + load(qp[r * KA + k]));
    }
    const float* pk = ptr<float>(pos_keys) + t * K * A * T;
    const float* pv = ptr<float>(pos_values) + t * K * T * A;
    at::parallel_for(0, n * K, 4, [&](int64_t j0, int64_t j1) {
      std::vector<float> context(A);
      for (int64_t j = j0; j < j1; ++j) {
        const int64_t r = j / K, kk = j % K, p = start + r;
        attend(ptr<float>(qs) + (p * K + kk) * A, ptr<float>(keys_t) + j * A * T,
               pk + kk * A * T, ptr<float>(values) + j * T * A, pv + kk * T * A,
               keep + j * T, ptr<float>(scores) + (p * K + kk) * T,
               ptr<float>(alphas) + (p * K + kk) * T, context.data(), A, T);
        Gemm* xo = ptr<Gemm>(x_out) + p * (H + KA) + H + kk * A;
        for (int64_t a = 0; a < A; ++a) store(&xo[a], context[a]);
      }
    });
    const at::Tensor yprod = out(x_out.narrow(0, start, n));
    const Gemm* yp = ptr<Gemm>(yprod);
    for (int64_t r = 0; r < n; ++r) {
      float* y = ptr<float>(ys) + (start + r) * E;
      for (int64_t k = 0; k < E; ++k) y[k] = load(yp[r * E + k]) + b[k];
      if (r < m) {
        Gemm* xnext = ptr<Gemm>(x_fh) + (next + r) * (Fd + H);
        const float* fd = drop_feed ? ptr<float>(feed_drop) + (start + r) * Fd : nullptr;
        for (int64_t k = 0; k < Fd; ++k) store(&xnext[k], fd ? y[k] * fd[k] : y[k]);
      }
    }
    start = next;
  }
  return {ys, scores, x_fh, acts, cs, tanh_cs, x_q, qs, alphas, x_out};
}


// Its backward loop: d_ys (P, E), d_scores (P, K, T) fp32 and what decoder_forward
// returned -> the gradients of the gates, queries and outputs before their products (in
// the products' dtype), of the contexts, and of the scores before masking and scaling.
template <typename Gemm>
std::vector<at::Tensor> decoder_backward(const at::Tensor& d_ys, const at::Tensor& d_scores,
                                         const at::Tensor& x_fh, const at::Tensor& acts,
                                         const at::Tensor& cs, const at::Tensor& tanh_cs,
                                         const at::Tensor& qs, const at::Tensor& alphas,
                                         const at::Tensor& w_feed_h, const at::Tensor& w_q_h_feed,
                                         const at::Tensor& w_out, const at::Tensor& keys_t,
                                         const at::Tensor& values, const at::Tensor& pos_keys,
                                         const at::Tensor& pos_values, const at::Tensor& mask,
                                         const c10::optional<at::Tensor>& h_drop_or_none,
                                         const c10::optional<at::Tensor>& feed_drop_or_none,
                                         const std::vector<int64_t>& batch_sizes) {
  for (const auto& x : {d_ys, d_scores, acts, cs, tanh_cs, qs, alphas})
    TORCH_CHECK(x.is_contiguous() && x.scalar_type() == at::kFloat,
                "decoder_backward: contiguous fp32 gradients and buffers expected");
  TORCH_CHECK(w_feed_h.scalar_type() == kGemmDtype<Gemm>,
              "decoder_backward: the weights in the loop's dtype");
  const at::Tensor h_drop = h_drop_or_none.value_or(at::Tensor());
  const at::Tensor feed_drop = feed_drop_or_none.value_or(at::Tensor());
  const int64_t P = acts.size(0), H = acts.size(1) / 4, B = keys_t.size(0), K = keys_t.size(1),
                A = keys_t.size(2), T = keys_t.size(3), Fd = w_feed_h.size(1) - H,
                E = w_out.size(0), KA = K * A;
  // the products of the backward pass read each weight transposed
  const Linear feed_h_t(w_feed_h.t()), q_h_feed_t(w_q_h_feed.t()), out_t(w_out.t());
  const auto f32 = acts.options();
  const auto gemm = w_feed_h.options();
  auto d_gates = at::empty({P, 4 * H}, gemm);
  auto d_query = at::empty({P, KA}, gemm);
  auto d_y = at::empty({P, E}, gemm);
  auto d_context = at::empty({P, K, A}, f32);
  auto d_s = at::empty({P, K, T}, f32);
  // gradients w.r.t. the state entering each step, from the steps after it
  auto d_h = at::zeros({B, H}, f32), d_c = at::zeros({B, H}, f32), d_feed = at::zeros({B, Fd}, f32);
  const bool drop_h = h_drop.defined(), drop_feed = feed_drop.defined();
  const bool* keep = ptr<bool>(mask);
  const std::vector<int64_t> ends = ends_of(batch_sizes);
  for (int64_t t = static_cast<int64_t>(batch_sizes.size()) - 1; t >= 0; --t) {
    const int64_t n = batch_sizes[t], start = ends[t];
    const int64_t prev = t > 0 ? ends[t - 1] : -1;
    for (int64_t r = 0; r < n; ++r) {  // the output's gradient, with the fed-back feature's
      const float* dys = ptr<float>(d_ys) + (start + r) * E;
      const float* dfe = ptr<float>(d_feed) + r * Fd;
      const float* fd = drop_feed ? ptr<float>(feed_drop) + (start + r) * Fd : nullptr;
      Gemm* dy = ptr<Gemm>(d_y) + (start + r) * E;
      for (int64_t k = 0; k < E; ++k) store(&dy[k], dys[k] + (fd ? dfe[k] * fd[k] : dfe[k]));
    }
    const at::Tensor dx_out = out_t(d_y.narrow(0, start, n));  // (n, H + K*A)
    const Gemm* dxo = ptr<Gemm>(dx_out);
    for (int64_t r = 0; r < n; ++r) {
      float* dctx = ptr<float>(d_context) + (start + r) * KA;
      for (int64_t k = 0; k < KA; ++k) dctx[k] = load(dxo[r * (H + KA) + H + k]);
    }
    const float* pk = ptr<float>(pos_keys) + t * K * A * T;
    const float* pv = ptr<float>(pos_values) + t * K * T * A;
    at::parallel_for(0, n * K, 4, [&](int64_t j0, int64_t j1) {
      std::vector<float> dq(A);
      for (int64_t j = j0; j < j1; ++j) {
        const int64_t r = j / K, kk = j % K, p = start + r;
        const float* q = ptr<float>(qs) + (p * K + kk) * A;
        attend_backward(ptr<float>(d_context) + (p * K + kk) * A,
                        ptr<float>(d_scores) + (p * K + kk) * T,
                        ptr<float>(alphas) + (p * K + kk) * T, ptr<float>(keys_t) + j * A * T,
                        pk + kk * A * T, ptr<float>(values) + j * T * A, pv + kk * T * A,
                        keep + j * T, ptr<float>(d_s) + (p * K + kk) * T, dq.data(), A, T);
        Gemm* dqo = ptr<Gemm>(d_query) + (p * K + kk) * A;
        for (int64_t a = 0; a < A; ++a) store(&dqo[a], dq[a] * (1.f - q[a] * q[a]));
      }
    });
    const at::Tensor dx_q = q_h_feed_t(d_query.narrow(0, start, n));  // (n, H + Fd)
    const Gemm* dxq = ptr<Gemm>(dx_q);
    at::parallel_for(0, n, 8, [&](int64_t r0, int64_t r1) {
      for (int64_t r = r0; r < r1; ++r) {  // the LSTM cell
        const int64_t p = start + r;
        const float* act = ptr<float>(acts) + p * 4 * H;
        const float* tc = ptr<float>(tanh_cs) + p * H;
        const float* c_prev = prev >= 0 ? ptr<float>(cs) + (prev + r) * H : nullptr;
        const float* hd = drop_h ? ptr<float>(h_drop) + p * H : nullptr;
        float* dh_in = ptr<float>(d_h) + r * H;
        float* dc_in = ptr<float>(d_c) + r * H;
        Gemm* dg = ptr<Gemm>(d_gates) + p * 4 * H;
        for (int64_t k = 0; k < H; ++k) {
          const float i = act[k], f = act[H + k], g = act[2 * H + k], o = act[3 * H + k], th = tc[k];
          const float dho = load(dxo[r * (H + KA) + k]);
          const float dh = dh_in[k] + load(dxq[r * (H + Fd) + k]) + (hd ? dho * hd[k] : dho);
          const float dc = dc_in[k] + dh * o * (1.f - th * th);
          store(&dg[k], dc * g * i * (1.f - i));
          store(&dg[H + k], dc * (c_prev ? c_prev[k] : 0.f) * f * (1.f - f));
          store(&dg[2 * H + k], dc * i * (1.f - g * g));
          store(&dg[3 * H + k], dh * th * o * (1.f - o));
          dc_in[k] = dc * f;
        }
      }
    });
    const at::Tensor dx_fh = feed_h_t(d_gates.narrow(0, start, n));  // (n, Fd + H)
    const Gemm* dxf = ptr<Gemm>(dx_fh);
    for (int64_t r = 0; r < n; ++r) {
      float* dh = ptr<float>(d_h) + r * H;
      float* dfe = ptr<float>(d_feed) + r * Fd;
      for (int64_t k = 0; k < H; ++k) dh[k] = load(dxf[r * (Fd + H) + Fd + k]);
      for (int64_t k = 0; k < Fd; ++k) dfe[k] = load(dxf[r * (Fd + H) + k]) + load(dxq[r * (H + Fd) + H + k]);
    }
  }
  return {d_gates, d_query, d_y, d_context, d_s};
}

}  // namespace

void bind_decoder_loops(pybind11::module_& m) {
  // one entry per products' dtype: the caller picks by its weights' dtype
  m.def("decoder_forward_fp32", &decoder_forward<float>,
        "the scan decoder's teacher-forced steps (training), fp32 products");
  m.def("decoder_forward_bf16", &decoder_forward<uint16_t>, "the same, bf16 products");
  m.def("decoder_backward_fp32", &decoder_backward<float>, "their backward pass, fp32 products");
  m.def("decoder_backward_bf16", &decoder_backward<uint16_t>, "the same, bf16 products");
}
