/* SPDX-License-Identifier: Apache-2.0 */
/* `--backfill-from`: a FIFO core that outlives a killed corestreamd moves on while nobody reads,
 * so the restarted daemon's first ledger from it lies past the ring's latest + 1. With a source
 * that holds the ledgers in between, they are filled in order before the core's ledger: the ring
 * stays contiguous and a catch-up gets every ledger byte-exact. The source is a lake (a
 * directory here, in the SEP-54 layout, made by this test) or another corestreamd's stream (a
 * second daemon fed the same ledgers, signing them, checked with its public key). A source that
 * lacks one of them fills what it has, says which it could not give, and the ring starts over as
 * without a backfill source; so does a peer whose signatures are not of a trusted key. */
#include <stdarg.h>
#include <setjmp.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <zstd.h>

#include "corestreamd/lake/lakekey.h"
#include "support/certs.h"
#include "support/files.h"
#include "support/metabuild.h"
#include "support/ringfixture.h"
#include "support/wsclient.h"
#include "support/wait.h"

#define STOP_MS 20000
#define TAIL 6000

typedef cs_ringfx fixture;

static int setup(void **state)
{
    return cs_ringfx_setup(state, "backfill");
}

static int teardown(void **state)
{
    return cs_ringfx_teardown(state);
}

static void meta_of(uint32_t seq, cs_mb_buf *b)
{
    cs_mb_meta m = cs_mb_go_meta(1, seq, false, 0, false, TAIL);
    cs_mb_put_meta(b, &m);
}

static void write_file(const char *path, const void *p, size_t n)
{
    if (cs_write_file(path, p, n) != 0)
        fail_msg("%s cannot be written", path);
}

/* A lake directory <scratch>/lake holding ledgers from..to but skip (0: none), one per object. */
static void make_lake(fixture *f, uint32_t from, uint32_t to, uint32_t skip, char *dir, size_t dlen)
{
    assert_true((size_t)snprintf(dir, dlen, "%s/lake", f->dir.path) < dlen);
    char path[PATH_MAX];
    assert_int_equal(mkdir(dir, 0755), 0);
    assert_true((size_t)snprintf(path, sizeof path, "%s/ledgers", dir) < sizeof path);
    assert_int_equal(mkdir(path, 0755), 0);
    const char *config = "{\"networkPassphrase\":\"Test SDF Network ; September 2015\",\"ledgersPath\":"
                         "\"/lake/ledgers\",\"compression\":\"zstd\",\"ledgersPerBatch\":1,\"batchesPerPartition\":64000}";
    assert_true((size_t)snprintf(path, sizeof path, "%s/config.json", dir) < sizeof path);
    write_file(path, config, strlen(config));
    cs_lake_layout l = cs_lake_layout_default();
    for (uint32_t s = from; s <= to; s++) {
        if (s == skip)
            continue;
        cs_mb_buf b = {0};
        uint8_t head[12] = {s >> 24, s >> 16, s >> 8, s, s >> 24, s >> 16, s >> 8, s, 0, 0, 0, 1};
        cs_mb_put(&b, head, sizeof head);
        meta_of(s, &b);
        size_t cap = ZSTD_compressBound(b.n);
        uint8_t *z = malloc(cap);
        assert_non_null(z);
        size_t zn = ZSTD_compress(z, cap, b.p, b.n, 3);
        assert_false(ZSTD_isError(zn));
        char key[CS_LAKE_KEY_MAX];
        cs_lake_batch bt;
        assert_int_equal(cs_lake_batch_of(&l, s, &bt, NULL), 0);
        cs_lake_key(&l, bt, key);
        assert_true((size_t)snprintf(path, sizeof path, "%s/ledgers/%s", dir, key) < sizeof path);
        char *slash = strrchr(path, '/');
        *slash = '\0';
        mkdir(path, 0755); /* the partition: made by the first object, then there */
        *slash = '/';
        write_file(path, z, zn);
        free(z);
        cs_mb_free(&b);
    }
}

/* Ledgers from..to sent to the FIFO, as a core would. */
static void send_ledgers(fixture *f, const char *fifo, uint32_t from, uint32_t to)
{
    char why[600];
    if (cs_mb_feed_fifo(f->dir.path, fifo, from, to, TAIL, why, sizeof why) != 0)
        fail_msg("%s", why);
}

#define PEER_TOKEN "backfill-0123456789abcdefghijklmnopqrstuvwxyz"

/* corestreamd on the FIFO with --backfill-from from; with keys (--trusted-keys=…, or NULL), the
 * peer's token file too. */
static void start_keys(fixture *f, const char *fifo, const char *from, const char *keys)
{
    char token[PATH_MAX + 32];
    assert_true((size_t)snprintf(token, sizeof token, "--backfill-token-file=%s/token", f->dir.path) < sizeof token);
    const char *const args[] = {"--source", "pipe", "--pipe-path", fifo, "--chunk-size", "4096",
                                "--backfill-from", from, keys, keys ? token : NULL, NULL};
    cs_ringfx_start(f, NULL, CORESTREAMD_BIN, args);
    if (cs_proc_wait_listening(&f->proc, WAIT_MS) != 0)
        fail_msg("not listening:\n%s", f->proc.log);
    cs_ringfx_wait_line(f, "msg=\"source loop starting\"", WAIT_MS);
}

static void start(fixture *f, const char *fifo, const char *from)
{
    start_keys(f, fifo, from, NULL);
}

/* The core's first run: 1-4 in the ring, then corestreamd is killed while the core lives on. */
static void first_run_then_kill_keys(fixture *f, const char *fifo, const char *from, const char *keys)
{
    start_keys(f, fifo, from, keys);
    send_ledgers(f, fifo, 1, 4);
    cs_ringfx_wait_line(f, "msg=\"pipe source: the FIFO's writer went away; waiting for the next one\"", WAIT_MS);
    assert_int_equal(cs_proc_stop(&f->proc, SIGKILL, STOP_MS), 128 + SIGKILL);
    cs_ringfx_free_proc(f);
}

static void first_run_then_kill(fixture *f, const char *fifo, const char *lake)
{
    first_run_then_kill_keys(f, fifo, lake, NULL);
}

/* A second corestreamd, the peer, on <scratch>/peer-data, whose own FIFO core sent it ledgers
 * from..to (the same bytes as the first's core), each signed with key; it serves them as a
 * stream and as a lake (with each object's .sig). It asks for a token, PEER_TOKEN
 * (<scratch>/token), on /stream, /lake/ and /healthz. Its stream's URL in url, or with lake its
 * lake's. */
static void start_peer(fixture *f, cs_proc *peer, const char *key, uint32_t from, uint32_t to, bool lake, char *url,
                       size_t url_len)
{
    char data[PATH_MAX], fifo[PATH_MAX], signing[PATH_MAX + 16], tokens[PATH_MAX + 16], path[PATH_MAX];
    assert_true((size_t)snprintf(path, sizeof path, "%s/tokens", f->dir.path) < sizeof path);
    write_file(path, "rpc " PEER_TOKEN "\n", strlen("rpc " PEER_TOKEN "\n"));
    assert_true((size_t)snprintf(tokens, sizeof tokens, "--auth-tokens=%s", path) < sizeof tokens);
    assert_true((size_t)snprintf(path, sizeof path, "%s/token", f->dir.path) < sizeof path);
    write_file(path, PEER_TOKEN "\n", strlen(PEER_TOKEN "\n"));
    assert_true((size_t)snprintf(data, sizeof data, "--data-dir=%s/peer-data", f->dir.path) < sizeof data);
    assert_true((size_t)snprintf(fifo, sizeof fifo, "%s/peer.fifo", f->dir.path) < sizeof fifo);
    assert_true((size_t)snprintf(signing, sizeof signing, "--signing-key=%s", key) < sizeof signing);
    char *const argv[] = {CORESTREAMD_BIN, "--listen", "127.0.0.1:0", data, "--source", "pipe", "--pipe-path", fifo,
                          signing, tokens, "--auth-healthz", "--network-passphrase",
                          "Test SDF Network ; September 2015", NULL};
    assert_int_equal(cs_proc_start(peer, argv), 0);
    if (cs_proc_wait_listening(peer, WAIT_MS) != 0 ||
        cs_proc_wait_line(peer, "msg=\"source loop starting\"", WAIT_MS) != 0)
        fail_msg("peer not started:\n%s", peer->log);
    char why[600];
    if (cs_mb_feed_fifo(f->dir.path, fifo, from, to, TAIL, why, sizeof why) != 0)
        fail_msg("%s", why);
    /* The FIFO's end is read after the last ledger's ring write: the peer holds from..to now. */
    if (cs_proc_wait_line(peer, "msg=\"pipe source: the FIFO's writer went away; waiting for the next one\"",
                          WAIT_MS) != 0)
        fail_msg("peer did not take its ledgers:\n%s", peer->log);
    assert_true((size_t)snprintf(url, url_len, lake ? "http://127.0.0.1:%d/lake" : "ws://127.0.0.1:%d", peer->port) <
                url_len);
}

static void expect_catchup(fixture *f, uint32_t from, uint32_t to)
{
    char q[64];
    snprintf(q, sizeof q, "/stream?start=%u&end=%u", from, to);
    cs_ws *ws = cs_ws_connect("127.0.0.1", f->proc.port, q, WAIT_MS, NULL, NULL, 0);
    assert_non_null(ws);
    for (uint32_t want = from; want <= to; want++) {
        cs_ledger l;
        char err[256];
        if (cs_ws_read_ledger(ws, &l, WAIT_MS, err, sizeof err) != 1)
            fail_msg("ledger %u: %s\n%s", want, err, f->proc.log);
        assert_int_equal(l.seq, want);
        cs_mb_buf b = {0};
        meta_of(want, &b);
        assert_int_equal(l.len, b.n);
        assert_memory_equal(l.data, b.p, b.n);
        cs_mb_free(&b);
        cs_ledger_free(&l);
    }
    cs_ws_close(ws);
}

/* The next log line holding needle must hold want and, when not NULL, also. */
static void expect_line(fixture *f, const char *needle, const char *want, const char *also)
{
    cs_ringfx_wait_line(f, needle, WAIT_MS);
    char line[2048];
    cs_proc_line(&f->proc, line, sizeof line);
    if (!strstr(line, want) || (also && !strstr(line, also)))
        fail_msg("line: %s", line);
}

static void gap_is_filled_from_the_lake(void **state)
{
    fixture *f = *state;
    char fifo[PATH_MAX], lake[PATH_MAX];
    assert_true((size_t)snprintf(fifo, sizeof fifo, "%s/meta.fifo", f->dir.path) < sizeof fifo);
    make_lake(f, 5, 8, 0, lake, sizeof lake);
    first_run_then_kill(f, fifo, lake);

    start(f, fifo, lake); /* the ring continues at 5; the core has moved on to 9 */
    send_ledgers(f, fifo, 9, 10);
    expect_line(f, "msg=\"filling a gap from the backfill source\"", " first=5 last=8", NULL);
    expect_line(f, "msg=\"gap filled from the backfill source\"", " first=5 last=8 ledgers=4", NULL);
    cs_ringfx_wait_line(f, "msg=\"pipe source: the FIFO's writer went away; waiting for the next one\"", WAIT_MS);
    expect_catchup(f, 1, 10);
    assert_int_equal(cs_proc_log_count(&f->proc, "retention reset"), 0);
    assert_int_equal(cs_proc_stop(&f->proc, SIGTERM, STOP_MS), 0);
}

static void a_ledger_the_lake_lacks_starts_the_ring_over(void **state)
{
    fixture *f = *state;
    char fifo[PATH_MAX], lake[PATH_MAX];
    assert_true((size_t)snprintf(fifo, sizeof fifo, "%s/meta.fifo", f->dir.path) < sizeof fifo);
    make_lake(f, 5, 8, 7, lake, sizeof lake);
    first_run_then_kill(f, fifo, lake);

    start(f, fifo, lake);
    send_ledgers(f, fifo, 9, 10);
    expect_line(f, "msg=\"gap not filled: the backfill source could not give a ledger\"", " ledger=7 ",
                "no object at FFFFFFFF--0-63999/FFFFFFF8--7.xdr.zst");
    cs_ringfx_wait_line(f, "retention reset", WAIT_MS);
    cs_ringfx_wait_line(f, "msg=\"pipe source: the FIFO's writer went away; waiting for the next one\"", WAIT_MS);
    expect_catchup(f, 9, 10);
    assert_int_equal(cs_proc_stop(&f->proc, SIGTERM, STOP_MS), 0);
}

/* The gap 5..8 from a peer that holds 1..peer_to and signs with peer_key (its stream, or with
 * lake its lake), the daemon trusting trusted: the core's first run sends 1..4, its second
 * 9..10. */
static void gap_from(fixture *f, cs_proc *peer, const char *peer_key, const char *trusted, uint32_t peer_to, bool lake)
{
    char fifo[PATH_MAX], url[64], keys[PATH_MAX + 32];
    assert_true((size_t)snprintf(fifo, sizeof fifo, "%s/meta.fifo", f->dir.path) < sizeof fifo);
    assert_true((size_t)snprintf(keys, sizeof keys, "--trusted-keys=%s", trusted) < sizeof keys);
    start_peer(f, peer, peer_key, 1, peer_to, lake, url, sizeof url);
    first_run_then_kill_keys(f, fifo, url, keys);
    start_keys(f, fifo, url, keys);
    send_ledgers(f, fifo, 9, 10);
    cs_ringfx_wait_line(f, "msg=\"filling a gap from the backfill source\"", WAIT_MS);
}

/* A gap from a peer (gap_from), and what comes of it. */
typedef struct peer_case {
    bool lake;         /* the peer's lake, not its stream */
    bool other_key;    /* the peer signs with a key the daemon does not trust */
    uint32_t peer_to;  /* the peer holds 1..peer_to */
    const char *want;  /* NULL: the gap is filled; else in the WARN line that it is not */
    const char *also;  /* and this too, or NULL */
} peer_case;

static void run_peer_case(fixture *f, const peer_case *c)
{
    cs_certs certs;
    assert_int_equal(cs_certs_make(&certs), 0);
    cs_proc peer = {0};
    gap_from(f, &peer, c->other_key ? certs.other_sign_key : certs.sign_key, certs.sign_pub, c->peer_to, c->lake);
    if (!c->want) {
        expect_line(f, "msg=\"gap filled from the backfill source\"", " first=5 last=8 ledgers=4", NULL);
    } else {
        expect_line(f, "msg=\"gap not filled: the backfill source could not give a ledger\"", c->want, c->also);
        cs_ringfx_wait_line(f, "retention reset", WAIT_MS);
    }
    cs_ringfx_wait_line(f, "msg=\"pipe source: the FIFO's writer went away; waiting for the next one\"", WAIT_MS);
    expect_catchup(f, c->want ? 9 : 1, 10);
    if (!c->want)
        assert_int_equal(cs_proc_log_count(&f->proc, "retention reset"), 0);
    assert_int_equal(cs_proc_stop(&f->proc, SIGTERM, STOP_MS), 0);
    assert_int_equal(cs_proc_stop(&peer, SIGTERM, STOP_MS), 0);
    cs_proc_free(&peer);
    cs_certs_remove(&certs);
}

static void gap_is_filled_from_a_peer(void **state)
{
    run_peer_case(*state, &(peer_case){.peer_to = 10});
}

/* A peer that holds only 1..6 gives 5 and 6; 7 is not had, and the ring starts over at 9. */
static void a_peer_short_of_the_gap_fills_what_it_holds(void **state)
{
    run_peer_case(*state, &(peer_case){.peer_to = 6, .want = " ledger=7 error=\"the peer holds ledgers 1 to 6\""});
}

/* A peer signing with a key the daemon does not trust gives nothing of the gap. */
static void a_peer_of_another_key_fills_nothing(void **state)
{
    run_peer_case(*state, &(peer_case){.peer_to = 10, .other_key = true,
                                       .want = " ledger=5 error=\"remoteledger: signature: ledger 5: signed by ",
                                       .also = ", which is not a trusted key"});
}

/* From a signed lake (the peer's /lake/, each object with its .sig), the daemon trusting the
 * peer's key: the gap is filled, each ledger checked against its signature object. */
static void gap_is_filled_from_a_signed_lake(void **state)
{
    run_peer_case(*state, &(peer_case){.lake = true, .peer_to = 10});
}

/* The same lake signed with a key the daemon does not trust gives nothing of the gap. */
static void a_lake_of_another_key_fills_nothing(void **state)
{
    run_peer_case(*state, &(peer_case){.lake = true, .peer_to = 10, .other_key = true,
                                       .want = " ledger=5 error=\"lake: signature: ledger 5: signed by ",
                                       .also = ", which is not a trusted key"});
}

/* corestreamd with args must refuse to start, saying want. */
static void expect_refused(fixture *f, const char *const *args, const char *want)
{
    cs_ringfx_start(f, NULL, CORESTREAMD_BIN, args);
    assert_int_equal(cs_proc_wait_exit(&f->proc, WAIT_MS), 1);
    cs_proc_drain(&f->proc);
    if (!strstr(f->proc.log, want))
        fail_msg("want: %s\nlog:\n%s", want, f->proc.log);
    cs_ringfx_free_proc(f);
}

/* Only the sources whose core moves on by itself take a backfill source; its companions need it. */
static void backfill_is_refused_for_other_sources(void **state)
{
    fixture *f = *state;
    const char *const synthetic[] = {"--source", "synthetic", "--backfill-from", "/nowhere", NULL};
    expect_refused(f, synthetic,
                   "--backfill-from applies to --source pipe and captive, whose core can move on without "
                   "corestreamd, not synthetic");
    const char *const alone[] = {"--source", "pipe", "--pipe-path", "/nowhere", "--backfill-token-file", "/t", NULL};
    expect_refused(f, alone, "--backfill-token-file needs --backfill-from");
    const char *const ftp[] = {"--source", "pipe", "--pipe-path", "/nowhere", "--backfill-from", "ftp://x/lake", NULL};
    expect_refused(f, ftp,
                   "--backfill-from ftp://x/lake: a lake is http://, https:// or a directory, a corestreamd's "
                   "stream ws:// or wss://");
    char fifo[PATH_MAX];
    assert_true((size_t)snprintf(fifo, sizeof fifo, "%s/meta.fifo", f->dir.path) < sizeof fifo);
    const char *const no_token[] = {"--source", "pipe", "--pipe-path", fifo, "--backfill-from", "ws://127.0.0.1:1",
                                    "--backfill-token-file", "/nonexistent/token", NULL};
    expect_refused(f, no_token, "--backfill-token-file /nonexistent/token: No such file or directory");
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(gap_is_filled_from_the_lake, setup, teardown),
        cmocka_unit_test_setup_teardown(a_ledger_the_lake_lacks_starts_the_ring_over, setup, teardown),
        cmocka_unit_test_setup_teardown(gap_is_filled_from_a_peer, setup, teardown),
        cmocka_unit_test_setup_teardown(a_peer_short_of_the_gap_fills_what_it_holds, setup, teardown),
        cmocka_unit_test_setup_teardown(a_peer_of_another_key_fills_nothing, setup, teardown),
        cmocka_unit_test_setup_teardown(gap_is_filled_from_a_signed_lake, setup, teardown),
        cmocka_unit_test_setup_teardown(a_lake_of_another_key_fills_nothing, setup, teardown),
        cmocka_unit_test_setup_teardown(backfill_is_refused_for_other_sources, setup, teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
