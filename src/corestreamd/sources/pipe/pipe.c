#include "corestreamd/sources/pipe/pipe.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include "common/clock.h"
#include "common/goquote.h"
#include "common/log.h"
#include "corestream/wire.h"
#include "common/child.h"
#include "corestreamd/sources/pipe/framereader.h"
#include "corestreamd/sources/pipe/xdrwalk.h"

extern char **environ;

typedef struct pipe_source {
    cs_source base;
    char *quoted_cmd; /* Go's %q of the command, for messages */
    cs_cancel *cancel;
    int rfd;
    cs_child child; /* its pid is also the process group id */
    bool termed;    /* the group was sent SIGTERM */
    int64_t termed_at;
    bool done; /* the stream ended: exhausted or failed */
    cs_frame_reader *fr;
} pipe_source;

/* ---- the child ---------------------------------------------------------------------------- */

int cs_pipe_set_size(int fd, int want, int *got)
{
    int rc = 0, saved = 0;
    *got = 0;
    if (want > 0 && fcntl(fd, F_SETPIPE_SZ, want) < 0) {
        rc = -1;
        saved = errno;
    }
    int g = fcntl(fd, F_GETPIPE_SZ);
    if (g >= 0) {
        *got = g;
    } else if (rc == 0) {
        rc = -1;
        saved = errno;
    }
    errno = saved;
    return rc;
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
void cs_wait_status_string(int st, char *buf, size_t len)
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

static void exit_string(const pipe_source *ps, char *buf, size_t len)
{
    if (ps->child.wait_errno)
        snprintf(buf, len, "wait: %s", strerror(ps->child.wait_errno));
    else
        cs_wait_status_string(ps->child.status, buf, len);
}

static bool exited_ok(const pipe_source *ps)
{
    return !ps->child.wait_errno && WIFEXITED(ps->child.status) && WEXITSTATUS(ps->child.status) == 0;
}

/* SIGTERM the group once, as Go's CommandContext does on cancel. */
static void terminate_group(pipe_source *ps)
{
    if (ps->termed || ps->child.pid <= 0)
        return;
    ps->termed = true;
    ps->termed_at = cs_mono_ns();
    kill(-ps->child.pid, SIGTERM);
}

static int spawn(pipe_source *ps, const char *cmd, int wfd, cs_err *err)
{
    posix_spawn_file_actions_t fa;
    posix_spawnattr_t at;
    int rc = posix_spawn_file_actions_init(&fa);
    if (rc != 0)
        goto out;
    rc = posix_spawnattr_init(&at);
    if (rc != 0) {
        posix_spawn_file_actions_destroy(&fa);
        goto out;
    }
    /* wfd is never 3 itself (the caller moved it), so dup2 always clears O_CLOEXEC on fd 3. */
    rc = posix_spawn_file_actions_adddup2(&fa, wfd, 3);
#if defined(__GLIBC__) && (__GLIBC__ > 2 || (__GLIBC__ == 2 && __GLIBC_MINOR__ >= 34))
    /* Like Go's exec: the child gets fds 0-3 and nothing else. */
    if (rc == 0)
        rc = posix_spawn_file_actions_addclosefrom_np(&fa, 4);
#endif
    sigset_t none, dfl;
    sigemptyset(&none);
    sigemptyset(&dfl);
    /* The daemon blocks SIGINT/SIGTERM in every thread and ignores SIGPIPE; the command must get
     * them back, or the group SIGTERM does nothing and a writer whose reader went away spins on
     * EPIPE instead of dying. */
    int defaults[] = {SIGHUP, SIGINT, SIGQUIT, SIGPIPE, SIGTERM};
    for (size_t i = 0; i < sizeof defaults / sizeof defaults[0]; i++)
        sigaddset(&dfl, defaults[i]);
    if (rc == 0)
        rc = posix_spawnattr_setsigmask(&at, &none);
    if (rc == 0)
        rc = posix_spawnattr_setsigdefault(&at, &dfl);
    if (rc == 0)
        rc = posix_spawnattr_setpgroup(&at, 0);
    if (rc == 0)
        rc = posix_spawnattr_setflags(&at, POSIX_SPAWN_SETSIGMASK | POSIX_SPAWN_SETSIGDEF |
                                               POSIX_SPAWN_SETPGROUP);
    if (rc == 0) {
        char sh[] = "sh", dash_c[] = "-c";
        char *argv[] = {sh, dash_c, (char *)cmd, NULL};
        rc = posix_spawnp(&ps->child.pid, "sh", &fa, &at, argv, environ);
    }
    posix_spawnattr_destroy(&at);
    posix_spawn_file_actions_destroy(&fa);
out:
    if (rc == ENOENT)
        return cs_err_set(err, 0, "pipe source: start %s: exec: \"sh\": executable file not found in $PATH",
                          ps->quoted_cmd);
    if (rc != 0)
        return cs_err_set(err, 0, "pipe source: start %s: %s", ps->quoted_cmd, strerror(rc));
    return 0;
}

/* ---- the source --------------------------------------------------------------------------- */

static int cancelled(pipe_source *ps, cs_err *err)
{
    terminate_group(ps);
    return cs_err_set(err, CS_ERR_CANCELLED, "context canceled");
}

/* A marker or prefix failure: during shutdown it is the expected partial frame, not a failure. */
static int stream_failed(pipe_source *ps, const cs_err *e, const char *what, cs_err *err)
{
    if (e->kind == CS_ERR_CANCELLED || cs_cancel_is_set(ps->cancel))
        return cancelled(ps, err);
    ps->done = true;
    return cs_err_set(err, 0, "pipe source: %s: %s", what, e->msg);
}

static int pipe_next(cs_source *s, cs_emission *em, cs_err *err)
{
    pipe_source *ps = (pipe_source *)s;
    /* No ledger was identified on any failure path; the loop reports "at ledger 0", as Go's
     * zero Emission did. */
    em->seq = 0;
    em->declared_size = 0;
    if (ps->done)
        return 0;
    cs_err e;
    uint32_t len;
    int r = cs_frame_reader_next(ps->fr, &len, &e);
    if (r == 0) {
        /* EOF at a frame boundary: the command has finished its range, or died. */
        if (cs_child_wait(&ps->child, -1, ps->cancel, -1) < 0 || cs_cancel_is_set(ps->cancel))
            return cancelled(ps, err);
        ps->done = true;
        if (exited_ok(ps))
            return 0;
        char why[128];
        exit_string(ps, why, sizeof why);
        return cs_err_set(err, 0, "pipe source: %s exited: %s", ps->quoted_cmd, why);
    }
    if (r < 0)
        return stream_failed(ps, &e, "read frame marker", err);
    const uint8_t *prefix;
    size_t n;
    if (cs_frame_reader_prefix(ps->fr, &prefix, &n, &e) != 0)
        return stream_failed(ps, &e, "read frame prefix", err);
    uint32_t seq;
    if (cs_xdr_ledger_seq(prefix, n, &seq, &e) != 0) {
        ps->done = true;
        return cs_err_set(err, 0, "pipe source: read ledger seq: %s", e.msg);
    }
    em->seq = seq;
    em->declared_size = len;
    return 1;
}

static ssize_t pipe_read(cs_source *s, uint8_t *buf, size_t len, cs_err *err)
{
    pipe_source *ps = (pipe_source *)s;
    cs_err e;
    ssize_t k = cs_frame_reader_read(ps->fr, buf, len, &e);
    if (k >= 0)
        return k;
    /* A shutdown that interrupts a body read reports the cancellation, whatever it caused. */
    if (e.kind == CS_ERR_CANCELLED || cs_cancel_is_set(ps->cancel))
        return cancelled(ps, err);
    ps->done = true;
    if (e.kind == CS_FRAME_ERR_SHORT)
        return cs_err_set(err, 0, "pipe source: %s", e.msg);
    return cs_err_set(err, 0, "pipe source: read frame body: %s", e.msg);
}

/* Teardown on every path: the read end first (a writer blocked on a full pipe then gets EPIPE and
 * exits), SIGTERM for the group, a bounded wait for the direct child, SIGKILL for it if it
 * outlives the grace, then SIGKILL for the whole group so no grandchild survives it. */
static void pipe_destroy(cs_source *s)
{
    pipe_source *ps = (pipe_source *)s;
    if (!ps)
        return;
    if (ps->rfd >= 0)
        close(ps->rfd);
    ps->rfd = -1;
    if (ps->child.pid > 0) {
        terminate_group(ps);
        if (!ps->child.reaped && cs_child_wait(&ps->child, ps->termed_at + CS_PIPE_KILL_GRACE_NS, NULL, -1) == 0) {
            kill(ps->child.pid, SIGKILL);
            if (cs_child_wait(&ps->child, cs_mono_ns() + CS_PIPE_KILL_GRACE_NS, NULL, -1) == 0)
                CS_LOG(CS_LOG_WARN, "pipe source: command survived SIGKILL; not reaped",
                       KV_I("pid", ps->child.pid));
        }
        kill(-ps->child.pid, SIGKILL);
    }
    if (ps->child.pidfd >= 0)
        close(ps->child.pidfd);
    cs_frame_reader_free(ps->fr);
    free(ps->quoted_cmd);
    free(ps);
}

int cs_pipe_source_pid(const cs_source *s)
{
    const pipe_source *ps = (const pipe_source *)s;
    return ps->child.reaped ? -1 : (int)ps->child.pid;
}

static const cs_source_ops pipe_ops = {
    .next = pipe_next,
    .read = pipe_read,
    .destroy = pipe_destroy,
};

/* Moves fd to a number above 3 (close-on-exec), so the child's dup2 onto 3 is a real dup. */
static int fd_above_3(int fd)
{
    if (fd > 3)
        return fd;
    int moved = fcntl(fd, F_DUPFD_CLOEXEC, 4);
    int e = errno;
    close(fd);
    errno = e;
    return moved;
}

int cs_pipe_source_new(cs_source **out, const char *cmd, int64_t pipe_size, cs_cancel *cancel,
                       cs_err *err)
{
    *out = NULL;
    pipe_source *ps = calloc(1, sizeof *ps);
    size_t qn = cs_go_quote(NULL, 0, cmd) + 1;
    char *quoted = ps ? malloc(qn) : NULL;
    if (!quoted) {
        free(ps);
        return cs_err_set(err, 0, "pipe source: out of memory");
    }
    cs_go_quote(quoted, qn, cmd);
    ps->base.ops = &pipe_ops;
    ps->quoted_cmd = quoted;
    ps->cancel = cancel;
    ps->rfd = ps->child.pidfd = -1;
    ps->child.pid = -1;

    int p[2];
    if (pipe2(p, O_CLOEXEC) != 0) {
        cs_err_set(err, 0, "pipe source: %s", strerror(errno));
        pipe_destroy(&ps->base);
        return -1;
    }
    ps->rfd = p[0];
    int wfd = fd_above_3(p[1]);
    if (wfd < 0) {
        cs_err_set(err, 0, "pipe source: %s", strerror(errno));
        pipe_destroy(&ps->base);
        return -1;
    }
    if (pipe_size >= 0) {
        int64_t want = pipe_size ? pipe_size : 1 << 20;
        int got;
        if (cs_pipe_set_size(ps->rfd, want > INT_MAX ? INT_MAX : (int)want, &got) != 0)
            CS_LOG(CS_LOG_DEBUG, "pipe source: pipe size request refused", KV_I("requested", want),
                   KV_I("size", got), KV_S("error", strerror(errno)));
        else
            CS_LOG(CS_LOG_DEBUG, "pipe source: pipe size", KV_I("requested", want), KV_I("size", got));
    }
    /* The reader makes the read end non-blocking; the write end (the child's) stays blocking. */
    if (cs_frame_reader_new(&ps->fr, ps->rfd, cancel, CS_FRAME_BUFFER_DEFAULT, CS_MAX_PAYLOAD_SIZE,
                            err) != 0) {
        close(wfd);
        cs_err_prefix(err, "pipe source: ");
        pipe_destroy(&ps->base);
        return -1;
    }
    int rc = spawn(ps, cmd, wfd, err);
    /* The parent must not hold the write end, or EOF never arrives. */
    close(wfd);
    if (rc != 0) {
        ps->child.pid = -1;
        pipe_destroy(&ps->base);
        return -1;
    }
#ifdef SYS_pidfd_open
    ps->child.pidfd = (int)syscall(SYS_pidfd_open, ps->child.pid, 0);
#endif
    *out = &ps->base;
    return 0;
}
