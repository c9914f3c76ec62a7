// What loopback TCP can do on this machine at all, without braid: the
// ceiling the tcp transport's figures should be read against.
//
//   build/bin/tcp_loopback_ceiling [SECONDS] [independent|striped]
//
// independent: K connections, a writer thread and a reader thread per
//   connection and direction (the most the kernel can move with K flows);
//   one direction, then both directions at once.
// striped: K connections, ONE writer and ONE reader thread per direction,
//   the stream cut into slices sent round-robin (slice j on connection
//   j mod K), as braid's StripedChannel does; for several slice sizes.
// Each write offers 1 MiB (independent) or one slice (striped); sockets get
// TCP_NODELAY and default (autotuned) buffers, as the tcp transport's do.
// GB/s = 1e9 bytes per second, payload only, per direction.
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

enum { kMaxStreams = 4, kChunk = 1 << 20 };

typedef struct {
  int fds[kMaxStreams];  // this end of each connection
  int k;
  size_t slice;          // 0: independent (one thread per fd)
  int index;             // independent: which fd
  _Atomic long long bytes;  // received (reader) / unused (writer)
} Side;

static _Atomic int g_stop;

static void die(const char* what) {
  perror(what);
  exit(1);
}

static double now_s(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

// Sends or receives exactly n bytes; 0 once the connection is shut down.
static int all(int fd, char* buf, size_t n, int sending) {
  while (n > 0) {
    ssize_t r = sending ? send(fd, buf, n, MSG_NOSIGNAL) : recv(fd, buf, n, 0);
    if (r <= 0) return 0;
    buf += r;
    n -= (size_t)r;
  }
  return 1;
}

static void* writer(void* arg) {
  Side* s = arg;
  size_t n = s->slice ? s->slice : kChunk;
  char* buf = calloc(1, n);
  for (long long j = 0; !atomic_load(&g_stop); ++j) {
    int fd = s->slice ? s->fds[j % s->k] : s->fds[s->index];
    if (!all(fd, buf, n, 1)) break;
  }
  free(buf);
  return NULL;
}

static void* reader(void* arg) {
  Side* s = arg;
  char* buf = malloc(kChunk);
  for (long long j = 0;; ++j) {
    ssize_t r;
    if (s->slice) {  // whole slices, in order, as the striped stream needs
      if (!all(s->fds[j % s->k], buf, s->slice, 0)) break;
      r = (ssize_t)s->slice;
    } else {
      r = recv(s->fds[s->index], buf, kChunk, 0);
      if (r <= 0) break;
    }
    atomic_fetch_add(&s->bytes, r);
  }
  free(buf);
  return NULL;
}

// K connected pairs over loopback: a[i] <-> b[i].
static void connect_pairs(int k, int* a, int* b) {
  int l = socket(AF_INET, SOCK_STREAM, 0);
  struct sockaddr_in addr = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
  socklen_t len = sizeof addr;
  if (l < 0 || bind(l, (struct sockaddr*)&addr, len) || listen(l, 16) ||
      getsockname(l, (struct sockaddr*)&addr, &len))
    die("listen");
  int one = 1;
  for (int i = 0; i < k; ++i) {
    a[i] = socket(AF_INET, SOCK_STREAM, 0);
    if (a[i] < 0 || connect(a[i], (struct sockaddr*)&addr, len)) die("connect");
    b[i] = accept(l, NULL, NULL);
    if (b[i] < 0) die("accept");
    setsockopt(a[i], IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    setsockopt(b[i], IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
  }
  close(l);
}

// Runs one configuration; prints GB/s for a->b and (both) b->a.
static void run(int k, size_t slice, int both, double seconds) {
  int a[kMaxStreams], b[kMaxStreams];
  connect_pairs(k, a, b);
  atomic_store(&g_stop, 0);
  // sides[0]: a writes, b reads; sides[1]: b writes, a reads.
  Side w[2][kMaxStreams], r[2][kMaxStreams];
  pthread_t threads[4 * kMaxStreams];
  int nthreads = 0;
  int per_dir = slice ? 1 : k;
  for (int dir = 0; dir <= both; ++dir) {
    for (int i = 0; i < per_dir; ++i) {
      Side* ws = &w[dir][i];
      Side* rs = &r[dir][i];
      memcpy(ws->fds, dir == 0 ? a : b, sizeof a);
      memcpy(rs->fds, dir == 0 ? b : a, sizeof a);
      ws->k = rs->k = k;
      ws->slice = rs->slice = slice;
      ws->index = rs->index = i;
      atomic_store(&ws->bytes, 0);
      atomic_store(&rs->bytes, 0);
      pthread_create(&threads[nthreads++], NULL, writer, ws);
      pthread_create(&threads[nthreads++], NULL, reader, rs);
    }
  }
  usleep(300000);  // warm-up: slow start, buffer autotuning
  long long start[2] = {0, 0}, end[2] = {0, 0};
  for (int dir = 0; dir <= both; ++dir)
    for (int i = 0; i < per_dir; ++i) start[dir] += atomic_load(&r[dir][i].bytes);
  double t0 = now_s();
  usleep((useconds_t)(seconds * 1e6));
  double dt = now_s() - t0;
  for (int dir = 0; dir <= both; ++dir)
    for (int i = 0; i < per_dir; ++i) end[dir] += atomic_load(&r[dir][i].bytes);
  atomic_store(&g_stop, 1);
  for (int i = 0; i < k; ++i) {  // unblocks every thread
    shutdown(a[i], SHUT_RDWR);
    shutdown(b[i], SHUT_RDWR);
  }
  for (int t = 0; t < nthreads; ++t) pthread_join(threads[t], NULL);
  for (int i = 0; i < k; ++i) {
    close(a[i]);
    close(b[i]);
  }
  char slice_text[32] = "-";
  if (slice) snprintf(slice_text, sizeof slice_text, "%zuK", slice >> 10);
  double g0 = (double)(end[0] - start[0]) / dt / 1e9, g1 = (double)(end[1] - start[1]) / dt / 1e9;
  if (both)
    printf("%-12s %7d %6s  both  %6.2f %6.2f   %6.2f\n", slice ? "striped" : "independent", k, slice_text, g0,
           g1, g0 + g1);
  else
    printf("%-12s %7d %6s  one   %6.2f %6s   %6.2f\n", slice ? "striped" : "independent", k, slice_text, g0,
           "-", g0);
  fflush(stdout);
}

int main(int argc, char** argv) {
  double seconds = argc > 1 ? atof(argv[1]) : 2.0;
  const char* only = argc > 2 ? argv[2] : "";
  if (seconds <= 0 || (*only && strcmp(only, "independent") && strcmp(only, "striped"))) {
    fprintf(stderr, "usage: %s [SECONDS] [independent|striped]\n", argv[0]);
    return 2;
  }
  long cores = sysconf(_SC_NPROCESSORS_ONLN);
  printf("loopback TCP, %.1f s per line, %ld cores; GB/s = 1e9 B/s per direction\n", seconds, cores);
  printf("%-12s %7s %6s  %-4s  %6s %6s   %6s\n", "mode", "streams", "slice", "dir", "a->b", "b->a", "total");
  const int ks[] = {1, 2, 4};
  if (strcmp(only, "striped"))
    for (int both = 0; both <= 1; ++both)
      for (int i = 0; i < 3; ++i) run(ks[i], 0, both, seconds);
  if (strcmp(only, "independent")) {
    const size_t slices[] = {16 << 10, 64 << 10, 256 << 10, 1 << 20};
    for (int i = 1; i < 3; ++i)
      for (int s = 0; s < 4; ++s) run(ks[i], slices[s], 0, seconds);
  }
  return 0;
}
