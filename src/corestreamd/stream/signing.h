/* SPDX-License-Identifier: Apache-2.0 */
/* The core's ledger signing (corestreamd --signing-key; docs/operations/signing.md): the Ed25519
 * key, reloaded on SIGHUP, and the run token every signature names. The source loop signs each
 * ledger it publishes with it (stream/sourceloop.c); an edge never signs (it forwards the core's
 * signatures).
 *
 * Threads: cs_signing_new, _set_run and _free on the starting thread, before and after the source
 * loop runs; cs_signing_sign on the source loop's thread; cs_signing_reload on the signal thread.
 * A mutex makes a reload and a signature exclusive: a ledger is signed wholly by the old key or
 * wholly by the new one. */
#ifndef CS_CORESTREAMD_SIGNING_H
#define CS_CORESTREAMD_SIGNING_H

#include <stdint.h>

#include "common/err.h"
#include "wire/ledgersig.h"

typedef struct cs_signing cs_signing;

/* Loads the key at path (the errors of cs_sig_signer_load, wire/ledgersig.h). The path is copied. */
int cs_signing_new(cs_signing **out, const char *path, cs_err *err);
void cs_signing_free(cs_signing *s);

/* The run token signatures name (at most CS_WIRE_SIG_RUN_MAX characters; longer is cut). */
void cs_signing_set_run(cs_signing *s, const char *run);

/* Reads the key file again. On success the next signature uses the new key (logged INFO `signing
 * key loaded` public_key=<hex> file=<path>); on failure the old key stays (ERROR `signing key
 * reload failed; the old key stays` error=…). */
void cs_signing_reload(cs_signing *s);

/* Signs: fills sig's run, alg, key and signature; the caller has set seq, sha256 and prev.
 * 0, or -1 with err (libcrypto failed). */
int cs_signing_sign(cs_signing *s, cs_sig *sig, uint64_t len, uint64_t xxh64, cs_err *err);

/* The public key now in use, as 64 hex digits. */
void cs_signing_key_hex(cs_signing *s, char out[2 * CS_SIG_KEY_LEN + 1]);

#endif
