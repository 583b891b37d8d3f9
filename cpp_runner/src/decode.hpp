// The decode loop of compgen/decoding.py over model.ts's traced prototype encoder, encoder
// and decoder step: greedy / temperature / mixed / beam, token masks, inverse-CDF draws
// from the counter-based random stream, finished rows compacted out of the batch, and
// each distinct prototype encoded once (compgen.decoding.PrototypeCache). The contract
// (ids, masks, widths, state layout) is what compgen/decoding.py writes into
// manifest.json; Python hands it to the runner.
#pragma once

#include <ATen/autocast_mode.h>
#include <torch/csrc/inductor/aoti_runner/model_container_runner_cpu.h>
#include <torch/script.h>

#include <algorithm>
#include <cmath>
#include <functional>
#include <limits>
#include <list>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "input_trie.hpp"
#include "random_stream.hpp"

namespace compgen {

struct StateSlot {
  std::string name;
  bool is_long = false;
  std::vector<int64_t> shape;  // per row
};

struct Contract {
  int64_t vocab_size = 0, max_len = 45, latent = 0, beam_width = 4, prototypes = 0;
  int64_t prototype_width = 0, bos = 1, eos = 2, pad = 0, sep = 4;
  double vae_max_norm = 0.0;
  std::vector<char> first_masked, later_masked;  // per vocabulary id
  std::vector<StateSlot> state;                  // in the step graph's order
};

constexpr int kGreedy = 0, kTemperature = 1, kMixed = 2, kBeam = 3;
constexpr float kNeg = -std::numeric_limits<float>::infinity();

// Decoded rows: token ids (pad after </s>) and each token's log-probability.
struct Decoded {
  std::vector<std::vector<int64_t>> tokens;
  std::vector<std::vector<float>> logp;
};

// The latent of each sample: zeros, or the vMF prior's draw (compgen.decoding.prior_z).
inline torch::Tensor prior_z(const Contract& c, uint64_t seed, const std::vector<int64_t>& ids) {
  const int64_t B = static_cast<int64_t>(ids.size()), Z = c.latent;
  auto z = torch::zeros({B, Z});
  if (c.vae_max_norm <= 0) return z;
  auto acc = z.accessor<float, 2>();
  const int64_t pairs = (Z + 1) / 2;
  for (int64_t b = 0; b < B; ++b) {
    std::vector<double> u(2 * pairs + 1), normal(2 * pairs);
    for (int64_t j = 0; j < 2 * pairs + 1; ++j)
      u[j] = stream_uniform(seed, ids[b], kLatentStep + j);
    for (int64_t i = 0; i < pairs; ++i) {
      const double radius = std::sqrt(-2.0 * std::log1p(-u[2 * i]));
      const double angle = 2.0 * M_PI * u[2 * i + 1];
      normal[i] = radius * std::cos(angle);
      normal[pairs + i] = radius * std::sin(angle);
    }
    double norm = 0.0;
    for (int64_t j = 0; j < Z; ++j) norm += normal[j] * normal[j];
    norm = std::max(std::sqrt(norm), 1e-12);
    for (int64_t j = 0; j < Z; ++j)
      acc[b][j] = static_cast<float>(normal[j] / norm * c.vae_max_norm * u[2 * pairs]);
  }
  return z;
}

// Inverse-CDF draw from softmax(row / T) (masked entries are -inf), in vocabulary order.
inline int64_t draw_token(const float* row, int64_t V, double temperature, double u) {
  double top = -std::numeric_limits<double>::infinity();
  for (int64_t i = 0; i < V; ++i) top = std::max(top, static_cast<double>(row[i]) / temperature);
  std::vector<double> running(V);
  double sum = 0.0;
  for (int64_t i = 0; i < V; ++i) {
    sum += std::exp(static_cast<double>(row[i]) / temperature - top);
    running[i] = sum;
  }
  const double target = u * sum;
  int64_t chosen = 0;
  for (int64_t i = 0; i < V; ++i) chosen += running[i] <= target;
  return std::min(chosen, V - 1);
}

inline int64_t argmax(const float* row, int64_t V) {
  int64_t best = 0;
  for (int64_t i = 1; i < V; ++i)
    if (row[i] > row[best]) best = i;
  return best;
}

// The prototype encoder's results (encoded, h_final, c_final; or the attention memory of
// every slot and the finals: Stepper::slot_memory) per distinct padded prototype, at most
// `budget` bytes, the least recently used dropped first.
class PrototypeCache {
 public:
  using Row = std::vector<int64_t>;
  using Entry = std::vector<torch::Tensor>;

  // compgen.decoding.prototypes.CACHE_BYTES: a job cycling through more distinct
  // prototypes than fit misses most of them on every pass
  explicit PrototypeCache(int64_t budget = int64_t{768} << 20) : budget_(budget) {}

  const Entry* find(const Row& row) {
    auto it = index_.find(row);
    if (it == index_.end()) return nullptr;
    order_.splice(order_.begin(), order_, it->second);  // most recently used first
    return &it->second->second;
  }

  void keep(const Row& row, Entry entry) {
    int64_t size = 0;
    for (const auto& t : entry) size += t.numel() * static_cast<int64_t>(t.element_size());
    if (size > budget_ || index_.count(row)) return;
    while (size_ + size > budget_ && !order_.empty()) {
      for (const auto& t : order_.back().second)
        size_ -= t.numel() * static_cast<int64_t>(t.element_size());
      index_.erase(order_.back().first);
      order_.pop_back();
    }
    order_.emplace_front(row, std::move(entry));
    index_[row] = order_.begin();
    size_ += size;
  }

 private:
  int64_t budget_, size_ = 0;
  std::list<std::pair<Row, Entry>> order_;
  std::map<Row, std::list<std::pair<Row, Entry>>::iterator> index_;
};

// The bf16 sampler's graphs run under CPU bf16 autocast (compgen/runtimes/torchscript_trace.py):
// switched on for one call, the thread's previous setting restored after it.
class AutocastScope {
 public:
  explicit AutocastScope(bool bf16) : on_(bf16) {
    if (!on_) return;
    was_ = at::autocast::is_autocast_enabled(at::kCPU);
    dtype_ = at::autocast::get_autocast_dtype(at::kCPU);
    at::autocast::set_autocast_enabled(at::kCPU, true);
    at::autocast::set_autocast_dtype(at::kCPU, at::kBFloat16);
  }
  ~AutocastScope() {
    if (!on_) return;
    at::autocast::set_autocast_enabled(at::kCPU, was_);
    at::autocast::set_autocast_dtype(at::kCPU, dtype_);
  }
  AutocastScope(const AutocastScope&) = delete;
  AutocastScope& operator=(const AutocastScope&) = delete;

 private:
  bool on_, was_ = false;
  at::ScalarType dtype_ = at::kBFloat16;
};

// The sampler's three graphs, shared by every stepper. The fp32 decoder step (the per-step
// hot path) is frozen (weights as constants) and optimised for inference once, as
// compgen/export/torchscript_decoder.py does: a linear layer becomes a product with its
// weight transposed once, 1.7x faster per step at batch 1. It is frozen from a copy of its
// own (freezing edits module types the graphs share); the bf16 step runs as traced
// (libtorch's freezing leaves it calling a method it removed). With `compiled`, a folder of
// libraries compiled by AOTInductor (compgen/runtimes/inductor.py), the steppers run
// those for the encoder and the step.
struct Graphs {
  Graphs(torch::jit::script::Module& model, const std::string& path, std::string compiled_dir)
      : prototypes(model.attr("prototypes").toModule()),
        encoder(model.attr("encoder").toModule()),
        step(model.attr("step").toModule()),
        bf16(model.hasattr("bf16") && model.attr("bf16").toBool()),
        compiled(std::move(compiled_dir)) {
    if (bf16) return;
    auto copy = torch::jit::load(path).attr("step").toModule();
    copy.eval();
    step = torch::jit::optimize_for_inference(copy);
  }

  torch::jit::script::Module prototypes, encoder, step;
  bool bf16;
  std::string compiled;
};

// One graph as a function of tensors: a TorchScript module (the bf16 sampler's replayed
// under bf16 autocast), or a library compiled by AOTInductor (one runner per stepper: a
// runner runs one call at a time; its code assumes the strides it was compiled for,
// contiguous ones).
class Graph {
 public:
  Graph(const torch::jit::script::Module& module, bool bf16) : module_(module), bf16_(bf16) {}
  explicit Graph(const std::string& library)
      : compiled_(std::make_shared<torch::inductor::AOTIModelContainerRunnerCpu>(library)) {}

  std::vector<torch::Tensor> operator()(std::vector<torch::Tensor> inputs) {
    if (compiled_) {
      for (auto& t : inputs) t = t.contiguous();
      return compiled_->run(inputs);
    }
    AutocastScope autocast(bf16_);
    std::vector<c10::IValue> args(inputs.begin(), inputs.end());
    const auto result = module_.forward(args).toTuple();  // kept: the loop reads into it
    std::vector<torch::Tensor> out;
    for (const auto& v : result->elements()) out.push_back(v.toTensor());
    return out;
  }

 private:
  torch::jit::script::Module module_;
  bool bf16_ = false;
  std::shared_ptr<torch::inductor::AOTIModelContainerRunnerCpu> compiled_;
};

// The compiled libraries replace the encoder and the step; prototypes are always encoded
// by the TorchScript graph (its fused LSTM; AOTInductor unrolls it into per-step products).
inline Graph make_graph(const Graphs& graphs, const torch::jit::script::Module& module,
                        const std::string& library) {
  if (graphs.compiled.empty() || library.empty()) return Graph(module, graphs.bf16);
  return Graph(graphs.compiled + "/" + library);
}

class Stepper {
 public:
  Stepper(Graphs& graphs, const Contract& c)
      : prototypes_(make_graph(graphs, graphs.prototypes, "")),
        encoder_(make_graph(graphs, graphs.encoder, "encoder.so")),
        step_(make_graph(graphs, graphs.step, "step.so")),
        c_(c),
        memory_rows_(!graphs.bf16 && graphs.compiled.empty()) {}

  // Encode (each distinct prototype once, cached) and set up the initial state.
  void start(const torch::Tensor& protos, const torch::Tensor& z) {
    const int64_t B = protos.size(0), K = protos.size(1), T = protos.size(2);
    std::vector<torch::Tensor> enc;
    if (K == 0) {  // nothing to encode: the encoder graph does not read these
      auto empty = torch::zeros({B, 0, 1});
      enc = encoder_({empty.unsqueeze(-1), empty, empty, protos, z});
    } else {
      auto flat = protos.reshape({B * K, T}).contiguous();
      const int64_t* ids = flat.data_ptr<int64_t>();
      std::vector<PrototypeCache::Row> rows(B * K);
      std::map<PrototypeCache::Row, int64_t> missing;  // row -> position in the fresh batch
      std::vector<int64_t> missing_at;
      for (int64_t r = 0; r < B * K; ++r) {
        rows[r].assign(ids + r * T, ids + (r + 1) * T);
        if (!cache_.find(rows[r]) && !missing.count(rows[r])) {
          missing[rows[r]] = static_cast<int64_t>(missing_at.size());
          missing_at.push_back(r);
        }
      }
      std::map<PrototypeCache::Row, PrototypeCache::Entry> fresh;
      if (!missing_at.empty()) {
        auto seqs = flat.index_select(0, torch::tensor(missing_at));
        auto out = prototypes_({seqs});
        if (memory_rows_) out = slot_memory(out, seqs, K, z.size(1));
        for (const auto& [row, j] : missing) {
          PrototypeCache::Entry entry;
          for (const auto& t : out) entry.push_back(t[j].clone());
          fresh[row] = entry;
        }
      }
      const size_t kept = memory_rows_ ? 5 : 3;
      std::vector<std::vector<torch::Tensor>> parts(kept);
      for (int64_t r = 0; r < B * K; ++r) {
        auto it = fresh.find(rows[r]);
        const auto& entry = it != fresh.end() ? it->second : *cache_.find(rows[r]);
        for (size_t i = 0; i < kept; ++i)  // memory rows: slot k's keys, values and mask
          parts[i].push_back(memory_rows_ && i < 3 ? entry[i][r % K] : entry[i]);
      }
      for (auto& [row, entry] : fresh) cache_.keep(row, std::move(entry));
      std::vector<torch::Tensor> gathered(kept);
      for (size_t i = 0; i < kept; ++i) {
        auto stacked = torch::stack(parts[i]);
        std::vector<int64_t> shape{B, K};
        shape.insert(shape.end(), stacked.sizes().begin() + 1, stacked.sizes().end());
        gathered[i] = stacked.view(shape);
      }
      if (memory_rows_) {  // the initial state reads the finals only: one position each
        auto one = torch::zeros({B, K, 1, encoded_width_}, encoded_type_);
        auto start = encoder_({one, gathered[3], gathered[4],
                               protos.slice(2, 0, 1).contiguous(), z});
        enc = {gathered[0], gathered[1], gathered[2], start[3], start[4]};
      } else {
        enc = encoder_({gathered[0], gathered[1], gathered[2], protos, z});
      }
    }
    memory_ = {enc[0], enc[1], protos, enc[2], z};
    state_.clear();
    for (const auto& slot : c_.state) {
      std::vector<int64_t> shape{B};
      shape.insert(shape.end(), slot.shape.begin(), slot.shape.end());
      if (slot.name == "h") state_.push_back(enc[3]);
      else if (slot.name == "c") state_.push_back(enc[4]);
      else if (slot.name == "past_tok") state_.push_back(torch::full(shape, c_.pad, torch::kLong));
      else state_.push_back(torch::zeros(shape, slot.is_long ? torch::kLong : torch::kFloat));
    }
  }

  torch::Tensor step(const std::vector<int64_t>& token) {
    std::vector<torch::Tensor> args{torch::tensor(token, torch::kLong)};
    for (const auto& t : state_) args.push_back(t);
    for (const auto& t : memory_) args.push_back(t);
    auto out = step_(std::move(args));
    for (size_t i = 0; i < state_.size(); ++i) state_[i] = out[i + 1];
    return out[0].contiguous();
  }

  void take(const std::vector<int64_t>& rows, bool memory) {
    auto index = torch::tensor(rows, torch::kLong);
    for (auto& t : state_) t = t.index_select(0, index);
    if (memory)
      for (auto& t : memory_) t = t.index_select(0, index);
  }

 private:
  // compgen.decoding.prototypes.PrototypeCache with ops: new prototypes `seqs` (N, T) and
  // their encoder results -> the rows kept: keys, values and mask of every slot (the
  // encoder graph run once with each prototype in all K slots), h_final, c_final.
  std::vector<torch::Tensor> slot_memory(const std::vector<torch::Tensor>& out,
                                         const torch::Tensor& seqs, int64_t K, int64_t latent) {
    auto every_slot = [K](const torch::Tensor& t) {
      auto shape = t.sizes().vec();
      shape.insert(shape.begin() + 1, K);
      return t.unsqueeze(1).expand(shape).contiguous();
    };
    encoded_width_ = out[0].size(-1);
    encoded_type_ = out[0].scalar_type();
    auto memory = encoder_({every_slot(out[0]), every_slot(out[1]), every_slot(out[2]),
                            every_slot(seqs), torch::zeros({seqs.size(0), latent})});
    return {memory[0], memory[1], memory[2], out[1], out[2]};
  }

  Graph prototypes_, encoder_, step_;
  const Contract& c_;
  // the attention memory kept per prototype (fp32 TorchScript graphs: exact products;
  // compgen.decoding.prototypes.PrototypeCache explains why that is the same memory)
  bool memory_rows_;
  int64_t encoded_width_ = 0;
  at::ScalarType encoded_type_ = at::kFloat;
  std::vector<torch::Tensor> memory_, state_;
  PrototypeCache cache_;
};

// Given the ids of an input x, true when the job's filter keeps no datum with it.
using InputStop = std::function<bool(const std::vector<int64_t>&)>;

// Greedy / temperature / mixed decoding of one sequence per row (compgen.decoding.decode).
// With stop_input, a row stops once it has written `x <sep>` for an x the filter rejects,
// or a second <sep> (compgen.decoding.search.GreedySearch's stop_input). With
// known_inputs, <sep> is masked while a row's input so far is one of them (--novel-inputs).
inline Decoded decode(Stepper& stepper, const Contract& c, const torch::Tensor& protos,
                      const torch::Tensor& z, int mode, double temperature, uint64_t seed,
                      const std::vector<int64_t>& ids, const InputStop& stop_input = {},
                      const InputTrie* known_inputs = nullptr) {
  const int64_t B = protos.size(0), V = c.vocab_size, L = c.max_len;
  Decoded out{std::vector<std::vector<int64_t>>(B, std::vector<int64_t>(L, c.pad)),
              std::vector<std::vector<float>>(B, std::vector<float>(L, 0.0f))};
  stepper.start(protos, z);
  std::vector<int64_t> rows(B), token(B, c.bos);
  for (int64_t b = 0; b < B; ++b) rows[b] = b;
  std::vector<char> after_sep(B, 0);
  std::vector<int64_t> node(B, 0);  // each row's input so far in known_inputs
  std::vector<float> masked(V);
  int64_t used = 0;
  for (int64_t t = 0; t < L; ++t) {
    auto logp = stepper.step(token);
    const float* data = logp.data_ptr<float>();
    const auto& mask = t == 0 ? c.first_masked : c.later_masked;
    std::vector<int64_t> live, next, next_node;
    std::vector<char> next_sep;
    for (size_t r = 0; r < rows.size(); ++r) {
      for (int64_t i = 0; i < V; ++i) masked[i] = mask[i] ? kNeg : data[r * V + i];
      if (known_inputs && known_inputs->closes_known(node[r])) masked[c.sep] = kNeg;
      int64_t chosen = argmax(masked.data(), V);
      if (mode != kGreedy && !(mode == kMixed && after_sep[r]))
        chosen = draw_token(masked.data(), V, temperature, stream_uniform(seed, ids[rows[r]], t));
      out.tokens[rows[r]][t] = chosen;
      out.logp[rows[r]][t] = masked[chosen];
      bool stop = chosen == c.eos;
      if (!stop && chosen == c.sep && stop_input) {
        const auto& row = out.tokens[rows[r]];
        stop = after_sep[r] || stop_input(std::vector<int64_t>(row.begin(), row.begin() + t));
      }
      if (!stop) {
        live.push_back(static_cast<int64_t>(r));
        next.push_back(chosen);
        next_sep.push_back(after_sep[r] || chosen == c.sep);
        if (known_inputs) next_node.push_back(known_inputs->advance(node[r], chosen));
      }
    }
    used = t + 1;
    if (live.empty()) break;
    if (live.size() < rows.size()) {
      stepper.take(live, true);
      std::vector<int64_t> kept;
      for (auto r : live) kept.push_back(rows[r]);
      rows = kept;
    }
    token = next;
    after_sep = next_sep;
    if (known_inputs) node = next_node;
  }
  for (int64_t b = 0; b < B; ++b) {
    out.tokens[b].resize(used);
    out.logp[b].resize(used);
  }
  return out;
}

// Beam search (compgen.decoding.beam); returns the best hypothesis of each row.
inline Decoded beam(Stepper& stepper, const Contract& c, const torch::Tensor& protos,
                    const torch::Tensor& z, int64_t W) {
  const int64_t B = protos.size(0), V = c.vocab_size, L = c.max_len;
  stepper.start(protos, z);
  std::vector<int64_t> copies;  // W copies of each row: encoded once
  for (int64_t b = 0; b < B; ++b)
    for (int64_t w = 0; w < W; ++w) copies.push_back(b);
  stepper.take(copies, true);
  const double neg = -std::numeric_limits<double>::infinity();
  std::vector<double> scores(B * W, neg);
  for (int64_t b = 0; b < B; ++b) scores[b * W] = 0.0;
  std::vector<std::vector<int64_t>> hist(B * W);
  std::vector<std::vector<float>> hist_lp(B * W);
  std::vector<char> done(B * W, 0);
  std::vector<int64_t> token(B * W, c.bos);
  std::vector<float> row(V);
  std::vector<std::pair<double, int64_t>> cand(W * V);
  for (int64_t t = 0; t < L; ++t) {
    auto logp = stepper.step(token);
    const float* data = logp.data_ptr<float>();
    const auto& mask = t == 0 ? c.first_masked : c.later_masked;
    std::vector<double> new_scores(B * W);
    std::vector<std::vector<int64_t>> new_hist(B * W);
    std::vector<std::vector<float>> new_lp(B * W);
    std::vector<char> new_done(B * W);
    std::vector<int64_t> parents(B * W);
    std::vector<float> chosen_lp(B * W);
    for (int64_t b = 0; b < B; ++b) {
      std::vector<float> rows_lp(W * V);
      for (int64_t w = 0; w < W; ++w) {
        const int64_t r = b * W + w;
        for (int64_t i = 0; i < V; ++i) {
          float v = mask[i] ? kNeg : data[r * V + i];
          if (done[r]) v = i == c.pad ? 0.0f : kNeg;
          rows_lp[w * V + i] = v;
          cand[w * V + i] = {scores[r] + static_cast<double>(v), w * V + i};
        }
      }
      std::partial_sort(cand.begin(), cand.begin() + W, cand.end(),
                        [](const auto& a, const auto& b) {
                          return a.first > b.first || (a.first == b.first && a.second < b.second);
                        });
      for (int64_t k = 0; k < W; ++k) {
        const int64_t flat = cand[k].second, parent = b * W + flat / V, tok = flat % V;
        const int64_t r = b * W + k;
        new_scores[r] = cand[k].first;
        new_hist[r] = hist[parent];
        new_hist[r].push_back(tok);
        new_lp[r] = hist_lp[parent];
        new_lp[r].push_back(rows_lp[flat]);
        new_done[r] = done[parent] || tok == c.eos;
        parents[r] = parent;
        token[r] = tok;
      }
    }
    scores.swap(new_scores);
    hist.swap(new_hist);
    hist_lp.swap(new_lp);
    done.swap(new_done);
    if (std::all_of(done.begin(), done.end(), [](char d) { return d != 0; })) break;
    stepper.take(parents, false);
  }
  Decoded out;
  for (int64_t b = 0; b < B; ++b) {
    out.tokens.push_back(hist[b * W]);
    out.logp.push_back(hist_lp[b * W]);
  }
  return out;
}

}  // namespace compgen
