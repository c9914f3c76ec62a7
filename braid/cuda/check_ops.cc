// deferred_checks.h: checks queued on the device, their messages kept on the
// host, raised where the host next waits for the device.
#include <array>
#include <mutex>

#include "braid/base/error.h"
#include "braid/cuda/deferred_checks.h"
#include "braid/cuda/index_kernels.h"
#include "braid/cuda/memory.h"

namespace braid::cuda {

namespace {

// The messages of the latest checks, by id. A training step queues a few;
// a check older than the ring (kSlots checks without a sync) loses its
// message but not its failure.
class Messages {
 public:
  static constexpr size_t kSlots = 4096;

  int64_t add(CheckMessage message) {
    std::lock_guard lock(mu_);
    const int64_t id = next_++;
    Slot& s = slots_[static_cast<size_t>(id) % kSlots];
    s.id = id;
    s.message = std::move(message);
    return id;
  }
  std::string message(int64_t id, int64_t position, int64_t value) {
    CheckMessage m;
    {
      std::lock_guard lock(mu_);
      const Slot& s = slots_[static_cast<size_t>(id) % kSlots];
      if (s.id == id) m = s.message;
    }
    if (m) return m(position, value);
    return fmt::format("index {} at position {} out of range (a check on the device; its message was dropped after "
                       "{} more checks without a sync)", value, position, kSlots);
  }

 private:
  struct Slot {
    int64_t id = 0;
    CheckMessage message;
  };
  std::mutex mu_;
  int64_t next_ = 1;  // 0 means "none failed" in the record
  std::array<Slot, kSlots> slots_{};
};

Messages& messages() {
  static Messages* m = new Messages;  // never destroyed: a sync may come during static destruction
  return *m;
}

}  // namespace

void check_range_on_device(const Tensor& index, int64_t bound, CheckMessage message) {
  const int device = index.device().index;
  const int64_t id = messages().add(std::move(message));
  range_check(static_cast<const int64_t*>(index.raw_data()), index.numel(), bound, id, check_record(device));
}

void raise_failed_checks(int device) {
  const CheckRecord r = take_check_record(device);
  if (r.check != 0) fail<IndexError>("{}", messages().message(r.check, r.position, r.value));
}

}  // namespace braid::cuda
