/* SPDX-License-Identifier: Apache-2.0 */
/* A file published into the lake without ever replacing one, and an object (or its signature
 * object) put at its key, compared with what holds the key already: see lakedir.h. */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <zstd.h>

#include "common/fdio.h"
#include "corestreamd/lake/lakedir_internal.h"
#include "corestreamd/lake/lakeobject.h" /* CS_LAKE_SIG_SUFFIX */

/* An object in place larger than this is not compared (read whole): it is not one of ours. */
#define OBJECT_MAX ((size_t)1 << 31)
/* Decompressed bytes compared at a time. */
#define PIECE (128u * 1024u)

/* The temporary file, written and flushed. */
static int write_tmp(int dirfd, const char *tmp, const void *bytes, size_t len, const char **what)
{
    *what = "create";
    int fd = openat(dirfd, tmp, O_WRONLY | O_CREAT | O_TRUNC | O_NOFOLLOW | O_CLOEXEC, 0644);
    if (fd < 0)
        return -1;
    int rc = 0;
    if (cs_write_all(fd, bytes, len) != 0) {
        *what = "write";
        rc = -1;
    } else if (fsync(fd) != 0) {
        *what = "flush";
        rc = -1;
    }
    int e = errno;
    if (close(fd) != 0 && rc == 0) {
        *what = "write";
        e = errno;
        rc = -1;
    }
    errno = e;
    return rc;
}

/* tmp linked as name, which must not exist: renameat2's RENAME_NOREPLACE, or where the file
 * system has none, link and unlink (no window in which name holds anything but the whole file). */
static int link_no_replace(int dirfd, const char *tmp, const char *name)
{
    if (renameat2(dirfd, tmp, dirfd, name, RENAME_NOREPLACE) == 0)
        return 0;
    if (errno != EINVAL && errno != ENOSYS)
        return -1;
    if (linkat(dirfd, tmp, dirfd, name, 0) != 0)
        return -1;
    (void)unlinkat(dirfd, tmp, 0);
    return 0;
}

int lake_publish(int dirfd, const char *name, const void *bytes, size_t len, const char **what)
{
    char tmp[CS_LAKE_KEY_MAX + 16];
    lake_tmp_name(tmp, sizeof tmp, name);
    int rc = write_tmp(dirfd, tmp, bytes, len, what);
    if (rc == 0 && link_no_replace(dirfd, tmp, name) != 0) {
        *what = "publish";
        rc = errno == EEXIST ? 1 : -1;
    }
    if (rc != 0) {
        int e = errno;
        (void)unlinkat(dirfd, tmp, 0);
        errno = e;
        return rc;
    }
    if (fsync(dirfd) != 0) {
        *what = "flush";
        return -1;
    }
    return 0;
}

/* ---- content compared -------------------------------------------------------------------- */

/* One object being decompressed a piece at a time. */
typedef struct unpack {
    ZSTD_DCtx *d;
    ZSTD_inBuffer in;
    uint8_t *buf;
    size_t have, used;
    bool pending; /* the frame read so far is not complete */
    bool done;
    const char *bad; /* why the bytes are not zstd, or NULL */
} unpack;

/* The next decompressed bytes into buf (have), unless done or bad. */
static void refill(unpack *u)
{
    u->have = u->used = 0;
    while (u->have == 0 && !u->done && !u->bad) {
        if (u->in.pos == u->in.size && !u->pending) {
            u->done = true;
            return;
        }
        ZSTD_outBuffer out = {u->buf, PIECE, 0};
        size_t left = ZSTD_decompressStream(u->d, &out, &u->in);
        if (ZSTD_isError(left))
            u->bad = ZSTD_getErrorName(left);
        else if (left != 0 && out.pos == 0 && u->in.pos == u->in.size)
            u->bad = "a frame cut short";
        u->pending = !ZSTD_isError(left) && left != 0;
        u->have = out.pos;
    }
}

static int unpack_init(unpack *u, const uint8_t *z, size_t len)
{
    *u = (unpack){.d = ZSTD_createDCtx(), .in = {z, len, 0}, .buf = malloc(PIECE)};
    return u->d && u->buf ? 0 : -1;
}

static void unpack_free(unpack *u)
{
    ZSTD_freeDCtx(u->d);
    free(u->buf);
}

/* Both streams compared piece by piece: 1 the same, 0 not. */
static int compare_streams(unpack *a, unpack *b, char *why, size_t why_len)
{
    for (;;) {
        if (a->used == a->have)
            refill(a);
        if (b->used == b->have)
            refill(b);
        if (b->bad) {
            snprintf(why, why_len, "it is not a zstd object: %s", b->bad);
            return 0;
        }
        if (a->bad || a->done || b->done)
            return a->done && b->done && !a->bad ? 1 : 0;
        size_t n = a->have - a->used < b->have - b->used ? a->have - a->used : b->have - b->used;
        if (memcmp(a->buf + a->used, b->buf + b->used, n) != 0)
            return 0;
        a->used += n;
        b->used += n;
    }
}

int lake_same_content(const uint8_t *a, size_t alen, const uint8_t *b, size_t blen, char *why, size_t why_len)
{
    unpack ua, ub;
    int ra = unpack_init(&ua, a, alen), rb = unpack_init(&ub, b, blen);
    int rc = ra == 0 && rb == 0 ? compare_streams(&ua, &ub, why, why_len) : -1;
    unpack_free(&ua);
    unpack_free(&ub);
    return rc;
}

/* ---- an object, or its signatures, at its key --------------------------------------------- */

/* What is written at a batch's key: its object, or beside it its signature object. */
typedef struct lake_file {
    const char *suffix; /* appended to the key: "" or CS_LAKE_SIG_SUFFIX */
    /* What is in place compared with what the ring made (cs_lake_compare_object, _sig): 0, or -1
     * when out of memory. */
    int (*compare)(cs_lake_batch b, const uint8_t *mine, size_t len, const uint8_t *there, size_t there_len,
                   cs_lake_put_outcome *outcome, char *why, size_t why_len);
} lake_file;

static int put_failed(const cs_lake_dir *d, cs_lake_batch b, const lake_file *lf, const char *what, cs_err *err)
{
    char path[PATH_MAX + CS_LAKE_KEY_MAX];
    cs_lake_dir_object_path(d, b, path, sizeof path);
    return cs_err_set(err, CS_LAKE_DIR_ERR_IO, "lake: %s \"%s%s\": %s", what, path, lf->suffix, strerror(errno));
}

/* The partition directory of key (cut at its slash), made when missing (and flushed into
 * ledgers/), kept open for the next object; ledgers/ itself without partitions. */
static int partition_fd(cs_lake_dir *d, char *key, const char **name, const char **what)
{
    char *slash = strchr(key, '/');
    *name = slash ? slash + 1 : key;
    if (!slash)
        return d->ledgers_fd;
    *slash = '\0';
    if (d->part_fd >= 0 && strcmp(d->part, key) == 0)
        return d->part_fd;
    if (d->part_fd >= 0)
        close(d->part_fd);
    d->part_fd = -1;
    d->part[0] = '\0';
    *what = "create";
    if (mkdirat(d->ledgers_fd, key, 0755) == 0) {
        if (fsync(d->ledgers_fd) != 0) {
            *what = "flush";
            return -1;
        }
    } else if (errno != EEXIST) {
        return -1;
    }
    *what = "open";
    d->part_fd = openat(d->ledgers_fd, key, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    if (d->part_fd >= 0)
        snprintf(d->part, sizeof d->part, "%s", key);
    return d->part_fd;
}

/* name in dirfd read whole into *out (malloc'd): 0; 1 when it is not a regular file (or larger
 * than any object of ours); -1 with errno. */
static int read_existing(int dirfd, const char *name, uint8_t **out, size_t *len)
{
    int fd = openat(dirfd, name, O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
    if (fd < 0)
        return errno == ELOOP ? 1 : -1;
    struct stat st;
    int rc = fstat(fd, &st) != 0 ? -1 : !S_ISREG(st.st_mode) || (uint64_t)st.st_size > OBJECT_MAX ? 1 : 0;
    uint8_t *buf = rc == 0 ? malloc(st.st_size ? (size_t)st.st_size : 1) : NULL;
    if (rc == 0 && !buf) {
        errno = ENOMEM;
        rc = -1;
    }
    size_t got = 0; /* fewer than it said: compared as it is */
    if (rc == 0 && cs_pread_upto(fd, buf, (size_t)st.st_size, 0, &got) != 0)
        rc = -1;
    int e = errno;
    close(fd);
    if (rc != 0) {
        free(buf);
        errno = e;
        return rc;
    }
    *out = buf;
    *len = got;
    return 0;
}

int cs_lake_compare_object(cs_lake_batch b, const uint8_t *obj, size_t len, const uint8_t *there, size_t there_len,
                           cs_lake_put_outcome *outcome, char *why, size_t why_len)
{
    if (why_len > 0)
        why[0] = '\0';
    int same = there_len == len && memcmp(there, obj, len) == 0 ? 1
                                                                : lake_same_content(obj, len, there, there_len, why, why_len);
    if (same < 0)
        return -1;
    if (!same && !*why)
        snprintf(why, why_len, "its content differs from the ring's batch %" PRIu32 "-%" PRIu32, b.start, b.end);
    *outcome = same ? CS_LAKE_PUT_SAME : CS_LAKE_PUT_OTHER;
    return 0;
}

int cs_lake_compare_sig(cs_lake_batch b, const uint8_t *sig, size_t len, const uint8_t *there, size_t there_len,
                        cs_lake_put_outcome *outcome, char *why, size_t why_len)
{
    bool same = there_len == len && memcmp(there, sig, len) == 0;
    if (why_len > 0)
        why[0] = '\0';
    if (!same)
        snprintf(why, why_len, "its bytes differ from the ring's signatures of batch %" PRIu32 "-%" PRIu32, b.start,
                 b.end);
    *outcome = same ? CS_LAKE_PUT_SAME : CS_LAKE_PUT_OTHER;
    return 0;
}

/* The key was taken: what is there is compared with mine and kept whatever it holds. */
static int compare_existing(cs_lake_dir *d, cs_lake_batch b, const lake_file *lf, int dirfd, const char *name,
                            const uint8_t *mine, size_t len, cs_lake_put_outcome *outcome, char *why, size_t why_len,
                            cs_err *err)
{
    uint8_t *there = NULL;
    size_t there_len = 0;
    int rc = read_existing(dirfd, name, &there, &there_len);
    if (rc < 0)
        return put_failed(d, b, lf, "read", err);
    if (rc == 1) {
        snprintf(why, why_len, "it is not a regular file");
        *outcome = CS_LAKE_PUT_OTHER;
        return 0;
    }
    rc = lf->compare(b, mine, len, there, there_len, outcome, why, why_len);
    free(there);
    if (rc != 0) {
        errno = ENOMEM;
        return put_failed(d, b, lf, "compare", err);
    }
    return 0;
}

/* bytes published at batch b's key with lf's suffix, or compared with what is there. */
static int put_file(cs_lake_dir *d, cs_lake_batch b, const lake_file *lf, const uint8_t *bytes, size_t len,
                    cs_lake_put_outcome *outcome, char *why, size_t why_len, cs_err *err)
{
    char key[CS_LAKE_KEY_MAX], file[CS_LAKE_KEY_MAX + sizeof CS_LAKE_SIG_SUFFIX];
    cs_lake_key(&d->layout, b, key);
    const char *name, *what = "write";
    int dirfd = partition_fd(d, key, &name, &what);
    if (dirfd < 0)
        return put_failed(d, b, lf, what, err);
    snprintf(file, sizeof file, "%s%s", name, lf->suffix);
    if (why_len > 0)
        why[0] = '\0';
    int rc = lake_publish(dirfd, file, bytes, len, &what);
    if (rc < 0)
        return put_failed(d, b, lf, what, err);
    if (rc == 0) {
        *outcome = CS_LAKE_PUT_WRITTEN;
        return 0;
    }
    return compare_existing(d, b, lf, dirfd, file, bytes, len, outcome, why, why_len, err);
}

static const lake_file k_object = {"", cs_lake_compare_object};
static const lake_file k_sig = {CS_LAKE_SIG_SUFFIX, cs_lake_compare_sig};

int cs_lake_dir_put(cs_lake_dir *d, cs_lake_batch b, const uint8_t *obj, size_t len, cs_lake_put_outcome *outcome,
                    char *why, size_t why_len, cs_err *err)
{
    return put_file(d, b, &k_object, obj, len, outcome, why, why_len, err);
}

int cs_lake_dir_put_sig(cs_lake_dir *d, cs_lake_batch b, const uint8_t *sig, size_t len, cs_lake_put_outcome *outcome,
                        char *why, size_t why_len, cs_err *err)
{
    return put_file(d, b, &k_sig, sig, len, outcome, why, why_len, err);
}

int cs_lake_dir_has_sig(cs_lake_dir *d, cs_lake_batch b, cs_err *err)
{
    char key[CS_LAKE_KEY_MAX + sizeof CS_LAKE_SIG_SUFFIX];
    cs_lake_key(&d->layout, b, key);
    strcat(key, CS_LAKE_SIG_SUFFIX);
    struct stat st;
    if (d->ledgers_fd >= 0 && fstatat(d->ledgers_fd, key, &st, AT_SYMLINK_NOFOLLOW) == 0)
        return 1;
    if (d->ledgers_fd < 0 || errno == ENOENT)
        return 0;
    return put_failed(d, b, &k_sig, "look for", err);
}
