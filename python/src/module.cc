// braid._braid: the extension module under the Python package `braid`
// (docs/python.md). Each binding file adds one layer's names; the work stays
// in C++ and the GIL is released while it runs.
#include <cstdlib>
#include <string>

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
  // nanobind reports instances still alive when the interpreter shuts down.
  // A model written in Python and held by a trainer in a script's globals
  // is, at that point, whatever the order Python clears modules in: not a
  // leak, but a page of warnings at the end of every such script. Set
  // BRAID_PYTHON_LEAK_WARNINGS=1 to see them (tests/python checks memory by
  // RSS instead).
  const char* warn = std::getenv("BRAID_PYTHON_LEAK_WARNINGS");
  nb::set_leak_warnings(warn != nullptr && std::string(warn) == "1");
}
