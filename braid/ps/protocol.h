// The parameter-server wire protocol, over any Transport (tcp, shm, inproc).
//
// Every exchange is a request from a worker to one server and one reply:
//   worker -> server   RequestHeader (tag kRequestTag), then `bytes` of payload
//                      (tag kRequestDataTag) when bytes > 0
//   server -> worker   ReplyHeader (kReplyTag), then `bytes` of payload
//                      (kReplyDataTag) when bytes > 0
// A worker has at most one exchange in flight per server, so per-(peer, tag)
// FIFO matching pairs them. Servers bound every payload before receiving it.
//
// Payloads by op (f32 values, u64 keys, host byte order):
//   hello         JSON {"config": PsConfig, "dense_total": N}  -> reply clock
//   init_dense    the server's range of the initial weights (ignored when the
//                 server recovered its shard from a checkpoint)
//   push_dense    the gradient for the server's range; ends the worker's clock
//   pull_dense    none                          -> the server's range of weights
//   define_table  JSON {"dim": D, "init_std": s}
//   push_sparse   count keys, then count * D gradient values
//   pull_sparse   count keys                    -> count * D values
//   done          none: the worker finished training
//   await_others  none: the worker pushed its last update and waits for the
//                 others (the gates treat it as finished from now on; it may
//                 still pull) -> only the reply header, its `training` count
#pragma once

#include <cstdint>

#include "braid/comm/tags.h"

namespace braid::ps {

enum class Op : uint32_t {
  hello = 1,
  init_dense = 2,
  push_dense = 3,
  pull_dense = 4,
  define_table = 5,
  push_sparse = 6,
  pull_sparse = 7,
  done = 8,
  await_others = 9,
};

const char* op_name(Op op);

inline constexpr uint32_t kMagic = 0x31535042;  // "BPS1"
// In the parameter server's own id range of the transport's tag space
// (comm/tags.h), which no communicator can take.
inline constexpr uint64_t kRequestTag = comm::service_tag(comm::Service::parameter_server, 1);
inline constexpr uint64_t kRequestDataTag = comm::service_tag(comm::Service::parameter_server, 2);
inline constexpr uint64_t kReplyTag = comm::service_tag(comm::Service::parameter_server, 3);
inline constexpr uint64_t kReplyDataTag = comm::service_tag(comm::Service::parameter_server, 4);
// Largest hello/define_table payload, and most keys in one sparse request.
inline constexpr uint64_t kMaxJsonBytes = 1u << 20;
inline constexpr uint64_t kMaxKeys = uint64_t{1} << 26;

struct RequestHeader {
  uint32_t magic = kMagic;
  Op op = Op::hello;
  int32_t worker = 0;
  int32_t table = 0;
  int64_t clock = 0;    // pushes: the clock being pushed; pulls: the worker's clock (gate); -1 = ungated
  int64_t version = 0;  // pushes: the server version the gradient was computed at
  double lr = 0;        // pushes
  uint64_t count = 0;   // values (dense) or keys (sparse)
  uint64_t bytes = 0;   // payload that follows
  uint64_t flags = 0;   // push_dense: kEncodedPush when the payload is a codec's message, else raw f32
};
static_assert(sizeof(RequestHeader) == 64);
inline constexpr uint64_t kEncodedPush = 1;

struct ReplyHeader {
  uint32_t magic = kMagic;
  uint32_t status = 0;   // 0 ok; 1 error, the payload is the message
  int64_t version = 0;   // dense updates applied on this server
  int64_t clock = 0;     // clocks fully applied (bsp), else the newest clock pushed
  int64_t slowest = -1;  // the slowest live worker's clock when the reply left
  uint64_t bytes = 0;
  int64_t training = 0;  // workers still training: live, not silent, not awaiting the others
  int64_t pushes = 0;    // clocks pushed, summed over the workers: the job's progress in pushes
};
static_assert(sizeof(ReplyHeader) == 56);

}  // namespace braid::ps
