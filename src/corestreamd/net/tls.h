/* SPDX-License-Identifier: Apache-2.0 */
/* TLS on the server's port (--tls-cert, --tls-key, --tls-client-ca): the server's own SSL_CTX
 * (docs/STREAM-THREADS.md), used by the head reader to make each connection's SSL. Errors
 * name the file and the cause; TLS 1.2 is the minimum; SIGHUP builds a fresh context and swaps
 * it in for new connections, the open ones keep the one they were made from. */
#ifndef CS_CORESTREAMD_TLS_H
#define CS_CORESTREAMD_TLS_H

#include <openssl/ssl.h>
#include <pthread.h>
#include <stdint.h>

#include "common/err.h"

/* A server context: cert (chain) and key, TLS 1.2 minimum, ALPN http/1.1, and with client_ca
 * (NULL or "" for none) client certificates required and verified against it
 * (SSL_VERIFY_PEER | SSL_VERIFY_FAIL_IF_NO_PEER_CERT). NULL with err naming the file and the
 * cause: `--tls-cert <f>: <cause>`, `--tls-key <f>: <cause>`, `--tls-key <f> does not match
 * --tls-cert <g>`, `--tls-client-ca <f>: <cause>`. Any thread. */
SSL_CTX *cs_tls_ctx_new(const char *cert, const char *key, const char *client_ca, cs_err *err);

/* The context in force, behind a mutex: a reload swaps it while the head reader makes SSLs. */
typedef struct cs_tls_store {
    pthread_mutex_t mu;
    SSL_CTX *ctx;
} cs_tls_store;

/* Builds the first context (cs_tls_ctx_new). -1 with err; destroy it either way. */
int cs_tls_store_init(cs_tls_store *st, const char *cert, const char *key, const char *client_ca, cs_err *err);
/* The context in force with a reference the caller frees (SSL_CTX_free once its SSL_new is done).
 * Any thread. */
SSL_CTX *cs_tls_store_get(cs_tls_store *st);
/* Puts fresh (the caller's reference, now the store's) in force; the old one is freed when its
 * last connection goes. Any thread. */
void cs_tls_store_swap(cs_tls_store *st, SSL_CTX *fresh);
void cs_tls_store_destroy(cs_tls_store *st);

/* When the certificate ctx serves stops being valid (its notAfter), in seconds since the Unix
 * epoch, for corestreamd_tls_certificate_not_after_timestamp_seconds; 0 when ctx is NULL or has none. Any
 * thread. */
int64_t cs_tls_not_after(SSL_CTX *ctx);

/* The X.509 subject of the certificate in cert, for the logs ("CN=localhost"), or "?". */
void cs_tls_subject(const char *cert, char *buf, size_t len);

#endif
