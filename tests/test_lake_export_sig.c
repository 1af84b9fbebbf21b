/* SPDX-License-Identifier: Apache-2.0 */
/* The lake exporter's signature objects (docs/LAKE.md "Signatures in an export"): a signed
 * batch's <key>.sig (cs_lake_sig_build's bytes) is written beside its object, right after it, with
 * the object's guarantees (temporary file, flush, no-replace link; never rewritten: other bytes in
 * place are an ERROR naming the key, kept); an unsigned batch has none; a failed .sig is retried
 * without the object written again, and the next batch waits for it; so the first name a listing
 * gives that the Go SDK takes for a ledger file is always an object's, never a .sig's; an export
 * stopped between the two writes leaves the newest object without its .sig, and the next start
 * gives it its .sig, as it does to any object a previous run left without one while the ring has
 * the signatures. On a ring of the test's own whose records carry stand-in SIG messages (lakeexportfx.h):
 * the exporter copies them, nothing here verifies them (test_lake_export_e2e does, with real
 * keys). */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <dirent.h>
#include <regex.h>
#include <unistd.h>

#include "common/thread.h"
#include "support/lakeexportfx.h"

/* The path of batch b's .sig under the fixture's layout. */
static char *sig_path(const fixture *f, cs_lake_batch b, char *buf, size_t len)
{
    object_path(f, b, buf, len - sizeof CS_LAKE_SIG_SUFFIX);
    strcat(buf, CS_LAKE_SIG_SUFFIX);
    return buf;
}

/* The .sig the ring makes of batch b. */
static uint8_t *sig_made(fixture *f, cs_lake_batch b, size_t *len)
{
    uint8_t *sig = NULL;
    cs_err err = {0};
    if (cs_lake_sig_build(f->ring, b, &sig, len, &err) != 0)
        fail_msg("sig build: %s", err.msg);
    return sig;
}

/* The file at batch b's .sig key holds exactly what the ring makes of it. */
static void expect_sig(fixture *f, cs_lake_batch b)
{
    char path[PATHLEN];
    size_t len;
    uint8_t *want = sig_made(f, b, &len);
    sig_path(f, b, path, sizeof path);
    expect_file(path, want, len);
    free(want);
}

static bool sig_exists(fixture *f, cs_lake_batch b)
{
    char path[PATHLEN];
    struct stat st;
    return stat(sig_path(f, b, path, sizeof path), &st) == 0;
}

static void stat_sig(fixture *f, uint32_t seq, struct stat *st)
{
    char path[PATHLEN];
    assert_int_equal(stat(sig_path(f, one(seq), path, sizeof path), st), 0);
}

static void expect_same_file(const struct stat *a, const struct stat *b)
{
    assert_int_equal(a->st_ino, b->st_ino);
    assert_int_equal(a->st_mtim.tv_sec, b->st_mtim.tv_sec);
    assert_int_equal(a->st_mtim.tv_nsec, b->st_mtim.tv_nsec);
}

static void remove_sig(fixture *f, uint32_t seq)
{
    char path[PATHLEN];
    assert_int_equal(unlink(sig_path(f, one(seq), path, sizeof path)), 0);
}

static int byte_order(const struct dirent **a, const struct dirent **b)
{
    return strcmp((*a)->d_name, (*b)->d_name);
}

/* The first name of the (first) partition directory, in the order an object store lists keys, that
 * the Go SDK takes for a ledger file (its ledgerFilenameRe): the name it learns the objects'
 * extension from (GetLedgerFileExtension: the last one). "" when there is none. */
static void first_ledger_name(const fixture *f, char *out, size_t len)
{
    char dir[PATHLEN];
    regex_t re;
    assert_int_equal(regcomp(&re, "^[0-9A-F]{8}--[0-9]+(-[0-9]+)?\\.xdr\\.[A-Za-z0-9._-]+$", REG_EXTENDED | REG_NOSUB),
                     0);
    struct dirent **names = NULL;
    int n = scandir(path_of(f, "ledgers/FFFFFFFF--0-63999", dir, sizeof dir), &names, NULL, byte_order);
    snprintf(out, len, "%s", "");
    for (int i = 0; i < n; i++) {
        if (!*out && regexec(&re, names[i]->d_name, 0, NULL, 0) == 0)
            snprintf(out, len, "%s", names[i]->d_name);
        free(names[i]);
    }
    free(names);
    regfree(&re);
}

static void expect_first_ledger_name(const fixture *f, const char *want)
{
    char name[256];
    first_ledger_name(f, name, sizeof name);
    assert_string_equal(name, want);
}

typedef struct sigs_want {
    fixture *f;
    uint64_t signatures;
} sigs_want;

static bool sigs_reached(void *arg)
{
    sigs_want *w = arg;
    return stats(w->f).signatures >= w->signatures;
}

static void wait_sigs(fixture *f, uint64_t n)
{
    sigs_want w = {f, n};
    if (cs_wait_until(sigs_reached, &w, WAIT_MS) != 0)
        fail_msg("exporter at signatures=%" PRIu64 ", waited for %" PRIu64, stats(f).signatures, n);
}

/* ---- cases ---- */

/* Each signed batch's .sig beside its object, exactly the ring's signatures; the unsigned batch has
 * none and that is no error; the counters count both, the bytes of both. */
static void test_sigs_beside_objects(void **state)
{
    fixture *f = *state;
    open_ring(f);
    start(f);
    for (uint32_t s = 1; s <= 5; s++)
        s == 4 ? put(f, s) : put_signed(f, s);
    wait_for(f, 5, 0, 0, 0);
    wait_sigs(f, 4); /* the last .sig follows its object */
    uint64_t bytes = 0;
    for (uint32_t s = 1; s <= 5; s++) {
        size_t olen, slen = 0;
        free(made(f, one(s), &olen));
        expect_object(f, one(s));
        if (s == 4) {
            assert_false(sig_exists(f, one(s)));
        } else {
            free(sig_made(f, one(s), &slen));
            expect_sig(f, one(s));
        }
        bytes += olen + slen;
    }
    char path[PATHLEN];
    assert_non_null(strstr(sig_path(f, one(1), path, sizeof path), "/ledgers/FFFFFFFF--0-63999/FFFFFFFE--1.xdr.zst.sig"));
    cs_lake_export_stats st = stats(f);
    assert_int_equal(st.objects, 5);
    assert_int_equal(st.signatures, 4);
    assert_int_equal(st.bytes, bytes);
    assert_int_equal(st.io_errors + st.conflicts + st.lost, 0);
    assert_int_equal(count_tmp(f->lake), 0);
    assert_int_equal(cs_logcap_count("level=ERROR"), 0);
    assert_int_equal(cs_logcap_count("level=WARN"), 0);
}

/* The object first, then its .sig: while an object cannot be written, neither is its .sig;
 * while a .sig cannot be written, its object is in place and stays as it was, and the first name
 * the SDK would take for a ledger file is the newest object's (a .sig written first would be that
 * name: the SDK would then look for .xdr.sig objects). An exporter stopped then (a crash between
 * the two writes) leaves the newest object without its .sig; the next start gives it its .sig. */
static void test_object_before_sig(void **state)
{
    fixture *f = *state;
    open_ring(f);
    cs_fault_arm(CS_FAULT_WRITE, ".xdr.zst.tmp", EIO, -1);
    start(f);
    put_signed(f, 1);
    wait_for(f, 0, 2, 0, 0);
    expect_absent(f, one(1));
    assert_false(sig_exists(f, one(1)));
    expect_first_ledger_name(f, "");
    cs_fault_disarm();
    wait_sigs(f, 1);
    expect_first_ledger_name(f, "FFFFFFFE--1.xdr.zst");
    cs_fault_arm(CS_FAULT_WRITE, ".sig.tmp", EIO, -1);
    uint64_t failures = stats(f).io_errors;
    put_signed(f, 2);
    wait_for(f, 2, failures + 2, 0, 0); /* the object, then at least two failed .sig writes */
    expect_object(f, one(2));
    assert_false(sig_exists(f, one(2)));
    expect_first_ledger_name(f, "FFFFFFFD--2.xdr.zst");
    struct stat before, after;
    stat_of(f, 2, &before);
    stop(f);
    stat_of(f, 2, &after);
    expect_same_file(&before, &after); /* the retries did not write it again */
    assert_int_equal(count_tmp(f->lake), 0);
    cs_fault_disarm();
    start(f);
    wait_sigs(f, 1);
    expect_sig(f, one(2));
    stat_of(f, 2, &after);
    expect_same_file(&before, &after);
    expect_first_ledger_name(f, "FFFFFFFD--2.xdr.zst");
    assert_int_equal(cs_logcap_count("msg=\"lake export: signatures written beside objects that had none\""), 1);
    assert_int_equal(cs_logcap_count(" first=2 last=2 signatures=1"), 1);
    assert_int_equal(cs_logcap_count("level=ERROR"), 0);
    assert_int_equal(stats(f).objects, 0);
}

/* A .sig that cannot be written is retried like an object (one WARN naming it, INFO when it works),
 * and the next batch waits for it. */
static void test_sig_io_errors_retried(void **state)
{
    fixture *f = *state;
    open_ring(f);
    cs_fault_arm(CS_FAULT_WRITE, ".sig.tmp", ENOSPC, -1);
    start(f);
    put_signed(f, 1);
    put_signed(f, 2);
    wait_for(f, 1, 3, 0, 0);
    expect_object(f, one(1));
    assert_false(sig_exists(f, one(1)));
    expect_absent(f, one(2));
    cs_fault_disarm();
    wait_for(f, 2, 3, 0, 0);
    wait_sigs(f, 2);
    expect_sig(f, one(1));
    expect_sig(f, one(2));
    expect_object(f, one(2));
    assert_int_equal(cs_logcap_count("msg=\"lake export failed; retrying\""), 1);
    assert_int_equal(cs_logcap_count("FFFFFFFE--1.xdr.zst.sig\\\": No space left on device\""), 1);
    wait_logged("msg=\"lake export recovered\"", 1);
    assert_int_equal(stats(f).objects, 2);
    assert_int_equal(count_tmp(f->lake), 0);
}

/* A .sig in place is never rewritten: exactly the ring's bytes pass quietly (DEBUG); other bytes
 * (another key's signatures) are an ERROR naming the .sig's key, counted, kept; the object is
 * written all the same. */
static void test_sig_in_place_kept(void **state)
{
    fixture *f = *state;
    open_ring(f);
    start(f);
    put_signed(f, 1);
    put_signed(f, 2);
    wait_for(f, 2, 0, 0, 0);
    char p3[PATHLEN], p4[PATHLEN];
    uint8_t other[CS_WIRE_SIG_MAX_LEN + 2], same[CS_WIRE_SIG_MAX_LEN + 2];
    uint16_t n = sig_of(3, 0xCD, other + 2);
    other[0] = (uint8_t)(n >> 8);
    other[1] = (uint8_t)n;
    n = sig_of(4, 0xAB, same + 2);
    same[0] = (uint8_t)(n >> 8);
    same[1] = (uint8_t)n;
    write_file(sig_path(f, one(3), p3, sizeof p3), other, n + 2u);
    write_file(sig_path(f, one(4), p4, sizeof p4), same, n + 2u);
    put_signed(f, 3);
    put_signed(f, 4);
    put_signed(f, 5);
    wait_for(f, 5, 0, 0, 1);
    wait_sigs(f, 3);
    expect_file(p3, other, n + 2u);
    expect_sig(f, one(4));
    expect_sig(f, one(5));
    for (uint32_t s = 3; s <= 5; s++)
        expect_object(f, one(s));
    assert_int_equal(cs_logcap_count("level=ERROR msg=\"lake export: an object in place differs from the ring's batch; "
                                     "it is kept\""),
                     1);
    assert_int_equal(cs_logcap_count(" key=FFFFFFFF--0-63999/FFFFFFFC--3.xdr.zst.sig "), 1);
    assert_int_equal(cs_logcap_count("/ledgers/FFFFFFFF--0-63999/FFFFFFFC--3.xdr.zst.sig problem=\"its bytes differ "
                                     "from the ring's signatures of batch 3-3\""),
                     1);
    assert_int_equal(cs_logcap_count("msg=\"lake export: the object in place is the ring's batch already\""), 1);
    cs_lake_export_stats st = stats(f);
    assert_int_equal(st.signatures, 3);
    assert_int_equal(st.conflicts, 1);
}

/* At resume the objects a previous run left without their .sig get theirs, from the lowest up,
 * while the ring has the signatures; the .sig objects in place are not written again, and an
 * unsigned batch ends the look. Said once per resume at INFO. */
static void test_resume_gives_missing_sigs(void **state)
{
    fixture *f = *state;
    open_ring(f);
    start(f);
    put_range(f, 1, 2);
    for (uint32_t s = 3; s <= 6; s++)
        put_signed(f, s);
    wait_for(f, 6, 0, 0, 0);
    stop(f);
    struct stat before[7];
    for (uint32_t s = 3; s <= 6; s++)
        stat_sig(f, s, &before[s]);
    for (uint32_t s = 4; s <= 6; s++)
        remove_sig(f, s);
    put_signed(f, 7);
    start(f);
    wait_for(f, 1, 0, 0, 0);
    wait_sigs(f, 4);
    for (uint32_t s = 3; s <= 7; s++)
        expect_sig(f, one(s));
    struct stat now;
    stat_sig(f, 3, &now);
    expect_same_file(&before[3], &now);
    expect_object(f, one(7));
    assert_int_equal(cs_logcap_count("msg=\"lake export: signatures written beside objects that had none\""), 1);
    assert_int_equal(cs_logcap_count(" first=4 last=6 signatures=3"), 1);
    stop(f);

    /* As a lake written by a corestreamd without .sig objects: none at all. */
    for (uint32_t s = 3; s <= 7; s++)
        remove_sig(f, s);
    start(f);
    wait_sigs(f, 5);
    for (uint32_t s = 3; s <= 7; s++)
        expect_sig(f, one(s));
    assert_false(sig_exists(f, one(2)));
    assert_int_equal(cs_logcap_count(" first=3 last=7 signatures=5"), 1);
    stop(f);

    /* Every .sig in place: nothing to say. */
    start(f);
    put_signed(f, 8);
    wait_for(f, 1, 0, 0, 0);
    wait_sigs(f, 1);
    expect_sig(f, one(8));
    assert_int_equal(cs_logcap_count("msg=\"lake export: signatures written beside objects that had none\""), 2);
    assert_int_equal(cs_logcap_count("level=ERROR"), 0);
}

int main(void)
{
    /* The exporter's thread at the test's own priority (as test_lake_export). */
    cs_thread_set_background_nice(0);
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_sigs_beside_objects, setup, teardown),
        cmocka_unit_test_setup_teardown(test_object_before_sig, setup, teardown),
        cmocka_unit_test_setup_teardown(test_sig_io_errors_retried, setup, teardown),
        cmocka_unit_test_setup_teardown(test_sig_in_place_kept, setup, teardown),
        cmocka_unit_test_setup_teardown(test_resume_gives_missing_sigs, setup, teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
