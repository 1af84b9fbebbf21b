/* SPDX-License-Identifier: Apache-2.0 */
/* Test support: one scratch directory per test (or per case), made under $CS_TEST_TMPDIR (ctest
 * sets it to the build's tests directory), else $TMPDIR, else /tmp, and removed with everything in
 * it at teardown. The path is canonical (realpath), so tests may compare it with paths the code
 * under test resolves. */
#ifndef CS_TESTS_SUPPORT_TMPDIR_H
#define CS_TESTS_SUPPORT_TMPDIR_H

#include <limits.h>
#include <stddef.h>

typedef struct cs_tmpdir {
    char path[PATH_MAX]; /* "" until made, and again after removal */
} cs_tmpdir;

/* Makes <base>/<prefix>-XXXXXX. Returns 0, or -1 (errno set; d->path is then ""). */
int cs_tmpdir_make(cs_tmpdir *d, const char *prefix);
/* Writes <dir>/<name> into buf (always NUL-terminated) and returns buf. */
char *cs_tmpdir_join(const cs_tmpdir *d, const char *name, char *buf, size_t len);
/* Removes the directory and its contents, without following links or crossing mounts, stopping
 * after CS_TMPDIR_MAX_ENTRIES entries (a runaway test cannot make teardown run forever). Returns 0
 * when everything is gone, -1 otherwise. Idempotent: a directory never made or already removed
 * is 0. */
int cs_tmpdir_remove(cs_tmpdir *d);

#define CS_TMPDIR_MAX_ENTRIES 100000

/* How many entries the directory at path holds, "." and ".." aside (a process's open descriptors
 * under /proc/<pid>/fd, its threads under /proc/<pid>/task), counting at most
 * CS_TMPDIR_MAX_ENTRIES; -1 when it cannot be read. The count of /proc/self/fd includes the
 * descriptor reading it. */
int cs_dir_count(const char *path);

#include "common/cancel.h"

/* The per-test state of the source tests: a cancellation and a scratch directory. The
 * setup/teardown pair fits cmocka's group or per-test hooks (0 ok, -1 failed). */
typedef struct cs_dir_fixture {
    cs_cancel cancel;
    cs_tmpdir dir;
    const char *root; /* dir.path */
} cs_dir_fixture;

int cs_dir_fixture_setup(void **state, const char *prefix);
int cs_dir_fixture_teardown(void **state);

#endif
