// Which server owns which key.
//
// Dense: the model's parameters, concatenated in registration order, form one
// flat f32 vector; server s owns the contiguous range [begin(s), end(s)), the
// ranges balanced by bytes to within one element. Sparse: a u64 key (an
// embedding row) lives on server mix64(key) % S, so consecutive feature ids
// spread evenly.
#pragma once

#include <cstdint>

#include "braid/base/hash.h"

namespace braid::ps {

class DenseLayout {
 public:
  DenseLayout() = default;
  DenseLayout(int64_t total, int servers);

  int servers() const { return servers_; }
  int64_t total() const { return total_; }
  int64_t begin(int server) const { return total_ * server / servers_; }
  int64_t end(int server) const { return total_ * (server + 1) / servers_; }
  int64_t size(int server) const { return end(server) - begin(server); }

 private:
  int64_t total_ = 0;
  int servers_ = 1;
};

inline int server_of_key(uint64_t key, int servers) {
  return static_cast<int>(mix64(key) % static_cast<uint64_t>(servers));
}

}  // namespace braid::ps
