// Helpers of the Hugging Face checkpoint tests: the project's .venv (where
// scripts/setup installs transformers) running tests/models/hf_ref.py, and
// safetensors files as the exchange format with it.
#pragma once

#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>
#include <string>

#include "braid/base/safetensors.h"
#include "braid/tensor/tensor.h"

namespace braid::models::hftest {

inline std::string venv_python() { return BRAID_TESTS_DIR "/../.venv/bin/python"; }
inline std::string hf_ref() { return BRAID_TESTS_DIR "/models/hf_ref.py"; }

// Skips (with the reason) only where scripts/setup has not made .venv; a
// .venv whose transformers fails to import is a failure of the test.
#define BRAID_REQUIRE_VENV()                                                                                   \
  do {                                                                                                         \
    if (!std::filesystem::exists(::braid::models::hftest::venv_python())) {                                    \
      GTEST_SKIP() << ::braid::models::hftest::venv_python()                                                   \
                   << " is absent: scripts/setup makes .venv with transformers, the oracle of these checks";   \
    }                                                                                                          \
  } while (0)

// Runs `hf_ref.py ARGS` under .venv; its output goes to `log`. Returns "" on
// success, else the exit status and the log's last lines.
inline std::string run_hf_ref(const std::string& args, const std::string& log) {
  const std::string cmd = "HF_HUB_OFFLINE=1 TRANSFORMERS_OFFLINE=1 OMP_NUM_THREADS=1 '" + venv_python() + "' '" +
                          hf_ref() + "' " + args + " >'" + log + "' 2>&1";
  const int rc = std::system(cmd.c_str());
  if (rc == 0) return "";
  std::ifstream in(log);
  std::stringstream ss;
  ss << in.rdbuf();
  std::string out = ss.str();
  if (out.size() > 3000) out = "..." + out.substr(out.size() - 3000);
  return "hf_ref.py " + args + " exited with " + std::to_string(rc) + ":\n" + out;
}

inline DType dtype_from(const std::string& s) {
  if (s == "F32") return DType::f32;
  if (s == "I64") return DType::i64;
  if (s == "F64") return DType::f64;
  ADD_FAILURE() << "unexpected dtype " << s;
  return DType::f32;
}

inline std::map<std::string, Tensor> read_tensors(const std::string& path) {
  std::map<std::string, Tensor> out;
  for (const auto& [name, d] : safetensors::read(path).tensors) {
    Tensor t = Tensor::empty(d.shape, dtype_from(d.dtype));
    std::copy(d.data.begin(), d.data.end(), static_cast<std::byte*>(t.raw_data()));
    out[name] = t;
  }
  return out;
}

inline void write_tensors(const std::string& path, const std::map<std::string, Tensor>& tensors,
                          const safetensors::Metadata& metadata = {{"format", "pt"}}) {
  std::map<std::string, safetensors::TensorRef> refs;
  std::vector<Tensor> keep;
  for (const auto& [name, t] : tensors) {
    const Tensor c = t.contiguous();
    keep.push_back(c);
    const char* dtype = c.dtype() == DType::i64 ? "I64" : c.dtype() == DType::f64 ? "F64" : "F32";
    refs[name] = {dtype, c.shape(), {static_cast<const std::byte*>(c.raw_data()), c.nbytes()}};
  }
  safetensors::write(path, refs, metadata);
}

}  // namespace braid::models::hftest
