#include "kenlm_scorer.hpp"

#include <cmath>
#include <fstream>
#include <stdexcept>

#include "lm/model.hh"
#include "lm/virtual_interface.hh"

namespace compgen {
namespace {

using Model = lm::base::Model;

std::unique_ptr<Model> load(const std::string& path) {
  if (!std::ifstream(path)) throw std::runtime_error("--lm " + path + ": no such file");
  lm::ngram::Config config;
  config.show_progress = false;
  config.messages = nullptr;                       // no ARPA advice on stderr
  config.arpa_complain = lm::ngram::Config::NONE;
  try {
    return std::unique_ptr<Model>(lm::ngram::LoadVirtual(path.c_str(), config));
  } catch (const std::exception& e) {
    std::string reason = e.what();
    const auto cut = reason.find_last_of('\n', reason.size() > 1 ? reason.size() - 2 : 0);
    if (cut != std::string::npos) reason = reason.substr(cut + 1);
    throw std::runtime_error("--lm " + path + ": not a KenLM model (" + reason + ")");
  }
}

// log10 scores of each word and </s>; `unknown` marks words the model maps to <unk>.
std::vector<float> token_scores(const Model& model, const std::vector<std::string>& words,
                                std::vector<bool>* unknown) {
  const auto& vocab = model.BaseVocabulary();
  std::vector<char> in(model.StateSize()), out(model.StateSize());
  model.BeginSentenceWrite(in.data());
  std::vector<float> scores;
  scores.reserve(words.size() + 1);
  for (size_t i = 0; i <= words.size(); ++i) {
    const lm::WordIndex id = i < words.size() ? vocab.Index(words[i]) : vocab.EndSentence();
    if (unknown) unknown->push_back(id == vocab.NotFound());
    scores.push_back(model.BaseScore(in.data(), id, out.data()));
    std::swap(in, out);
  }
  return scores;
}

double log10_add(double a, double b) {  // log10(10^a + 10^b)
  const double hi = std::max(a, b), lo = std::min(a, b);
  return hi + std::log10(1.0 + std::pow(10.0, lo - hi));
}

}  // namespace

struct NgramScorer::Impl {
  LmOptions options;
  std::unique_ptr<Model> base, aug;
};

NgramScorer::NgramScorer(const LmOptions& options) : impl_(new Impl{options, nullptr, nullptr}) {
  if (options.mix != "token" && options.mix != "sentence" && options.mix != "geca")
    throw std::runtime_error("--lm-mix must be token, sentence or geca, not " + options.mix);
  if (options.side != "y" && options.side != "x" && options.side != "xy")
    throw std::runtime_error("--lm-side must be y, x or xy, not " + options.side);
  impl_->base = load(options.base);
  if (!options.aug.empty()) impl_->aug = load(options.aug);
  if (options.weight != 0.0 && !impl_->aug)
    throw std::runtime_error("--lm-weight needs an augmented model (--lm BASE,AUG)");
}

NgramScorer::~NgramScorer() = default;

std::vector<std::string> NgramScorer::side_words(const std::vector<std::string>& x,
                                                 const std::vector<std::string>& y) const {
  const std::string& side = impl_->options.side;
  if (side == "y") return y;
  if (side == "x") return x;
  std::vector<std::string> words(x);
  words.push_back("<sep>");  // compgen/lm/scorer.py SIDE_SEPARATOR
  words.insert(words.end(), y.begin(), y.end());
  return words;
}

double NgramScorer::score(const std::vector<std::string>& words) const {
  const LmOptions& o = impl_->options;
  std::vector<bool> unknown;
  const auto base = token_scores(*impl_->base, words, nullptr);
  double base_total = 0.0;
  for (float s : base) base_total += s;
  if (!impl_->aug || o.weight == 0.0) return base_total;
  auto aug = token_scores(*impl_->aug, words, &unknown);
  // The aug model's <unk> stands for every base word it lacks (compgen/lm/vocabulary.py).
  const double share = std::log10(static_cast<double>(o.shared_by));
  double aug_total = 0.0;
  for (size_t i = 0; i < aug.size(); ++i) aug_total += aug[i] - (unknown[i] ? share : 0.0);
  const double w = o.weight;
  if (o.mix == "geca") {  // the reference's formula: natural-log logaddexp on log10 scores
    const double a = base_total + std::log(1.0 / (1.0 + w)), b = aug_total + std::log(w / (1.0 + w));
    const double hi = std::max(a, b);
    return hi + std::log1p(std::exp(std::min(a, b) - hi));
  }
  if (w == 1.0) return aug_total;
  if (o.mix == "sentence")
    return log10_add(std::log10(1.0 - w) + base_total, std::log10(w) + aug_total);
  double total = 0.0;  // token mix: (1 - w) p_B(w | h) + w p_A(w | h) per token
  for (size_t i = 0; i < base.size(); ++i)
    total += log10_add(std::log10(1.0 - w) + base[i],
                       std::log10(w) + aug[i] - (unknown[i] ? share : 0.0));
  return total;
}

}  // namespace compgen
