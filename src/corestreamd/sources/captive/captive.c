#include "corestreamd/sources/captive/captive.h"

#include <cjson/cJSON.h>
#include <ctype.h>
#include <errno.h>
#include <fcntl.h>
#include <ftw.h>
#include <limits.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <spawn.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include "common/clock.h"
#include "common/goquote.h"
#include "common/log.h"
#include "corestream/wire.h"
#include "corestreamd/sources/captive/archive.h"
#include "common/child.h"
#include "corestreamd/sources/captive/coretoml.h"
#include "corestreamd/sources/pipe/framereader.h"
#include "corestreamd/sources/pipe/pipe.h"
#include "corestreamd/sources/pipe/xdrwalk.h"

extern char **environ;

#define SUBSERVICE KV_S("subservice", "stellar-core")
#define CAPTURE_MAX (1u << 20)              /* stdout kept from version / offline-info */
#define VERSION_TIMEOUT_NS (60 * 1000000000LL) /* `<bin> version` must answer within this */
#define LOG_LINE_MAX (64 * 1024)

/* ---- core's log lines (CAPTIVE.md 4.3) ------------------------------------------------------ */

static bool is_word(char c)
{
    return isalnum((unsigned char)c) || c == '_';
}

/* One line of core's stdout/stderr, as the SDK's logLineWriter handles it: one leading
 * `YYYY-MM-DDTHH:MM:SS.mmm ` is stripped, the line trimmed (empty lines dropped), then
 * `[(\w+) ([A-Z]+)] (.*)` found anywhere: FATAL/ERROR → error, WARNING → warn, INFO → info,
 * DEBUG → debug, anything else → info, logged as "<Category>: <msg>". Unmatched lines: info. */
static void log_core_line(const char *line, size_t n)
{
    static const char pat[] = "dddd-dd-ddTdd:dd:dd.ddd ";
    if (n >= sizeof pat - 1) {
        bool ts = true;
        for (size_t i = 0; ts && i < sizeof pat - 1; i++)
            ts = pat[i] == 'd' ? isdigit((unsigned char)line[i]) != 0 : line[i] == pat[i];
        if (ts) {
            line += sizeof pat - 1;
            n -= sizeof pat - 1;
        }
    }
    while (n && isspace((unsigned char)line[0]))
        line++, n--;
    while (n && isspace((unsigned char)line[n - 1]))
        n--;
    if (n == 0)
        return;
    for (size_t i = 0; i < n; i++) {
        if (line[i] != '[')
            continue;
        size_t j = i + 1;
        while (j < n && is_word(line[j]))
            j++;
        if (j == i + 1 || j >= n || line[j] != ' ')
            continue;
        size_t k = j + 1;
        while (k < n && line[k] >= 'A' && line[k] <= 'Z')
            k++;
        if (k == j + 1 || k + 1 >= n || line[k] != ']' || line[k + 1] != ' ')
            continue;
        const char *lvl = line + j + 1;
        size_t ln = k - j - 1;
        int level = CS_LOG_INFO;
        if ((ln == 5 && memcmp(lvl, "FATAL", 5) == 0) || (ln == 5 && memcmp(lvl, "ERROR", 5) == 0))
            level = CS_LOG_ERROR;
        else if (ln == 7 && memcmp(lvl, "WARNING", 7) == 0)
            level = CS_LOG_WARN;
        else if (ln == 5 && memcmp(lvl, "DEBUG", 5) == 0)
            level = CS_LOG_DEBUG;
        if (!cs_log_enabled(level))
            return;
        char *msg = NULL;
        if (asprintf(&msg, "%.*s: %.*s", (int)(j - i - 1), line + i + 1, (int)(n - k - 2), line + k + 2) < 0)
            return;
        CS_LOG(level, msg, SUBSERVICE);
        free(msg);
        return;
    }
    if (!cs_log_enabled(CS_LOG_INFO))
        return;
    char *msg = strndup(line, n);
    if (msg) {
        CS_LOG(CS_LOG_INFO, msg, SUBSERVICE);
        free(msg);
    }
}

/* A thread that reads one process's log pipe to EOF, so the source thread never waits on a log
 * line and core never blocks on a full stdout. */
typedef struct core_log {
    int fd;       /* read end, non-blocking */
    int stop_efd; /* readable: drain what is there and exit */
    pthread_t th;
    pthread_mutex_t mu;
    pthread_cond_t cv;
    bool done;
} core_log;

static void *core_log_main(void *arg)
{
    core_log *l = arg;
    char *buf = malloc(LOG_LINE_MAX);
    size_t n = 0;
    bool stopping = false;
    int last_reads = 64; /* while stopping: a writer that never pauses cannot keep us here */
    while (buf) {
        if (stopping && last_reads-- == 0)
            break;
        if (!stopping) {
            struct pollfd pfd[2] = {{.fd = l->fd, .events = POLLIN}, {.fd = l->stop_efd, .events = POLLIN}};
            if (poll(pfd, 2, -1) < 0 && errno != EINTR)
                break;
            if (pfd[1].revents & POLLIN)
                stopping = true; /* one last non-blocking drain, then out */
        }
        ssize_t k = read(l->fd, buf + n, LOG_LINE_MAX - n);
        if (k < 0 && errno == EINTR)
            continue;
        if (k < 0 && errno == EAGAIN && !stopping)
            continue;
        if (k <= 0)
            break; /* EOF, an error, or nothing left while stopping */
        size_t start = 0, end = n + (size_t)k;
        for (size_t i = n; i < end; i++) {
            if (buf[i] == '\n') {
                log_core_line(buf + start, i - start);
                start = i + 1;
            }
        }
        n = end - start;
        memmove(buf, buf + start, n);
        if (n == LOG_LINE_MAX) { /* an overlong line is logged in pieces */
            log_core_line(buf, n);
            n = 0;
        }
    }
    if (buf && n)
        log_core_line(buf, n); /* a last line without its newline */
    free(buf);
    pthread_mutex_lock(&l->mu);
    l->done = true;
    pthread_cond_signal(&l->cv);
    pthread_mutex_unlock(&l->mu);
    return NULL;
}

/* Takes ownership of fd. */
static core_log *core_log_start(int fd, cs_err *err)
{
    core_log *l = calloc(1, sizeof *l);
    if (!l) {
        close(fd);
        cs_err_set(err, 0, "out of memory");
        return NULL;
    }
    l->fd = fd;
    l->stop_efd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
    pthread_condattr_t ca;
    pthread_condattr_init(&ca);
    pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
    pthread_cond_init(&l->cv, &ca);
    pthread_condattr_destroy(&ca);
    pthread_mutex_init(&l->mu, NULL);
    int fl = fcntl(fd, F_GETFL);
    int rc = l->stop_efd < 0 ? errno : 0;
    if (rc == 0 && (fl < 0 || fcntl(fd, F_SETFL, fl | O_NONBLOCK) < 0))
        rc = errno;
    if (rc == 0)
        rc = pthread_create(&l->th, NULL, core_log_main, l);
    if (rc != 0) {
        cs_err_set(err, 0, "start the stellar-core log reader: %s", strerror(rc));
        close(fd);
        if (l->stop_efd >= 0)
            close(l->stop_efd);
        pthread_cond_destroy(&l->cv);
        pthread_mutex_destroy(&l->mu);
        free(l);
        return NULL;
    }
    return l;
}

/* Waits for the log pipe's EOF until the monotonic deadline, then stops the reader anyway (a
 * grandchild may hold the pipe), joins it and frees it. */
static void core_log_finish(core_log *l, int64_t deadline)
{
    if (!l)
        return;
    struct timespec ts = {.tv_sec = deadline / 1000000000, .tv_nsec = deadline % 1000000000};
    pthread_mutex_lock(&l->mu);
    while (!l->done)
        if (pthread_cond_timedwait(&l->cv, &l->mu, &ts) == ETIMEDOUT)
            break;
    bool done = l->done;
    pthread_mutex_unlock(&l->mu);
    if (!done) {
        uint64_t one = 1;
        ssize_t w = write(l->stop_efd, &one, sizeof one);
        (void)w;
    }
    pthread_join(l->th, NULL);
    close(l->fd);
    close(l->stop_efd);
    pthread_cond_destroy(&l->cv);
    pthread_mutex_destroy(&l->mu);
    free(l);
}

/* ---- processes ------------------------------------------------------------------------------ */

typedef struct proc {
    cs_child c;
    core_log *log;
} proc;

static void proc_init(proc *p)
{
    memset(p, 0, sizeof *p);
    p->c.pid = -1;
    p->c.pidfd = -1;
}

static bool proc_ok(const proc *p)
{
    return p->c.reaped && !p->c.wait_errno && WIFEXITED(p->c.status) && WEXITSTATUS(p->c.status) == 0;
}

static void proc_status_string(const proc *p, char *buf, size_t len)
{
    if (p->c.wait_errno)
        snprintf(buf, len, "wait: %s", strerror(p->c.wait_errno));
    else
        cs_wait_status_string(p->c.status, buf, len);
}

typedef enum out_mode { OUT_NULL, OUT_LOG, OUT_CAPTURE } out_mode;

typedef struct captive_source {
    cs_source base;
    cs_cancel *cancel;
    char *bin;
    char *config_path;
    char *storage; /* absolute */
    char *workdir; /* <storage>/captive-core */
    char *conf;    /* <workdir>/stellar-core.conf */
    char *passphrase;
    char **urls;
    size_t nurls;
    char *user_agent;
    uint32_t from;
    int64_t grace;
    cs_coretoml *toml;
    cs_coretoml_params params;

    bool started;
    bool failed;
    cs_err failure;
    proc run;
    int meta_rfd;
    cs_frame_reader *fr;
    bool dir_settled; /* the keep-or-wipe decision was taken */
    uint32_t expect;  /* the ledger the next emission carries */
    uint32_t next_ledger; /* the next frame's seq once one arrived (0 before) */
    bool have_prev;
    uint8_t prev_hash[32];
} captive_source;

static int cancelled(cs_err *err)
{
    return cs_err_set(err, CS_ERR_CANCELLED, "context canceled");
}

/* Moves fd to a number >= 4 (close-on-exec), so the child's dup2 onto 0-3 never collides. */
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

static const char *go_errno_string(int e, char *buf, size_t len)
{
    /* syscall.Errno.Error() is strerror's text starting lower case. */
    snprintf(buf, len, "%s", strerror(e));
    if (buf[0] && isupper((unsigned char)buf[0]) && !(buf[1] && isupper((unsigned char)buf[1])))
        buf[0] = (char)tolower((unsigned char)buf[0]);
    return buf;
}

#define GOERR(e) go_errno_string((e), (char[128]){0}, 128)

/* Spawns argv with stdout/stderr per the modes, cwd (NULL: ours) and, when meta_wfd >= 0, that
 * pipe as fd 3. A log pipe gets a reader thread; a capture pipe's read end goes to *capture_rfd. */
static int proc_start(captive_source *cs, proc *p, char *const argv[], const char *cwd, out_mode out,
                      out_mode errm, int meta_wfd, int *capture_rfd, cs_err *err)
{
    proc_init(p);
    int logp[2] = {-1, -1}, capp[2] = {-1, -1};
    int rc = 0;
    if ((out == OUT_LOG || errm == OUT_LOG) && pipe2(logp, O_CLOEXEC) != 0)
        rc = errno;
    if (rc == 0 && out == OUT_CAPTURE && pipe2(capp, O_CLOEXEC) != 0)
        rc = errno;
    if (rc == 0 && logp[1] >= 0 && (logp[1] = fd_above_3(logp[1])) < 0)
        rc = errno;
    if (rc == 0 && capp[1] >= 0 && (capp[1] = fd_above_3(capp[1])) < 0)
        rc = errno;
    /* The reader runs before the child does: core must never write to a pipe nobody reads. */
    cs_err le;
    if (rc == 0 && logp[0] >= 0) {
        p->log = core_log_start(logp[0], &le);
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
    posix_spawnattr_t at;
    bool fa_ok = false, at_ok = false;
    if (rc == 0 && (rc = posix_spawn_file_actions_init(&fa)) == 0)
        fa_ok = true;
    if (rc == 0 && (rc = posix_spawnattr_init(&at)) == 0)
        at_ok = true;
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
#if defined(__GLIBC__) && (__GLIBC__ > 2 || (__GLIBC__ == 2 && __GLIBC_MINOR__ >= 34))
    /* Like Go's exec: the child gets fds 0-2 (and 3) and nothing else. */
    if (rc == 0)
        rc = posix_spawn_file_actions_addclosefrom_np(&fa, meta_wfd >= 0 ? 4 : 3);
#endif
    sigset_t none, dfl;
    sigemptyset(&none);
    sigemptyset(&dfl);
    /* corestreamd blocks SIGINT/SIGTERM in every thread and ignores SIGPIPE: core gets them
     * back, or the SIGINT stop would do nothing. Core shares corestreamd's process group, as it
     * does under the Go SDK. */
    int defaults[] = {SIGHUP, SIGINT, SIGQUIT, SIGPIPE, SIGTERM};
    for (size_t i = 0; i < sizeof defaults / sizeof defaults[0]; i++)
        sigaddset(&dfl, defaults[i]);
    if (rc == 0)
        rc = posix_spawnattr_setsigmask(&at, &none);
    if (rc == 0)
        rc = posix_spawnattr_setsigdefault(&at, &dfl);
    if (rc == 0)
        rc = posix_spawnattr_setflags(&at, POSIX_SPAWN_SETSIGMASK | POSIX_SPAWN_SETSIGDEF);
    if (rc == 0)
        rc = posix_spawnp(&p->c.pid, argv[0], &fa, &at, argv, environ);
    if (at_ok)
        posix_spawnattr_destroy(&at);
    if (fa_ok)
        posix_spawn_file_actions_destroy(&fa);
    if (logp[1] >= 0)
        close(logp[1]);
    if (capp[1] >= 0)
        close(capp[1]);
    if (rc != 0) {
        p->c.pid = -1;
        if (logp[0] >= 0)
            close(logp[0]);
        if (capp[0] >= 0)
            close(capp[0]);
        core_log_finish(p->log, cs_mono_ns()); /* its write end is closed: EOF */
        p->log = NULL;
        char e[128];
        go_errno_string(rc, e, sizeof e);
        if (cwd && rc == ENOENT && access(cwd, X_OK) != 0)
            return cs_err_set(err, 0, "chdir %s: %s", cwd, e);
        return cs_err_set(err, 0, "fork/exec %s: %s", argv[0], e);
    }
#ifdef SYS_pidfd_open
    p->c.pidfd = (int)syscall(SYS_pidfd_open, p->c.pid, 0);
#endif
    if (capture_rfd)
        *capture_rfd = capp[0];
    else if (capp[0] >= 0)
        close(capp[0]);
    (void)cs;
    return 0;
}

/* After the process was reaped (or given up on): the log reader gets the grace to see EOF. */
static void proc_release(captive_source *cs, proc *p)
{
    core_log_finish(p->log, cs_mono_ns() + cs->grace);
    p->log = NULL;
    if (p->c.pidfd >= 0)
        close(p->c.pidfd);
    p->c.pidfd = -1;
}

/* SIGINT, the grace, SIGKILL; reaps; releases. Idempotent. */
static void proc_stop(captive_source *cs, proc *p, int drain_fd)
{
    if (p->c.pid <= 0)
        return;
    if (!p->c.reaped) {
        kill(p->c.pid, SIGINT);
        if (cs_child_wait(&p->c, cs_mono_ns() + cs->grace, NULL, drain_fd) == 0) {
            CS_LOG(CS_LOG_WARN, "captive: stellar-core did not stop after SIGINT; killing it", KV_I("pid", p->c.pid),
                   KV_D("grace", cs->grace), SUBSERVICE);
            kill(p->c.pid, SIGKILL);
            if (cs_child_wait(&p->c, cs_mono_ns() + cs->grace, NULL, drain_fd) == 0)
                CS_LOG(CS_LOG_WARN, "captive: stellar-core survived SIGKILL; not reaped", KV_I("pid", p->c.pid),
                       SUBSERVICE);
        }
    }
    proc_release(cs, p);
}

/* Runs a command to completion, its output logged. Returns 0 when it exited 0; -1 with the exit
 * ("exit status N", "signal: …") or the spawn error, or CS_ERR_CANCELLED (after stopping it). */
static int run_cmd(captive_source *cs, char *const argv[], cs_err *err)
{
    proc p;
    if (proc_start(cs, &p, argv, cs->workdir, OUT_LOG, OUT_LOG, -1, NULL, err) != 0)
        return -1;
    if (cs_child_wait(&p.c, -1, cs->cancel, -1) < 0) {
        proc_stop(cs, &p, -1);
        return cancelled(err);
    }
    proc_release(cs, &p);
    if (proc_ok(&p))
        return 0;
    if (cs_cancel_is_set(cs->cancel))
        return cancelled(err); /* stopped by the shutdown (the terminal's SIGINT reaches core too) */
    char why[128];
    proc_status_string(&p, why, sizeof why);
    return cs_err_set(err, 0, "%s", why);
}

/* Runs a command for its stdout (at most CAPTURE_MAX bytes kept, NUL-terminated in *out), with
 * stderr logged or dropped, within timeout_ns (0: none). Errors as run_cmd's, plus "timed out". */
static int capture_cmd(captive_source *cs, char *const argv[], const char *cwd, out_mode errm,
                       int64_t timeout_ns, char **out, cs_err *err)
{
    *out = NULL;
    proc p;
    int rfd = -1;
    if (proc_start(cs, &p, argv, cwd, OUT_CAPTURE, errm, -1, &rfd, err) != 0)
        return -1;
    int64_t deadline = timeout_ns > 0 ? cs_mono_ns() + timeout_ns : -1;
    char *buf = malloc(CAPTURE_MAX + 1);
    size_t n = 0;
    int rc = 0;
    if (!buf)
        rc = cs_err_set(err, 0, "out of memory");
    while (rc == 0) {
        if (cs_cancel_is_set(cs->cancel)) {
            rc = cancelled(err);
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
            rc = cancelled(err);
        else if (w == 0)
            rc = cs_err_set(err, 0, "timed out");
    }
    if (rc != 0) {
        proc_stop(cs, &p, -1);
        free(buf);
        return -1;
    }
    proc_release(cs, &p);
    buf[n] = 0;
    if (!proc_ok(&p)) {
        if (cs_cancel_is_set(cs->cancel)) {
            free(buf);
            return cancelled(err);
        }
        char why[128];
        proc_status_string(&p, why, sizeof why);
        free(buf);
        return cs_err_set(err, 0, "%s", why);
    }
    *out = buf;
    return 0;
}

/* ---- the working dir ------------------------------------------------------------------------ */

static int rm_entry(const char *path, const struct stat *st, int flag, struct FTW *ftw)
{
    (void)st, (void)flag, (void)ftw;
    if (remove(path) != 0 && errno != ENOENT)
        return errno;
    return 0;
}

/* rm -rf. */
static int remove_all(const char *path, cs_err *err)
{
    struct stat st;
    if (lstat(path, &st) != 0)
        return errno == ENOENT ? 0 : cs_err_set(err, 0, "lstat %s: %s", path, GOERR(errno));
    int rc = nftw(path, rm_entry, 16, FTW_DEPTH | FTW_PHYS);
    if (rc != 0)
        return cs_err_set(err, 0, "remove %s: %s", path, GOERR(rc > 0 ? rc : errno));
    return 0;
}

/* mkdir -p, 0755. */
static int mkdir_all(const char *path, cs_err *err)
{
    char *p = strdup(path);
    if (!p)
        return cs_err_set(err, 0, "out of memory");
    for (char *s = p + 1;; s++) {
        if (*s == '/' || *s == 0) {
            char c = *s;
            *s = 0;
            struct stat st;
            if (mkdir(p, 0755) != 0 && errno != EEXIST) {
                int e = errno;
                cs_err_set(err, 0, "mkdir %s: %s", p, GOERR(e));
                free(p);
                return -1;
            }
            if (stat(p, &st) != 0 || !S_ISDIR(st.st_mode)) {
                cs_err_set(err, 0, "mkdir %s: not a directory", p);
                free(p);
                return -1;
            }
            *s = c;
            if (!c)
                break;
        }
    }
    free(p);
    return 0;
}

/* filepath.Abs: joined to the cwd and cleaned lexically (no symlinks resolved). */
static char *abs_path(const char *path)
{
    char *joined = NULL;
    if (path[0] == '/') {
        joined = strdup(path);
    } else {
        char cwd[PATH_MAX];
        if (!getcwd(cwd, sizeof cwd) || asprintf(&joined, "%s/%s", cwd, path) < 0)
            return NULL;
    }
    if (!joined)
        return NULL;
    /* Clean: drop empty and "." elements, resolve "..". */
    size_t n = strlen(joined);
    char *out = malloc(n + 2);
    if (!out) {
        free(joined);
        return NULL;
    }
    size_t o = 0;
    char *save = NULL;
    for (char *el = strtok_r(joined, "/", &save); el; el = strtok_r(NULL, "/", &save)) {
        if (strcmp(el, ".") == 0)
            continue;
        if (strcmp(el, "..") == 0) {
            while (o > 0 && out[o - 1] != '/')
                o--;
            if (o > 0)
                o--;
            continue;
        }
        out[o++] = '/';
        size_t k = strlen(el);
        memcpy(out + o, el, k);
        o += k;
    }
    if (o == 0)
        out[o++] = '/';
    out[o] = 0;
    free(joined);
    return out;
}

static int write_conf(captive_source *cs, cs_err *err)
{
    if (mkdir_all(cs->workdir, err) != 0)
        return cs_err_prefix(err, "failed to create storage directory (%s): ", cs->workdir);
    size_t len;
    char *text = cs_coretoml_generate(cs->toml, &cs->params, &len);
    if (!text)
        return cs_err_set(err, 0, "error writing configuration: out of memory");
    if (cs_log_enabled(CS_LOG_DEBUG))
        CS_LOG(CS_LOG_DEBUG, "captive core config file contents", KV_S("path", cs->conf), KV_S("contents", text),
               SUBSERVICE);
    int fd = open(cs->conf, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    int rc = 0;
    if (fd < 0) {
        rc = cs_err_set(err, 0, "error writing configuration: open %s: %s", cs->conf, GOERR(errno));
    } else {
        for (size_t off = 0; off < len && rc == 0;) {
            ssize_t k = write(fd, text + off, len - off);
            if (k < 0 && errno == EINTR)
                continue;
            if (k < 0)
                rc = cs_err_set(err, 0, "error writing configuration: write %s: %s", cs->conf, strerror(errno));
            else
                off += (size_t)k;
        }
        if (close(fd) != 0 && rc == 0)
            rc = cs_err_set(err, 0, "error writing configuration: close %s: %s", cs->conf, strerror(errno));
    }
    free(text);
    return rc;
}

/* Runs `<bin> --conf <conf> [--console] args…` to completion (conf rewritten first). */
static int core_cmd(captive_source *cs, bool console, const char *a1, const char *a2, cs_err *err)
{
    if (write_conf(cs, err) != 0)
        return -1;
    char c1[] = "--conf", c2[] = "--console";
    char *argv[7];
    int i = 0;
    argv[i++] = cs->bin;
    argv[i++] = c1;
    argv[i++] = cs->conf;
    if (console)
        argv[i++] = c2;
    argv[i++] = (char *)a1;
    if (a2)
        argv[i++] = (char *)a2;
    argv[i] = NULL;
    return run_cmd(cs, argv, err);
}

/* ---- the start sequence --------------------------------------------------------------------- */

/* `<bin> version`, run as the SDK runs it (no conf, our cwd, stderr dropped). */
static int core_version(captive_source *cs, char **out, cs_err *err)
{
    char v[] = "version";
    char *argv[] = {cs->bin, v, NULL};
    return capture_cmd(cs, argv, NULL, OUT_NULL, VERSION_TIMEOUT_NS, out, err);
}

static void first_line(const char *s, char *buf, size_t len)
{
    size_t n = strcspn(s, "\n");
    if (n >= len)
        n = len - 1;
    memcpy(buf, s, n);
    buf[n] = 0;
}

/* offline-info → LCL. Returns 0 with *lcl, or -1 with the reason (CS_ERR_CANCELLED kept). */
static int offline_info(captive_source *cs, int64_t *lcl, cs_err *err)
{
    if (write_conf(cs, err) != 0)
        return cs_err_prefix(err, "error creating offline-info cmd: ");
    char c1[] = "--conf", oi[] = "offline-info";
    char *argv[] = {cs->bin, c1, cs->conf, oi, NULL};
    char *out;
    if (capture_cmd(cs, argv, cs->workdir, OUT_LOG, 0, &out, err) != 0)
        return err->kind == CS_ERR_CANCELLED ? -1 : cs_err_prefix(err, "error executing offline-info cmd: ");
    cJSON *root = cJSON_Parse(out);
    free(out);
    if (!root)
        return cs_err_set(err, 0, "invalid output of offline-info cmd: not JSON");
    /* stellarcore.InfoResponse: info.ledger.num, 0 when absent. */
    const cJSON *info = cJSON_GetObjectItem(root, "info");
    const cJSON *ledger = cJSON_IsObject(info) ? cJSON_GetObjectItem(info, "ledger") : NULL;
    const cJSON *num = cJSON_IsObject(ledger) ? cJSON_GetObjectItem(ledger, "num") : NULL;
    int rc = 0;
    *lcl = 0;
    if ((info && !cJSON_IsObject(info) && !cJSON_IsNull(info)) ||
        (ledger && !cJSON_IsObject(ledger) && !cJSON_IsNull(ledger)) ||
        (num && !cJSON_IsNull(num) &&
         (!cJSON_IsNumber(num) || !(num->valuedouble >= -9007199254740992.0 && num->valuedouble <= 9007199254740992.0) ||
          (double)(int64_t)num->valuedouble != num->valuedouble)))
        rc = cs_err_set(err, 0, "invalid output of offline-info cmd: unexpected info.ledger.num");
    else if (num && cJSON_IsNumber(num))
        *lcl = (int64_t)num->valuedouble;
    cJSON_Delete(root);
    return rc;
}

static int start_core(captive_source *cs, cs_err *err)
{
    cs_err e;
    /* NewCaptive: the binary must speak protocol 23 or later. */
    char *ver;
    if (core_version(cs, &ver, &e) != 0) {
        if (e.kind == CS_ERR_CANCELLED)
            return cancelled(err);
        return cs_err_set(err, 0, "error determining stellar-core protocol version: error executing stellar-core "
                                  "version command (%s): %s", cs->bin, e.msg);
    }
    unsigned proto;
    int prc = cs_coretoml_protocol_version(ver, &proto, &e);
    char build[256];
    first_line(ver, build, sizeof build);
    free(ver);
    if (prc != 0)
        return cs_err_set(err, 0, "error determining stellar-core protocol version: %s", e.msg);
    if (proto < CS_CAPTIVE_MIN_PROTOCOL)
        return cs_err_set(err, 0,
                          "stellar-core version not supported. Installed stellar-core version is at protocol %u, but "
                          "minimum required version is %d. Please upgrade stellar-core to a version that supports "
                          "protocol version %d or higher",
                          proto, CS_CAPTIVE_MIN_PROTOCOL, CS_CAPTIVE_MIN_PROTOCOL);
    CS_LOG(CS_LOG_INFO, "stellar-core version", KV_S("version", build), KV_U("protocol", proto), SUBSERVICE);

    /* runFromParams. */
    uint32_t from = cs->from;
    if (from == 1)
        return cs_err_set(err, 0, "CaptiveCore is unable to start from ledger 1, start from ledger 2");
    if (from <= 63)
        from = 3; /* core streams ledger 2 on for the first checkpoint */
    cs_archive_opts ao = {
        .urls = (const char *const *)cs->urls,
        .nurls = cs->nurls,
        .user_agent = cs->user_agent,
        .network_passphrase = cs->passphrase,
        .cancel = cs->cancel,
    };
    cs_archive_has has;
    if (cs_archive_root_has(&ao, &has, &e) != 0) {
        if (e.kind == CS_ERR_CANCELLED)
            return cancelled(err);
        return cs_err_set(err, 0, "error getting latest checkpoint sequence: error getting root HAS: %s", e.msg);
    }
    uint64_t latest = has.current_ledger;
    if ((uint64_t)from > latest + 2 * 64)
        return cs_err_set(err, 0,
                          "trying to start online mode too far (latest checkpoint=%u), only two checkpoints in the "
                          "future allowed",
                          has.current_ledger);
    uint32_t run_from = from - 1;
    CS_LOG(CS_LOG_INFO, "captive: starting stellar-core", KV_U("from", cs->from), KV_U("run_from", run_from),
           KV_U("latest_checkpoint", latest), KV_S("workdir", cs->workdir), SUBSERVICE);

    /* runFromStream.start: reuse the database when its LCL is in range, else build a new one. */
    bool new_db = false;
    int64_t lcl = 0;
    if (offline_info(cs, &lcl, &e) != 0) {
        if (e.kind == CS_ERR_CANCELLED)
            return cancelled(err);
        char *msg = NULL;
        if (asprintf(&msg, "Error running offline-info: %s, removing existing storage-dir contents", e.msg) >= 0) {
            CS_LOG(CS_LOG_INFO, msg, SUBSERVICE);
            free(msg);
        }
        new_db = true;
    } else if (lcl <= 2 || lcl > (int64_t)run_from) {
        char msg[160];
        snprintf(msg, sizeof msg, "Unexpected LCL in Stellar-Core DB: %lld (want: %u), removing existing storage-dir contents",
                 (long long)lcl, run_from);
        CS_LOG(CS_LOG_INFO, msg, SUBSERVICE);
        new_db = true;
    } else {
        CS_LOG(CS_LOG_INFO, "captive: reusing the stellar-core database", KV_I("lcl", lcl), KV_U("run_from", run_from),
               SUBSERVICE);
    }

    int rc = 0;
    if (new_db) {
        if (remove_all(cs->workdir, &e) != 0)
            return cs_err_set(err, 0, "error removing existing storage-dir contents: %s", e.msg);
        if (core_cmd(cs, true, "new-db", NULL, &e) != 0) {
            rc = e.kind == CS_ERR_CANCELLED ? cancelled(err) : cs_err_set(err, 0, "error initializing core db: %s", e.msg);
        } else if (run_from < 3) {
            /* Core replays from ledger 2 itself once told catchup is complete (LCL = 1). */
            cs->params.catchup_complete = true;
        } else {
            char target[32];
            snprintf(target, sizeof target, "%u/0", run_from);
            if (core_cmd(cs, true, "catchup", target, &e) != 0)
                rc = e.kind == CS_ERR_CANCELLED ? cancelled(err)
                                                : cs_err_set(err, 0, "error running stellar-core catchup: %s", e.msg);
        }
    }

    /* `run --metadata-output-stream fd:3`: the long-lived process on the meta pipe. */
    int p[2] = {-1, -1};
    if (rc == 0 && write_conf(cs, &e) != 0)
        rc = cs_err_set(err, 0, "error creating command: %s", e.msg);
    if (rc == 0 && pipe2(p, O_CLOEXEC) != 0)
        rc = cs_err_set(err, 0, "error starting `stellar-core run` subprocess: pipe: %s", strerror(errno));
    if (rc == 0 && (p[1] = fd_above_3(p[1])) < 0)
        rc = cs_err_set(err, 0, "error starting `stellar-core run` subprocess: %s", strerror(errno));
    if (rc == 0 && cs_frame_reader_new(&cs->fr, p[0], cs->cancel, CS_FRAME_BUFFER_DEFAULT, CS_MAX_PAYLOAD_SIZE, &e) != 0)
        rc = cs_err_set(err, 0, "error starting `stellar-core run` subprocess: %s", e.msg);
    if (rc == 0) {
        char c1[] = "--conf", c2[] = "--console", r[] = "run", m[] = "--metadata-output-stream", fd3[] = "fd:3";
        char *argv[] = {cs->bin, c1, cs->conf, c2, r, m, fd3, NULL};
        if (proc_start(cs, &cs->run, argv, cs->workdir, OUT_LOG, OUT_LOG, p[1], NULL, &e) != 0)
            rc = cs_err_set(err, 0, "error starting `stellar-core run` subprocess: %s", e.msg);
    }
    /* The parent keeps no write end: core's exit is the pipe's EOF. */
    if (p[1] >= 0)
        close(p[1]);
    if (rc == 0) {
        cs->meta_rfd = p[0];
        CS_LOG(CS_LOG_INFO, "captive: stellar-core running", KV_I("pid", cs->run.c.pid), KV_B("new_db", new_db),
               SUBSERVICE);
        return 0;
    }
    cs_frame_reader_free(cs->fr);
    cs->fr = NULL;
    if (p[0] >= 0)
        close(p[0]);
    /* A database this start created and could not use is not kept. */
    if (new_db && remove_all(cs->workdir, &e) != 0)
        CS_LOG(CS_LOG_WARN, "captive: cannot remove the working dir", KV_S("error", e.msg), SUBSERVICE);
    return -1;
}

/* ---- streaming ------------------------------------------------------------------------------ */

/* Stops `run` (if it still runs), then keeps the working dir when core's exit status was 0 and
 * wipes it otherwise. */
static void stop_core(captive_source *cs)
{
    if (cs->run.c.pid <= 0)
        return;
    proc_stop(cs, &cs->run, cs->meta_rfd);
    if (cs->dir_settled)
        return;
    cs->dir_settled = true;
    if (proc_ok(&cs->run))
        return;
    char why[128];
    proc_status_string(&cs->run, why, sizeof why);
    CS_LOG(CS_LOG_INFO, "captive: stellar-core failed; removing its working dir", KV_S("exit", why),
           KV_S("workdir", cs->workdir), SUBSERVICE);
    cs_err e;
    if (remove_all(cs->workdir, &e) != 0)
        CS_LOG(CS_LOG_WARN, "captive: cannot remove the working dir", KV_S("error", e.msg), SUBSERVICE);
}

/* Ends the stream with an error (stored, so later calls repeat it) and stops core. */
static int fail(captive_source *cs, cs_err *err, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static int fail(captive_source *cs, cs_err *err, const char *fmt, ...)
{
    char msg[CS_ERR_MSG_MAX];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    cs->failed = true;
    cs_err_set(&cs->failure, 0, "captive: %s", msg);
    stop_core(cs);
    if (err)
        *err = cs->failure;
    return -1;
}

/* The meta pipe ended (EOF, a short frame) or failed (reader_err). The SDK's order: a core that
 * exited with an error is the cause; then the reader's error; then a clean exit that still left
 * ledgers wanted; then a pipe closed under a live core. */
static int stream_broken(captive_source *cs, const cs_err *reader_err, const char *what, bool expect_exit, cs_err *err)
{
    if (cs_cancel_is_set(cs->cancel) || (reader_err && reader_err->kind == CS_ERR_CANCELLED))
        return cancelled(err);
    /* EOF comes with core's exit; give the exit the grace to become visible. */
    int64_t deadline = expect_exit ? cs_mono_ns() + cs->grace : cs_mono_ns();
    int w = cs_child_wait(&cs->run.c, deadline, cs->cancel, -1);
    if (w < 0 || cs_cancel_is_set(cs->cancel))
        return cancelled(err); /* e.g. a terminal's Ctrl-C reached core before our cancel */
    if (w == 1 && !proc_ok(&cs->run)) {
        char why[128];
        proc_status_string(&cs->run, why, sizeof why);
        return fail(cs, err, "stellar-core exited unexpectedly: %s", why);
    }
    if (reader_err)
        return fail(cs, err, "%s%s%s", what ? what : "", what ? ": " : "", reader_err->msg);
    if (w == 1)
        return fail(cs, err, "stellar-core exited unexpectedly");
    return fail(cs, err, "meta pipe closed unexpectedly");
}

static void hex32(const uint8_t *h, char *out)
{
    static const char d[] = "0123456789abcdef";
    for (int i = 0; i < 32; i++) {
        out[2 * i] = d[h[i] >> 4];
        out[2 * i + 1] = d[h[i] & 15];
    }
    out[64] = 0;
}

static uint32_t be32(const uint8_t *p)
{
    return (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 | (uint32_t)p[2] << 8 | p[3];
}

static int captive_next(cs_source *s, cs_emission *em, cs_err *err)
{
    captive_source *cs = (captive_source *)s;
    em->seq = cs->expect;
    em->declared_size = 0;
    if (cs->failed) {
        *err = cs->failure;
        return -1;
    }
    if (cs_cancel_is_set(cs->cancel))
        return cancelled(err);
    cs_err e;
    if (!cs->started) {
        cs->started = true;
        if (start_core(cs, &e) != 0) {
            if (e.kind == CS_ERR_CANCELLED)
                return cancelled(err);
            cs->failed = true;
            cs_err_set(&cs->failure, 0, "captive: %s", e.msg);
            *err = cs->failure;
            return -1;
        }
    }
    for (;;) {
        uint32_t len;
        int r = cs_frame_reader_next(cs->fr, &len, &e);
        if (r == 0)
            return stream_broken(cs, NULL, NULL, true, err);
        if (r < 0)
            return stream_broken(cs, &e, e.kind == CS_FRAME_ERR_SHORT ? "error reading frame" : "error reading frame length",
                                 e.kind == CS_FRAME_ERR_SHORT, err);
        const uint8_t *prefix;
        size_t n;
        if (cs_frame_reader_prefix(cs->fr, &prefix, &n, &e) != 0)
            return stream_broken(cs, &e, "reading LedgerCloseMeta frame body", e.kind == CS_FRAME_ERR_SHORT, err);
        uint32_t seq;
        if (cs_xdr_ledger_seq(prefix, n, &seq, &e) != 0)
            return fail(cs, err, "read ledger seq: %s", e.msg);
        /* The walk reached ledgerSeq, so the prefix holds LedgerHeaderHistoryEntry.hash at H and
         * previousLedgerHash at H+36 (CAPTIVE.md 3.3). */
        size_t h = be32(prefix) == 0 ? 4 : be32(prefix + 4) == 1 ? 20 : 8;
        const uint8_t *hash = prefix + h, *prev = prefix + h + 36;

        if (cs->next_ledger != 0 && seq != cs->next_ledger)
            return fail(cs, err, "unexpected ledger sequence (expected=%u actual=%u)", cs->next_ledger, seq);
        if (cs->next_ledger == 0 && seq > cs->from)
            return fail(cs, err, "unexpected ledger sequence (expected=<=%u actual=%u)", cs->from, seq);
        if (cs->have_prev && memcmp(prev, cs->prev_hash, 32) != 0) {
            char want[65], got[65];
            hex32(cs->prev_hash, want);
            hex32(prev, got);
            return fail(cs, err, "unexpected previous ledger hash for ledger %u (expected=%s actual=%s)", seq, want, got);
        }
        cs->next_ledger = seq + 1;
        memcpy(cs->prev_hash, hash, 32);
        cs->have_prev = true;
        if (seq < cs->from)
            continue; /* before the range: checked, its body dropped by the next marker read */
        em->seq = seq;
        em->declared_size = len;
        cs->expect = seq + 1;
        return 1;
    }
}

static ssize_t captive_read(cs_source *s, uint8_t *buf, size_t len, cs_err *err)
{
    captive_source *cs = (captive_source *)s;
    if (cs->failed) {
        *err = cs->failure;
        return -1;
    }
    if (!cs->fr)
        return 0;
    cs_err e;
    ssize_t k = cs_frame_reader_read(cs->fr, buf, len, &e);
    if (k >= 0)
        return k;
    if (e.kind == CS_ERR_CANCELLED || cs_cancel_is_set(cs->cancel))
        return cancelled(err);
    if (e.kind == CS_FRAME_ERR_SHORT)
        return stream_broken(cs, &e, NULL, true, err);
    return stream_broken(cs, &e, "read frame body", false, err);
}

static void captive_destroy(cs_source *s)
{
    captive_source *cs = (captive_source *)s;
    if (!cs)
        return;
    stop_core(cs);
    cs_frame_reader_free(cs->fr);
    if (cs->meta_rfd >= 0)
        close(cs->meta_rfd);
    cs_coretoml_free(cs->toml);
    for (size_t i = 0; i < cs->nurls; i++)
        free(cs->urls[i]);
    free(cs->urls);
    free(cs->bin);
    free(cs->config_path);
    free(cs->storage);
    free(cs->workdir);
    free(cs->conf);
    free(cs->passphrase);
    free(cs->user_agent);
    free(cs);
}

static const cs_source_ops captive_ops = {
    .next = captive_next,
    .read = captive_read,
    .destroy = captive_destroy,
};

const char *cs_captive_source_workdir(const cs_source *s)
{
    return ((const captive_source *)s)->workdir;
}

int cs_captive_source_core_pid(const cs_source *s)
{
    const captive_source *cs = (const captive_source *)s;
    return cs->run.c.pid > 0 && !cs->run.c.reaped ? (int)cs->run.c.pid : -1;
}

/* ---- construction --------------------------------------------------------------------------- */

/* exec.LookPath("stellar-core"). */
static char *look_path(const char *name, cs_err *err)
{
    const char *path = getenv("PATH");
    char q[256];
    cs_go_quote(q, sizeof q, name);
    if (path && *path) {
        const char *s = path;
        for (;;) {
            const char *colon = strchr(s, ':');
            size_t n = colon ? (size_t)(colon - s) : strlen(s);
            char *cand = NULL;
            if (asprintf(&cand, "%.*s/%s", (int)(n ? n : 1), n ? s : ".", name) < 0) {
                cs_err_set(err, 0, "out of memory");
                return NULL;
            }
            struct stat st;
            if (stat(cand, &st) == 0 && !S_ISDIR(st.st_mode) && (st.st_mode & 0111) && access(cand, X_OK) == 0) {
                if (cand[0] != '/') {
                    free(cand);
                    cs_err_set(err, 0, "exec: %s: cannot run executable found relative to current directory", q);
                    return NULL;
                }
                return cand;
            }
            free(cand);
            if (!colon)
                break;
            s = colon + 1;
        }
    }
    cs_err_set(err, 0, "exec: %s: executable file not found in $PATH", q);
    return NULL;
}

static int read_file(const char *path, char **data, size_t *len, cs_err *err)
{
    *data = NULL;
    *len = 0;
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return cs_err_set(err, 0, "open %s: %s", path, GOERR(errno));
    size_t cap = 8192, n = 0;
    char *buf = malloc(cap + 1);
    int rc = buf ? 0 : cs_err_set(err, 0, "out of memory");
    while (rc == 0) {
        if (n == cap) {
            if (cap > (64u << 20)) {
                rc = cs_err_set(err, 0, "read %s: file too large", path);
                break;
            }
            char *p = realloc(buf, cap * 2 + 1);
            if (!p) {
                rc = cs_err_set(err, 0, "out of memory");
                break;
            }
            buf = p;
            cap *= 2;
        }
        ssize_t k = read(fd, buf + n, cap - n);
        if (k < 0 && errno == EINTR)
            continue;
        if (k < 0)
            rc = cs_err_set(err, 0, "read %s: %s", path, GOERR(errno));
        else if (k == 0)
            break;
        else
            n += (size_t)k;
    }
    close(fd);
    if (rc != 0) {
        free(buf);
        return -1;
    }
    buf[n] = 0;
    *data = buf;
    *len = n;
    return 0;
}

int cs_captive_source_new(cs_source **out, const cs_captive_config *cfg, cs_cancel *cancel, cs_err *err)
{
    *out = NULL;
    if (!cfg->core_config || !*cfg->core_config)
        return cs_err_set(err, 0, "captive: config path is required");
    if (!cfg->storage_dir || !*cfg->storage_dir)
        return cs_err_set(err, 0, "captive: storage path is required");
    if (cfg->nurls == 0)
        return cs_err_set(err, 0, "captive: at least one history archive URL is required");
    if (cfg->start == 0)
        return cs_err_set(err, 0, "captive: a start ledger is required");

    char qpath[PATH_MAX + 64];
    cs_go_quote(qpath, sizeof qpath, cfg->core_config);
    char *data;
    size_t len;
    cs_err e;
    if (read_file(cfg->core_config, &data, &len, &e) != 0)
        return cs_err_set(err, 0, "captive: read config %s: %s", qpath, e.msg);

    captive_source *cs = calloc(1, sizeof *cs);
    if (!cs) {
        free(data);
        return cs_err_set(err, 0, "captive: out of memory");
    }
    cs->base.ops = &captive_ops;
    cs->cancel = cancel;
    cs->meta_rfd = -1;
    cs->from = cfg->start;
    cs->expect = cfg->start;
    cs->grace = cfg->stop_grace_ns > 0 ? cfg->stop_grace_ns : CS_CAPTIVE_STOP_GRACE_NS;
    proc_init(&cs->run);
    int rc = 0;

    if (cfg->network_passphrase && *cfg->network_passphrase) {
        if (!(cs->passphrase = strdup(cfg->network_passphrase)))
            rc = cs_err_set(err, 0, "captive: out of memory");
    } else if (cs_coretoml_peek_passphrase(data, len, &cs->passphrase, &e) != 0) {
        rc = cs_err_set(err, 0, "captive: config %s: %s", qpath, e.msg);
    }

    if (rc == 0) {
        if (cfg->core_binary && *cfg->core_binary) {
            /* A relative path with a '/' is taken from our cwd: core runs in the working dir. A
             * bare name is looked up on PATH when it runs, as exec.Command does. */
            bool rel = cfg->core_binary[0] != '/' && strchr(cfg->core_binary, '/');
            if (!(cs->bin = rel ? abs_path(cfg->core_binary) : strdup(cfg->core_binary)))
                rc = cs_err_set(err, 0, "captive: out of memory");
        } else if (!(cs->bin = look_path("stellar-core", &e))) {
            rc = cs_err_set(err, 0, "captive: no --core-binary given and stellar-core is not on PATH: %s", e.msg);
        }
    }

    if (rc == 0 && mkdir_all(cfg->storage_dir, &e) != 0) {
        char qs[PATH_MAX + 64];
        cs_go_quote(qs, sizeof qs, cfg->storage_dir);
        rc = cs_err_set(err, 0, "captive: create storage path %s: %s", qs, e.msg);
    }
    if (rc == 0 && !(cs->storage = abs_path(cfg->storage_dir))) {
        char qs[PATH_MAX + 64];
        cs_go_quote(qs, sizeof qs, cfg->storage_dir);
        rc = cs_err_set(err, 0, "captive: resolve storage path %s: %s", qs, strerror(errno ? errno : ENOMEM));
    }
    if (rc == 0 && (asprintf(&cs->workdir, "%s%scaptive-core", cs->storage,
                             cs->storage[strlen(cs->storage) - 1] == '/' ? "" : "/") < 0 ||
                    asprintf(&cs->conf, "%s/stellar-core.conf", cs->workdir) < 0)) {
        rc = cs_err_set(err, 0, "captive: out of memory");
    }

    if (rc == 0 && cs_coretoml_parse(&cs->toml, data, len, cs->passphrase, &e) != 0)
        rc = cs_err_set(err, 0, "captive: invalid config %s: %s", qpath, e.msg);
    free(data);

    if (rc == 0) {
        cs->urls = calloc(cfg->nurls, sizeof *cs->urls);
        cs->nurls = cs->urls ? cfg->nurls : 0;
        for (size_t i = 0; i < cs->nurls && rc == 0; i++)
            if (!(cs->urls[i] = strdup(cfg->urls[i])))
                rc = cs_err_set(err, 0, "captive: out of memory");
        if (!cs->urls || !(cs->user_agent = strdup(cfg->user_agent ? cfg->user_agent : CS_ARCHIVE_USER_AGENT)) ||
            !(cs->config_path = strdup(cfg->core_config)))
            rc = cs_err_set(err, 0, "captive: out of memory");
    }

    if (rc == 0) {
        if (cs->toml && cs_coretoml_history_configured(cs->toml))
            CS_LOG(CS_LOG_WARN, "Configuring captive core with history archive from the config file",
                   KV_S("config", cfg->core_config), SUBSERVICE);
        /* The toml defaults that depend on the binary: its build version and protocol. A binary
         * that cannot answer only loses those defaults here; the first pull refuses it. */
        cs->params = (cs_coretoml_params){
            .network_passphrase = cs->passphrase,
            .urls = (const char *const *)cs->urls,
            .nurls = cs->nurls,
        };
        char *ver;
        if (core_version(cs, &ver, &e) == 0) {
            char line[256];
            first_line(ver, line, sizeof line);
            cs_coretoml_build_version(line, &cs->params.core_major, &cs->params.core_minor);
            if (cs_coretoml_protocol_version(ver, &cs->params.core_protocol, &e) != 0)
                CS_LOG(CS_LOG_WARN, "Error getting core protocol version", KV_S("error", e.msg), SUBSERVICE);
            free(ver);
        } else if (e.kind != CS_ERR_CANCELLED) {
            CS_LOG(CS_LOG_WARN, "Error getting core protocol version", KV_S("binary", cs->bin), KV_S("error", e.msg),
                   SUBSERVICE);
        }
        if (cs->params.core_protocol < CS_CAPTIVE_MIN_PROTOCOL)
            CS_LOG(CS_LOG_WARN, "Core supported protocol version too low; unified events flag has no effect",
                   KV_U("protocol", cs->params.core_protocol), KV_I("want", CS_CAPTIVE_MIN_PROTOCOL), SUBSERVICE);
    }

    if (rc != 0) {
        captive_destroy(&cs->base);
        return -1;
    }
    *out = &cs->base;
    return 0;
}
