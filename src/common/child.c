/* SPDX-License-Identifier: Apache-2.0 */
#include "common/child.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include "common/clock.h"

extern char **environ;

int cs_child_fd_above_3(int fd)
{
    if (fd > 3)
        return fd;
    int moved = fcntl(fd, F_DUPFD_CLOEXEC, 4);
    int e = errno;
    close(fd);
    errno = e;
    return moved;
}

int cs_child_spawn(cs_child *c, const char *file, char *const argv[], posix_spawn_file_actions_t *fa, int keep_fds,
                   bool new_pgroup)
{
    *c = (cs_child){.pid = -1, .pidfd = -1};
    int rc;
#if defined(__GLIBC__) && (__GLIBC__ > 2 || (__GLIBC__ == 2 && __GLIBC_MINOR__ >= 34))
    if ((rc = posix_spawn_file_actions_addclosefrom_np(fa, keep_fds)) != 0)
        return rc;
#else
    (void)keep_fds; /* ours are close-on-exec; only fds we inherited open would leak */
#endif
    posix_spawnattr_t at;
    if ((rc = posix_spawnattr_init(&at)) != 0)
        return rc;
    sigset_t none, dfl;
    sigemptyset(&none);
    sigemptyset(&dfl);
    int defaults[] = {SIGHUP, SIGINT, SIGQUIT, SIGPIPE, SIGTERM};
    for (size_t i = 0; i < sizeof defaults / sizeof defaults[0]; i++)
        sigaddset(&dfl, defaults[i]);
    short flags = POSIX_SPAWN_SETSIGMASK | POSIX_SPAWN_SETSIGDEF;
    if (rc == 0)
        rc = posix_spawnattr_setsigmask(&at, &none);
    if (rc == 0)
        rc = posix_spawnattr_setsigdefault(&at, &dfl);
    if (rc == 0 && new_pgroup) {
        rc = posix_spawnattr_setpgroup(&at, 0);
        flags |= POSIX_SPAWN_SETPGROUP;
    }
    if (rc == 0)
        rc = posix_spawnattr_setflags(&at, flags);
    if (rc == 0)
        rc = posix_spawnp(&c->pid, file, fa, &at, argv, environ);
    posix_spawnattr_destroy(&at);
    if (rc != 0) {
        c->pid = -1;
        return rc;
    }
#ifdef SYS_pidfd_open
    c->pidfd = (int)syscall(SYS_pidfd_open, c->pid, 0);
#endif
    return 0;
}

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


/* Go's names for signals (syscall's table on Linux), as ProcessState.String prints them. */
static const char *go_signal_name(int sig, char *buf, size_t len)
{
    static const char *const names[] = {
        [SIGHUP] = "hangup",
        [SIGINT] = "interrupt",
        [SIGQUIT] = "quit",
        [SIGILL] = "illegal instruction",
        [SIGTRAP] = "trace/breakpoint trap",
        [SIGABRT] = "aborted",
        [SIGBUS] = "bus error",
        [SIGFPE] = "floating point exception",
        [SIGKILL] = "killed",
        [SIGUSR1] = "user defined signal 1",
        [SIGSEGV] = "segmentation fault",
        [SIGUSR2] = "user defined signal 2",
        [SIGPIPE] = "broken pipe",
        [SIGALRM] = "alarm clock",
        [SIGTERM] = "terminated",
        [SIGSTKFLT] = "stack fault",
        [SIGCHLD] = "child exited",
        [SIGCONT] = "continued",
        [SIGSTOP] = "stopped (signal)",
        [SIGTSTP] = "stopped",
        [SIGTTIN] = "stopped (tty input)",
        [SIGTTOU] = "stopped (tty output)",
        [SIGURG] = "urgent I/O condition",
        [SIGXCPU] = "CPU time limit exceeded",
        [SIGXFSZ] = "file size limit exceeded",
        [SIGVTALRM] = "virtual timer expired",
        [SIGPROF] = "profiling timer expired",
        [SIGWINCH] = "window changed",
        [SIGIO] = "I/O possible",
        [SIGPWR] = "power failure",
        [SIGSYS] = "bad system call",
    };
    if (sig > 0 && (size_t)sig < sizeof names / sizeof names[0] && names[sig])
        return names[sig];
    snprintf(buf, len, "signal %d", sig);
    return buf;
}

/* os.ProcessState.String: "exit status N", "signal: killed", "signal: aborted (core dumped)". */
static void wait_status_string(int st, char *buf, size_t len)
{
    char sig[32];
    if (WIFEXITED(st))
        snprintf(buf, len, "exit status %d", WEXITSTATUS(st));
    else if (WIFSIGNALED(st))
        snprintf(buf, len, "signal: %s%s", go_signal_name(WTERMSIG(st), sig, sizeof sig),
                 WCOREDUMP(st) ? " (core dumped)" : "");
    else
        snprintf(buf, len, "wait status %#x", (unsigned)st);
}

bool cs_child_exited_ok(const cs_child *c)
{
    return c->reaped && !c->wait_errno && WIFEXITED(c->status) && WEXITSTATUS(c->status) == 0;
}

void cs_child_status_string(const cs_child *c, char *buf, size_t len)
{
    if (c->wait_errno)
        snprintf(buf, len, "wait: %s", strerror(c->wait_errno));
    else
        wait_status_string(c->status, buf, len);
}
