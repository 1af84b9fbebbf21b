/* SPDX-License-Identifier: Apache-2.0 */
/* Secrets kept in files (a bearer token, a NATS password, an nkey seed): the first non-empty line,
 * read once per call so a renewed file is picked up by the next one. Any thread. */
#ifndef CS_COMMON_SECRETFILE_H
#define CS_COMMON_SECRETFILE_H

#include <stddef.h>

#include "common/err.h"

/* Opens path for reading, refusing a directory (EISDIR). The descriptor (O_CLOEXEC; the caller
 * closes it), or -1 with errno. */
int cs_open_file(const char *path);

/* The first non-empty line of path (of its first 4095 bytes), blanks and the line end trimmed,
 * into out[0..len) NUL-terminated. Every copy this makes is wiped, and out too on failure. 0, or
 * -1 with err, without the path: the system's cause (`No such file or directory`), `the file is
 * empty`, or `its first line is longer than N bytes` (N = len - 1). */
int cs_read_secret_line(const char *path, char *out, size_t len, cs_err *err);

#endif
