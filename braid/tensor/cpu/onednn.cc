#include "braid/tensor/cpu/onednn.h"

namespace braid::cpu::onednn {

dnnl::engine& engine() {
  static dnnl::engine e(dnnl::engine::kind::cpu, 0);
  return e;
}

dnnl::stream& stream() {
  thread_local dnnl::stream s(engine());
  return s;
}

void* scratch(size_t bytes, std::vector<Tensor>& keep) {
  keep.push_back(Tensor::empty({static_cast<int64_t>(bytes)}, DType::u8));
  return keep.back().raw_data();
}

}  // namespace braid::cpu::onednn
