/* apps/common/lr_schedule.h — the learning rate of each step, as llm.c's trainer sets it: a
 * linear warmup over the first `warmup` steps (step i of 0.. gets lr * (i + 1) / warmup), then
 * either constant or a cosine decay from lr to min_lr at the last step:
 *   lr_i = min_lr + (lr - min_lr) * 0.5 * (1 + cos(pi * (i - warmup) / (steps - warmup))). */
#ifndef SZ_APP_LR_SCHEDULE_H
#define SZ_APP_LR_SCHEDULE_H

typedef enum sz_lr_kind { SZ_LR_CONSTANT = 0, SZ_LR_COSINE } sz_lr_kind;

typedef struct sz_lr_schedule {
    sz_lr_kind kind;
    double lr, min_lr;
    int warmup, steps;   /* warmup steps; the run's total steps (the cosine ends at the last one) */
} sz_lr_schedule;

/* The rate for step `step` (1-based, as sz-train counts). */
double sz_lr_at(const sz_lr_schedule *s, int step);
/* "constant" / "cosine" -> kind; -1 for anything else. */
int sz_lr_kind_parse(const char *name);

#endif
