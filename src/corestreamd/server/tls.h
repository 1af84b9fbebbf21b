/* TLS on the server's port (--tls-cert, --tls-key, --tls-client-ca): libwebsockets terminates it
 * on the I/O thread with OpenSSL; this is what the server checks and sets on lws' SSL_CTX itself,
 * so that errors name the file and the cause, TLS 1.2 is the minimum, and SIGHUP can swap the
 * certificate for new connections without dropping the open ones. */
#ifndef CS_CORESTREAMD_TLS_H
#define CS_CORESTREAMD_TLS_H

#include <openssl/ssl.h>

#include "common/err.h"

/* Loads cert (PEM, chain allowed) and key into a scratch context and checks that they match and
 * that the client CA (NULL for none) loads. Errors: `--tls-cert <f>: <cause>`, `--tls-key <f>:
 * <cause>`, `--tls-key <f> does not match --tls-cert <g>`, `--tls-client-ca <f>: <cause>`. Any
 * thread. */
int cs_tls_check(const char *cert, const char *key, const char *client_ca, cs_err *err);

/* Makes ctx serve cert and key from now on (connections already open keep theirs), TLS 1.2 or
 * later. Only on the thread that creates the connections (lws' I/O thread). */
int cs_tls_apply(SSL_CTX *ctx, const char *cert, const char *key, cs_err *err);

/* The X.509 subject of the certificate in cert, for the logs ("CN=localhost"), or "?". */
void cs_tls_subject(const char *cert, char *buf, size_t len);

#endif
