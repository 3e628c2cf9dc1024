// The installed header compiles alone as C++17 (-Wall -Wextra -Werror -pedantic) with C
// linkage for its functions, and its structs have the layout the ABI fixes (LP64).
#include <kvidx.h>
#include <kvidx.h>

#include <type_traits>

static_assert(sizeof(kvidx_block) == 16, "kvidx_block layout");
static_assert(sizeof(kvidx_match) == 16, "kvidx_match layout");
static_assert(sizeof(kvidx_stats) == 40, "kvidx_stats layout");
static_assert(sizeof(kvidx_config) == 12, "kvidx_config layout");
static_assert(sizeof(kvidx_event) == 80, "kvidx_event layout");
static_assert(sizeof(kvidx_queue_limits) == 16, "kvidx_queue_limits layout");
static_assert(std::is_standard_layout<kvidx_event>::value, "C layout");
static_assert(KVIDX_ABI_VERSION == 1, "ABI version");

extern "C" kvidx_status (*const kvidx_header_check_fn)(const kvidx_indexer *, const kvidx_event *);
kvidx_status (*const kvidx_header_check_fn)(const kvidx_indexer *, const kvidx_event *) =
    kvidx_apply_event;
