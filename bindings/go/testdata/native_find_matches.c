/* Native baseline for the Go benchmarks: times kvidx_find_matches called from C on the set-up of
 * benches/find_matches.rs and bindings/go/bench_test.go (workers hold the same chain).
 * Build: cc -O2 -Wall -Wextra -Werror -o /tmp/native native_find_matches.c \
 *          $(pkg-config --cflags --libs kvidx)   (PKG_CONFIG_PATH=build/prefix/lib/pkgconfig)
 * Run:   /tmp/native [floor]    (LD_LIBRARY_PATH=build/prefix/lib) */
#include <kvidx.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

static double now(void) { struct timespec t; clock_gettime(CLOCK_MONOTONIC, &t); return t.tv_sec * 1e9 + t.tv_nsec; }

static void run(uint32_t backend, const char *name, uint64_t workers, size_t depth) {
  kvidx_config cfg = kvidx_config_default();
  cfg.backend = backend; cfg.event_threads = 0;
  kvidx_indexer *ix; if (kvidx_new(&cfg, &ix)) abort();
  uint64_t *loc = malloc(depth * 8), *seq = malloc(depth * 8);
  for (size_t i = 0; i < depth; i++) loc[i] = ((uint64_t)i * 0x9e3779b9ULL) ^ 0x55;
  kvidx_seq_hashes(loc, depth, seq);
  kvidx_block *b = malloc(depth * sizeof *b);
  for (size_t i = 0; i < depth; i++) { b[i].local_hash = loc[i]; b[i].seq_hash = seq[i]; }
  for (uint64_t w = 0; w < workers; w++) {
    kvidx_event e = {0}; e.kind = KVIDX_EVENT_STORED; e.worker_id = w; e.blocks = b; e.num_blocks = depth;
    if (kvidx_apply_event(ix, &e)) abort();
  }
  kvidx_match out[256]; size_t len = 0;
  long n = 1;
  for (;;) { double t = now(); for (long i = 0; i < n; i++) kvidx_find_matches(ix, loc, depth, out, 256, &len);
    if (now() - t > 2e8) break;
    n *= 2;
  }
  n *= 3;
  double t = now(); for (long i = 0; i < n; i++) kvidx_find_matches(ix, loc, depth, out, 256, &len);
  printf("c %s/workers%lu/depth%zu: %.1f ns/op (%zu)\n", name, (unsigned long)workers, depth, (now() - t) / n, len);
  kvidx_free(ix); free(loc); free(seq); free(b);
}

int main(int argc, char **argv) {
  (void)argv;
  if (argc < 2) {
    size_t d[] = {16, 128, 1024};
    for (int i = 0; i < 3; i++) run(0, "positional", 256, d[i]);
    for (int i = 0; i < 3; i++) run(1, "radix", 256, d[i]);
  }
  run(0, "floor", 1, 1);
  return 0;
}
