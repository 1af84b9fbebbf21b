/* SPDX-License-Identifier: Apache-2.0 */
/* Test support: child-process harness. See procharness.h. */
#include "support/procharness.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

extern char **environ;

#define READ_CHUNK 65536
#define FALLBACK_SLICE_MS 20 /* only without pidfd: how often to check for the child's exit */
#define FINAL_DRAIN_MS 500   /* after the child is reaped: how long to wait for the pipe's EOF */

static int64_t mono_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static int remaining_ms(int64_t deadline)
{
    int64_t r = deadline - mono_ms();
    if (r <= 0)
        return 0;
    return r > INT_MAX ? INT_MAX : (int)r;
}

static bool echo_enabled(void)
{
    const char *e = getenv("CS_PROC_ECHO");
    return e && *e && strcmp(e, "0") != 0;
}

/* Reads everything available now. Returns the number of bytes read; closes out_fd on EOF. */
static size_t proc_read(cs_proc *p)
{
    size_t total = 0;
    while (p->out_fd >= 0) {
        if (p->logcap - p->loglen < READ_CHUNK + 1) {
            size_t ncap = p->logcap ? p->logcap * 2 : 2 * READ_CHUNK;
            while (ncap - p->loglen < READ_CHUNK + 1)
                ncap *= 2;
            char *nl = realloc(p->log, ncap);
            if (!nl)
                return total;
            p->log = nl;
            p->logcap = ncap;
        }
        ssize_t n = read(p->out_fd, p->log + p->loglen, READ_CHUNK);
        if (n > 0) {
            if (echo_enabled()) {
                ssize_t w = write(STDERR_FILENO, p->log + p->loglen, (size_t)n);
                (void)w;
            }
            p->loglen += (size_t)n;
            p->log[p->loglen] = '\0';
            total += (size_t)n;
            continue;
        }
        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK))
            break;
        close(p->out_fd); /* EOF or a read error: the output is over */
        p->out_fd = -1;
    }
    return total;
}

static bool child_has_exited(cs_proc *p)
{
    siginfo_t si;
    memset(&si, 0, sizeof si);
    int r;
    do
        r = waitid(P_PID, (id_t)p->pid, &si, WEXITED | WNOHANG | WNOWAIT);
    while (r < 0 && errno == EINTR);
    if (r < 0)
        return errno == ECHILD; /* already gone: nothing to wait for */
    return si.si_pid == p->pid;
}

/* The child has exited (or been SIGKILLed): sweep its process group while the zombie still pins
 * the group id, reap it, then collect the rest of the output for a bounded time. */
static void proc_reap(cs_proc *p, bool drain)
{
    if (p->exited || p->pid <= 0)
        return;
    kill(-p->pid, SIGKILL);
    int st = 0;
    pid_t r;
    do
        r = waitpid(p->pid, &st, 0);
    while (r < 0 && errno == EINTR);
    p->exited = 1;
    if (r == p->pid)
        p->status = WIFEXITED(st) ? WEXITSTATUS(st) : WIFSIGNALED(st) ? 128 + WTERMSIG(st) : -1;
    else
        p->status = -1;
    if (p->pidfd >= 0) {
        close(p->pidfd);
        p->pidfd = -1;
    }
    if (!drain)
        return;
    int64_t deadline = mono_ms() + FINAL_DRAIN_MS;
    proc_read(p);
    while (p->out_fd >= 0) {
        struct pollfd pfd = {.fd = p->out_fd, .events = POLLIN};
        int pr = poll(&pfd, 1, remaining_ms(deadline));
        if (pr < 0 && errno == EINTR)
            continue;
        if (pr <= 0)
            break;
        proc_read(p);
    }
}

enum { STEP_OK, STEP_EXITED, STEP_TIMEOUT };

/* One bounded wait for output or the child's exit. */
static int proc_step(cs_proc *p, int64_t deadline)
{
    if (p->exited)
        return STEP_EXITED;
    struct pollfd fds[2];
    nfds_t n = 0;
    if (p->out_fd >= 0)
        fds[n++] = (struct pollfd){.fd = p->out_fd, .events = POLLIN};
    if (p->pidfd >= 0)
        fds[n++] = (struct pollfd){.fd = p->pidfd, .events = POLLIN};
    int to = remaining_ms(deadline);
    if (p->pidfd < 0 && to > FALLBACK_SLICE_MS)
        to = FALLBACK_SLICE_MS;
    if (to > 0 || n > 0) {
        int r = poll(fds, n, to);
        if (r < 0 && errno != EINTR)
            return STEP_TIMEOUT;
    }
    proc_read(p);
    if (child_has_exited(p)) {
        proc_reap(p, true);
        return STEP_EXITED;
    }
    return mono_ms() >= deadline ? STEP_TIMEOUT : STEP_OK;
}

int cs_proc_start_env(cs_proc *p, char *const argv[], char *const envp[])
{
    memset(p, 0, sizeof *p);
    p->pid = -1;
    p->out_fd = -1;
    p->pidfd = -1;
    int pfd[2];
    if (pipe2(pfd, O_CLOEXEC) < 0)
        return -1;
    posix_spawn_file_actions_t fa;
    posix_spawnattr_t attr;
    posix_spawn_file_actions_init(&fa);
    posix_spawnattr_init(&attr);
    posix_spawn_file_actions_addopen(&fa, STDIN_FILENO, "/dev/null", O_RDONLY, 0);
    posix_spawn_file_actions_adddup2(&fa, pfd[1], STDOUT_FILENO);
    posix_spawn_file_actions_adddup2(&fa, pfd[1], STDERR_FILENO);
    sigset_t defaults, empty;
    sigemptyset(&defaults);
    for (int s = 1; s < 32; s++)
        if (s != SIGKILL && s != SIGSTOP)
            sigaddset(&defaults, s);
    sigemptyset(&empty);
    posix_spawnattr_setsigdefault(&attr, &defaults);
    posix_spawnattr_setsigmask(&attr, &empty);
    posix_spawnattr_setpgroup(&attr, 0);
    posix_spawnattr_setflags(&attr, POSIX_SPAWN_SETPGROUP | POSIX_SPAWN_SETSIGDEF |
                                        POSIX_SPAWN_SETSIGMASK);
    pid_t pid;
    int rc = posix_spawn(&pid, argv[0], &fa, &attr, argv, envp ? envp : environ);
    posix_spawn_file_actions_destroy(&fa);
    posix_spawnattr_destroy(&attr);
    close(pfd[1]);
    if (rc != 0) {
        close(pfd[0]);
        errno = rc;
        return -1;
    }
    p->pid = pid;
    p->out_fd = pfd[0];
    fcntl(p->out_fd, F_SETFL, fcntl(p->out_fd, F_GETFL) | O_NONBLOCK);
#ifdef SYS_pidfd_open
    p->pidfd = (int)syscall(SYS_pidfd_open, pid, 0);
    if (p->pidfd >= 0)
        fcntl(p->pidfd, F_SETFD, FD_CLOEXEC);
    else
        p->pidfd = -1;
#endif
    p->log = calloc(1, 1);
    p->logcap = p->log ? 1 : 0;
    if (!p->log) {
        cs_proc_free(p);
        errno = ENOMEM;
        return -1;
    }
    return 0;
}

int cs_proc_start(cs_proc *p, char *const argv[])
{
    return cs_proc_start_env(p, argv, NULL);
}

/* Looks for a line containing needle from *cur; complete lines only, unless the output is over
 * (then a final unterminated line counts too). Advances *cur past the complete lines examined. */
static bool match_from(cs_proc *p, size_t *cur, const char *needle)
{
    size_t nl = strlen(needle);
    while (*cur < p->loglen) {
        const char *start = p->log + *cur;
        const char *eol = memchr(start, '\n', p->loglen - *cur);
        size_t len;
        if (eol)
            len = (size_t)(eol - start);
        else if (p->out_fd < 0)
            len = p->loglen - *cur;
        else
            return false;
        if (memmem(start, len, needle, nl)) {
            p->line_off = *cur;
            p->line_len = len;
            p->scan = *cur + len + (eol ? 1 : 0);
            *cur = p->scan;
            return true;
        }
        *cur += len + (eol ? 1 : 0);
    }
    return false;
}

int cs_proc_wait_line(cs_proc *p, const char *needle, int timeout_ms)
{
    int64_t deadline = mono_ms() + (timeout_ms > 0 ? timeout_ms : 0);
    size_t cur = p->scan;
    proc_read(p);
    for (;;) {
        if (match_from(p, &cur, needle))
            return 0;
        int s = proc_step(p, deadline);
        if (s != STEP_OK) {
            /* Exited (output drained) or out of time: one last look at what arrived. */
            return match_from(p, &cur, needle) ? 0 : -1;
        }
    }
}

void cs_proc_line(const cs_proc *p, char *buf, size_t len)
{
    if (!buf || !len)
        return;
    size_t n = p->line_len < len - 1 ? p->line_len : len - 1;
    if (n && p->log)
        memcpy(buf, p->log + p->line_off, n);
    buf[n] = '\0';
}

int cs_proc_wait_admin_port(cs_proc *p, int timeout_ms)
{
    if (cs_proc_wait_line(p, "msg=\"admin endpoints listening\"", timeout_ms) < 0)
        return -1;
    char line[512];
    cs_proc_line(p, line, sizeof line);
    const char *a = strstr(line, " addr=127.0.0.1:");
    return a ? atoi(a + strlen(" addr=127.0.0.1:")) : -1;
}

int cs_proc_wait_listening(cs_proc *p, int timeout_ms)
{
    if (cs_proc_wait_line(p, "corestreamd listening", timeout_ms) < 0)
        return -1;
    char line[1024];
    cs_proc_line(p, line, sizeof line);
    const char *a = strstr(line, " addr=");
    if (a)
        a += 6;
    else if (strncmp(line, "addr=", 5) == 0)
        a = line + 5;
    else
        return -1;
    char val[sizeof p->addr];
    size_t n = 0;
    if (*a == '"') {
        a++;
        while (a[n] && a[n] != '"' && n < sizeof val - 1)
            n++;
    } else {
        while (a[n] && a[n] != ' ' && a[n] != '\t' && n < sizeof val - 1)
            n++;
    }
    memcpy(val, a, n);
    val[n] = '\0';
    const char *colon = strrchr(val, ':');
    if (!colon || !colon[1])
        return -1;
    char *end;
    long port = strtol(colon + 1, &end, 10);
    if (*end || port <= 0 || port > 65535)
        return -1;
    memcpy(p->addr, val, n + 1);
    p->port = (int)port;
    return 0;
}

void cs_proc_drain(cs_proc *p)
{
    proc_read(p);
}

int cs_proc_log_count(const cs_proc *p, const char *needle)
{
    int count = 0;
    size_t nl = strlen(needle), off = 0;
    while (p->log && off < p->loglen) {
        const char *start = p->log + off;
        const char *eol = memchr(start, '\n', p->loglen - off);
        size_t len = eol ? (size_t)(eol - start) : p->loglen - off;
        if (memmem(start, len, needle, nl))
            count++;
        off += len + 1;
    }
    return count;
}

int cs_proc_wait_exit(cs_proc *p, int timeout_ms)
{
    if (p->pid <= 0)
        return -1;
    int64_t deadline = mono_ms() + (timeout_ms > 0 ? timeout_ms : 0);
    for (;;) {
        int s = proc_step(p, deadline);
        if (s == STEP_EXITED)
            return p->status;
        if (s == STEP_TIMEOUT)
            return -1;
    }
}

int cs_proc_stop(cs_proc *p, int sig, int timeout_ms)
{
    if (p->pid <= 0)
        return -1;
    if (p->exited)
        return p->status;
    kill(p->pid, sig);
    int st = cs_proc_wait_exit(p, timeout_ms);
    if (st >= 0 || p->exited)
        return st;
    kill(p->pid, SIGKILL);
    proc_reap(p, true);
    return -1;
}

void cs_proc_free(cs_proc *p)
{
    if (p->pid > 0 && !p->exited) {
        kill(p->pid, SIGKILL);
        proc_reap(p, false);
    }
    if (p->out_fd >= 0)
        close(p->out_fd);
    if (p->pidfd >= 0)
        close(p->pidfd);
    free(p->log);
    p->out_fd = -1;
    p->pidfd = -1;
    p->log = NULL;
    p->loglen = p->logcap = 0;
    p->pid = -1;
}

int cs_pid_wait_gone(pid_t pid, int timeout_ms)
{
    int64_t deadline = mono_ms() + (timeout_ms > 0 ? timeout_ms : 0);
#ifdef SYS_pidfd_open
    int fd = (int)syscall(SYS_pidfd_open, pid, 0);
    if (fd < 0 && errno == ESRCH)
        return 0;
    if (fd >= 0) {
        int r;
        do {
            struct pollfd pfd = {.fd = fd, .events = POLLIN};
            r = poll(&pfd, 1, remaining_ms(deadline));
        } while (r < 0 && errno == EINTR);
        close(fd);
        return r > 0 ? 0 : -1; /* readable once the process has exited */
    }
#endif
    for (;;) {
        if (kill(pid, 0) < 0 && errno == ESRCH)
            return 0;
        char path[64], line[512];
        snprintf(path, sizeof path, "/proc/%d/stat", (int)pid);
        FILE *fp = fopen(path, "r");
        bool zombie = false;
        if (fp && fgets(line, sizeof line, fp)) {
            char *rp = strrchr(line, ')');
            zombie = rp && rp[1] == ' ' && (rp[2] == 'Z' || rp[2] == 'X');
        }
        if (fp)
            fclose(fp);
        if (zombie)
            return 0;
        int left = remaining_ms(deadline);
        if (left == 0)
            return -1;
        poll(NULL, 0, left < FALLBACK_SLICE_MS ? left : FALLBACK_SLICE_MS);
    }
}
