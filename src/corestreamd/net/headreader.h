/* SPDX-License-Identifier: Apache-2.0 */
/* The head reader (`cs-heads`): every accepted connection, plaintext or TLS, data or admin
 * listener, spends its life here until it is answered and closed or upgraded to a /stream
 * subscriber. One thread with its own epoll:
 *
 * - Every connection is read and written through its transport (xport.h), plaintext or TLS.
 * - TLS (cfg.tls): the first byte is peeked at. A TLS handshake record (0x16) gets a non-blocking
 *   handshake (cs_xport_tls_accept) on the context in force (cfg.tls_ctx); any other first byte is a plaintext client
 *   on the TLS port, answered in plaintext `400`, with the header line
 *   CS_HTTP_TLS_REQUIRED_HEADER (by which libremoteledger names the cause) and the body `this port
 *   speaks TLS: use wss:// or https://`, then closed. A failed handshake is one DEBUG line (`TLS
 *   handshake failed`, the peer, OpenSSL's reason).
 * - The head is read by the one request parser (httpparse.h), byte by
 *   byte as it arrives, under the server's limits (cs_head_limits). What it refuses (a limit
 *   passed: 414, 431, 400 `too many query parameters`; RFC 9112's rules: 400, 505) is answered
 *   with its status and text and `connection: close`, one DEBUG line naming the peer, then the
 *   connection is closed.
 * - A complete head goes to cfg.judge, which answers it: CS_HEAD_ANSWER (then close),
 *   CS_HEAD_KEEP (then the next request on the same connection is read: keep-alive, at most
 *   cfg.keepalive_max requests per connection, the next head under a fresh deadline),
 *   CS_HEAD_UPGRADE (a 101: the connection leaves through cfg.upgraded with the bytes read past
 *   its head) or CS_HEAD_LATER (the answer is made on another thread: the connection waits,
 *   neither read nor timed, until that thread gives it with cs_headreader_answer).
 * - Deadlines: from add, the handshake and the head must be complete within cfg.timeout_ns (and
 *   each kept-alive request's head within cfg.timeout_ns of the previous answer), and an answer
 *   being written must make progress at least once every cfg.timeout_ns, or the connection is
 *   closed. A closing answer is followed by a lingering close: the write side is
 *   shut, and what the peer still sends is read and dropped for up to 2 s (1 MiB), so a request
 *   body the server refused does not turn into a reset that destroys the answer before the peer
 *   reads it.
 *
 * Every answer's bytes come from the judge or from httpanswer.h: this file formats none.
 *
 * Threads: cs_headreader_add and cs_headreader_drain from the accept loop (the one thread that
 * owns the tags); the judge, upgraded, discard, tls_ctx and ready callbacks run on cs-heads. */
#ifndef CS_CORESTREAMD_HEADREADER_H
#define CS_CORESTREAMD_HEADREADER_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "common/err.h"
#include "common/invariant.h"
#include "corestreamd/net/httpparse.h"
#include "transport/xport.h"

typedef struct cs_headreader cs_headreader;

/* judge's verdicts. */
#define CS_HEAD_ANSWER 0  /* *resp is the answer; the connection is closed after it */
#define CS_HEAD_UPGRADE 1 /* *resp is a 101 */
#define CS_HEAD_KEEP 2    /* *resp is the answer; the connection then waits for its next request */
#define CS_HEAD_LATER 3   /* no answer yet (*resp NULL): *arg goes to cfg.later */

/* A connection whose answer is being made elsewhere (CS_HEAD_LATER), until its answer is given. */
typedef struct cs_head_pending cs_head_pending;

typedef struct cs_headreader_config {
    cs_head_limits limits;
    bool tls; /* the port speaks TLS */
    unsigned keepalive_max; /* requests answered on one connection at most (CS_HEAD_KEEP) */
    /* All on the head reader's thread (tls_ctx TLS only):
     * tls_ctx: the context in force, with a reference the head reader frees after SSL_new.
     * judge: a complete head (read and checked by httpparse.h, within the limits; borrowed for
     *   the call) of the connection fd; last: the connection's keep-alive
     *   allowance ends with this request, so its answer must be CS_HEAD_ANSWER (and say
     *   `connection: close`, as every answer the connection is closed after must). It puts the
     *   whole answer, malloc'd, in *resp (NULL: out of memory, the connection
     *   is closed) and returns CS_HEAD_ANSWER or CS_HEAD_KEEP, or CS_HEAD_UPGRADE when the
     *   answer is a 101: *arg is then the caller's, given to upgraded (or to discard if the 101
     *   cannot be written).
     * upgraded: the 101 is out. The connection's transport x (cs_xport_free frees it) and tag
     *   are the caller's from now on; early[0..n) are bytes read past the head (WebSocket frames sent
     *   early), valid during the call only. The connection no longer counts as held.
     * discard: frees an arg whose connection ended before upgraded (the tag still comes back
     *   through drain or cs_headreader_free, as any other).
     * later: after judge returned CS_HEAD_LATER with *resp NULL: the connection p now waits for
     *   its answer, and arg (judge's *arg) is the caller's. It must hand both to the thread that
     *   makes the answer and return, never block; that thread must give p its answer with
     *   cs_headreader_answer, exactly once, and before cs_headreader_free. */
    SSL_CTX *(*tls_ctx)(void *ctx);
    int (*judge)(void *ctx, int fd, void *tag, const cs_http_head *head, bool last, char **resp,
                 size_t *resp_len, void **arg);
    void (*upgraded)(void *ctx, cs_xport *x, void *tag, const unsigned char *early, size_t n, void *arg);
    void (*discard)(void *ctx, void *arg);
    void (*later)(void *ctx, cs_head_pending *p, void *arg);
    int64_t timeout_ns; /* from add until the head must be complete */
    /* Head reader thread: tags are waiting in cs_headreader_drain. It must only wake the thread
     * that drains; it is called once per batch, not per connection. */
    void (*ready)(void *ctx);
    void *ctx;
} cs_headreader_config;

/* Starts the thread. -1 with err on failure (epoll, eventfd, thread creation). */
int cs_headreader_start(cs_headreader **out, const cs_headreader_config *cfg, cs_err *err);

/* Takes fd (an accepted, non-blocking socket) and tag (the caller's, opaque here, given back by
 * drain exactly once) for reading. 0, or -1 out of memory: the caller still owns both. */
int cs_headreader_add(cs_headreader *hr, int fd, void *tag);

/* The answer to a CS_HEAD_LATER request: resp[0..len) (malloc'd; the head reader frees it), or
 * NULL to close the connection without one. keep: the connection then reads its next request
 * (keep-alive rules as for CS_HEAD_KEEP); otherwise it is closed after the answer. Any thread,
 * exactly once per later call, before cs_headreader_free; p is not the caller's afterwards. */
void cs_headreader_answer(cs_headreader *hr, cs_head_pending *p, char *resp, size_t len, bool keep);

/* A connection the head reader closed (answered, past its deadline, failed or gone): its tag
 * comes back, exactly once. (An upgraded connection's tag leaves with it through upgraded.) */
typedef void (*cs_head_done_fn)(void *ctx, void *tag);

/* Calls fn for every connection closed since the last drain, in order, on the caller's thread.
 * Returns how many. */
size_t cs_headreader_drain(cs_headreader *hr, cs_head_done_fn fn, void *ctx);

/* The owner record of the head reader's thread (cs-heads), bound by it as it starts: what the
 * checks of calls confined to it (the judge's and later's work) compare with
 * (common/invariant.h). Any thread. */
cs_owner *cs_headreader_owner(cs_headreader *hr);

/* Connections the head reader holds (reading, answering, or waiting in drain). Any thread. */
size_t cs_headreader_holding(cs_headreader *hr);

/* Stops and joins the thread, closes every connection it still holds and gives every tag back
 * through fn (those waiting in drain, and those whose answers arrived meanwhile, included). Every
 * CS_HEAD_LATER connection must have been answered first. NULL-safe. */
void cs_headreader_free(cs_headreader *hr, cs_head_done_fn fn, void *ctx);

#endif
