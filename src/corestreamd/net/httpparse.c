/* SPDX-License-Identifier: Apache-2.0 */
/* The request-head state machine: see httpparse.h. */
#include "corestreamd/net/httpparse.h"

#include <stdlib.h>
#include <string.h>
#include <strings.h>

#define METHOD_MAX 16
#define VERSION_LEN 8 /* "HTTP/1.1" */

enum {
    S_METHOD,      /* the method's bytes, up to its SP */
    S_TARGET,      /* the request-target's, up to its SP */
    S_PCT1,        /* after a target's '%' */
    S_PCT2,        /* after its first hex digit */
    S_VERSION,     /* the version's, up to CR */
    S_LINE_LF,     /* a line's CR is in: its LF must follow */
    S_FIELD_START, /* a field line's first byte, or the empty line's CR */
    S_NAME,        /* a field name's bytes, up to its colon */
    S_VALUE_OWS,   /* spaces and tabs before a value */
    S_VALUE,       /* a value's bytes, up to CR */
    S_END_LF,      /* the empty line's CR is in: its LF ends the head */
};

/* RFC 9110 5.6.2: tchar. */
static bool tchar(unsigned char c)
{
    if ((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9'))
        return true;
    return c && strchr("!#$%&'*+-.^_`|~", c) != NULL;
}

static int hexval(unsigned char c)
{
    if (c >= '0' && c <= '9')
        return c - '0';
    if (c >= 'a' && c <= 'f')
        return c - 'a' + 10;
    if (c >= 'A' && c <= 'F')
        return c - 'A' + 10;
    return -1;
}

static bool ctl(unsigned char c)
{
    return c < 0x20 || c == 0x7f;
}

static cs_http_verdict refuse(cs_http_parser *p, unsigned status, const char *why)
{
    p->status = status;
    p->why = why;
    return CS_HTTP_REFUSE;
}

void cs_http_parser_init(cs_http_parser *p, const cs_head_limits *lim)
{
    memset(p, 0, sizeof *p);
    p->lim = *lim;
    if (p->lim.fields_max > CS_HTTP_FIELDS_MAX)
        p->lim.fields_max = CS_HTTP_FIELDS_MAX;
    if (p->lim.pairs_max > CS_HTTP_PAIRS_MAX)
        p->lim.pairs_max = CS_HTTP_PAIRS_MAX;
    p->state = S_METHOD;
}

/* A target byte: its length and query pieces counted, its escapes followed. */
static cs_http_verdict target_byte(cs_http_parser *p, unsigned char c)
{
    if (c == ' ') {
        if (p->target.len == 0)
            return refuse(p, 400, "malformed HTTP request");
        p->state = S_VERSION;
        p->version.off = (uint32_t)p->pos + 1;
        return CS_HTTP_MORE;
    }
    if (c == '\r' || c == '\n')
        return refuse(p, 400, "malformed HTTP request"); /* a request line without a version */
    if (c <= 0x20 || c >= 0x7f)
        return refuse(p, 400, "invalid request target");
    if (++p->target.len > p->lim.uri_max)
        return refuse(p, 414, "request URI too long");
    if (c == '?' && !p->in_query) {
        p->in_query = true;
    } else if (p->in_query && c == '&') {
        p->piece_open = false;
    } else if (p->in_query && !p->piece_open) {
        p->piece_open = true;
        if (++p->pairs > p->lim.pairs_max)
            return refuse(p, 400, "too many query parameters");
    }
    if (c == '%')
        p->state = S_PCT1;
    return CS_HTTP_MORE;
}

/* An escape's digit: %HH, never a control character once decoded. */
static cs_http_verdict escape_byte(cs_http_parser *p, unsigned char c)
{
    int v = hexval(c);
    if (v < 0)
        return refuse(p, 400, "invalid request target");
    if (++p->target.len > p->lim.uri_max)
        return refuse(p, 414, "request URI too long");
    if (p->state == S_PCT1) {
        p->hex = (uint8_t)v;
        p->state = S_PCT2;
        return CS_HTTP_MORE;
    }
    if (ctl((unsigned char)(p->hex * 16 + v)))
        return refuse(p, 400, "invalid request target");
    p->state = S_TARGET;
    return CS_HTTP_MORE;
}

/* The version at its CR: HTTP/1.0 or HTTP/1.1. */
static cs_http_verdict version_end(cs_http_parser *p, const char *buf)
{
    const char *v = buf + p->version.off;
    if (p->version.len != VERSION_LEN || memcmp(v, "HTTP/", 5) != 0 || v[5] < '0' || v[5] > '9' || v[6] != '.' ||
        v[7] < '0' || v[7] > '9')
        return refuse(p, 400, "malformed HTTP version");
    if (v[5] != '1' || (v[7] != '0' && v[7] != '1'))
        return refuse(p, 505, "unsupported HTTP version");
    p->state = S_LINE_LF;
    return CS_HTTP_MORE;
}

/* RFC 9112 3.2: uri-host [":" port], of reg-name, IPv4 or IP-literal bytes. */
static bool host_ok(const char *v, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        unsigned char c = (unsigned char)v[i];
        bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
                  strchr("-._~%!$&'()*+,;=:[]", c) != NULL;
        if (!ok || c == '\0')
            return false;
    }
    return true;
}

/* The empty line's LF: the head is whole once Host is as RFC 9112 3.2 wants it. */
static cs_http_verdict head_end(cs_http_parser *p, const char *buf)
{
    size_t hosts = 0, at = 0;
    for (size_t i = 0; i < p->nfields; i++)
        if (p->names[i].len == 4 && strncasecmp(buf + p->names[i].off, "host", 4) == 0) {
            hosts++;
            at = i;
        }
    bool http11 = buf[p->version.off + 7] == '1';
    if (hosts > 1)
        return refuse(p, 400, "more than one Host header");
    if (hosts == 0 && http11)
        return refuse(p, 400, "missing Host header");
    if (hosts == 1 && !host_ok(buf + p->values[at].off, p->values[at].len))
        return refuse(p, 400, "invalid Host header");
    p->head_len = p->pos + 1;
    return CS_HTTP_DONE;
}

/* A field line's first byte. */
static cs_http_verdict field_start(cs_http_parser *p, unsigned char c)
{
    if (c == '\r') {
        p->state = S_END_LF;
        return CS_HTTP_MORE;
    }
    if (c == ' ' || c == '\t')
        return refuse(p, 400, "obsolete line folding is not accepted");
    if (c == '\n')
        return refuse(p, 400, "lines must end with CRLF");
    if (!tchar(c))
        return refuse(p, 400, "invalid header field name");
    if (p->nfields == p->lim.fields_max)
        return refuse(p, 431, "request header fields too large");
    p->names[p->nfields] = (cs_http_span){(uint32_t)p->pos, 1};
    p->state = S_NAME;
    return CS_HTTP_MORE;
}

static cs_http_verdict name_byte(cs_http_parser *p, unsigned char c)
{
    if (c == ':') {
        p->state = S_VALUE_OWS;
        return CS_HTTP_MORE;
    }
    if (!tchar(c))
        return refuse(p, 400, "invalid header field name");
    p->names[p->nfields].len++;
    return CS_HTTP_MORE;
}

/* A value's byte (or the spaces before it): field-vchar, SP and HTAB; CR ends it. */
static cs_http_verdict value_byte(cs_http_parser *p, unsigned char c)
{
    if (c == '\r') {
        if (p->state == S_VALUE_OWS)
            p->values[p->nfields] = (cs_http_span){(uint32_t)p->pos, 0};
        else
            p->values[p->nfields].len = (uint32_t)(p->value_end - p->values[p->nfields].off);
        p->nfields++;
        p->state = S_LINE_LF;
        return CS_HTTP_MORE;
    }
    if (c == '\n')
        return refuse(p, 400, "lines must end with CRLF");
    if (c == ' ' || c == '\t')
        return CS_HTTP_MORE;
    if (ctl(c))
        return refuse(p, 400, "invalid header field value");
    if (p->state == S_VALUE_OWS) {
        p->values[p->nfields].off = (uint32_t)p->pos;
        p->state = S_VALUE;
    }
    p->value_end = p->pos + 1;
    return CS_HTTP_MORE;
}

static cs_http_verdict method_byte(cs_http_parser *p, unsigned char c)
{
    if (c == ' ' && p->method.len > 0) {
        p->state = S_TARGET;
        p->target.off = (uint32_t)p->pos + 1;
        return CS_HTTP_MORE;
    }
    if (!tchar(c) || ++p->method.len > METHOD_MAX)
        return refuse(p, 400, "malformed HTTP request");
    return CS_HTTP_MORE;
}

/* One byte in the state it finds. */
static cs_http_verdict step(cs_http_parser *p, const char *buf, unsigned char c)
{
    switch (p->state) {
    case S_METHOD:
        return method_byte(p, c);
    case S_TARGET:
        return target_byte(p, c);
    case S_PCT1:
    case S_PCT2:
        return escape_byte(p, c);
    case S_VERSION:
        if (c == '\r')
            return version_end(p, buf);
        if (c == '\n')
            return refuse(p, 400, "lines must end with CRLF");
        if (++p->version.len > VERSION_LEN)
            return refuse(p, 400, "malformed HTTP version");
        return CS_HTTP_MORE;
    case S_LINE_LF:
    case S_END_LF:
        if (c != '\n')
            return refuse(p, 400, "lines must end with CRLF");
        if (p->state == S_END_LF)
            return head_end(p, buf);
        p->state = S_FIELD_START;
        return CS_HTTP_MORE;
    case S_FIELD_START:
        return field_start(p, c);
    case S_NAME:
        return name_byte(p, c);
    default: /* S_VALUE_OWS, S_VALUE */
        return value_byte(p, c);
    }
}

cs_http_verdict cs_http_parser_feed(cs_http_parser *p, const char *buf, size_t len)
{
    for (; p->pos < len; p->pos++) {
        if (p->pos + 1 > p->lim.head_max)
            return refuse(p, 431, "request header fields too large");
        cs_http_verdict v = step(p, buf, (unsigned char)buf[p->pos]);
        if (v != CS_HTTP_MORE) {
            p->pos++;
            return v;
        }
    }
    return CS_HTTP_MORE;
}

/* ---- the head copied out --------------------------------------------------------------------- */

/* src[0..n) percent-decoded ('+' as a space) into dst, NUL-terminated (the escapes are whole:
 * the parse checked them). Returns the bytes written, the NUL included. */
static size_t decode_piece(char *dst, const char *src, size_t n)
{
    size_t o = 0;
    for (size_t i = 0; i < n; i++) {
        char c = src[i];
        if (c == '%') {
            c = (char)(hexval((unsigned char)src[i + 1]) * 16 + hexval((unsigned char)src[i + 2]));
            i += 2;
        } else if (c == '+') {
            c = ' ';
        }
        dst[o++] = c;
    }
    dst[o++] = '\0';
    return o;
}

/* span's bytes, NUL-terminated, at *w (moved past them). */
static const char *put(char **w, const char *buf, cs_http_span s)
{
    char *at = *w;
    memcpy(at, buf + s.off, s.len);
    at[s.len] = '\0';
    *w += s.len + 1;
    return at;
}

int cs_http_head_make(const cs_http_parser *p, const char *buf, cs_http_head *out)
{
    memset(out, 0, sizeof *out);
    /* Every piece once, NUL-terminated: at most the head's length plus a NUL per piece. */
    char *w = malloc(p->head_len + 2 * (p->nfields + p->pairs) + 8);
    if (!w)
        return -1;
    out->mem = w;
    out->method = put(&w, buf, p->method);
    out->version = put(&w, buf, p->version);
    const char *t = buf + p->target.off, *q = memchr(t, '?', p->target.len);
    size_t path_len = q ? (size_t)(q - t) : p->target.len;
    out->path = put(&w, buf, (cs_http_span){p->target.off, (uint32_t)path_len});
    out->target_len = p->target.len;
    out->query = w;
    for (const char *a = q ? q + 1 : NULL, *end = t + p->target.len; a && a <= end;) {
        const char *amp = memchr(a, '&', (size_t)(end - a));
        const char *pe = amp ? amp : end;
        if (pe > a) {
            w += decode_piece(w, a, (size_t)(pe - a));
            out->npairs++;
        }
        a = pe + 1;
    }
    for (size_t i = 0; i < p->nfields; i++) {
        out->fields[i].name = put(&w, buf, p->names[i]);
        out->fields[i].value = put(&w, buf, p->values[i]);
    }
    out->nfields = p->nfields;
    return 0;
}
