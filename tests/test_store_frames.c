/* SPDX-License-Identifier: Apache-2.0 */
/* Stored wire frames in the ring (docs/RING.md, "Stored wire frames"): what put writes beside a
 * ledger (in its segment's frames file) from its published CHUNK messages, what get hands a replay,
 * the checks (frames that fail cost the frames, never the ledger), the background pass's attach,
 * the migration of a format-3 ring (files of its own per ledger), and the index parser. */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>
#include <xxhash.h>

#include "store/frames.h"
#include "store/ring.h"
#include "support/ringfiles.h"
#include "support/tmpdir.h"
#include "wire/wire.h"

#define CS 4096
#define LEN (2 * CS + 100)

typedef struct fixture {
    cs_tmpdir dir;
    char ring[600];
    uint8_t raw[LEN];
    /* The published messages: chunk 0 and 2 "zstd" (the ring never decompresses), chunk 1 raw. */
    uint8_t msg[3][CS_WIRE_CHUNK_HEADER_LEN + CS];
    struct iovec chunks[3];
    cs_ledger_record rec;
} fixture;

static const size_t ZLEN[3] = {300, 0, 40};

static int setup(void **state)
{
    fixture *f = calloc(1, sizeof *f);
    if (!f || cs_tmpdir_make(&f->dir, "storeframes") != 0) {
        free(f);
        return -1;
    }
    size_t n = strlen(f->dir.path);
    if (n > sizeof f->ring - 16) { /* scratch paths are short; a longer one fails, never cut */
        cs_tmpdir_remove(&f->dir);
        free(f);
        return -1;
    }
    memcpy(f->ring, f->dir.path, n);
    strcpy(f->ring + n, "/ledgers");
    for (size_t i = 0; i < LEN; i++)
        f->raw[i] = (uint8_t)(i * 7 + 3);
    for (uint32_t k = 0; k < 3; k++) {
        bool raw = k == 1;
        size_t n = raw ? CS : ZLEN[k];
        cs_wire_put_chunk_header(f->msg[k], 7, k, raw ? 0 : 1);
        for (size_t i = 0; i < n; i++)
            f->msg[k][CS_WIRE_CHUNK_HEADER_LEN + i] = raw ? f->raw[CS + i] : (uint8_t)(0xA0 + k + i);
        f->chunks[k] = (struct iovec){f->msg[k], CS_WIRE_CHUNK_HEADER_LEN + n};
    }
    f->rec = (cs_ledger_record){.len = LEN, .chunks = 3, .chunk_size = CS, .xxh64 = XXH64(f->raw, LEN, 0)};
    *state = f;
    return 0;
}

static int teardown(void **state)
{
    fixture *f = *state;
    cs_tmpdir_remove(&f->dir);
    free(f);
    return 0;
}

static cs_ring *open_ring(fixture *f)
{
    cs_ring *r;
    cs_err err = {0};
    if (cs_ring_open(&r, f->ring, 10, &err) != 0)
        fail_msg("open: %s", err.msg);
    return r;
}

static void put7(fixture *f, cs_ring *r, bool frames)
{
    struct iovec part = {f->raw, LEN};
    bool reset;
    cs_err err = {0};
    if (cs_ring_put(r, 7, &part, 1, frames ? f->chunks : NULL, frames ? 3 : 0, &f->rec, &reset, &err) != 0)
        fail_msg("put: %s", err.msg);
}

static void path(const fixture *f, const char *name, char *buf, size_t len)
{
    snprintf(buf, len, "%s/%s", f->ring, name);
}

static bool exists(const fixture *f, const char *name)
{
    char p[1024];
    struct stat st;
    path(f, name, p, sizeof p);
    return lstat(p, &st) == 0;
}

static void read_text(const fixture *f, const char *name, char *buf, size_t len)
{
    char p[1024];
    path(f, name, p, sizeof p);
    FILE *fp = fopen(p, "rb");
    assert_non_null(fp);
    size_t n = fread(buf, 1, len - 1, fp);
    buf[n] = '\0';
    fclose(fp);
}

/* Ledger seq's current record line. */
static void record_of(const fixture *f, uint32_t seq, char *buf, size_t len)
{
    assert_true(cs_ringfiles_record(f->ring, seq, buf, len, NULL));
}

/* Whether seq's record claims frames. */
static bool has_frames(const fixture *f, uint32_t seq)
{
    uint64_t off, len;
    return cs_ringfiles_frames(f->ring, seq, &off, &len);
}

static uint64_t frames_len(const fixture *f, uint32_t seq)
{
    uint64_t off, len;
    return cs_ringfiles_frames(f->ring, seq, &off, &len) ? len : 0;
}

static cs_ledger_ref *get7(cs_ring *r)
{
    cs_ledger_ref *ref;
    cs_err err = {0};
    if (cs_ring_get(r, 7, &ref, &err) != 0)
        fail_msg("get: %s", err.msg);
    return ref;
}

/* The ref's frames are the published chunks: codecs, lengths and payloads. */
static void expect_frames(fixture *f, const cs_ledger_ref *ref)
{
    assert_true(ref->frames_fd >= 0);
    for (uint32_t k = 0; k < 3; k++) {
        const cs_frame *fr = &ref->frames[k];
        assert_int_equal(fr->codec, k == 1 ? 0 : 1);
        assert_int_equal(fr->len, f->chunks[k].iov_len - CS_WIRE_CHUNK_HEADER_LEN);
        uint8_t buf[CS];
        cs_err err = {0};
        assert_int_equal(cs_frame_read(ref, k, buf, &err), 0);
        assert_memory_equal(buf, f->msg[k] + CS_WIRE_CHUNK_HEADER_LEN, fr->len);
    }
}

static void put_stores_the_published_frames(void **state)
{
    fixture *f = *state;
    cs_ring *r = open_ring(f);
    put7(f, r, true);
    cs_ledger_ref *ref = get7(r);
    expect_frames(f, ref);
    /* Only the zstd payloads are stored: a raw chunk is the ledger's own bytes. */
    size_t flen = ZLEN[0] + ZLEN[2] + cs_frames_tail_len(3);
    assert_int_equal(ref->rec.frames_len, flen);
    uint64_t off, len;
    assert_true(cs_ringfiles_frames(f->ring, 7, &off, &len));
    assert_int_equal(off, 0); /* the segment's first */
    assert_int_equal(len, flen);
    char p[1024];
    cs_ringfiles_seg_path(p, sizeof p, f->ring, 7);
    uint8_t file[1024];
    int fd = open(p, O_RDONLY);
    assert_int_equal(read(fd, file, sizeof file), (ssize_t)flen);
    close(fd);
    assert_true(ref->rec.frames_xxh3 == XXH3_64bits(file, flen));
    assert_true(ref->rec.raw_xxh3 == XXH3_64bits(f->raw + CS, CS));
    cs_ledger_ref_release(ref);
    char text[512], fields[512], want[600];
    record_of(f, 7, text, sizeof text);
    int n = snprintf(fields, sizeof fields,
                     "corestream-ring-record 5 seq=7 len=%d chunks=3 chunk_size=%d xxh64=%016llx frames_len=%zu "
                     "frames_off=0 frames_xxh3=%016llx raw_xxh3=%016llx sig=-",
                     LEN, CS, (unsigned long long)f->rec.xxh64, flen, (unsigned long long)XXH3_64bits(file, flen),
                     (unsigned long long)XXH3_64bits(f->raw + CS, CS));
    snprintf(want, sizeof want, "%s self=%016llx\n", fields, (unsigned long long)XXH64(fields, (size_t)n, 0));
    assert_string_equal(text, want);
    /* A second ledger's frames follow the first's in the segment. */
    struct iovec part = {f->raw, LEN};
    bool reset;
    cs_err err = {0};
    cs_ledger_record rec8 = f->rec;
    assert_int_equal(cs_ring_put(r, 8, &part, 1, f->chunks, 3, &rec8, &reset, &err), 0);
    assert_true(cs_ringfiles_frames(f->ring, 8, &off, &len));
    assert_int_equal(off, flen);
    ref = get7(r);
    expect_frames(f, ref);
    cs_ledger_ref_release(ref);
    cs_ring_close(r);
    /* Reopened: the same frames. */
    r = open_ring(f);
    ref = get7(r);
    expect_frames(f, ref);
    cs_ledger_ref_release(ref);
    cs_ring_close(r);
}

static void put_without_chunks_stores_none(void **state)
{
    fixture *f = *state;
    cs_ring *r = open_ring(f);
    put7(f, r, false);
    assert_false(has_frames(f, 7));
    cs_ledger_ref *ref = get7(r);
    assert_int_equal(ref->frames_fd, -1);
    assert_int_equal(ref->rec.frames_len, 0);
    cs_ledger_ref_release(ref);
    cs_ring_close(r);
}

/* Frames cut short (their segment truncated) are found by get: the ledger is served without frames
 * (the caller re-encodes it) and the ref says why; get itself changes nothing on disk. The caller
 * drops them: a record without them is appended (their bytes stay in the segment until it goes).
 * (docs/RING.md, failure table: "frames of the wrong length") */
static void bad_frames_at_get_cost_only_the_frames(void **state)
{
    fixture *f = *state;
    cs_ring *r = open_ring(f);
    put7(f, r, true);
    char p[1024];
    cs_ringfiles_seg_path(p, sizeof p, f->ring, 7);
    assert_int_equal(truncate(p, 10), 0);
    cs_ledger_ref *ref = get7(r);
    assert_int_equal(ref->frames_fd, -1);
    assert_int_equal(ref->rec.frames_len, 0);
    assert_int_equal(ref->rec.len, LEN);
    char want[200];
    snprintf(want, sizeof want, "is 10 bytes, its record says ledger 7's frames end at byte %zu",
             ZLEN[0] + ZLEN[2] + cs_frames_tail_len(3));
    assert_string_equal(ref->frames_problem, want);
    assert_true(has_frames(f, 7));
    cs_ring_drop_frames(r, 7, ref->frames_claimed_xxh3, ref->frames_problem);
    cs_ledger_ref_release(ref);
    assert_false(has_frames(f, 7));
    char text[512];
    record_of(f, 7, text, sizeof text);
    assert_non_null(
        strstr(text, " frames_len=0 frames_off=0 frames_xxh3=0000000000000000 raw_xxh3=0000000000000000 sig=- self="));
    uint32_t o, l;
    assert_true(cs_ring_bounds(r, &o, &l));
    assert_int_equal(o, 7);
    cs_ring_health_t h;
    cs_ring_health(r, &h);
    assert_int_equal(h.dropped, 0);
    cs_ring_close(r);
    /* Reopened: the record without frames is the one read. */
    r = open_ring(f);
    ref = get7(r);
    assert_int_equal(ref->frames_fd, -1);
    assert_int_equal(ref->rec.xxh64, f->rec.xxh64);
    cs_ledger_ref_release(ref);
    cs_ring_close(r);
}

static void drop_frames_once(void **state)
{
    fixture *f = *state;
    cs_ring *r = open_ring(f);
    put7(f, r, true);
    cs_ledger_ref *ref = get7(r);
    uint64_t h = ref->rec.frames_xxh3;
    cs_ledger_ref_release(ref);
    cs_ring_drop_frames(r, 7, h + 1, "not these frames"); /* another file's hash: nothing happens */
    assert_true(has_frames(f, 7));
    cs_ring_drop_frames(r, 7, h, "test");
    assert_false(has_frames(f, 7));
    ref = get7(r);
    assert_int_equal(ref->frames_fd, -1);
    cs_ledger_ref_release(ref);
    cs_ring_close(r);
}

/* Frames made later (the background pass) for a ledger retained without them. */
static void attach_makes_frames_for_a_retained_ledger(void **state)
{
    fixture *f = *state;
    cs_ring *r = open_ring(f);
    put7(f, r, false);
    cs_ledger_ref *ref = get7(r);
    cs_frames_writer *w;
    cs_err err = {0};
    assert_int_equal(cs_ring_frames_begin(r, 7, CS, &w, &err), 0);
    for (uint32_t k = 0; k < 3; k++)
        cs_frames_writer_add(w, k == 1 ? 0 : 1, f->msg[k] + CS_WIRE_CHUNK_HEADER_LEN,
                             f->chunks[k].iov_len - CS_WIRE_CHUNK_HEADER_LEN);
    if (cs_ring_frames_attach(r, ref, w, &err) != 0)
        fail_msg("attach: %s", err.msg);
    cs_ledger_ref_release(ref);
    ref = get7(r);
    expect_frames(f, ref);
    assert_int_equal(ref->rec.chunk_size, CS);
    cs_ledger_ref_release(ref);
    assert_true(has_frames(f, 7));
    cs_ring_close(r);
}

/* The ledger changed meanwhile (another file under the same name): attach changes nothing. */
static void attach_refuses_a_replaced_ledger(void **state)
{
    fixture *f = *state;
    cs_ring *r = open_ring(f);
    put7(f, r, false);
    cs_ledger_ref *ref = get7(r);
    /* A gap resets the ring, then 7 again: a new file. */
    struct iovec part = {f->raw, LEN};
    bool reset;
    cs_err err = {0};
    assert_int_equal(cs_ring_put(r, 9, &part, 1, NULL, 0, &f->rec, &reset, &err), 0);
    assert_int_equal(cs_ring_put(r, 7, &part, 1, NULL, 0, &f->rec, &reset, &err), 0);
    cs_frames_writer *w;
    assert_int_equal(cs_ring_frames_begin(r, 7, CS, &w, &err), 0);
    for (uint32_t k = 0; k < 3; k++)
        cs_frames_writer_add(w, k == 1 ? 0 : 1, f->msg[k] + CS_WIRE_CHUNK_HEADER_LEN,
                             f->chunks[k].iov_len - CS_WIRE_CHUNK_HEADER_LEN);
    assert_int_equal(cs_ring_frames_attach(r, ref, w, &err), -1);
    assert_int_equal(err.kind, CS_RING_ERR_NOT_RETAINED);
    cs_ledger_ref_release(ref);
    assert_false(has_frames(f, 7));
    cs_ring_close(r);
}

/* Writes text as ring file name. */
static void write_text(const fixture *f, const char *name, const char *text)
{
    char p[1024];
    path(f, name, p, sizeof p);
    FILE *fp = fopen(p, "w");
    assert_non_null(fp);
    fputs(text, fp);
    assert_int_equal(fclose(fp), 0);
}

/* A record line of an older version: the fields (a version 4 one: with frames_len, no
 * frames_off, and sig=) and the self checksum. */
static void old_record(char *buf, size_t len, int version, uint32_t seq, const cs_ledger_record *rec)
{
    char fields[400];
    int n = snprintf(fields, sizeof fields, "corestream-ring-record %d seq=%u len=%llu chunks=%u chunk_size=%u xxh64=%016llx",
                     version, seq, (unsigned long long)rec->len, rec->chunks, rec->chunk_size,
                     (unsigned long long)rec->xxh64);
    if (version == 1) {
        snprintf(buf, len, "%s\n", fields);
        return;
    }
    n += snprintf(fields + n, sizeof fields - (size_t)n, " frames_len=300 frames_xxh3=1111111111111111 raw_xxh3=2222222222222222 sig=-");
    snprintf(buf, len, "%s self=%016llx\n", fields, (unsigned long long)XXH64(fields, (size_t)n, 0));
}

/* A format-3 ring (a record file and a frames file per ledger) migrates at the first write after
 * the open: the open only looks (its ledgers are served from their own record files, without
 * frames), then the claim moves each record into the records log, removes the old record and
 * frames files (the frames are made again by the background pass) and marks the ring format 4.
 * A version-1 record (a format-2 ring's) moves the same way. */
static void a_format_3_ring_migrates(void **state)
{
    fixture *f = *state;
    cs_ring *r = open_ring(f);
    put7(f, r, false);
    struct iovec part = {f->raw, LEN};
    bool reset;
    cs_err err = {0};
    cs_ledger_record rec8 = f->rec;
    assert_int_equal(cs_ring_put(r, 8, &part, 1, NULL, 0, &rec8, &reset, &err), 0);
    cs_ring_close(r);
    /* Rewritten as format 3 left it. */
    char p[1024], text[600];
    cs_ringfiles_log_path(p, sizeof p, f->ring, 7);
    assert_int_equal(unlink(p), 0);
    old_record(text, sizeof text, 4, 7, &f->rec);
    write_text(f, "ledger-7.rec", text);
    write_text(f, "ledger-7.frames", "frames of the old layout");
    old_record(text, sizeof text, 1, 8, &f->rec);
    write_text(f, "ledger-8.rec", text);
    write_text(f, "ring-format", "corestream-ring 3\n");
    r = open_ring(f);
    /* The open only looks. */
    read_text(f, "ring-format", text, sizeof text);
    assert_string_equal(text, "corestream-ring 3\n");
    assert_true(exists(f, "ledger-7.rec"));
    for (uint32_t s = 7; s <= 8; s++) {
        cs_ledger_ref *ref;
        assert_int_equal(cs_ring_get(r, s, &ref, &err), 0);
        assert_int_equal(ref->frames_fd, -1);
        cs_ledger_ref_release(ref);
    }
    assert_int_equal(cs_ring_claim(r, "test run", 0, &err), 0);
    read_text(f, "ring-format", text, sizeof text);
    assert_string_equal(text, "corestream-ring 4\n");
    assert_false(exists(f, "ledger-7.rec"));
    assert_false(exists(f, "ledger-7.frames"));
    assert_false(exists(f, "ledger-8.rec"));
    uint32_t o, l;
    assert_true(cs_ring_bounds(r, &o, &l));
    assert_int_equal(o, 7);
    assert_int_equal(l, 8);
    for (uint32_t s = 7; s <= 8; s++) {
        record_of(f, s, text, sizeof text);
        assert_memory_equal(text, "corestream-ring-record 5 ", 25);
        assert_non_null(strstr(text, " frames_len=0 "));
        cs_ledger_ref *ref;
        assert_int_equal(cs_ring_get(r, s, &ref, &err), 0);
        assert_int_equal(ref->frames_fd, -1);
        assert_int_equal(ref->rec.xxh64, f->rec.xxh64);
        cs_ledger_ref_release(ref);
    }
    cs_ring_health_t h;
    cs_ring_health(r, &h);
    assert_int_equal(h.dropped, 0);
    cs_ring_close(r);
    /* And the migrated ring opens as any other. */
    r = open_ring(f);
    assert_true(cs_ring_bounds(r, &o, &l));
    assert_int_equal(l, 8);
    cs_ring_close(r);
}

/* Pruning takes a segment once no retained ledger is in it. */
static void prune_removes_segments(void **state)
{
    fixture *f = *state;
    cs_ring *r;
    cs_err err = {0};
    assert_int_equal(cs_ring_open(&r, f->ring, 1, &err), 0);
    struct iovec part = {f->raw, LEN};
    bool reset;
    char p[1024];
    struct stat st;
    for (uint32_t s = 1022; s <= 1025; s++) {
        cs_ledger_record rec = f->rec;
        uint8_t m[3][CS_WIRE_CHUNK_HEADER_LEN + CS];
        struct iovec ch[3];
        for (uint32_t k = 0; k < 3; k++) { /* the fixture's chunks, of ledger s */
            memcpy(m[k], f->msg[k], f->chunks[k].iov_len);
            cs_wire_put_chunk_header(m[k], s, k, k == 1 ? 0 : 1);
            ch[k] = (struct iovec){m[k], f->chunks[k].iov_len};
        }
        assert_int_equal(cs_ring_put(r, s, &part, 1, ch, 3, &rec, &reset, &err), 0);
        cs_ringfiles_seg_path(p, sizeof p, f->ring, 1022);
        assert_int_equal(lstat(p, &st) == 0, s < 1024); /* 1024 is in the next segment, 1023 pruned */
        cs_ringfiles_log_path(p, sizeof p, f->ring, 1022);
        assert_int_equal(lstat(p, &st) == 0, s < 1024);
    }
    cs_ringfiles_seg_path(p, sizeof p, f->ring, 1025);
    assert_int_equal(lstat(p, &st), 0);
    cs_ledger_ref *ref;
    assert_int_equal(cs_ring_get(r, 1025, &ref, &err), 0);
    assert_true(ref->frames_fd >= 0);
    cs_ledger_ref_release(ref);
    cs_ring_close(r);
}

/* Pages of a ring file in the page cache now (mincore of a shared mapping). */
static size_t resident_pages(const fixture *f, const char *name)
{
    char p[1024];
    path(f, name, p, sizeof p);
    int fd = open(p, O_RDONLY);
    assert_true(fd >= 0);
    struct stat st;
    assert_int_equal(fstat(fd, &st), 0);
    size_t pg = (size_t)sysconf(_SC_PAGESIZE), n = ((size_t)st.st_size + pg - 1) / pg;
    void *m = mmap(NULL, (size_t)st.st_size, PROT_READ, MAP_SHARED, fd, 0);
    assert_true(m != MAP_FAILED);
    unsigned char *vec = calloc(n, 1);
    assert_non_null(vec);
    assert_int_equal(mincore(m, (size_t)st.st_size, vec), 0);
    size_t in = 0;
    for (size_t i = 0; i < n; i++)
        in += vec[i] & 1;
    free(vec);
    munmap(m, (size_t)st.st_size);
    close(fd);
    return in;
}

/* Puts ledger seq from the fixture's bytes, cut so that they can never go by O_DIRECT (a first part
 * of one byte). */
static void put_seq(fixture *f, cs_ring *r, uint32_t seq)
{
    struct iovec part[2] = {{f->raw, 1}, {f->raw + 1, LEN - 1}};
    bool reset;
    cs_err err = {0};
    cs_ledger_record rec = f->rec;
    if (cs_ring_put(r, seq, part, 2, f->chunks, 3, &rec, &reset, &err) != 0)
        fail_msg("put %u: %s", seq, err.msg);
}

/* Puts ledger seq from parts laid out as the source loop's chunks are (each on a 4096-byte
 * boundary, whole pages but the last), checks how many of its pages the page cache holds, then
 * reads it back whole through the ring. */
static void put_aligned_and_check(fixture *f, cs_ring *r, uint32_t seq, size_t len, bool cached)
{
    enum { PG = 4096 };
    size_t nparts = (len + PG - 1) / PG;
    uint8_t *buf = aligned_alloc(PG, nparts * PG);
    assert_non_null(buf);
    struct iovec part[8];
    assert_true(nparts <= 8);
    for (size_t i = 0; i < len; i++)
        buf[i] = (uint8_t)(i * 13 + seq);
    for (size_t i = 0; i < nparts; i++)
        part[i] = (struct iovec){buf + i * PG, i + 1 < nparts ? PG : len - i * PG};
    cs_ledger_record rec = {.len = len, .chunks = (uint32_t)nparts, .chunk_size = PG, .xxh64 = XXH64(buf, len, 0)};
    bool reset;
    cs_err err = {0};
    if (cs_ring_put(r, seq, part, nparts, NULL, 0, &rec, &reset, &err) != 0)
        fail_msg("put %u: %s", seq, err.msg);
    char name[64], p[1024];
    snprintf(name, sizeof name, "ledger-%u.xdr", seq);
    path(f, name, p, sizeof p);
    struct stat st;
    assert_int_equal(stat(p, &st), 0);
    assert_int_equal(st.st_size, len); /* the padded last block is cut off */
    if (cached)
        assert_true(resident_pages(f, name) > 0);
    else
        assert_int_equal(resident_pages(f, name), 0);
    cs_ledger_ref *ref;
    assert_int_equal(cs_ring_get(r, seq, &ref, &err), 0);
    uint8_t *back = malloc(len);
    assert_non_null(back);
    assert_int_equal(cs_ledger_read(ref, 0, back, len, &err), 0);
    assert_memory_equal(back, buf, len);
    cs_ledger_ref_release(ref);
    free(back);
    free(buf);
}

/* Issue 12: aligned parts go to disk with O_DIRECT, so the ledger file takes no page cache; the
 * stored bytes are the same as through the page cache (direct off, or parts not aligned). */
static void direct_writes_skip_the_page_cache(void **state)
{
    fixture *f = *state;
    cs_ring *r = open_ring(f);
    put_aligned_and_check(f, r, 7, 3 * 4096 + 100, false); /* a partial last block */
    put_aligned_and_check(f, r, 8, 2 * 4096, false);       /* whole blocks only */
    put_seq(f, r, 9); /* the fixture's parts are not aligned: through the page cache */
    assert_true(resident_pages(f, "ledger-9.xdr") > 0);
    cs_ring_set_direct(r, false);
    put_aligned_and_check(f, r, 10, 3 * 4096 + 100, true);
    cs_ring_close(r);
}

/* cs_ring_frames_bytes (corestreamd_ring_frames_size_bytes) counts the frames of the retained
 * ledgers: put, attach, drop, prune and a reopen. */
static void frames_bytes_follow_the_ledgers(void **state)
{
    fixture *f = *state;
    cs_ring *r;
    cs_err err = {0};
    assert_int_equal(cs_ring_open(&r, f->ring, 2, &err), 0);
    assert_int_equal(cs_ring_frames_bytes(r), 0);
    put7(f, r, true);
    uint64_t one = frames_len(f, 7);
    assert_true(one > 0);
    assert_int_equal(cs_ring_frames_bytes(r), one);
    struct iovec part = {f->raw, LEN};
    bool reset;
    cs_ledger_record rec = f->rec;
    assert_int_equal(cs_ring_put(r, 8, &part, 1, NULL, 0, &rec, &reset, &err), 0); /* no frames */
    assert_int_equal(cs_ring_frames_bytes(r), one);
    cs_ledger_ref *ref;
    assert_int_equal(cs_ring_get(r, 8, &ref, &err), 0);
    cs_frames_writer *w;
    assert_int_equal(cs_ring_frames_begin(r, 8, CS, &w, &err), 0);
    for (uint32_t k = 0; k < 3; k++)
        cs_frames_writer_add(w, k == 1 ? 0 : 1, f->msg[k] + CS_WIRE_CHUNK_HEADER_LEN,
                             f->chunks[k].iov_len - CS_WIRE_CHUNK_HEADER_LEN);
    assert_int_equal(cs_ring_frames_attach(r, ref, w, &err), 0);
    cs_ledger_ref_release(ref);
    assert_int_equal(cs_ring_frames_bytes(r), one + frames_len(f, 8));
    ref = get7(r);
    uint64_t h = ref->rec.frames_xxh3;
    cs_ledger_ref_release(ref);
    cs_ring_drop_frames(r, 7, h, "test");
    assert_int_equal(cs_ring_frames_bytes(r), frames_len(f, 8));
    cs_ring_close(r);
    /* Reopened: counted from the records; then 8 is pruned by 9 and 10. */
    assert_int_equal(cs_ring_open(&r, f->ring, 2, &err), 0);
    assert_int_equal(cs_ring_frames_bytes(r), frames_len(f, 8));
    for (uint32_t s = 9; s <= 10; s++) {
        rec = f->rec;
        assert_int_equal(cs_ring_put(r, s, &part, 1, NULL, 0, &rec, &reset, &err), 0);
    }
    assert_int_equal(cs_ring_frames_bytes(r), 0);
    cs_ring_close(r);
}

/* The index parser: what a good tail parses to, and each way a tail can disagree. */
static void parse_tail_cases(void **state)
{
    (void)state;
    uint8_t tail[2 * CS_FRAMES_ENTRY_LEN + CS_FRAMES_TRAILER_LEN];
    size_t tl = sizeof tail;
    cs_frame out[2];
    char problem[200];
    uint64_t len = CS + 10;
    cs_frames_put_entry(tail, 1, 100, 0x1122334455667788ULL);
    cs_frames_put_entry(tail + CS_FRAMES_ENTRY_LEN, 0, 10, 42);
    cs_frames_put_trailer(tail + 2 * CS_FRAMES_ENTRY_LEN, 5, 2, CS);
    assert_int_equal(cs_frames_parse_tail(tail, tl, 100 + tl, 5, len, 2, CS, out, problem, sizeof problem), 0);
    assert_int_equal(out[0].codec, 1);
    assert_int_equal(out[0].off, 0);
    assert_int_equal(out[0].len, 100);
    assert_int_equal(out[1].codec, 0);
    assert_int_equal(out[1].off, CS);
    assert_int_equal(out[1].len, 10);
    assert_true(out[0].xxh3 == 0x1122334455667788ULL);
    assert_true(out[1].xxh3 == 42);
    /* A file with bytes the index does not cover. */
    assert_int_equal(cs_frames_parse_tail(tail, tl, 101 + tl, 5, len, 2, CS, out, problem, sizeof problem), -1);
    assert_string_equal(problem, "frames index covers 100 payload bytes, the file holds 101");
    /* Another ledger's trailer. */
    assert_int_equal(cs_frames_parse_tail(tail, tl, 100 + tl, 6, len, 2, CS, out, problem, sizeof problem), -1);
    assert_string_equal(problem, "frames trailer (ledger 5, 2 chunks of 4096) differs from the record");
    /* A raw chunk whose length is not the ledger's. */
    assert_int_equal(cs_frames_parse_tail(tail, tl, 100 + tl, 5, len + 1, 2, CS, out, problem, sizeof problem), -1);
    assert_string_equal(problem, "frames index: raw chunk 1 is 10 bytes, the ledger's is 11");
    /* An unknown codec. */
    tail[0] = 2;
    assert_int_equal(cs_frames_parse_tail(tail, tl, 100 + tl, 5, len, 2, CS, out, problem, sizeof problem), -1);
    assert_string_equal(problem, "frames index entry 0 is unreadable");
    tail[0] = 1;
    /* A zstd payload longer than the file holds. */
    cs_frames_put_entry(tail, 1, 200, 0);
    assert_int_equal(cs_frames_parse_tail(tail, tl, 100 + tl, 5, len, 2, CS, out, problem, sizeof problem), -1);
    assert_string_equal(problem, "frames index: chunk 0 length 200 does not fit");
    /* A damaged trailer. */
    tail[2 * CS_FRAMES_ENTRY_LEN] ^= 1;
    assert_int_equal(cs_frames_parse_tail(tail, tl, 100 + tl, 5, len, 2, CS, out, problem, sizeof problem), -1);
    assert_string_equal(problem, "frames trailer is unreadable");
    /* The older format's trailer. */
    memcpy(tail + 2 * CS_FRAMES_ENTRY_LEN, "CSFRAME1", 8);
    assert_int_equal(cs_frames_parse_tail(tail, tl, 100 + tl, 5, len, 2, CS, out, problem, sizeof problem), -1);
    assert_string_equal(problem, "frames of an older format (CSFRAME1)");
    /* A file shorter than its tail. */
    assert_int_equal(cs_frames_parse_tail(tail, tl, tl - 1, 5, len, 2, CS, out, problem, sizeof problem), -1);
    assert_string_equal(problem, "frames index is cut short");
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(put_stores_the_published_frames, setup, teardown),
        cmocka_unit_test_setup_teardown(put_without_chunks_stores_none, setup, teardown),
        cmocka_unit_test_setup_teardown(bad_frames_at_get_cost_only_the_frames, setup, teardown),
        cmocka_unit_test_setup_teardown(drop_frames_once, setup, teardown),
        cmocka_unit_test_setup_teardown(attach_makes_frames_for_a_retained_ledger, setup, teardown),
        cmocka_unit_test_setup_teardown(attach_refuses_a_replaced_ledger, setup, teardown),
        cmocka_unit_test_setup_teardown(a_format_3_ring_migrates, setup, teardown),
        cmocka_unit_test_setup_teardown(prune_removes_segments, setup, teardown),
        cmocka_unit_test_setup_teardown(direct_writes_skip_the_page_cache, setup, teardown),
        cmocka_unit_test_setup_teardown(frames_bytes_follow_the_ledgers, setup, teardown),
        cmocka_unit_test(parse_tail_cases),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
