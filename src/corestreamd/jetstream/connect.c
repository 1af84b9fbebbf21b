/* SPDX-License-Identifier: Apache-2.0 */
#include "corestreamd/jetstream/connect.h"

#include <openssl/crypto.h>
#include <stdio.h>
#include <string.h>

#include "common/log.h"
#include "common/secretfile.h"
#include "corestreamd/jetstream/nkey.h"
#include "corestreamd/jetstream/servers.h"

/* After connecting: a permission violation, a slow consumer, anything nats.c reports on its own
 * thread. Logged, never fatal (the publisher and the edge notice their own consequences). */
static void on_async_error(natsConnection *nc, natsSubscription *sub, natsStatus s, void *closure)
{
    (void)sub;
    const char *text = NULL;
    natsConnection_GetLastError(nc, &text);
    CS_LOG(CS_LOG_WARN, "jetstream NATS error", KV_S("client", (const char *)closure),
           KV_S("status", natsStatus_GetText(s)), KV_S("error", text && *text ? text : natsStatus_GetText(s)));
}

/* nats.c's last error without the "(conn.c:733): " of where it was raised. */
static const char *last_error(void)
{
    const char *last = nats_GetLastError(NULL);
    if (last && last[0] == '(') {
        const char *close = strstr(last, "): ");
        if (close && strspn(last + 1, "abcdefghijklmnopqrstuvwxyz_.:0123456789") == (size_t)(close - last - 1))
            last = close + 3;
    }
    return last;
}

static int flag_fail(cs_err *err, const char *flag, const char *path, natsStatus s)
{
    const char *last = last_error();
    return cs_err_set(err, 0, "--%s %s: %s", flag, path, last && *last ? last : natsStatus_GetText(s));
}

static bool given(const char *s)
{
    return s && *s;
}

static int set_credentials(natsOptions *o, const cs_js_auth *a, cs_err *err)
{
    natsStatus s = NATS_OK;
    if (given(a->creds) && (s = natsOptions_SetUserCredentialsFromFiles(o, a->creds, NULL)) != NATS_OK)
        return flag_fail(err, "jetstream-creds", a->creds, s);
    if (given(a->nkey_seed)) {
        char pub[CS_NKEY_TEXT_MAX];
        if (cs_nkey_public_from_seed_file(a->nkey_seed, pub, err) != 0)
            return cs_err_prefix(err, "--jetstream-nkey-seed ");
        if ((s = natsOptions_SetNKeyFromSeed(o, pub, a->nkey_seed)) != NATS_OK)
            return flag_fail(err, "jetstream-nkey-seed", a->nkey_seed, s);
    }
    if (given(a->user)) {
        char pw[1024];
        if (cs_read_secret_line(a->password_file, pw, sizeof pw, err) != 0)
            return cs_err_prefix(err, "--jetstream-password-file %s: ", a->password_file);
        s = natsOptions_SetUserInfo(o, a->user, pw);
        OPENSSL_cleanse(pw, sizeof pw);
        if (s != NATS_OK)
            return flag_fail(err, "jetstream-user", a->user, s);
    }
    return 0;
}

static int set_tls(natsOptions *o, const cs_js_auth *a, cs_err *err)
{
    if (!cs_js_auth_tls(a))
        return 0;
    natsStatus s = natsOptions_SetSecure(o, true);
    if (s != NATS_OK)
        return cs_err_set(err, 0, "jetstream: TLS: %s", natsStatus_GetText(s));
    if (given(a->tls_ca) && (s = natsOptions_LoadCATrustedCertificates(o, a->tls_ca)) != NATS_OK)
        return flag_fail(err, "jetstream-tls-ca", a->tls_ca, s);
    if (given(a->tls_cert) && (s = natsOptions_LoadCertificatesChain(o, a->tls_cert, a->tls_key)) != NATS_OK) {
        char both[2048];
        snprintf(both, sizeof both, "%s with --jetstream-tls-key %s", a->tls_cert, a->tls_key);
        return flag_fail(err, "jetstream-tls-cert", both, s);
    }
    return 0;
}

int cs_js_options_new(natsOptions **out, const cs_js_conn_config *c, cs_err *err)
{
    natsOptions *o = NULL;
    natsStatus s = natsOptions_Create(&o);
    if (s == NATS_OK)
        s = cs_js_set_servers(o, c->urls);
    if (s == NATS_OK)
        s = natsOptions_SetName(o, c->name);
    if (s == NATS_OK)
        s = natsOptions_SetTimeout(o, c->timeout_ms);
    if (s == NATS_OK)
        s = natsOptions_SetErrorHandler(o, on_async_error, (void *)c->name);
    int rc = s == NATS_OK ? 0 : cs_err_set(err, 0, "jetstream: set up the connection to %s: %s", c->urls,
                                           natsStatus_GetText(s));
    if (rc == 0 && c->auth)
        rc = set_credentials(o, c->auth, err) == 0 && set_tls(o, c->auth, err) == 0 ? 0 : -1;
    if (rc != 0) {
        natsOptions_Destroy(o);
        o = NULL;
    }
    *out = o;
    return rc;
}

bool cs_js_refused(natsStatus s)
{
    return s == NATS_CONNECTION_AUTH_FAILED || s == NATS_SSL_ERROR || s == NATS_SECURE_CONNECTION_REQUIRED ||
           s == NATS_SECURE_CONNECTION_WANTED || s == NATS_NOT_PERMITTED;
}

static const char *refusal(natsStatus s)
{
    switch (s) {
    case NATS_CONNECTION_AUTH_FAILED:
        return "NATS refused the credentials (authorization violation; check --jetstream-user and "
               "--jetstream-password-file, --jetstream-nkey-seed or --jetstream-creds against the server's users)";
    case NATS_SSL_ERROR:
        return "TLS failed (check --jetstream-tls-ca against the server's certificate, and --jetstream-tls-cert "
               "and --jetstream-tls-key when the server verifies clients)";
    case NATS_SECURE_CONNECTION_REQUIRED:
        return "the server requires TLS (give --jetstream-tls-ca, or use a tls:// URL)";
    case NATS_SECURE_CONNECTION_WANTED:
        return "TLS was asked for but the server does not offer it";
    case NATS_NOT_PERMITTED:
        return "NATS refused the connection (not permitted)";
    default:
        return NULL;
    }
}

const char *cs_js_connect_cause(natsStatus s, bool tls, char *buf, size_t len)
{
    const char *last = last_error();
    const char *why = refusal(s);
    /* A server that verifies clients closes a connection without a certificate in the handshake:
     * nats.c then sees no answer to its first PING. */
    if (!why && tls && s == NATS_PROTOCOL_ERROR)
        why = "the server closed the connection during the TLS handshake (a server that verifies clients "
              "wants --jetstream-tls-cert and --jetstream-tls-key)";
    if (why)
        snprintf(buf, len, "%s: %s", why, last && *last ? last : natsStatus_GetText(s));
    else
        snprintf(buf, len, "%s%s%s", natsStatus_GetText(s), last && *last ? ": " : "", last && *last ? last : "");
    return buf;
}
