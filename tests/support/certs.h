/* SPDX-License-Identifier: Apache-2.0 */
/* Test support: TLS material made at run time with the openssl CLI (makecerts.sh) in a scratch
 * directory: a CA, server certificates for 127.0.0.1/localhost, for another name and an expired
 * one, and a client certificate, all signed by the CA;
 * Ed25519 ledger-signing keys. Nothing is checked in. */
#ifndef CS_TESTS_SUPPORT_CERTS_H
#define CS_TESTS_SUPPORT_CERTS_H

#include <limits.h>

#include "support/tmpdir.h"

typedef struct cs_certs {
    cs_tmpdir dir;
    char ca[PATH_MAX];                        /* the CA's certificate */
    char server_cert[PATH_MAX], server_key[PATH_MAX];   /* SAN IP:127.0.0.1, DNS:localhost */
    char other_cert[PATH_MAX], other_key[PATH_MAX];     /* SAN DNS:other.example only */
    char expired_cert[PATH_MAX], expired_key[PATH_MAX]; /* 127.0.0.1/localhost, valid Jan 2020 */
    char client_cert[PATH_MAX], client_key[PATH_MAX];   /* CN "client", clientAuth */
    /* Ed25519 ledger-signing keys (PEM): a pair, another pair, both public keys in one file, and
     * a public key that is not Ed25519 (P-256). */
    char sign_key[PATH_MAX], sign_pub[PATH_MAX];
    char other_sign_key[PATH_MAX], other_sign_pub[PATH_MAX];
    char both_pub[PATH_MAX], ec_pub[PATH_MAX];
} cs_certs;

/* Makes the directory and everything in it. Returns 0, or -1 (the script's errors went to
 * stderr). */
int cs_certs_make(cs_certs *c);
/* Removes it all. */
void cs_certs_remove(cs_certs *c);

#endif
