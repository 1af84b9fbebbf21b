/* SPDX-License-Identifier: Apache-2.0 */
/* libremoteledger internals: the one transport under ws:// and wss://.
 *
 * A non-blocking TCP socket the library owns (TCP_NODELAY, keepalive as Go's dialer sets it),
 * optionally wrapped in an OpenSSL session driven directly on that socket: TLS 1.2 at least, SNI,
 * hostname or IP verification against the expected name, the system CA paths unless a CA file or
 * directory is given, an optional client certificate. Everything runs on the calling thread;
 * waits poll() the socket together with a wake descriptor (an eventfd) that another thread may
 * signal (rl_stream_cancel), so no wait outlives a cancellation.
 *
 * Errors are words, never an OpenSSL code alone: the reason is what the verifier or the alert said
 * ("certificate verify failed: hostname mismatch for box", "tls handshake failed: tlsv13 alert
 * certificate required"). Writes never raise SIGPIPE (send with MSG_NOSIGNAL, also under TLS). */
#ifndef RLI_TRANSPORT_H
#define RLI_TRANSPORT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

typedef struct ssl_ctx_st SSL_CTX;
typedef struct ssl_st SSL;

/* What TLS is asked to do; strings are borrowed for the call. NULL or "" means unset. */
typedef struct rli_tls_config {
    const char *ca_file, *ca_dir; /* trust these instead of the system's CA paths */
    const char *server_name;      /* name to send (SNI) and verify; default: the URL's host */
    const char *cert_file;        /* client certificate chain (PEM) */
    const char *key_file;         /* its key (PEM); default: cert_file */
    bool insecure_skip_verify;
} rli_tls_config;

typedef enum rli_tp_status {
    RLI_TP_OK = 0,      /* done (for reads and writes: *n bytes, n > 0) */
    RLI_TP_AGAIN = 1,   /* would block: rli_tp_wait, then retry */
    RLI_TP_EOF = 2,     /* the peer ended the stream (a TLS close_notify or a bare FIN) */
    RLI_TP_ERROR = -1,  /* see err and err_tls */
    RLI_TP_TIMEOUT = -2,/* the deadline passed */
    RLI_TP_WOKEN = -3,  /* the wake descriptor was signalled */
} rli_tp_status;

typedef struct rli_tp {
    int fd;
    int wake_fd; /* borrowed */
    SSL_CTX *ctx;
    SSL *ssl;
    uint8_t *cbuf;     /* TLS: ciphertext read from the socket, not yet taken by OpenSSL */
    size_t cb_off, cb_len;
    bool tls_up;       /* handshake complete and no fatal error since: close_notify may be sent */
    bool rd_want_write;/* the last TLS read needs the socket writable to go on */
    bool wr_want_read; /* the last TLS write needs it readable */
    bool got_data;     /* TLS data has been read: later alerts are no longer the handshake's */
    bool err_tls;      /* the failure was TLS's (certificate, alert, not TLS at all) */
    char err[512];
} rli_tp;

/* An eventfd for rli_tp_wake / the wake_fd of rli_tp_init; -1 on failure. */
int rli_tp_wake_new(void);
/* Signals it (async-signal-safe; any thread). */
void rli_tp_wake(int wake_fd);

void rli_tp_init(rli_tp *t, int wake_fd);
/* Closes the socket (after a best-effort close_notify) and frees the TLS state. Idempotent. */
void rli_tp_close(rli_tp *t);

/* Resolves host (blocking getaddrinfo) and connects to the first address that answers, by
 * deadline_ms (CLOCK_MONOTONIC milliseconds; < 0 for none). Errors are Go's words, e.g.
 * "dial tcp 127.0.0.1:1: connect: connection refused". */
rli_tp_status rli_tp_connect(rli_tp *t, const char *host, int port, int64_t deadline_ms);

/* Runs the TLS client handshake on the connected socket. host is the URL's host, used when
 * cfg->server_name is unset. Errors (err_tls set) are worded
 *   certificate verify failed: <verifier's reason>[ for <expected name>]
 *   tls handshake failed: <the alert or the reason>
 *   tls handshake failed: the server did not answer TLS (is it plain ws://?)
 *   tls: <file>: <why it cannot be loaded>  */
rli_tp_status rli_tp_tls_start(rli_tp *t, const rli_tls_config *cfg, const char *host, int64_t deadline_ms);

/* Reads up to cap bytes (under TLS: as many records as are there, until cap). */
rli_tp_status rli_tp_read(rli_tp *t, uint8_t *buf, size_t cap, size_t *n);
/* Writes up to len bytes; after AGAIN retry with the same bytes. */
rli_tp_status rli_tp_write(rli_tp *t, const uint8_t *p, size_t len, size_t *n);

/* Waits until the socket is ready for what the caller wants to do next (want_read: read data;
 * want_write: write data; the TLS session's own wants are folded in), the wake descriptor is
 * signalled, or deadline_ms (< 0: none). Returns OK, TIMEOUT, WOKEN or ERROR. */
rli_tp_status rli_tp_wait(rli_tp *t, bool want_read, bool want_write, int64_t deadline_ms);

/* Busy-polls the socket for up to spin_ns before the caller blocks in rli_tp_wait: polls it (and
 * the wake descriptor) without sleeping until something is readable or the time is up. Returns
 * true when the socket (or the wake descriptor) is ready, false when the time ran out. Only for
 * reads that want the socket readable (not a TLS read that waits to write). */
bool rli_tp_spin(rli_tp *t, int64_t spin_ns);

/* CLOCK_MONOTONIC in milliseconds. */
int64_t rli_mono_ms(void);

#endif
