/* tests/sz_test.h — a few lines every CUnit test shares: run the registered suites with the
 * basic runner and turn failures into a non-zero exit code. */
#ifndef SZ_TEST_H
#define SZ_TEST_H
#include <CUnit/Basic.h>

static inline int sz_test_run(void)
{
    CU_basic_set_mode(CU_BRM_VERBOSE);
    CU_basic_run_tests();
    unsigned failed = CU_get_number_of_failures() + CU_get_number_of_tests_failed();
    CU_cleanup_registry();
    return failed ? 1 : 0;
}

#define SZ_SUITE(name, ...)                                                                  \
    do {                                                                                     \
        CU_pSuite s_ = CU_add_suite(name, NULL, NULL);                                       \
        CU_TestInfo t_[] = {__VA_ARGS__, CU_TEST_INFO_NULL};                                  \
        for (CU_TestInfo *t = t_; t->pName; t++)                                             \
            CU_add_test(s_, t->pName, t->pTestFunc);                                         \
    } while (0)
#endif
