// An operator defined and given a CPU kernel in C++: infralens::scaled_add(a, b, alpha) = a + alpha * b.
// Compiled and loaded by infralens.dispatch.extension.load_scaled_add().
#include <ATen/core/Tensor.h>
#include <ATen/ops/add.h>
#include <ATen/ops/empty_like.h>
#include <c10/util/irange.h>
#include <torch/library.h>

namespace {

// [kernel-start]
at::Tensor scaled_add_cpu(const at::Tensor& a, const at::Tensor& b, double alpha) {
  TORCH_CHECK(a.sizes() == b.sizes(), "scaled_add: a and b must have the same shape");
  TORCH_CHECK(a.scalar_type() == at::kFloat && b.scalar_type() == at::kFloat,
              "scaled_add: float32 only");
  at::Tensor ac = a.contiguous(), bc = b.contiguous();
  at::Tensor out = at::empty_like(ac);
  const float* pa = ac.data_ptr<float>();
  const float* pb = bc.data_ptr<float>();
  float* po = out.data_ptr<float>();
  const float k = static_cast<float>(alpha);
  for (const auto i : c10::irange(ac.numel())) {
    po[i] = pa[i] + k * pb[i];
  }
  return out;
}
// [kernel-end]

}  // namespace

// [registration-start]
TORCH_LIBRARY(infralens, m) {
  m.def("scaled_add(Tensor a, Tensor b, float alpha) -> Tensor");  // the schema: one per operator
}

TORCH_LIBRARY_IMPL(infralens, CPU, m) {
  m.impl("scaled_add", &scaled_add_cpu);  // the kernel for one dispatch key
}
// [registration-end]
