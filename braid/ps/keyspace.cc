#include "braid/ps/keyspace.h"

#include "braid/base/error.h"

namespace braid::ps {

DenseLayout::DenseLayout(int64_t total, int servers) : total_(total), servers_(servers) {
  if (total < 0 || servers < 1) fail<ValueError>("DenseLayout: need total >= 0 and servers >= 1, got {} and {}", total, servers);
}

}  // namespace braid::ps
