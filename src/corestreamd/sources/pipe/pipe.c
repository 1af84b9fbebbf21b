/* SPDX-License-Identifier: Apache-2.0 */
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
#include <unistd.h>

#include "common/child.h"
#include "common/clock.h"
#include "common/goquote.h"
#include "common/log.h"
#include "corestream/wire.h"
#include "corestreamd/sources/pipe/framereader.h"
#include "corestreamd/sources/pipe/xdrwalk.h"

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
    int rc = posix_spawn_file_actions_init(&fa);
    if (rc == 0) {
        /* wfd is never 3 itself (the caller moved it), so dup2 always clears O_CLOEXEC on fd 3. */
        rc = posix_spawn_file_actions_adddup2(&fa, wfd, 3);
        char sh[] = "sh", dash_c[] = "-c";
        char *argv[] = {sh, dash_c, (char *)cmd, NULL};
        /* Fds 0-3 only, and a group of its own so that teardown's signals reach the whole
         * pipeline. */
        if (rc == 0)
            rc = cs_child_spawn(&ps->child, "sh", argv, &fa, 4, true);
        posix_spawn_file_actions_destroy(&fa);
    }
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
        if (cs_child_exited_ok(&ps->child))
            return 0;
        char why[128];
        cs_child_status_string(&ps->child, why, sizeof why);
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
            CS_LOG(CS_LOG_WARN, "pipe source: command did not stop after SIGTERM; killing it",
                   KV_I("cmd_pid", ps->child.pid), KV_D("grace", CS_PIPE_KILL_GRACE_NS));
            kill(ps->child.pid, SIGKILL);
            if (cs_child_wait(&ps->child, cs_mono_ns() + CS_PIPE_KILL_GRACE_NS, NULL, -1) == 0)
                CS_LOG(CS_LOG_WARN, "pipe source: command survived SIGKILL; not reaped",
                       KV_I("cmd_pid", ps->child.pid));
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
    int wfd = cs_child_fd_above_3(p[1]);
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
        pipe_destroy(&ps->base);
        return -1;
    }
    *out = &ps->base;
    return 0;
}
