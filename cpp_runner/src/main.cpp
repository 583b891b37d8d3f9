// compgen-sample: batched sampling from an exported compgen generator, without Python.
//
// Reads an export folder (model.ts: the TorchScript sampler; vocab.txt: one token per
// line, line i = id i; prototypes.txt: one prototype tuple per line, K tab-separated
// fields of space-separated token ids, already formatted for the model), draws --n
// samples in batches of --batch-size, and writes the samples TSV
//   x <TAB> y <TAB> logp <TAB> min_logp
// (tokens space-joined, a token that is a space written as U+2581; x before <sep>, y after it; logp = sum of the emitted tokens'
// log-probabilities up to </s>, min_logp = the smallest one; resampling filters use them).
// Prototype tuples are taken in file order starting at --offset, cycling, like the
// reference's cycle over a shuffled prototype set. Throughput goes to stderr.
//
// --lm BASE[,AUG] (built with -DCOMPGEN_KENLM=ON) adds a fifth column, lm_logp: the
// log10 probability of the sample's --lm-side under KenLM (see kenlm_scorer.hpp),
// computed here for every sample.
//
// --workers W decodes W batches at once, one per thread, each with W-th of the intra-op
// threads: at small batch sizes one decoder step is too small to keep several cores busy,
// independent batches are not. Batch i always takes the same prototypes and latent draws
// and the file keeps batch order, so greedy and beam output does not depend on W; with
// temperature sampling the token draws come from libtorch's one global generator and
// depend on thread timing when W > 1.
#include <ATen/Parallel.h>
#include <torch/script.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdlib>
#include <fstream>
#include <iomanip>
#include <memory>
#include <iostream>
#include <sstream>
#include <atomic>
#include <string>
#include <thread>
#include <vector>

#ifdef COMPGEN_WITH_KENLM
#include "kenlm_scorer.hpp"
#endif

namespace {

constexpr int64_t kPad = 0, kEos = 2, kSep = 4;

struct Options {
  std::string folder, out;
  int64_t n = 400, batch = 128, max_len = 45, seed = 0, offset = 0, beam_width = 4;
  std::string strategy = "greedy";
  double temperature = 1.0, vae_max_norm = 0.0;
  int threads = 0, workers = 1;
  std::string lm, lm_mix = "token", lm_side = "y";
  double lm_weight = 0.0;
  int lm_shared_by = 1;
};

[[noreturn]] void fail(const std::string& message) {
  std::cerr << "error: " << message << std::endl;
  std::exit(2);
}

void usage() {
  std::cerr << "usage: compgen-sample EXPORT_DIR -o OUT.tsv [--n N] [--batch-size B]\n"
               "       [--strategy greedy|temperature|mixed|beam] [--temperature T]\n"
               "       [--beam-width W] [--max-len L] [--seed S] [--offset O]\n"
               "       [--vae-max-norm M] [--threads K] [--workers W]\n"
               "       [--lm BASE[,AUG] [--lm-weight W] [--lm-mix token|sentence|geca]\n"
               "        [--lm-side y|x|xy] [--lm-shared-by K]]\n";
}

Options parse(int argc, char** argv) {
  Options o;
  std::vector<std::string> args(argv + 1, argv + argc);
  auto value = [&](size_t& i) -> std::string {
    if (i + 1 >= args.size()) fail("option " + args[i] + " needs a value");
    return args[++i];
  };
  auto number = [&](size_t& i) -> double {
    std::string name = args[i], text = value(i);
    char* end = nullptr;
    double v = std::strtod(text.c_str(), &end);
    if (end == text.c_str() || *end != '\0') fail("option " + name + ": not a number: " + text);
    return v;
  };
  for (size_t i = 0; i < args.size(); ++i) {
    const std::string& a = args[i];
    if (a == "-h" || a == "--help") { usage(); std::exit(0); }
    else if (a == "-o" || a == "--out") o.out = value(i);
    else if (a == "--n") o.n = static_cast<int64_t>(number(i));
    else if (a == "--batch-size") o.batch = static_cast<int64_t>(number(i));
    else if (a == "--max-len") o.max_len = static_cast<int64_t>(number(i));
    else if (a == "--seed") o.seed = static_cast<int64_t>(number(i));
    else if (a == "--offset") o.offset = static_cast<int64_t>(number(i));
    else if (a == "--beam-width") o.beam_width = static_cast<int64_t>(number(i));
    else if (a == "--temperature") o.temperature = number(i);
    else if (a == "--vae-max-norm") o.vae_max_norm = number(i);
    else if (a == "--threads") o.threads = static_cast<int>(number(i));
    else if (a == "--workers") o.workers = static_cast<int>(number(i));
    else if (a == "--strategy") o.strategy = value(i);
    else if (a == "--lm") o.lm = value(i);
    else if (a == "--lm-weight") o.lm_weight = number(i);
    else if (a == "--lm-mix") o.lm_mix = value(i);
    else if (a == "--lm-side") o.lm_side = value(i);
    else if (a == "--lm-shared-by") o.lm_shared_by = static_cast<int>(number(i));
    else if (!a.empty() && a[0] == '-') fail("unknown option " + a);
    else if (o.folder.empty()) o.folder = a;
    else fail("unexpected argument " + a);
  }
  if (o.folder.empty() || o.out.empty()) { usage(); fail("EXPORT_DIR and -o are required"); }
  if (o.n < 1 || o.batch < 1 || o.max_len < 1 || o.beam_width < 1)
    fail("--n, --batch-size, --max-len and --beam-width must be >= 1");
  if (o.temperature <= 0) fail("--temperature must be > 0");
  if (o.workers < 1) fail("--workers must be >= 1");
  if (o.lm_shared_by < 1) fail("--lm-shared-by must be >= 1");
#ifndef COMPGEN_WITH_KENLM
  if (!o.lm.empty()) fail("--lm: this runner was built without KenLM (-DCOMPGEN_KENLM=ON)");
#endif
  if (o.strategy != "greedy" && o.strategy != "temperature" && o.strategy != "mixed" &&
      o.strategy != "beam")
    fail("--strategy must be greedy, temperature, mixed or beam, not " + o.strategy);
  return o;
}

std::vector<std::string> read_vocab(const std::string& path) {
  std::ifstream in(path);
  if (!in) fail(path + ": cannot open vocabulary");
  std::vector<std::string> tokens;
  std::string line;
  while (std::getline(in, line)) tokens.push_back(line);
  if (tokens.size() < 6) fail(path + ": vocabulary too short");
  return tokens;
}

// prototypes[i][k] = token ids of prototype k of tuple i
std::vector<std::vector<std::vector<int64_t>>> read_prototypes(const std::string& path,
                                                                int64_t nproto,
                                                                int64_t vocab_size) {
  std::vector<std::vector<std::vector<int64_t>>> tuples;
  if (nproto == 0) return tuples;
  std::ifstream in(path);
  if (!in) fail(path + ": cannot open prototype list");
  std::string line;
  int64_t lineno = 0;
  while (std::getline(in, line)) {
    ++lineno;
    if (line.empty()) continue;
    std::vector<std::vector<int64_t>> tuple;
    std::stringstream fields(line);
    std::string field;
    while (std::getline(fields, field, '\t')) {
      std::vector<int64_t> ids;
      std::stringstream words(field);
      int64_t id;
      while (words >> id) {
        if (id < 0 || id >= vocab_size)
          fail(path + ":" + std::to_string(lineno) + ": token id out of range");
        ids.push_back(id);
      }
      tuple.push_back(ids);
    }
    if (static_cast<int64_t>(tuple.size()) != nproto)
      fail(path + ":" + std::to_string(lineno) + ": expected " + std::to_string(nproto) +
           " prototypes");
    tuples.push_back(tuple);
  }
  if (tuples.empty()) fail(path + ": no prototypes");
  return tuples;
}

torch::Tensor prior_z(int64_t batch, int64_t dim, double max_norm, torch::Generator& gen) {
  if (max_norm <= 0) return torch::zeros({batch, dim});
  auto direction = torch::randn({batch, dim}, gen);
  direction = direction / direction.norm(2, {1}, true).clamp_min(1e-12);
  return direction * (torch::rand({batch, 1}, gen) * max_norm);
}

// One batch: prototypes from the cycle at `cursor`, latent draws from its own generator.
struct Batch {
  torch::Tensor protos, z;
};

Batch make_batch(const std::vector<std::vector<std::vector<int64_t>>>& tuples, int64_t nproto,
                 int64_t latent, int64_t cursor, int64_t B, const Options& o, uint64_t seed) {
  int64_t T = 1;  // pad this batch's prototypes to one length
  for (int64_t b = 0; b < B && nproto > 0; ++b)
    for (const auto& p : tuples[(cursor + b) % tuples.size()])
      T = std::max<int64_t>(T, static_cast<int64_t>(p.size()));
  auto protos = torch::full({B, nproto, nproto > 0 ? T : 1}, kPad, torch::kLong);
  auto acc = protos.accessor<int64_t, 3>();
  for (int64_t b = 0; b < B && nproto > 0; ++b) {
    const auto& tuple = tuples[(cursor + b) % tuples.size()];
    for (int64_t k = 0; k < nproto; ++k)
      for (size_t t = 0; t < tuple[k].size(); ++t) acc[b][k][t] = tuple[k][t];
  }
  if (nproto == 0) protos = protos.slice(1, 0, 0);
  auto gen = at::detail::createCPUGenerator(seed);
  return {protos, prior_z(B, latent, o.vae_max_norm, gen)};
}

c10::ivalue::TupleElements decode(torch::jit::script::Module& model, const Batch& batch,
                                  const Options& o) {
  if (o.strategy == "beam")
    return model.get_method("beam")({batch.protos, batch.z, o.max_len, o.beam_width})
        .toTuple()->elements();
  const int mode = o.strategy == "greedy" ? 0 : o.strategy == "temperature" ? 1 : 2;
  return model.get_method("decode")({batch.protos, batch.z, o.max_len, o.temperature, mode})
      .toTuple()->elements();
}

// Scores each row's side with the LM, when there is one; counts the time it takes.
struct LmHook {
#ifdef COMPGEN_WITH_KENLM
  std::unique_ptr<compgen::NgramScorer> scorer;
#endif
  std::atomic<int64_t> nanoseconds{0}, sentences{0};
  bool active() const {
#ifdef COMPGEN_WITH_KENLM
    return scorer != nullptr;
#else
    return false;
#endif
  }
  double score(const std::vector<std::string>& x, const std::vector<std::string>& y) {
#ifdef COMPGEN_WITH_KENLM
    const auto start = std::chrono::steady_clock::now();
    const double s = scorer->score(scorer->side_words(x, y));
    nanoseconds += std::chrono::duration_cast<std::chrono::nanoseconds>(
        std::chrono::steady_clock::now() - start).count();
    ++sentences;
    return s;
#else
    (void)x, (void)y;
    return 0.0;
#endif
  }
};

// The TSV rows of one decoded batch.
std::string format_rows(const c10::ivalue::TupleElements& result,
                        const std::vector<std::string>& vocab, LmHook& lm) {
  auto tokens = result[0].toTensor().contiguous();
  auto logp = result[1].toTensor().contiguous();
  auto tok = tokens.accessor<int64_t, 2>();
  auto lp = logp.accessor<float, 2>();
  std::ostringstream out;
  for (int64_t b = 0; b < tokens.size(0); ++b) {
    std::string x, y;
    std::vector<std::string> x_words, y_words;
    bool after_sep = false;
    double total = 0.0, lowest = 0.0;
    for (int64_t t = 0; t < tokens.size(1); ++t) {
      const int64_t id = tok[b][t];
      if (id == kPad) break;
      total += lp[b][t];
      lowest = t == 0 ? lp[b][t] : std::min<double>(lowest, lp[b][t]);
      if (id == kEos) break;
      if (id == kSep && !after_sep) { after_sep = true; continue; }
      std::string& side = after_sep ? y : x;
      if (!side.empty()) side += ' ';
      const std::string word = vocab[id] == " " ? "\u2581" : vocab[id];  // as compgen/io.py
      side += word;
      if (lm.active()) (after_sep ? y_words : x_words).push_back(word);
    }
    out << x << '\t' << y << '\t' << total << '\t' << lowest;
    if (lm.active()) out << '\t' << std::setprecision(9) << lm.score(x_words, y_words)
                         << std::setprecision(6);
    out << '\n';
  }
  return out.str();
}

}  // namespace

int main(int argc, char** argv) {
  Options o = parse(argc, argv);
  LmHook lm;  // loaded first: a bad LM file stops the runner before anything is decoded
#ifdef COMPGEN_WITH_KENLM
  if (!o.lm.empty()) {
    compgen::LmOptions lo;
    const auto comma = o.lm.find(',');
    lo.base = o.lm.substr(0, comma);
    if (comma != std::string::npos) lo.aug = o.lm.substr(comma + 1);
    lo.mix = o.lm_mix, lo.side = o.lm_side, lo.weight = o.lm_weight, lo.shared_by = o.lm_shared_by;
    try {
      lm.scorer.reset(new compgen::NgramScorer(lo));
    } catch (const std::exception& e) {
      fail(e.what());
    }
  }
#endif
  const int threads = o.threads > 0 ? o.threads : at::get_num_threads();
  at::set_num_threads(std::max(1, threads / o.workers));
  torch::manual_seed(o.seed);
  torch::NoGradGuard no_grad;

  torch::jit::script::Module model;
  try {
    model = torch::jit::load(o.folder + "/model.ts");
  } catch (const c10::Error& e) {
    fail(o.folder + "/model.ts: cannot load TorchScript module");
  }
  model.eval();
  const int64_t nproto = model.attr("nproto").toInt();
  const int64_t latent = model.attr("latent").toInt();
  const auto vocab = read_vocab(o.folder + "/vocab.txt");
  const int64_t vocab_size = static_cast<int64_t>(vocab.size());
  const auto tuples = read_prototypes(o.folder + "/prototypes.txt", nproto, vocab_size);

  const int64_t n_batches = (o.n + o.batch - 1) / o.batch;
  auto batch_at = [&](int64_t i) {
    const int64_t B = std::min(o.batch, o.n - i * o.batch);
    return make_batch(tuples, nproto, latent, o.offset + i * o.batch, B, o,
                      static_cast<uint64_t>(o.seed) * 1000003ULL + static_cast<uint64_t>(i) + 1);
  };
  // The first calls of a TorchScript module profile and optimise its graph; keep that
  // one-off cost out of the reported throughput.
  decode(model, batch_at(0), o);

  std::vector<std::string> rows(n_batches);
  std::atomic<int64_t> next{0};
  auto work = [&]() {
    torch::NoGradGuard worker_no_grad;  // grad mode is per thread
    for (int64_t i = next++; i < n_batches; i = next++)
      rows[i] = format_rows(decode(model, batch_at(i), o), vocab, lm);
  };
  const auto start = std::chrono::steady_clock::now();
  std::vector<std::thread> pool;
  for (int w = 1; w < o.workers; ++w) pool.emplace_back(work);
  work();
  for (auto& t : pool) t.join();
  const double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();

  std::ofstream out(o.out + ".tmp");
  if (!out) fail(o.out + ": cannot write");
  out << "#x\ty\tlogp\tmin_logp" << (lm.active() ? "\tlm_logp\n" : "\n");
  for (const auto& r : rows) out << r;
  out.close();
  if (!out || std::rename((o.out + ".tmp").c_str(), o.out.c_str()) != 0) fail(o.out + ": cannot write");
  std::cerr << "sampled " << o.n << " in " << seconds << " s (" << o.n / seconds
            << " samples/s)" << std::endl;
  if (lm.active())
    std::cerr << "lm scored " << lm.sentences << " in " << lm.nanoseconds * 1e-9 << " s ("
              << lm.sentences / std::max(lm.nanoseconds * 1e-9, 1e-9) << " sentences/s)"
              << std::endl;
  return 0;
}
