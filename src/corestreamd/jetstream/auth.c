/* SPDX-License-Identifier: Apache-2.0 */
#include "corestreamd/jetstream/auth.h"

#include <errno.h>
#include <openssl/crypto.h>
#include <string.h>
#include <unistd.h>

#include "common/secretfile.h"
#include "corestreamd/jetstream/nkey.h"

static bool given(const char *s)
{
    return s && *s;
}

bool cs_js_auth_any(const cs_js_auth *a)
{
    return given(a->creds) || given(a->nkey_seed) || given(a->user) || given(a->password_file) ||
           given(a->tls_ca) || given(a->tls_cert) || given(a->tls_key);
}

bool cs_js_auth_tls(const cs_js_auth *a)
{
    return given(a->tls_ca) || given(a->tls_cert) || given(a->tls_key);
}

static int check_readable(const char *flag, const char *path, cs_err *err)
{
    if (!given(path))
        return 0;
    int fd = cs_open_file(path);
    if (fd < 0)
        return cs_err_set(err, 0, "--%s %s: %s", flag, path, strerror(errno));
    close(fd);
    return 0;
}

static int check_secret(const char *flag, const char *path, cs_err *err)
{
    char line[1024];
    int rc = cs_read_secret_line(path, line, sizeof line, err);
    OPENSSL_cleanse(line, sizeof line);
    return rc == 0 ? 0 : cs_err_prefix(err, "--%s %s: ", flag, path);
}

/* At most one kind of credential: a .creds file, an nkey seed, or a user and its password. */
static int check_kinds(const cs_js_auth *a, cs_err *err)
{
    const char *kinds[3] = {NULL, NULL, NULL};
    int n = 0;
    if (given(a->creds))
        kinds[n++] = "--jetstream-creds";
    if (given(a->nkey_seed))
        kinds[n++] = "--jetstream-nkey-seed";
    if (given(a->user))
        kinds[n++] = "--jetstream-user";
    if (n > 1)
        return cs_err_set(err, 0,
                          "%s and %s cannot be used together: give one NATS credential (a .creds file, an nkey "
                          "seed, or a user with a password file)",
                          kinds[0], kinds[1]);
    if (given(a->user) && !given(a->password_file))
        return cs_err_set(err, 0, "--jetstream-password-file is required with --jetstream-user");
    if (given(a->password_file) && !given(a->user))
        return cs_err_set(err, 0, "--jetstream-user is required with --jetstream-password-file");
    if (given(a->tls_cert) && !given(a->tls_key))
        return cs_err_set(err, 0, "--jetstream-tls-key is required with --jetstream-tls-cert");
    if (given(a->tls_key) && !given(a->tls_cert))
        return cs_err_set(err, 0, "--jetstream-tls-cert is required with --jetstream-tls-key");
    return 0;
}

int cs_js_auth_validate(const cs_js_auth *a, cs_err *err)
{
    if (check_kinds(a, err) != 0)
        return -1;
    if (check_readable("jetstream-creds", a->creds, err) != 0 || check_readable("jetstream-tls-ca", a->tls_ca, err) != 0 ||
        check_readable("jetstream-tls-cert", a->tls_cert, err) != 0 ||
        check_readable("jetstream-tls-key", a->tls_key, err) != 0)
        return -1;
    if (given(a->password_file) && check_secret("jetstream-password-file", a->password_file, err) != 0)
        return -1;
    if (given(a->nkey_seed)) {
        char pub[CS_NKEY_TEXT_MAX];
        if (cs_nkey_public_from_seed_file(a->nkey_seed, pub, err) != 0)
            return cs_err_prefix(err, "--jetstream-nkey-seed ");
    }
    return 0;
}
