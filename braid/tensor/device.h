// Where a tensor's values live. `meta` tensors have a shape, strides and a
// dtype but no memory: ops on them run shape and dtype inference only, so a
// whole training step can be traced without computing it (braid/graph).
#pragma once

#include <cstdint>
#include <string_view>

namespace braid {

enum class Device : uint8_t { cpu, meta };

constexpr std::string_view name(Device d) {
  switch (d) {
    case Device::cpu: return "cpu";
    case Device::meta: return "meta";
  }
  return "?";
}

}  // namespace braid
