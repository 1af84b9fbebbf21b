/* SPDX-License-Identifier: Apache-2.0 */
#include "common/strbuf.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

void cs_strbuf_fixed(cs_strbuf *b, char *buf, size_t len)
{
    *b = (cs_strbuf){.p = buf, .cap = len, .fixed = true};
    if (len)
        buf[0] = '\0';
}

/* Room for k more bytes and the NUL. */
static bool reserve(cs_strbuf *b, size_t k)
{
    if (b->failed)
        return false;
    if (k > SIZE_MAX / 2 - b->n) {
        b->failed = true;
        return false;
    }
    size_t need = b->n + k + 1;
    if (need <= b->cap)
        return true;
    size_t cap = b->cap ? b->cap : 256;
    while (cap < need)
        cap *= 2;
    char *p = realloc(b->p, cap);
    if (!p) {
        b->failed = true;
        return false;
    }
    b->p = p;
    b->cap = cap;
    return true;
}

void cs_strbuf_put_slow(cs_strbuf *b, const void *s, size_t k)
{
    if (b->fixed) {
        if (b->n + 1 < b->cap) {
            size_t room = b->cap - 1 - b->n;
            memcpy(b->p + b->n, s, k < room ? k : room);
        }
        b->n += k;
        if (b->cap)
            b->p[b->n < b->cap ? b->n : b->cap - 1] = '\0';
        return;
    }
    if (k == 0 || !reserve(b, k))
        return;
    memcpy(b->p + b->n, s, k);
    b->n += k;
    b->p[b->n] = '\0';
}

void cs_strbuf_vprintf(cs_strbuf *b, const char *fmt, va_list ap)
{
    if (b->failed)
        return;
    size_t room = b->n < b->cap ? b->cap - b->n : 0;
    va_list aq;
    va_copy(aq, ap);
    int k = vsnprintf(room ? b->p + b->n : NULL, room, fmt, aq);
    va_end(aq);
    if (k < 0) {
        /* An encoding error: nothing sensible was appended. vsnprintf may have written a NUL. */
        if (!b->fixed)
            b->failed = true;
        return;
    }
    if ((size_t)k < room || b->fixed) {
        b->n += (size_t)k; /* it fitted, or a bounded buffer keeps vsnprintf's truncation */
        return;
    }
    if (!reserve(b, (size_t)k)) {
        if (b->p)
            b->p[b->n] = '\0'; /* the first try wrote a truncated tail */
        return;
    }
    vsnprintf(b->p + b->n, b->cap - b->n, fmt, ap);
    b->n += (size_t)k;
}

void cs_strbuf_printf(cs_strbuf *b, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    cs_strbuf_vprintf(b, fmt, ap);
    va_end(ap);
}

void cs_strbuf_reset(cs_strbuf *b)
{
    b->n = 0;
    b->failed = false;
    if (b->cap)
        b->p[0] = '\0';
}

char *cs_strbuf_take(cs_strbuf *b, size_t *len)
{
    char *s = b->failed ? NULL : b->p ? b->p : calloc(1, 1);
    size_t n = b->n;
    if (!s)
        free(b->p);
    *b = (cs_strbuf)CS_STRBUF_INIT;
    if (len)
        *len = s ? n : 0;
    return s;
}

void cs_strbuf_free(cs_strbuf *b)
{
    if (!b->fixed)
        free(b->p);
    *b = (cs_strbuf)CS_STRBUF_INIT;
}
