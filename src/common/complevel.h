/* SPDX-License-Identifier: Apache-2.0 */
/* --compress-level's text, shared by corestreamd and benchrunner (which has no zstd of its own). */
#ifndef CS_COMMON_COMPLEVEL_H
#define CS_COMMON_COMPLEVEL_H

#include <stdint.h>

#include "common/err.h"

/* `auto` gives 0 (the server's default: the live level adapts, see levelctl.h); an integer, in
 * the flags' Go syntax, gives itself (its range is checked by the server, which knows zstd's).
 * Errors: `--compress-level "x" is not auto or an integer`, `--compress-level 0 is not a level:
 * use auto, or a zstd level other than 0`. */
int cs_compress_level_parse(const char *text, int64_t *out, cs_err *err);

#endif
