#include "braid/ps/protocol.h"

namespace braid::ps {

const char* op_name(Op op) {
  switch (op) {
    case Op::hello: return "hello";
    case Op::init_dense: return "init_dense";
    case Op::push_dense: return "push_dense";
    case Op::pull_dense: return "pull_dense";
    case Op::define_table: return "define_table";
    case Op::push_sparse: return "push_sparse";
    case Op::pull_sparse: return "pull_sparse";
    case Op::done: return "done";
    case Op::await_others: return "await_others";
  }
  return "unknown op";
}

}  // namespace braid::ps
