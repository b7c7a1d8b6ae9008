/* tests/test_status.c — status strings and configuration defaults (no runtime needed). */
#include <string.h>
#include "starzero.h"
#include "sz_test.h"

static void test_status_strings(void)
{
    for (int s = SZ_OK; s <= SZ_ERR_STATE; s++) {
        const char *msg = sz_status_string((sz_status)s);
        CU_ASSERT_PTR_NOT_NULL_FATAL(msg);
        CU_ASSERT(strlen(msg) > 0);
        CU_ASSERT(strcmp(msg, "unknown status") != 0);
    }
    CU_ASSERT_STRING_EQUAL(sz_status_string((sz_status)999), "unknown status");
}

static void test_config_defaults(void)
{
    sz_context_config c;
    memset(&c, 0x5a, sizeof c);
    sz_context_config_defaults(&c);
    CU_ASSERT_EQUAL(c.ncpus, -1);
    CU_ASSERT_EQUAL(c.ncuda, -1);
    CU_ASSERT_EQUAL(c.bind_share, 1);
    CU_ASSERT_PTR_NULL(c.sched_policy);
    CU_ASSERT_PTR_NULL(c.log_fn);
    CU_ASSERT_EQUAL(c.log_level, SZ_LOG_WARN);
}

static void test_free_null(void)
{
    sz_context_free(NULL); /* must be a no-op */
    CU_ASSERT_EQUAL(sz_context_init(NULL, NULL, NULL, NULL), SZ_ERR_INVALID);
}

int main(void)
{
    if (CU_initialize_registry() != CUE_SUCCESS)
        return 1;
    SZ_SUITE("status", {"status strings", test_status_strings}, {"config defaults", test_config_defaults},
             {"free(NULL)", test_free_null});
    return sz_test_run();
}
