/* SPDX-License-Identifier: Apache-2.0 */
/* The /stream query rules (docs/PROTOCOL.md, section 1) and the Origin rule, checked before the
 * WebSocket upgrade. */
#ifndef CS_CORESTREAMD_REQUEST_H
#define CS_CORESTREAMD_REQUEST_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

typedef struct cs_stream_request {
    uint32_t start; /* 0 = the next live ledger */
    uint32_t end;
    bool bounded;
    bool sig; /* sig=1: signed ledgers' SIG messages too (docs/PROTOCOL.md, "Signed ledgers") */
} cs_stream_request;

/* The decoded query bytes the server reads (pairs NUL-terminated); the rest of a longer query is
 * dropped. */
#define CS_QUERY_MAX 4096
/* The longest 400 body: a whole query's worth of value with every byte quoted as \xNN, in its
 * sentence. */
#define CS_STREAM_BODY_MAX (4 * CS_QUERY_MAX + 64)

/* A 400 body, never cut: as in Go, an invalid value is quoted whole, however long (cs_err's
 * message would cut it, mid-escape, at CS_ERR_MSG_MAX). */
typedef struct cs_stream_error {
    char body[CS_STREAM_BODY_MAX];
} cs_stream_error;

/* args are the decoded query pairs in order ("start=5", "end=", "token=abc"). Only the first value
 * of each parameter counts, and an empty value means absent. Values are base-10 uint32 (no sign,
 * no spaces; leading zeros allowed). Errors, in this order, are the 400 bodies:
 * `invalid start parameter "<v>"`, `invalid end parameter "<v>"`, `invalid end parameter: 0`,
 * `ledger 4294967295 is the last representable sequence and is not streamable`,
 * `end E is before start S`, `invalid sig parameter "<v>"` (sig is 0 or 1). err may be NULL. Values of up to CS_QUERY_MAX bytes in all are quoted
 * whole; a longer one is cut at the end of the body. */
int cs_stream_request_parse(const char *const *args, size_t nargs, cs_stream_request *out,
                            cs_stream_error *err);

/* The Origin rule of the prototype's WebSocket library: an empty origin (no header) passes;
 * otherwise its host, what follows "://" up to the next '/', must equal host without regard to
 * ASCII case. Returns 0 to allow, or -1 with the 403 body in msg (cut to mlen like snprintf):
 * `request Origin "<origin>" is not a valid URL with a host` or
 * `request Origin "<origin>" is not authorized for Host "<host>"`. */
int cs_check_origin(const char *origin, const char *host, char *msg, size_t mlen);

/* The WebSocket handshake rules of the prototype's library (coder/websocket's
 * verifyClientRequest), checked after the query and before the Origin. Header values are as
 * received, "" when the header is absent; keys holds every Sec-WebSocket-Key header. */
typedef struct cs_upgrade_request {
    const char *method;     /* "GET", "POST", ... */
    const char *version;    /* the request line's "HTTP/1.1" */
    const char *connection; /* every Connection header, joined by ',' */
    const char *upgrade;    /* every Upgrade header, joined by ',' */
    const char *ws_version; /* the first Sec-WebSocket-Version */
    const char *const *keys;
    size_t nkeys;
} cs_upgrade_request;

/* What a refused handshake answers. */
typedef struct cs_upgrade_refusal {
    unsigned status; /* 426, 405 or 400 */
    /* Response headers to add: Connection/Upgrade with 426 for a missing token, and
     * `Sec-WebSocket-Version: 13` with 400 for another version. */
    bool offer_upgrade;
    bool offer_version;
    char body[CS_STREAM_BODY_MAX]; /* the message, without the trailing newline */
} cs_upgrade_refusal;

/* Returns 0 when the handshake may proceed, or -1 with the refusal, first failure wins:
 *   426 `WebSocket protocol violation: handshake request must be at least HTTP/1.1: "<v>"`
 *   426 `WebSocket protocol violation: Connection header "<c>" does not contain Upgrade`
 *   426 `WebSocket protocol violation: Upgrade header "<u>" does not contain websocket`
 *   405 `WebSocket protocol violation: handshake request method is not GET but "<m>"`
 *   400 `unsupported WebSocket protocol version (only 13 is supported): "<v>"`
 *   400 `WebSocket protocol violation: missing Sec-WebSocket-Key`
 *   400 `WebSocket protocol violation: multiple Sec-WebSocket-Key headers`
 *   400 `WebSocket protocol violation: invalid Sec-WebSocket-Key "<k>", must be a 16 byte base64
 *       encoded string` (the key trimmed of spaces and tabs, as the RFC says). */
int cs_upgrade_check(const cs_upgrade_request *r, cs_upgrade_refusal *out);

#endif
