/* SPDX-License-Identifier: Apache-2.0 */
/* NATS credentials and TLS, one set for whichever of the publisher (--jetstream-url) and the edge
 * (--source jetstream) runs: the --jetstream-creds, --jetstream-nkey-seed, --jetstream-user with
 * --jetstream-password-file, and --jetstream-tls-* flags. Checked at start, before anything
 * starts (cs_js_auth_validate: combinations, every file readable, the seed and the password
 * usable), and applied to nats.c's options by jetstream/connect.h. No NATS here: the flags are
 * checked in every build. Secrets are read from files only, never taken on the command line, and
 * never logged. */
#ifndef CS_CORESTREAMD_JETSTREAM_AUTH_H
#define CS_CORESTREAMD_JETSTREAM_AUTH_H

#include <stdbool.h>
#include <stddef.h>

#include "common/err.h"

typedef struct cs_js_auth {
    const char *creds;         /* a .creds file: the user's JWT and nkey seed (operator mode) */
    const char *nkey_seed;     /* a file whose first line is a user nkey seed (SU…) */
    const char *user;          /* a user name, with password_file */
    const char *password_file; /* a file whose first line is the password */
    const char *tls_ca;        /* PEM CA the server's certificate must chain to */
    const char *tls_cert;      /* PEM client certificate (chain allowed), with tls_key */
    const char *tls_key;       /* PEM private key of tls_cert */
} cs_js_auth;

/* Any flag of the set given ("" and NULL are not given). */
bool cs_js_auth_any(const cs_js_auth *a);
/* TLS asked for: a CA, a client certificate or both. */
bool cs_js_auth_tls(const cs_js_auth *a);

/* The checks at start, each error naming the flag, the file and the cause: two kinds of
 * credential at once, a user without a password file or the other way round, a certificate
 * without its key or the other way round, a file that cannot be read (the system's cause), an
 * empty password file, a seed that is not a user's nkey seed. 0 or -1 with err. */
int cs_js_auth_validate(const cs_js_auth *a, cs_err *err);


#endif
