/* test_lr_schedule.c — train/lr_schedule.c against llm.c's schedule written out by hand
 * (train_gpt2.cu: warmup lr*(step+1)/warmup, then cosine from lr to min_lr over the remaining
 * steps, 0-based step), and the constant schedule. */
#include <math.h>
#include <CUnit/Basic.h>
#include "starzero_train.h"
#include "sz_test.h"

static double llmc(double lr, double min_lr, int warmup, int total, int step0)
{
    if (step0 < warmup)
        return lr * ((double)(step0 + 1)) / warmup;
    double decay_ratio = ((double)(step0 - warmup)) / (total - warmup);
    double coeff = 0.5 * (1.0 + cos(M_PI * decay_ratio));
    return min_lr + coeff * (lr - min_lr);
}

static void test_cosine(void)
{
    sz_lr_schedule s = {SZ_LR_COSINE, 6e-4, 6e-5, 10, 100};
    for (int step = 1; step <= 100; step++)
        CU_ASSERT_DOUBLE_EQUAL(sz_lr_at(&s, step), llmc(6e-4, 6e-5, 10, 100, step - 1), 1e-15);
    CU_ASSERT_DOUBLE_EQUAL(sz_lr_at(&s, 1), 6e-5, 1e-15);   /* 1/10 of lr */
    CU_ASSERT_DOUBLE_EQUAL(sz_lr_at(&s, 11), 6e-4, 1e-15);  /* the peak right after the warmup */
}

static void test_constant(void)
{
    sz_lr_schedule s = {SZ_LR_CONSTANT, 1e-3, 0, 4, 50};
    CU_ASSERT_DOUBLE_EQUAL(sz_lr_at(&s, 1), 2.5e-4, 1e-15);
    CU_ASSERT_DOUBLE_EQUAL(sz_lr_at(&s, 4), 1e-3, 1e-15);
    CU_ASSERT_DOUBLE_EQUAL(sz_lr_at(&s, 50), 1e-3, 1e-15);
    sz_lr_schedule none = {SZ_LR_COSINE, 1e-3, 1e-4, 0, 1};
    CU_ASSERT_DOUBLE_EQUAL(sz_lr_at(&none, 1), 1e-3, 1e-15); /* one step: the cosine's start */
    CU_ASSERT_EQUAL(sz_lr_kind_parse("cosine"), SZ_LR_COSINE);
    CU_ASSERT_EQUAL(sz_lr_kind_parse("linear"), -1);
}

int main(void)
{
    if (CU_initialize_registry() != CUE_SUCCESS)
        return 1;
    SZ_SUITE("lr schedule", {"warmup + cosine = llm.c", test_cosine}, {"warmup + constant", test_constant});
    return sz_test_run();
}
