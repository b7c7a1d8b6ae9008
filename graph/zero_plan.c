/* graph/zero_plan.c — the step plan's memory prediction (pure C): walks one step's sequence of
 * gathers, releases, gradient allocations and reduce-scatters exactly as tasks/zero.c submits
 * them and returns the peak of the transient bytes (gathered units and fp32 working copies,
 * gradients in flight), to which the caller adds what is allocated for good. The engine refuses a
 * configuration whose predicted peak exceeds the memory budget before anything runs. */
#include <stdlib.h>
#include "sz_plan.h"

/* Bytes of parameters a unit's compute tasks need present (stage-3 gathered copy, mixed-precision
 * working copy; both at once while the one is converted into the other). */
static int64_t params_bytes(const sz_plan_unit *u, int stage, int mixed)
{
    int64_t b = 0;
    if (stage == 3)
        b += u->padded * (mixed ? 2 : 4);
    if (mixed)
        b += u->padded * 4;
    return b;
}

/* The unit and the units it uses (tied weights), each once. */
static int64_t with_uses(const sz_plan_unit *units, int i, int stage, int mixed)
{
    int64_t b = params_bytes(&units[i], stage, mixed);
    for (int k = 0; k < units[i].nuses; k++)
        if (units[i].uses[k] != i)
            b += params_bytes(&units[units[i].uses[k]], stage, mixed);
    return b;
}

int64_t sz_plan_transient_peak(const sz_plan_unit *units, int n, int stage, int mixed, int64_t prefetch_bytes,
                               int early_grads)
{
    if (!units || n < 1)
        return 0;
    int per_unit_grads = mixed || stage >= 2; /* gradients allocated per unit, freed after use */
    char *live = calloc((size_t)n, 1);
    if (!live)
        return -1;
    int64_t peak = 0, grads = 0;
    /* forward: the current unit's parameters plus at most prefetch_bytes gathered ahead */
    for (int i = 0; i < n; i++) {
        int64_t b = with_uses(units, i, stage, mixed) + (stage == 3 ? prefetch_bytes : 0);
        peak = b > peak ? b : peak;
    }
    /* backward, last unit first */
    for (int i = n - 1; i >= 0; i--) {
        /* unit i's gradients, and with early_grads the next unit's (i - 1), touched before i's
         * reduce-scatter so that backward(i - 1) need not wait for it */
        for (int j = i; j >= (early_grads ? i - 1 : i) && j >= 0 && per_unit_grads; j--) {
            if (!units[j].has_backward)
                continue;
            if (!live[j]) {
                live[j] = 1;
                grads += units[j].padded * 4;
            }
            for (int k = 0; k < units[j].nuses; k++) {
                int v = units[j].uses[k];
                if (!live[v]) {
                    live[v] = 1;
                    grads += units[v].padded * 4;
                }
            }
        }
        int64_t b = (units[i].has_backward ? (units[i].backward_params ? with_uses(units, i, stage, mixed) : 0) +
                                                 (stage == 3 ? prefetch_bytes : 0)
                                           : 0)
                    + grads + (mixed && stage >= 2 ? units[i].padded * 2 : 0); /* the bf16 copy being reduced */
        peak = b > peak ? b : peak;
        if (live[i]) {
            live[i] = 0;
            grads -= units[i].padded * 4;
        }
    }
    free(live);
    return peak;
}

int64_t sz_plan_state_bytes(const sz_plan_unit *units, int n, int stage, int nd, int mixed)
{
    int64_t psi = 0;
    for (int i = 0; i < n; i++)
        psi += units[i].padded;
    int64_t p = mixed ? 2 : 4, shard = psi / nd;
    switch (stage) {
    case 0: return psi * (p + p + 8 + (mixed ? 4 : 0));
    case 1: return psi * (p + p) + shard * (8 + (mixed ? 4 : 0));
    case 2: return psi * p + shard * (p + 8 + (mixed ? 4 : 0));
    default: return shard * (p + p + 8 + (mixed ? 4 : 0));
    }
}
