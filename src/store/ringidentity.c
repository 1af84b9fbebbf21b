/* SPDX-License-Identifier: Apache-2.0 */
/* Run identity: which run wrote the ring (ring-identity), whether this one continues it, the
 * claim at start, and the run nonce (ring-run) that tells this data directory's run of an identity
 * from any other's. */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>
#include <xxhash.h>

#include "common/log.h"
#include "store/frames.h"
#include "store/ledgerdir.h"
#include "store/ring_internal.h"

#define IDENTITY_NAME "ring-identity"
#define IDENTITY_MAX 4096
#define RUN_NAME "ring-run"
#define RUN_LINE_MAX 96

/* Reads name whole into buf (at most cap - 1 bytes, NUL-terminated): 1 when read, 0 when it does
 * not exist, -1 when it cannot be read (errno). */
static int read_small(const cs_ring *r, const char *name, char *buf, size_t cap, ssize_t *len)
{
    buf[0] = '\0';
    *len = 0;
    int fd = openat(r->dfd, name, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
    if (fd < 0)
        return errno == ENOENT ? 0 : -1;
    ssize_t n = pread(fd, buf, cap - 1, 0);
    int e = errno;
    close(fd);
    if (n < 0) {
        errno = e;
        return -1;
    }
    buf[n] = '\0';
    *len = n;
    return 1;
}

int rng_read_bookkeeping(cs_ring *r, cs_err *err)
{
    ssize_t n;
    int got = read_small(r, IDENTITY_NAME, r->identity, sizeof r->identity, &n);
    if (got < 0)
        return cs_err_set(err, 0, "store: read \"%s/%s\": %s", r->dir, IDENTITY_NAME, strerror(errno));
    /* Known only as one whole line; anything else is as good as none (the claim rewrites it). */
    r->identity_known = got > 0 && n > 0 && r->identity[n - 1] == '\n' && memchr(r->identity, '\n', (size_t)n - 1) == NULL;
    if (r->identity_known)
        r->identity[n - 1] = '\0';
    else
        r->identity[0] = '\0';
    if (read_small(r, RUN_NAME, r->run_line, sizeof r->run_line, &n) < 0)
        return cs_err_set(err, 0, "store: read \"%s/%s\": %s", r->dir, RUN_NAME, strerror(errno));
    return 0;
}

/* The identity the open read from `ring-identity` into old (IDENTITY_MAX + 1 bytes); false when
 * there is none, or it is not one whole line. */
static bool read_identity(const cs_ring *r, char *old)
{
    snprintf(old, IDENTITY_MAX + 1, "%s", r->identity);
    return r->identity_known;
}

/* ring-run: "corestream-run 1 nonce=<16 hex> identity_xxh64=<16 hex>\n", the nonce drawn when
 * the ring was first claimed under that identity, as the open read it. False when there is none, or
 * it is not exactly that line (a nonce of 0 included): the claim then draws a new one. */
static bool read_run(const cs_ring *r, uint64_t *nonce, uint64_t *idhash)
{
    const char *text = r->run_line;
    size_t n = strlen(text);
    if (n == 0 || n > RUN_LINE_MAX)
        return false;
    unsigned long long a, b;
    int used = -1;
    if (sscanf(text, "corestream-run 1 nonce=%16llx identity_xxh64=%16llx\n%n", &a, &b, &used) != 2 ||
        used != (int)n)
        return false;
    char again[RUN_LINE_MAX];
    snprintf(again, sizeof again, "corestream-run 1 nonce=%016llx identity_xxh64=%016llx\n", a, b);
    if (strcmp(again, text) != 0 || a == 0)
        return false; /* only what the writer formats */
    *nonce = a;
    *idhash = b;
    return true;
}

/* 64 random bits, never 0: the kernel's, or (getrandom unavailable) the clock's and the pid's
 * mixed. The nonce is to tell runs apart, not a secret. */
static uint64_t draw_nonce(void)
{
    uint64_t v = 0;
    if (getrandom(&v, sizeof v, 0) != (ssize_t)sizeof v) {
        struct timespec ts[2];
        clock_gettime(CLOCK_REALTIME, &ts[0]);
        clock_gettime(CLOCK_MONOTONIC, &ts[1]);
        v = XXH64(ts, sizeof ts, (uint64_t)getpid());
    }
    return v ? v : 1;
}

bool cs_ring_continues(cs_ring *r, const char *identity, uint32_t *latest)
{
    char old[IDENTITY_MAX + 1];
    bool known = read_identity(r, old);
    pthread_mutex_lock(&r->wmu);
    bool yes = r->filled && known && strcmp(old, identity) == 0 && r->latest < UINT32_MAX - 1;
    *latest = yes ? r->latest : 0;
    pthread_mutex_unlock(&r->wmu);
    return yes;
}

int cs_ring_claim(cs_ring *r, const char *identity, uint32_t first_seq, cs_err *err)
{
    if (strlen(identity) > IDENTITY_MAX - 1 || strchr(identity, '\n'))
        return cs_err_set(err, 0, "store: run identity is not one line of at most %d bytes", IDENTITY_MAX - 1);
    char old[IDENTITY_MAX + 1];
    bool known = read_identity(r, old);
    uint64_t nonce = 0, run_idhash = 0, idhash = XXH64(identity, strlen(identity), 0);
    bool have_run = read_run(r, &nonce, &run_idhash);
    pthread_mutex_lock(&r->wmu);
    if (rng_settle_locked(r, err) != 0) {
        pthread_mutex_unlock(&r->wmu);
        return -1;
    }
    char reason[160] = "";
    bool another = r->filled && known && strcmp(old, identity) != 0;
    if (another)
        snprintf(reason, sizeof reason, "written by another run");
    else if (r->filled && first_seq != 0 && (r->latest == UINT32_MAX || first_seq != r->latest + 1))
        snprintf(reason, sizeof reason, "this run starts at ledger %" PRIu32 ", not at %" PRIu64, first_seq,
                 (uint64_t)r->latest + 1);
    /* The nonce stays while the identity does (a --start-ledger reset included: same identity,
     * same bytes); a new one when none is recorded for this identity, or another run's ledgers
     * go. Written before any reset, so a failure leaves the ring's ledgers as they were. */
    if (!have_run || run_idhash != idhash || another) {
        nonce = draw_nonce();
        char line[RUN_LINE_MAX];
        snprintf(line, sizeof line, "corestream-run 1 nonce=%016llx identity_xxh64=%016llx\n",
                 (unsigned long long)nonce, (unsigned long long)idhash);
        if (rng_write_small_file(r->dfd, RUN_NAME, line) != 0) {
            int e = errno;
            pthread_mutex_unlock(&r->wmu);
            return cs_err_set(err, 0, "store: write \"%s/%s\": %s", r->dir, RUN_NAME, strerror(e));
        }
        snprintf(r->run_line, sizeof r->run_line, "%s", line);
    }
    r->run_nonce = nonce;
    uint32_t oldest = r->oldest, latest = r->latest;
    if (*reason) {
        rng_set_bounds(r, false, 0, 0);
        rng_unlink_range(r, oldest, latest);
        rng_seg_remove_all(r);
        atomic_store(&r->bytes, 0);
        atomic_store(&r->frames_bytes, 0);
    }
    pthread_mutex_unlock(&r->wmu);
    if (*reason)
        CS_LOG(CS_LOG_WARN, "ring reset at start: its ledgers are not this run's", KV_S("reason", reason),
               KV_S("ring_identity", known ? old : ""), KV_S("identity", identity), KV_U("oldest", oldest),
               KV_U("latest", latest));
    else if (r->filled && !known)
        CS_LOG(CS_LOG_INFO, "ring: no run identity recorded; this run continues it", KV_S("identity", identity),
               KV_U("oldest", oldest), KV_U("latest", latest));
    char text[IDENTITY_MAX + 2];
    snprintf(text, sizeof text, "%s\n", identity);
    if (!known || strcmp(old, identity) != 0) {
        if (rng_write_small_file(r->dfd, IDENTITY_NAME, text) != 0)
            return cs_err_set(err, 0, "store: write \"%s/%s\": %s", r->dir, IDENTITY_NAME, strerror(errno));
        snprintf(r->identity, sizeof r->identity, "%s", identity);
        r->identity_known = true;
    }
    return 0;
}

uint64_t cs_ring_run_nonce(const cs_ring *r) { return r->run_nonce; }
