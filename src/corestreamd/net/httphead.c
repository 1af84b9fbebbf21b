#include "corestreamd/net/httphead.h"

#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

static int hexval(char c)
{
    if (c >= '0' && c <= '9')
        return c - '0';
    if (c >= 'a' && c <= 'f')
        return c - 'a' + 10;
    if (c >= 'A' && c <= 'F')
        return c - 'A' + 10;
    return -1;
}

/* Decodes src[0..n) into dst (room for n + 1), NUL-terminated; returns the decoded length. */
static size_t decode(char *dst, const char *src, size_t n, bool plus_space)
{
    size_t o = 0;
    for (size_t i = 0; i < n; i++) {
        char c = src[i];
        int hi, lo;
        if (c == '%' && i + 2 < n && (hi = hexval(src[i + 1])) >= 0 && (lo = hexval(src[i + 2])) >= 0) {
            c = (char)(hi * 16 + lo);
            i += 2;
        } else if (c == '+' && plus_space) {
            c = ' ';
        }
        dst[o++] = c;
    }
    dst[o] = '\0';
    return o;
}

static bool is_ows(char c)
{
    return c == ' ' || c == '\t';
}

int cs_http_head_parse(const char *buf, size_t len, cs_http_head *out)
{
    memset(out, 0, sizeof *out);
    /* Three copies at most: the line pieces, the decoded path and query, the fields. */
    char *mem = malloc(len * 2 + 8);
    if (!mem)
        return -1;
    out->mem = mem;
    char *w = mem;
    const char *end = buf + len, *p = buf;
    const char *eol = memchr(p, '\n', len);
    if (!eol)
        return -1;
    const char *line_end = eol > p && eol[-1] == '\r' ? eol - 1 : eol;
    const char *sp1 = memchr(p, ' ', (size_t)(line_end - p));
    if (!sp1 || sp1 == p)
        return -1;
    const char *tgt = sp1 + 1;
    const char *sp2 = memchr(tgt, ' ', (size_t)(line_end - tgt));
    if (!sp2 || sp2 == tgt)
        return -1;
    out->method = w;
    memcpy(w, p, (size_t)(sp1 - p));
    w += sp1 - p;
    *w++ = '\0';
    out->version = w;
    memcpy(w, sp2 + 1, (size_t)(line_end - sp2 - 1));
    w += line_end - sp2 - 1;
    *w++ = '\0';
    out->target_len = (size_t)(sp2 - tgt);
    const char *q = memchr(tgt, '?', (size_t)(sp2 - tgt));
    const char *path_end = q ? q : sp2;
    out->path = w;
    w += decode(w, tgt, (size_t)(path_end - tgt), false) + 1;
    out->query = w;
    if (q) {
        const char *a = q + 1;
        while (a <= sp2) {
            const char *amp = memchr(a, '&', (size_t)(sp2 - a));
            const char *pe = amp ? amp : sp2;
            if (pe > a) { /* an empty piece ("a=1&&b=2") is no pair */
                w += decode(w, a, (size_t)(pe - a), true) + 1;
                out->npairs++;
            }
            a = pe + 1;
        }
    }
    p = eol + 1;
    while (p < end) {
        eol = memchr(p, '\n', (size_t)(end - p));
        if (!eol)
            eol = end;
        line_end = eol > p && eol[-1] == '\r' ? eol - 1 : eol;
        if (line_end == p)
            break; /* the empty line */
        const char *colon = memchr(p, ':', (size_t)(line_end - p));
        if (!colon || colon == p)
            return -1;
        if (out->nfields == CS_HTTP_FIELDS_MAX)
            return -1;
        cs_http_field *f = &out->fields[out->nfields++];
        f->name = w;
        memcpy(w, p, (size_t)(colon - p));
        w += colon - p;
        *w++ = '\0';
        const char *v = colon + 1, *ve = line_end;
        while (v < ve && is_ows(*v))
            v++;
        while (ve > v && is_ows(ve[-1]))
            ve--;
        f->value = w;
        memcpy(w, v, (size_t)(ve - v));
        w += ve - v;
        *w++ = '\0';
        p = eol + 1;
    }
    return 0;
}

void cs_http_head_free(cs_http_head *h)
{
    free(h->mem);
    h->mem = NULL;
}

const char *cs_http_head_nth(const cs_http_head *h, const char *name, size_t i)
{
    for (size_t k = 0; k < h->nfields; k++)
        if (strcasecmp(h->fields[k].name, name) == 0 && i-- == 0)
            return h->fields[k].value;
    return NULL;
}

char *cs_http_head_get(const cs_http_head *h, const char *name)
{
    size_t n = 0;
    for (size_t k = 0; k < h->nfields; k++)
        if (strcasecmp(h->fields[k].name, name) == 0)
            n += strlen(h->fields[k].value) + 1;
    char *v = malloc(n + 1), *w = v;
    if (!v)
        return NULL;
    for (size_t k = 0; k < h->nfields; k++)
        if (strcasecmp(h->fields[k].name, name) == 0) {
            if (w != v)
                *w++ = ',';
            size_t l = strlen(h->fields[k].value);
            memcpy(w, h->fields[k].value, l);
            w += l;
        }
    *w = '\0';
    return v;
}

const char *cs_http_head_pair(const cs_http_head *h, size_t i)
{
    if (i >= h->npairs)
        return NULL;
    const char *p = h->query;
    while (i--)
        p += strlen(p) + 1;
    return p;
}

cs_http_body cs_http_head_body(const cs_http_head *h)
{
    if (cs_http_head_nth(h, "transfer-encoding", 0))
        return CS_HTTP_BODY_TRANSFER;
    unsigned long long total = 0;
    bool seen = false;
    for (size_t i = 0;; i++) {
        const char *v = cs_http_head_nth(h, "content-length", i);
        if (!v)
            break;
        unsigned long long n = 0;
        size_t k = 0;
        for (; v[k] >= '0' && v[k] <= '9' && k < 13; k++)
            n = n * 10 + (unsigned)(v[k] - '0');
        if (k == 0 || v[k] != '\0' || (seen && n != total))
            return CS_HTTP_BODY_INVALID;
        total = n;
        seen = true;
    }
    return total > 0 ? CS_HTTP_BODY_LENGTH : CS_HTTP_BODY_NONE;
}

/* Whether the comma-separated list v holds token t, without regard to ASCII case. */
static bool list_has(const char *v, const char *t)
{
    size_t tl = strlen(t);
    while (*v) {
        while (*v == ',' || is_ows(*v))
            v++;
        size_t n = strcspn(v, ",");
        size_t e = n;
        while (e > 0 && is_ows(v[e - 1]))
            e--;
        if (e == tl && strncasecmp(v, t, tl) == 0)
            return true;
        v += n;
    }
    return false;
}

bool cs_http_head_keep_alive(const cs_http_head *h)
{
    if (strcmp(h->version, "HTTP/1.1") != 0)
        return false;
    for (size_t i = 0;; i++) {
        const char *v = cs_http_head_nth(h, "connection", i);
        if (!v)
            return true;
        if (list_has(v, "close"))
            return false;
    }
}
