/* SPDX-License-Identifier: Apache-2.0 */
/* benchrunner --verify-dir. See dumpverify.h. */
#include "benchrunner/dumpverify.h"

#include <errno.h>
#include <fcntl.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "store/ledgerdir.h"

struct br_dump {
    char **paths; /* one per record, in dump order */
    size_t n;
    uint8_t *buf; /* the last record read */
    size_t len;
    size_t cap;
    bool filled;
    size_t record; /* which one buf holds */
};

static void free_paths(char **paths, size_t n)
{
    for (size_t i = 0; i < n; i++)
        free(paths[i]);
    free(paths);
}

int br_dump_open(br_dump **out, const char *dir, cs_err *err)
{
    *out = NULL;
    cs_ledger_entry *entries = NULL;
    size_t n = 0;
    if (cs_ledger_dir_scan(dir, "--verify-dir", &entries, &n, err) < 0)
        return -1;
    if (n == 0)
        return cs_err_set(err, 0, "--verify-dir: \"%s\" holds no ledger-<seq>.xdr files", dir);
    size_t dlen = strlen(dir);
    while (dlen > 1 && dir[dlen - 1] == '/') /* "d/" names its records d/ledger-1.xdr */
        dlen--;
    br_dump *d = calloc(1, sizeof *d);
    char **paths = d ? calloc(n, sizeof *paths) : NULL;
    for (size_t i = 0; paths && i < n; i++) {
        size_t len = dlen + 1 + strlen(entries[i].name) + 1;
        paths[i] = malloc(len);
        if (!paths[i]) {
            free_paths(paths, i);
            paths = NULL;
            break;
        }
        snprintf(paths[i], len, "%.*s%s%s", (int)dlen, dir, dir[dlen - 1] == '/' ? "" : "/", entries[i].name);
    }
    free(entries);
    if (!paths) {
        free(d);
        return cs_err_set(err, 0, "--verify-dir: out of memory");
    }
    d->paths = paths;
    d->n = n;
    *out = d;
    return 0;
}

/* Reads exactly size bytes of fd into d->buf (a file that shrank meanwhile is an error). */
static int read_record(br_dump *d, int fd, size_t size, const char **why)
{
    if (size > d->cap || !d->buf) {
        uint8_t *nb = realloc(d->buf, size ? size : 1);
        if (!nb) {
            *why = strerror(ENOMEM);
            return -1;
        }
        d->buf = nb;
        d->cap = size ? size : 1;
    }
    d->filled = false;
    for (size_t got = 0; got < size;) {
        ssize_t r = read(fd, d->buf + got, size - got);
        if (r < 0 && errno == EINTR)
            continue;
        if (r <= 0) {
            *why = r < 0 ? strerror(errno) : "unexpected EOF";
            return -1;
        }
        got += (size_t)r;
    }
    d->len = size;
    return 0;
}

int br_dump_check(br_dump *d, uint32_t seq, const uint8_t *p, size_t len, cs_err *err)
{
    size_t record = (size_t)(((uint64_t)seq + d->n - 1) % d->n); /* (seq - 1) mod n, seq 0 too */
    const char *path = d->paths[record];
    if (!d->filled || d->record != record) {
        int fd = open(path, O_RDONLY | O_CLOEXEC);
        struct stat st;
        const char *why = NULL;
        if (fd < 0 || fstat(fd, &st) != 0) {
            why = strerror(errno);
        } else if ((uint64_t)st.st_size != (uint64_t)len) {
            close(fd); /* the length first: no need to read a file that cannot match */
            return cs_err_set(err, 0, "ledger %u is %zu bytes, %s holds %lld (--verify-dir)", seq, len, path,
                              (long long)st.st_size);
        } else if (read_record(d, fd, (size_t)st.st_size, &why) == 0) {
            d->filled = true;
            d->record = record;
        }
        if (fd >= 0)
            close(fd);
        if (why)
            return cs_err_set(err, 0, "--verify-dir: ledger %u: %s: %s", seq, path, why);
    }
    if (len != d->len)
        return cs_err_set(err, 0, "ledger %u is %zu bytes, %s holds %zu (--verify-dir)", seq, len, path, d->len);
    if (len > 0 && memcmp(p, d->buf, len) != 0) {
        size_t at = 0;
        while (p[at] == d->buf[at])
            at++;
        return cs_err_set(err, 0, "ledger %u payload does not match %s (first difference at byte %zu)", seq, path,
                          at);
    }
    return 0;
}

void br_dump_free(br_dump *d)
{
    if (!d)
        return;
    free_paths(d->paths, d->n);
    free(d->buf);
    free(d);
}
