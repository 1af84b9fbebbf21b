/* SPDX-License-Identifier: Apache-2.0 */
/* The source loop against scripted sources: PORTSPEC 2.1 and cases 68, 70, 71, 78, 79; signed
 * ledgers with the SHA-256 beside the loop (stream/ledgerhash.h), through a void and a cancel
 * mid-ledger. Run under TSan (label concurrency). */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <openssl/evp.h>
#include <xxhash.h>

#include "common/log.h"
#include "corestreamd/stream/broadcast.h"
#include "corestreamd/stream/sourceloop.h"
#include "wire/ledgersig.h"
#include "wire/wire.h"
#include "support/certs.h"
#include "support/tmpdir.h"

/* A source that emits scripted ledgers, delivering the body in reads of at most `dribble` bytes. */
typedef struct script_source {
    cs_source base;
    const uint32_t *seqs;
    const size_t *sizes;    /* body bytes actually delivered */
    const uint64_t *declared; /* NULL: declared = size */
    size_t n, i;
    size_t dribble;
    uint64_t off;
    const char *fail_next; /* error message for next() after the list, instead of exhaustion */
    /* Ledger index void_ledger - 1 (0: none) is voided once when its reads reach void_at bytes,
     * then handed out again from its first byte; ledger index cancel_ledger - 1 (0: none) ends in
     * a cancel when its reads reach cancel_at. */
    size_t void_ledger, cancel_ledger;
    uint64_t void_at, cancel_at;
} script_source;

static uint8_t body_byte(uint32_t seq, uint64_t off)
{
    return (uint8_t)(seq * 31 + off * 7);
}

static int ss_next(cs_source *s, cs_emission *em, cs_err *err)
{
    script_source *ss = (script_source *)s;
    if (ss->i >= ss->n) {
        if (ss->fail_next) {
            em->seq = ss->n ? ss->seqs[ss->n - 1] + 1 : 1;
            return cs_err_set(err, 0, "%s", ss->fail_next);
        }
        return 0;
    }
    em->seq = ss->seqs[ss->i];
    em->declared_size = ss->declared ? ss->declared[ss->i] : ss->sizes[ss->i];
    ss->off = 0;
    ss->i++;
    return 1;
}

static ssize_t ss_read(cs_source *s, uint8_t *buf, size_t len, cs_err *err)
{
    (void)err;
    script_source *ss = (script_source *)s;
    size_t i = ss->i - 1;
    if (ss->void_ledger == i + 1 && ss->off >= ss->void_at) {
        ss->void_ledger = 0;
        ss->off = 0;
        return cs_err_set(err, CS_ERR_LEDGER_VOID, "voided");
    }
    if (ss->cancel_ledger == i + 1 && ss->off >= ss->cancel_at)
        return cs_err_set(err, CS_ERR_CANCELLED, "context canceled");
    uint64_t left = ss->sizes[i] - ss->off;
    size_t n = len < left ? len : (size_t)left;
    if (ss->dribble && n > ss->dribble)
        n = ss->dribble;
    for (size_t k = 0; k < n; k++)
        buf[k] = body_byte(ss->seqs[i], ss->off + k);
    ss->off += n;
    return (ssize_t)n;
}

static void ss_destroy(cs_source *s)
{
    (void)s;
}

static const cs_source_ops ss_ops = {.next = ss_next, .read = ss_read, .destroy = ss_destroy};

typedef struct rig {
    cs_tmpdir dir;
    cs_ring *ring;
    cs_broadcaster *bc;
    cs_chunk_pipeline *pipe;
    cs_cancel cancel;
    cs_source_loop loop;
    cs_signing *signing; /* run_signed's; NULL otherwise */
} rig;

static void publish(void *ctx, cs_msg *m)
{
    cs_err e;
    assert_int_equal(cs_broadcast_chunk(ctx, m, &e), 0);
}

static void rig_init(rig *r, script_source *src, size_t chunk, bool compress)
{
    memset(r, 0, sizeof *r);
    assert_int_equal(cs_tmpdir_make(&r->dir, "sl"), 0);
    cs_err err;
    assert_int_equal(cs_ring_open(&r->ring, r->dir.path, 100, &err), 0);
    r->bc = cs_broadcaster_new(NULL, NULL);
    assert_int_equal(cs_pipeline_new(&r->pipe, 2, compress, CS_DEFAULT_COMPRESS_LEVEL, chunk, publish, r->bc, &err), 0);
    assert_int_equal(cs_cancel_init(&r->cancel), 0);
    src->base.ops = &ss_ops;
    r->loop = (cs_source_loop){.src = &src->base, .range = cs_counted_range(1, 0), .chunk_size = chunk,
                               .max_payload = CS_MAX_PAYLOAD_SIZE, .pipeline = r->pipe, .bc = r->bc,
                               .ring = r->ring, .cancel = &r->cancel};
}

static void rig_free(rig *r)
{
    cs_pipeline_destroy(r->pipe);
    cs_broadcaster_free(r->bc);
    cs_ring_close(r->ring);
    cs_cancel_destroy(&r->cancel);
    cs_tmpdir_remove(&r->dir);
    cs_signing_free(r->signing);
}

static int run_seqs(const uint32_t *seqs, size_t n, cs_err *err)
{
    size_t sizes[8] = {10, 10, 10, 10, 10, 10, 10, 10};
    script_source ss = {.seqs = seqs, .sizes = sizes, .n = n};
    rig r;
    rig_init(&r, &ss, 4096, false);
    int rc = cs_source_loop_run(&r.loop, err);
    rig_free(&r);
    return rc;
}

/* 78 */
static void test_refuses_broken_sequence_chains(void **state)
{
    (void)state;
    static const uint32_t a[] = {1, 2, 3, 2}, b[] = {1, 2, 5}, c[] = {1, 2, 2}, ok[] = {7, 8, 9};
    cs_err err;
    assert_int_equal(run_seqs(a, 4, &err), -1);
    assert_string_equal(err.msg, "source emitted ledger 2 after 3: sequences must be dense and ascending");
    assert_int_equal(run_seqs(b, 3, &err), -1);
    assert_non_null(strstr(err.msg, "dense and ascending"));
    assert_int_equal(run_seqs(c, 3, &err), -1);
    assert_non_null(strstr(err.msg, "dense and ascending"));
    assert_int_equal(run_seqs(ok, 3, &err), 0);
}

/* 79: a source error surfaces as the run's error, naming the ledger it was producing. */
static void test_source_failure_is_reported(void **state)
{
    (void)state;
    static const uint32_t seqs[] = {1, 2};
    size_t sizes[] = {5, 5};
    script_source ss = {.seqs = seqs, .sizes = sizes, .n = 2, .fail_next = "disk on fire"};
    rig r;
    rig_init(&r, &ss, 4096, false);
    cs_err err;
    assert_int_equal(cs_source_loop_run(&r.loop, &err), -1);
    assert_string_equal(err.msg, "source failed at ledger 3: disk on fire");
    assert_int_equal(r.loop.published, 2);
    rig_free(&r);
}

/* 68 and the chunking rule: every chunk is exactly chunk-size bytes except the last, however the
 * source dribbles its bytes; the ring holds the exact body; END carries count, length and XXH64. */
static void test_chunks_are_full_whatever_the_reads(void **state)
{
    (void)state;
    static const size_t dribbles[] = {1, 17, 4096, 65536};
    for (size_t d = 0; d < 4; d++) {
        static const uint32_t seqs[] = {1};
        size_t sizes[] = {256 * 1024 + 100};
        script_source ss = {.seqs = seqs, .sizes = sizes, .n = 1, .dribble = dribbles[d]};
        rig r;
        rig_init(&r, &ss, 32 * 1024, false);
        cs_err err;
        assert_int_equal(cs_source_loop_run(&r.loop, &err), 0);
        cs_snap s;
        cs_broadcast_watch(r.bc, &s);
        assert_int_equal(s.seq, 1);
        assert_int_equal(s.nchunks, 9);
        uint8_t *want = malloc(sizes[0]);
        for (size_t k = 0; k < sizes[0]; k++)
            want[k] = body_byte(1, k);
        for (size_t i = 0; i < s.nchunks; i++) {
            cs_wire_msg m;
            cs_msg *c = cs_flow_chunk(s.flow, i);
            assert_int_equal(cs_wire_decode(c->data, c->len, &m, NULL), 0);
            assert_int_equal(m.chunk_idx, i);
            assert_int_equal(m.payload_len, i < 8 ? 32 * 1024 : 100);
            assert_memory_equal(m.payload, want + i * 32 * 1024, m.payload_len);
        }
        cs_wire_msg end;
        assert_non_null(s.end);
        assert_int_equal(cs_wire_decode(s.end->data, s.end->len, &end, NULL), 0);
        assert_int_equal(end.chunk_count, 9);
        assert_int_equal(end.total_len, sizes[0]);
        assert_true(end.checksum == XXH64(want, sizes[0], 0)); /* 70: incremental = one-shot */
        cs_ledger_ref *ref;
        assert_int_equal(cs_ring_get(r.ring, 1, &ref, &err), 0);
        /* The record holds what the END carried and the live chunking. */
        assert_int_equal(ref->rec.len, sizes[0]);
        assert_int_equal(ref->rec.chunks, 9);
        assert_true(ref->rec.xxh64 == end.checksum);
        uint8_t *got = malloc(sizes[0]);
        assert_int_equal(cs_ledger_read(ref, 0, got, sizes[0], &err), 0);
        assert_memory_equal(got, want, sizes[0]);
        free(got);
        cs_ledger_ref_release(ref);
        free(want);
        cs_snap_release(&s);
        rig_free(&r);
    }
}

/* A 0-byte ledger is BEGIN then END with no chunks and the checksum of nothing. */
static void test_empty_ledger(void **state)
{
    (void)state;
    static const uint32_t seqs[] = {1};
    size_t sizes[] = {0};
    script_source ss = {.seqs = seqs, .sizes = sizes, .n = 1};
    rig r;
    rig_init(&r, &ss, 4096, true);
    cs_err err;
    assert_int_equal(cs_source_loop_run(&r.loop, &err), 0);
    cs_snap s;
    cs_broadcast_watch(r.bc, &s);
    assert_int_equal(s.nchunks, 0);
    cs_wire_msg end;
    assert_int_equal(cs_wire_decode(s.end->data, s.end->len, &end, NULL), 0);
    assert_int_equal(end.chunk_count, 0);
    assert_int_equal(end.total_len, 0);
    assert_true(end.checksum == 0xef46db3751d8e999ULL);
    cs_snap_release(&s);
    rig_free(&r);
}

/* A body that disagrees with its declared size never becomes a valid ledger: no END, no ring. */
static void test_declared_size_mismatch(void **state)
{
    (void)state;
    static const uint32_t seqs[] = {1};
    size_t sizes[] = {100};
    uint64_t declared[] = {150};
    script_source ss = {.seqs = seqs, .sizes = sizes, .declared = declared, .n = 1};
    rig r;
    rig_init(&r, &ss, 4096, false);
    cs_err err;
    assert_int_equal(cs_source_loop_run(&r.loop, &err), -1);
    assert_string_equal(err.msg, "ledger 1 body is 100 bytes, source declared 150");
    cs_snap s;
    cs_broadcast_watch(r.bc, &s);
    assert_null(s.end);
    cs_snap_release(&s);
    uint32_t o, l;
    assert_false(cs_ring_bounds(r.ring, &o, &l));
    rig_free(&r);
}

/* The payload cap: declared too big is refused before BEGIN; an undeclared body that grows past
 * the cap is cut off mid-emission. */
static void test_payload_cap(void **state)
{
    (void)state;
    static const uint32_t seqs[] = {1};
    size_t sizes[] = {5000};
    script_source ss = {.seqs = seqs, .sizes = sizes, .n = 1};
    rig r;
    rig_init(&r, &ss, 4096, false);
    r.loop.max_payload = 4096;
    cs_err err;
    assert_int_equal(cs_source_loop_run(&r.loop, &err), -1);
    assert_string_equal(err.msg, "ledger 1 is 5000 bytes, over the 4096-byte protocol payload cap");
    cs_snap s;
    cs_broadcast_watch(r.bc, &s);
    assert_int_equal(s.seq, 0); /* nothing begun */
    cs_snap_release(&s);
    rig_free(&r);

    uint64_t declared[] = {0};
    script_source ss2 = {.seqs = seqs, .sizes = sizes, .declared = declared, .n = 1};
    rig_init(&r, &ss2, 4096, false);
    r.loop.max_payload = 4096;
    assert_int_equal(cs_source_loop_run(&r.loop, &err), -1);
    assert_string_equal(err.msg, "ledger 1 ran past the 4096-byte protocol payload cap mid-emission");
    rig_free(&r);
}

/* ---- signed ledgers ---------------------------------------------------------------------------- */

static cs_certs certs;

/* The SHA-256 of ledger seq's scripted body. */
static void body_sha256(uint32_t seq, uint64_t len, uint8_t out[32])
{
    uint8_t buf[4096];
    EVP_MD_CTX *c = EVP_MD_CTX_new();
    assert_int_equal(EVP_DigestInit_ex(c, EVP_sha256(), NULL), 1);
    for (uint64_t off = 0; off < len; off += sizeof buf) {
        size_t n = len - off < sizeof buf ? (size_t)(len - off) : sizeof buf;
        for (size_t k = 0; k < n; k++)
            buf[k] = body_byte(seq, off + k);
        assert_int_equal(EVP_DigestUpdate(c, buf, n), 1);
    }
    assert_int_equal(EVP_DigestFinal_ex(c, out, NULL), 1);
    EVP_MD_CTX_free(c);
}

/* The n ledgers are in the ring, each signed over its scripted body and chained to the one
 * before, as a subscriber with the public key checks them. */
static void assert_signed_chain(cs_ring *ring, const uint32_t *seqs, const size_t *sizes, size_t n)
{
    cs_sig_keyset *ks;
    cs_err err;
    assert_int_equal(cs_sig_keyset_load(certs.sign_pub, &ks, &err), 0);
    cs_sig_chain chain = {0};
    for (size_t i = 0; i < n; i++) {
        cs_ledger_ref *ref;
        assert_int_equal(cs_ring_get(ring, seqs[i], &ref, &err), 0);
        assert_int_equal(ref->rec.len, sizes[i]);
        assert_true(ref->rec.sig_len > 0);
        uint8_t sha[32];
        body_sha256(seqs[i], sizes[i], sha);
        if (cs_sig_chain_check(&chain, ks, ref->rec.sig, ref->rec.sig_len, seqs[i], ref->rec.len, ref->rec.xxh64, sha,
                               false, &err) != 0)
            fail_msg("ledger %u: %s", seqs[i], err.msg);
        cs_sig sig;
        assert_int_equal(cs_sig_decode(ref->rec.sig, ref->rec.sig_len, &sig, &err), 0);
        assert_true(cs_sig_prev_none(&sig) == (i == 0)); /* chained: the check above compared it */
        cs_ledger_ref_release(ref);
    }
    cs_sig_keyset_free(ks);
}

/* Runs the loop over ss with 4096-byte chunks, signing with the test key (made at the first call);
 * the rig is the caller's to look at and free. Returns what the run did (0 when cancelled). */
static int run_signed(rig *r, script_source *ss, bool compress)
{
    if (!certs.sign_key[0])
        assert_int_equal(cs_certs_make(&certs), 0);
    rig_init(r, ss, 4096, compress);
    cs_err err;
    assert_int_equal(cs_signing_new(&r->signing, certs.sign_key, &err), 0);
    cs_signing_set_run(r->signing, "sourceloop-test");
    r->loop.signing = r->signing;
    return cs_source_loop_run(&r->loop, &err);
}

/* Signed ledgers of every shape: more chunks than the hasher queues (the loop hashes the oldest
 * itself), one chunk, none, reads of one byte and of a whole chunk, raw and compressed; one ledger
 * voided after 48 chunks were handed to the hasher. Each signature verifies over the bytes the
 * ring holds, and chains. */
static void test_signed_ledgers_chain(void **state)
{
    (void)state;
    static const uint32_t seqs[] = {1, 2, 3, 4, 5, 6};
    size_t sizes[] = {300000, 4096, 0, 70001, 1, 263000};
    for (int compress = 0; compress < 2; compress++) {
        for (size_t dribble = 0; dribble < 2; dribble++) {
            script_source ss = {.seqs = seqs, .sizes = sizes, .n = 6, .dribble = dribble ? 999 : 0,
                                .void_ledger = 6, .void_at = 200000};
            rig r;
            assert_int_equal(run_signed(&r, &ss, compress), 0);
            assert_int_equal(ss.void_ledger, 0); /* the void happened */
            assert_signed_chain(r.ring, seqs, sizes, 6);
            rig_free(&r);
        }
    }
}

/* Cancelled with most of a ledger queued for the hasher: the loop ends at once, the ledgers before
 * are signed in the ring, nothing of the cancelled one is, and nothing leaks (ASan). */
static void test_signed_cancel_mid_ledger(void **state)
{
    (void)state;
    static const uint32_t seqs[] = {1, 2};
    size_t sizes[] = {9000, 1000000};
    for (uint64_t at = 0; at <= 800000; at += 400000) {
        script_source ss = {.seqs = seqs, .sizes = sizes, .n = 2, .cancel_ledger = 2, .cancel_at = at};
        rig r;
        assert_int_equal(run_signed(&r, &ss, false), 0);
        assert_int_equal(r.loop.published, 1);
        assert_signed_chain(r.ring, seqs, sizes, 1);
        cs_ledger_ref *ref;
        assert_int_not_equal(cs_ring_get(r.ring, 2, &ref, NULL), 0);
        rig_free(&r);
    }
}

int main(void)
{
    FILE *null = fopen("/dev/null", "w");
    cs_log_init(null, CS_LOG_ERROR + 4);
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_refuses_broken_sequence_chains),
        cmocka_unit_test(test_source_failure_is_reported),
        cmocka_unit_test(test_chunks_are_full_whatever_the_reads),
        cmocka_unit_test(test_empty_ledger),
        cmocka_unit_test(test_declared_size_mismatch),
        cmocka_unit_test(test_payload_cap),
        cmocka_unit_test(test_signed_ledgers_chain),
        cmocka_unit_test(test_signed_cancel_mid_ledger),
    };
    int rc = cmocka_run_group_tests(tests, NULL, NULL);
    if (certs.sign_key[0])
        cs_certs_remove(&certs);
    fclose(null);
    return rc;
}
