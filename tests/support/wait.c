/* SPDX-License-Identifier: Apache-2.0 */
#include "support/wait.h"

#include <errno.h>
#include <time.h>

static long long now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (long long)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

int cs_wait_until(bool (*pred)(void *arg), void *arg, int timeout_ms)
{
    long long until = now_ms() + timeout_ms;
    for (;;) {
        if (pred(arg))
            return 0;
        if (now_ms() >= until)
            return pred(arg) ? 0 : -1;
        struct timespec ts = {.tv_nsec = 10 * 1000 * 1000};
        while (nanosleep(&ts, &ts) != 0 && errno == EINTR)
            ;
    }
}
