/* codelets/registry.c — the table of every codelet the engine registers (the SZ_CODELETS list in
 * sz_codelets.h), for sz-info --codelets: which implementations each one has is read from the
 * codelet itself (its cpu_funcs, cuda_funcs, opencl_funcs), so a CUDA function added to a codelet
 * shows without touching this file. */
#include <string.h>
#include "sz_tasks.h"

#define SZ_TABLE_ENTRY(var, doc) &var,
#define SZ_DOC_ENTRY(var, doc) doc,
struct starpu_codelet *const sz_codelet_table[] = {SZ_CODELETS(SZ_TABLE_ENTRY)};
const char *const sz_codelet_doc[] = {SZ_CODELETS(SZ_DOC_ENTRY)};
const int sz_codelet_count = (int)(sizeof sz_codelet_table / sizeof sz_codelet_table[0]);

int sz_codelets_count(void) { return sz_codelet_count; }

sz_status sz_codelet_info(int i, sz_codelet_desc *out)
{
    if (i < 0 || i >= sz_codelet_count || !out)
        return SZ_ERR_INVALID;
    const struct starpu_codelet *cl = sz_codelet_table[i];
    memset(out, 0, sizeof *out);
    out->name = cl->name;
    out->doc = sz_codelet_doc[i];
    out->perfmodel = cl->model && cl->model->symbol ? cl->model->symbol : "";
    for (int k = 0; k < STARPU_MAXIMPLEMENTATIONS; k++) {
        out->cpu += cl->cpu_funcs[k] != NULL;
        out->cuda += cl->cuda_funcs[k] != NULL;
        out->opencl += cl->opencl_funcs[k] != NULL;
    }
    return SZ_OK;
}
