#include "common/child.h"

#include <errno.h>
#include <limits.h>
#include <poll.h>
#include <sys/wait.h>
#include <unistd.h>

#include "common/clock.h"

int cs_child_wait(cs_child *c, int64_t deadline, cs_cancel *cancel, int drain_fd)
{
    char scratch[16384];
    for (;;) {
        if (c->reaped)
            return 1;
        int st;
        pid_t w = waitpid(c->pid, &st, WNOHANG);
        if (w == c->pid) {
            c->reaped = true;
            c->status = st;
            return 1;
        }
        if (w < 0 && errno != EINTR) {
            /* ECHILD: reaped behind our back (SIGCHLD ignored). Nothing left to wait for. */
            c->reaped = true;
            c->wait_errno = errno;
            return 1;
        }
        if (cancel && cs_cancel_is_set(cancel))
            return -1;
        int timeout_ms = -1;
        if (deadline >= 0) {
            int64_t left = deadline - cs_mono_ns();
            if (left <= 0)
                return 0;
            int64_t ms = (left + 999999) / 1000000;
            timeout_ms = ms > INT_MAX ? INT_MAX : (int)ms;
        }
        struct pollfd pfd[3];
        nfds_t n = 0;
        if (c->pidfd >= 0)
            pfd[n++] = (struct pollfd){.fd = c->pidfd, .events = POLLIN};
        else if (timeout_ms < 0 || timeout_ms > 10)
            timeout_ms = 10; /* no pidfd: poll waitpid every 10 ms */
        if (cancel)
            pfd[n++] = (struct pollfd){.fd = cancel->efd, .events = POLLIN};
        nfds_t drain_at = n;
        if (drain_fd >= 0)
            pfd[n++] = (struct pollfd){.fd = drain_fd, .events = POLLIN};
        if (poll(pfd, n, timeout_ms) < 0 && errno != EINTR)
            return 0;
        if (drain_fd >= 0 && pfd[drain_at].revents) {
            ssize_t k = read(drain_fd, scratch, sizeof scratch);
            if (k == 0 || (k < 0 && errno != EAGAIN && errno != EINTR))
                drain_fd = -1; /* EOF: nothing more to drain */
        }
    }
}

