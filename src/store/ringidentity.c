/* Run identity: which run wrote the ring (ring-identity), whether this one continues it, and
 * the claim at start. */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <xxhash.h>

#include "common/log.h"
#include "store/frames.h"
#include "store/ledgerdir.h"
#include "store/ring_internal.h"

#define IDENTITY_NAME "ring-identity"
#define IDENTITY_MAX 4096

/* The identity recorded in `ring-identity` into old (IDENTITY_MAX + 1 bytes); false when there is
 * none, or it is not one whole line. */
static bool read_identity(const cs_ring *r, char *old)
{
    old[0] = '\0';
    int fd = openat(r->dfd, IDENTITY_NAME, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
    if (fd < 0)
        return false;
    ssize_t n = pread(fd, old, IDENTITY_MAX, 0);
    close(fd);
    if (n <= 0 || old[n - 1] != '\n') {
        old[0] = '\0';
        return false;
    }
    old[n - 1] = '\0';
    return true;
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
    char old[IDENTITY_MAX + 1];
    bool known = read_identity(r, old);
    pthread_mutex_lock(&r->wmu);
    if (rng_settle_locked(r, err) != 0) {
        pthread_mutex_unlock(&r->wmu);
        return -1;
    }
    char reason[160] = "";
    if (r->filled && known && strcmp(old, identity) != 0)
        snprintf(reason, sizeof reason, "written by another run");
    else if (r->filled && first_seq != 0 && (r->latest == UINT32_MAX || first_seq != r->latest + 1))
        snprintf(reason, sizeof reason, "this run starts at ledger %" PRIu32 ", not at %" PRIu64, first_seq,
                 (uint64_t)r->latest + 1);
    uint32_t oldest = r->oldest, latest = r->latest;
    if (*reason) {
        rng_set_bounds(r, false, 0, 0);
        uint64_t ignored = 0;
        rng_unlink_range(r->dfd, oldest, latest, &ignored);
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
    if (strlen(identity) > IDENTITY_MAX - 1 || strchr(identity, '\n'))
        return cs_err_set(err, 0, "store: run identity is not one line of at most %d bytes", IDENTITY_MAX - 1);
    snprintf(text, sizeof text, "%s\n", identity);
    if (!known || strcmp(old, identity) != 0) {
        if (rng_write_small_file(r->dfd, IDENTITY_NAME, text) != 0)
            return cs_err_set(err, 0, "store: write \"%s/%s\": %s", r->dir, IDENTITY_NAME, strerror(errno));
    }
    return 0;
}
