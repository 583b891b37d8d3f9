// x W^T with W packed once for oneDNN (mkldnn::_reorder_linear_weight): a step loop
// multiplies the same weight dozens of times, and packing it per call (what at::mm does)
// costs as much as the product at these row counts. Falls back to at::mm where torch has
// no oneDNN.
#pragma once

#include <ATen/ATen.h>
#include <ATen/core/dispatch/Dispatcher.h>

namespace compgen {

class Linear {
 public:
  // weight (out, in), in the product dtype
  explicit Linear(const at::Tensor& weight) : weight_(weight.contiguous()) {
    const auto reorder = c10::Dispatcher::singleton().findSchema({"mkldnn::_reorder_linear_weight", ""});
    const auto apply = c10::Dispatcher::singleton().findSchema({"mkldnn::_linear_pointwise", ""});
    if (reorder && apply && at::hasMKLDNN()) {
      std::vector<c10::IValue> stack{weight_, c10::IValue()};
      reorder->callBoxed(&stack);
      packed_ = stack.at(0).toTensor();
      apply_ = *apply;
    }
  }

  // x (n, in) with contiguous rows -> (n, out) in the product dtype
  at::Tensor operator()(const at::Tensor& x) const {
    if (!apply_) return at::mm(x, weight_.t());
    std::vector<c10::IValue> stack{x, packed_, c10::IValue(), std::string("none"),
                                   c10::List<std::optional<at::Scalar>>(), c10::IValue()};
    apply_->callBoxed(&stack);
    return stack.at(0).toTensor();
  }

 private:
  at::Tensor weight_, packed_;
  std::optional<c10::OperatorHandle> apply_;
};

}  // namespace compgen
