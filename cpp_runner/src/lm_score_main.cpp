// compgen-lm-score: KenLM scores of sample pairs, read as "x <TAB> y" lines on stdin, one
// log10 score per line on stdout, with the mixtures of compgen/lm/scorer.py
// (kenlm_scorer.hpp). Options: --lm BASE[,AUG] [--lm-weight W] [--lm-mix token|sentence|geca]
// [--lm-side y|x|xy] [--lm-shared-by K]. Built with -DCOMPGEN_KENLM=ON.
#include <sys/prctl.h>

#include <csignal>
#include <cstdlib>
#include <iomanip>
#include <iostream>
#include <sstream>
#include <string>
#include <vector>

#include "kenlm_scorer.hpp"

namespace {

[[noreturn]] void fail(const std::string& message) {
  std::cerr << "error: " << message << std::endl;
  std::exit(2);
}

std::vector<std::string> words(const std::string& text) {
  std::istringstream in(text);
  std::vector<std::string> out;
  for (std::string w; in >> w;) out.push_back(w);
  return out;
}

}  // namespace

int main(int argc, char** argv) {
  ::prctl(PR_SET_PDEATHSIG, SIGKILL);  // dies with its parent
  compgen::LmOptions o;
  std::string lm;
  std::vector<std::string> args(argv + 1, argv + argc);
  for (size_t i = 0; i < args.size(); ++i) {
    if (i + 1 >= args.size()) fail("option " + args[i] + " needs a value");
    const std::string& a = args[i];
    const std::string v = args[++i];
    if (a == "--lm") lm = v;
    else if (a == "--lm-weight") o.weight = std::atof(v.c_str());
    else if (a == "--lm-mix") o.mix = v;
    else if (a == "--lm-side") o.side = v;
    else if (a == "--lm-shared-by") o.shared_by = std::atoi(v.c_str());
    else fail("unknown option " + a);
  }
  if (lm.empty()) fail("--lm BASE[,AUG] is required");
  const auto comma = lm.find(',');
  o.base = lm.substr(0, comma);
  if (comma != std::string::npos) o.aug = lm.substr(comma + 1);
  if (o.shared_by < 1) fail("--lm-shared-by must be >= 1");
  try {
    compgen::NgramScorer scorer(o);
    std::cout << std::setprecision(9);
    for (std::string line; std::getline(std::cin, line);) {
      const auto tab = line.find('\t');
      const auto x = words(line.substr(0, tab));
      const auto y = tab == std::string::npos ? std::vector<std::string>() : words(line.substr(tab + 1));
      std::cout << scorer.score(scorer.side_words(x, y)) << '\n';
    }
  } catch (const std::exception& e) {
    fail(e.what());
  }
  return 0;
}
