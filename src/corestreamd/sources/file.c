/* SPDX-License-Identifier: Apache-2.0 */
#include "corestreamd/sources/file.h"

#include <errno.h>
#include <fcntl.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "corestream/wire.h"
#include "store/ledgerdir.h"

/* ---- lexical paths, with Go's path/filepath rules ---- */

/* filepath.Clean: collapses repeated slashes, drops "." elements and trailing slashes, and
 * resolves ".." lexically (never above the root). Returns a new string, NULL on allocation
 * failure. */
static char *path_clean(const char *in)
{
    size_t n = strlen(in);
    char *out = malloc(n + 2); /* the result is never longer than the input, or "." */
    if (!out)
        return NULL;
    bool rooted = n > 0 && in[0] == '/';
    size_t r = 0, w = 0, dotdot = 0; /* dotdot: where ".." can no longer backtrack */
    if (rooted) {
        out[w++] = '/';
        r = dotdot = 1;
    }
    while (r < n) {
        if (in[r] == '/') {
            r++;
        } else if (in[r] == '.' && (r + 1 == n || in[r + 1] == '/')) {
            r++;
        } else if (in[r] == '.' && in[r + 1] == '.' && (r + 2 == n || in[r + 2] == '/')) {
            r += 2;
            if (w > dotdot) {
                w--;
                while (w > dotdot && out[w] != '/')
                    w--;
            } else if (!rooted) {
                if (w > 0)
                    out[w++] = '/';
                out[w++] = '.';
                out[w++] = '.';
                dotdot = w;
            }
        } else {
            if ((rooted && w != 1) || (!rooted && w != 0))
                out[w++] = '/';
            while (r < n && in[r] != '/')
                out[w++] = in[r++];
        }
    }
    if (w == 0)
        out[w++] = '.';
    out[w] = '\0';
    return out;
}

/* filepath.Join of two elements: an empty element is skipped, the result is cleaned. */
static char *path_join(const char *a, const char *b)
{
    if (a[0] == '\0')
        return path_clean(b);
    size_t la = strlen(a), lb = strlen(b);
    char *tmp = malloc(la + lb + 2);
    if (!tmp)
        return NULL;
    memcpy(tmp, a, la);
    tmp[la] = '/';
    memcpy(tmp + la + 1, b, lb + 1);
    char *out = path_clean(tmp);
    free(tmp);
    return out;
}

/* filepath.Abs: a relative path is joined to the working directory. NULL on failure. */
static char *path_abs(const char *p)
{
    if (p[0] == '/')
        return path_clean(p);
    char *cwd = getcwd(NULL, 0);
    if (!cwd)
        return NULL;
    char *out = path_join(cwd, p);
    free(cwd);
    return out;
}

static bool same_inode(const char *a, const char *b)
{
    struct stat sa, sb;
    return stat(a, &sa) == 0 && stat(b, &sb) == 0 && sa.st_dev == sb.st_dev &&
           sa.st_ino == sb.st_ino;
}

int cs_file_dir_validate(const char *file_dir, const char *data_dir, cs_err *err)
{
    char *ring = path_join(data_dir, "ledgers");
    if (!ring)
        return cs_err_set(err, 0, "--file-dir: out of memory");
    char *fa = path_abs(file_dir), *ra = path_abs(ring);
    /* Path strings miss symlinks and bind mounts, so identities are compared as well when both
     * directories exist. */
    bool same = (fa && ra && strcmp(fa, ra) == 0) || same_inode(file_dir, ring);
    free(fa);
    free(ra);
    int rc = 0;
    if (same)
        rc = cs_err_set(err, 0,
                        "--file-dir \"%s\" is this server's own retention ring (%s), which prunes "
                        "and resets its directory; replaying it would destroy the dump — copy "
                        "it elsewhere or use a different --data-dir",
                        file_dir, ring);
    free(ring);
    return rc;
}

/* ---- the stream ---- */

typedef struct file_stream {
    cs_ledger_stream base;
    char **paths; /* one per record, in dump order */
    size_t n;
    size_t next; /* the record the next pull replays */
    uint8_t *buf; /* reused across records, grown to the largest one read so far */
    size_t cap;
    cs_cancel *cancel;
} file_stream;

static int grow(file_stream *fs, size_t size)
{
    if (size <= fs->cap && fs->buf)
        return 0;
    /* At least one byte, so an empty record still yields a valid pointer. */
    size_t want = size ? size : 1;
    uint8_t *nb = realloc(fs->buf, want);
    if (!nb)
        return -1;
    fs->buf = nb;
    fs->cap = want;
    return 0;
}

/* Reads exactly the size fstat reported: a file that grows meanwhile cannot overrun the buffer,
 * and one that shrinks is a truncated record. */
static int read_full(int fd, uint8_t *buf, size_t size, const char **why)
{
    size_t got = 0;
    while (got < size) {
        ssize_t r = read(fd, buf + got, size - got);
        if (r < 0 && errno == EINTR)
            continue;
        if (r < 0) {
            *why = strerror(errno);
            return -1;
        }
        if (r == 0) {
            *why = "unexpected EOF";
            return -1;
        }
        got += (size_t)r;
    }
    return 0;
}

static int read_record(file_stream *fs, const char *path, uint32_t seq, size_t *len, cs_err *err)
{
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return cs_err_set(err, 0, "file source: ledger %u: %s", seq, strerror(errno));
    int rc = -1;
    const char *why = NULL;
    struct stat st;
    if (fstat(fd, &st) < 0) {
        why = strerror(errno);
    } else if (st.st_size > CS_MAX_PAYLOAD_SIZE) {
        cs_err_set(err, 0, "ledger file %s is %lld bytes, over the %d-byte protocol payload cap",
                   path, (long long)st.st_size, CS_MAX_PAYLOAD_SIZE);
    } else if (grow(fs, (size_t)st.st_size) < 0) {
        why = strerror(ENOMEM);
    } else if (read_full(fd, fs->buf, (size_t)st.st_size, &why) == 0) {
        *len = (size_t)st.st_size;
        rc = 0;
    }
    if (why)
        cs_err_set(err, 0, "file source: ledger %u: %s", seq, why);
    close(fd);
    return rc;
}

static int file_pull(cs_ledger_stream *ls, uint32_t seq, const uint8_t **data, size_t *len,
                     cs_err *err)
{
    file_stream *fs = (file_stream *)ls;
    if (cs_cancel_is_set(fs->cancel))
        return cs_err_set(err, CS_ERR_CANCELLED, "context canceled");
    /* Re-read per emission rather than cached: a dump can be far larger than memory. */
    if (read_record(fs, fs->paths[fs->next], seq, len, err) < 0)
        return -1;
    *data = fs->buf;
    fs->next = (fs->next + 1) % fs->n; /* the dump cycles; the paced adapter bounds the run */
    return 1;
}

static void free_paths(char **paths, size_t n)
{
    for (size_t i = 0; i < n; i++)
        free(paths[i]);
    free(paths);
}

static void file_destroy(cs_ledger_stream *ls)
{
    file_stream *fs = (file_stream *)ls;
    free_paths(fs->paths, fs->n);
    free(fs->buf);
    free(fs);
}

static const cs_ledger_stream_ops file_ops = {
    .pull = file_pull,
    .destroy = file_destroy,
};

/* Builds the record paths from the names exactly as the scan found them. The prototype rebuilt
 * each path as ledger-<seq>.xdr, so a dump of zero-padded names (ledger-007.xdr) scanned fine and
 * then failed at replay; using the found name replays it. */
static char **record_paths(const char *dir, const cs_ledger_entry *entries, size_t n)
{
    char **paths = calloc(n, sizeof *paths);
    if (!paths)
        return NULL;
    for (size_t i = 0; i < n; i++) {
        paths[i] = path_join(dir, entries[i].name);
        if (!paths[i]) {
            free_paths(paths, i);
            return NULL;
        }
    }
    return paths;
}

int cs_file_stream_new(cs_ledger_stream **out, const char *dir, cs_cancel *cancel, uint64_t skip, size_t *records,
                       cs_err *err)
{
    *out = NULL;
    cs_ledger_entry *entries = NULL;
    size_t n = 0;
    if (cs_ledger_dir_scan(dir, "file source", &entries, &n, err) < 0)
        return -1;
    if (n == 0)
        return cs_err_set(err, CS_LEDGERDIR_ERR_EMPTY,
                          "file source: \"%s\" holds no ledger-<seq>.xdr files", dir);
    file_stream *fs = calloc(1, sizeof *fs);
    char **paths = fs ? record_paths(dir, entries, n) : NULL;
    free(entries);
    if (!paths) {
        free(fs);
        return cs_err_set(err, 0, "file source: out of memory");
    }
    fs->base.ops = &file_ops;
    fs->paths = paths;
    fs->n = n;
    fs->next = (size_t)(skip % n);
    fs->cancel = cancel;
    *out = &fs->base;
    *records = n;
    return 0;
}
