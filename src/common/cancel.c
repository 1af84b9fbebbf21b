/* SPDX-License-Identifier: Apache-2.0 */
#include "common/cancel.h"

#include <errno.h>
#include <poll.h>
#include <stdint.h>
#include <sys/eventfd.h>
#include <time.h>
#include <unistd.h>

#include "common/clock.h"

int cs_cancel_init(cs_cancel *c)
{
    atomic_init(&c->cancelled, false);
    c->efd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
    return c->efd < 0 ? -1 : 0;
}

void cs_cancel_destroy(cs_cancel *c)
{
    if (c->efd >= 0)
        close(c->efd);
    c->efd = -1;
}

void cs_cancel_fire(cs_cancel *c)
{
    if (atomic_exchange(&c->cancelled, true))
        return;
    uint64_t one = 1;
    /* The counter only needs to become non-zero; a failed write cannot leave it zero after the
     * first success, and poll() watches for readability, never consumes it. */
    ssize_t w = write(c->efd, &one, sizeof one);
    (void)w;
}

bool cs_cancel_is_set(const cs_cancel *c)
{
    return atomic_load(&c->cancelled);
}

int cs_cancel_sleep_until(cs_cancel *c, int64_t deadline)
{
    struct pollfd pfd = {.fd = c->efd, .events = POLLIN};
    for (;;) {
        if (cs_cancel_is_set(c))
            return -1;
        int64_t left = deadline - cs_mono_ns();
        if (left <= 0)
            return 0;
        struct timespec ts = {.tv_sec = left / 1000000000, .tv_nsec = left % 1000000000};
        int r = ppoll(&pfd, 1, &ts, NULL);
        if (r > 0)
            return -1;
        /* r == 0: timeout, re-check the clock (ppoll may wake a little early); EINTR: retry. */
        if (r < 0 && errno != EINTR)
            return -1;
    }
}

int cs_cancel_wait_readable(cs_cancel *c, int fd)
{
    struct pollfd pfd[2] = {{.fd = fd, .events = POLLIN}, {.fd = c->efd, .events = POLLIN}};
    for (;;) {
        if (cs_cancel_is_set(c))
            return -1;
        int r = poll(pfd, 2, -1);
        if (r < 0 && errno == EINTR)
            continue;
        if (r < 0 || (pfd[1].revents & POLLIN))
            return -1;
        if (pfd[0].revents)
            return 0;
    }
}
