/* SPDX-License-Identifier: Apache-2.0 */
#include "support/files.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

#include <zstd.h>

#include "common/fdio.h"

uint8_t *cs_slurp(const char *path, size_t *len)
{
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return NULL;
    struct stat st;
    uint8_t *buf = fstat(fd, &st) == 0 ? malloc((size_t)st.st_size + 1) : NULL;
    size_t got = 0;
    while (buf && got < (size_t)st.st_size) {
        ssize_t n = read(fd, buf + got, (size_t)st.st_size - got);
        if (n <= 0) {
            free(buf);
            buf = NULL;
            errno = n == 0 ? EIO : errno;
            break;
        }
        got += (size_t)n;
    }
    int e = errno;
    close(fd);
    errno = e;
    if (buf) {
        buf[got] = '\0';
        *len = got;
    }
    return buf;
}

int cs_write_file(const char *path, const void *bytes, size_t len)
{
    int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    if (fd < 0)
        return -1;
    int rc = cs_write_all(fd, bytes, len);
    int e = errno;
    if (close(fd) != 0 && rc == 0)
        return -1;
    errno = e;
    return rc;
}

uint8_t *cs_unzstd_frames(const uint8_t *z, size_t zlen, size_t *len, int *frames)
{
    ZSTD_DCtx *d = ZSTD_createDCtx();
    size_t cap = 1 << 20, pos = 0, left = 0;
    uint8_t *out = malloc(cap);
    ZSTD_inBuffer in = {z, zlen, 0};
    const char *bad = !d || !out ? "out of memory" : zlen == 0 ? "no frame" : NULL;
    int n = 0;
    while (!bad && in.pos < in.size) {
        if (cap - pos < ZSTD_DStreamOutSize()) {
            uint8_t *grown = realloc(out, cap * 2);
            if (!grown) {
                bad = "out of memory";
                break;
            }
            out = grown;
            cap *= 2;
        }
        ZSTD_outBuffer ob = {out, cap, pos};
        left = ZSTD_decompressStream(d, &ob, &in);
        if (ZSTD_isError(left))
            bad = ZSTD_getErrorName(left);
        else if (left == 0)
            n++;
        pos = ob.pos;
    }
    if (!bad && left != 0)
        bad = "a frame cut short";
    ZSTD_freeDCtx(d);
    if (bad) {
        fprintf(stderr, "unzstd: not whole zstd frames: %s\n", bad);
        free(out);
        return NULL;
    }
    if (frames)
        *frames = n;
    *len = pos;
    return out;
}

uint8_t *cs_unzstd(const uint8_t *z, size_t zlen, size_t *len)
{
    return cs_unzstd_frames(z, zlen, len, NULL);
}

uint8_t *cs_galexie_batch_53312000(const char *realmeta, size_t *len)
{
    char path[4096];
    snprintf(path, sizeof path, "%s/pubnet-batch-53312000.xdr.zst", realmeta);
    size_t zlen;
    uint8_t *z = cs_slurp(path, &zlen);
    if (!z) {
        fprintf(stderr, "SKIP: %s is absent: the Galexie proof needs it\n", path);
        return NULL;
    }
    uint8_t *batch = cs_unzstd(z, zlen, len);
    free(z);
    return batch;
}
