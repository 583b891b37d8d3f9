// The job of compgen-sample (main.cpp): length-prefixed records on standard input,
// written by compgen/runtimes/cpp.py job_text.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <iostream>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "decode.hpp"
#include "journal.hpp"
#include "lm_ranking.hpp"

namespace compgen {

using Ids = std::vector<int64_t>;

[[noreturn]] inline void fail(const std::string& message) {
  std::cerr << "error: " << message << std::endl;
  std::exit(2);
}

struct Job {
  std::string folder, out, model;  // model: the sampler to load (default folder/model.ts)
  std::string prototypes_file = "prototypes.txt";  // the tuples of the job's length cut
  std::string compiled;             // a folder of AOTInductor packages to run instead
  Contract contract;
  int64_t n = 400, nsamples = 400, batch = 128, max_rounds = 200, patience = 3, threads = 0;
  int64_t seed = 0;
  int mode = 0;
  double temperature = 1.0;
  bool raise_temperature = false, raw = false, zero_latent = false;
  // filter
  bool novel = true, morphology = false;
  bool novel_inputs = false;  // mask <sep> after a training input (input_trie.hpp)
  std::string rule = "none";  // none | contains | tags | any
  Ids rule_ids, train_tags;
  // the stored tuples the samples cycle through (compgen.runtime.tuple_selection; empty:
  // all, in order) and the rows decoded at most (0: no bound; one pass of a deterministic
  // decoder)
  Ids tuples;
  int64_t max_rows = 0;
  std::vector<char> is_tag, tag_shaped;  // per vocabulary id (morphology)
  LmJob lm;                              // n-gram scores, floor and rerank
  std::string journal;                   // OUT.partial: every round appended (journal.hpp)
  Resume resume;                         // where an interrupted run of this job stopped
};

// the bounds of compgen.decoding.options UPPER_BOUNDS (a direct call of the runner is
// held to them too); threads: compgen.device.max_threads, 8 per core, at least 64
constexpr double kMaxCount = 1099511627776.0;  // 2^40 samples, rounds, rows
constexpr double kUncappedRounds = 4611686018427387904.0;  // 2^62: compgen's max_rounds 0
constexpr double kMaxBatch = 65536;
constexpr double kMaxBeamWidth = 1024;
constexpr double kMaxLen = 1 << 20;

inline double max_threads() {
  return std::max(64.0, 8.0 * std::max(1u, std::thread::hardware_concurrency()));
}

inline Ids numbers(std::istringstream& in) {
  Ids out;
  int64_t v;
  while (in >> v) out.push_back(v);
  return out;
}

inline std::vector<char> flags(const Ids& ids, int64_t size) {
  std::vector<char> out(size, 0);
  for (auto i : ids)
    if (i >= 0 && i < size) out[i] = 1;
  return out;
}

// One record of the job: "KEY BYTES\n", BYTES bytes of value, "\n". False at the end.
inline bool next_record(std::istream& in, std::string& key, std::string& value) {
  std::string header;
  if (!std::getline(in, header)) return false;
  std::istringstream fields(header);
  long long size = -1;
  std::string extra;
  if (!(fields >> key >> size) || size < 0 || size > (1LL << 30) || (fields >> extra))
    fail("job: bad record header '" + header.substr(0, 80) + "'");
  value.assign(static_cast<size_t>(size), '\0');
  if (!in.read(value.data(), size) || in.get() != '\n') fail("job: record " + key + " is truncated");
  return true;
}

inline Job read_job(std::istream& in) {
  Job job;
  auto& c = job.contract;
  std::string key, value;
  Ids first, later;
  while (next_record(in, key, value)) {
    std::istringstream words(value);
    const std::string& line = key;
    auto number = [&]() {
      double v;
      if (!(words >> v)) fail("job record '" + line + "': number expected");
      return v;
    };
    // a count or width within [low, high]: a huge value (1e6 threads or beams aborted the
    // runner; 2^70 turned negative on its way to int64) is one error line naming it
    auto whole = [&](double low, double high) {
      const double v = number();
      if (!(v >= low && v <= high) || v != std::floor(v)) {
        std::ostringstream why;
        why << "job record '" << line << "' " << v << ": must be a whole number from "
            << static_cast<int64_t>(low) << " to " << static_cast<int64_t>(high);
        fail(why.str());
      }
      return static_cast<int64_t>(v);
    };
    bool handled = false;  // a record of lm_ranking.hpp or journal.hpp
    try {
      handled = read_lm_line(key, words, job.lm) ||
                read_resume_record(key, value, job.resume);
    } catch (const std::exception& e) {
      fail(e.what());
    }
    if (handled) continue;
    if (key == "folder") job.folder = value;
    else if (key == "prototypes_file") job.prototypes_file = value;
    else if (key == "out") job.out = value;
    else if (key == "journal") job.journal = value;
    else if (key == "model") job.model = value;
    else if (key == "compiled") job.compiled = value;
    else if (key == "n") job.n = whole(1, kMaxCount);
    else if (key == "nsamples") job.nsamples = whole(1, kMaxCount);
    else if (key == "batch_size") job.batch = whole(1, kMaxBatch);
    else if (key == "max_rounds") job.max_rounds = whole(1, kUncappedRounds);
    else if (key == "patience") job.patience = whole(0, kMaxCount);
    else if (key == "threads") job.threads = whole(0, max_threads());
    else if (key == "seed") { words >> job.seed; }
    else if (key == "mode") job.mode = static_cast<int>(number());
    else if (key == "temperature") job.temperature = number();
    else if (key == "raise_temperature") job.raise_temperature = number() != 0;
    else if (key == "raw") job.raw = number() != 0;
    else if (key == "zero_latent") job.zero_latent = number() != 0;
    else if (key == "novel") job.novel = number() != 0;
    else if (key == "morphology") job.morphology = number() != 0;
    else if (key == "novel_inputs") job.novel_inputs = number() != 0;
    else if (key == "rule") { words >> job.rule; job.rule_ids = numbers(words); }
    else if (key == "train_tags") job.train_tags = numbers(words);
    else if (key == "tuples") job.tuples = numbers(words);
    else if (key == "max_rows") job.max_rows = whole(0, kMaxCount);
    else if (key == "is_tag") job.is_tag = flags(numbers(words), 1 << 20);
    else if (key == "tag_shaped") job.tag_shaped = flags(numbers(words), 1 << 20);
    else if (key == "vocab_size") c.vocab_size = number();
    else if (key == "max_len") c.max_len = whole(1, kMaxLen);
    else if (key == "latent") c.latent = number();
    else if (key == "beam_width") c.beam_width = whole(1, kMaxBeamWidth);
    else if (key == "prototypes") c.prototypes = number();
    else if (key == "prototype_width") c.prototype_width = number();
    else if (key == "vae_max_norm") c.vae_max_norm = number();
    else if (key == "ids") { c.bos = number(); c.eos = number(); c.pad = number(); c.sep = number(); }
    else if (key == "first_step_masked") first = numbers(words);
    else if (key == "later_steps_masked") later = numbers(words);
    else if (key == "state") {
      StateSlot slot;
      std::string dtype;
      words >> slot.name >> dtype;
      slot.is_long = dtype == "int64";
      slot.shape = numbers(words);
      c.state.push_back(slot);
    } else fail("job: unknown key " + key);
  }
  if (job.folder.empty()) fail("job: no export folder");
  if (c.vocab_size < 6 || c.state.empty()) fail("job: no decoding contract");
  if (job.n < 1 || job.batch < 1 || job.max_rounds < 1 || c.beam_width < 1 || c.max_len < 1)
    fail("job: n, batch_size, max_rounds, beam_width and max_len must be >= 1");
  if (job.temperature <= 0) fail("job: temperature must be > 0");
  c.first_masked = flags(first, c.vocab_size);
  c.later_masked = flags(later, c.vocab_size);
  return job;
}

}  // namespace compgen
