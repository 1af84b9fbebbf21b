/* SPDX-License-Identifier: Apache-2.0 */
/* The server's one reading of an HTTP/1.1 request head (RFC 9112): a state machine fed the bytes
 * as they arrive, one at a time, in the manner of nginx's ngx_http_parse.c. It finds where the
 * head ends, holds it to the server's limits while it arrives (so a head past them is answered
 * without being held whole), refuses what RFC 9112 does not allow, and records where each part
 * is; cs_http_head_make then copies the parts out for the routes (httphead.h).
 *
 * What is refused, and how (the body is the answer's text; docs/PROTOCOL.md, section 1):
 *   400 `malformed HTTP request`: a request line that is not `method SP target SP version CRLF`
 *       (a method that is not a token of at most 16 bytes, an empty target, two spaces, a
 *       leading empty line), or bytes that are not HTTP at all (a TLS ClientHello);
 *   400 `invalid request target`: a byte in the target that is not visible ASCII (a control
 *       character, NUL, DEL, a byte above 0x7F), a '%' not followed by two hex digits, or one that
 *       decodes to a control character (%00 to %1F, %7F);
 *   505 `unsupported HTTP version`: HTTP/d.d other than HTTP/1.0 and HTTP/1.1;
 *   400 `malformed HTTP version`: any other version;
 *   400 `lines must end with CRLF`: a bare CR or a bare LF anywhere in the head;
 *   400 `obsolete line folding is not accepted`: a field line that starts with a space or tab;
 *   400 `invalid header field name`: a name that is not a token, or whitespace before the colon;
 *   400 `invalid header field value`: a control character other than tab in a value;
 *   400 `missing Host header` (HTTP/1.1), `more than one Host header`, `invalid Host header`
 *       (a value that is not uri-host [":" port]);
 *   414 `request URI too long`, 431 `request header fields too large` (bytes or lines), 400 `too
 *       many query parameters` (non-empty '&'-separated pieces of the query): the limits.
 * The request line comes first, so its limits and faults are met first: 414 wins over 431 on a
 * head that passes both. Bodies (Content-Length, Transfer-Encoding) are the routes' to judge.
 *
 * Incremental: feed the whole buffer received so far each time; bytes already examined are not
 * looked at again, so a head that trickles in a byte at a time costs O(length). Pure, any thread;
 * a parser belongs to one connection. */
#ifndef CS_CORESTREAMD_HTTPPARSE_H
#define CS_CORESTREAMD_HTTPPARSE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "corestreamd/net/httphead.h"

typedef struct cs_head_limits {
    size_t uri_max;    /* request-target bytes; more: 414 */
    size_t head_max;   /* request line, field lines and the empty line; more: 431 */
    size_t fields_max; /* field lines, at most CS_HTTP_FIELDS_MAX; more: 431 */
    size_t pairs_max;  /* non-empty query pieces, at most CS_HTTP_PAIRS_MAX; more: 400 `too many
                          query parameters` */
} cs_head_limits;

typedef enum cs_http_verdict {
    CS_HTTP_MORE,   /* no end yet and nothing refused: read on */
    CS_HTTP_DONE,   /* the head ends at head_len: cs_http_head_make reads it */
    CS_HTTP_REFUSE, /* refused: answer status with why, then close */
} cs_http_verdict;

typedef struct cs_http_span {
    uint32_t off, len; /* in the buffer fed */
} cs_http_span;

/* The parse so far; cs_http_parser_init before the first byte. Fields are the parser's own. */
typedef struct cs_http_parser {
    cs_head_limits lim;
    uint8_t state;
    uint8_t hex; /* a target escape's first digit */
    bool in_query, piece_open;
    size_t pos; /* bytes examined */
    size_t pairs;
    size_t value_end; /* the current value up to its last byte that is not a space or tab */
    cs_http_span method, target, version;
    cs_http_span names[CS_HTTP_FIELDS_MAX], values[CS_HTTP_FIELDS_MAX];
    size_t nfields;
    /* CS_HTTP_DONE: the head's length, its empty line included; bytes after it are the next
     * request's, or WebSocket frames sent early. */
    size_t head_len;
    /* CS_HTTP_REFUSE: the answer's status and text (static). */
    unsigned status;
    const char *why;
} cs_http_parser;

/* A fresh parse under lim (fields_max above CS_HTTP_FIELDS_MAX counts as CS_HTTP_FIELDS_MAX). */
void cs_http_parser_init(cs_http_parser *p, const cs_head_limits *lim);

/* Examines buf[p->pos..len) (buf[0..len) is everything received, the same bytes as before plus
 * new ones). Any verdict but CS_HTTP_MORE is final: calling again after it is not allowed. */
cs_http_verdict cs_http_parser_feed(cs_http_parser *p, const char *buf, size_t len);

/* The head the parse found (after CS_HTTP_DONE; buf the same bytes), copied out: the path as sent
 * (never decoded: routes match it byte for byte), the query's non-empty pieces percent-decoded
 * ('+' as a space). 0, or -1 when out of memory (the head is then empty but safe to free). */
int cs_http_head_make(const cs_http_parser *p, const char *buf, cs_http_head *out);

#endif
