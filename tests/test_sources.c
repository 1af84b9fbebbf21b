/* SPDX-License-Identifier: Apache-2.0 */
/* The synthetic and file ledger streams, the counted range and --file-dir validation
 * (PORTSPEC 1.3, 1.4b, 1.4c; catalogue 4, 73-77, 80-84). */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common/synthetic.h"
#include "corestreamd/sources/pace.h"
#include "corestreamd/sources/rejoin.h"
#include "corestreamd/sources/file.h"
#include "corestreamd/sources/synthetic.h"
#include "store/ledgerdir.h"
#include "store/ring.h"
#include "common/log.h"
#include "support/logcapture.h"
#include <xxhash.h>
#include "support/tmpdir.h"

/* Per-test state: a cancel and a scratch directory. */
typedef cs_dir_fixture fixture;

static int setup(void **state) { return cs_dir_fixture_setup(state, "sources"); }
static int teardown(void **state) { return cs_dir_fixture_teardown(state); }

static void write_file(const char *dir, const char *name, const void *data, size_t len)
{
    char path[1024];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    FILE *fp = fopen(path, "wb");
    assert_non_null(fp);
    assert_int_equal(fwrite(data, 1, len, fp), len);
    assert_int_equal(fclose(fp), 0);
}

/* Lays out one ledger-<seq>.xdr per string, numbered from first. */
static void write_dump(const char *dir, uint32_t first, const char *const *records, size_t n)
{
    for (size_t i = 0; i < n; i++) {
        char name[CS_LEDGER_NAME_MAX];
        cs_ledger_name_format(name, sizeof name, first + (uint32_t)i);
        write_file(dir, name, records[i], strlen(records[i]));
    }
}

static cs_ledger_stream *open_dump(fixture *f, size_t want_records)
{
    cs_ledger_stream *ls = NULL;
    size_t records = 0;
    cs_err err = {0};
    assert_int_equal(cs_file_stream_new(&ls, f->root, &f->cancel, 0, &records, &err), 0);
    assert_int_equal(records, want_records);
    return ls;
}

/* Pulls one ledger and checks it is the given text. */
static void expect_pull(cs_ledger_stream *ls, uint32_t seq, const char *want)
{
    const uint8_t *data = NULL;
    size_t len = 0;
    cs_err err = {0};
    assert_int_equal(ls->ops->pull(ls, seq, &data, &len, &err), 1);
    assert_int_equal(len, strlen(want));
    assert_memory_equal(data, want, len);
}

static uint32_t be32(const uint8_t *p)
{
    return (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 | (uint32_t)p[2] << 8 | p[3];
}

/* ---- synthetic ---- */

/* 73: the adapter's range bounds the otherwise endless stream. */
static void test_synthetic_bounded_range(void **state)
{
    fixture *f = *state;
    cs_range r = {.from = 5, .to = 9, .bounded = true};
    cs_source *src =
        cs_paced_source_new(cs_synthetic_stream_new(128, false, &f->cancel), r, 0, 0, &f->cancel);
    assert_non_null(src);
    cs_emission em;
    cs_err err = {0};
    uint32_t seen[16];
    int count = 0, rc;
    while (count < 16 && (rc = src->ops->next(src, &em, &err)) == 1) {
        uint8_t body[128];
        assert_int_equal(src->ops->read(src, body, sizeof body, &err), 128);
        assert_int_equal(em.seq, be32(body));
        seen[count++] = be32(body);
    }
    assert_int_equal(rc, 0);
    assert_int_equal(count, 5);
    for (int i = 0; i < 5; i++)
        assert_int_equal(seen[i], 5 + i);
    src->ops->destroy(src);
}

/* 74 */
static void test_synthetic_reuses_its_buffer(void **state)
{
    fixture *f = *state;
    cs_ledger_stream *ls = cs_synthetic_stream_new(64, false, &f->cancel);
    const uint8_t *first = NULL, *second = NULL;
    size_t len = 0;
    cs_err err = {0};
    uint8_t copy[64];
    assert_int_equal(ls->ops->pull(ls, 1, &first, &len, &err), 1);
    memcpy(copy, first, sizeof copy);
    assert_int_equal(ls->ops->pull(ls, 2, &second, &len, &err), 1);
    assert_ptr_equal(first, second);
    assert_memory_not_equal(first, copy, sizeof copy);
    assert_int_equal(be32(first), 2);
    ls->ops->destroy(ls);
}

/* 75: the consumer stops after 3 pulls of an unbounded source; nothing more is produced. */
static void test_synthetic_stops_when_the_consumer_does(void **state)
{
    fixture *f = *state;
    cs_range r = {.from = 1, .bounded = false};
    cs_source *src =
        cs_paced_source_new(cs_synthetic_stream_new(32, false, &f->cancel), r, 0, 0, &f->cancel);
    cs_emission em;
    cs_err err = {0};
    int pulled = 0;
    while (pulled < 3 && src->ops->next(src, &em, &err) == 1)
        pulled++;
    assert_int_equal(pulled, 3);
    assert_int_equal(em.seq, 3);
    src->ops->destroy(src);
}

/* 76 */
static void test_synthetic_honours_cancel(void **state)
{
    fixture *f = *state;
    cs_ledger_stream *ls = cs_synthetic_stream_new(32, false, &f->cancel);
    const uint8_t *data = NULL;
    size_t len = 0;
    cs_err err = {0};
    assert_int_equal(ls->ops->pull(ls, 1, &data, &len, &err), 1);
    cs_cancel_fire(&f->cancel);
    assert_int_equal(ls->ops->pull(ls, 2, &data, &len, &err), -1);
    assert_int_equal(err.kind, CS_ERR_CANCELLED);
    assert_string_equal(err.msg, "context canceled");
    ls->ops->destroy(ls);
}

static void test_synthetic_sizes_and_payload(void **state)
{
    fixture *f = *state;
    const uint8_t *data = NULL;
    size_t len = 0;
    cs_err err = {0};

    cs_ledger_stream *ls = cs_synthetic_stream_new(0, true, &f->cancel);
    assert_int_equal(ls->ops->pull(ls, 9, &data, &len, &err), 1);
    assert_int_equal(len, CS_SYNTHETIC_DEFAULT_SIZE);
    uint8_t *want = calloc(len, 1);
    assert_non_null(want);
    cs_synthetic_fill(want, len, 9, true);
    assert_memory_equal(data, want, len);
    free(want);
    ls->ops->destroy(ls);

    ls = cs_synthetic_stream_new(-5, false, &f->cancel);
    assert_int_equal(ls->ops->pull(ls, 1, &data, &len, &err), 1);
    assert_int_equal(len, CS_SYNTHETIC_DEFAULT_SIZE);
    ls->ops->destroy(ls);

    /* Shorter than the sequence field: honoured, and left as zeros. */
    ls = cs_synthetic_stream_new(3, false, &f->cancel);
    assert_int_equal(ls->ops->pull(ls, 7, &data, &len, &err), 1);
    assert_int_equal(len, 3);
    assert_memory_equal(data, "\0\0\0", 3);
    ls->ops->destroy(ls);
}

/* 77 */
static void test_counted_range(void **state)
{
    (void)state;
    char buf[64];
    cs_range r = cs_counted_range(10, 0);
    assert_false(r.bounded);
    assert_int_equal(r.from, 10);
    cs_range_format(r, buf, sizeof buf);
    assert_string_equal(buf, "[10,latest)");

    r = cs_counted_range(10, 3);
    assert_true(r.bounded);
    assert_int_equal(r.from, 10);
    assert_int_equal(r.to, 12);
    cs_range_format(r, buf, sizeof buf);
    assert_string_equal(buf, "[10,12]");

    r = cs_counted_range(4294967290u, 5);
    assert_int_equal(r.to, 4294967294u);
}

/* ---- file ---- */

/* 80: the dump's own numbers only order the records; the pull's seq is the renumbering. */
static void test_file_replays_in_order(void **state)
{
    fixture *f = *state;
    const char *recs[] = {"first", "second", "third"};
    write_dump(f->root, 900, recs, 3);
    cs_ledger_stream *ls = open_dump(f, 3);
    expect_pull(ls, 1, "first");
    expect_pull(ls, 2, "second");
    expect_pull(ls, 3, "third");
    ls->ops->destroy(ls);
}

/* skip: the first pull replays record skip mod records, then the dump goes on cycling. */
static void test_file_starts_at_the_skipped_record(void **state)
{
    fixture *f = *state;
    const char *recs[] = {"first", "second", "third"};
    write_dump(f->root, 900, recs, 3);
    cs_ledger_stream *ls = NULL;
    size_t records = 0;
    cs_err err = {0};
    assert_int_equal(cs_file_stream_new(&ls, f->root, &f->cancel, 7, &records, &err), 0); /* 7 mod 3 */
    expect_pull(ls, 8, "second");
    expect_pull(ls, 9, "third");
    expect_pull(ls, 10, "first");
    ls->ops->destroy(ls);
}

/* 81 */
static void test_file_cycles_when_the_range_outruns_the_dump(void **state)
{
    fixture *f = *state;
    const char *recs[] = {"a", "b"};
    write_dump(f->root, 1, recs, 2);
    cs_range r = {.from = 10, .to = 14, .bounded = true};
    cs_source *src = cs_paced_source_new(open_dump(f, 2), r, 0, 0, &f->cancel);
    const char *want = "ababa";
    cs_emission em;
    cs_err err = {0};
    int count = 0, rc;
    while (count < 10 && (rc = src->ops->next(src, &em, &err)) == 1) {
        uint8_t body[4];
        assert_int_equal(em.seq, 10 + count);
        assert_int_equal(em.declared_size, 1);
        assert_int_equal(src->ops->read(src, body, sizeof body, &err), 1);
        assert_int_equal(body[0], want[count]);
        count++;
    }
    assert_int_equal(rc, 0);
    assert_int_equal(count, 5);
    src->ops->destroy(src);
}

/* 82 */
static void test_file_unbounded_is_endless(void **state)
{
    fixture *f = *state;
    const char *recs[] = {"x"};
    write_dump(f->root, 5, recs, 1);
    cs_ledger_stream *ls = open_dump(f, 1);
    for (uint32_t seq = 1; seq <= 10; seq++)
        expect_pull(ls, seq, "x");
    ls->ops->destroy(ls);
}

/* 83 */
static void test_file_honours_cancel(void **state)
{
    fixture *f = *state;
    const char *recs[] = {"x"};
    write_dump(f->root, 1, recs, 1);
    cs_ledger_stream *ls = open_dump(f, 1);
    expect_pull(ls, 1, "x");
    cs_cancel_fire(&f->cancel);
    const uint8_t *data;
    size_t len;
    cs_err err = {0};
    assert_int_equal(ls->ops->pull(ls, 2, &data, &len, &err), -1);
    assert_int_equal(err.kind, CS_ERR_CANCELLED);
    assert_string_equal(err.msg, "context canceled");
    ls->ops->destroy(ls);
}

/* 84 */
static void test_file_rejects_bad_dumps(void **state)
{
    fixture *f = *state;
    cs_ledger_stream *ls = NULL;
    size_t records = 0;
    cs_err err = {0};
    char want[1200], dir[700];

    snprintf(dir, sizeof dir, "%s/empty", f->root);
    assert_int_equal(mkdir(dir, 0755), 0);
    write_file(dir, "ledger-7.xdr.tmp", "t", 1); /* not a ledger name */
    assert_int_equal(cs_file_stream_new(&ls, dir, &f->cancel, 0, &records, &err), -1);
    snprintf(want, sizeof want, "file source: \"%s\" holds no ledger-<seq>.xdr files", dir);
    assert_string_equal(err.msg, want);
    assert_null(ls);

    snprintf(dir, sizeof dir, "%s/nope", f->root);
    assert_int_equal(cs_file_stream_new(&ls, dir, &f->cancel, 0, &records, &err), -1);
    snprintf(want, sizeof want, "file source: scan \"%s\": No such file or directory", dir);
    assert_string_equal(err.msg, want);

    snprintf(dir, sizeof dir, "%s/gap", f->root);
    assert_int_equal(mkdir(dir, 0755), 0);
    write_file(dir, "ledger-1.xdr", "a", 1);
    write_file(dir, "ledger-4.xdr", "b", 1);
    assert_int_equal(cs_file_stream_new(&ls, dir, &f->cancel, 0, &records, &err), -1);
    assert_non_null(strstr(err.msg, "non-contiguous"));
    assert_true(strncmp(err.msg, "file source: ", 13) == 0);

    write_file(f->root, "ledger-1.xdr", "a", 1);
    write_file(f->root, "notes.txt", "hi", 2);
    ls = open_dump(f, 1);
    ls->ops->destroy(ls);
}

/* The prototype rebuilt each path from the parsed number and so could not replay a zero-padded
 * dump it had accepted; the port reads the file it found. */
static void test_file_replays_zero_padded_names(void **state)
{
    fixture *f = *state;
    write_file(f->root, "ledger-007.xdr", "seven", 5);
    write_file(f->root, "ledger-8.xdr", "eight", 5);
    cs_ledger_stream *ls = open_dump(f, 2);
    expect_pull(ls, 1, "seven");
    expect_pull(ls, 2, "eight");
    ls->ops->destroy(ls);
}

/* Each emission re-reads its file: an edited record shows up on the next cycle. */
static void test_file_rereads_each_record(void **state)
{
    fixture *f = *state;
    write_file(f->root, "ledger-1.xdr", "short", 5);
    cs_ledger_stream *ls = open_dump(f, 1);
    expect_pull(ls, 1, "short");
    write_file(f->root, "ledger-1.xdr", "a much longer record", 20);
    expect_pull(ls, 2, "a much longer record");
    write_file(f->root, "ledger-1.xdr", "", 0);
    expect_pull(ls, 3, "");
    ls->ops->destroy(ls);
}

static void test_file_deleted_mid_run(void **state)
{
    fixture *f = *state;
    const char *recs[] = {"a", "b"};
    write_dump(f->root, 1, recs, 2);
    cs_ledger_stream *ls = open_dump(f, 2);
    expect_pull(ls, 50, "a");
    char path[700];
    snprintf(path, sizeof path, "%s/ledger-2.xdr", f->root);
    assert_int_equal(unlink(path), 0);
    const uint8_t *data;
    size_t len;
    cs_err err = {0};
    assert_int_equal(ls->ops->pull(ls, 51, &data, &len, &err), -1);
    assert_string_equal(err.msg, "file source: ledger 51: No such file or directory");
    assert_int_not_equal(err.kind, CS_ERR_CANCELLED);
    ls->ops->destroy(ls);
}

static void test_file_over_the_payload_cap(void **state)
{
    fixture *f = *state;
    char path[700], want[1200];
    snprintf(path, sizeof path, "%s/ledger-1.xdr", f->root);
    int fd = open(path, O_CREAT | O_WRONLY | O_TRUNC, 0644);
    assert_true(fd >= 0);
    assert_int_equal(ftruncate(fd, 268435457), 0); /* sparse: costs no disk */
    close(fd);
    cs_ledger_stream *ls = open_dump(f, 1);
    const uint8_t *data;
    size_t len;
    cs_err err = {0};
    assert_int_equal(ls->ops->pull(ls, 1, &data, &len, &err), -1);
    snprintf(want, sizeof want,
             "ledger file %s is 268435457 bytes, over the 268435456-byte protocol payload cap",
             path);
    assert_string_equal(err.msg, want);
    ls->ops->destroy(ls);
}

/* ---- --file-dir validation ---- */

static void expect_refused(const char *fd, const char *data_dir, const char *ring)
{
    cs_err err = {0};
    char want[2048];
    /* A cut expectation would compare against the wrong text, so truncation fails the test. */
    int n = snprintf(want, sizeof want,
                     "--file-dir \"%s\" is this server's own retention ring (%s), which prunes and "
                     "resets its directory; replaying it would destroy the dump — copy it elsewhere "
                     "or use a different --data-dir",
                     fd, ring);
    assert_true(n >= 0 && (size_t)n < sizeof want);
    assert_int_equal(cs_file_dir_validate(fd, data_dir, &err), -1);
    assert_string_equal(err.msg, want);
}

/* catalogue 4 */
static void test_validate_refuses_the_ring_by_path(void **state)
{
    (void)state;
    cs_err err = {0};
    expect_refused("corestreamd-data/ledgers", "corestreamd-data", "corestreamd-data/ledgers");
    expect_refused("./corestreamd-data/ledgers", "corestreamd-data", "corestreamd-data/ledgers");
    expect_refused("corestreamd-data//ledgers/", "corestreamd-data", "corestreamd-data/ledgers");
    expect_refused("x/../corestreamd-data/ledgers", "./corestreamd-data/",
                   "corestreamd-data/ledgers");
    assert_int_equal(cs_file_dir_validate("/data/sac-6000", "corestreamd-data", &err), 0);
    assert_int_equal(cs_file_dir_validate("corestreamd-data", "corestreamd-data", &err), 0);

    /* A relative ring against its absolute spelling: the comparison is of absolute paths. */
    char *cwd = getcwd(NULL, 0);
    assert_non_null(cwd);
    char abs[4096];
    snprintf(abs, sizeof abs, "%s/corestreamd-data/ledgers", strcmp(cwd, "/") ? cwd : "");
    expect_refused(abs, "corestreamd-data", "corestreamd-data/ledgers");
    free(cwd);
}

static void test_validate_refuses_the_ring_by_inode(void **state)
{
    fixture *f = *state;
    char data[700], ring[800], link[700];
    snprintf(data, sizeof data, "%s/data", f->root);
    snprintf(ring, sizeof ring, "%s/ledgers", data);
    snprintf(link, sizeof link, "%s/dump", f->root);
    assert_int_equal(mkdir(data, 0755), 0);
    assert_int_equal(mkdir(ring, 0755), 0);
    assert_int_equal(symlink(ring, link), 0);
    expect_refused(link, data, ring);

    /* A different directory of the same shape is fine. */
    char other[700];
    cs_err err = {0};
    snprintf(other, sizeof other, "%s/copy", f->root);
    assert_int_equal(mkdir(other, 0755), 0);
    assert_int_equal(cs_file_dir_validate(other, data, &err), 0);
}

/* ---- rejoin: re-emitted ledgers compared with the ring ---- */

#define RJ_SIZE 3000

/* A ring in root/ledgers holding from..to, each the synthetic ledger of its seq except odd. */
static cs_ring *rejoin_ring(fixture *f, uint32_t from, uint32_t to, uint32_t odd)
{
    char dir[1024];
    snprintf(dir, sizeof dir, "%s/ledgers", f->root);
    cs_ring *r;
    cs_err err = {0};
    assert_int_equal(cs_ring_open(&r, dir, 100, &err), 0);
    for (uint32_t s = from; s <= to; s++) {
        uint8_t buf[RJ_SIZE];
        cs_synthetic_fill(buf, sizeof buf, s, false);
        if (s == odd)
            buf[7] ^= 1;
        struct iovec part = {buf, sizeof buf};
        cs_ledger_record rec = {.len = sizeof buf, .xxh64 = XXH64(buf, sizeof buf, 0)};
        assert_int_equal(cs_ring_put(r, s, &part, 1, NULL, 0, &rec, NULL, &err), 0);
    }
    return r;
}

/* The synthetic ledgers first..first+count-1, wrapped. */
static cs_source *rejoin_over(fixture *f, cs_ring *r, uint32_t first, uint32_t count)
{
    cs_ledger_stream *ls = cs_synthetic_stream_new(RJ_SIZE, false, &f->cancel);
    cs_source *inner = cs_paced_source_new(ls, cs_counted_range(first, count), 0, 0, &f->cancel);
    cs_source *s;
    cs_err err = {0};
    assert_int_equal(cs_rejoin_source_new(&s, inner, r, &err), 0);
    return s;
}

/* Ledgers 3-5 re-emitted with the ring's bytes are skipped, counted and logged once; 6 passes
 * through whole. */
static void test_rejoin_skips_what_the_ring_holds(void **state)
{
    fixture *f = *state;
    cs_ring *r = rejoin_ring(f, 1, 5, 0);
    cs_source *s = rejoin_over(f, r, 3, 4);
    assert_int_equal(cs_logcap_start(CS_LOG_INFO), 0);
    cs_emission em;
    cs_err err = {0};
    assert_int_equal(s->ops->next(s, &em, &err), 1);
    assert_int_equal(em.seq, 6);
    assert_int_equal(cs_rejoin_source_skipped(s), 3);
    assert_int_equal(cs_logcap_count("msg=\"source re-emitted ledgers the ring holds; skipped them\" "), 1);
    assert_int_equal(cs_logcap_count(" first=3 last=5 ledgers=3"), 1);
    cs_logcap_stop();
    uint8_t got[RJ_SIZE + 1], want[RJ_SIZE];
    size_t n = 0;
    for (ssize_t k; (k = s->ops->read(s, got + n, sizeof got - n, &err)) > 0;)
        n += (size_t)k;
    cs_synthetic_fill(want, sizeof want, 6, false);
    assert_int_equal(n, RJ_SIZE);
    assert_memory_equal(got, want, RJ_SIZE);
    assert_int_equal(s->ops->next(s, &em, &err), 0);
    s->ops->destroy(s);
    cs_ring_close(r);
}

/* A ring of ring_from..ring_to (ledger odd changed) under a source re-emitting from first: the
 * first next() fails at ledger want_seq with want_msg. */
static void expect_rejoin_refused(fixture *f, uint32_t ring_from, uint32_t ring_to, uint32_t odd, uint32_t first,
                           uint32_t want_seq, const char *want_msg)
{
    cs_ring *r = rejoin_ring(f, ring_from, ring_to, odd);
    cs_source *s = rejoin_over(f, r, first, 4);
    cs_emission em;
    cs_err err = {0};
    assert_int_equal(s->ops->next(s, &em, &err), -1);
    assert_int_equal(em.seq, want_seq);
    assert_string_equal(err.msg, want_msg);
    s->ops->destroy(s);
    cs_ring_close(r);
}

/* A re-emitted ledger that differs from the ring's stops the source, naming it. */
static void test_rejoin_refuses_different_bytes(void **state)
{
    char want[256];
    uint8_t buf[RJ_SIZE];
    cs_synthetic_fill(buf, sizeof buf, 4, false);
    uint64_t ours = XXH64(buf, sizeof buf, 0);
    buf[7] ^= 1;
    snprintf(want, sizeof want,
             "ledger 4 differs from the ring's: the source sent 3000 bytes hashing to %016llx, the ring holds 3000 "
             "bytes hashing to %016llx",
             (unsigned long long)ours, (unsigned long long)XXH64(buf, sizeof buf, 0));
    expect_rejoin_refused(*state, 1, 5, 4, 3, 4, want);
}

/* A ledger older than the ring cannot be compared: the source stops. */
static void test_rejoin_refuses_what_the_ring_cannot_vouch_for(void **state)
{
    expect_rejoin_refused(*state, 3, 5, 0, 2, 2,
                   "ledger 2 is older than the ring's oldest ledger 3, so it cannot be compared with it");
}

/* A re-emitted ledger in a hole of the ring (quarantined there) has nothing to be compared with:
 * it passes as already published, with a WARN, and the source goes on (docs/RING.md, failure
 * table). */
static void test_rejoin_passes_a_hole(void **state)
{
    fixture *f = *state;
    cs_ring *r = rejoin_ring(f, 1, 5, 0);
    char p[1200];
    snprintf(p, sizeof p, "%s/ledgers/ledger-4.xdr", f->root);
    assert_int_equal(truncate(p, 10), 0);
    assert_int_equal(cs_ring_condemn(r, 4, "a test cut it"), CS_RING_VERDICT_BAD);
    cs_source *s = rejoin_over(f, r, 3, 4);
    assert_int_equal(cs_logcap_start(CS_LOG_INFO), 0);
    cs_emission em;
    cs_err err = {0};
    assert_int_equal(s->ops->next(s, &em, &err), 1);
    assert_int_equal(em.seq, 6);
    assert_int_equal(cs_logcap_count("msg=\"source re-emitted a ledger the ring cannot compare; skipped it\" "), 1);
    assert_int_equal(cs_logcap_count(" ledger=4 reason=\"store: ledger 4 is missing from the ring (ledgers 4 to 4)\""), 1);
    cs_logcap_stop();
    s->ops->destroy(s);
    cs_ring_close(r);
}

#define T(fn) cmocka_unit_test_setup_teardown(fn, setup, teardown)

int main(void)
{
    const struct CMUnitTest tests[] = {
        T(test_synthetic_bounded_range),
        T(test_synthetic_reuses_its_buffer),
        T(test_synthetic_stops_when_the_consumer_does),
        T(test_synthetic_honours_cancel),
        T(test_synthetic_sizes_and_payload),
        T(test_counted_range),
        T(test_file_replays_in_order),
        T(test_file_starts_at_the_skipped_record),
        T(test_file_cycles_when_the_range_outruns_the_dump),
        T(test_file_unbounded_is_endless),
        T(test_file_honours_cancel),
        T(test_file_rejects_bad_dumps),
        T(test_file_replays_zero_padded_names),
        T(test_file_rereads_each_record),
        T(test_file_deleted_mid_run),
        T(test_file_over_the_payload_cap),
        T(test_validate_refuses_the_ring_by_path),
        T(test_validate_refuses_the_ring_by_inode),
        T(test_rejoin_skips_what_the_ring_holds),
        T(test_rejoin_refuses_different_bytes),
        T(test_rejoin_refuses_what_the_ring_cannot_vouch_for),
        T(test_rejoin_passes_a_hole),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
