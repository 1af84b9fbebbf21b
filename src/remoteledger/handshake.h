/* SPDX-License-Identifier: Apache-2.0 */
/* libremoteledger internals: the client side of the WebSocket opening handshake (RFC 6455 4.1),
 * over the library's own transport (transport.h), for ws:// and wss:// alike.
 *
 * The request carries a fixed set of headers in a fixed order (no Sec-WebSocket-Protocol, no
 * Sec-WebSocket-Extensions: permessage-deflate stays off), plus an Authorization: Bearer header
 * when there is a token. The response is checked in a fixed order and a failure is worded
 * "HS: ...", the library's stable dial errors since 1.0;
 * three answers get plain words instead: a 401 ("server requires a token (401)"), a TLS record
 * where HTTP was expected ("the server answered in TLS (is it wss://?)") and corestreamd's
 * plaintext 400 on its TLS port, known by its `x-corestream-tls: required` header ("the server
 * speaks TLS on this port (is it wss://?)"). */
#ifndef RLI_HANDSHAKE_H
#define RLI_HANDSHAKE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define RLI_HS_KEY_LEN 24       /* base64 of 16 bytes */
#define RLI_HS_MAX_RESPONSE 16384 /* bound on the response head, status line to blank line */

/* Sec-WebSocket-Key for a 16-byte nonce. */
void rli_hs_key_encode(const uint8_t nonce[16], char key[RLI_HS_KEY_LEN + 1]);

/* A fresh key from 16 random bytes. */
void rli_hs_key_new(char key[RLI_HS_KEY_LEN + 1]);

/* Writes the upgrade request for target (path and query) on host (the Host header) into
 * out[0..cap), snprintf style: returns the full length whatever cap is. token: sent as
 * "Authorization: Bearer <token>" when not NULL or "". */
size_t rli_hs_request(char *out, size_t cap, const char *target, const char *host, const char *key,
                      const char *token);

/* Collects the response head from the stream. */
typedef struct rli_hs_reader {
    size_t len;  /* bytes collected */
    size_t line; /* where the line being scanned starts */
    int status;  /* the response's HTTP status once the head is complete (-1: unreadable), else 0 */
    bool tls;    /* the failure was TLS itself: a TLS record where the status line should be, or
                    the server's word that its port speaks TLS */
    char buf[RLI_HS_MAX_RESPONSE + 1];
} rli_hs_reader;

void rli_hs_reader_init(rli_hs_reader *r);

typedef enum rli_hs_status {
    RLI_HS_MORE = 0,   /* the head is not complete yet: all of the input was taken */
    RLI_HS_DONE = 1,   /* the head is complete; *used bytes of this input belonged to it */
    RLI_HS_FAILED = -1 /* *err says why (a bad response, or a head over the bound) */
} rli_hs_status;

/* Feeds response bytes. On RLI_HS_DONE the bytes after *used are the first WebSocket frames. */
rli_hs_status rli_hs_feed(rli_hs_reader *r, const uint8_t *in, size_t len, size_t *used, const char *key,
                        const char **err);

/* The status code of a head's status line ("HTTP/1.1 401 ..." -> 401), -1 when unreadable. */
int rli_hs_status_code(const char *head, size_t len);

/* The longest run token a client keeps (X-Corestream-Run, docs/PROTOCOL.md). */
#define RLI_RUN_MAX 64

/* The value of the first header line named name (case-insensitively) of a complete head, spaces
 * and tabs trimmed: *value (into head) and *vlen. false when there is no such line. */
bool rli_hs_header(const char *head, size_t len, const char *name, const char **value, size_t *vlen);

/* Checks a complete response head (status line and headers, blank line included) against the
 * key: NULL when it is a valid 101 for it, otherwise the "HS: ..." description of the failure. */
const char *rli_hs_check(const char *head, size_t len, const char *key);

#endif
