#include "braid/tensor/backend.h"

#include <array>
#include <atomic>

#include "braid/base/error.h"

namespace braid {

namespace {
std::array<std::atomic<DeviceBackend*>, 3>& backends() {
  static std::array<std::atomic<DeviceBackend*>, 3> b{};
  return b;
}
}  // namespace

Device parse_device(std::string_view text) {
  if (text == "cpu") return Device::cpu;
  if (text == "meta") return Device::meta;
  if (text == "cuda") return Device::cuda(0);
  if (text.starts_with("cuda:") && text.size() > 5 && text.size() <= 8) {
    int index = 0;
    for (char c : text.substr(5)) {
      if (c < '0' || c > '9') index = -1;
      if (index >= 0) index = index * 10 + (c - '0');
    }
    if (index >= 0 && index < 128) return Device::cuda(index);
  }
  fail<ValueError>("'{}' is not a device (cpu, cuda or cuda:N)", text);
}

void set_backend(DeviceType type, DeviceBackend* b) { backends()[static_cast<size_t>(type)].store(b); }

bool available(Device d) {
  if (d.type != DeviceType::cuda) return true;
  DeviceBackend* b = backends()[static_cast<size_t>(d.type)].load();
  return b != nullptr && d.index >= 0 && d.index < b->device_count();
}

DeviceBackend& backend(Device d) {
  DeviceBackend* b = backends()[static_cast<size_t>(d.type)].load();
  if (b == nullptr) {
    if (d.type == DeviceType::cuda) {
      fail<ValueError>("{}: this braid was built without CUDA (configure with -DBRAID_CUDA=ON where the CUDA "
                       "toolkit is installed)", name(d));
    }
    fail<ValueError>("{}: no backend for this device", name(d));
  }
  const int count = b->device_count();
  if (d.index < 0 || d.index >= count) {
    if (count == 0) fail<ValueError>("{}: no GPU is visible to this process", name(d));
    fail<ValueError>("{}: only {} GPU{} visible to this process", name(d), count, count == 1 ? " is" : "s are");
  }
  return *b;
}

}  // namespace braid
