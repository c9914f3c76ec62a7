#include "braid/comm/device_comm.h"

#include <unistd.h>

#include <array>
#include <atomic>
#include <functional>
#include <string>
#include <vector>

#include "braid/base/error.h"
#include "braid/base/log.h"

namespace braid::comm {

namespace {

using Registry = std::array<std::atomic<DeviceCollectives*>, 3>;  // by DeviceType

Registry& native_collectives() {
  static Registry r{};
  return r;
}
Registry& staged_collectives() {
  static Registry r{};
  return r;
}
std::atomic<DeviceComm>& process_mode() {
  static std::atomic<DeviceComm> m{DeviceComm::automatic};
  return m;
}

DeviceCollectives* lookup(Registry& r, DeviceType type) { return r[static_cast<size_t>(type)].load(); }

std::string this_host(const Communicator& c) {
  if (!c.options().host.empty()) return c.options().host;
  std::array<char, 256> buf{};
  if (::gethostname(buf.data(), buf.size() - 1) != 0) return "localhost";
  return buf.data();
}

// What each rank tells the others in choose_device_comm.
struct Where {
  uint64_t host = 0;  // hash of the host name
  int64_t pid = 0;
  int32_t device_type = 0, device_index = 0;
  int32_t native = 0;  // the device's library is installed in this process
  int32_t pad = 0;
};
static_assert(sizeof(Where) == 32);

}  // namespace

std::string_view name(DeviceComm mode) {
  switch (mode) {
    case DeviceComm::automatic: return "auto";
    case DeviceComm::native: return "nccl";
    case DeviceComm::staged: return "staged";
  }
  return "?";
}

DeviceComm parse_device_comm(std::string_view text) {
  for (DeviceComm m : {DeviceComm::automatic, DeviceComm::native, DeviceComm::staged}) {
    if (text == name(m)) return m;
  }
  fail<ValueError>("device collectives path '{}' is not one of auto, nccl, staged", text);
}

void set_device_collectives(DeviceType type, DeviceCollectives* collectives) {
  native_collectives()[static_cast<size_t>(type)].store(collectives);
}
void set_staged_collectives(DeviceType type, DeviceCollectives* collectives) {
  staged_collectives()[static_cast<size_t>(type)].store(collectives);
}
bool has_native_collectives(DeviceType type) { return lookup(native_collectives(), type) != nullptr; }

void set_device_comm(DeviceComm mode) { process_mode().store(mode); }
DeviceComm device_comm() { return process_mode().load(); }

DeviceComm choose_device_comm(const Communicator& c, Device device, DeviceComm requested) {
  if (device.is_cpu()) return DeviceComm::automatic;
  const int p = c.size();
  Where mine{.host = std::hash<std::string>{}(this_host(c)), .pid = static_cast<int64_t>(::getpid()),
             .device_type = static_cast<int32_t>(device.type), .device_index = device.index,
             .native = has_native_collectives(device.type) ? 1 : 0};
  std::vector<Where> all(static_cast<size_t>(p));
  Communicator(c)
      .allgather(BufferRef(&mine, sizeof(Where), DType::u8), BufferRef(all.data(), sizeof(Where) * all.size(), DType::u8),
                 {.timeout = c.options().timeout})
      .wait(Deadline::after(collective_backstop(c.options().timeout)));
  // Why native cannot serve this group, if it cannot (the same text on every rank).
  std::string against;
  for (int r = 0; r < p && against.empty(); ++r) {
    const Where& a = all[static_cast<size_t>(r)];
    if (!a.native) against = fmt::format("rank {} has no NCCL for its device in this build", r);
    for (int s = r + 1; s < p && against.empty(); ++s) {
      const Where& b = all[static_cast<size_t>(s)];
      if (a.host == b.host && a.pid != b.pid && a.device_type == b.device_type && a.device_index == b.device_index) {
        against = fmt::format("ranks {} and {} are processes on one host sharing device {} (NCCL needs a GPU each)", r,
                              s, a.device_index);
      }
    }
  }
  if (requested == DeviceComm::native && !against.empty()) {
    fail<ConfigError>("parallel.device_comm = nccl cannot serve this group: {} (use auto or staged)", against);
  }
  const DeviceComm chosen =
      requested != DeviceComm::automatic ? requested : (against.empty() ? DeviceComm::native : DeviceComm::staged);
  set_device_comm(chosen);
  if (c.rank() == 0 && p > 1) {
    logging::info("collectives on {} buffers: {} ({})", name(device), chosen == DeviceComm::native ? "NCCL" : "staged through host memory",
                  requested != DeviceComm::automatic ? "parallel.device_comm" : against.empty() ? "every rank has NCCL and no two processes share a GPU" : against);
  }
  return chosen;
}

DeviceCollectives& device_collectives_for(std::initializer_list<BufferRef> bufs, const char* op) {
  const Device device = bufs.begin()->device;
  for (const BufferRef& b : bufs) {
    if (b.device != device) fail<ValueError>("{}: buffers on {} and {}", op, name(device), name(b.device));
  }
  DeviceCollectives* native = lookup(native_collectives(), device.type);
  DeviceCollectives* staged = lookup(staged_collectives(), device.type);
  switch (device_comm()) {
    case DeviceComm::native:
      if (native == nullptr) fail<ValueError>("{}: no NCCL for buffers on {} in this build", op, name(device));
      return *native;
    case DeviceComm::staged:
      if (staged == nullptr) fail<ValueError>("{}: no host staging for buffers on {} in this build", op, name(device));
      return *staged;
    case DeviceComm::automatic: break;
  }
  if (native != nullptr) return *native;
  if (staged != nullptr) return *staged;
  fail<ValueError>("{}: no collectives for buffers on {} in this build", op, name(device));
}

}  // namespace braid::comm
