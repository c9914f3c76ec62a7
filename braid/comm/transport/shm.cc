#include "braid/comm/transport/shm.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <fstream>
#include <new>
#include <sstream>

#include "braid/base/digest.h"
#include "braid/base/error.h"
#include "braid/comm/store/rendezvous.h"
#include "braid/comm/transport/shm_ring.h"
#include "braid/comm/transport/stream.h"

namespace braid::comm {

namespace {

using shm::RingControl;

// One mapped segment shared by a pair of ranks; unmapped when the last
// channel using it goes away.
struct Mapping {
  void* addr = MAP_FAILED;
  size_t bytes = 0;
  ~Mapping() {
    if (addr != MAP_FAILED) ::munmap(addr, bytes);
  }
};

std::string host_identity() {
  char host[256] = {};
  ::gethostname(host, sizeof host - 1);
  std::string boot;
  std::ifstream("/proc/sys/kernel/random/boot_id") >> boot;
  return fmt::format("{}/{}", host, boot);
}

std::shared_ptr<Mapping> map_segment(const std::string& name, size_t bytes, bool create,
                                     int rank) {
  int flags = create ? O_CREAT | O_EXCL | O_RDWR : O_RDWR;
  int fd = ::shm_open(name.c_str(), flags, 0600);
  if (fd < 0) fail<IoError>("rank {}: shm_open {}: {}", rank, name, std::strerror(errno));
  auto m = std::make_shared<Mapping>();
  struct stat st {};
  bool ok = true;
  if (create) ok = ::ftruncate(fd, static_cast<off_t>(bytes)) == 0;
  else ok = ::fstat(fd, &st) == 0 && static_cast<size_t>(st.st_size) == bytes;
  if (ok) {
    // MAP_POPULATE: fault the pages in now, not inside the first transfer.
    m->addr = ::mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_POPULATE, fd, 0);
    m->bytes = bytes;
  }
  int err = errno;
  ::close(fd);
  if (!ok || m->addr == MAP_FAILED) {
    if (create) ::shm_unlink(name.c_str());
    fail<IoError>("rank {}: cannot map shared segment {} ({} bytes): {}", rank, name, bytes,
                  ok ? std::strerror(err) : "size mismatch or ftruncate failed (is /dev/shm full?)");
  }
  return m;
}

}  // namespace

std::unique_ptr<Transport> make_shm_transport(Store& store, const ShmOptions& o) {
  BRAID_CHECK(o.rank >= 0 && o.rank < o.size, "rank {} of {}", o.rank, o.size);
  BRAID_CHECK((o.ring_bytes & (o.ring_bytes - 1)) == 0 && o.ring_bytes >= 4096,
              "ring_bytes {} must be a power of two >= 4096", o.ring_bytes);
  Deadline d = Deadline::after(o.connect_timeout);
  const std::string prefix = o.prefix + "/shm";

  // A word holding our pid, at an address the peers read to find out whether
  // cross-memory attach works between us (it needs ptrace rights).
  static uint64_t probe_word;
  probe_word = static_cast<uint64_t>(::getpid());
  auto infos = exchange(store, prefix + "/info", o.rank, o.size,
                        fmt::format("{} {} {}", host_identity(), ::getpid(),
                                    reinterpret_cast<uintptr_t>(&probe_word)),
                        d);
  std::vector<pid_t> pids(o.size);
  std::vector<uint64_t> probes(o.size);
  std::vector<int> elsewhere;
  std::string my_host;
  for (int r = 0; r < o.size; ++r) {
    std::istringstream in(infos[r]);
    std::string host;
    in >> host >> pids[r] >> probes[r];
    if (r == 0) my_host = host;
    if (host != my_host) elsewhere.push_back(r);
  }
  if (!elsewhere.empty()) {
    fail<ConfigError>("shm transport needs every rank on one host: ranks [{}] are not on rank 0's "
                      "host {} (use tcp, or a hierarchical setup)",
                      fmt::join(elsewhere, ", "), my_host);
  }

  // Which peers' memory we can read, published so that each sender knows
  // whether its receiver can pull.
  std::string readable(o.size, '0');
  for (int p = 0; p < o.size; ++p) {
    if (p != o.rank && o.pull_min > 0 && shm::can_read_memory_of(pids[p], probes[p], pids[p])) readable[p] = '1';
  }
  store.set(fmt::format("{}/cma/{}", prefix, o.rank), readable, d);

  const size_t seg_bytes = 2 * shm::ring_footprint(o.ring_bytes);
  std::vector<std::shared_ptr<Mapping>> maps(o.size);
  std::vector<std::string> created;
  auto unlink_created = [&] {
    for (auto& n : created) ::shm_unlink(n.c_str());
    created.clear();
  };
  try {
    for (int p = o.rank + 1; p < o.size; ++p) {
      std::array<std::byte, 8> nonce;
      random_bytes(nonce);
      std::string name = fmt::format("/braid-{}-{}-{}", to_hex(nonce), o.rank, p);
      maps[p] = map_segment(name, seg_bytes, true, o.rank);
      created.push_back(name);
      auto* base = static_cast<std::byte*>(maps[p]->addr);
      new (base) RingControl{};
      new (base + shm::ring_footprint(o.ring_bytes)) RingControl{};
      store.set(fmt::format("{}/seg/{}/{}", prefix, o.rank, p), name, d);
    }
    for (int p = 0; p < o.rank; ++p) {
      auto name = store.get(fmt::format("{}/seg/{}/{}", prefix, p, o.rank), d);
      maps[p] = map_segment(name, seg_bytes, false, o.rank);
    }
    // Everyone has mapped what they need: the names can go, so nothing is
    // left in /dev/shm whatever happens next.
    store_barrier(store, prefix + "/mapped", o.rank, o.size, d);
  } catch (...) {
    unlink_created();
    throw;
  }
  unlink_created();

  std::vector<std::unique_ptr<Channel>> channels(o.size);
  for (int p = 0; p < o.size; ++p) {
    if (p == o.rank) continue;
    // Our payloads to p are pulled if p can read our memory (p's receive
    // side decides nothing: the header says which way the payload comes).
    const bool peer_reads_us = store.get(fmt::format("{}/cma/{}", prefix, p), d)[o.rank] == '1';
    auto* base = static_cast<std::byte*>(maps[p]->addr);
    // Ring 0 carries lower -> higher rank, ring 1 the other way.
    auto* low_to_high = reinterpret_cast<RingControl*>(base);
    auto* high_to_low = reinterpret_cast<RingControl*>(base + shm::ring_footprint(o.ring_bytes));
    bool lower = o.rank < p;
    channels[p] = std::make_unique<shm::RingChannel>(
        maps[p], lower ? low_to_high : high_to_low, lower ? high_to_low : low_to_high,
        o.ring_bytes, o.spin, p, pids[p], peer_reads_us ? o.pull_min : 0);
  }
  return std::make_unique<StreamTransport>("shm", o.rank, o.size, std::move(channels), o.max_message);
}

}  // namespace braid::comm
