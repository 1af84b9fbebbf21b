/* SPDX-License-Identifier: Apache-2.0 */
#include "corestreamd/net/tls.h"

#include <errno.h>
#include <fcntl.h>
#include <stdbool.h>
#include <openssl/err.h>
#include <openssl/pem.h>
#include <openssl/x509.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

/* The oldest OpenSSL error in words, queue cleared: the system's for a file it could not read
 * ("Is a directory"); for one that holds no `what` it can parse ("certificate", "private key"),
 * "no PEM <what> in it (no start line)", which also covers a key given as the certificate and the
 * other way round; else OpenSSL's reason ("key values mismatch"). */
static const char *ssl_cause(char *buf, size_t len, const char *what)
{
    unsigned long e = ERR_peek_error();
    const char *reason = e ? ERR_reason_error_string(e) : NULL;
    if (e && ERR_GET_LIB(e) == ERR_LIB_SYS)
        snprintf(buf, len, "%s", strerror(ERR_GET_REASON(e)));
    else if (e && (ERR_GET_LIB(e) == ERR_LIB_PEM || ERR_GET_LIB(e) == ERR_LIB_OSSL_DECODER))
        snprintf(buf, len, "no PEM %s in it (%s)", what, reason ? reason : "unreadable");
    else
        snprintf(buf, len, "%s", reason ? reason : "unknown OpenSSL error");
    ERR_clear_error();
    return buf;
}

/* A file a flag names is opened here first, so that a missing, forbidden or directory one is
 * reported with the system's cause ("No such file or directory", "Permission denied", "Is a
 * directory"), not OpenSSL's. */
static int readable(const char *flag, const char *path, cs_err *err)
{
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    struct stat st;
    int e = fd < 0 ? errno : fstat(fd, &st) != 0 ? errno : S_ISDIR(st.st_mode) ? EISDIR : 0;
    if (fd >= 0)
        close(fd);
    return e ? cs_err_set(err, 0, "%s %s: %s", flag, path, strerror(e)) : 0;
}

static int load_pair(SSL_CTX *ctx, const char *cert, const char *key, cs_err *err)
{
    char why[256];
    if (readable("--tls-cert", cert, err) != 0 || readable("--tls-key", key, err) != 0)
        return -1;
    ERR_clear_error();
    if (SSL_CTX_use_certificate_chain_file(ctx, cert) != 1)
        return cs_err_set(err, 0, "--tls-cert %s: %s", cert, ssl_cause(why, sizeof why, "certificate"));
    bool loaded = SSL_CTX_use_PrivateKey_file(ctx, key, SSL_FILETYPE_PEM) == 1;
    unsigned long e = ERR_peek_error();
    if (!loaded && !(ERR_GET_LIB(e) == ERR_LIB_X509 && ERR_GET_REASON(e) == X509_R_KEY_VALUES_MISMATCH))
        return cs_err_set(err, 0, "--tls-key %s: %s", key, ssl_cause(why, sizeof why, "private key"));
    if (!loaded || SSL_CTX_check_private_key(ctx) != 1) {
        ERR_clear_error();
        return cs_err_set(err, 0, "--tls-key %s does not match --tls-cert %s", key, cert);
    }
    return 0;
}

/* ALPN: HTTP/1.1 only. A client offering only h2 gets no ALPN answer and carries on with
 * HTTP/1.1 as a client without ALPN would (OpenSSL's NOACK). */
static int select_alpn(SSL *ssl, const unsigned char **out, unsigned char *outlen, const unsigned char *in,
                       unsigned int inlen, void *arg)
{
    (void)ssl;
    (void)arg;
    static const unsigned char want[] = "\x08http/1.1";
    unsigned char *sel = NULL;
    unsigned char sel_len = 0;
    if (SSL_select_next_proto(&sel, &sel_len, want, sizeof want - 1, in, inlen) != OPENSSL_NPN_NEGOTIATED)
        return SSL_TLSEXT_ERR_NOACK;
    *out = sel;
    *outlen = sel_len;
    return SSL_TLSEXT_ERR_OK;
}

SSL_CTX *cs_tls_ctx_new(const char *cert, const char *key, const char *client_ca, cs_err *err)
{
    SSL_CTX *ctx = SSL_CTX_new(TLS_server_method());
    if (!ctx) {
        cs_err_set(err, 0, "tls: out of memory");
        return NULL;
    }
    char why[256];
    int rc = 0;
    if (SSL_CTX_set_min_proto_version(ctx, TLS1_2_VERSION) != 1)
        rc = cs_err_set(err, 0, "tls: cannot require TLS 1.2");
    if (rc == 0)
        rc = load_pair(ctx, cert, key, err);
    if (rc == 0 && client_ca && *client_ca && readable("--tls-client-ca", client_ca, err) != 0)
        rc = -1;
    if (rc == 0 && client_ca && *client_ca) {
        if (SSL_CTX_load_verify_locations(ctx, client_ca, NULL) != 1) {
            rc = cs_err_set(err, 0, "--tls-client-ca %s: %s", client_ca, ssl_cause(why, sizeof why, "certificate"));
        } else {
            STACK_OF(X509_NAME) *names = SSL_load_client_CA_file(client_ca);
            if (names)
                SSL_CTX_set_client_CA_list(ctx, names); /* the CertificateRequest names them */
            ERR_clear_error();
            SSL_CTX_set_verify(ctx, SSL_VERIFY_PEER | SSL_VERIFY_FAIL_IF_NO_PEER_CERT, NULL);
        }
    }
    if (rc != 0) {
        SSL_CTX_free(ctx);
        return NULL;
    }
    /* OpenSSL's buffers are kept (no SSL_MODE_RELEASE_BUFFERS): a streaming connection would free
     * and reallocate them at every message. Its records go to the transport's own buffer, which
     * always takes them (transport/xport.h), so no write is ever retried. */
    SSL_CTX_set_session_cache_mode(ctx, SSL_SESS_CACHE_OFF);
    /* TLS 1.3: AES-128-GCM first, as Go's crypto/tls orders it on hardware with AES instructions
     * (about 9 % less work per byte than AES-256-GCM here, for every subscriber's copy of every
     * ledger), unless the client puts ChaCha20-Poly1305 first, as one without them does. */
    static const char suites[] = "TLS_AES_128_GCM_SHA256:TLS_AES_256_GCM_SHA384:TLS_CHACHA20_POLY1305_SHA256";
    if (SSL_CTX_set_ciphersuites(ctx, suites) != 1) {
        SSL_CTX_free(ctx);
        cs_err_set(err, 0, "tls: cannot set the TLS 1.3 cipher suites");
        return NULL;
    }
    SSL_CTX_set_options(ctx, SSL_OP_CIPHER_SERVER_PREFERENCE | SSL_OP_PRIORITIZE_CHACHA);
    /* No resumption (clients reconnect rarely) and no renegotiation: a stranger's storm of
     * handshakes costs one handshake each and no tickets, and a write never waits on a read. */
    SSL_CTX_set_num_tickets(ctx, 0);
    SSL_CTX_set_options(ctx, SSL_OP_NO_TICKET | SSL_OP_NO_RENEGOTIATION);
    SSL_CTX_set_alpn_select_cb(ctx, select_alpn, NULL);
    return ctx;
}

int cs_tls_store_init(cs_tls_store *st, const char *cert, const char *key, const char *client_ca, cs_err *err)
{
    pthread_mutex_init(&st->mu, NULL);
    st->ctx = cs_tls_ctx_new(cert, key, client_ca, err);
    return st->ctx ? 0 : -1;
}

SSL_CTX *cs_tls_store_get(cs_tls_store *st)
{
    pthread_mutex_lock(&st->mu);
    SSL_CTX *c = st->ctx;
    if (c)
        SSL_CTX_up_ref(c);
    pthread_mutex_unlock(&st->mu);
    return c;
}

void cs_tls_store_swap(cs_tls_store *st, SSL_CTX *fresh)
{
    pthread_mutex_lock(&st->mu);
    SSL_CTX *old = st->ctx;
    st->ctx = fresh;
    pthread_mutex_unlock(&st->mu);
    SSL_CTX_free(old); /* connections made from it hold their own references */
}

void cs_tls_store_destroy(cs_tls_store *st)
{
    SSL_CTX_free(st->ctx);
    st->ctx = NULL;
    pthread_mutex_destroy(&st->mu);
}

int64_t cs_tls_not_after(SSL_CTX *ctx)
{
    X509 *x = ctx ? SSL_CTX_get0_certificate(ctx) : NULL;
    const ASN1_TIME *t = x ? X509_get0_notAfter(x) : NULL;
    struct tm tm;
    if (!t || ASN1_TIME_to_tm(t, &tm) != 1)
        return 0;
    return (int64_t)timegm(&tm);
}

void cs_tls_subject(const char *cert, char *buf, size_t len)
{
    snprintf(buf, len, "?");
    FILE *f = fopen(cert, "r");
    if (!f)
        return;
    X509 *x = PEM_read_X509(f, NULL, NULL, NULL);
    fclose(f);
    if (!x) {
        ERR_clear_error();
        return;
    }
    X509_NAME_oneline(X509_get_subject_name(x), buf, (int)len);
    X509_free(x);
}
