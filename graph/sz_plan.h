/* graph/sz_plan.h — memory prediction of one ZeRO step from the units' sizes (pure C, no runtime):
 * what the engine checks against the memory budget before the first step. */
#ifndef SZ_PLAN_H
#define SZ_PLAN_H
#include <stdint.h>

typedef struct sz_plan_unit {
    int64_t padded;      /* the unit's flat element count, padded to a multiple of N_d */
    const int *uses;     /* tied units it reads and accumulates gradients into */
    int nuses;
    int has_backward;
    int backward_params; /* its backward needs its parameters (and its tied units') present */
} sz_plan_unit;

/* Peak bytes of the transients (gathered / working parameters, gradients in flight) over one
 * step's plan for this stage and precision, with `prefetch_bytes` of parameters gathered ahead;
 * early_grads: the next unit's gradients are allocated before a unit's reduce-scatter (what the
 * engine does with a communication worker). */
int64_t sz_plan_transient_peak(const sz_plan_unit *units, int n, int stage, int mixed, int64_t prefetch_bytes,
                               int early_grads);
/* Persistent model-state bytes per rank the engine allocates for these units (padded sizes). */
int64_t sz_plan_state_bytes(const sz_plan_unit *units, int n, int stage, int nd, int mixed);
#endif
