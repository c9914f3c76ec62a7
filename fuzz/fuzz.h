// Shared by the libFuzzer harnesses (one per decoder of bytes from outside;
// docs/reliability.md, "Hostile bytes").
//
// Every harness checks the same contract: a decoder given any bytes either
// succeeds or throws a braid::Error subclass. Anything else is a finding:
// another exception escapes LLVMFuzzerTestOneInput and aborts, a sanitizer
// (ASan, UBSan, LeakSanitizer) reports memory misuse, undefined behaviour or a
// leak, and libFuzzer's -malloc_limit_mb / -rss_limit_mb / -timeout report an
// allocation, memory use or run time the input should not have caused.
#pragma once

#include <unistd.h>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <span>
#include <string>
#include <string_view>

#include "braid/base/error.h"
#include "braid/base/log.h"

namespace braid::fuzz {

// Reads fixed-size values and runs of bytes off the fuzzer's input; past the
// end values read as zero and runs come back short, so every input is usable.
class Input {
 public:
  Input(const uint8_t* data, size_t size) : p_(reinterpret_cast<const std::byte*>(data)), left_(size) {}

  template <class T>
  T take() {
    T v{};
    const size_t n = std::min(sizeof(T), left_);
    std::memcpy(&v, p_, n);
    p_ += n, left_ -= n;
    return v;
  }
  std::span<const std::byte> bytes(size_t n) {
    n = std::min(n, left_);
    std::span<const std::byte> out(p_, n);
    p_ += n, left_ -= n;
    return out;
  }
  std::span<const std::byte> rest() { return bytes(left_); }
  std::string_view text(size_t n) {
    auto b = bytes(n);
    return {reinterpret_cast<const char*>(b.data()), b.size()};
  }
  size_t left() const { return left_; }

 private:
  const std::byte* p_;
  size_t left_;
};

// Runs `decode`; a braid::Error is a correct refusal, anything else escapes.
template <class F>
void refused_or_ok(F&& decode) {
  try {
    decode();
  } catch (const Error&) {
  }
}

// A file the path-based readers open: the input's bytes, rewritten per run
// at one path per process (under TMPDIR, else /tmp).
class ScratchFile {
 public:
  explicit ScratchFile(const char* suffix) {
    const char* dir = std::getenv("TMPDIR");
    path_ = std::string(dir && *dir ? dir : "/tmp") + "/braid-fuzz-" + std::to_string(getpid()) + suffix;
  }
  ~ScratchFile() { std::remove(path_.c_str()); }
  const std::string& write(const uint8_t* data, size_t size) {
    std::FILE* f = std::fopen(path_.c_str(), "wb");
    if (!f || (size && std::fwrite(data, 1, size, f) != size)) __builtin_trap();  // the harness's own failure
    std::fclose(f);
    return path_;
  }

 private:
  std::string path_;
};

// Quiets braid's logging: refusals are logged as warnings, millions of times.
inline void quiet_logs() { spdlog::set_level(spdlog::level::off); }

}  // namespace braid::fuzz
