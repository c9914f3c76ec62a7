// braid._braid: the extension module under the Python package `braid`
// (docs/python.md). Each binding file adds one layer's names; the work stays
// in C++ and the GIL is released while it runs.
#include "bindings.h"

NB_MODULE(_braid, m) {
  using namespace braid::python;
  m.doc() = "braid's C++ core: tensors, ops and autograd, modules, optimizers, data, the trainer and collectives";
  bind_errors(m);
  bind_types(m);
  TensorClass tensor(m, "Tensor", nb::type_slots(tensor_type_slots()),
                     "An n-dimensional array of one dtype on one device, with autograd state. Copies of a handle "
                     "share values; views share storage. Create with braid.tensor, braid.zeros, braid.from_numpy, "
                     "braid.from_dlpack.");
  bind_tensor(m, tensor);
  bind_interop(m, tensor);
  bind_ops(m, tensor);
  bind_nn(m);
  bind_optim(m);
  bind_data(m);
  bind_comm(m);
  bind_train(m);
}
