// The n-gram part of the runner's filter and keep steps, as compgen/lm/rerank.py does it
// for the Python backends: every accepted candidate gets an lm_logprob (log10 of its side
// under the base model, or base mixed with the GECA-augmented model: kenlm_scorer.hpp),
// candidates below `min_lm_logprob` are rejected as they are decoded (so they do not count
// towards nsamples), and `rerank` decides the order in which the N best are kept.
// The job's lines: lm_base PATH, lm_aug PATH, lm_mix, lm_weight, lm_side, lm_shared_by,
// rerank model|lm|sum, min_lm_logprob X. Scoring needs the build with -DCOMPGEN_KENLM=ON.
#pragma once

#include <cctype>
#include <chrono>
#include <cmath>
#include <limits>
#include <memory>
#include <sstream>
#include <stdexcept>
#include <string>
#include <vector>

#ifdef COMPGEN_WITH_KENLM
#include "kenlm_scorer.hpp"
#endif

namespace compgen {

struct LmJob {
  std::string base, aug, mix = "token", side = "y", rerank = "model";
  double weight = 0.0;
  int shared_by = 1;
  bool has_floor = false;
  double min_logprob = 0.0;
};

// Reads one job line into `lm` when its key is an LM key; false for any other key.
inline bool read_lm_line(const std::string& key, std::istringstream& words, LmJob& lm) {
  auto number = [&]() {
    double v;
    if (!(words >> v)) throw std::runtime_error("job line " + key + ": number expected");
    return v;
  };
  if (key == "lm_base") lm.base = words.str();   // a path: the whole record's value
  else if (key == "lm_aug") lm.aug = words.str();
  else if (key == "lm_mix") words >> lm.mix;
  else if (key == "lm_side") words >> lm.side;
  else if (key == "lm_weight") lm.weight = number();
  else if (key == "lm_shared_by") lm.shared_by = static_cast<int>(number());
  else if (key == "rerank") words >> lm.rerank;
  else if (key == "min_lm_logprob") { lm.min_logprob = number(); lm.has_floor = true; }
  else return false;
  return true;
}

// The word KenLM reads for a vocabulary token (compgen/lm/scorer.py _word): KenLM splits
// on whitespace, so a space token is U+2581 and spaces inside a token become U+2581.
inline std::string lm_word(const std::string& token) {
  bool blank = true;
  for (unsigned char ch : token) blank = blank && std::isspace(ch);
  if (blank) return "\u2581";
  std::string word;
  for (char ch : token) word += ch == ' ' ? std::string("\u2581") : std::string(1, ch);
  return word;
}

class LmRanking {
 public:
  // Loads the models (throws std::runtime_error naming the file); no models: inactive.
  explicit LmRanking(const LmJob& job) : job_(job) {
    if (job.rerank != "model" && job.rerank != "lm" && job.rerank != "sum")
      throw std::runtime_error("--rerank must be model, lm or sum, not " + job.rerank);
    if (job.base.empty()) {
      if (job.rerank != "model" || job.has_floor)
        throw std::runtime_error("--rerank " + job.rerank + " and --min-lm-logprob need --lm");
      return;
    }
#ifdef COMPGEN_WITH_KENLM
    if (job.shared_by < 1) throw std::runtime_error("--lm-shared-by must be >= 1");
    LmOptions options;
    options.base = job.base, options.aug = job.aug, options.mix = job.mix;
    options.side = job.side, options.weight = job.weight, options.shared_by = job.shared_by;
    scorer_ = std::make_unique<NgramScorer>(options);
#else
    throw std::runtime_error("--lm: this runner was built without KenLM (-DCOMPGEN_KENLM=ON)");
#endif
  }

  bool active() const { return !job_.base.empty(); }

  // The export's vocabulary (ids -> tokens), read after the models are loaded.
  void use_vocabulary(const std::vector<std::string>& vocab) {
    words_.clear();
    for (const auto& token : vocab) words_.push_back(lm_word(token));
  }

  // lm_logprob of an accepted candidate (ids); NaN without an LM.
  double score(const std::vector<int64_t>& x, const std::vector<int64_t>& y) {
#ifdef COMPGEN_WITH_KENLM
    if (!scorer_) return std::numeric_limits<double>::quiet_NaN();
    const auto started = std::chrono::steady_clock::now();
    const double value = scorer_->score(scorer_->side_words(words(x), words(y)));
    seconds_ += std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count();
    ++sentences_;
    return value;
#else
    (void)x, (void)y;
    return std::numeric_limits<double>::quiet_NaN();
#endif
  }

  // --min-lm-logprob: false for a candidate that the floor rejects.
  bool above_floor(double lm_logprob) const {
    return !job_.has_floor || lm_logprob >= job_.min_logprob;
  }

  // The score the N best are chosen by (higher is better): the generator's log-probability
  // (nats), the LM's (log10), or their sum in nats (the product of the two probabilities).
  double rank_score(double logprob, double lm_logprob) const {
    if (job_.rerank == "lm") return lm_logprob;
    if (job_.rerank == "sum") return logprob + lm_logprob * std::log(10.0);
    return logprob;
  }

  int64_t sentences() const { return sentences_; }
  double seconds() const { return seconds_; }

 private:
  std::vector<std::string> words(const std::vector<int64_t>& ids) const {
    std::vector<std::string> out;
    out.reserve(ids.size());
    for (auto id : ids) out.push_back(words_[id]);
    return out;
  }

  LmJob job_;
#ifdef COMPGEN_WITH_KENLM
  std::unique_ptr<NgramScorer> scorer_;
#endif
  std::vector<std::string> words_;  // per vocabulary id: the word the LM reads
  int64_t sentences_ = 0;
  double seconds_ = 0.0;
};

}  // namespace compgen
