#include "corestreamd/server/tls.h"

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

int cs_tls_check(const char *cert, const char *key, const char *client_ca, cs_err *err)
{
    SSL_CTX *ctx = SSL_CTX_new(TLS_server_method());
    if (!ctx)
        return cs_err_set(err, 0, "tls: out of memory");
    int rc = load_pair(ctx, cert, key, err);
    if (rc == 0 && client_ca && *client_ca && SSL_CTX_load_verify_locations(ctx, client_ca, NULL) != 1) {
        char why[256];
        rc = cs_err_set(err, 0, "--tls-client-ca %s: %s", client_ca, ssl_cause(why, sizeof why));
    }
    SSL_CTX_free(ctx);
    return rc;
}

int cs_tls_apply(SSL_CTX *ctx, const char *cert, const char *key, cs_err *err)
{
    if (SSL_CTX_set_min_proto_version(ctx, TLS1_2_VERSION) != 1)
        return cs_err_set(err, 0, "tls: cannot require TLS 1.2");
    return load_pair(ctx, cert, key, err);
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
