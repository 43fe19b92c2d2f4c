/* dispatch.c - the dispatch table and the public entry points of every kernel, expanded from
 * a2r_kernel_list.h (compiled once, baseline flags). a2r_kernels.h documents each entry point;
 * a signature here that differs from it is a conflicting-types error. */
#include "a2r_kernel_list.h"

extern int a2r_active_isa; /* owned by runtime.c: an A2R_ISA_* level this build has */

/* Every variant at every level. */
A2R_ISA_LEVELS(A2R_DECLARE_LEVEL, _)

/* One row of function pointers per level, indexed by the level's A2R_ISA_* id. */
#define A2R_TABLE_FIELD(unused, ret, name, params, args) ret(*name) params;
typedef struct {
    A2R_KERNEL_LIST(A2R_TABLE_FIELD, _)
} a2r_kernel_table;

#define A2R_TABLE_ENTRY(level, ret, name, params, args) .name = A2R_CAT(name, level),
#define A2R_TABLE_ROW(unused, level, id) [id] = {A2R_KERNEL_LIST(A2R_TABLE_ENTRY, level)},
static const a2r_kernel_table kernel_table[] = {A2R_ISA_LEVELS(A2R_TABLE_ROW, _)};
#define A2R_COUNT_LEVEL(unused, level, id) +1
_Static_assert(sizeof kernel_table / sizeof kernel_table[0] == 0 A2R_ISA_LEVELS(A2R_COUNT_LEVEL, _),
               "A2R_ISA_LEVELS ids must be 0, 1, ... without gaps (no NULL row in the table)");

/* The entry points: the active level's variant, with the arguments as given. */
#define A2R_RETURN_void
#define A2R_RETURN_int return
#define A2R_RETURN_int64_t return
#define A2R_RETURN_double return
#define A2R_ENTRY_POINT(unused, ret, name, params, args)                                        \
    ret name params { A2R_RETURN_##ret kernel_table[a2r_active_isa].name args; }
A2R_KERNEL_LIST(A2R_ENTRY_POINT, _)
