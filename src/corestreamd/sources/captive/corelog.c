/* SPDX-License-Identifier: Apache-2.0 */
/* Core's log relay (CAPTIVE.md 4.3): each process's stdout/stderr pipe is read on a small thread
 * of its own and every line re-logged at core's level with subservice=stellar-core. */
#include <ctype.h>
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <time.h>
#include <unistd.h>

#include "common/log.h"
#include "corestreamd/sources/captive/captive_internal.h"

#define LOG_LINE_MAX (64 * 1024)

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
struct captive_log {
    int fd;       /* read end, non-blocking */
    int stop_efd; /* readable: drain what is there and exit */
    pthread_t th;
    pthread_mutex_t mu;
    pthread_cond_t cv;
    bool done;
};

static void *core_log_main(void *arg)
{
    captive_log *l = arg;
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

captive_log *captive_log_start(int fd, cs_err *err)
{
    captive_log *l = calloc(1, sizeof *l);
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

void captive_log_finish(captive_log *l, int64_t deadline)
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
