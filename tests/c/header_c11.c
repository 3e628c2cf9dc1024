/* The installed header compiles alone as C11 (-Wall -Wextra -Werror -pedantic), twice over
 * (include guard), and its structs have the layout the ABI fixes (LP64). */
#include <kvidx.h>
#include <kvidx.h>

_Static_assert(sizeof(kvidx_block) == 16, "kvidx_block layout");
_Static_assert(sizeof(kvidx_match) == 16, "kvidx_match layout");
_Static_assert(sizeof(kvidx_stats) == 40, "kvidx_stats layout");
_Static_assert(sizeof(kvidx_config) == 12, "kvidx_config layout");
_Static_assert(sizeof(kvidx_event) == 80, "kvidx_event layout");
_Static_assert(sizeof(kvidx_queue_limits) == 16, "kvidx_queue_limits layout");
_Static_assert(sizeof(kvidx_replica_stats) == 24, "kvidx_replica_stats layout");
_Static_assert(sizeof(kvidx_snapshot_info) == 40, "kvidx_snapshot_info layout");
_Static_assert(sizeof(kvidx_hash_check_stats) == 24, "kvidx_hash_check_stats layout");
_Static_assert(KVIDX_ERR_IO == 10, "KVIDX_ERR_IO value");
_Static_assert(KVIDX_ABI_VERSION == 1, "ABI version");

kvidx_status (*const kvidx_header_check_fn)(const kvidx_indexer *, const kvidx_event *) =
    kvidx_apply_event;
