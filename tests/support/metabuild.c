/* SPDX-License-Identifier: Apache-2.0 */
/* Test support: LedgerCloseMeta prefixes and record-marked frames. See metabuild.h. */
#include "support/metabuild.h"

#include <stdio.h>
#include <sys/wait.h>
#include <stdlib.h>
#include <string.h>

/* Makes room for n more bytes and returns where they go. */
static uint8_t *reserve(cs_mb_buf *b, size_t n)
{
    if (n > SIZE_MAX - b->n) {
        fprintf(stderr, "metabuild: buffer size overflow\n");
        abort();
    }
    if (b->n + n > b->cap) {
        size_t cap = b->cap ? b->cap : 4096;
        while (cap < b->n + n)
            cap = cap > SIZE_MAX / 2 ? b->n + n : cap * 2;
        uint8_t *p = realloc(b->p, cap);
        if (!p) {
            fprintf(stderr, "metabuild: out of memory growing to %zu bytes\n", cap);
            abort();
        }
        b->p = p;
        b->cap = cap;
    }
    uint8_t *at = b->p + b->n;
    b->n += n;
    return at;
}

void cs_mb_put(cs_mb_buf *b, const void *data, size_t n)
{
    if (n)
        memcpy(reserve(b, n), data, n);
}

static void be32(uint8_t *w, uint32_t v)
{
    w[0] = (uint8_t)(v >> 24);
    w[1] = (uint8_t)(v >> 16);
    w[2] = (uint8_t)(v >> 8);
    w[3] = (uint8_t)v;
}

void cs_mb_put_u32(cs_mb_buf *b, uint32_t v)
{
    be32(reserve(b, 4), v);
}

void cs_mb_put_u64(cs_mb_buf *b, uint64_t v)
{
    cs_mb_put_u32(b, (uint32_t)(v >> 32));
    cs_mb_put_u32(b, (uint32_t)v);
}

void cs_mb_put_fill(cs_mb_buf *b, uint8_t byte, size_t n)
{
    if (n)
        memset(reserve(b, n), byte, n);
}

void cs_mb_put_opaque(cs_mb_buf *b, uint32_t len, uint8_t pad_byte)
{
    cs_mb_put_u32(b, len);
    uint8_t *d = reserve(b, len);
    for (uint32_t i = 0; i < len; i++)
        d[i] = (uint8_t)(0xA0 + len + i);
    cs_mb_put_fill(b, pad_byte, (4 - (len & 3)) & 3);
}

void cs_mb_free(cs_mb_buf *b)
{
    free(b->p);
    *b = (cs_mb_buf){0};
}

cs_mb_meta cs_mb_go_meta(uint32_t version, uint32_t seq, bool signed_value, uint32_t upgrades, bool ext_v1,
                         size_t tail)
{
    cs_mb_meta m = {
        .version = version,
        .ext = ext_v1 ? 1 : 0,
        .nup = upgrades,
        .svt = signed_value ? 1 : 0,
        .siglen = signed_value ? 7 : 0,
        .seq = seq,
        .tail = tail,
    };
    for (uint32_t i = 0; i < upgrades && i < 8; i++)
        m.uplen[i] = 5 + i;
    return m;
}

size_t cs_mb_put_meta(cs_mb_buf *b, const cs_mb_meta *m)
{
    cs_mb_put_u32(b, m->version);
    if (m->version != 0) {
        cs_mb_put_u32(b, m->ext);
        if (m->ext == 1) {
            cs_mb_put_u32(b, m->ext_point);
            cs_mb_put_u64(b, 115); /* sorobanFeeWrite1KB */
        }
    }
    cs_mb_put_fill(b, 0x01, 32); /* LedgerHeaderHistoryEntry.hash */
    cs_mb_put_u32(b, 23);        /* ledgerVersion */
    cs_mb_put_fill(b, 0x04, 32); /* previousLedgerHash */
    cs_mb_put_fill(b, 0x05, 32); /* txSetHash */
    cs_mb_put_u64(b, 1234567890); /* closeTime */
    cs_mb_put_u32(b, m->nup);
    for (uint32_t i = 0; i < m->nup && i < 8; i++)
        cs_mb_put_opaque(b, m->uplen[i], m->pad_byte);
    cs_mb_put_u32(b, m->svt);
    if (m->svt == 1) {
        cs_mb_put_u32(b, m->key_type);
        cs_mb_put_fill(b, 0x09, 32); /* ed25519 key */
        cs_mb_put_opaque(b, m->siglen, m->pad_byte);
    }
    cs_mb_put_fill(b, 0x06, 32); /* txSetResultHash */
    cs_mb_put_fill(b, 0x07, 32); /* bucketListHash */
    size_t at = b->n;
    cs_mb_put_u32(b, m->seq);
    uint8_t *t = reserve(b, m->tail);
    for (size_t i = 0; i < m->tail; i++)
        t[i] = (uint8_t)(i * 131 + m->seq);
    return at;
}

void cs_mb_put_marker(cs_mb_buf *b, uint32_t len)
{
    cs_mb_put_u32(b, CS_MB_LAST_FRAGMENT | len);
}

void cs_mb_put_record(cs_mb_buf *b, const void *body, size_t n)
{
    cs_mb_put_marker(b, (uint32_t)n);
    cs_mb_put(b, body, n);
}

pid_t cs_mb_read_pid(const char *path)
{
    FILE *fp = fopen(path, "r");
    if (!fp)
        return -1;
    int pid = -1;
    if (fscanf(fp, "%d", &pid) != 1)
        pid = -1;
    fclose(fp);
    return pid;
}

bool cs_mb_pid_runs(pid_t pid, const char *name)
{
    char path[64], comm[64] = {0};
    snprintf(path, sizeof path, "/proc/%d/comm", (int)pid);
    FILE *fp = fopen(path, "r");
    if (!fp)
        return false;
    bool ok = fgets(comm, sizeof comm, fp) != NULL;
    fclose(fp);
    return ok && strncmp(comm, name, strlen(name)) == 0;
}

size_t cs_mb_put_frame(cs_mb_buf *b, const cs_mb_meta *m)
{
    size_t marker = b->n;
    cs_mb_put_u32(b, 0); /* patched below, once the body's length is known */
    size_t body = b->n;
    cs_mb_put_meta(b, m);
    be32(b->p + marker, CS_MB_LAST_FRAGMENT | (uint32_t)(b->n - body));
    return body;
}

int cs_mb_feed_fifo(const char *dir, const char *fifo, uint32_t from, uint32_t to, size_t tail, char *why,
                    size_t why_len)
{
    cs_mb_buf b = {0};
    for (uint32_t s = from; s <= to; s++) {
        cs_mb_meta m = cs_mb_go_meta(1, s, false, 0, false, tail);
        cs_mb_put_frame(&b, &m);
    }
    char path[4200], cmd[9000];
    snprintf(path, sizeof path, "%s/frames-%u-%u.bin", dir, from, to);
    FILE *fp = fopen(path, "wb");
    bool ok = fp && fwrite(b.p, 1, b.n, fp) == b.n;
    ok = (fp && fclose(fp) == 0) && ok;
    cs_mb_free(&b);
    if (!ok) {
        snprintf(why, why_len, "%s cannot be written", path);
        return -1;
    }
    snprintf(cmd, sizeof cmd, "cat '%s' > '%s'", path, fifo);
    int st = system(cmd);
    if (st == -1 || !WIFEXITED(st) || WEXITSTATUS(st) != 0) {
        snprintf(why, why_len, "writer \"%s\": status %d", cmd, st);
        return -1;
    }
    return 0;
}
