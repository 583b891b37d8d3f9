// The training inputs as a token trie (compgen/decoding/input_trie.py): with
// --novel-inputs the decode loop masks <sep> at every step where a row's input so far is
// a complete training input. Node 0 is the root; off() a prefix of no training input.
#pragma once

#include <cstdint>
#include <map>
#include <vector>

namespace compgen {

class InputTrie {
 public:
  template <typename Inputs>
  explicit InputTrie(const Inputs& inputs) : children_(1), complete_(1, 0) {
    for (const auto& ids : inputs) {
      int64_t node = 0;
      for (int64_t token : ids) {
        auto it = children_[node].find(token);
        if (it == children_[node].end()) {
          const auto child = static_cast<int64_t>(children_.size());
          children_[node][token] = child;
          children_.emplace_back();
          complete_.push_back(0);
          node = child;
        } else {
          node = it->second;
        }
      }
      complete_[node] = 1;
    }
  }

  int64_t off() const { return static_cast<int64_t>(children_.size()); }

  int64_t advance(int64_t node, int64_t token) const {
    if (node == off()) return node;
    auto it = children_[node].find(token);
    return it == children_[node].end() ? off() : it->second;
  }

  // <sep> now would close a training input
  bool closes_known(int64_t node) const { return node != off() && complete_[node]; }

 private:
  std::vector<std::map<int64_t, int64_t>> children_;
  std::vector<char> complete_;
};

}  // namespace compgen
