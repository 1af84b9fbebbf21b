/* SPDX-License-Identifier: Apache-2.0 */
/* Supervision of stellar-core's processes: spawning each command with its pipes, waiting for it,
 * stopping it (SIGINT, the grace, SIGKILL) and, for `run`, what its exit means for the working
 * dir. Core is never restarted. */
#include "corestreamd/sources/captive/captive_internal.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common/clock.h"
#include "common/log.h"

#define CAPTURE_MAX (1u << 20) /* stdout kept from version / offline-info */

void captive_proc_init(captive_proc *p)
{
    memset(p, 0, sizeof *p);
    p->c.pid = -1;
    p->c.pidfd = -1;
}

int captive_cancelled(cs_err *err)
{
    return cs_err_set(err, CS_ERR_CANCELLED, "context canceled");
}

int captive_proc_start(captive_proc *p, char *const argv[], const char *cwd, captive_out out, captive_out errm,
                       int meta_wfd, int *capture_rfd, cs_err *err)
{
    captive_proc_init(p);
    int logp[2] = {-1, -1}, capp[2] = {-1, -1};
    int rc = 0;
    if ((out == OUT_LOG || errm == OUT_LOG) && pipe2(logp, O_CLOEXEC) != 0)
        rc = errno;
    if (rc == 0 && out == OUT_CAPTURE && pipe2(capp, O_CLOEXEC) != 0)
        rc = errno;
    if (rc == 0 && logp[1] >= 0 && (logp[1] = cs_child_fd_above_3(logp[1])) < 0)
        rc = errno;
    if (rc == 0 && capp[1] >= 0 && (capp[1] = cs_child_fd_above_3(capp[1])) < 0)
        rc = errno;
    /* The reader runs before the child does: core must never write to a pipe nobody reads. */
    cs_err le;
    if (rc == 0 && logp[0] >= 0) {
        p->log = captive_log_start(logp[0], &le);
        logp[0] = -1; /* the reader owns it now */
        if (!p->log) {
            if (logp[1] >= 0)
                close(logp[1]);
            if (capp[0] >= 0)
                close(capp[0]);
            if (capp[1] >= 0)
                close(capp[1]);
            return cs_err_set(err, 0, "%s", le.msg);
        }
    }

    posix_spawn_file_actions_t fa;
    bool fa_ok = false;
    if (rc == 0 && (rc = posix_spawn_file_actions_init(&fa)) == 0)
        fa_ok = true;
    if (rc == 0)
        rc = posix_spawn_file_actions_addopen(&fa, 0, "/dev/null", O_RDONLY, 0);
    int fds[2] = {out == OUT_LOG ? logp[1] : out == OUT_CAPTURE ? capp[1] : -1, errm == OUT_LOG ? logp[1] : -1};
    for (int i = 0; i < 2 && rc == 0; i++)
        rc = fds[i] >= 0 ? posix_spawn_file_actions_adddup2(&fa, fds[i], i + 1)
                         : posix_spawn_file_actions_addopen(&fa, i + 1, "/dev/null", O_WRONLY, 0);
    if (rc == 0 && meta_wfd >= 0)
        rc = posix_spawn_file_actions_adddup2(&fa, meta_wfd, 3);
    if (rc == 0 && cwd)
        rc = posix_spawn_file_actions_addchdir_np(&fa, cwd);
    /* Fds 0-2 (and 3) only. Core shares corestreamd's process group, as it does under the Go SDK,
     * so a terminal's Ctrl-C reaches it too. */
    if (rc == 0)
        rc = cs_child_spawn(&p->c, argv[0], argv, &fa, meta_wfd >= 0 ? 4 : 3, false);
    if (fa_ok)
        posix_spawn_file_actions_destroy(&fa);
    if (logp[1] >= 0)
        close(logp[1]);
    if (capp[1] >= 0)
        close(capp[1]);
    if (rc != 0) {
        if (logp[0] >= 0)
            close(logp[0]);
        if (capp[0] >= 0)
            close(capp[0]);
        captive_log_finish(p->log, cs_mono_ns()); /* its write end is closed: EOF */
        p->log = NULL;
        char e[128];
        cs_go_errno(rc, e, sizeof e);
        if (cwd && rc == ENOENT && access(cwd, X_OK) != 0)
            return cs_err_set(err, 0, "chdir %s: %s", cwd, e);
        return cs_err_set(err, 0, "fork/exec %s: %s", argv[0], e);
    }
    if (capture_rfd)
        *capture_rfd = capp[0];
    else if (capp[0] >= 0)
        close(capp[0]);
    return 0;
}

void captive_proc_release(captive_source *cs, captive_proc *p)
{
    captive_log_finish(p->log, cs_mono_ns() + cs->grace);
    p->log = NULL;
    if (p->c.pidfd >= 0)
        close(p->c.pidfd);
    p->c.pidfd = -1;
}

void captive_proc_stop(captive_source *cs, captive_proc *p, int drain_fd)
{
    if (p->c.pid <= 0)
        return;
    if (!p->c.reaped) {
        kill(p->c.pid, SIGINT);
        if (cs_child_wait(&p->c, cs_mono_ns() + cs->grace, NULL, drain_fd) == 0) {
            CS_LOG(CS_LOG_WARN, "captive: stellar-core did not stop after SIGINT; killing it", KV_I("core_pid", p->c.pid),
                   KV_D("grace", cs->grace), SUBSERVICE);
            kill(p->c.pid, SIGKILL);
            if (cs_child_wait(&p->c, cs_mono_ns() + cs->grace, NULL, drain_fd) == 0)
                CS_LOG(CS_LOG_WARN, "captive: stellar-core survived SIGKILL; not reaped", KV_I("core_pid", p->c.pid),
                       SUBSERVICE);
        }
    }
    captive_proc_release(cs, p);
}

int captive_run_cmd(captive_source *cs, char *const argv[], cs_err *err)
{
    captive_proc p;
    if (captive_proc_start(&p, argv, cs->workdir, OUT_LOG, OUT_LOG, -1, NULL, err) != 0)
        return -1;
    if (cs_child_wait(&p.c, -1, cs->cancel, -1) < 0) {
        captive_proc_stop(cs, &p, -1);
        return captive_cancelled(err);
    }
    captive_proc_release(cs, &p);
    if (cs_child_exited_ok(&p.c))
        return 0;
    if (cs_cancel_is_set(cs->cancel))
        return captive_cancelled(err); /* stopped by the shutdown (the terminal's SIGINT reaches core too) */
    char why[128];
    cs_child_status_string(&p.c, why, sizeof why);
    return cs_err_set(err, 0, "%s", why);
}

int captive_capture_cmd(captive_source *cs, char *const argv[], const char *cwd, captive_out errm, int64_t timeout_ns,
                        char **out, cs_err *err)
{
    *out = NULL;
    captive_proc p;
    int rfd = -1;
    if (captive_proc_start(&p, argv, cwd, OUT_CAPTURE, errm, -1, &rfd, err) != 0)
        return -1;
    int64_t deadline = timeout_ns > 0 ? cs_mono_ns() + timeout_ns : -1;
    char *buf = malloc(CAPTURE_MAX + 1);
    size_t n = 0;
    int rc = 0;
    if (!buf)
        rc = cs_err_set(err, 0, "out of memory");
    while (rc == 0) {
        if (cs_cancel_is_set(cs->cancel)) {
            rc = captive_cancelled(err);
            break;
        }
        int timeout_ms = -1;
        if (deadline >= 0) {
            int64_t left = deadline - cs_mono_ns();
            if (left <= 0) {
                rc = cs_err_set(err, 0, "timed out");
                break;
            }
            timeout_ms = (int)((left + 999999) / 1000000);
        }
        struct pollfd pfd[2] = {{.fd = rfd, .events = POLLIN}, {.fd = cs->cancel->efd, .events = POLLIN}};
        if (poll(pfd, 2, timeout_ms) < 0 && errno != EINTR) {
            rc = cs_err_set(err, 0, "poll: %s", strerror(errno));
            break;
        }
        if (!pfd[0].revents)
            continue;
        char tmp[8192];
        ssize_t k = read(rfd, tmp, sizeof tmp);
        if (k < 0 && (errno == EINTR || errno == EAGAIN))
            continue;
        if (k <= 0)
            break; /* EOF (or a read error: the exit status tells) */
        size_t take = (size_t)k < CAPTURE_MAX - n ? (size_t)k : CAPTURE_MAX - n;
        memcpy(buf + n, tmp, take);
        n += take;
    }
    close(rfd);
    if (rc == 0) {
        int w = cs_child_wait(&p.c, deadline, cs->cancel, -1);
        if (w < 0)
            rc = captive_cancelled(err);
        else if (w == 0)
            rc = cs_err_set(err, 0, "timed out");
    }
    if (rc != 0) {
        captive_proc_stop(cs, &p, -1);
        free(buf);
        return -1;
    }
    captive_proc_release(cs, &p);
    buf[n] = 0;
    if (!cs_child_exited_ok(&p.c)) {
        if (cs_cancel_is_set(cs->cancel)) {
            free(buf);
            return captive_cancelled(err);
        }
        char why[128];
        cs_child_status_string(&p.c, why, sizeof why);
        free(buf);
        return cs_err_set(err, 0, "%s", why);
    }
    *out = buf;
    return 0;
}

void captive_stop_core(captive_source *cs)
{
    if (cs->run.c.pid <= 0)
        return;
    captive_proc_stop(cs, &cs->run, cs->meta_rfd);
    if (cs->dir_settled)
        return;
    cs->dir_settled = true;
    if (cs_child_exited_ok(&cs->run.c))
        return;
    char why[128];
    cs_child_status_string(&cs->run.c, why, sizeof why);
    CS_LOG(CS_LOG_INFO, "captive: stellar-core failed; removing its working dir", KV_S("exit", why),
           KV_S("workdir", cs->workdir), SUBSERVICE);
    cs_err e;
    if (captive_remove_all(cs->workdir, &e) != 0)
        CS_LOG(CS_LOG_WARN, "captive: cannot remove the working dir", KV_S("error", e.msg), SUBSERVICE);
}
