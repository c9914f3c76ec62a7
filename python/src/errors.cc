// braid's errors as Python exceptions (docs/python.md, "Errors"). Each C++
// error type becomes a braid.* exception that also derives from the Python
// built-in a caller would catch for it (braid.ValueError is a ValueError,
// braid.TimeoutError a TimeoutError), with the C++ message unchanged. A
// collective's timeout carries its story as attributes too, read from the
// sentence the communicator writes (comm/communicator_history.cc,
// comm/explain.cc): rank, op, seq, the peer waited for and the missing ranks.
#include <regex>
#include <set>
#include <string>

#include "bindings.h"
#include "braid/base/error.h"
#include "braid/comm/history.h"

namespace braid::python {

namespace {

struct Classes {
  PyObject *error, *value, *index, *io, *config, *timeout, *peer, *desync, *numeric, *oom;
};
Classes classes{};

PyObject* make_class(nb::module_& m, const char* name, std::initializer_list<PyObject*> bases, const char* doc) {
  nb::tuple b = nb::steal<nb::tuple>(PyTuple_New(static_cast<Py_ssize_t>(bases.size())));
  Py_ssize_t i = 0;
  for (PyObject* base : bases) {
    Py_INCREF(base);
    PyTuple_SET_ITEM(b.ptr(), i++, base);
  }
  const std::string qualified = std::string("braid.") + name;
  PyObject* cls = PyErr_NewExceptionWithDoc(qualified.c_str(), doc, b.ptr(), nullptr);
  if (!cls) throw nb::python_error();
  m.attr(name) = nb::handle(cls);  // the module keeps it; `classes` borrows
  return cls;
}

// "rank 3" / "ranks 0, 2, 3" -> {3} / {0, 2, 3}
void add_ranks(const std::string& list, std::set<int>& out) {
  static const std::regex number("\\d+");
  for (auto it = std::sregex_iterator(list.begin(), list.end(), number); it != std::sregex_iterator(); ++it)
    out.insert(std::stoi(it->str()));
}

// Raises braid.TimeoutError with the facts of the sentence as attributes
// (None where the message is not a collective's).
void raise_timeout(const char* what) {
  const std::string text = what;
  nb::object rank = nb::none(), op = nb::none(), seq = nb::none(), peer = nb::none();
  std::set<int> missing;
  std::smatch match;
  // "rank 0 allreduce #7 (1 MiB f32 sum, ring) timed out after 3.0 s waiting for rank 1; ..."
  static const std::regex head("rank (\\d+) ([a-z_]+) #(\\d+)");
  if (std::regex_search(text, match, head)) {
    rank = nb::int_(std::stoi(match[1].str()));
    op = nb::str(match[2].str().c_str());
    seq = nb::int_(std::stoll(match[3].str()));
  }
  static const std::regex waiting("waiting for rank (\\d+)");
  if (std::regex_search(text, match, waiting)) {
    peer = nb::int_(std::stoi(match[1].str()));
    missing.insert(std::stoi(match[1].str()));
  }
  // comm/explain.cc: "rank 3 never started #17", "ranks 1, 2 did not answer".
  static const std::regex absent("(ranks? [\\d, ]+?) (?:never started|did not answer|failed at)");
  for (auto it = std::sregex_iterator(text.begin(), text.end(), absent); it != std::sregex_iterator(); ++it)
    add_ranks((*it)[1].str(), missing);
  if (!rank.is_none()) missing.erase(nb::cast<int>(rank));
  nb::list missing_list;
  for (int r : missing) missing_list.append(r);

  nb::object exc = nb::steal(PyObject_CallOneArg(classes.timeout, nb::str(what).ptr()));
  if (!exc.is_valid()) return;  // the call set its own error
  exc.attr("rank") = rank;
  exc.attr("op") = op;
  exc.attr("seq") = seq;
  exc.attr("peer") = peer;
  exc.attr("missing_ranks") = missing_list;
  PyErr_SetObject(classes.timeout, exc.ptr());
}

void translate(const std::exception_ptr& p, void*) {
  try {
    std::rethrow_exception(p);
  } catch (const comm::DesyncError& e) {
    PyErr_SetString(classes.desync, e.what());
  } catch (const TimeoutError& e) {
    raise_timeout(e.what());
  } catch (const ValueError& e) {
    PyErr_SetString(classes.value, e.what());
  } catch (const IndexError& e) {
    PyErr_SetString(classes.index, e.what());
  } catch (const IoError& e) {
    PyErr_SetString(classes.io, e.what());
  } catch (const ConfigError& e) {
    PyErr_SetString(classes.config, e.what());
  } catch (const PeerError& e) {
    PyErr_SetString(classes.peer, e.what());
  } catch (const NumericError& e) {
    PyErr_SetString(classes.numeric, e.what());
  } catch (const OutOfMemoryError& e) {
    PyErr_SetString(classes.oom, e.what());
  } catch (const Error& e) {
    PyErr_SetString(classes.error, e.what());
  }
  // Anything else falls through to nanobind's own translators.
}

}  // namespace

void bind_errors(nb::module_& m) {
  classes.error = make_class(m, "Error", {PyExc_Exception}, "Base of every error braid raises.");
  classes.value = make_class(m, "ValueError", {classes.error, PyExc_ValueError},
                             "An argument the operation cannot accept (shape, dtype, device, value).");
  classes.index = make_class(m, "IndexError", {classes.error, PyExc_IndexError}, "An index outside the valid range.");
  classes.io = make_class(m, "IoError", {classes.error, PyExc_OSError}, "A file is missing, truncated or corrupt.");
  classes.config = make_class(m, "ConfigError", {classes.error, PyExc_ValueError},
                              "A configuration key or value is wrong (the message names the key).");
  classes.timeout = make_class(
      m, "TimeoutError", {classes.error, PyExc_TimeoutError},
      "A wait ran past its deadline. For a collective: `rank` (this rank), `op` ('allreduce'), `seq` (its number "
      "on the communicator), `peer` (the rank waited for) and `missing_ranks` (the ranks that never arrived or did "
      "not answer); None or [] where the message does not say.");
  classes.peer = make_class(m, "PeerError", {classes.error, PyExc_ConnectionError},
                            "A peer process disconnected, died or sent something malformed.");
  classes.desync = make_class(m, "DesyncError", {classes.peer},
                              "Ranks called different collectives at one sequence number.");
  classes.numeric = make_class(m, "NumericError", {classes.error, PyExc_ArithmeticError},
                               "Training diverged (a loss or gradient that is not finite).");
  classes.oom = make_class(m, "OutOfMemoryError", {classes.error, PyExc_MemoryError},
                           "A device has no memory left for an allocation.");
  nb::register_exception_translator(translate);
}

}  // namespace braid::python
