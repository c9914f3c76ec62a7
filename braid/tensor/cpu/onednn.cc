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

bool has_bf16() {
  static const bool yes = [] {
    using dnnl::memory;
    const memory::desc a({16, 16}, memory::data_type::bf16, memory::format_tag::ab);
    const memory::desc c({16, 16}, memory::data_type::f32, memory::format_tag::ab);
    try {
      dnnl::matmul::primitive_desc pd(dnnl::matmul::desc(a, a, c), engine());
      return true;
    } catch (const dnnl::error&) {
      return false;
    }
  }();
  return yes;
}

void* scratch(size_t bytes, std::vector<Tensor>& keep) {
  keep.push_back(Tensor::empty({static_cast<int64_t>(bytes)}, DType::u8));
  return keep.back().raw_data();
}

}  // namespace braid::cpu::onednn
