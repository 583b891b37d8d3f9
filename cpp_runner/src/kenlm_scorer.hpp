// N-gram scores inside the runner: KenLM's query library, the same mixtures as
// compgen/lm/scorer.py (a base model, optionally mixed with a model trained on a
// GECA-augmented corpus: token, sentence or geca mix). Scores are log10 probabilities of
// the sentence with <s> and </s> added, as the kenlm Python module's Model.score.
#pragma once

#include <memory>
#include <string>
#include <vector>

namespace compgen {

struct LmOptions {
  std::string base, aug;       // model files (ARPA or build_binary); aug may be empty
  std::string mix = "token";   // token | sentence | geca
  std::string side = "y";      // y | x | xy (x <sep> y)
  double weight = 0.0;         // the augmented model's weight (geca: ratio r)
  int shared_by = 1;           // events the aug model's <unk> mass is shared by (see scorer.py)
};

class NgramScorer {
 public:
  // Throws std::runtime_error naming the file when a model cannot be loaded.
  explicit NgramScorer(const LmOptions& options);
  ~NgramScorer();
  NgramScorer(const NgramScorer&) = delete;
  NgramScorer& operator=(const NgramScorer&) = delete;

  // log10 probability of one sentence (words without <s>/</s>); thread-safe.
  double score(const std::vector<std::string>& words) const;
  // The words the LM reads for one sample, per the side chosen.
  std::vector<std::string> side_words(const std::vector<std::string>& x,
                                      const std::vector<std::string>& y) const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace compgen
