/* SPDX-License-Identifier: Apache-2.0 */
/* Lake objects made from a ring (corestreamd/lake/lakeobject.h): the proof on real bytes (a
 * Galexie object of public network ledger 53312000, ../shared/realmeta, read in place; that case
 * skips, saying so, where it is absent), the batch layout on ledgers of our own, and what a batch
 * the ring does not wholly hold gives. */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <xxhash.h>
#include <zstd.h>

#include "corestreamd/lake/lakekey.h"
#include "corestreamd/lake/lakeobject.h"
#include "store/ring.h"
#include "support/files.h"
#include "support/ringfiles.h"
#include "support/tmpdir.h"

#ifndef CS_REALMETA_DIR
#error "CS_REALMETA_DIR must name ../shared/realmeta"
#endif

/* Per-test scratch: a ring of 100 ledgers in the test's own directory. */
typedef struct fixture {
    cs_tmpdir dir;
    char ring_dir[600];
    cs_ring *ring;
} fixture;

static int teardown(void **state)
{
    fixture *f = *state;
    if (f->ring)
        cs_ring_close(f->ring);
    int rc = cs_tmpdir_remove(&f->dir);
    free(f);
    return rc;
}

static int setup(void **state)
{
    fixture *f = calloc(1, sizeof *f);
    if (!f || cs_tmpdir_make(&f->dir, "lake") != 0) {
        free(f);
        return -1;
    }
    *state = f;
    int n = snprintf(f->ring_dir, sizeof f->ring_dir, "%s/ledgers", f->dir.path);
    if (n < 0 || (size_t)n >= sizeof f->ring_dir) {
        fprintf(stderr, "scratch path too long: %s\n", f->dir.path);
        teardown(state);
        return -1;
    }
    cs_err err = {0};
    if (cs_ring_open(&f->ring, f->ring_dir, 100, &err) != 0 || cs_ring_claim(f->ring, "lake test", 0, &err) != 0) {
        fprintf(stderr, "ring: %s\n", err.msg);
        teardown(state);
        return -1;
    }
    return 0;
}

static void put(fixture *f, uint32_t seq, const void *bytes, size_t n)
{
    struct iovec iov = {(void *)bytes, n};
    cs_ledger_record rec = {.len = n, .xxh64 = XXH64(bytes, n, 0)};
    bool reset;
    cs_err err = {0};
    if (cs_ring_put(f->ring, seq, &iov, 1, NULL, 0, &rec, &reset, &err) != 0)
        fail_msg("put %" PRIu32 ": %s", seq, err.msg);
}

/* Our stand-in ledgers: "ledger <seq> raw bytes", padded with spaces to a multiple of 4. */
static size_t content_of(uint32_t seq, char *buf)
{
    int n = snprintf(buf, 64, "ledger %" PRIu32 " raw bytes", seq);
    while (n % 4)
        buf[n++] = ' ';
    return (size_t)n;
}

static uint32_t be32(const uint8_t *p)
{
    return (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 | (uint32_t)p[2] << 8 | p[3];
}

static uint8_t *build_ok(fixture *f, cs_lake_batch b, size_t *len)
{
    uint8_t *obj = NULL;
    cs_err err = {0};
    if (cs_lake_object_build(f->ring, b, 3, &obj, len, NULL, &err) != 0)
        fail_msg("build %" PRIu32 "-%" PRIu32 ": %s", b.start, b.end, err.msg);
    return obj;
}

/* Galexie's object for ledger 53312000, unpacked into a ring and made again: the same bytes
 * once decompressed, under the key the public network's lake gives it. */
static void test_galexie_object_made_again(void **state)
{
    fixture *f = *state;
    size_t glen = 0;
    uint8_t *galexie = cs_galexie_batch_53312000(CS_REALMETA_DIR, &glen);
    if (!galexie)
        skip();
    assert_true(glen > 12);
    assert_int_equal(be32(galexie), 53312000);
    assert_int_equal(be32(galexie + 4), 53312000);
    assert_int_equal(be32(galexie + 8), 1);
    put(f, 53312000, galexie + 12, glen - 12);

    cs_lake_layout l = cs_lake_layout_default();
    cs_lake_batch b;
    assert_int_equal(cs_lake_batch_of(&l, 53312000, &b, NULL), 0);
    char key[CS_LAKE_KEY_MAX];
    cs_lake_key(&l, b, key);
    assert_string_equal(key, "FCD285FF--53312000-53375999/FCD285FF--53312000.xdr.zst");

    size_t olen, mine_len;
    uint8_t *obj = build_ok(f, b, &olen);
    uint8_t *mine = cs_unzstd(obj, olen, &mine_len);
    assert_non_null(mine);
    assert_int_equal(mine_len, glen);
    assert_memory_equal(mine, galexie, glen);
    free(mine);
    free(obj);
    free(galexie);
}

/* A batch of four of our ledgers: the header, then each ledger's bytes in order, and no
 * descriptor left open. */
static void test_batch_of_four(void **state)
{
    fixture *f = *state;
    for (uint32_t s = 1; s <= 10; s++) {
        char buf[64];
        put(f, s, buf, content_of(s, buf));
    }
    int fds = cs_dir_count("/proc/self/fd");
    size_t olen, len;
    uint8_t *obj = build_ok(f, (cs_lake_batch){4, 7}, &olen);
    assert_int_equal(cs_dir_count("/proc/self/fd"), fds);
    uint8_t *raw = cs_unzstd(obj, olen, &len);
    assert_non_null(raw);
    assert_int_equal(be32(raw), 4);
    assert_int_equal(be32(raw + 4), 7);
    assert_int_equal(be32(raw + 8), 4);
    size_t off = 12;
    for (uint32_t s = 4; s <= 7; s++) {
        char buf[64];
        size_t n = content_of(s, buf);
        assert_true(off + n <= len);
        assert_memory_equal(raw + off, buf, n);
        off += n;
    }
    assert_int_equal(off, len);
    free(raw);
    free(obj);
}

/* Galexie's ledger in a ring with stored frames, as the live flow leaves them: 64 KiB chunks,
 * the last raw (it did not shrink, say), the others zstd frames. Returns the ledger, malloc'd. */
static uint8_t *put_galexie_with_frames(fixture *f, size_t *len)
{
    size_t glen = 0;
    uint8_t *galexie = cs_galexie_batch_53312000(CS_REALMETA_DIR, &glen);
    if (!galexie)
        skip();
    size_t n = glen - 12;
    uint8_t *ledger = malloc(n);
    assert_non_null(ledger);
    memcpy(ledger, galexie + 12, n);
    free(galexie);
    put(f, 53312000, ledger, n);
    const uint32_t chunk = 65536;
    cs_frames_writer *w = NULL;
    cs_err err = {0};
    assert_int_equal(cs_ring_frames_begin(f->ring, 53312000, chunk, &w, &err), 0);
    uint8_t *buf = malloc(ZSTD_compressBound(chunk));
    assert_non_null(buf);
    for (size_t off = 0; off < n; off += chunk) {
        size_t k = n - off < chunk ? n - off : chunk;
        if (off + k == n) {
            cs_frames_writer_add(w, 0, ledger + off, k);
        } else {
            size_t c = ZSTD_compress(buf, ZSTD_compressBound(chunk), ledger + off, k, 1);
            assert_false(ZSTD_isError(c));
            cs_frames_writer_add(w, 1, buf, c);
        }
    }
    free(buf);
    cs_ledger_ref *ref = NULL;
    assert_int_equal(cs_ring_get(f->ring, 53312000, &ref, &err), 0);
    if (cs_ring_frames_attach(f->ring, ref, w, &err) != 0)
        fail_msg("attach: %s", err.msg);
    cs_ledger_ref_release(ref);
    assert_int_equal(cs_ring_get(f->ring, 53312000, &ref, &err), 0);
    assert_true(ref->frames_fd >= 0);
    cs_ledger_ref_release(ref);
    *len = n;
    return ledger;
}

/* A ledger with stored frames: its zstd chunks go into the object as stored (no compression),
 * its raw chunk compressed, and the whole decompresses to the ledger. */
static void test_object_from_stored_frames(void **state)
{
    fixture *f = *state;
    size_t n;
    uint8_t *ledger = put_galexie_with_frames(f, &n);
    size_t olen, rlen;
    int frames;
    uint8_t *obj = build_ok(f, (cs_lake_batch){53312000, 53312000}, &olen);
    uint8_t *raw = cs_unzstd_frames(obj, olen, &rlen, &frames);
    assert_non_null(raw);
    assert_int_equal(rlen, n + 12);
    assert_memory_equal(raw + 12, ledger, n);
    assert_int_equal(frames, 1 + 6); /* the header's, 5 stored, the raw chunk's */
    /* The first stored frame, byte for byte, right after the header's. */
    /* The ledger's frames lie in its segment's frames file, from the offset its record names. */
    char path[700];
    uint64_t off, len;
    cs_ringfiles_seg_path(path, sizeof path, f->ring_dir, 53312000);
    assert_true(cs_ringfiles_frames(f->ring_dir, 53312000, &off, &len));
    size_t slen;
    uint8_t *stored = cs_slurp(path, &slen);
    assert_non_null(stored);
    assert_true(off + len <= slen);
    size_t first = ZSTD_findFrameCompressedSize(stored + off, (size_t)len);
    assert_false(ZSTD_isError(first));
    size_t head = ZSTD_findFrameCompressedSize(obj, olen);
    assert_memory_equal(obj + head, stored + off, first);
    free(stored);
    free(raw);
    free(obj);
    free(ledger);
}

/* Stored frames whose bytes changed (same length): the chunk fails its index hash, the frames are
 * dropped (the ledger stays) and the object is made from the ledger itself. */
static void test_bad_frames_cost_only_the_frames(void **state)
{
    fixture *f = *state;
    size_t n;
    uint8_t *ledger = put_galexie_with_frames(f, &n);
    char path[700];
    uint64_t off, len;
    cs_ringfiles_seg_path(path, sizeof path, f->ring_dir, 53312000);
    assert_true(cs_ringfiles_frames(f->ring_dir, 53312000, &off, &len));
    int fd = open(path, O_WRONLY);
    assert_true(fd >= 0);
    assert_int_equal(pwrite(fd, "\xff\xff", 2, (off_t)off + 100), 2);
    close(fd);
    size_t olen, rlen;
    int frames;
    uint8_t *obj = build_ok(f, (cs_lake_batch){53312000, 53312000}, &olen);
    uint8_t *raw = cs_unzstd_frames(obj, olen, &rlen, &frames);
    assert_non_null(raw);
    assert_int_equal(rlen, n + 12);
    assert_memory_equal(raw + 12, ledger, n);
    assert_int_equal(frames, 2); /* the header's, then the ledger compressed */
    cs_ledger_ref *ref = NULL;
    cs_err err = {0};
    assert_int_equal(cs_ring_get(f->ring, 53312000, &ref, &err), 0);
    assert_int_equal(ref->frames_fd, -1);
    cs_ledger_ref_release(ref);
    free(raw);
    free(obj);
    free(ledger);
}

static void expect_not_available(fixture *f, cs_lake_batch b, const char *msg)
{
    uint8_t *obj = (uint8_t *)"untouched";
    size_t len = 99;
    cs_err err = {0};
    assert_int_equal(cs_lake_object_build(f->ring, b, 3, &obj, &len, NULL, &err), -1);
    assert_int_equal(err.kind, CS_LAKE_OBJ_ERR_NOT_AVAILABLE);
    if (!strstr(err.msg, msg))
        fail_msg("message %s lacks %s", err.msg, msg);
    assert_string_equal((const char *)obj, "untouched");
    assert_int_equal(len, 99);
}

/* Outside the bounds, partly or wholly, or an empty ring: not available. */
static void test_outside_the_ring(void **state)
{
    fixture *f = *state;
    expect_not_available(f, (cs_lake_batch){4, 7}, "lake: batch 4-7 is not wholly in the ring: the ring is empty");
    for (uint32_t s = 1; s <= 10; s++) {
        char buf[64];
        put(f, s, buf, content_of(s, buf));
    }
    expect_not_available(f, (cs_lake_batch){8, 11},
                         "lake: batch 8-11 is not wholly in the ring: it holds ledgers 1 to 10");
    expect_not_available(f, (cs_lake_batch){0, 3}, "lake: batch 0-3 is not wholly in the ring: it holds ledgers 1 to 10");
    expect_not_available(f, (cs_lake_batch){64, 127}, "it holds ledgers 1 to 10");
}

/* A ledger whose bytes changed on disk (same length, so the ring opens it): the build finds it
 * by its hash, the ring proves it bad and quarantines it, and its batch is not available, now
 * and later (a hole), while the batch before it still is. */
static void test_ledger_changed_on_disk(void **state)
{
    fixture *f = *state;
    for (uint32_t s = 1; s <= 10; s++) {
        char buf[64];
        put(f, s, buf, content_of(s, buf));
    }
    char path[700];
    snprintf(path, sizeof path, "%s/ledger-6.xdr", f->ring_dir);
    int fd = open(path, O_WRONLY);
    assert_true(fd >= 0);
    assert_int_equal(pwrite(fd, "L", 1, 0), 1);
    close(fd);
    expect_not_available(f, (cs_lake_batch){4, 7}, "failed its integrity check: its bytes hash to");
    expect_not_available(f, (cs_lake_batch){4, 7}, "lake: batch 4-7 is not wholly in the ring: ledgers 6 to 6 are missing");
    size_t olen;
    free(build_ok(f, (cs_lake_batch){1, 3}, &olen));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_galexie_object_made_again, setup, teardown),
        cmocka_unit_test_setup_teardown(test_batch_of_four, setup, teardown),
        cmocka_unit_test_setup_teardown(test_object_from_stored_frames, setup, teardown),
        cmocka_unit_test_setup_teardown(test_bad_frames_cost_only_the_frames, setup, teardown),
        cmocka_unit_test_setup_teardown(test_outside_the_ring, setup, teardown),
        cmocka_unit_test_setup_teardown(test_ledger_changed_on_disk, setup, teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
