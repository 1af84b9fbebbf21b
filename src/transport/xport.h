/* SPDX-License-Identifier: Apache-2.0 */
/* The one transport under every server connection: a non-blocking socket, plaintext or TLS, read
 * and written through the same four operations, so the head reader, the stream I/O threads and
 * the test servers have one I/O path each, whatever the port speaks.
 *
 *   cs_xport_read     bytes the peer sent (TLS: decrypted)
 *   cs_xport_writev   a gather write: takes bytes from iov in order and says how many it took
 *   cs_xport_pending  bytes taken that still wait for the socket
 *   cs_xport_shutdown ends our direction (TLS: close_notify first)
 *
 * Plaintext: read(2) and writev(2) on the socket; nothing is ever pending.
 *
 * TLS, records built in user space (the usual case): OpenSSL seals what writev takes into records
 * of up to 16 KiB, which it writes into the transport's own output buffer rather than into the
 * socket one record per write(2); writev then sends that buffer with as few write(2) calls as the
 * socket takes. The buffer (the calling thread's, CS_XPORT_OUT_MAX and a record's framing, shared
 * by every connection that thread writes; what the socket refuses is copied into one of the
 * connection's own until it is out) holds at most CS_XPORT_OUT_MAX bytes, so
 * many queued messages become a few large sends, and what the socket refused stays pending for
 * the next cs_xport_writev (an empty one flushes) once the socket is writable. Because OpenSSL's
 * output always fits, SSL_write never meets a full socket, and OpenSSL's retry rule (after
 * SSL_ERROR_WANT_WRITE, the same buffer again) never applies: the caller may lay out a different
 * iov on every call, at frame boundaries, exactly as for plaintext.
 *
 * TLS in the kernel (kTLS): the context asks for it (SSL_OP_ENABLE_KTLS). Where the kernel has the
 * TLS upper-layer protocol and the cipher suits it, OpenSSL hands the connection's send keys to the
 * socket during the handshake; cs_xport_tls_ready then sees it and writes go to the socket as
 * plaintext writev(2), which the kernel seals. Elsewhere (cs_xport_ktls_probe says why) the
 * records are built in user space as above. Reads always go through SSL_read.
 *
 * Threads: a transport is used by one thread at a time (the head reader, then the stream I/O
 * thread it is handed to); nothing here locks.
 *
 * Errors: CS_XP_FAIL means the connection is unusable (reset, TLS failure or a write after the
 * peer closed: never SIGPIPE, MSG_NOSIGNAL on plaintext, the server ignores SIGPIPE for TLS);
 * OpenSSL's error queue is left empty by every call. */
#ifndef CS_TRANSPORT_XPORT_H
#define CS_TRANSPORT_XPORT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>
#include <sys/uio.h>

typedef struct ssl_st SSL;
typedef struct ssl_ctx_st SSL_CTX;

/* Results of cs_xport_read and cs_xport_writev besides a byte count. */
#define CS_XP_AGAIN (-1) /* read: nothing now; wait for input (and for output when pending) */
#define CS_XP_FAIL (-2)  /* the connection failed or the peer reset it */

/* TLS output buffer bound: what writev takes before it stops and waits for the socket. */
#define CS_XPORT_OUT_MAX (64u * 1024u)

typedef struct cs_xport cs_xport;

typedef struct cs_xport_ops {
    ssize_t (*read)(cs_xport *x, void *buf, size_t len);
    ssize_t (*writev)(cs_xport *x, const struct iovec *iov, int n);
    size_t (*pending)(const cs_xport *x);
    void (*shutdown)(cs_xport *x);
} cs_xport_ops;

struct cs_xport {
    const cs_xport_ops *ops;
    int fd;   /* owned: closed by cs_xport_free */
    SSL *ssl; /* NULL: plaintext; owned */
    /* TLS, user-space records: sealed bytes not yet on the socket, out[off..len) of cap. Between
     * operations NULL (nothing pending) or the connection's own copy of what the socket refused
     * (out_own); during one, possibly the calling thread's sealing buffer. */
    uint8_t *out;
    size_t out_off, out_len, out_cap;
    bool out_own;
    bool ktls_tx; /* the kernel seals what is written */
};

/* A plaintext transport on fd (non-blocking, connected): the caller's fd is now the transport's.
 * NULL when out of memory (fd is then still the caller's). */
cs_xport *cs_xport_plain(int fd);

/* A TLS server transport on fd with a new SSL from ctx, not handshaken yet: run
 * cs_xport_tls_accept until it says 1. NULL when out of memory or OpenSSL refuses (fd is then
 * still the caller's). */
cs_xport *cs_xport_tls_server(int fd, SSL_CTX *ctx);

/* Drives the TLS handshake: 1 done (the transport now reads and writes application data), 0 not
 * yet: wait for input, 2 not yet: wait for the socket to take output, -1 failed (why: OpenSSL's
 * reason, "connection closed" or "unknown"; a static string). */
int cs_xport_tls_accept(cs_xport *x, const char **why);

/* Closes the socket and frees the TLS state and the buffers; NULL is fine. */
void cs_xport_free(cs_xport *x);

/* Whether this kernel seals TLS records itself: true, or false with why ("the kernel has no TLS
 * upper-layer protocol (TCP_ULP tls: No such file or directory)"). Asked once per process (a
 * loopback socket pair); any thread. */
bool cs_xport_ktls_probe(const char **why);

static inline ssize_t cs_xport_read(cs_xport *x, void *buf, size_t len)
{
    return x->ops->read(x, buf, len);
}

/* Takes bytes from iov[0..n) in order; returns how many (0 when the socket and the TLS buffer are
 * full, or n is 0: an empty call flushes what is pending) or CS_XP_FAIL. Taken bytes are the
 * transport's: the caller may reuse their memory at once. Never blocks. */
static inline ssize_t cs_xport_writev(cs_xport *x, const struct iovec *iov, int n)
{
    return x->ops->writev(x, iov, n);
}

static inline size_t cs_xport_pending(const cs_xport *x)
{
    return x->ops->pending(x);
}

/* Ends our sending direction: TLS sends close_notify (best effort, as far as the socket takes it
 * now), then shutdown(SHUT_WR). Reading goes on. */
static inline void cs_xport_shutdown(cs_xport *x)
{
    x->ops->shutdown(x);
}

#endif
