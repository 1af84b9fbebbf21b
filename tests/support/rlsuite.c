/* SPDX-License-Identifier: Apache-2.0 */
/* Test support: what the libremoteledger unit tests share. See rlsuite.h. */
#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <time.h>

#include <cmocka.h>

#include "corestream/remoteledger.h"
#include "support/rlclient.h"
#include "support/rlsuite.h"

void assert_contains(const char *haystack, const char *needle)
{
    if (!strstr(haystack, needle))
        fail_msg("\"%s\" does not contain \"%s\"", haystack, needle);
}

int64_t mono_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

void cancel_stream(void *arg) { rl_stream_cancel(arg); }

int rlsuite_run(const struct CMUnitTest *tests, size_t n)
{
    rlclient_pull = false;
    rlclient_poll = false;
    int failed = _cmocka_run_group_tests("callback", tests, n, NULL, NULL);
    rlclient_pull = true;
    failed += _cmocka_run_group_tests("pull", tests, n, NULL, NULL);
    rlclient_poll = true;
    failed += _cmocka_run_group_tests("poll", tests, n, NULL, NULL);
    return failed;
}
