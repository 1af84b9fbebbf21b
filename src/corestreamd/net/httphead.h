/* SPDX-License-Identifier: Apache-2.0 */
/* A request head as the parser read it (httpparse.h, cs_http_head_make), which the routes
 * (routes.c) judge: the request line's parts, the path as sent, the query's non-empty pieces
 * percent-decoded ('+' as a space), the field lines in order, values without surrounding spaces
 * or tabs. A field named more than once is all its values joined by ',' (RFC 9110 5.3). Pure;
 * any thread.
 *
 * Ownership: the head owns copies of everything (mem); the bytes it was read from need not
 * outlive it. */
#ifndef CS_CORESTREAMD_HTTPHEAD_H
#define CS_CORESTREAMD_HTTPHEAD_H

#include <stdbool.h>
#include <stddef.h>

#define CS_HTTP_FIELDS_MAX 64
/* The most query pairs a head holds: the parser refuses more (400 `too many query parameters`). */
#define CS_HTTP_PAIRS_MAX 32

typedef struct cs_http_field {
    const char *name; /* NUL-terminated, as sent */
    const char *value;
} cs_http_field;

typedef struct cs_http_head {
    char *mem;          /* everything below points in here */
    const char *method; /* "GET" */
    const char *path;   /* as sent, before '?' (escapes not decoded) */
    const char *version; /* "HTTP/1.1" */
    size_t target_len;  /* the request-target's bytes as sent (path and query) */
    char *query;        /* decoded pairs, each NUL-terminated, in order */
    size_t npairs;
    cs_http_field fields[CS_HTTP_FIELDS_MAX];
    size_t nfields;
} cs_http_head;

void cs_http_head_free(cs_http_head *h);

/* Every value of the field name (case-insensitive) joined by ',', malloc'd; "" when absent; NULL
 * only when out of memory. */
char *cs_http_head_get(const cs_http_head *h, const char *name);
/* The i-th value of name (0-based) or NULL. */
const char *cs_http_head_nth(const cs_http_head *h, const char *name, size_t i);
/* The i-th decoded query pair ("start=5") or NULL. */
const char *cs_http_head_pair(const cs_http_head *h, size_t i);

/* What the head says of a request body (RFC 9112 6.3). The server takes none: anything but
 * CS_HTTP_BODY_NONE is refused before the request is routed. */
typedef enum cs_http_body {
    CS_HTTP_BODY_NONE,     /* no Transfer-Encoding; Content-Length absent or 0 */
    CS_HTTP_BODY_LENGTH,   /* a Content-Length above 0 */
    CS_HTTP_BODY_TRANSFER, /* any Transfer-Encoding (with or without a Content-Length) */
    CS_HTTP_BODY_INVALID,  /* a Content-Length that is not 1*DIGIT (at most 13 digits), or two that differ */
} cs_http_body;
cs_http_body cs_http_head_body(const cs_http_head *h);

/* Whether the connection may carry another request after this one's answer: HTTP/1.1 without a
 * `close` token in Connection (HTTP/1.0 and anything else: no). */
bool cs_http_head_keep_alive(const cs_http_head *h);

#endif
