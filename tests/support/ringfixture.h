/* SPDX-License-Identifier: Apache-2.0 */
/* A corestreamd data dir in a per-test scratch directory and the daemon run over it: the fixture
 * the ring's end-to-end tests share (test_ring_faults_e2e, test_ring_frames_e2e). Failures are
 * cmocka assertions; one test thread uses a fixture. */
#ifndef CS_TEST_RINGFIXTURE_H
#define CS_TEST_RINGFIXTURE_H

#include <stdbool.h>
#include <stdint.h>

#include "support/procharness.h"
#include "support/tmpdir.h"

typedef struct cs_ringfx {
    cs_tmpdir dir;
    char data[700]; /* <dir>/data, the --data-dir */
    char ring[720]; /* <data>/ledgers */
    cs_proc proc;
    bool started; /* proc holds a child (or its remains) to free */
} cs_ringfx;

/* cmocka setup: a new scratch dir named after tag, *state the fixture. -1 when it cannot be made
 * or its path is too long for data/ring (a failed setup, never a cut path). */
int cs_ringfx_setup(void **state, const char *tag);
/* cmocka teardown: frees the child, makes the ring dir writable again (a case may leave it
 * read-only), removes the scratch dir. */
int cs_ringfx_teardown(void **state);

/* Starts bin with `--listen 127.0.0.1:0 --data-dir <data>` and then args (NULL-terminated, at most
 * 50). With mount_script, the daemon runs inside `unshare -rm sh -c '<mount_script> && exec "$0"
 * "$@"'`: the same process (unshare and sh exec), so the harness's pid is the daemon's. */
void cs_ringfx_start(cs_ringfx *f, const char *mount_script, const char *bin, const char *const *args);

/* Runs bin with args (cs_ringfx_start, no mount script) and waits up to timeout_ms for it to exit:
 * fails the test with its log unless it exits 0. The log stays in f->proc until
 * cs_ringfx_free_proc. */
void cs_ringfx_run_to_exit(cs_ringfx *f, const char *bin, const char *const *args, int timeout_ms);

/* Frees the child (exited or stopped) so that the fixture can start another. */
void cs_ringfx_free_proc(cs_ringfx *f);

/* Log lines carry pid= right after msg="…"; needles are written without it. Returns needle with
 * the daemon's pid put in (static storage, valid until the next call), or needle itself when it
 * ends at the message. */
const char *cs_ringfx_with_pid(const cs_ringfx *f, const char *needle);

/* Waits up to timeout_ms for the next log line containing needle (pid put in); fails the test
 * with the log otherwise. */
void cs_ringfx_wait_line(cs_ringfx *f, const char *needle, int timeout_ms);

/* XXH64 of a whole directory tree, in name order: every entry's name, every file's bytes (but the
 * data directory lock's, which holds its last holder's PID), every directory's entries. Equal
 * before and after means nothing in it changed. */
uint64_t cs_ringfx_dir_digest(const char *dir);

#endif
