/* The request-head reader: accepted plaintext connections wait here, on a thread of their own,
 * until their HTTP request head is complete, before libwebsockets gets them. It enforces the
 * server's own limits (cs_head_limits: 414 past the URI limit, 431 past the head size or header
 * line count, 400 `too many query parameters` past the pair count, each with a body and one DEBUG
 * line naming the peer) and the header deadline (a
 * head not complete by then: the connection is closed). A complete head is handed back with the
 * bytes read so far, for lws_adopt_socket_vhost_readbuf on the lws service thread: lws then only
 * ever parses heads that fit its header store, which it would otherwise hang up on in silence.
 *
 * Bytes that cannot start a request line (a TLS ClientHello on the plaintext port) are handed
 * back at once, as they are: lws refuses them as it always did.
 *
 * With cfg.judge_plain a complete plaintext head goes to cfg.judge first, which may answer it
 * here (then the connection is closed, as on TLS), upgrade it (cfg.upgraded, ssl NULL) or pass it
 * (CS_HEAD_PASS) to drain as above: the server keeps /stream upgrades for its own I/O threads and
 * leaves every other request to lws.
 *
 * On a TLS port (cfg.tls) the head reader terminates TLS (docs/STREAM-THREADS.md): a connection
 * whose first byte starts a TLS handshake record gets a non-blocking SSL_accept on the server's
 * own context (cfg.tls_ctx), then its head is read through SSL_read under the same limits and
 * answered through SSL_write; cfg.judge decides every answer, a 101 included, and an upgraded
 * connection leaves through cfg.upgraded (never through drain). Any other first byte is a
 * plaintext client on the TLS port, answered in plaintext with `400 Bad Request`, the header line
 * CS_HEAD_TLS_REQUIRED_HEADER (by which libremoteledger names the cause) and the body `this port
 * speaks TLS: use wss:// or https://`, then closed. The header deadline covers the handshake. A
 * failed handshake is one DEBUG line (`TLS handshake failed`, the peer, OpenSSL's reason).
 *
 * Threads: cs_headreader_add and cs_headreader_drain from the lws service thread (add may be
 * called from any one thread); the ready callback runs on the head reader's own thread. */
#ifndef CS_CORESTREAMD_HEADREADER_H
#define CS_CORESTREAMD_HEADREADER_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "common/err.h"
#include "corestreamd/server/headscan.h"

typedef struct cs_headreader cs_headreader;

/* The header line of the plaintext refusal on a TLS port (without its CRLF). */
#define CS_HEAD_TLS_REQUIRED_HEADER "x-corestream-tls: required"

/* TLS ports (cfg.tls): the head reader terminates TLS itself (below). */
typedef struct ssl_st SSL;
typedef struct ssl_ctx_st SSL_CTX;

/* judge's verdicts. */
#define CS_HEAD_ANSWER 0  /* *resp is the answer; the connection is closed after it */
#define CS_HEAD_UPGRADE 1 /* *resp is a 101 */
#define CS_HEAD_PASS 2    /* plaintext only: not judged here, the head goes to drain */

typedef struct cs_headreader_config {
    cs_head_limits limits;
    bool tls; /* the port speaks TLS: handshake and head here, judged by `judge` */
    bool judge_plain; /* plaintext heads go to `judge` too */
    /* All on the head reader's thread (tls_ctx TLS only):
     * tls_ctx: the context in force, with a reference the head reader frees after SSL_new.
     * judge: a complete head (buf[0..len), within the limits) of the connection fd, over TLS or
     *   not. It puts the whole answer, malloc'd, in *resp and returns CS_HEAD_ANSWER, or
     *   CS_HEAD_UPGRADE when the answer is a 101: *arg is then the caller's, given to upgraded
     *   (or to discard if the 101 cannot be written); or, plaintext only, CS_HEAD_PASS.
     * upgraded: the 101 is written. fd, ssl (NULL on plaintext; the caller frees it) and tag are
     *   the caller's from now on; early[0..n) are bytes read past the head (WebSocket frames sent
     *   early), valid during the call only. The connection no longer counts as held.
     * discard: frees an arg whose connection ended before upgraded (the tag still comes back
     *   through drain or cs_headreader_free, as any other). */
    SSL_CTX *(*tls_ctx)(void *ctx);
    int (*judge)(void *ctx, int fd, void *tag, bool tls, const char *buf, size_t len, char **resp,
                 size_t *resp_len, void **arg);
    void (*upgraded)(void *ctx, int fd, SSL *ssl, void *tag, const unsigned char *early, size_t n, void *arg);
    void (*discard)(void *ctx, void *arg);
    int64_t timeout_ns; /* from add until the head must be complete */
    /* Head reader thread: connections are waiting in cs_headreader_drain. It must only wake the
     * thread that drains (lws_cancel_service); it is called once per batch, not per connection. */
    void (*ready)(void *ctx);
    void *ctx;
} cs_headreader_config;

/* Starts the thread. -1 with err on failure (epoll, eventfd, thread creation). */
int cs_headreader_start(cs_headreader **out, const cs_headreader_config *cfg, cs_err *err);

/* Takes fd (an accepted, non-blocking socket) and tag (the caller's, opaque here, given back by
 * drain exactly once) for reading. 0, or -1 out of memory: the caller still owns both. */
int cs_headreader_add(cs_headreader *hr, int fd, void *tag);

/* What became of a connection. With fd >= 0 its head is complete (or not HTTP at all): the caller
 * owns fd from now on, and buf[0..len) are the bytes read from it, valid during the call only.
 * With fd == -1 the head reader answered and closed it (414, 431), or closed it at the deadline
 * or on a read error: only tag is given back (buf NULL, len 0). */
typedef void (*cs_head_done_fn)(void *ctx, int fd, void *tag, const char *buf, size_t len);

/* Calls fn for every connection finished since the last drain, in order, on the caller's thread.
 * Returns how many. */
size_t cs_headreader_drain(cs_headreader *hr, cs_head_done_fn fn, void *ctx);

/* Connections the head reader holds (reading, answering, or waiting in drain). Any thread. */
size_t cs_headreader_holding(cs_headreader *hr);

/* Stops and joins the thread, closes every connection it still holds and gives every tag back
 * through fn with fd -1 (those waiting in drain included: their fds are closed too). NULL-safe. */
void cs_headreader_free(cs_headreader *hr, cs_head_done_fn fn, void *ctx);

#endif
