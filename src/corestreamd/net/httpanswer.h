/* SPDX-License-Identifier: Apache-2.0 */
/* The one formatter of the server's HTTP answers, every status on every port (plaintext and TLS,
 * data and admin listener): the head reader's own refusals (414, 431, 400 past the pair count, the
 * plaintext request on a TLS port) and everything the routes answer.
 *
 * The bytes: an HTTP/1.1 status line with Go's http.StatusText words, then lower-case header
 * lines in a fixed order (content-type, content-length, x-content-type-options, then the extras
 * asked for, connection first), the empty line and the body. Every answer after which the server
 * closes the connection carries CS_ANS_CLOSE. Clients of the prototype parse these answers, and the
 * e2e tests pin them byte for byte.
 *
 * Pure; any thread. */
#ifndef CS_CORESTREAMD_HTTPANSWER_H
#define CS_CORESTREAMD_HTTPANSWER_H

#include <stddef.h>
#include <stdint.h>

#include "common/strbuf.h"

/* Extra header lines of an answer (a bit set). */
#define CS_ANS_UPGRADE 1u      /* connection: Upgrade, upgrade: websocket (426) */
#define CS_ANS_WS_VERSION 2u   /* sec-websocket-version: 13 (400 for another version) */
#define CS_ANS_BEARER 4u       /* www-authenticate: Bearer realm="corestream" (401) */
#define CS_ANS_ALLOW 8u        /* allow: GET, HEAD (405 on the probe and metrics paths) */
#define CS_ANS_NO_BODY 16u     /* HEAD: the GET answer's headers, content-length included, no body */
#define CS_ANS_TLS_REQUIRED 32u /* x-corestream-tls: required (a plaintext request on a TLS port) */
#define CS_ANS_CLOSE 64u       /* connection: close (the server closes after this answer); with
                                  CS_ANS_UPGRADE, connection: Upgrade, close */

/* The header line CS_ANS_TLS_REQUIRED adds (without its CRLF): libremoteledger names the cause
 * of a failed dial by it. */
#define CS_HTTP_TLS_REQUIRED_HEADER "x-corestream-tls: required"

/* Go's http.StatusText for the statuses this server sends; "" for any other. */
const char *cs_http_status_text(unsigned status);

/* Appends the whole answer to out: status line, headers (extra: CS_ANS_* bits), the empty line,
 * body (NUL-terminated; content-length is its length). Out of memory shows as out's own failure
 * (cs_strbuf_take returns NULL). */
void cs_http_answer(cs_strbuf *out, unsigned status, const char *ctype, const char *body, unsigned extra);

/* What an answer says of its body beyond its type and length: the lake's objects (PROTOCOL.md
 * section 7). Each is left out when unset. Their lines follow the extras'. */
typedef struct cs_http_meta {
    const char *etag;      /* etag: the value as given, quotes included */
    int64_t last_modified; /* last-modified: Unix seconds, written as an IMF-fixdate (RFC 9110) */
    unsigned retry_after;  /* retry-after: seconds (a 503) */
    const char *cache;     /* cache-control: the value as given */
} cs_http_meta;

/* A binary body: body[0..len), which need not be text. meta may be NULL. With CS_ANS_NO_BODY the
 * headers say len and no body follows (HEAD). */
void cs_http_answer_bytes(cs_strbuf *out, unsigned status, const char *ctype, const void *body, size_t len,
                          const cs_http_meta *meta, unsigned extra);

/* A header line of an answer: name (lower-case) and value, as given. */
typedef struct cs_http_header {
    const char *name;
    const char *value;
} cs_http_header;

/* The WebSocket upgrade's answer (RFC 6455 4.2.2): `101 Switching Protocols`, upgrade: websocket,
 * connection: Upgrade, sec-websocket-accept: accept, then extra[0..n) in order, the empty line. */
void cs_http_answer_101(cs_strbuf *out, const char *accept, const cs_http_header *extra, size_t n);

/* A text/plain answer whose body is msg and a newline, as Go's http.Error writes it. */
void cs_http_answer_text(cs_strbuf *out, unsigned status, const char *msg, unsigned extra);

#endif
