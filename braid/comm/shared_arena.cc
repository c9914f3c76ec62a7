#include "braid/comm/shared_arena.h"

#include <fcntl.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <new>
#include <random>

#include "braid/base/futex.h"
#include "braid/base/thread_pool.h"
#include "braid/comm/algorithms/algorithms.h"

namespace braid::comm {

namespace {

constexpr uint64_t kMagic = 0x616e657261646962;  // "bidarena"
constexpr size_t kPage = 4096;
// How long a waiter spins before it sleeps on the futex. When every rank has
// a core of its own, long: ranks of a data-parallel step arrive a few hundred
// microseconds apart (the machine's noise), and on a virtual machine a sleeper
// woken by futex takes about as long again to run; two ranks on two cores
// trained the 784-256-256-10 MLP 2-17 % faster (6 of 6 alternating pairs)
// spinning 1 ms than 30 us. The communicator's worker, which runs a
// collective nobody waits for yet beside the program's own threads, spins
// briefly. With more ranks than cores, not at all: the rank a spinner waits
// for is usually the one its core should be running, and wait_all spins once
// per rank. Four MLP ranks on two cores stepped in 2.05-2.32 ms sleeping at
// once against 2.55-2.77 ms spinning 30 us and 3.48-3.69 ms spinning 100 us
// (3 alternating rounds); the 30 us spin was 17 % of both cores' cycles.
constexpr auto kSpinOwnCore = std::chrono::microseconds(1000);
constexpr auto kSpinWorker = std::chrono::microseconds(30);
constexpr auto kSpinOversubscribed = std::chrono::microseconds(0);
// A sleeper wakes at least this often to check that the rank it waits for lives.
constexpr auto kLivenessCheck = std::chrono::milliseconds(100);

struct Header {
  uint64_t magic;
  uint64_t cookie;
  uint64_t ranks;
  uint64_t chunk;
};

// What rank 0 sends the others: where the segment is and how to recognise it.
struct Invitation {
  char name[96];
  uint64_t cookie;
  uint64_t ok;  // 0: rank 0 could not create the segment
};

size_t round_up(size_t n, size_t to) { return (n + to - 1) / to * to; }

}  // namespace

struct alignas(128) SharedArena::Control {
  alignas(64) std::atomic<uint32_t> phase;     // futex: steps this rank has finished
  alignas(64) std::atomic<uint32_t> sleepers;  // ranks asleep on `phase`
  pid_t pid;
  uint64_t declared[2];  // declare(): count, kind
};

namespace {

size_t controls_offset() { return kPage; }
size_t slots_offset(int ranks) { return kPage + round_up(ranks * sizeof(SharedArena::Control), kPage); }
size_t segment_bytes(int ranks, size_t chunk) { return slots_offset(ranks) + ranks * 2 * chunk; }

void* map(int fd, size_t bytes) {
  void* p = ::mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_POPULATE, fd, 0);
  return p == MAP_FAILED ? nullptr : p;
}

}  // namespace

SharedArena::SharedArena(void* base, size_t bytes, int ranks, int me, size_t chunk)
    : base_(base), bytes_(bytes), ranks_(ranks), me_(me), chunk_(chunk),
      oversubscribed_(ranks > available_cores()) {}

SharedArena::~SharedArena() { ::munmap(base_, bytes_); }

SharedArena::Control& SharedArena::control(int r) const {
  return reinterpret_cast<Control*>(static_cast<std::byte*>(base_) + controls_offset())[r];
}

std::byte* SharedArena::slot(int r, int half) const {
  return static_cast<std::byte*>(base_) + slots_offset(ranks_) + (2 * static_cast<size_t>(r) + half) * chunk_;
}

std::unique_ptr<SharedArena> SharedArena::create(Group& g, size_t chunk) {
  const int p = g.size(), me = g.rank();
  chunk = round_up(std::max<size_t>(chunk, 64), 64);
  const size_t bytes = segment_bytes(p, chunk);
  Invitation inv{};
  void* base = nullptr;
  if (me == 0) {
    std::random_device rd;
    inv.cookie = (static_cast<uint64_t>(rd()) << 32) ^ rd();
    std::snprintf(inv.name, sizeof inv.name, "/braid-arena-%d-%016llx", static_cast<int>(::getpid()),
                  static_cast<unsigned long long>(inv.cookie));
    const int fd = ::shm_open(inv.name, O_CREAT | O_EXCL | O_RDWR, 0600);
    if (fd >= 0) {
      if (::ftruncate(fd, static_cast<off_t>(bytes)) == 0) base = map(fd, bytes);
      ::close(fd);
      if (!base) ::shm_unlink(inv.name);
    }
    if (base) {
      *static_cast<Header*>(base) = {kMagic, inv.cookie, static_cast<uint64_t>(p), chunk};
      auto* controls = reinterpret_cast<Control*>(static_cast<std::byte*>(base) + controls_offset());
      for (int r = 0; r < p; ++r) new (&controls[r]) Control{};
      inv.ok = 1;
    }
  }
  binomial_broadcast(g, {reinterpret_cast<std::byte*>(&inv), sizeof inv}, 0);
  if (!inv.ok) return nullptr;
  if (me != 0) {
    inv.name[sizeof inv.name - 1] = '\0';
    const int fd = ::shm_open(inv.name, O_RDWR, 0600);
    struct stat st {};
    if (fd >= 0) {
      if (::fstat(fd, &st) == 0 && static_cast<size_t>(st.st_size) == bytes) base = map(fd, bytes);
      ::close(fd);
    }
    if (base) {
      const Header& h = *static_cast<const Header*>(base);
      if (h.magic != kMagic || h.cookie != inv.cookie || h.ranks != static_cast<uint64_t>(p) || h.chunk != chunk) {
        ::munmap(base, bytes);
        base = nullptr;
      }
    }
  }
  std::unique_ptr<SharedArena> arena;
  if (base) {
    arena.reset(new SharedArena(base, bytes, p, me, chunk));
    arena->control(me).pid = ::getpid();
  }
  int32_t all_mapped = base ? 1 : 0;
  ring_allreduce(g, {reinterpret_cast<std::byte*>(&all_mapped), 1, DType::i32, Op::min, 64});
  if (me == 0) ::shm_unlink(inv.name);  // everyone who could map it has
  if (!all_mapped) return nullptr;
  return arena;
}

void SharedArena::declare(uint64_t count, uint64_t kind) {
  control(me_).declared[0] = count;
  control(me_).declared[1] = kind;
}

void SharedArena::check_declarations(const char* op) {
  const Control& mine = control(me_);
  for (int r = 0; r < ranks_; ++r) {
    const Control& c = control(r);
    if (c.declared[0] != mine.declared[0] || c.declared[1] != mine.declared[1]) {
      broken_ = true;
      fail<ValueError>("rank {}: shared-memory {} of {} elements (kind {}), but rank {} runs {} elements (kind {})",
                       me_, op, mine.declared[0], mine.declared[1], r, c.declared[0], c.declared[1]);
    }
  }
}

uint32_t SharedArena::advance() {
  Control& c = control(me_);
  const uint32_t next = ++phase_;
  // seq_cst store then seq_cst load of `sleepers`, against the sleeper's
  // increment then re-read of `phase`: one of the two sides sees the other.
  c.phase.store(next, std::memory_order_seq_cst);
  if (c.sleepers.load(std::memory_order_seq_cst) != 0) futex_wake(c.phase);
  return next;
}

void SharedArena::wait_all(Group& g, uint32_t phase) {
  for (int r = 0; r < ranks_; ++r)
    if (r != me_) wait_for(g, r, phase);
}

void SharedArena::wait_for(Group& g, int r, uint32_t phase) {
  Control& c = control(r);
  auto reached = [&](uint32_t seen) { return static_cast<int32_t>(seen - phase) >= 0; };
  if (reached(c.phase.load(std::memory_order_acquire))) return;
  const auto spin = oversubscribed_ ? kSpinOversubscribed : g.on_worker() ? kSpinWorker : kSpinOwnCore;
  const auto spin_until = Clock::now() + spin;
  for (unsigned i = 1;; ++i) {
    cpu_relax();
    if (reached(c.phase.load(std::memory_order_acquire))) return;
    if (i % 64 == 0 && Clock::now() >= spin_until) break;
  }
  const bool arrived = futex_sleep_until(
      c.phase, c.sleepers, [&] { return reached(c.phase.load(std::memory_order_acquire)); },
      [&] {
        if (c.pid != ::getpid() && ::kill(c.pid, 0) != 0 && errno == ESRCH) {
          broken_ = true;
          fail<PeerError>("{}: rank {} (pid {}) died during the collective", g.what(), r, c.pid);
        }
      },
      g.deadline().at(), kLivenessCheck);
  if (!arrived) {
    broken_ = true;
    throw PeerTimeout(fmt::format("rank {} never reached step {} of the shared-memory collective (it is at {})", r,
                                  phase, c.phase.load()),
                      r);
  }
}

}  // namespace braid::comm
