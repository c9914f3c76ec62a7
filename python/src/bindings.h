// What each binding file of braid._braid adds to the module (module.cc calls
// them in dependency order: a class is bound before a signature names it),
// and the conversions they share.
#pragma once

#include <nanobind/nanobind.h>
#include <nanobind/stl/optional.h>
#include <nanobind/stl/shared_ptr.h>
#include <nanobind/stl/string.h>
#include <nanobind/stl/vector.h>

#include "braid/base/rng.h"
#include "braid/tensor/tensor.h"

namespace braid::python {

namespace nb = nanobind;
using namespace nanobind::literals;

// Runs the call with the GIL released: C++ work lets other Python threads run.
using release_gil = nb::call_guard<nb::gil_scoped_release>;

void bind_errors(nb::module_& m);
using TensorClass = nb::class_<Tensor>;
void bind_types(nb::module_& m);                    // dtype, Device, Generator
void bind_tensor(nb::module_& m, TensorClass& t);   // Tensor's attributes, creation
void bind_interop(nb::module_& m, TensorClass& t);  // buffer protocol, numpy, DLPack
void bind_ops(nb::module_& m, TensorClass& t);      // operators, indexing, functions, autograd
void bind_nn(nb::module_& m);        // modules, losses, build_model
void bind_optim(nb::module_& m);
void bind_data(nb::module_& m);      // datasets, loaders, safetensors
void bind_comm(nb::module_& m);      // process groups, collectives, Mesh
void bind_train(nb::module_& m);     // Config, Trainer, Plan, callbacks

// The generator modules draw initial weights from when given none
// (braid.default_generator(), reseeded by braid.manual_seed).
Generator& python_default_generator();

// Slots of the Tensor type (the buffer protocol), set when the class is made.
PyType_Slot* tensor_type_slots();

// A dtype from braid.dtype, a name ("f32", "float32", "torch.float32") or a
// numpy dtype; ValueError naming the value otherwise.
DType to_dtype(nb::handle h);
// A device from braid.Device or its name ("cpu", "cuda:1").
Device to_device(nb::handle h);
// A shape from an int or a sequence of ints.
Shape to_shape(nb::handle h);
nb::tuple to_tuple(const Shape& s);
// Dims from an int or a sequence of ints.
std::vector<int64_t> to_dims(nb::handle h);

}  // namespace braid::python
