/* SPDX-License-Identifier: Apache-2.0 */
/* The core's ledger signing key (signing.h). */
#include "corestreamd/stream/signing.h"

#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "common/log.h"

struct cs_signing {
    pthread_mutex_t mu; /* guards key */
    cs_sig_signer *key;
    char *path;
    uint8_t run_len;
    char run[CS_WIRE_SIG_RUN_MAX];
};

static void log_loaded(const cs_sig_signer *key, const char *path)
{
    char hex[2 * CS_SIG_KEY_LEN + 1];
    cs_sig_key_hex(cs_sig_signer_key(key), hex);
    CS_LOG(CS_LOG_INFO, "signing key loaded", KV_S("public_key", hex), KV_S("file", path));
}

int cs_signing_new(cs_signing **out, const char *path, cs_err *err)
{
    *out = NULL;
    cs_signing *s = calloc(1, sizeof *s);
    if (!s || !(s->path = strdup(path))) {
        free(s);
        return cs_err_set(err, 0, "signing key: out of memory");
    }
    if (cs_sig_signer_load(path, &s->key, err)) {
        free(s->path);
        free(s);
        return -1;
    }
    pthread_mutex_init(&s->mu, NULL);
    log_loaded(s->key, path);
    *out = s;
    return 0;
}

void cs_signing_free(cs_signing *s)
{
    if (!s)
        return;
    cs_sig_signer_free(s->key);
    pthread_mutex_destroy(&s->mu);
    free(s->path);
    free(s);
}

void cs_signing_set_run(cs_signing *s, const char *run)
{
    size_t n = strlen(run);
    s->run_len = (uint8_t)(n < CS_WIRE_SIG_RUN_MAX ? n : CS_WIRE_SIG_RUN_MAX);
    memcpy(s->run, run, s->run_len);
}

void cs_signing_reload(cs_signing *s)
{
    cs_sig_signer *key;
    cs_err err;
    if (cs_sig_signer_load(s->path, &key, &err)) {
        CS_LOG(CS_LOG_ERROR, "signing key reload failed; the old key stays", KV_S("error", err.msg));
        return;
    }
    pthread_mutex_lock(&s->mu);
    cs_sig_signer *old = s->key;
    s->key = key;
    pthread_mutex_unlock(&s->mu);
    cs_sig_signer_free(old);
    log_loaded(key, s->path);
}

int cs_signing_sign(cs_signing *s, cs_sig *sig, uint64_t len, uint64_t xxh64, cs_err *err)
{
    sig->run_len = s->run_len;
    memcpy(sig->run, s->run, s->run_len);
    pthread_mutex_lock(&s->mu);
    int rc = cs_sig_sign(s->key, sig, len, xxh64, err);
    pthread_mutex_unlock(&s->mu);
    return rc;
}

void cs_signing_key_hex(cs_signing *s, char out[2 * CS_SIG_KEY_LEN + 1])
{
    pthread_mutex_lock(&s->mu);
    cs_sig_key_hex(cs_sig_signer_key(s->key), out);
    pthread_mutex_unlock(&s->mu);
}
