/* SPDX-License-Identifier: Apache-2.0 */
/* The tree's one string/byte buffer, with two backings behind the same appenders:
 *
 *   growable  starts zeroed (CS_STRBUF_INIT) and lives on the heap. An allocation failure sets
 *             `failed`, drops that append and every later one, so callers append freely and check
 *             once at the end (cs_strbuf_take returns NULL). The owner frees it (cs_strbuf_free)
 *             or takes the string (cs_strbuf_take).
 *   bounded   over the caller's array (cs_strbuf_fixed) with snprintf's rule: `n` counts every
 *             byte appended, only len - 1 of them land (cut at any byte), never reallocated. The
 *             logger and strconv.Quote format this way on the stack and size a retry by `n`.
 *
 * Either way the contents are NUL-terminated after every append (once there is room for a NUL)
 * and may hold NUL bytes of their own. The fast path is inline so the logger pays no call per
 * piece. Depends on libc only (libremoteledger compiles it in as a hidden object). Not
 * thread-safe: one owner at a time. */
#ifndef CS_COMMON_STRBUF_H
#define CS_COMMON_STRBUF_H

#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <string.h>

typedef struct cs_strbuf {
    char *p;     /* growable: NULL until the first non-empty append */
    size_t n;    /* bytes appended (bounded: including those that did not fit) */
    size_t cap;  /* bytes at p, the NUL's included */
    bool fixed;  /* p is the caller's array */
    bool failed; /* growable: an allocation failed, the contents are incomplete */
} cs_strbuf;

#define CS_STRBUF_INIT {0}

/* A bounded buffer over buf[len] (buf may be NULL when len == 0: only counting). */
void cs_strbuf_fixed(cs_strbuf *b, char *buf, size_t len);

/* The out-of-line half of cs_strbuf_put: grows, or truncates a bounded buffer. */
void cs_strbuf_put_slow(cs_strbuf *b, const void *s, size_t k);

static inline void cs_strbuf_put(cs_strbuf *b, const void *s, size_t k)
{
    if (b->n < b->cap && k < b->cap - b->n) { /* fits with its NUL */
        memcpy(b->p + b->n, s, k);
        b->n += k;
        b->p[b->n] = '\0';
        return;
    }
    cs_strbuf_put_slow(b, s, k);
}

static inline void cs_strbuf_putc(cs_strbuf *b, char c)
{
    cs_strbuf_put(b, &c, 1);
}

static inline void cs_strbuf_puts(cs_strbuf *b, const char *s)
{
    cs_strbuf_put(b, s, strlen(s));
}

void cs_strbuf_printf(cs_strbuf *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
void cs_strbuf_vprintf(cs_strbuf *b, const char *fmt, va_list ap);

/* Empties the buffer (and clears `failed`), keeping its memory. */
void cs_strbuf_reset(cs_strbuf *b);

/* Growable only: hands over the malloc'd, NUL-terminated contents ("" when nothing was
 * appended) with their length in *len (may be NULL), and leaves b empty. NULL when an append
 * failed or the final allocation does; the buffer is freed either way. */
char *cs_strbuf_take(cs_strbuf *b, size_t *len);

/* Releases a growable buffer's memory and empties it; a bounded one is only emptied. */
void cs_strbuf_free(cs_strbuf *b);

#endif
