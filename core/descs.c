/* core/descs.c — the codelets' descriptors (SZ_DESCRIBE, core/sz_core.h) as one list: each
 * descriptor puts a pointer to itself in the ELF section sz_op_descs, which the linker gathers from
 * every object linked in and brackets with __start_sz_op_descs and __stop_sz_op_descs; sorted by
 * codelet name on first use. Looked up by codelet address (linear: about 50 entries). */
#include <stdlib.h>
#include <string.h>
#include <pthread.h>
#include "sz_core.h"

extern const sz_op_desc *const __start_sz_op_descs[] __attribute__((weak, visibility("hidden")));
extern const sz_op_desc *const __stop_sz_op_descs[] __attribute__((weak, visibility("hidden")));

static const sz_op_desc **sorted;
static int nsorted;
static pthread_once_t once = PTHREAD_ONCE_INIT;

static int by_name(const void *a, const void *b)
{
    const sz_op_desc *x = *(const sz_op_desc *const *)a, *y = *(const sz_op_desc *const *)b;
    return strcmp(x->cl->name ? x->cl->name : "", y->cl->name ? y->cl->name : "");
}

static void build(void)
{
    int n = __start_sz_op_descs ? (int)(__stop_sz_op_descs - __start_sz_op_descs) : 0;
    sorted = n > 0 ? malloc((size_t)n * sizeof *sorted) : NULL;
    if (!sorted)
        return;
    memcpy(sorted, __start_sz_op_descs, (size_t)n * sizeof *sorted);
    qsort(sorted, (size_t)n, sizeof *sorted, by_name);
    nsorted = n;
}

const sz_op_desc *const *sz_op_descs(int *n)
{
    pthread_once(&once, build);
    *n = nsorted;
    return sorted;
}

const sz_op_desc *sz_op_desc_of(const struct starpu_codelet *cl)
{
    int n;
    const sz_op_desc *const *d = sz_op_descs(&n);
    for (int i = 0; cl && i < n; i++)
        if (d[i]->cl == cl)
            return d[i];
    return NULL;
}
