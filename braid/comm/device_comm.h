// Which path a collective on device buffers takes (docs/gpu.md, "Several GPUs
// and every plan"):
//
// - native: the device's own collectives library, registered by its backend
//   with set_device_collectives (NCCL for CUDA: braid/cuda/nccl.h; an emulated
//   NCCL over the emulated device's memory in braid_cuda_emulated);
// - staged: device -> host, braid's own algorithms over the communicator's
//   transport, host -> device (registered with set_staged_collectives), for
//   what the native library cannot serve: several processes on one GPU, a
//   group mixing CPUs and GPUs, a transport it lacks.
//
// The choice is process-wide, as the registered collectives are: a process
// trains on one kind of device, and every communicator it holds (the plan's
// splits included) moves that device's buffers one way.
#pragma once

#include <cstdint>
#include <initializer_list>
#include <string_view>

#include "braid/comm/communicator.h"

namespace braid::comm {

enum class DeviceComm : uint8_t {
  automatic,  // native where the device has it, else staged
  native,     // the device's library ("nccl" for CUDA)
  staged,     // through host memory and braid's transports
};

// "auto", "nccl", "staged".
std::string_view name(DeviceComm mode);
// The inverse; ValueError naming the text otherwise.
DeviceComm parse_device_comm(std::string_view text);

// Installs the host-staged collectives for buffers on devices of `type`.
void set_staged_collectives(DeviceType type, DeviceCollectives* collectives);
// Whether a native library is installed for devices of `type`.
bool has_native_collectives(DeviceType type);

// The path device buffers take in this process (automatic until set).
void set_device_comm(DeviceComm mode);
DeviceComm device_comm();

// Collective over `c` (every rank calls it, before any collective on device
// buffers): each rank tells whether its device has native collectives, and
// where its device is (host, process, device index). `requested` automatic
// picks native when every rank has it and no two processes on a host share a
// device index (NCCL refuses two processes on one GPU), else staged; native
// is refused (ConfigError naming the rank and the reason) where it cannot
// serve. Sets the process's path, logs the choice once on rank 0, returns it.
// A CPU device needs no path: returns automatic without exchanging anything.
DeviceComm choose_device_comm(const Communicator& c, Device device, DeviceComm requested);

// The collectives that serve these buffers (all on one device other than the
// host) under the process's path; ValueError naming `op` where none is
// installed. For the communicator's own dispatch.
DeviceCollectives& device_collectives_for(std::initializer_list<BufferRef> bufs, const char* op);

}  // namespace braid::comm
