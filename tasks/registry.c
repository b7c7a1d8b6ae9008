/* tasks/registry.c — every codelet of the library, for sz-info --codelets (sz_codelets_count,
 * sz_codelet_info): the codelets of codelets/ (SZ_CODELETS, codelets/sz_codelets.h) and the
 * step's own (SZ_STEP_CODELETS, tasks/sz_comm.h), each with its descriptor's line (SZ_DESCRIBE);
 * which implementations each one has is read from the codelet itself (its cpu_funcs, cuda_funcs,
 * opencl_funcs), so a CUDA function added to a codelet shows without touching this file. The
 * list also links every codelet (and so its descriptor) into a static program that lists them. */
#include <string.h>
#include "sz_tasks.h"

#define SZ_TABLE_ENTRY(var) &var,
static struct starpu_codelet *const table[] = {SZ_CODELETS(SZ_TABLE_ENTRY) SZ_STEP_CODELETS(SZ_TABLE_ENTRY)};

int sz_codelets_count(void) { return (int)(sizeof table / sizeof table[0]); }

sz_status sz_codelet_info(int i, sz_codelet_desc *out)
{
    if (i < 0 || i >= sz_codelets_count() || !out)
        return SZ_ERR_INVALID;
    const struct starpu_codelet *cl = table[i];
    const sz_op_desc *d = sz_op_desc_of(cl);
    memset(out, 0, sizeof *out);
    out->name = cl->name;
    out->doc = d ? d->doc : "";
    out->perfmodel = cl->model && cl->model->symbol ? cl->model->symbol : "";
    for (int k = 0; k < STARPU_MAXIMPLEMENTATIONS; k++) {
        out->cpu += cl->cpu_funcs[k] != NULL;
        out->cuda += cl->cuda_funcs[k] != NULL;
        out->opencl += cl->opencl_funcs[k] != NULL;
    }
    return SZ_OK;
}
