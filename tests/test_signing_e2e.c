/* SPDX-License-Identifier: Apache-2.0 */
/* Signed ledgers end to end: the real corestreamd with --signing-key, keys made by the manual's
 * openssl lines (support/certs.h), read by libremoteledger with trusted keys and by a raw
 * WebSocket client. A subscriber that asks (sig=1) gets a SIG just before each END, live and
 * replayed from the ring; one that does not (the prototype's client) gets exactly the v2 messages.
 * The chain holds across a restart (the ring's records carry the signatures); SIGHUP swaps the key
 * (a client trusting both keys goes on, one trusting only the old key stops at the first ledger
 * the new key signed); an unsigned server, and ring bytes rewritten on disk with a consistent
 * record, are refused with RL_ERR_SIGNATURE. Start-up errors name the flag and the file. */
#include <fcntl.h>
#include <inttypes.h>
#include <limits.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>
#include <xxhash.h>

#include "corestream/remoteledger.h"
#include "support/certs.h"
#include "support/procharness.h"
#include "support/ringfiles.h"
#include "support/wait.h"
#include "support/wsclient.h"
#include "store/ring.h"
#include "wire/ledgersig.h"
#include "wire/wire.h"

#define MS 1000000LL

static cs_certs certs;
static cs_proc g_proc;
static bool g_live;
static char g_key[PATH_MAX + 16]; /* the key file the daemon reads: a copy, so SIGHUP can swap it */

static int setup(void **state)
{
    (void)state;
    if (cs_certs_make(&certs) != 0)
        return -1;
    snprintf(g_key, sizeof g_key, "%s/core.key", certs.dir.path);
    return 0;
}

static int teardown(void **state)
{
    (void)state;
    if (g_live)
        cs_proc_free(&g_proc);
    g_live = false;
    cs_certs_remove(&certs);
    return 0;
}

static void copy_file(const char *from, const char *to)
{
    char cmd[6 * PATH_MAX];
    snprintf(cmd, sizeof cmd, "cp '%s' '%s.tmp' && mv '%s.tmp' '%s'", from, to, to, to);
    assert_int_equal(system(cmd), 0);
}

/* corestreamd, synthetic, a 3000-byte ledger every 20 ms, ledgers from..from+count-1 (count 0:
 * unbounded), signing with g_key unless key is false; its data dir is named by tag. */
static void start_daemon(const char *tag, bool key, int port, uint32_t from, uint32_t count)
{
    char datadir[PATH_MAX + 32], listen[32], first[16], n[16], signing[PATH_MAX + 32];
    snprintf(datadir, sizeof datadir, "--data-dir=%s/%s", certs.dir.path, tag);
    snprintf(listen, sizeof listen, "127.0.0.1:%d", port);
    snprintf(first, sizeof first, "%u", from);
    snprintf(n, sizeof n, "%u", count);
    snprintf(signing, sizeof signing, "--signing-key=%s", g_key);
    char *argv[] = {CORESTREAMD_BIN, datadir, "--listen", listen, "--source", "synthetic", "--synthetic-interval",
                    "20ms", "--emit-window", "0", "--synthetic-size", "3000", "--start-ledger", first,
                    "--synthetic-count", n, key ? signing : NULL, NULL};
    assert_int_equal(cs_proc_start(&g_proc, argv), 0);
    g_live = true;
    assert_int_equal(cs_proc_wait_listening(&g_proc, WAIT_MS), 0);
}

static void stop_daemon(void)
{
    assert_int_equal(cs_proc_stop(&g_proc, SIGTERM, WAIT_MS), 0);
    cs_proc_free(&g_proc);
    g_live = false;
}

static rl_stream *client(const char *keys, int64_t retries)
{
    char url[64];
    snprintf(url, sizeof url, "ws://127.0.0.1:%d", g_proc.port);
    rl_options o;
    rl_options_init(&o);
    o.trusted_keys_file = keys;
    o.resume_retries = retries;
    o.resume_backoff_ns = 20 * MS;
    o.resume_backoff_max_ns = 200 * MS;
    rl_stream *s;
    assert_int_equal(rl_stream_new(&s, url, &o), RL_OK);
    return s;
}

/* What a callback saw. */
typedef struct seen {
    int count;
    uint32_t last;
    bool in_order;
    void (*at)(struct seen *, uint32_t); /* called after each ledger */
    uint32_t at_seq;
} seen;

static int on_ledger(const uint8_t *p, size_t n, const rl_ledger_info *info, void *ctx)
{
    (void)p, (void)n;
    seen *s = ctx;
    if (s->count && info->sequence != s->last + 1)
        s->in_order = false;
    s->count++;
    s->last = info->sequence;
    if (s->at && info->sequence == s->at_seq)
        s->at(s, info->sequence);
    return 0;
}

/* Reads one ledger's messages raw: returns how many SIG messages came, checking each is the
 * ledger's and comes right before END. */
static int raw_ledger_sigs(cs_ws *ws, uint32_t *seq)
{
    int sigs = 0;
    bool sig_last = false;
    for (int i = 0; i < 64; i++) {
        cs_ws_msg m;
        assert_int_equal(cs_ws_read(ws, &m, WAIT_MS), CS_WS_BINARY);
        cs_wire_msg w;
        assert_int_equal(cs_wire_decode(m.data, m.len, &w, NULL), 0);
        if (w.type == CS_WIRE_TYPE_BEGIN)
            *seq = w.seq;
        assert_int_equal(w.seq, *seq);
        if (w.type == CS_WIRE_TYPE_END) {
            if (sigs)
                assert_true(sig_last);
            return sigs;
        }
        sig_last = w.type == CS_WIRE_TYPE_SIG;
        sigs += sig_last;
    }
    fail_msg("no END within 64 messages");
    return -1;
}

static bool ring_has_12(void *arg)
{
    uint32_t oldest = 0, latest = 0;
    return rl_stream_bounds(arg, &oldest, &latest) == RL_OK && latest >= 12;
}

/* Live and from the ring, with sig=1 and without: every ledger of a signing server has its SIG
 * before END for a subscriber that asked, and none for one that did not; libremoteledger with the
 * key verifies a range that starts in the ring and ends live. */
static void test_signed_live_and_replayed(void **state)
{
    (void)state;
    copy_file(certs.sign_key, g_key);
    start_daemon("live", true, 0, 1, 0);
    assert_int_equal(cs_proc_log_count(&g_proc, "msg=\"signing key loaded\""), 1);
    rl_stream *probe = client(NULL, 0);
    assert_int_equal(cs_wait_until(ring_has_12, probe, WAIT_MS), 0);
    rl_stream_free(probe);
    for (int asked = 0; asked < 2; asked++) {
        cs_ws *ws = cs_ws_connect("127.0.0.1", g_proc.port, asked ? "/stream?start=1&sig=1" : "/stream?start=1",
                                  WAIT_MS, NULL, NULL, 0);
        assert_non_null(ws);
        uint32_t seq = 0;
        for (int i = 0; i < 20; i++) /* 1..~12 from the ring, then live */
            assert_int_equal(raw_ledger_sigs(ws, &seq), asked);
        assert_int_equal(seq, 20);
        cs_ws_close(ws);
    }
    rl_stream *s = client(certs.sign_pub, 0);
    seen got = {.in_order = true};
    assert_int_equal(rl_stream_raw_ledgers(s, rl_bounded_range(3, 40), on_ledger, &got), RL_OK);
    assert_int_equal(got.count, 38);
    assert_true(got.in_order);
    rl_stream_free(s);
    stop_daemon();
}

static int g_restart_port;
static void restart_signing(seen *s, uint32_t seq)
{
    (void)s;
    assert_int_equal(cs_proc_stop(&g_proc, SIGKILL, WAIT_MS), 128 + SIGKILL);
    cs_proc_free(&g_proc);
    g_live = false;
    start_daemon("restart", true, g_restart_port, seq + 1, 0);
}

/* SIGKILL and a restart on the same data dir mid-range: the resumed session checks the chain
 * across it (the new process chains its first ledger to the ring's record of the one before). */
static void test_chain_across_restart(void **state)
{
    (void)state;
    copy_file(certs.sign_key, g_key);
    start_daemon("restart", true, 0, 1, 0);
    g_restart_port = g_proc.port;
    rl_stream *s = client(certs.sign_pub, 100);
    seen got = {.in_order = true, .at = restart_signing, .at_seq = 10};
    assert_int_equal(rl_stream_raw_ledgers(s, rl_bounded_range(1, 30), on_ledger, &got), RL_OK);
    assert_int_equal(got.count, 30);
    assert_true(got.in_order);
    assert_true(rl_stream_reconnects(s) >= 1);
    rl_stream_free(s);
    stop_daemon();
}

static void rotate_key(seen *s, uint32_t seq)
{
    (void)s, (void)seq;
    copy_file(certs.other_sign_key, g_key);
    assert_int_equal(kill(g_proc.pid, SIGHUP), 0);
    char hex[2 * CS_SIG_KEY_LEN + 1], line[200];
    cs_sig_signer *other;
    assert_int_equal(cs_sig_signer_load(certs.other_sign_key, &other, NULL), 0);
    cs_sig_key_hex(cs_sig_signer_key(other), hex);
    cs_sig_signer_free(other);
    snprintf(line, sizeof line, "msg=\"signing key loaded\" pid=%d public_key=%s", (int)g_proc.pid, hex);
    assert_int_equal(cs_proc_wait_line(&g_proc, line, WAIT_MS), 0);
}

/* SIGHUP swaps the key: a client trusting both keys reads on across the change (the chain goes on
 * through it), one trusting only the old key stops with the new key named. */
static void test_sighup_rotates_the_key(void **state)
{
    (void)state;
    copy_file(certs.sign_key, g_key);
    start_daemon("rotate", true, 0, 1, 0);
    rl_stream *s = client(certs.both_pub, 0);
    seen got = {.in_order = true, .at = rotate_key, .at_seq = 5};
    assert_int_equal(rl_stream_raw_ledgers(s, rl_bounded_range(1, 20), on_ledger, &got), RL_OK);
    assert_int_equal(got.count, 20);
    rl_stream_free(s);

    s = client(certs.sign_pub, 0);
    got = (seen){.in_order = true};
    assert_int_equal(rl_stream_raw_ledgers(s, rl_bounded_range(1, 40), on_ledger, &got), RL_ERR_SIGNATURE);
    assert_true(got.count >= 5 && got.count < 40);
    cs_sig_signer *other;
    assert_int_equal(cs_sig_signer_load(certs.other_sign_key, &other, NULL), 0);
    char hex[2 * CS_SIG_KEY_LEN + 1], want[256];
    cs_sig_key_hex(cs_sig_signer_key(other), hex);
    snprintf(want, sizeof want, "remoteledger: signature: ledger %u: signed by %s, which is not a trusted key",
             got.last + 1, hex);
    assert_string_equal(rl_stream_error(s), want);
    cs_sig_signer_free(other);
    rl_stream_free(s);
    stop_daemon();
}

/* A server without a key: a client with keys refuses its first ledger. */
static void test_unsigned_server_refused(void **state)
{
    (void)state;
    start_daemon("unsigned", false, 0, 1, 0);
    rl_stream *s = client(certs.sign_pub, 5);
    seen got = {.in_order = true};
    assert_int_equal(rl_stream_raw_ledgers(s, rl_bounded_range(1, 5), on_ledger, &got), RL_ERR_SIGNATURE);
    assert_int_equal(got.count, 0);
    assert_string_equal(rl_stream_error(s), "remoteledger: signature: ledger 1 is unsigned");
    assert_int_equal(rl_stream_reconnects(s), 0);
    rl_stream_free(s);
    stop_daemon();
}

/* Somebody with the disk rewrites ledger 4's bytes and its record consistently (length, XXH64,
 * self checksum): the ring's checks pass, the signature does not. */
static void test_rewritten_ring_ledger_refused(void **state)
{
    (void)state;
    copy_file(certs.sign_key, g_key);
    start_daemon("forged", true, 0, 1, 8);
    assert_int_equal(cs_proc_wait_exit(&g_proc, WAIT_MS), 0);
    cs_proc_free(&g_proc);
    g_live = false;
    char path[PATH_MAX + 64], rec[1200];
    snprintf(path, sizeof path, "%s/forged/ledgers/ledger-4.xdr", certs.dir.path);
    uint8_t body[3000];
    memset(body, 0x66, sizeof body);
    FILE *f = fopen(path, "w");
    assert_non_null(f);
    assert_int_equal(fwrite(body, 1, sizeof body, f), sizeof body);
    fclose(f);
    /* Ledger 4's line in its segment's records log, rewritten (the daemon is stopped). */
    char ring[PATH_MAX + 64];
    snprintf(ring, sizeof ring, "%s/forged/ledgers", certs.dir.path);
    assert_true(cs_ringfiles_record(ring, 4, rec, sizeof rec, NULL));
    cs_ledger_record r;
    char problem[128];
    assert_int_equal(cs_ring_record_parse(rec, 4, &r, problem, sizeof problem), 0);
    r.xxh64 = XXH64(body, sizeof body, 0);
    /* No stored frames: replayed from the raw file (their bytes stay in the segment, unclaimed). */
    r.frames_len = r.frames_off = r.frames_xxh3 = r.raw_xxh3 = 0;
    cs_ring_record_format(rec, sizeof rec, 4, &r);
    assert_true(cs_ringfiles_replace_record(ring, 4, rec));

    start_daemon("forged", true, 0, 9, 0);
    rl_stream *s = client(certs.sign_pub, 5);
    seen got = {.in_order = true};
    assert_int_equal(rl_stream_raw_ledgers(s, rl_bounded_range(1, 8), on_ledger, &got), RL_ERR_SIGNATURE);
    assert_int_equal(got.count, 3);
    assert_string_equal(rl_stream_error(s), "remoteledger: signature: ledger 4: bytes differ from the signed SHA-256");
    rl_stream_free(s);
    stop_daemon();
}

static void expect_start_error(char *const *argv, const char *want)
{
    cs_proc p;
    assert_int_equal(cs_proc_start(&p, argv), 0);
    assert_int_equal(cs_proc_wait_exit(&p, WAIT_MS), 1);
    if (!strstr(p.log, want))
        fail_msg("no %s in:\n%s", want, p.log);
    cs_proc_free(&p);
}

static void test_start_errors(void **state)
{
    (void)state;
    char datadir[PATH_MAX + 32], key[PATH_MAX + 16], want[PATH_MAX + 128];
    snprintf(datadir, sizeof datadir, "--data-dir=%s/errors", certs.dir.path);
    snprintf(key, sizeof key, "--signing-key=%s", certs.sign_pub);
    char *a[] = {CORESTREAMD_BIN, datadir, "--listen", "127.0.0.1:0", key, NULL};
    snprintf(want, sizeof want, "signing key \\\"%s\\\": no PEM private key in it", certs.sign_pub);
    expect_start_error(a, want);
    snprintf(key, sizeof key, "--signing-key=%s", certs.server_key);
    snprintf(want, sizeof want, "signing key \\\"%s\\\": an id-ecPublicKey key, not Ed25519", certs.server_key);
    expect_start_error(a, want);
    char *b[] = {CORESTREAMD_BIN, datadir, "--source", "jetstream", "--jetstream-source-url", "nats://127.0.0.1:1",
                 "--signing-key", g_key, NULL};
    expect_start_error(b, "--signing-key cannot be combined with --source jetstream: an edge forwards the core's "
                          "signatures, it never signs");
    char *c[] = {CORESTREAMD_BIN, datadir, "--trusted-keys", certs.sign_pub, NULL};
    expect_start_error(c, "--trusted-keys is for the edge (--source jetstream) and a backfill source "
                          "(--backfill-from); a subscriber checks signatures with its own keys");
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_signed_live_and_replayed),
        cmocka_unit_test(test_chain_across_restart),
        cmocka_unit_test(test_sighup_rotates_the_key),
        cmocka_unit_test(test_unsigned_server_refused),
        cmocka_unit_test(test_rewritten_ring_ledger_refused),
        cmocka_unit_test(test_start_errors),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
