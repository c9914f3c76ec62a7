// Where a tensor's values live: host memory (cpu), a GPU (cuda:N), or nowhere
// (meta). `meta` tensors have a shape, strides and a dtype but no memory: ops
// on them run shape and dtype inference only, so a whole training step can be
// traced without computing it (braid/graph). Memory and copies of a device
// other than the host come from its backend (braid/tensor/backend.h).
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

namespace braid {

enum class DeviceType : uint8_t { cpu, meta, cuda };

struct Device {
  DeviceType type = DeviceType::cpu;
  int8_t index = 0;  // which GPU; 0 on cpu and meta

  static const Device cpu;
  static const Device meta;
  static constexpr Device cuda(int index = 0) { return Device{DeviceType::cuda, static_cast<int8_t>(index)}; }

  constexpr bool is_cpu() const { return type == DeviceType::cpu; }
  constexpr bool is_cuda() const { return type == DeviceType::cuda; }
  constexpr bool operator==(const Device&) const = default;
};

inline constexpr Device Device::cpu{DeviceType::cpu, 0};
inline constexpr Device Device::meta{DeviceType::meta, 0};

constexpr std::string_view name(DeviceType t) {
  switch (t) {
    case DeviceType::cpu: return "cpu";
    case DeviceType::meta: return "meta";
    case DeviceType::cuda: return "cuda";
  }
  return "?";
}

// "cpu", "meta", "cuda:0".
inline std::string name(Device d) {
  if (d.type == DeviceType::cuda) return "cuda:" + std::to_string(d.index);
  return std::string(name(d.type));
}
// Reads "cpu", "meta", "cuda" (device 0) or "cuda:N"; ValueError otherwise.
Device parse_device(std::string_view text);

}  // namespace braid
