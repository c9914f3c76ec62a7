// Counter-based random numbers (Philox-4x32-10, Salmon et al., SC'11).
//
// Each value is a pure function of (seed, stream, counter), so any rank or
// data-loader worker reproduces its numbers from three integers, and a
// generator's whole state is (seed, stream, offset): trivially checkpointed.
#pragma once

#include <array>
#include <cstdint>
#include <span>

namespace braid {

using Philox4 = std::array<uint32_t, 4>;

// One Philox-4x32-10 block: 4 random words for (key, counter).
Philox4 philox(uint64_t key, uint64_t counter_hi, uint64_t counter_lo);

// Words first_word .. first_word + out.size() - 1 of the stream (key,
// counter_hi): out[j] = philox(key, counter_hi, w / 4)[w % 4] for w = first_word
// + j. Many blocks at once, laid out so the compiler runs them in vector lanes
// (a bulk draw, such as one random word per gradient value, at a few cycles a
// word instead of a call per block).
void philox_fill(uint64_t key, uint64_t counter_hi, uint64_t first_word, std::span<uint32_t> out);

class Generator {
 public:
  explicit Generator(uint64_t seed = 0, uint64_t stream = 0) : seed_(seed), stream_(stream) {}

  uint32_t next_u32();
  uint64_t next_u64();
  // Uniform in [0, 1).
  float uniform();
  double uniform_f64();
  // Standard normal (Box-Muller).
  double normal();
  // Uniform integer in [0, n).
  uint64_t below(uint64_t n);

  struct State {
    uint64_t seed, stream, offset;
  };
  State state() const { return {seed_, stream_, offset_}; }
  void set_state(State s) {
    seed_ = s.seed, stream_ = s.stream, offset_ = s.offset;
    block_at_ = kNoBlock;
  }
  uint64_t seed() const { return seed_; }

 private:
  uint64_t seed_, stream_;
  uint64_t offset_ = 0;  // 32-bit words drawn so far
  // The Philox block of counter block_at_ (words offset_ / 4 * 4 ..): one
  // block serves four draws instead of being recomputed for each (the state
  // above still says everything; this is only a cache of it).
  static constexpr uint64_t kNoBlock = UINT64_MAX;
  Philox4 block_{};
  uint64_t block_at_ = kNoBlock;
};

}  // namespace braid
