/* SPDX-License-Identifier: Apache-2.0 */
/* The lake exporter's unit tests' fixture (test_lake_export, test_lake_export_sig): a ring of the
 * test's own in a scratch directory (the test thread is its put thread), the exporter over a lake
 * directory beside it, bounded waits on the exporter's counters and the log (wait.h, logcapture),
 * and the files read back. Header-only (static inline), included after cmocka.h; failures are
 * cmocka assertions. */
#ifndef CS_TEST_LAKEEXPORTFX_H
#define CS_TEST_LAKEEXPORTFX_H

#include <dirent.h>
#include <errno.h>
#include <inttypes.h>
#include <limits.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/uio.h>

#include <xxhash.h>

#include "common/log.h"
#include "corestreamd/lake/lakeexport.h"
#include "corestreamd/lake/lakeobject.h"
#include "store/ring.h"
#include "support/faultfs.h"
#include "support/files.h"
#include "support/logcapture.h"
#include "support/tmpdir.h"
#include "support/wait.h"
#include "wire/ledgersig.h"

static const char k_net[] = "Test SDF Network ; September 2015";

/* Room for any path under the scratch directory. */
#define PATHLEN (PATH_MAX + 200)

typedef struct fixture {
    cs_tmpdir dir;
    char ring_dir[PATH_MAX];
    char lake[PATH_MAX + 32];
    cs_ring *ring;
    cs_lake_export *x;
    cs_lake_layout layout;
    int64_t retention;
} fixture;

static inline void open_ring(fixture *f)
{
    cs_err err = {0};
    if (cs_ring_open(&f->ring, f->ring_dir, f->retention, &err) != 0 ||
        cs_ring_claim(f->ring, "lake export test", 0, &err) != 0)
        fail_msg("ring: %s", err.msg);
}

static inline int setup(void **state)
{
    fixture *f = calloc(1, sizeof *f);
    if (!f || cs_tmpdir_make(&f->dir, "lakeexport") != 0) {
        free(f);
        return -1;
    }
    cs_tmpdir_join(&f->dir, "data/ledgers", f->ring_dir, sizeof f->ring_dir);
    cs_tmpdir_join(&f->dir, "lake", f->lake, sizeof f->lake);
    f->layout = cs_lake_layout_default();
    f->retention = 1000;
    *state = f;
    if (cs_logcap_start(CS_LOG_DEBUG) != 0)
        return -1;
    return 0;
}

static inline int teardown(void **state)
{
    fixture *f = *state;
    cs_fault_disarm();
    cs_lake_export_stop(f->x, 0);
    cs_lake_export_free(f->x);
    if (f->ring)
        cs_ring_close(f->ring);
    cs_logcap_stop();
    int rc = cs_tmpdir_remove(&f->dir);
    free(f);
    return rc;
}

/* Our stand-in ledgers: "ledger <seq> bytes" and some padding, so objects differ by ledger. */
static inline size_t content_of(uint32_t seq, char *buf)
{
    return (size_t)snprintf(buf, 96, "ledger %" PRIu32 " bytes, padded to a few dozen bytes", seq);
}

static inline void put(fixture *f, uint32_t seq)
{
    char buf[96];
    size_t n = content_of(seq, buf);
    struct iovec iov = {buf, n};
    cs_ledger_record rec = {.len = n, .xxh64 = XXH64(buf, n, 0)};
    bool reset;
    cs_err err = {0};
    if (cs_ring_put(f->ring, seq, &iov, 1, NULL, 0, &rec, &reset, &err) != 0)
        fail_msg("put %" PRIu32 ": %s", seq, err.msg);
}

/* A stand-in SIG message for ledger seq (as the ring's records hold one: a well-formed SIG whose
 * signature bytes say which ledger, run and key it is; nothing here verifies them). */
static inline uint16_t sig_of(uint32_t seq, uint8_t key, uint8_t out[CS_WIRE_SIG_MAX_LEN])
{
    cs_sig s = {.seq = seq, .alg = CS_SIG_ALG_ED25519, .run_len = 4};
    memset(s.key, key, sizeof s.key);
    memset(s.sig, (int)(seq & 0xff), sizeof s.sig);
    memcpy(s.run, "test", 4);
    return (uint16_t)cs_sig_encode(&s, out);
}

/* Ledger seq put as a signing core puts it: its record carries its SIG. */
static inline void put_signed(fixture *f, uint32_t seq)
{
    char buf[96];
    size_t n = content_of(seq, buf);
    struct iovec iov = {buf, n};
    cs_ledger_record rec = {.len = n, .xxh64 = XXH64(buf, n, 0)};
    rec.sig_len = sig_of(seq, 0xAB, rec.sig);
    bool reset;
    cs_err err = {0};
    if (cs_ring_put(f->ring, seq, &iov, 1, NULL, 0, &rec, &reset, &err) != 0)
        fail_msg("put %" PRIu32 ": %s", seq, err.msg);
}

static inline void put_range(fixture *f, uint32_t from, uint32_t to)
{
    for (uint32_t s = from; s <= to; s++)
        put(f, s);
}

static inline int new_export(fixture *f, cs_err *err)
{
    cs_lake_export_config c = {
        .layout = f->layout, .ring = f->ring, .retry_min_ns = 1000000, .retry_max_ns = 4000000};
    if (cs_lake_dir_store_open(&c.store, f->lake, cs_ring_dir(f->ring), k_net, &f->layout, err) != 0)
        return -1;
    return cs_lake_export_new(&f->x, &c, err);
}

static inline void start(fixture *f)
{
    cs_err err = {0};
    if (new_export(f, &err) != 0 || cs_lake_export_start(f->x, &err) != 0)
        fail_msg("export: %s", err.msg);
}

static inline void stop(fixture *f)
{
    cs_lake_export_stop(f->x, 0);
    cs_lake_export_free(f->x);
    f->x = NULL;
}

static inline cs_lake_export_stats stats(fixture *f)
{
    cs_lake_export_stats st;
    cs_lake_export_stats_get(f->x, &st);
    return st;
}

/* ---- bounded waits on the exporter's counters ---- */

typedef struct want {
    fixture *f;
    uint64_t objects, io_errors, lost, conflicts;
} want;

static inline bool reached(void *arg)
{
    want *w = arg;
    cs_lake_export_stats st = stats(w->f);
    return st.objects >= w->objects && st.io_errors >= w->io_errors && st.lost >= w->lost && st.conflicts >= w->conflicts;
}

static inline void wait_for(fixture *f, uint64_t objects, uint64_t io_errors, uint64_t lost, uint64_t conflicts)
{
    want w = {f, objects, io_errors, lost, conflicts};
    if (cs_wait_until(reached, &w, WAIT_MS) != 0) {
        cs_lake_export_stats st = stats(f);
        fail_msg("exporter at objects=%" PRIu64 " io_errors=%" PRIu64 " lost=%" PRIu64 " conflicts=%" PRIu64
                 ", waited for %" PRIu64 " %" PRIu64 " %" PRIu64 " %" PRIu64,
                 st.objects, st.io_errors, st.lost, st.conflicts, objects, io_errors, lost, conflicts);
    }
}

typedef struct line_want {
    const char *needle;
    int n;
} line_want;

static inline bool logged(void *arg)
{
    line_want *w = arg;
    return cs_logcap_count(w->needle) >= w->n;
}

static inline void wait_logged(const char *needle, int n)
{
    line_want w = {needle, n};
    if (cs_wait_until(logged, &w, WAIT_MS) != 0)
        fail_msg("no %d lines with %s", n, needle);
}

/* ---- files ---- */

static inline char *path_of(const fixture *f, const char *rel, char *buf, size_t len)
{
    snprintf(buf, len, "%s/%s", f->lake, rel);
    return buf;
}

/* The object path of batch b under the fixture's layout. */
static inline char *object_path(const fixture *f, cs_lake_batch b, char *buf, size_t len)
{
    char key[CS_LAKE_KEY_MAX];
    cs_lake_key(&f->layout, b, key);
    snprintf(buf, len, "%s/ledgers/%s", f->lake, key);
    return buf;
}

static inline void write_file(const char *path, const void *bytes, size_t len)
{
    if (cs_write_file(path, bytes, len) != 0)
        fail_msg("write %s: %s", path, strerror(errno));
}

static inline void mkdirs(const char *path)
{
    char buf[PATH_MAX];
    if ((size_t)snprintf(buf, sizeof buf, "%s", path) >= sizeof buf)
        fail_msg("path too long: %s", path);
    for (char *s = buf + 1; *s; s++)
        if (*s == '/') {
            *s = '\0';
            mkdir(buf, 0755);
            *s = '/';
        }
    mkdir(buf, 0755);
}

/* The object the ring makes of batch b, as the exporter makes it. */
static inline uint8_t *made(fixture *f, cs_lake_batch b, size_t *len)
{
    uint8_t *obj = NULL;
    cs_err err = {0};
    if (cs_lake_object_build(f->ring, b, CS_LAKE_EXPORT_LEVEL_DEFAULT, &obj, len, NULL, &err) != 0)
        fail_msg("build: %s", err.msg);
    return obj;
}

/* The file at batch b's key holds exactly what the ring makes of it. */
static inline void expect_object(fixture *f, cs_lake_batch b)
{
    char path[PATHLEN];
    size_t len, want_len;
    uint8_t *got = cs_slurp(object_path(f, b, path, sizeof path), &len);
    if (!got)
        fail_msg("no object at %s", path);
    uint8_t *want = made(f, b, &want_len);
    assert_int_equal(len, want_len);
    assert_memory_equal(got, want, len);
    free(got);
    free(want);
}

static inline void expect_absent(fixture *f, cs_lake_batch b)
{
    char path[PATHLEN];
    struct stat st;
    if (stat(object_path(f, b, path, sizeof path), &st) == 0)
        fail_msg("an object at %s", path);
}

/* Temporary files anywhere under dir (the exporter's are `.<name>.tmp`). */
static inline int count_tmp(const char *dir)
{
    DIR *d = opendir(dir);
    if (!d)
        return 0;
    int n = 0;
    struct dirent *de;
    while ((de = readdir(d)) != NULL) {
        if (strcmp(de->d_name, ".") == 0 || strcmp(de->d_name, "..") == 0)
            continue;
        char sub[PATHLEN + 300];
        if ((size_t)snprintf(sub, sizeof sub, "%s/%s", dir, de->d_name) >= sizeof sub)
            fail_msg("path too long: %s/%s", dir, de->d_name);
        size_t len = strlen(de->d_name);
        if (len > 4 && strcmp(de->d_name + len - 4, ".tmp") == 0)
            n++;
        else if (de->d_type == DT_DIR)
            n += count_tmp(sub);
    }
    closedir(d);
    return n;
}

static inline cs_lake_batch one(uint32_t seq)
{
    return (cs_lake_batch){seq, seq};
}

/* The file at path holds exactly bytes[0..len). */
static inline void expect_file(const char *path, const uint8_t *bytes, size_t len)
{
    size_t got_len;
    uint8_t *got = cs_slurp(path, &got_len);
    assert_non_null(got);
    assert_int_equal(got_len, len);
    assert_memory_equal(got, bytes, len);
    free(got);
}

/* The file of ledger seq's object (one ledger a batch). */
static inline void stat_of(fixture *f, uint32_t seq, struct stat *st)
{
    char path[PATHLEN];
    assert_int_equal(stat(object_path(f, one(seq), path, sizeof path), st), 0);
}

#endif
