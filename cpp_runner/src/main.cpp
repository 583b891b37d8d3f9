// compgen-sample: the whole sampling job on an exported compgen generator, in one process.
//
// `compgen sample EXPORT --backend cpp` starts this program once and writes the job to its
// standard input as length-prefixed records ("KEY BYTES\n" then BYTES bytes of value and a
// newline: the decoding contract from manifest.json, the sampling options, the filter), so
// no value (a path holding a newline) can become another record. The program loads model.ts once, then runs the
// sampling loop of compgen/sampling.py (collect_decoded): rounds of --batch-size prototype
// tuples taken in order from the job's selection of prototypes.txt (or the file of its
// length cut; cycling; at most
// max_rows rows), decoded with the loop of
// compgen/decoding.py (decode.hpp), filtered (valid x <sep> y, the rare-token rule,
// unique, novel against the training pairs shipped in the export, known tokens) until
// nsamples are accepted or max_rounds have run, then keeps the n most probable and
// writes the samples TSV  x <TAB> y <TAB> logprob  (atomically; to stdout without `out`).
// With an n-gram LM in the job (lm_ranking.hpp; the build with -DCOMPGEN_KENLM=ON) every
// accepted candidate is scored in the loop, a floor rejects candidates, the N best are
// kept in the --rerank order and the TSV gains an lm_logprob column.
// With `journal` every round's accepted samples are appended to OUT.partial as it ends;
// with resume_* records the loop goes on from where an interrupted run of the same job
// stopped (journal.hpp).
// With `raw 1` it writes every decoded row of one round as ids (export parity checks).
// The last line on stderr reports what happened:
// "done kept rounds strategy T decode_seconds seconds lm_sentences lm_seconds rows accepted";
// after every round "round ROUNDS ROWS ACCEPTED" (the progress bar's figures).
#include <ATen/Parallel.h>
#include <torch/script.h>

#include <sys/prctl.h>
#include <unistd.h>

#include <csignal>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <iostream>
#include <map>
#include <memory>
#include <set>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "decode.hpp"
#include "job.hpp"
#include "journal.hpp"
#include "lm_ranking.hpp"

namespace {

using compgen::fail;
using compgen::Ids;
using compgen::Job;
using compgen::numbers;
using compgen::read_job;

std::vector<std::string> read_vocab(const std::string& path) {
  std::ifstream in(path);
  if (!in) fail(path + ": cannot open vocabulary");
  std::vector<std::string> tokens;
  std::string line;
  while (std::getline(in, line)) tokens.push_back(line);
  return tokens;
}

std::vector<std::vector<Ids>> read_prototypes(const std::string& path, int64_t nproto,
                                              int64_t vocab_size) {
  std::vector<std::vector<Ids>> tuples;
  if (nproto == 0) return tuples;
  std::ifstream in(path);
  if (!in) fail(path + ": cannot open prototype list");
  std::string line;
  int64_t lineno = 0;
  while (std::getline(in, line)) {
    ++lineno;
    if (line.empty()) continue;
    std::vector<Ids> tuple;
    std::stringstream fields(line);
    std::string field;
    while (std::getline(fields, field, '\t')) {
      std::istringstream words(field);
      Ids ids = numbers(words);
      for (auto id : ids)
        if (id < 0 || id >= vocab_size)
          fail(path + ":" + std::to_string(lineno) + ": token id out of range");
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

std::string display(const std::string& token) { return token == " " ? "\u2581" : token; }

// The training pairs shipped in the export (train.tsv, tokens space-joined).
struct Training {
  std::set<Ids> inputs, outputs;
  std::set<int64_t> input_tokens, output_tokens;
};

Training read_training(const std::string& path, const std::vector<std::string>& vocab) {
  std::map<std::string, int64_t> index;
  for (size_t i = 0; i < vocab.size(); ++i) index[display(vocab[i])] = static_cast<int64_t>(i);
  std::ifstream in(path);
  if (!in) fail(path + ": cannot open the training pairs");
  Training t;
  std::string line;
  while (std::getline(in, line)) {
    if (line.empty() || line[0] == '#') continue;
    const auto tab = line.find('\t');
    if (tab == std::string::npos) fail(path + ": expected x<TAB>y lines");
    Ids sides[2];
    std::string texts[2] = {line.substr(0, tab), line.substr(tab + 1)};
    for (int s = 0; s < 2; ++s) {
      const auto cut = texts[s].find('\t');
      std::istringstream words(texts[s].substr(0, cut));
      std::string w;
      while (words >> w) {
        auto it = index.find(w);
        sides[s].push_back(it == index.end() ? -1 : it->second);
      }
    }
    t.inputs.insert(sides[0]);
    t.outputs.insert(sides[1]);
    t.input_tokens.insert(sides[0].begin(), sides[0].end());
    t.output_tokens.insert(sides[1].begin(), sides[1].end());
  }
  return t;
}

// compgen.resample.SampleFilter over ids.
class Filter {
 public:
  Filter(const Job& job, Training training) : job_(job), train_(std::move(training)) {
    tags_.insert(job.train_tags.begin(), job.train_tags.end());
    wanted_.insert(job.rule_ids.begin(), job.rule_ids.end());
  }

  // compgen.data.resample.SampleFilter.rejects_input: no datum with input x is accepted,
  // whatever its output (read-only: the decoding threads ask it at once).
  bool rejects_input(const Ids& x) const {
    if (x.empty()) return true;
    for (auto t : x)
      if (!train_.input_tokens.count(t)) return true;
    if (job_.novel && train_.inputs.count(x)) return true;
    if (job_.morphology) {
      Ids tags;
      if (!split_tags(x, tags) || tags.size() < 2) return true;
      std::set<int64_t> distinct(tags.begin(), tags.end());
      if (distinct.size() != tags.size()) return true;
      for (auto t : tags)
        if (!tags_.count(t)) return true;
    }
    return job_.rule == "contains" && !contains(x, job_.rule_ids);
  }

  bool accept(const Ids& row, Ids& x, Ids& y) {
    const auto& c = job_.contract;
    Ids tokens;
    for (auto id : row) {
      if (id == c.eos) break;
      if (id == c.bos || id == c.pad) continue;
      tokens.push_back(id);
    }
    if (std::count(tokens.begin(), tokens.end(), c.sep) != 1) return false;
    const auto at = std::find(tokens.begin(), tokens.end(), c.sep);
    x.assign(tokens.begin(), at);
    y.assign(at + 1, tokens.end());
    if (x.empty() || y.empty()) return false;
    Ids tags;
    const bool morph_ok = split_tags(x, tags);
    if (job_.morphology) {
      if (!morph_ok || tags.size() < 2) return false;
      std::set<int64_t> distinct(tags.begin(), tags.end());
      if (distinct.size() != tags.size()) return false;
      for (auto t : tags)
        if (!tags_.count(t)) return false;
    }
    if (job_.rule == "contains" && !contains(x, job_.rule_ids)) return false;
    if (job_.rule == "any") {  // compgen.resample.any_token_rule
      bool any = false;
      for (auto t : x) any = any || wanted_.count(t);
      for (auto t : y) any = any || wanted_.count(t);
      if (!any) return false;
    }
    if (job_.rule == "tags") {
      if (!morph_ok) return false;
      bool any = false;
      for (auto t : tags) any = any || wanted_.count(t);
      if (!any) return false;
    }
    if (seen_.count({x, y})) return false;
    if (job_.novel && (train_.inputs.count(x) || train_.outputs.count(y))) return false;
    for (auto t : x)
      if (!train_.input_tokens.count(t)) return false;
    for (auto t : y)
      if (!train_.output_tokens.count(t)) return false;
    seen_.insert({x, y});
    return true;
  }

 private:
  // compgen.resample.split_morph: the tags start at the first tag-like token.
  bool split_tags(const Ids& x, Ids& tags) const {
    bool shaped = false;
    for (auto t : x) shaped = shaped || (t < static_cast<int64_t>(job_.tag_shaped.size()) &&
                                         job_.tag_shaped[t]);
    if (!shaped) return false;
    size_t i = 0;
    while (i < x.size() && !job_.is_tag[x[i]]) ++i;
    tags.assign(x.begin() + i, x.end());
    return true;
  }

  static bool contains(const Ids& x, const Ids& gram) {
    if (gram.empty()) return true;
    if (gram.size() > x.size()) return false;
    for (size_t i = 0; i + gram.size() <= x.size(); ++i)
      if (std::equal(gram.begin(), gram.end(), x.begin() + i)) return true;
    return false;
  }

  const Job& job_;
  Training train_;
  std::set<int64_t> tags_, wanted_;
  std::set<std::pair<Ids, Ids>> seen_;
};

struct Sample {
  Ids x, y;
  double logprob;
  double lm_logprob;  // NaN without an LM
};

std::string join(const Ids& ids, const std::vector<std::string>& vocab) {
  std::string out;
  for (auto id : ids) {
    if (!out.empty()) out += ' ';
    out += display(vocab[id]);
  }
  return out;
}

std::string format_score(double v) {
  char buffer[64];
  std::snprintf(buffer, sizeof buffer, "%.6g", v);
  return buffer;
}

pid_t expected_parent = 0;

bool parent_gone() { return expected_parent != 0 && ::getppid() != expected_parent; }

// Die with the parent: the kernel sends SIGKILL when it exits. COMPGEN_PARENT_PID names
// the parent that started this process; if it is already gone, stop now.
void die_with_parent() {
  ::prctl(PR_SET_PDEATHSIG, SIGKILL);
  if (const char* parent = std::getenv("COMPGEN_PARENT_PID")) {
    expected_parent = static_cast<pid_t>(std::atol(parent));
    if (parent_gone()) std::_Exit(3);
  }
}

void write_output(const Job& job, const std::string& text) {
  if (job.out.empty()) {
    std::cout << text << std::flush;
    return;
  }
  // beside the output, renamed over it: never a half-written file (umask applies). Named
  // .NAME.PARENT_PID.runner.tmp: the parent's leftover-staging rule covers it.
  const auto slash = job.out.find_last_of('/');
  const std::string dir = slash == std::string::npos ? "" : job.out.substr(0, slash + 1);
  const std::string tmp = dir + "." + job.out.substr(dir.size()) + "." +
                          std::to_string(::getppid()) + ".runner.tmp";
  {
    std::ofstream out(tmp);
    if (!out) fail(job.out + ": cannot write");
    out << text;
    if (!out) { std::remove(tmp.c_str()); fail(job.out + ": cannot write"); }
  }
  // a runner whose parent is gone writes nothing (the parent's death also kills it)
  if (parent_gone() || std::rename(tmp.c_str(), job.out.c_str()) != 0) {
    std::remove(tmp.c_str());
    fail(job.out + ": cannot write");
  }
}

}  // namespace

int main() {
  die_with_parent();
  Job job = read_job(std::cin);
  const auto& c = job.contract;
  // the LM first: a missing or corrupt model file stops the job before anything else
  std::unique_ptr<compgen::LmRanking> lm;
  try {
    lm = std::make_unique<compgen::LmRanking>(job.lm);
  } catch (const std::exception& e) {
    fail(e.what());
  }
  at::set_num_threads(job.threads > 0 ? static_cast<int>(job.threads) : at::get_num_threads());
  torch::NoGradGuard no_grad;
  // The profiling executor would re-specialise the traced graphs for every batch size that
  // compaction produces (3-10x slower); the traced graphs are what should run.
  torch::jit::setGraphExecutorOptimize(false);
  const auto started = std::chrono::steady_clock::now();

  torch::jit::script::Module model;
  const std::string model_path = job.model.empty() ? job.folder + "/model.ts" : job.model;
  try {
    model = torch::jit::load(model_path);
  } catch (const c10::Error&) {
    fail(model_path + ": cannot load TorchScript module");
  }
  model.eval();
  const int64_t nproto = model.attr("nproto").toInt();
  const auto vocab = read_vocab(job.folder + "/vocab.txt");
  if (static_cast<int64_t>(vocab.size()) != c.vocab_size) fail("vocab.txt: size differs from the manifest");
  const auto tuples = read_prototypes(job.folder + "/" + job.prototypes_file, nproto,
                                     c.vocab_size);
  const int64_t cycle = std::max<int64_t>(1, static_cast<int64_t>(tuples.size()));
  for (auto t : job.tuples)
    if (t < 0 || t >= cycle) fail("job: tuple index outside " + job.prototypes_file);
  // sample i decodes the stored tuple selected[i % selected count]
  auto tuple_of = [&](int64_t sample) {
    if (job.tuples.empty()) return sample % cycle;
    return job.tuples[sample % static_cast<int64_t>(job.tuples.size())];
  };
  // Rows of a round are split over `workers` threads, one intra-op thread each: a decoder
  // step of one batch is too small to keep several cores busy, independent rows are not.
  // Every row's result depends only on its own prototypes and random draws.
  const int64_t workers = std::max<int64_t>(1, job.threads > 0 ? job.threads : at::get_num_threads());
  if (workers > 1) at::set_num_threads(1);
  compgen::Graphs graphs(model, model_path, job.compiled);
  std::vector<compgen::Stepper> steppers;
  for (int64_t w = 0; w < workers; ++w) steppers.emplace_back(graphs, c);

  compgen::InputStop stop_input;  // set once the filter exists (never for raw rows)
  std::unique_ptr<compgen::InputTrie> known_inputs;  // --novel-inputs, with the filter
  // Rows first .. first + B - 1 of the prototype cycle on one stepper.
  auto decode_part = [&](compgen::Stepper& stepper, int64_t first, int64_t B, int mode,
                         double temperature) {
    Ids ids(B), tuple_ids(B);
    int64_t width = std::max<int64_t>(1, c.prototype_width);
    for (int64_t b = 0; b < B; ++b) {
      ids[b] = first + b;
      tuple_ids[b] = tuple_of(first + b);
      for (int64_t k = 0; k < nproto; ++k)
        width = std::max<int64_t>(width, tuples[tuple_ids[b]][k].size());
    }
    auto protos = torch::full({B, nproto, nproto > 0 ? width : 1}, c.pad, torch::kLong);
    auto acc = protos.accessor<int64_t, 3>();
    for (int64_t b = 0; b < B && nproto > 0; ++b)
      for (int64_t k = 0; k < nproto; ++k)
        for (size_t t = 0; t < tuples[tuple_ids[b]][k].size(); ++t)
          acc[b][k][t] = tuples[tuple_ids[b]][k][t];
    auto z = job.zero_latent ? torch::zeros({B, c.latent})
                             : compgen::prior_z(c, static_cast<uint64_t>(job.seed), ids);
    if (mode == compgen::kBeam) return compgen::beam(stepper, c, protos, z, c.beam_width);
    return compgen::decode(stepper, c, protos, z, mode, temperature,
                           static_cast<uint64_t>(job.seed), ids, stop_input,
                           known_inputs.get());
  };

  auto decode_round = [&](int64_t first, int64_t B, int mode, double temperature) {
    const int64_t parts = std::min<int64_t>(workers, B);
    if (parts <= 1) return decode_part(steppers[0], first, B, mode, temperature);
    std::vector<compgen::Decoded> results(parts);
    std::vector<std::thread> pool;
    const int64_t chunk = (B + parts - 1) / parts;
    for (int64_t k = 0; k < parts; ++k) {
      const int64_t start = k * chunk, size = std::min(chunk, B - start);
      if (size <= 0) break;
      pool.emplace_back([&, k, start, size]() {
        torch::NoGradGuard worker_no_grad;  // grad mode is per thread
        results[k] = decode_part(steppers[k], first + start, size, mode, temperature);
      });
    }
    for (auto& t : pool) t.join();
    compgen::Decoded all;
    for (auto& r : results) {
      for (auto& row : r.tokens) all.tokens.push_back(std::move(row));
      for (auto& row : r.logp) all.logp.push_back(std::move(row));
    }
    return all;
  };

  double decode_seconds = 0.0;
  auto timed_round = [&](int64_t first, int64_t B, int mode, double temperature) {
    const auto t0 = std::chrono::steady_clock::now();
    auto result = decode_round(first, B, mode, temperature);
    decode_seconds += std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    return result;
  };

  if (job.raw) {  // every decoded row, as ids with its score: rounds of batch_size up to n
    std::ostringstream text;
    for (int64_t first = 0; first < job.n; first += job.batch) {
      auto result = timed_round(first, std::min(job.batch, job.n - first), job.mode,
                                job.temperature);
      for (size_t b = 0; b < result.tokens.size(); ++b) {
        double score = 0.0;
        for (float v : result.logp[b]) score += v;
        for (size_t t = 0; t < result.tokens[b].size(); ++t)
          text << (t ? " " : "") << result.tokens[b][t];
        text << '\t' << format_score(score) << '\n';
      }
    }
    write_output(job, text.str());
    const double total =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count();
    std::cerr << "done " << job.n << " 1 " << job.mode << " " << job.temperature << " "
              << decode_seconds << " " << total << " 0 0" << std::endl;
    return 0;
  }

  auto training = read_training(job.folder + "/train.tsv", vocab);
  if (job.novel_inputs) known_inputs = std::make_unique<compgen::InputTrie>(training.inputs);
  Filter filter(job, std::move(training));
  stop_input = [&filter](const Ids& x) { return filter.rejects_input(x); };
  lm->use_vocabulary(vocab);
  std::vector<Sample> kept;
  int mode = job.mode;
  double temperature = job.temperature;
  int64_t rounds = 0, stalled = 0, rows = 0;
  compgen::Journal journal;
  try {
    if (!job.journal.empty()) journal.open(job.journal);
  } catch (const std::exception& e) {
    fail(e.what());
  }
  if (job.resume.active) {  // the filter sees the journal's samples again: a later
    const auto& r = job.resume;  // duplicate is rejected as in the uninterrupted run
    for (const auto& [row, logprob] : r.samples) {
      Ids x, y;
      for (auto id : row)
        if (id < 0 || id >= c.vocab_size) fail("job: resume_sample id outside the vocabulary");
      const bool ok = filter.accept(row, x, y);
      const double lm_logprob = ok ? lm->score(x, y) : 0.0;
      if (!ok || !lm->above_floor(lm_logprob))
        fail(job.journal + ": a sample this job's filter does not accept (" + join(row, vocab) +
             "); run without --resume");
      kept.push_back({x, y, logprob, lm_logprob});
    }
    rounds = r.rounds, rows = r.first, stalled = r.stalled, mode = r.mode;
    temperature = r.temperature;
  }
  const int64_t wanted = std::max(job.nsamples, job.n);
  while (static_cast<int64_t>(kept.size()) < wanted && rounds < job.max_rounds) {
    const int64_t size = job.max_rows > 0 ? std::min(job.batch, job.max_rows - rows) : job.batch;
    if (size <= 0) break;
    ++rounds;
    auto result = timed_round(rows, size, mode, temperature);
    rows += size;
    const size_t before = kept.size();
    for (size_t b = 0; b < result.tokens.size(); ++b) {
      Ids x, y;
      if (!filter.accept(result.tokens[b], x, y)) continue;
      const double lm_logprob = lm->score(x, y);
      if (!lm->above_floor(lm_logprob)) continue;  // rejected like any other filter
      double score = 0.0;  // double, in step order (compgen.decoding.scores_of)
      for (float v : result.logp[b]) score += v;
      kept.push_back({x, y, score, lm_logprob});
    }
    stalled = kept.size() == before ? stalled + 1 : 0;
    if (job.raise_temperature && stalled >= job.patience) {
      if (mode == compgen::kGreedy || mode == compgen::kBeam) mode = compgen::kMixed;
      else temperature = std::round((temperature + 0.1) * 1000.0) / 1000.0;
      std::ostringstream line;  // one write: a runner killed mid-line leaves no half line
      line << "raised " << mode << " " << temperature << '\n';
      std::cerr << line.str() << std::flush;
      stalled = 0;
    }
    if (journal.active()) {
      std::string lines;  // the round's samples, then the state the next round starts from
      for (size_t k = before; k < kept.size(); ++k)
        lines += join(kept[k].x, vocab) + '\t' + join(kept[k].y, vocab) + '\t' +
                 compgen::exact(kept[k].logprob) + '\n';
      try {
        journal.record(lines, rounds, rows, stalled, mode, temperature);
      } catch (const std::exception& e) {
        fail(e.what());
      }
    }
    // the progress bar's figures (compgen.runtimes.cpp.run_harness reads them
    // live), once the round is in the journal; one write (std::cerr writes every << at
    // once: a runner killed between them left half a line)
    std::cerr << ("round " + std::to_string(rounds) + " " + std::to_string(rows) + " " +
                  std::to_string(kept.size()) + "\n")
              << std::flush;
  }
  // best first by the --rerank score rounded to 1e-4, ties in decoding order
  // (compgen.decoding.rank_key, compgen.lm.rerank.LmRanking.keep)
  auto rank = [&](const Sample& s) {
    return -std::floor(lm->rank_score(s.logprob, s.lm_logprob) * 1e4 + 0.5);
  };
  const size_t accepted = kept.size();
  std::stable_sort(kept.begin(), kept.end(),
                   [&](const Sample& a, const Sample& b) { return rank(a) < rank(b); });
  if (static_cast<int64_t>(kept.size()) > job.n) kept.resize(job.n);
  if (!kept.empty()) {
    std::ostringstream text;
    text << (lm->active() ? "#x\ty\tlogprob\tlm_logprob\n" : "#x\ty\tlogprob\n");
    for (const auto& s : kept) {
      text << join(s.x, vocab) << '\t' << join(s.y, vocab) << '\t' << format_score(s.logprob);
      if (lm->active()) text << '\t' << format_score(s.lm_logprob);
      text << '\n';
    }
    write_output(job, text.str());
  }
  const double total =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count();
  std::cerr << "done " << kept.size() << " " << rounds << " " << mode << " " << temperature << " "
            << decode_seconds << " " << total << " " << lm->sentences() << " " << lm->seconds()
            << " " << rows << " " << accepted << std::endl;
  return 0;
}
