/* SPDX-License-Identifier: Apache-2.0 */
/* The publisher's message id secret (naming.h, cs_js_msg_id): CS_JS_ID_KEY_LEN random bytes kept
 * in the data directory as CS_JS_ID_KEY_FILE, 64 lowercase hex digits and a newline, mode 0600.
 * Drawn from the kernel (getrandom) when the data directory has none, and written (to a .tmp file,
 * fsync'd, then renamed) once every start-up check has passed, so a start that fails leaves the
 * data directory as it was; read at every start after, so a restarted core
 * gives the messages it publishes again the ids it gave them before, and the stream's duplicate
 * window still merges them. The secret is never logged, published or sent anywhere.
 *
 * Called at start, before the first publish, from the controlling thread. */
#ifndef CS_CORESTREAMD_JETSTREAM_IDKEY_H
#define CS_CORESTREAMD_JETSTREAM_IDKEY_H

#include <stdbool.h>
#include <stdint.h>

#include "common/err.h"
#include "corestreamd/jetstream/naming.h"

#define CS_JS_ID_KEY_FILE "jetstream-id.key"

/* The secret of data_dir into key; *created tells whether it was drawn now (there was none): the
 * caller saves it with cs_js_id_key_save before the first publish. Errors (each a start failure)
 * name the file and the cause: `jetstream: read the message id secret
 * "<dir>/jetstream-id.key": Permission denied`, `… draw …`,
 * `jetstream: the message id secret "<f>" is not 64 hex digits and a newline; move it aside to
 * draw a new one` (or `is not a regular file; …`), `jetstream: the message id secret "<f>" has mode 0644: others may read it
 * (chmod 600 it)`. */
int cs_js_id_key_load(const char *data_dir, uint8_t key[CS_JS_ID_KEY_LEN], bool *created, cs_err *err);

/* Writes a secret cs_js_id_key_load drew. Errors: `jetstream: write the message id secret
 * "<dir>/jetstream-id.key.tmp": No space left on device` (or the final name, for the rename). */
int cs_js_id_key_save(const char *data_dir, const uint8_t key[CS_JS_ID_KEY_LEN], cs_err *err);

#endif
