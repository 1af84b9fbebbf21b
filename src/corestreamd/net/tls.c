#include "corestreamd/net/tls.h"

#include <openssl/err.h>
#include <openssl/pem.h>
#include <openssl/x509.h>
#include <stdio.h>
#include <string.h>

/* The oldest OpenSSL error in words ("no such file", "key values mismatch"), queue cleared. */
static const char *ssl_cause(char *buf, size_t len)
{
    unsigned long e = ERR_peek_error();
    const char *reason = e ? ERR_reason_error_string(e) : NULL;
    snprintf(buf, len, "%s", reason ? reason : "unknown OpenSSL error");
    ERR_clear_error();
    return buf;
}

static int load_pair(SSL_CTX *ctx, const char *cert, const char *key, cs_err *err)
{
    char why[256];
    ERR_clear_error();
    if (SSL_CTX_use_certificate_chain_file(ctx, cert) != 1)
        return cs_err_set(err, 0, "--tls-cert %s: %s", cert, ssl_cause(why, sizeof why));
    if (SSL_CTX_use_PrivateKey_file(ctx, key, SSL_FILETYPE_PEM) != 1)
        return cs_err_set(err, 0, "--tls-key %s: %s", key, ssl_cause(why, sizeof why));
    if (SSL_CTX_check_private_key(ctx) != 1) {
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
    if (rc == 0 && client_ca && *client_ca) {
        if (SSL_CTX_load_verify_locations(ctx, client_ca, NULL) != 1) {
            rc = cs_err_set(err, 0, "--tls-client-ca %s: %s", client_ca, ssl_cause(why, sizeof why));
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
    /* Messages are written whole from a buffer that does not move (the cs_msg): the same pointer
     * is offered again after WANT_WRITE, so neither partial nor moving writes are needed. Buffers
     * are kept (no SSL_MODE_RELEASE_BUFFERS): a streaming connection would free and reallocate
     * its write buffer at every message. */
    SSL_CTX_set_session_cache_mode(ctx, SSL_SESS_CACHE_OFF);
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
