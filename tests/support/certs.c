/* SPDX-License-Identifier: Apache-2.0 */
/* TLS material for the tests: see certs.h. */
#include "support/certs.h"

#include <spawn.h>
#include <stdio.h>
#include <string.h>
#include <sys/wait.h>

extern char **environ;

int cs_certs_make(cs_certs *c)
{
    memset(c, 0, sizeof *c);
    if (cs_tmpdir_make(&c->dir, "certs") != 0)
        return -1;
    char *argv[] = {"sh", CS_MAKECERTS_SH, c->dir.path, NULL};
    pid_t pid;
    int st = 0;
    if (posix_spawnp(&pid, "sh", NULL, NULL, argv, environ) != 0 || waitpid(pid, &st, 0) != pid ||
        !WIFEXITED(st) || WEXITSTATUS(st) != 0) {
        fprintf(stderr, "certs: %s %s failed\n", CS_MAKECERTS_SH, c->dir.path);
        cs_tmpdir_remove(&c->dir);
        return -1;
    }
    cs_tmpdir_join(&c->dir, "ca.pem", c->ca, sizeof c->ca);
    cs_tmpdir_join(&c->dir, "server.pem", c->server_cert, sizeof c->server_cert);
    cs_tmpdir_join(&c->dir, "server.key", c->server_key, sizeof c->server_key);
    cs_tmpdir_join(&c->dir, "other.pem", c->other_cert, sizeof c->other_cert);
    cs_tmpdir_join(&c->dir, "other.key", c->other_key, sizeof c->other_key);
    cs_tmpdir_join(&c->dir, "expired.pem", c->expired_cert, sizeof c->expired_cert);
    cs_tmpdir_join(&c->dir, "expired.key", c->expired_key, sizeof c->expired_key);
    cs_tmpdir_join(&c->dir, "client.pem", c->client_cert, sizeof c->client_cert);
    cs_tmpdir_join(&c->dir, "client.key", c->client_key, sizeof c->client_key);
    cs_tmpdir_join(&c->dir, "signing.key", c->sign_key, sizeof c->sign_key);
    cs_tmpdir_join(&c->dir, "signing.pub", c->sign_pub, sizeof c->sign_pub);
    cs_tmpdir_join(&c->dir, "other-signing.key", c->other_sign_key, sizeof c->other_sign_key);
    cs_tmpdir_join(&c->dir, "other-signing.pub", c->other_sign_pub, sizeof c->other_sign_pub);
    cs_tmpdir_join(&c->dir, "both.pub", c->both_pub, sizeof c->both_pub);
    cs_tmpdir_join(&c->dir, "ec.pub", c->ec_pub, sizeof c->ec_pub);
    return 0;
}

void cs_certs_remove(cs_certs *c) { cs_tmpdir_remove(&c->dir); }
