/* SPDX-License-Identifier: Apache-2.0 */
/* Test support: a program on a pseudo-terminal. See ptyproc.h. */
#include "support/ptyproc.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <poll.h>
#include <pty.h>
#include <signal.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "support/procharness.h"

extern char **environ;

#define READ_CHUNK 4096

static int64_t mono_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static int remaining_ms(int64_t deadline)
{
    int64_t r = deadline - mono_ms();
    return r <= 0 ? 0 : r > INT_MAX ? INT_MAX : (int)r;
}

int cs_pty_start(cs_pty_proc *p, char *const argv[], char *const envp[], int cols)
{
    memset(p, 0, sizeof *p);
    p->master = -1;
    p->logcap = 2 * READ_CHUNK;
    p->log = calloc(1, p->logcap);
    if (!p->log)
        return -1;
    struct winsize ws = {.ws_row = 24, .ws_col = (unsigned short)cols};
    pid_t pid = forkpty(&p->master, NULL, NULL, &ws);
    if (pid < 0) {
        free(p->log);
        p->log = NULL;
        return -1;
    }
    if (pid == 0) {
        for (int sig = 1; sig < NSIG; sig++)
            signal(sig, SIG_DFL);
        sigset_t none;
        sigemptyset(&none);
        sigprocmask(SIG_SETMASK, &none, NULL);
        execve(argv[0], argv, envp ? envp : environ);
        _exit(127);
    }
    p->pid = pid;
    fcntl(p->master, F_SETFL, fcntl(p->master, F_GETFL) | O_NONBLOCK);
    return 0;
}

/* Reads what is there now; closes the master at the end of the output (EIO once the program's
 * side is closed). */
static void pty_read(cs_pty_proc *p)
{
    while (p->master >= 0) {
        if (p->logcap - p->loglen < READ_CHUNK + 1) {
            char *grown = realloc(p->log, p->logcap * 2);
            if (!grown)
                return;
            p->log = grown;
            p->logcap *= 2;
        }
        ssize_t n = read(p->master, p->log + p->loglen, READ_CHUNK);
        if (n > 0) {
            p->loglen += (size_t)n;
            p->log[p->loglen] = '\0';
            continue;
        }
        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0 && errno == EAGAIN)
            return;
        close(p->master);
        p->master = -1;
    }
}

/* Waits up to the deadline for more output (or its end). */
static void pty_poll(cs_pty_proc *p, int64_t deadline)
{
    struct pollfd pfd = {.fd = p->master, .events = POLLIN};
    if (poll(&pfd, 1, remaining_ms(deadline)) > 0)
        pty_read(p);
}

int cs_pty_wait_for(cs_pty_proc *p, const char *needle, int timeout_ms)
{
    int64_t deadline = mono_ms() + timeout_ms;
    for (;;) {
        pty_read(p);
        const char *hit = strstr(p->log + p->scan, needle);
        if (hit) {
            p->scan = (size_t)(hit - p->log) + strlen(needle);
            return 0;
        }
        if (p->master < 0 || remaining_ms(deadline) == 0)
            return -1;
        pty_poll(p, deadline);
    }
}

int cs_pty_send(cs_pty_proc *p, const char *bytes, size_t n)
{
    if (p->master < 0)
        return -1;
    return write(p->master, bytes, n) == (ssize_t)n ? 0 : -1;
}

static void reap(cs_pty_proc *p)
{
    int st;
    if (waitpid(p->pid, &st, 0) == p->pid) {
        p->exited = 1;
        p->status = WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
    }
}

int cs_pty_wait_exit(cs_pty_proc *p, int timeout_ms)
{
    if (p->exited)
        return p->status;
    int64_t deadline = mono_ms() + timeout_ms;
    while (p->master >= 0 && remaining_ms(deadline) > 0) {
        pty_read(p);
        if (p->master >= 0)
            pty_poll(p, deadline);
    }
    if (cs_pid_wait_gone(p->pid, remaining_ms(deadline)) != 0)
        return -1;
    reap(p);
    pty_read(p);
    return p->exited ? p->status : -1;
}

void cs_pty_free(cs_pty_proc *p)
{
    if (p->pid > 0 && !p->exited) {
        kill(p->pid, SIGKILL);
        reap(p);
    }
    if (p->master >= 0)
        close(p->master);
    p->master = -1;
    free(p->log);
    p->log = NULL;
}
