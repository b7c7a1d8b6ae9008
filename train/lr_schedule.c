/* train/lr_schedule.c — warmup + constant or cosine learning rate (include/starzero_train.h). */
#include <math.h>
#include <string.h>
#include "starzero_train.h"

double sz_lr_at(const sz_lr_schedule *s, int step)
{
    int i = step - 1;
    if (i < s->warmup)
        return s->lr * (double)(i + 1) / (double)s->warmup;
    if (s->kind == SZ_LR_CONSTANT || s->steps <= s->warmup)
        return s->lr;
    double ratio = (double)(i - s->warmup) / (double)(s->steps - s->warmup);
    return s->min_lr + 0.5 * (1.0 + cos(M_PI * ratio)) * (s->lr - s->min_lr);
}

int sz_lr_kind_parse(const char *name)
{
    return !name ? -1 : !strcmp(name, "constant") ? SZ_LR_CONSTANT : !strcmp(name, "cosine") ? SZ_LR_COSINE : -1;
}
