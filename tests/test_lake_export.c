/* SPDX-License-Identifier: Apache-2.0 */
/* The lake exporter (corestreamd/lake/lakeexport.h) on a ring of its own in a scratch directory:
 * every batch the ring holds whole becomes its object at its key, with the config files beside
 * them; the export resumes after the newest object, skips what the ring no longer holds, never
 * replaces an object in place (other content is an ERROR, kept), retries failed system calls
 * (support/faultfs) and counts what it lost. The test thread is the ring's put thread; the
 * exporter's thread reads the ring meanwhile. Waits for the exporter are bounded polls of its
 * counters (wait.h): nothing it does announces itself to the test otherwise. */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <fcntl.h>
#include <unistd.h>

#include <zstd.h>

#include "common/thread.h"
#include "corestreamd/lake/lakeconfig.h"
#include "support/lakeexportfx.h"

/* ---- cases ---- */

/* Each ledger the ring takes becomes its object; config.json and the SDK's manifest are written
 * at start; nothing temporary is left; the lag is 0 once caught up. */
static void test_exports_each_batch(void **state)
{
    fixture *f = *state;
    open_ring(f);
    start(f);
    put_range(f, 1, 5);
    wait_for(f, 5, 0, 0, 0);
    for (uint32_t s = 1; s <= 5; s++)
        expect_object(f, one(s));
    char path[PATHLEN];
    size_t len;
    char *text = (char *)cs_slurp(path_of(f, "config.json", path, sizeof path), &len);
    char *want = cs_lake_config_json(k_net, &f->layout, NULL);
    assert_non_null(text);
    assert_string_equal(text, want);
    free(text);
    free(want);
    text = (char *)cs_slurp(path_of(f, "ledgers/.config.json", path, sizeof path), &len);
    want = cs_lake_manifest_json(k_net, &f->layout, NULL);
    assert_non_null(text);
    assert_string_equal(text, want);
    free(text);
    free(want);
    assert_int_equal(count_tmp(f->lake), 0);
    cs_lake_export_stats st = stats(f);
    assert_int_equal(st.lag, 0);
    assert_int_equal(st.io_errors + st.conflicts + st.lost, 0);
    char key1[PATHLEN];
    expect_object(f, one(1));
    object_path(f, one(1), key1, sizeof key1);
    assert_non_null(strstr(key1, "/ledgers/FFFFFFFF--0-63999/FFFFFFFE--1.xdr.zst"));
    assert_int_equal(cs_logcap_count("msg=\"lake export starts\""), 1);
}

/* Batches of 4 in partitions of 2: each batch once whole, under its partition; the batch holding
 * ledger 0 (never a ledger) is never made; a batch not yet whole waits. */
static void test_partitions(void **state)
{
    fixture *f = *state;
    f->layout = (cs_lake_layout){4, 2};
    open_ring(f);
    start(f);
    put_range(f, 1, 18);
    wait_for(f, 3, 0, 0, 0);
    expect_object(f, (cs_lake_batch){4, 7});
    expect_object(f, (cs_lake_batch){8, 11});
    expect_object(f, (cs_lake_batch){12, 15});
    expect_absent(f, (cs_lake_batch){16, 19});
    char path[PATHLEN];
    assert_non_null(strstr(object_path(f, (cs_lake_batch){12, 15}, path, sizeof path),
                           "/ledgers/FFFFFFF7--8-15/FFFFFFF3--12-15.xdr.zst"));
    put_range(f, 19, 19);
    wait_for(f, 4, 0, 0, 0);
    expect_object(f, (cs_lake_batch){16, 19});
    assert_int_equal(stats(f).lag, 0);
}

/* A new exporter over the same directory resumes after its newest object: the objects in place are
 * not written again (same inode, same mtime), the new ledgers are. */
static void test_resumes_after_newest(void **state)
{
    fixture *f = *state;
    open_ring(f);
    start(f);
    put_range(f, 1, 5);
    wait_for(f, 5, 0, 0, 0);
    stop(f);
    struct stat before[6];
    for (uint32_t s = 1; s <= 5; s++)
        stat_of(f, s, &before[s]);
    put_range(f, 6, 8);
    start(f);
    wait_for(f, 3, 0, 0, 0);
    for (uint32_t s = 6; s <= 8; s++)
        expect_object(f, one(s));
    for (uint32_t s = 1; s <= 5; s++) {
        struct stat now;
        stat_of(f, s, &now);
        assert_int_equal(now.st_ino, before[s].st_ino);
        assert_int_equal(now.st_mtim.tv_sec, before[s].st_mtim.tv_sec);
        assert_int_equal(now.st_mtim.tv_nsec, before[s].st_mtim.tv_nsec);
    }
    assert_int_equal(stats(f).objects, 3);
    assert_int_equal(cs_logcap_count("msg=\"lake export starts\"") , 2);
    assert_int_equal(cs_logcap_count("next=6 newest=5"), 1);
}

/* The ring moved on while no exporter ran: what it pruned is skipped, said once at INFO, and not
 * counted as lost. */
static void test_skips_what_the_ring_lost(void **state)
{
    fixture *f = *state;
    f->retention = 10;
    open_ring(f);
    start(f);
    put_range(f, 1, 3);
    wait_for(f, 3, 0, 0, 0);
    stop(f);
    put_range(f, 4, 30); /* the ring keeps 21..30 */
    start(f);
    wait_for(f, 10, 0, 0, 0);
    for (uint32_t s = 21; s <= 30; s++)
        expect_object(f, one(s));
    expect_absent(f, one(20));
    assert_int_equal(cs_logcap_count("msg=\"lake export: ledgers before the ring's oldest are skipped; this ring cannot "
                                     "give them to the lake\""),
                     1);
    assert_int_equal(cs_logcap_count("first=4 last=20"), 1);
    assert_int_equal(stats(f).lost, 0);
}

/* Temporary files a crash left (an object's, a config's) are removed at start, said once. */
static void test_leftovers_removed(void **state)
{
    fixture *f = *state;
    open_ring(f);
    char path[PATHLEN];
    mkdirs(path_of(f, "ledgers/FFFFFFFF--0-63999", path, sizeof path));
    write_file(path_of(f, "ledgers/FFFFFFFF--0-63999/.FFFFFFFE--1.xdr.zst.tmp", path, sizeof path), "half", 4);
    write_file(path_of(f, ".config.json.tmp", path, sizeof path), "{", 1);
    write_file(path_of(f, "ledgers/FFFFFFFF--0-63999/notes.txt", path, sizeof path), "mine", 4);
    start(f);
    put_range(f, 1, 1);
    wait_for(f, 1, 0, 0, 0);
    assert_int_equal(count_tmp(f->lake), 0);
    assert_int_equal(cs_logcap_count("msg=\"lake export: removed leftover temporary files\""), 1);
    assert_int_equal(cs_logcap_count("files=2"), 1);
    struct stat st;
    assert_int_equal(stat(path_of(f, "ledgers/FFFFFFFF--0-63999/notes.txt", path, sizeof path), &st), 0);
    expect_object(f, one(1));
}

static void expect_refused(fixture *f, const char *msg1, const char *msg2)
{
    cs_err err = {0};
    assert_int_equal(new_export(f, &err), -1);
    assert_null(f->x);
    if (!strstr(err.msg, msg1) || (msg2 && !strstr(err.msg, msg2)))
        fail_msg("message %s lacks %s or %s", err.msg, msg1, msg2 ? msg2 : "");
}

/* A directory made for another lake fails the start, naming the file and both values. */
static void test_other_lakes_config_refused(void **state)
{
    fixture *f = *state;
    open_ring(f);
    char path[PATHLEN];
    mkdirs(path_of(f, "ledgers", path, sizeof path));
    cs_lake_layout other = {64, 1000};
    char *text = cs_lake_config_json("Public Global Stellar Network ; September 2015", &f->layout, NULL);
    write_file(path_of(f, "config.json", path, sizeof path), text, strlen(text));
    free(text);
    expect_refused(f, "config.json\" is another lake's: its networkPassphrase is \"Public Global Stellar Network ; "
                      "September 2015\", this lake's is \"Test SDF Network ; September 2015\" (--network-passphrase)",
                   "give another --lake-dir, or the flags it was made with");
    text = cs_lake_config_json(k_net, &f->layout, NULL);
    write_file(path_of(f, "config.json", path, sizeof path), text, strlen(text));
    free(text);
    text = cs_lake_manifest_json(k_net, &other, NULL);
    write_file(path_of(f, "ledgers/.config.json", path, sizeof path), text, strlen(text));
    free(text);
    expect_refused(f, "ledgers/.config.json\" is another lake's: its ledgersPerBatch is 64, this lake's is 1 "
                      "(--lake-ledgers-per-batch)",
                   NULL);
    write_file(path_of(f, "ledgers/.config.json", path, sizeof path), "not json", 8);
    expect_refused(f, ".config.json\" is another lake's: it is not a JSON object of strings and numbers", NULL);
}

/* The lake may neither lie in the ring's directory nor hold it as its ledgers, by real paths. */
static void test_overlap_refused(void **state)
{
    fixture *f = *state;
    open_ring(f);
    snprintf(f->lake, sizeof f->lake, "%s/lake", f->ring_dir);
    expect_refused(f, "overlaps the ring's", "give --lake-dir outside --data-dir's ledgers");
    /* Judged before anything is made: nothing is left in the ring's directory. */
    snprintf(f->lake, sizeof f->lake, "%s/../ledgers/a/b//", f->ring_dir);
    expect_refused(f, "overlaps the ring's", NULL);
    struct stat st;
    char made[PATHLEN];
    snprintf(made, sizeof made, "%s/a", f->ring_dir);
    assert_int_equal(stat(made, &st), -1);
    snprintf(made, sizeof made, "%s/lake", f->ring_dir);
    assert_int_equal(stat(made, &st), -1);
    cs_tmpdir_join(&f->dir, "data", f->lake, sizeof f->lake);
    expect_refused(f, "overlaps the ring's", NULL);
    snprintf(f->lake, sizeof f->lake, "%s", f->ring_dir);
    expect_refused(f, "overlaps the ring's", NULL);
}

/* A ring beside the fixture's holding the same ledgers 1..n: objects made from it are the bytes
 * the exporter would write, made before the fixture's ring has those ledgers. */
static cs_ring *shadow_ring(fixture *f, uint32_t n)
{
    char dir[PATH_MAX];
    cs_tmpdir_join(&f->dir, "shadow/ledgers", dir, sizeof dir);
    cs_ring *r = NULL;
    cs_err err = {0};
    if (cs_ring_open(&r, dir, 1000, &err) != 0 || cs_ring_claim(r, "shadow", 0, &err) != 0)
        fail_msg("shadow ring: %s", err.msg);
    for (uint32_t s = 1; s <= n; s++) {
        char buf[96];
        size_t len = content_of(s, buf);
        struct iovec iov = {buf, len};
        cs_ledger_record rec = {.len = len, .xxh64 = XXH64(buf, len, 0)};
        bool reset;
        if (cs_ring_put(r, s, &iov, 1, NULL, 0, &rec, &reset, &err) != 0)
            fail_msg("shadow put: %s", err.msg);
    }
    return r;
}

/* Batch b's object from ring r at level, written at path (the bytes returned, malloc'd). */
static uint8_t *place(cs_ring *r, cs_lake_batch b, int level, const char *path, size_t *len)
{
    uint8_t *obj = NULL;
    cs_err err = {0};
    if (cs_lake_object_build(r, b, level, &obj, len, NULL, &err) != 0)
        fail_msg("build: %s", err.msg);
    write_file(path, obj, *len);
    return obj;
}

/* Objects that appear at keys ahead of the export (another writer's) are never replaced: the same
 * bytes, or the same batch at another level, pass quietly (DEBUG); other content, or a file that
 * is not an object, is an ERROR naming the key, counted, and kept as it is. */
static void test_objects_in_place_kept(void **state)
{
    fixture *f = *state;
    open_ring(f);
    cs_ring *shadow = shadow_ring(f, 6);
    start(f);
    put_range(f, 1, 2);
    wait_for(f, 2, 0, 0, 0);
    char p3[PATHLEN], p4[PATHLEN], p5[PATHLEN], p6[PATHLEN];
    size_t l3, l4, l5;
    uint8_t *o3 = place(shadow, one(3), CS_LAKE_EXPORT_LEVEL_DEFAULT, object_path(f, one(3), p3, sizeof p3), &l3);
    uint8_t *o4 = place(shadow, one(4), 1, object_path(f, one(4), p4, sizeof p4), &l4);
    uint8_t *o5 = place(shadow, one(6), CS_LAKE_EXPORT_LEVEL_DEFAULT, object_path(f, one(5), p5, sizeof p5), &l5);
    write_file(object_path(f, one(6), p6, sizeof p6), "not zstd", 8);
    cs_ring_close(shadow);
    put_range(f, 3, 7);
    wait_for(f, 3, 0, 0, 2);
    expect_object(f, one(7));
    expect_file(p3, o3, l3);
    expect_file(p4, o4, l4);
    expect_file(p5, o5, l5);
    expect_file(p6, (const uint8_t *)"not zstd", 8);
    assert_int_equal(cs_logcap_count("msg=\"lake export: the object in place is the ring's batch already\""), 2);
    assert_int_equal(cs_logcap_count("level=ERROR msg=\"lake export: an object in place differs from the ring's batch; "
                                     "it is kept\""),
                     2);
    assert_int_equal(cs_logcap_count("key=FFFFFFFF--0-63999/FFFFFFFA--5.xdr.zst"), 1);
    assert_int_equal(cs_logcap_count("problem=\"its content differs from the ring's batch 5-5\""), 1);
    assert_int_equal(cs_logcap_count("key=FFFFFFFF--0-63999/FFFFFFF9--6.xdr.zst"), 1);
    assert_int_equal(cs_logcap_count("problem=\"it is not a zstd object: "), 1);
    assert_int_equal(count_tmp(f->lake), 0);
    cs_lake_export_stats st = stats(f);
    assert_int_equal(st.objects, 3);
    assert_int_equal(st.conflicts, 2);
    assert_int_equal(st.lag, 0);
    free(o3);
    free(o4);
    free(o5);
}

/* A write that fails (no space, no permission, an I/O error at flush) is retried with back-off:
 * one WARN per streak naming the file and the error, INFO when it works again, nothing left
 * behind, nothing skipped. */
static void test_io_errors_retried(void **state)
{
    fixture *f = *state;
    open_ring(f);
    cs_fault_arm(CS_FAULT_WRITE, ".xdr.zst.tmp", ENOSPC, -1);
    start(f);
    put_range(f, 1, 3);
    wait_for(f, 0, 3, 0, 0);
    assert_int_equal(stats(f).objects, 0);
    cs_fault_disarm();
    wait_for(f, 3, 3, 0, 0);
    assert_int_equal(cs_logcap_count("msg=\"lake export failed; retrying\""), 1);
    assert_int_equal(cs_logcap_count("error=\"lake: write \\\"" ), 1);
    assert_int_equal(cs_logcap_count("FFFFFFFE--1.xdr.zst\\\": No space left on device\""), 1);
    wait_logged("msg=\"lake export recovered\"", 1);

    cs_fault_arm(CS_FAULT_OPEN, ".xdr.zst.tmp", EACCES, 2);
    put_range(f, 4, 4);
    wait_for(f, 4, 5, 0, 0);
    assert_int_equal(cs_logcap_count("Permission denied"), 1);
    wait_logged("msg=\"lake export recovered\"", 2);
    cs_fault_arm(CS_FAULT_SYNC, ".xdr.zst.tmp", EIO, 1);
    put_range(f, 5, 5);
    wait_for(f, 5, 6, 0, 0);
    assert_int_equal(cs_logcap_count("error=\"lake: flush "), 1);
    assert_int_equal(cs_logcap_count("Input/output error"), 1);
    wait_logged("msg=\"lake export recovered\"", 3);
    for (uint32_t s = 1; s <= 5; s++)
        expect_object(f, one(s));
    assert_int_equal(count_tmp(f->lake), 0);
    assert_int_equal(stats(f).lost, 0);
}

/* Behind a failing disk the ring prunes ledgers before their turn: they are lost to the lake,
 * counted and named at WARN, and the export goes on from the ring's oldest. One batch below the
 * ring's oldest may still be written: the attempt in flight when the fault goes, its object made
 * before the prune. Every ledger is either lost or exported, once. */
static void test_pruned_before_export_lost(void **state)
{
    fixture *f = *state;
    f->retention = 5;
    open_ring(f);
    cs_fault_arm(CS_FAULT_WRITE, ".xdr.zst.tmp", EIO, -1);
    start(f);
    put_range(f, 1, 3);
    wait_for(f, 0, 1, 0, 0);
    put_range(f, 4, 20); /* the ring keeps 16..20 */
    cs_fault_disarm();
    wait_for(f, 5, 1, 14, 0);
    for (uint32_t s = 16; s <= 20; s++)
        expect_object(f, one(s));
    /* Each retry meets what the ring pruned since the last: the lines name what was lost. */
    assert_true(cs_logcap_count("msg=\"lake export fell behind: the ring pruned these ledgers before they were "
                                "exported; they are lost to the lake\" ") >= 1);
    assert_int_equal(cs_logcap_count(" first=1 last="), 1);
    wait_for(f, 20 - stats(f).lost, 1, 14, 0);
    cs_lake_export_stats st = stats(f);
    assert_int_equal(st.objects + st.lost, 20);
    assert_true(st.lost == 14 || st.lost == 15);
    assert_int_equal(st.lag, 0);
}

/* A ledger proven bad while its batch is made leaves a hole: that batch is lost (WARN), the
 * ones around it are exported. */
static void test_hole_lost(void **state)
{
    fixture *f = *state;
    open_ring(f);
    put_range(f, 1, 5);
    char path[PATHLEN];
    snprintf(path, sizeof path, "%s/ledger-3.xdr", f->ring_dir);
    int fd = open(path, O_WRONLY);
    assert_true(fd >= 0);
    assert_int_equal(pwrite(fd, "L", 1, 0), 1);
    close(fd);
    start(f);
    wait_for(f, 4, 0, 1, 0);
    expect_absent(f, one(3));
    for (uint32_t s = 1; s <= 5; s++)
        if (s != 3)
            expect_object(f, one(s));
    assert_int_equal(cs_logcap_count("msg=\"lake export: a batch is not wholly in the ring; it is lost to the lake\" "),
                     1);
    assert_int_equal(stats(f).lost, 1);
}

/* A stop with a drain exports what the ring holds whole before the thread ends; the lag, before
 * the start, counts the ledgers not yet exported. */
static void test_stop_drains(void **state)
{
    fixture *f = *state;
    open_ring(f);
    put_range(f, 1, 10);
    cs_err err = {0};
    assert_int_equal(new_export(f, &err), 0);
    assert_int_equal(stats(f).lag, 10);
    assert_int_equal(cs_lake_export_start(f->x, &err), 0);
    cs_lake_export_stop(f->x, 60 * 1000000000LL);
    cs_lake_export_stats st = stats(f);
    assert_int_equal(st.objects, 10);
    assert_int_equal(st.lag, 0);
    for (uint32_t s = 1; s <= 10; s++)
        expect_object(f, one(s));
}

int main(void)
{
    /* The exporter's thread at the test's own priority: beside busy loops nice 19 gets next to
     * nothing, and every wait here is for that thread. */
    cs_thread_set_background_nice(0);
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_exports_each_batch, setup, teardown),
        cmocka_unit_test_setup_teardown(test_partitions, setup, teardown),
        cmocka_unit_test_setup_teardown(test_resumes_after_newest, setup, teardown),
        cmocka_unit_test_setup_teardown(test_skips_what_the_ring_lost, setup, teardown),
        cmocka_unit_test_setup_teardown(test_leftovers_removed, setup, teardown),
        cmocka_unit_test_setup_teardown(test_other_lakes_config_refused, setup, teardown),
        cmocka_unit_test_setup_teardown(test_overlap_refused, setup, teardown),
        cmocka_unit_test_setup_teardown(test_objects_in_place_kept, setup, teardown),
        cmocka_unit_test_setup_teardown(test_io_errors_retried, setup, teardown),
        cmocka_unit_test_setup_teardown(test_pruned_before_export_lost, setup, teardown),
        cmocka_unit_test_setup_teardown(test_hole_lost, setup, teardown),
        cmocka_unit_test_setup_teardown(test_stop_drains, setup, teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
