/* libkvidx.a and another Rust static library (tests/c/other-rust-lib) linked into one program:
 * both work, including threads and panics caught inside each. */
#include <stdint.h>
#include <stdio.h>

#include <kvidx.h>

#include "check.h"
#include "helpers.h"

uint64_t other_sum_on_thread(uint32_t n);
uint32_t other_caught_panic(void);

static void both_libraries_work_in_one_program(void) {
    CHECK_EQ(other_sum_on_thread(100), 5050);
    CHECK_EQ(other_caught_panic(), 1);

    const mode m = {"pooled", KVIDX_BACKEND_POSITIONAL, 2, 0};
    kvidx_indexer *ix = make_indexer(&m);
    kvidx_block blocks[3];
    chain(blocks, 3, 1);
    uint64_t q[3];
    query_of(q, 3, 1);
    CHECK_EQ(apply(ix, stored(1, 0, blocks, 3)), KVIDX_OK);
    CHECK_EQ(depth_of(ix, q, 3, 1, 0), 3);
    CHECK_EQ(kvidx_debug_panic(ix), KVIDX_ERR_PANIC);
    CHECK_EQ(kvidx_flush(ix), KVIDX_ERR_POISONED);
    kvidx_free(ix);

    CHECK_EQ(other_sum_on_thread(10), 55);
    CHECK_EQ(other_caught_panic(), 1);
}

int main(void) {
    RUN(both_libraries_work_in_one_program);
    return finish("test_two_rust_libs");
}
