/* SPDX-License-Identifier: Apache-2.0 */
/* What lakedir.c (open, settle) and lakeput.c (objects) share; nothing outside them includes it. */
#ifndef CS_LAKE_LAKEDIR_INTERNAL_H
#define CS_LAKE_LAKEDIR_INTERNAL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "common/err.h"
#include "corestreamd/lake/lakedir.h"

/* A temporary file open found, to be removed by settle: its directory's name under ledgers/ ("" for
 * the lake's own directory or ledgers/ itself, as in_ledgers says) and its name. */
typedef struct lake_leftover {
    bool in_ledgers;
    char part[CS_LAKE_KEY_MAX];
    char name[CS_LAKE_KEY_MAX + 16];
} lake_leftover;

struct cs_lake_dir {
    char *path;
    char *passphrase;
    cs_lake_layout layout;
    int dfd;           /* the lake's directory */
    int ledgers_fd;    /* ledgers/, -1 until it exists */
    bool parent_dirty; /* open made the lake's directory: settle flushes its parent */
    bool has_config, has_manifest;
    bool has_newest;
    cs_lake_batch newest;
    lake_leftover *leftovers;
    size_t nleftovers;
    /* The put thread's: the partition directory it wrote to last, kept open ("" and -1: none). */
    char part[CS_LAKE_KEY_MAX];
    int part_fd;
};

/* The temporary name of name: `.<name>.tmp`. */
void lake_tmp_name(char *buf, size_t len, const char *name);

/* Whether name is a temporary file this code writes (a leftover when found at open). */
bool lake_is_tmp_name(const char *name);

/* Writes len bytes to name in dirfd as put does (temporary file, flush, no-replace link, flush
 * of dirfd). 0 when written, 1 when name was taken (nothing changed: the temporary file is
 * removed), -1 with errno. what names the system call that failed ("create", "write", "flush",
 * "publish"). */
int lake_publish(int dirfd, const char *name, const void *bytes, size_t len, const char **what);

/* Whether two zstd objects hold the same bytes once decompressed: 1 yes, 0 no (*why then says
 * what differs when the second is not an object at all), -1 when out of memory. */
int lake_same_content(const uint8_t *a, size_t alen, const uint8_t *b, size_t blen, char *why, size_t why_len);

#endif
