/* SPDX-License-Identifier: Apache-2.0 */
/* Test support: a small blocking WebSocket (RFC 6455) client over plain TCP, plain HTTP helpers,
 * and a corestream ledger-flow reader on top. Every call is bounded by a timeout in milliseconds
 * (an overall deadline for the call, not per syscall); nothing sleeps.
 *
 * Not thread-safe: one cs_ws belongs to one thread at a time. */
#ifndef CS_TESTS_SUPPORT_WSCLIENT_H
#define CS_TESTS_SUPPORT_WSCLIENT_H

#include <stddef.h>
#include <stdint.h>

/* ---- small primitives (exported so test servers can use them too) ---- */

void cs_sha1(const void *data, size_t len, uint8_t out[20]);
/* Standard base64 with padding. Writes a NUL-terminated string; returns its length, or -1 when
 * out is too small (needs 4*ceil(len/3)+1 bytes). */
int cs_base64_encode(const uint8_t *data, size_t len, char *out, size_t outlen);
/* Sec-WebSocket-Accept for a Sec-WebSocket-Key: base64(SHA-1(key + GUID)), 28 chars + NUL. */
void cs_ws_accept_for_key(const char *key, char out[29]);

/* ---- plain HTTP ---- */

/* Plain HTTP/1.1 GET (no upgrade, `Connection: close`). Returns the status code and fills body
 * (de-chunked, NUL-terminated, truncated to bodylen-1) and the Content-Type header value ("" when
 * absent). ctype may be NULL. Returns -1 on connect failure, timeout or an unparseable answer
 * (body then holds a description of what went wrong). */
int cs_http_get(const char *host, int port, const char *path_and_query, int timeout_ms, char *body,
                size_t bodylen, char *ctype, size_t ctypelen);

/* Sends exactly strlen(request) bytes, then reads the whole response (until the peer closes, or
 * Content-Length / the last chunk of a chunked body is satisfied, or the headers end for 1xx,
 * 204 and 304) into resp, raw (headers included, not de-chunked), NUL-terminated, truncated to
 * resplen-1. Returns the status code; 0 when the peer answered nothing parseable as an HTTP
 * status line (resp then holds whatever arrived); -1 on connect failure or timeout. */
int cs_http_raw(const char *host, int port, const char *request, int timeout_ms, char *resp,
                size_t resplen);

/* ---- WebSocket ---- */

typedef struct cs_ws cs_ws;

typedef struct cs_ws_opts {
    int rcvbuf;   /* > 0: SO_RCVBUF set before connect (so the TCP window stays small) */
    int sndbuf;   /* > 0: SO_SNDBUF set before connect */
    /* A numeric local address to bind before connect (e.g. "127.0.0.2", so one test can be
     * several peers); NULL lets the kernel choose. Only addresses of its family are dialled. */
    const char *bind_addr;
    size_t max_message; /* reassembled message limit; 0 = 32 MiB. Over it: CS_WS_ERROR */
    int send_timeout_ms; /* bound for every send; 0 = 10000 */
    /* Raw header lines appended to the handshake request, each ending in "\r\n" (e.g. an Origin
     * header). NULL for none. */
    const char *extra_headers;
    /* When set, the handshake response headers (status line included) are copied here,
     * NUL-terminated, whatever the status. */
    char *resp_headers;
    size_t resp_headers_len;
} cs_ws_opts;

/* Connects to host:port (a name, an IPv4 or an IPv6 literal), sends a GET for path_and_query with
 * an Upgrade handshake, checks 101, Upgrade, Connection and Sec-WebSocket-Accept.
 * On success returns the client and sets *status to 101.
 * On failure returns NULL; *status is the HTTP status when an answer came (its body, de-chunked,
 * goes to body; for a 101 with a bad handshake the body holds the reason), or 0 when none did
 * (body then holds the connect/timeout error). status and body may be NULL. */
cs_ws *cs_ws_connect(const char *host, int port, const char *path_and_query, int timeout_ms,
                     int *status, char *body, size_t bodylen);
/* Same with options (opts may be NULL). */
cs_ws *cs_ws_connect_opts(const char *host, int port, const char *path_and_query,
                          const cs_ws_opts *opts, int timeout_ms, int *status, char *body,
                          size_t bodylen);

typedef enum cs_ws_kind {
    CS_WS_BINARY,
    CS_WS_TEXT,
    CS_WS_CLOSE,
    CS_WS_EOF, /* connection dropped (EOF or reset) with no close frame */
    CS_WS_TIMEOUT,
    CS_WS_ERROR, /* protocol violation by the peer, message too big, or a local error */
} cs_ws_kind;

typedef struct cs_ws_msg {
    cs_ws_kind kind;
    uint8_t *data; /* BINARY/TEXT payload (NUL-terminated for convenience, NUL not counted);
                      owned by the client, valid until the next cs_ws_read / read_ledger / close */
    size_t len;
    int close_code;  /* CLOSE: the code, 1005 when the close frame had no payload */
    char reason[128]; /* CLOSE: the reason (truncated); ERROR: what went wrong */
} cs_ws_msg;

/* Reads one whole message: reassembles fragments, answers pings with pongs (same payload),
 * ignores pongs, surfaces a close frame (and replies with a close echoing its code, unless this
 * side already sent one). Returns out->kind.
 * A timeout loses nothing: partially received frames and fragments are kept for the next call.
 * After a close frame every further read returns CS_WS_CLOSE again with the same code/reason;
 * after EOF/ERROR, further reads return the same kind. */
int cs_ws_read(cs_ws *ws, cs_ws_msg *out, int timeout_ms);

/* Sends one unfragmented, masked data frame (opcode 1 text, 2 binary; any opcode is accepted, so
 * tests can send pings (9) too). Returns 0, or -1 on a send error or timeout. */
int cs_ws_send(cs_ws *ws, int opcode, const void *data, size_t len);
/* One masked frame with explicit FIN, for fragmentation tests. */
int cs_ws_send_frame(cs_ws *ws, int fin, int opcode, const void *data, size_t len);
/* Arbitrary bytes straight onto the socket (unmasked frames, garbage...). */
int cs_ws_send_raw(cs_ws *ws, const void *data, size_t len);
/* A masked close frame: code > 0 → 2-byte code + reason (reason may be NULL); code <= 0 → an
 * empty close payload. After this, a received close is not answered again. */
int cs_ws_send_close(cs_ws *ws, int code, const char *reason);

/* 1 when a close frame was received (code/reason filled; reason may be NULL), else 0. */
int cs_ws_last_close(const cs_ws *ws, int *code, char *reason, size_t reasonlen);
/* Text of the last error (protocol violation, I/O error), "" when none. */
const char *cs_ws_error(const cs_ws *ws);
/* The TCP socket (non-blocking), e.g. to inspect it or to shutdown(2) one direction. To stall
 * as a subscriber just do not call read. */
int cs_ws_fd(const cs_ws *ws);
/* Closes the TCP socket without a close handshake and frees. NULL is fine. */
void cs_ws_close(cs_ws *ws);

/* ---- corestream ledger flows ---- */

typedef struct cs_ledger {
    uint32_t seq;
    uint8_t *data; /* malloc'd, owned by the caller: cs_ledger_free */
    size_t len;
    int64_t emit_start, emit_end; /* BEGIN / END stamps (0 for stampless deliveries) */
    uint32_t chunks;
    unsigned discarded; /* partial assemblies discarded by a redelivery BEGIN for the same seq */
    int n_zstd_chunks;
    int64_t received_unix_nano; /* CLOCK_REALTIME after assembly and checksum verification */
} cs_ledger;

/* Reads messages until one complete verified ledger:
 *   BEGIN, CHUNK* (index order enforced; codec 1 = exactly one zstd frame, decompressed with a
 *   bound of 8 MiB per chunk; codec 0 raw), END (count, length and XXH64 seed 0 verified).
 * A BEGIN for the same seq mid-assembly discards the partial (discarded++); for another seq it is
 * a violation. The assembly is capped at CS_MAX_PAYLOAD_SIZE.
 * Returns
 *    1 with a ledger in out;
 *    0 when a close frame arrived (code/reason via cs_ws_last_close); err is "" when the close
 *      came between ledgers, or "stream closed mid-assembly of ledger S";
 *   -1 on a protocol violation, timeout, EOF or error, with a message in err. Violations reset
 *      the assembly; a timeout keeps it, so a later call resumes the same ledger.
 * err may be NULL. */
int cs_ws_read_ledger(cs_ws *ws, cs_ledger *out, int timeout_ms, char *err, size_t errlen);
void cs_ledger_free(cs_ledger *l);

#endif
