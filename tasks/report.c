/* tasks/report.c — the memory report: each category's bytes (persistent, transient peak, the
 * plan's prediction, the device's measured peak) on this rank and on every rank. */
#include <math.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include "sz_tasks.h"
#include "sz_cuda.h"
#include "sz_kernels.h"
#include "sz_deadline.h"

/* ---- the memory report ---------------------------------------------------------------------- */

const char *sz_mem_category_name(sz_mem_category c)
{
    static const char *names[SZ_MEM_NCATEGORIES] = {
        "full params", "param shard", "gathered units in flight", "grads", "grad shard", "grads in flight",
        "fp32 master", "Adam m / SGD momentum", "Adam v", "activations", "communication buffers", "checkpoints on device",
        "host pool (checkpoints)", "host buffers"};
    return c >= 0 && c < SZ_MEM_NCATEGORIES ? names[c] : "?";
}

sz_status sz_model_memory_report(const sz_model *m, sz_memory_report *r)
{
    if (!m || !r)
        return SZ_ERR_INVALID;
    memset(r, 0, sizeof *r);
    int64_t persistent = 0;
    for (int c = 0; c < SZ_MEM_NCATEGORIES; c++) {
        int64_t transient = __atomic_load_n(&m->counters.peak[c], __ATOMIC_RELAXED);
        r->bytes[c] = m->persistent[c] + transient;
        persistent += m->persistent[c];
    }
    r->model_state_bytes = r->bytes[SZ_MEM_PARAMS] + r->bytes[SZ_MEM_PARAM_SHARD] + r->bytes[SZ_MEM_GRADS] +
                           r->bytes[SZ_MEM_GRAD_SHARD] + r->bytes[SZ_MEM_MASTER] + r->bytes[SZ_MEM_OPT_STATE0] +
                           r->bytes[SZ_MEM_OPT_STATE1];
    r->peak_bytes = persistent + __atomic_load_n(&m->counters.peak_total, __ATOMIC_RELAXED);
    r->device_peak_bytes = r->peak_bytes - m->persistent[SZ_MEM_HOST] - m->persistent[SZ_MEM_HOST_BUFFERS];
    if (m->zero.offload_optimizer)
        r->device_peak_bytes -= m->persistent[SZ_MEM_MASTER] + m->persistent[SZ_MEM_OPT_STATE0] + m->persistent[SZ_MEM_OPT_STATE1];
    if (m->nd > 1 && sz_model_have_cuda() && !sz_model_comm_on_gpu(m)) /* the plan's comm_on_host (tasks/step.c) */
        r->device_peak_bytes -= m->persistent[SZ_MEM_COMM];
    r->matmul_host_peak_bytes = sz_k_matmul_host_peak();
    r->comm_bytes_sent = m->step_sent;
    r->comm_bytes_received = m->step_received;
    r->comm_seconds = m->step_ns * 1e-9;
    r->nparams = sz_model_nparams(m);
    for (int i = 0; i < m->nunits; i++)
        r->nparams_padded += m->units[i]->padded;
    r->stage = m->zero.stage;
    r->nd = m->nd;
    r->micro_batches = m->zero.micro_batches;
    r->precision = m->zero.precision;
    r->predicted_peak_bytes = m->predicted_peak;
    r->overlap = m->overlap;
    r->ntimeline = m->ntimeline;
    memcpy(r->timeline_ms, m->timeline_ms, sizeof r->timeline_ms);
    memcpy(r->timeline_bytes, m->timeline_bytes, sizeof r->timeline_bytes);
    r->mem_budget = m->budget;
    r->budget_from_machine = m->budget_from_machine;
    snprintf(r->bf16_path, sizeof r->bf16_path, "%s", sz_model_bf16_path(m));
    r->rss_peak_bytes = sz_memory_rss_peak_bytes();
    r->arenas = m->zero.arenas;
    r->comm_task_s = m->comm_busy_s;
    r->compute_task_s = m->compute_busy_s;
    r->matmul_task_s = m->task_times.matmul_s;
    r->optimizer_task_s = m->task_times.optimizer_s;
    r->convert_task_s = m->task_times.convert_s;
    r->zero_task_s = m->task_times.zero_s;
    r->ncodelets = m->task_times.ncl < SZ_MAX_CODELETS ? m->task_times.ncl : SZ_MAX_CODELETS;
    for (int c = 0; c < r->ncodelets; c++) {
        snprintf(r->codelets[c].name, sizeof r->codelets[c].name, "%s", m->task_times.cl[c].name);
        r->codelets[c].seconds = m->task_times.cl[c].s;
        r->codelets[c].tasks = m->task_times.cl[c].tasks;
    }
    r->pool_active = sz_devpool_stats(&r->pool);
    sz_devwatch_report(m, r);
    return SZ_OK;
}

sz_status sz_model_memory_report_all(const sz_model *m, sz_memory_report *ranks)
{
    sz_memory_report mine;
    sz_status st = sz_model_memory_report(m, &mine);
    if (st != SZ_OK)
        return st;
    if (m->rank == 0 && !ranks)
        return SZ_ERR_INVALID;
    if (sz_gather(&mine, (int)sizeof mine, MPI_BYTE, ranks, (int)sizeof mine, MPI_BYTE, 0, m->core.ctx->host_comm,
                  "memory report gather") != MPI_SUCCESS)
        return SZ_ERR_RUNTIME;
    return SZ_OK;
}

sz_status sz_model_unit_sizes(const sz_model *m, int64_t *padded)
{
    if (!m || !padded || !m->finalized)
        return SZ_ERR_INVALID;
    for (int i = 0; i < m->nunits; i++)
        padded[i] = m->units[i]->padded;
    return SZ_OK;
}
