/* libremoteledger: the endpoint rules (PORTSPEC 3.2), the assembler on its own (3.3), the
 * WebSocket framing and handshake of ws:// connections on their own, and the whole client against
 * a scripted WebSocket server (cases 118-151 of section 5). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <poll.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>

#include <cmocka.h>
#include <xxhash.h>
#include <zstd.h>

#include "common/synthetic.h"
#include "corestream/remoteledger.h"
#include "corestream/wire.h"
#include "remoteledger/assemble.h"
#include "remoteledger/endpoint.h"
#include "remoteledger/handshake.h"
#include "remoteledger/healthz.h"
#include "remoteledger/wsframe.h"
#include "support/event.h"
#include "support/rlclient.h"
#include "support/rlsuite.h"
#include "support/scriptserver.h"
#include "wire/wire.h"

static int64_t wall_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (int64_t)ts.tv_sec * 1000000000LL + ts.tv_nsec;
}

/* ==== endpoint (cases 143-147) ================================================================ */

static void endpoint_of(const char *url, rl_range r, char *out, size_t len)
{
    rli_url u;
    cs_err err;
    if (rli_url_parse(&u, url, &err))
        fail_msg("parse %s: %s", url, err.msg);
    char *ep, *target;
    if (rli_endpoint_build(&u, r, &ep, &target, &err))
        fail_msg("endpoint %s: %s", url, err.msg);
    snprintf(out, len, "%s", ep);
    free(ep);
    free(target);
    rli_url_free(&u);
}

/* The error of building the endpoint (parse or range), "" when both succeed. */
static int endpoint_error(const char *url, rl_range r, char *out, size_t len)
{
    rli_url u;
    cs_err err;
    out[0] = '\0';
    if (rli_url_parse(&u, url, &err)) {
        snprintf(out, len, "%s", err.msg);
        return err.kind;
    }
    char *ep, *target;
    int rc = rli_endpoint_build(&u, r, &ep, &target, &err);
    if (rc) {
        snprintf(out, len, "%s", err.msg);
        rc = err.kind;
    } else {
        free(ep);
        free(target);
    }
    rli_url_free(&u);
    return rc;
}

/* 147 */
static void test_endpoint(void **state)
{
    (void)state;
    static const struct {
        const char *url;
        rl_range r;
        const char *want;
    } cases[] = {
        {"ws://box:8462", {10, 0, false}, "ws://box:8462/stream?start=10"},
        {"ws://box:8462/", {10, 0, false}, "ws://box:8462/stream?start=10"},
        {"http://box:8462", {10, 0, false}, "ws://box:8462/stream?start=10"},
        {"https://box", {10, 0, false}, "wss://box/stream?start=10"},
        {"ws://box/custom", {1, 0, false}, "ws://box/custom?start=1"},
        {"ws://box", {4, 9, true}, "ws://box/stream?end=9&start=4"},
        {"ws://box", {7, 7, true}, "ws://box/stream?end=7&start=7"},
        {"ws://box", {0, 0, false}, "ws://box/stream?start=0"},
        /* beyond the Go test: what net/url keeps and re-encodes */
        {"WS://Box:8462", {1, 0, false}, "ws://Box:8462/stream?start=1"},
        {"wss://box", {1, 0, false}, "wss://box/stream?start=1"},
        {"ws://[::1]:8462", {1, 0, false}, "ws://[::1]:8462/stream?start=1"},
        {"ws://user:p%40ss@box", {1, 0, false}, "ws://user:p%40ss@box/stream?start=1"},
        {"ws://box/a%20b/c", {1, 0, false}, "ws://box/a%20b/c?start=1"},
        {"ws://box/a b", {1, 0, false}, "ws://box/a%20b?start=1"},
        {"ws://box/x#frag", {1, 0, false}, "ws://box/x?start=1#frag"},
        {"ws://box?", {1, 0, false}, "ws://box/stream?start=1"},
        {"ws://box/%2F", {1, 0, false}, "ws://box/%2F?start=1"}, /* decodes to "//": kept */
    };
    char got[512];
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        endpoint_of(cases[i].url, cases[i].r, got, sizeof got);
        if (strcmp(got, cases[i].want))
            fail_msg("endpoint(%s) = %s, want %s", cases[i].url, got, cases[i].want);
    }
}

/* 144 */
static void test_endpoint_scrubs_stale_range_params(void **state)
{
    (void)state;
    char got[512];
    endpoint_of("ws://box:8462/stream?start=9&end=5&token=abc", rl_unbounded_range(10), got, sizeof got);
    assert_string_equal(got, "ws://box:8462/stream?start=10&token=abc");
    endpoint_of("ws://box:8462/stream?start=9&end=5&token=abc", rl_bounded_range(2, 3), got, sizeof got);
    assert_string_equal(got, "ws://box:8462/stream?end=3&start=2&token=abc");
}

/* url.Values: sorted keys, values in order, QueryEscape, pairs ParseQuery drops are gone. */
static void test_endpoint_query_encoding(void **state)
{
    (void)state;
    char got[512];
    endpoint_of("ws://box/s?z=1&a=x+y&a=%2F&st%61rt=9&flag&bad=%zz&semi=1;2&tok=a%26b%3Dc", rl_unbounded_range(3),
                got, sizeof got);
    assert_string_equal(got, "ws://box/s?a=x+y&a=%2F&flag=&start=3&tok=a%26b%3Dc&z=1");
    endpoint_of("ws://box?e%20nd=1&end=7", rl_bounded_range(1, 2), got, sizeof got);
    assert_string_equal(got, "ws://box/stream?e+nd=1&end=2&start=1");
}

/* 145 and the exact messages */
static void test_endpoint_rejects(void **state)
{
    (void)state;
    static const struct {
        const char *url;
        rl_range r;
        const char *want;
    } cases[] = {
        {"ftp://box", {1, 0, false}, "remoteledger: url \"ftp://box\" must use ws, wss, http or https"},
        {"ws://", {1, 0, false}, "remoteledger: url \"ws://\" has no host"},
        {"ws://[::1", {1, 0, false}, "remoteledger: invalid url \"ws://[::1\": parse \"ws://[::1\": missing ']' in host"},
        {"ws://box", {MAXU32, 0, false},
         "remoteledger: range [4294967295,latest) reaches ledger 4294967295, the last representable sequence"},
        {"ws://box", {5, MAXU32, true},
         "remoteledger: range [5,4294967295] reaches ledger 4294967295, the last representable sequence"},
        {"ws://box", {MAXU32, MAXU32, true},
         "remoteledger: range [4294967295,4294967295] reaches ledger 4294967295, the last representable sequence"},
        {"ws://box", {9, 4, true}, "remoteledger: range [9,4] ends before it starts"},
        {"box:8462", {1, 0, false}, "remoteledger: url \"box:8462\" must use ws, wss, http or https"},
        {"localhost", {1, 0, false}, "remoteledger: url \"localhost\" must use ws, wss, http or https"},
        {"ws:box", {1, 0, false}, "remoteledger: url \"ws:box\" has no host"},
        /* Quoted as Go's %q does: a non-printing rune (U+00A0) is escaped, not copied. */
        {"ws:\xc2\xa0", {1, 0, false}, "remoteledger: url \"ws:\\u00a0\" has no host"},
        {"ws://box:80x", {1, 0, false},
         "remoteledger: invalid url \"ws://box:80x\": parse \"ws://box:80x\": invalid port \":80x\" after host"},
        {"ws://b%zzx", {1, 0, false},
         "remoteledger: invalid url \"ws://b%zzx\": parse \"ws://b%zzx\": invalid URL escape \"%zz\""},
        {"ws://b x", {1, 0, false},
         "remoteledger: invalid url \"ws://b x\": parse \"ws://b x\": invalid character \" \" in host name"},
        {"ws://box\n", {1, 0, false},
         "remoteledger: invalid url \"ws://box\\n\": parse \"ws://box\\n\": net/url: invalid control character in URL"},
        {":8462", {1, 0, false}, "remoteledger: invalid url \":8462\": parse \":8462\": missing protocol scheme"},
        {"", {1, 0, false}, "remoteledger: url \"\" must use ws, wss, http or https"},
        {"ws://box/p%", {1, 0, false},
         "remoteledger: invalid url \"ws://box/p%\": parse \"ws://box/p%\": invalid URL escape \"%\""},
    };
    char got[1024];
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        int kind = endpoint_error(cases[i].url, cases[i].r, got, sizeof got);
        if (kind != RL_ERR_INVALID || strcmp(got, cases[i].want))
            fail_msg("endpoint(%s): kind %d \"%s\", want \"%s\"", cases[i].url, kind, got, cases[i].want);
    }
}

static void test_url_dial_target(void **state)
{
    (void)state;
    rli_url u;
    cs_err err;
    assert_int_equal(rli_url_parse(&u, "wss://[::1]:9443/x?y=1", &err), 0);
    assert_true(u.tls);
    assert_string_equal(u.hostname, "::1");
    assert_int_equal(u.port, 9443);
    assert_string_equal(u.host, "[::1]:9443");
    rli_url_free(&u);
    assert_int_equal(rli_url_parse(&u, "https://box", &err), 0);
    assert_int_equal(u.port, 443);
    assert_string_equal(u.hostname, "box");
    rli_url_free(&u);
    assert_int_equal(rli_url_parse(&u, "http://box:", &err), 0);
    assert_false(u.tls);
    assert_int_equal(u.port, 80);
    rli_url_free(&u);
    assert_int_equal(rli_url_parse(&u, "ws://box:99999", &err), 0);
    assert_int_equal(u.port, -1);
    rli_url_free(&u);
}

static void test_range_format(void **state)
{
    (void)state;
    char b[64];
    rli_range_format(rl_bounded_range(7, 9), b, sizeof b);
    assert_string_equal(b, "[7,9]");
    rli_range_format(rl_unbounded_range(3), b, sizeof b);
    assert_string_equal(b, "[3,latest)");
    rli_range_format(rl_single_ledger_range(5), b, sizeof b);
    assert_string_equal(b, "[5,5]");
}

/* 143 */
static void test_read_limit_is_chunk_sized(void **state)
{
    (void)state;
    assert_int_equal(rli_read_limit(CS_MAX_CHUNK_SIZE), 8388619);
    assert_int_equal(rli_read_limit(64 << 10), 65547);
    assert_int_equal(rli_read_limit(0), 8388619);
    assert_int_equal(rli_read_limit(-1), -1);
    assert_int_equal(rli_read_limit(10), 34);
    int64_t big = rli_read_limit(INT64_MAX);
    assert_true(big > 0);
    assert_true(big + 1 > 0);
    assert_int_equal(big, INT64_MAX - 1);
    assert_int_equal(rli_read_limit(INT64_MAX - 12), INT64_MAX - 1);
    assert_int_equal(rli_expand_bound(0), 8388608);
    assert_int_equal(rli_expand_bound(-5), 8388608);
    assert_int_equal(rli_expand_bound(4096), 4096);
    assert_int_equal(rli_expand_bound(INT64_MAX), 8388608);
}

/* ==== the assembler on its own (section 3.3) ================================================= */

typedef struct wmsg {
    uint8_t *p;
    size_t n;
} wmsg;

typedef struct script {
    wmsg m[256];
    size_t n;
} script;

static void sc_free(script *s)
{
    for (size_t i = 0; i < s->n; i++)
        free(s->m[i].p);
    s->n = 0;
}

static void sc_raw(script *s, const void *p, size_t n)
{
    assert_true(s->n < sizeof s->m / sizeof s->m[0]);
    uint8_t *b = malloc(n ? n : 1);
    assert_non_null(b);
    if (n)
        memcpy(b, p, n);
    s->m[s->n++] = (wmsg){b, n};
}

static void sc_begin(script *s, uint32_t seq, int64_t stamp)
{
    uint8_t b[CS_WIRE_BEGIN_LEN];
    sc_raw(s, b, cs_wire_put_begin(b, seq, stamp));
}

static void sc_chunk(script *s, uint32_t seq, uint32_t idx, uint8_t codec, const void *p, size_t n)
{
    uint8_t *b = malloc(CS_WIRE_CHUNK_HEADER_LEN + n);
    assert_non_null(b);
    size_t len = cs_wire_append_chunk(b, seq, idx, codec, p, n);
    sc_raw(s, b, len);
    free(b);
}

static void sc_end(script *s, uint32_t seq, uint32_t count, uint64_t total, int64_t stamp, uint64_t sum)
{
    uint8_t b[CS_WIRE_END_LEN];
    sc_raw(s, b, cs_wire_put_end(b, seq, count, total, stamp, sum));
}

static void sc_flow(script *s, uint32_t seq, const char *a, const char *b)
{
    sc_begin(s, seq, 0);
    sc_chunk(s, seq, 0, CS_CODEC_RAW, a, strlen(a));
    size_t n = 1;
    XXH64_state_t *h = XXH64_createState();
    XXH64_reset(h, 0);
    XXH64_update(h, a, strlen(a));
    if (b) {
        sc_chunk(s, seq, 1, CS_CODEC_RAW, b, strlen(b));
        XXH64_update(h, b, strlen(b));
        n = 2;
    }
    sc_end(s, seq, (uint32_t)n, strlen(a) + (b ? strlen(b) : 0), 0, XXH64_digest(h));
    XXH64_freeState(h);
}

/* How a message is fed: whole, one msg_data call, or fragments of a fixed size. */
enum { FEED_WHOLE = 0, FEED_ONECALL = 1, FEED_FRAG1 = 2, FEED_FRAG7 = 3, FEED_FRAG4096 = 4, FEED_MODES };

static rli_asm_status feed(rli_asm *a, const uint8_t *p, size_t n, int mode, cs_err *err)
{
    if (mode == FEED_WHOLE)
        return rli_asm_message(a, p, n, err);
    size_t frag = mode == FEED_ONECALL ? (n ? n : 1) : mode == FEED_FRAG1 ? 1 : mode == FEED_FRAG7 ? 7 : 4096;
    rli_asm_msg_begin(a, mode == FEED_FRAG7 ? 0 : n);
    for (size_t off = 0; off < n; off += frag)
        rli_asm_msg_data(a, p + off, n - off < frag ? n - off : frag);
    return rli_asm_msg_end(a, err);
}

typedef struct run_out {
    rli_asm_status last;
    int ledgers;
    cs_err err;
    rl_ledger_info info[16];
    uint8_t *data[16];
    size_t len[16];
} run_out;

static void run_free(run_out *o)
{
    for (int i = 0; i < o->ledgers && i < 16; i++)
        free(o->data[i]);
}

/* Feeds every message until the first error; returns the assembler for further checks. */
static rli_asm *run_script(const script *s, int64_t cap, size_t bound, uint32_t from, int mode, run_out *o)
{
    memset(o, 0, sizeof *o);
    rli_asm *a = rli_asm_new(cap, bound);
    assert_non_null(a);
    rli_asm_reset(a, from);
    for (size_t i = 0; i < s->n; i++) {
        o->last = feed(a, s->m[i].p, s->m[i].n, mode, &o->err);
        if (o->last == RLI_ASM_ERROR)
            break;
        if (o->last == RLI_ASM_LEDGER) {
            size_t len;
            const uint8_t *d = rli_asm_ledger(a, &len, &o->info[o->ledgers < 16 ? o->ledgers : 15]);
            if (o->ledgers < 16) {
                o->data[o->ledgers] = malloc(len ? len : 1);
                memcpy(o->data[o->ledgers], d, len);
                o->len[o->ledgers] = len;
            }
            o->ledgers++;
        }
    }
    return a;
}

/* Runs the script in every feeding mode and checks they agree on the outcome. */
static void expect_error(const script *s, int64_t cap, size_t bound, uint32_t from, int kind, const char *msg,
                         int ledgers)
{
    for (int mode = 0; mode < FEED_MODES; mode++) {
        run_out o;
        rli_asm *a = run_script(s, cap, bound, from, mode, &o);
        if (o.last != RLI_ASM_ERROR)
            fail_msg("mode %d: no error, want \"%s\"", mode, msg);
        if (o.err.kind != kind || strcmp(o.err.msg, msg))
            fail_msg("mode %d: kind %d \"%s\", want kind %d \"%s\"", mode, o.err.kind, o.err.msg, kind, msg);
        assert_int_equal(o.ledgers, ledgers);
        run_free(&o);
        rli_asm_free(a);
    }
}

#define PV "remoteledger: protocol violation: "
#define GAP "remoteledger: ledger sequence gap: "

static void test_asm_reassembles(void **state)
{
    (void)state;
    for (int mode = 0; mode < FEED_MODES; mode++) {
        script s = {0};
        sc_begin(&s, 5, 1700000000000000000LL);
        sc_chunk(&s, 5, 0, CS_CODEC_RAW, "hello, ", 7);
        sc_chunk(&s, 5, 1, CS_CODEC_RAW, "world", 5);
        sc_end(&s, 5, 2, 12, 1700000000015000000LL, XXH64("hello, world", 12, 0));
        sc_flow(&s, 6, "ring-replayed", NULL);
        run_out o;
        rli_asm *a = run_script(&s, CS_MAX_PAYLOAD_SIZE, CS_MAX_CHUNK_SIZE, 5, mode, &o);
        assert_int_not_equal(o.last, RLI_ASM_ERROR);
        assert_int_equal(o.ledgers, 2);
        assert_int_equal(o.len[0], 12);
        assert_memory_equal(o.data[0], "hello, world", 12);
        assert_int_equal(o.info[0].sequence, 5);
        assert_int_equal(o.info[0].chunks, 2);
        assert_int_equal(o.info[0].size, 12);
        assert_int_equal(o.info[0].emit_start_unix_nano, 1700000000000000000LL);
        assert_int_equal(o.info[0].emit_end_unix_nano, 1700000000015000000LL);
        assert_int_equal(o.info[0].received_unix_nano, 0);
        assert_int_equal(o.info[0].discarded_partials, 0);
        assert_memory_equal(o.data[1], "ring-replayed", 13);
        assert_int_equal(o.info[1].emit_start_unix_nano, 0);
        assert_int_equal(rli_asm_expected(a), 7);
        assert_false(rli_asm_active(a, NULL));
        run_free(&o);
        rli_asm_free(a);
        sc_free(&s);
    }
}

/* Every violation of 3.3, word for word, in every feeding mode (135 and more). */
static void test_asm_violations(void **state)
{
    (void)state;
    script s = {0};
    uint64_t hx = XXH64("x", 1, 0);

    sc_begin(&s, 1, 0);
    sc_chunk(&s, 1, 1, CS_CODEC_RAW, "x", 1);
    expect_error(&s, -1, 0, 1, RL_ERR_PROTOCOL, PV "ledger 1 chunk 1 arrived, expected chunk 0", 0);
    sc_free(&s);

    sc_chunk(&s, 1, 0, CS_CODEC_RAW, "x", 1);
    expect_error(&s, -1, 0, 1, RL_ERR_PROTOCOL, PV "CHUNK for ledger 1 outside its flow", 0);
    sc_free(&s);

    sc_begin(&s, 1, 0);
    sc_chunk(&s, 2, 0, CS_CODEC_RAW, "x", 1);
    expect_error(&s, -1, 0, 1, RL_ERR_PROTOCOL, PV "CHUNK for ledger 2 outside its flow", 0);
    sc_free(&s);

    sc_end(&s, 1, 0, 0, 0, 0);
    expect_error(&s, -1, 0, 1, RL_ERR_PROTOCOL, PV "END for ledger 1 outside its flow", 0);
    sc_free(&s);

    sc_begin(&s, 1, 0);
    sc_end(&s, 2, 0, 0, 0, XXH64(NULL, 0, 0));
    expect_error(&s, -1, 0, 1, RL_ERR_PROTOCOL, PV "END for ledger 2 outside its flow", 0);
    sc_free(&s);

    sc_begin(&s, 1, 0);
    sc_chunk(&s, 1, 0, CS_CODEC_RAW, "x", 1);
    sc_end(&s, 1, 2, 1, 0, hx);
    expect_error(&s, -1, 0, 1, RL_ERR_PROTOCOL, PV "ledger 1 END declares 2 chunks, 1 arrived", 0);
    sc_free(&s);

    sc_begin(&s, 1, 0);
    sc_chunk(&s, 1, 0, CS_CODEC_RAW, "x", 1);
    sc_end(&s, 1, 1, 2, 0, hx);
    expect_error(&s, -1, 0, 1, RL_ERR_PROTOCOL, PV "ledger 1 END declares 2 bytes, 1 assembled", 0);
    sc_free(&s);

    char want[CS_ERR_MSG_MAX + 64];
    sc_begin(&s, 1, 0);
    sc_chunk(&s, 1, 0, CS_CODEC_RAW, "x", 1);
    sc_end(&s, 1, 1, 1, 0, 0xbad);
    snprintf(want, sizeof want, PV "ledger 1 checksum mismatch: got 0x%016llx, want 0x0000000000000bad",
             (unsigned long long)hx);
    expect_error(&s, -1, 0, 1, RL_ERR_PROTOCOL, want, 0);
    sc_free(&s);

    sc_begin(&s, 1, 0);
    sc_begin(&s, 2, 0);
    expect_error(&s, -1, 0, 1, RL_ERR_PROTOCOL, PV "BEGIN for ledger 2 while assembling 1", 0);
    sc_free(&s);

    /* 122: sequence rules */
    sc_flow(&s, 5, "a", NULL);
    sc_flow(&s, 6, "b", NULL);
    sc_flow(&s, 8, "c", NULL);
    expect_error(&s, -1, 0, 5, RL_ERR_GAP, GAP "got ledger 8, expected 7", 2);
    sc_free(&s);

    sc_flow(&s, 11, "a", NULL);
    expect_error(&s, -1, 0, 10, RL_ERR_GAP, GAP "got ledger 11, expected 10", 0);
    sc_free(&s);

    sc_flow(&s, MAXU32, "a", NULL);
    sc_flow(&s, 1, "b", NULL);
    expect_error(&s, -1, 0, 0, RL_ERR_GAP,
                 GAP "ledger 1 cannot follow 4294967295, the last representable sequence", 1);
    sc_free(&s);

    /* decode failures, wire wording */
    uint8_t two[2] = {CS_WIRE_VERSION, CS_WIRE_TYPE_BEGIN};
    sc_raw(&s, two, 2);
    expect_error(&s, -1, 0, 1, RL_ERR_PROTOCOL, PV "wire: message shorter than header: got 2 bytes, want at least 6", 0);
    sc_free(&s);

    uint8_t b[64];
    cs_wire_put_begin(b, 1, 0);
    b[0] = 0x01;
    sc_raw(&s, b, CS_WIRE_BEGIN_LEN);
    expect_error(&s, -1, 0, 1, RL_ERR_PROTOCOL, PV "wire: unsupported protocol version: got 0x01, want 0x02", 0);
    sc_free(&s);

    uint8_t e[1] = {0};
    sc_raw(&s, e, 0);
    expect_error(&s, -1, 0, 1, RL_ERR_PROTOCOL, PV "wire: message shorter than header: got 0 bytes, want at least 6", 0);
    sc_free(&s);

    uint8_t chunk10[10] = {CS_WIRE_VERSION, CS_WIRE_TYPE_CHUNK, 0, 0, 0, 1, 0, 0, 0, 0};
    sc_raw(&s, chunk10, sizeof chunk10);
    expect_error(&s, -1, 0, 1, RL_ERR_PROTOCOL,
                 PV "wire: message shorter than header: CHUNK is 10 bytes, want at least 11", 0);
    sc_free(&s);

    sc_begin(&s, 1, 0);
    uint8_t badcodec[12];
    cs_wire_append_chunk(badcodec, 1, 0, 5, (const uint8_t *)"x", 1);
    sc_raw(&s, badcodec, sizeof badcodec);
    expect_error(&s, -1, 0, 1, RL_ERR_PROTOCOL, PV "wire: unknown chunk codec: 0x05", 0);
    sc_free(&s);

    uint8_t unknown[20] = {CS_WIRE_VERSION, 0x7f, 0, 0, 0, 1};
    sc_raw(&s, unknown, sizeof unknown);
    expect_error(&s, -1, 0, 1, RL_ERR_PROTOCOL, PV "wire: unknown message type: 0x7f", 0);
    sc_free(&s);

    /* fixed-size messages with the wrong length, short and long: the same words as cs_wire_decode */
    static const struct {
        uint8_t type;
        size_t len;
    } lens[] = {{CS_WIRE_TYPE_BEGIN, 13}, {CS_WIRE_TYPE_BEGIN, 15}, {CS_WIRE_TYPE_BEGIN, 40},
                {CS_WIRE_TYPE_END, 33},   {CS_WIRE_TYPE_END, 35},   {CS_WIRE_TYPE_END, 100},
                {0x7f, 35},               {0x7f, 6}};
    for (size_t i = 0; i < sizeof lens / sizeof lens[0]; i++) {
        uint8_t m[100] = {CS_WIRE_VERSION, lens[i].type, 0, 0, 0, 1};
        cs_wire_msg dm;
        cs_err werr;
        assert_int_equal(cs_wire_decode(m, lens[i].len, &dm, &werr), -1);
        snprintf(want, sizeof want, PV "%s", werr.msg);
        sc_raw(&s, m, lens[i].len);
        expect_error(&s, -1, 0, 1, RL_ERR_PROTOCOL, want, 0);
        sc_free(&s);
        /* and a long message with a bad version byte */
        m[0] = 0x01;
        assert_int_equal(cs_wire_decode(m, lens[i].len, &dm, &werr), -1);
        snprintf(want, sizeof want, PV "%s", werr.msg);
        sc_raw(&s, m, lens[i].len);
        expect_error(&s, -1, 0, 1, RL_ERR_PROTOCOL, want, 0);
        sc_free(&s);
    }
    uint8_t longchunk[60];
    cs_wire_append_chunk(longchunk, 1, 0, 9, longchunk, 0);
    memset(longchunk + 11, 0xAB, sizeof longchunk - 11);
    sc_raw(&s, longchunk, sizeof longchunk);
    expect_error(&s, -1, 0, 1, RL_ERR_PROTOCOL, PV "wire: unknown chunk codec: 0x09", 0);
    sc_free(&s);
}

/* 138 and the order of checks inside a CHUNK */
static void test_asm_cap(void **state)
{
    (void)state;
    uint8_t a100[100], b100[100], b50[50];
    memset(a100, 1, sizeof a100);
    memset(b100, 2, sizeof b100);
    memset(b50, 2, sizeof b50);
    script s = {0};
    sc_begin(&s, 1, 0);
    sc_chunk(&s, 1, 0, CS_CODEC_RAW, a100, 100);
    sc_chunk(&s, 1, 1, CS_CODEC_RAW, b100, 100);
    expect_error(&s, 150, 0, 1, RL_ERR_PROTOCOL, PV "ledger 1 exceeds the 150-byte payload cap", 0);
    sc_free(&s);

    uint8_t both[150];
    memcpy(both, a100, 100);
    memcpy(both + 100, b50, 50);
    for (int mode = 0; mode < FEED_MODES; mode++) {
        sc_begin(&s, 1, 0);
        sc_chunk(&s, 1, 0, CS_CODEC_RAW, a100, 100);
        sc_chunk(&s, 1, 1, CS_CODEC_RAW, b50, 50);
        sc_end(&s, 1, 2, 150, 0, XXH64(both, 150, 0));
        run_out o;
        rli_asm *a = run_script(&s, 150, 0, 1, mode, &o);
        assert_int_equal(o.last, RLI_ASM_LEDGER);
        assert_int_equal(o.len[0], 150);
        assert_memory_equal(o.data[0], both, 150);
        run_free(&o);
        rli_asm_free(a);
        sc_free(&s);
    }

    /* a zstd chunk is measured after expansion */
    uint8_t z[256];
    size_t zn = ZSTD_compress(z, sizeof z, b100, 100, 1);
    assert_false(ZSTD_isError(zn));
    sc_begin(&s, 1, 0);
    sc_chunk(&s, 1, 0, CS_CODEC_RAW, a100, 100);
    sc_chunk(&s, 1, 1, CS_CODEC_ZSTD, z, zn);
    expect_error(&s, 150, 0, 1, RL_ERR_PROTOCOL, PV "ledger 1 exceeds the 150-byte payload cap", 0);
    sc_free(&s);

    /* the flow check comes before the cap */
    sc_begin(&s, 1, 0);
    sc_chunk(&s, 1, 0, CS_CODEC_RAW, a100, 100);
    sc_chunk(&s, 1, 2, CS_CODEC_RAW, b100, 100);
    expect_error(&s, 150, 0, 1, RL_ERR_PROTOCOL, PV "ledger 1 chunk 2 arrived, expected chunk 1", 0);
    sc_free(&s);

    /* a cap of 0 accepts empty ledgers only */
    sc_begin(&s, 1, 0);
    sc_chunk(&s, 1, 0, CS_CODEC_RAW, "", 0);
    sc_end(&s, 1, 1, 0, 0, XXH64("", 0, 0));
    sc_flow(&s, 2, "x", NULL);
    expect_error(&s, 0, 0, 1, RL_ERR_PROTOCOL, PV "ledger 2 exceeds the 0-byte payload cap", 1);
    sc_free(&s);
}

/* 134 at the assembler: a second BEGIN for the same ledger drops the partial */
static void test_asm_redelivery(void **state)
{
    (void)state;
    for (int mode = 0; mode < FEED_MODES; mode++) {
        script s = {0};
        sc_begin(&s, 9, 123456789);
        sc_chunk(&s, 9, 0, CS_CODEC_RAW, "partial that must v", 19);
        sc_chunk(&s, 9, 1, CS_CODEC_RAW, "anish", 5);
        sc_begin(&s, 9, 0);
        sc_begin(&s, 9, 0); /* twice: two discards, and no sequence check on either */
        sc_chunk(&s, 9, 0, CS_CODEC_RAW, "the complete", 12);
        sc_chunk(&s, 9, 1, CS_CODEC_RAW, " ledger", 7);
        sc_end(&s, 9, 2, 19, 0, XXH64("the complete ledger", 19, 0));
        sc_flow(&s, 10, "next", NULL);
        run_out o;
        rli_asm *a = run_script(&s, -1, 0, 9, mode, &o);
        assert_int_equal(o.ledgers, 2);
        assert_memory_equal(o.data[0], "the complete ledger", 19);
        assert_int_equal(o.info[0].discarded_partials, 2);
        assert_int_equal(o.info[0].emit_start_unix_nano, 0);
        assert_int_equal(o.info[1].discarded_partials, 0);
        run_free(&o);
        rli_asm_free(a);
        sc_free(&s);
    }
}

static void test_asm_tip_and_ceiling(void **state)
{
    (void)state;
    script s = {0};
    sc_flow(&s, 900, "a", NULL);
    sc_flow(&s, 901, "b", NULL);
    run_out o;
    rli_asm *a = run_script(&s, -1, 0, 0, FEED_WHOLE, &o);
    assert_int_equal(o.ledgers, 2);
    assert_int_equal(rli_asm_expected(a), 902);
    run_free(&o);
    rli_asm_free(a);
    sc_free(&s);

    /* the ceiling itself is deliverable (a tip subscription may land on it) */
    sc_flow(&s, MAXU32, "a", NULL);
    a = run_script(&s, -1, 0, MAXU32, FEED_WHOLE, &o);
    assert_int_equal(o.ledgers, 1);
    assert_int_equal(rli_asm_expected(a), 0);
    run_free(&o);
    rli_asm_free(a);
    sc_free(&s);
}

/* Raw bytes hashed incrementally, as they are appended, give XXH64 of the ledger. */
static void test_asm_incremental_hash(void **state)
{
    (void)state;
    const size_t L = 3u << 20;
    uint8_t *led = malloc(L);
    assert_non_null(led);
    cs_synthetic_fill(led, L, 42, false);
    uint64_t want = XXH64(led, L, 0);
    size_t sizes[] = {1, 4095, 262144, 1000003, 7};
    rli_asm *a = rli_asm_new(-1, 0);
    assert_non_null(a);
    unsigned seed = 1;
    for (int round = 0; round < 3; round++) {
        rli_asm_reset(a, 1);
        uint8_t b[CS_WIRE_BEGIN_LEN];
        cs_err err;
        assert_int_equal(rli_asm_message(a, b, cs_wire_put_begin(b, 1, 0), &err), RLI_ASM_MORE);
        size_t off = 0;
        uint32_t idx = 0;
        while (off < L) {
            size_t n = sizes[(idx + (size_t)round) % 5];
            if (n > L - off)
                n = L - off;
            uint8_t *m = malloc(CS_WIRE_CHUNK_HEADER_LEN + n);
            size_t ml = cs_wire_append_chunk(m, 1, idx, CS_CODEC_RAW, led + off, n);
            /* random fragmentation of the message */
            rli_asm_msg_begin(a, round == 1 ? 0 : ml);
            size_t p = 0;
            while (p < ml) {
                seed = seed * 1103515245u + 12345u;
                size_t f = 1 + (seed >> 8) % 70000;
                if (f > ml - p)
                    f = ml - p;
                rli_asm_msg_data(a, m + p, f);
                p += f;
            }
            assert_int_equal(rli_asm_msg_end(a, &err), RLI_ASM_MORE);
            free(m);
            off += n;
            idx++;
        }
        uint8_t e[CS_WIRE_END_LEN];
        rli_asm_status st = rli_asm_message(a, e, cs_wire_put_end(e, 1, idx, L, 0, want), &err);
        if (st != RLI_ASM_LEDGER)
            fail_msg("%s", err.msg);
        size_t len;
        const uint8_t *d = rli_asm_ledger(a, &len, NULL);
        assert_int_equal(len, L);
        assert_memory_equal(d, led, L);
        assert_int_equal(XXH64(d, len, 0), want);
    }
    rli_asm_free(a);
    free(led);
}

/* 148 at the assembler, and the buffer reuse: the second ledger lands in the same buffer. */
static void test_asm_mixed_codecs_and_reuse(void **state)
{
    (void)state;
    const size_t zlen = 100000, rlen = 40000;
    uint8_t *zsrc = malloc(zlen), *rsrc = malloc(rlen), *both = malloc(zlen + rlen);
    cs_synthetic_fill(zsrc, zlen, 3, true);
    cs_synthetic_fill(rsrc, rlen, 4, false);
    memcpy(both, zsrc, zlen);
    memcpy(both + zlen, rsrc, rlen);
    size_t cb = ZSTD_compressBound(zlen);
    uint8_t *z = malloc(cb);
    size_t zn = ZSTD_compress(z, cb, zsrc, zlen, 1);
    assert_false(ZSTD_isError(zn));
    assert_true(zn < zlen);
    uint64_t sum = XXH64(both, zlen + rlen, 0);
    for (int mode = 0; mode < FEED_MODES; mode++) {
        script s = {0};
        for (uint32_t seq = 1; seq <= 2; seq++) {
            sc_begin(&s, seq, 0);
            sc_chunk(&s, seq, 0, CS_CODEC_ZSTD, z, zn);
            sc_chunk(&s, seq, 1, CS_CODEC_RAW, rsrc, rlen);
            sc_end(&s, seq, 2, zlen + rlen, 0, sum);
        }
        rli_asm *a = rli_asm_new(-1, 0);
        rli_asm_reset(a, 1);
        cs_err err;
        const uint8_t *first = NULL;
        size_t cap_after_first = 0;
        for (size_t i = 0; i < s.n; i++) {
            rli_asm_status st = feed(a, s.m[i].p, s.m[i].n, mode, &err);
            if (st == RLI_ASM_ERROR)
                fail_msg("mode %d: %s", mode, err.msg);
            if (st == RLI_ASM_LEDGER) {
                size_t len;
                rl_ledger_info info;
                const uint8_t *d = rli_asm_ledger(a, &len, &info);
                assert_int_equal(len, zlen + rlen);
                assert_memory_equal(d, both, len);
                assert_int_equal(info.chunks, 2);
                if (!first) {
                    first = d;
                    cap_after_first = rli_asm_capacity(a);
                } else {
                    assert_ptr_equal(d, first);
                    assert_int_equal(rli_asm_capacity(a), cap_after_first);
                }
            }
        }
        rli_asm_free(a);
        sc_free(&s);
    }
    free(zsrc);
    free(rsrc);
    free(both);
    free(z);
}

/* 149 and the expansion bound */
static void test_asm_decompress_errors(void **state)
{
    (void)state;
    script s = {0};
    sc_begin(&s, 1, 0);
    sc_chunk(&s, 1, 0, CS_CODEC_ZSTD, "not a zstd frame", 16);
    run_out o;
    for (int mode = 0; mode < FEED_MODES; mode++) {
        rli_asm *a = run_script(&s, -1, 0, 1, mode, &o);
        assert_int_equal(o.last, RLI_ASM_ERROR);
        assert_int_equal(o.err.kind, RL_ERR_PROTOCOL);
        assert_contains(o.err.msg, PV "ledger 1 chunk 0: decompress: ");
        rli_asm_free(a);
    }
    sc_free(&s);

    /* a frame declaring more than the per-chunk bound */
    uint8_t src[8192], z[9000];
    cs_synthetic_fill(src, sizeof src, 1, true);
    size_t zn = ZSTD_compress(z, sizeof z, src, sizeof src, 1);
    sc_begin(&s, 1, 0);
    sc_chunk(&s, 1, 0, CS_CODEC_ZSTD, z, zn);
    expect_error(&s, -1, 4096, 1, RL_ERR_PROTOCOL,
                 PV "ledger 1 chunk 0: decompress: decompressed size exceeds configured limit", 0);
    sc_free(&s);

    /* the same without a content size in the frame: caught while expanding */
    ZSTD_CCtx *cc = ZSTD_createCCtx();
    ZSTD_CCtx_setParameter(cc, ZSTD_c_contentSizeFlag, 0);
    zn = ZSTD_compress2(cc, z, sizeof z, src, sizeof src);
    assert_false(ZSTD_isError(zn));
    assert_int_equal(ZSTD_getFrameContentSize(z, zn), ZSTD_CONTENTSIZE_UNKNOWN);
    sc_begin(&s, 1, 0);
    sc_chunk(&s, 1, 0, CS_CODEC_ZSTD, z, zn);
    expect_error(&s, -1, 4096, 1, RL_ERR_PROTOCOL,
                 PV "ledger 1 chunk 0: decompress: decompressed size exceeds configured limit", 0);
    sc_free(&s);
    /* ...and within the bound it expands fine, exactly at the bound too */
    sc_begin(&s, 1, 0);
    sc_chunk(&s, 1, 0, CS_CODEC_ZSTD, z, zn);
    sc_end(&s, 1, 1, sizeof src, 0, XXH64(src, sizeof src, 0));
    for (int mode = 0; mode < FEED_MODES; mode++) {
        rli_asm *a = run_script(&s, -1, sizeof src, 1, mode, &o);
        assert_int_equal(o.last, RLI_ASM_LEDGER);
        assert_memory_equal(o.data[0], src, sizeof src);
        run_free(&o);
        rli_asm_free(a);
    }
    sc_free(&s);
    ZSTD_freeCCtx(cc);

    /* a frame cut short */
    zn = ZSTD_compress(z, sizeof z, src, sizeof src, 1);
    sc_begin(&s, 1, 0);
    sc_chunk(&s, 1, 0, CS_CODEC_ZSTD, z, zn - 3);
    for (int mode = 0; mode < FEED_MODES; mode++) {
        rli_asm *a = run_script(&s, -1, 0, 1, mode, &o);
        assert_int_equal(o.last, RLI_ASM_ERROR);
        assert_contains(o.err.msg, PV "ledger 1 chunk 0: decompress: ");
        rli_asm_free(a);
    }
    sc_free(&s);

    /* an empty zstd payload expands to nothing; two frames in one payload expand to both */
    uint8_t two[20000];
    size_t n1 = ZSTD_compress(two, sizeof two, src, 4096, 1);
    size_t n2 = ZSTD_compress(two + n1, sizeof two - n1, src + 4096, 4096, 1);
    sc_begin(&s, 1, 0);
    sc_chunk(&s, 1, 0, CS_CODEC_ZSTD, "", 0);
    sc_chunk(&s, 1, 1, CS_CODEC_ZSTD, two, n1 + n2);
    sc_end(&s, 1, 2, sizeof src, 0, XXH64(src, sizeof src, 0));
    for (int mode = 0; mode < FEED_MODES; mode++) {
        rli_asm *a = run_script(&s, -1, 0, 1, mode, &o);
        if (o.last != RLI_ASM_LEDGER)
            fail_msg("mode %d: %s", mode, o.err.msg);
        assert_memory_equal(o.data[0], src, sizeof src);
        run_free(&o);
        rli_asm_free(a);
    }
    sc_free(&s);
}

/* 151: the expansion bound is per chunk, not per assembly */
static void test_asm_bound_is_per_chunk(void **state)
{
    (void)state;
    const size_t piece_len = (256u << 10) / 18 * 18;
    uint8_t *piece = malloc(piece_len);
    for (size_t i = 0; i < piece_len; i += 18)
        memcpy(piece + i, "ledger-close-meta-", 18);
    size_t cb = ZSTD_compressBound(piece_len);
    uint8_t *frame = malloc(cb);
    size_t fn = ZSTD_compress(frame, cb, piece, piece_len, 1);
    assert_false(ZSTD_isError(fn));
    const int chunks = 80;
    XXH64_state_t *h = XXH64_createState();
    XXH64_reset(h, 0);
    for (int i = 0; i < chunks; i++)
        XXH64_update(h, piece, piece_len);
    uint64_t sum = XXH64_digest(h);
    XXH64_freeState(h);

    for (int mode = 0; mode < FEED_MODES; mode += 2) {
        rli_asm *a = rli_asm_new(-1, rli_expand_bound(CS_MAX_CHUNK_SIZE));
        rli_asm_reset(a, 1);
        cs_err err;
        uint8_t b[CS_WIRE_BEGIN_LEN];
        assert_int_equal(feed(a, b, cs_wire_put_begin(b, 1, 0), mode, &err), RLI_ASM_MORE);
        uint8_t *m = malloc(CS_WIRE_CHUNK_HEADER_LEN + fn);
        for (int i = 0; i < chunks; i++) {
            size_t ml = cs_wire_append_chunk(m, 1, (uint32_t)i, CS_CODEC_ZSTD, frame, fn);
            if (feed(a, m, ml, mode == FEED_FRAG1 ? FEED_FRAG4096 : mode, &err) != RLI_ASM_MORE)
                fail_msg("chunk %d: %s", i, err.msg);
        }
        free(m);
        uint8_t e[CS_WIRE_END_LEN];
        rli_asm_status st = feed(a, e, cs_wire_put_end(e, 1, chunks, piece_len * chunks, 0, sum), mode, &err);
        if (st != RLI_ASM_LEDGER)
            fail_msg("%s", err.msg);
        size_t len;
        const uint8_t *d = rli_asm_ledger(a, &len, NULL);
        assert_int_equal(len, piece_len * chunks);
        assert_true(len > 20u << 20 || len > (size_t)CS_MAX_CHUNK_SIZE * 2);
        assert_memory_equal(d, piece, piece_len);
        assert_memory_equal(d + len - piece_len, piece, piece_len);
        rli_asm_free(a);
    }
    free(piece);
    free(frame);
}

/* ==== the client against a scripted server (cases 118-150) =================================== */

/* 118 */
static void test_delivers_bounded_range(void **state)
{
    (void)state;
    ss_server *ss = ss_start();
    ss_ledger(ss, 5, 64);
    ss_ledger(ss, 6, 64);
    ss_ledger(ss, 7, 64);
    collected c = {0};
    drain_expect(ss, NULL, rl_bounded_range(5, 7), &c, RL_OK, 3, NULL);
    assert_int_equal(c.first, 5);
    assert_string_equal(ss_target(ss, 0), "/stream?end=7&start=5");
    /* no permessage-deflate offered */
    assert_null(strcasestr(ss_request(ss, 0), "permessage-deflate"));
    assert_null(strcasestr(ss_request(ss, 0), "Sec-WebSocket-Extensions"));
    /* after the range's last ledger the client says so, without waiting for the server */
    expect_client_close(ss, 0, 1000, "range complete");
    ss_stop(ss);
    collected_free(&c);
}

/* 119 */
static void test_reassembles_chunk_flows(void **state)
{
    (void)state;
    const int64_t es = 1700000000000000000LL, ee = 1700000000015000000LL;
    ss_server *ss = ss_start();
    const void *p1[] = {"hello, ", "world"};
    size_t l1[] = {7, 5};
    ss_flow(ss, 5, es, ee, 2, p1, l1);
    const void *p2[] = {"ring-replayed"};
    size_t l2[] = {13};
    ss_flow(ss, 6, 0, 0, 1, p2, l2);
    collected c = {0};
    int64_t before = wall_ns();
    drain_expect(ss, NULL, rl_bounded_range(5, 6), &c, RL_OK, 2, NULL);
    assert_int_equal(c.sizes[0], 12);
    assert_memory_equal(c.copies[0], "hello, world", 12);
    assert_memory_equal(c.copies[1], "ring-replayed", 13);
    assert_int_equal(c.observed, 2);
    assert_int_equal(c.observed_before_callback, 2); /* the observer runs before the hand-over */
    const rl_ledger_info *live = &c.observed_infos[0];
    assert_memory_equal(live, &c.infos[0], sizeof *live);
    assert_int_equal(live->sequence, 5);
    assert_int_equal(live->chunks, 2);
    assert_int_equal(live->size, 12);
    assert_int_equal(live->emit_start_unix_nano, es);
    assert_int_equal(live->emit_end_unix_nano, ee);
    assert_true(live->received_unix_nano >= before && live->received_unix_nano <= wall_ns());
    int64_t d;
    assert_true(rl_info_delivery(live, &d));
    assert_int_equal(d, live->received_unix_nano - ee);
    assert_true(rl_info_emit_window(live, &d));
    assert_int_equal(d, ee - es);
    assert_true(rl_info_pipeline(live, &d));
    assert_int_equal(d, live->received_unix_nano - es);
    const rl_ledger_info *replayed = &c.observed_infos[1];
    d = 12345;
    assert_false(rl_info_delivery(replayed, &d));
    assert_false(rl_info_pipeline(replayed, &d));
    assert_false(rl_info_emit_window(replayed, &d));
    assert_int_equal(d, 12345);
    assert_int_equal(replayed->discarded_partials, 0);
    assert_true(replayed->received_unix_nano > 0);
    ss_stop(ss);
    collected_free(&c);
}

/* The receive stamp is taken with or without an observer (unlike the prototype). */
static void test_received_stamp_without_observer(void **state)
{
    (void)state;
    ss_server *ss = ss_start();
    ss_ledger(ss, 1, 8);
    collected c = {0};
    rl_options o;
    rl_options_init(&o);
    o.observer = NULL;
    c.first = -1;
    rl_stream *s;
    assert_int_equal(rl_stream_new(&s, ss_url(ss), &o), RL_OK);
    assert_int_equal(rl_stream_raw_ledgers(s, rl_single_ledger_range(1), on_ledger, &c), RL_OK);
    assert_int_equal(c.count, 1);
    assert_int_equal(c.observed, 0);
    assert_true(c.infos[0].received_unix_nano > 0);
    rl_stream_free(s);
    assert_true(ss_wait(ss, SERVER_WAIT_MS));
    ss_stop(ss);
    collected_free(&c);
}

/* 120 */
static void test_stops_at_range_end(void **state)
{
    (void)state;
    ss_server *ss = ss_start();
    for (uint32_t i = 1; i <= 5; i++)
        ss_ledger(ss, i, 32);
    collected c = {0};
    drain_expect(ss, NULL, rl_bounded_range(1, 3), &c, RL_OK, 3, NULL);
    ss_stop(ss);
    collected_free(&c);
}

/* 121 */
static void test_from_tip_accepts_any_first_ledger(void **state)
{
    (void)state;
    ss_server *ss = ss_start();
    ss_ledger(ss, 900, 32);
    ss_ledger(ss, 901, 32);
    ss_send_close(ss, 1000, "");
    collected c = {0};
    drain_expect(ss, NULL, rl_unbounded_range(0), &c, RL_OK, 2, NULL);
    assert_string_equal(ss_target(ss, 0), "/stream?start=0");
    ss_stop(ss);
    collected_free(&c);
}

/* 122 */
static void test_sequence_rules(void **state)
{
    (void)state;
    collected c = {0};
    ss_server *ss = ss_start();
    ss_ledger(ss, 5, 32);
    ss_ledger(ss, 6, 32);
    ss_ledger(ss, 8, 32);
    drain_expect(ss, NULL, rl_unbounded_range(5), &c, RL_ERR_GAP, 2,
                 "remoteledger: ledger sequence gap: got ledger 8, expected 7");
    ss_stop(ss);
    collected_free(&c);

    ss = ss_start();
    ss_ledger(ss, 11, 32);
    collected_reset(&c);
    drain_expect(ss, NULL, rl_unbounded_range(10), &c, RL_ERR_GAP, 0,
                 "remoteledger: ledger sequence gap: got ledger 11, expected 10");
    ss_stop(ss);

    ss = ss_start();
    ss_begin(ss, 1, 0);
    ss_begin(ss, 2, 0);
    collected_reset(&c);
    drain_expect(ss, NULL, rl_unbounded_range(1), &c, RL_ERR_PROTOCOL, 0,
                 "remoteledger: protocol violation: BEGIN for ledger 2 while assembling 1");
    ss_stop(ss);

    ss = ss_start();
    ss_ledger(ss, MAXU32, 32);
    ss_ledger(ss, 1, 32);
    collected_reset(&c);
    drain_expect(ss, NULL, rl_unbounded_range(0), &c, RL_ERR_GAP, 1,
                 "remoteledger: ledger sequence gap: ledger 1 cannot follow 4294967295, the last representable sequence");
    ss_stop(ss);
    collected_free(&c);
}

/* 123 */
static void test_normal_close_ends_iteration(void **state)
{
    (void)state;
    ss_server *ss = ss_start();
    ss_ledger(ss, 1, 16);
    ss_ledger(ss, 2, 16);
    ss_send_close(ss, 1000, "source ended");
    collected c = {0};
    drain_expect(ss, NULL, rl_unbounded_range(1), &c, RL_OK, 2, NULL);
    /* the client answered the close handshake */
    expect_client_close(ss, 0, 1000, NULL);
    ss_stop(ss);
    collected_free(&c);
}

/* 124 */
static void test_truncated_bounded_range(void **state)
{
    (void)state;
    ss_server *ss = ss_start();
    ss_ledger(ss, 1, 32);
    ss_ledger(ss, 2, 32);
    ss_send_close(ss, 1000, "source ended");
    collected c = {0};
    drain_expect(ss, NULL, rl_bounded_range(1, 5), &c, RL_ERR_TRUNCATED, 2,
                 "remoteledger: stream ended before the requested range was delivered: got through "
                 "ledger 2, requested through 5");
    ss_stop(ss);
    collected_free(&c);
}

/* 125 */
static void test_truncated_with_nothing_delivered(void **state)
{
    (void)state;
    ss_server *ss = ss_start();
    ss_send_close(ss, 1000, "source ended");
    collected c = {0};
    drain_expect(ss, NULL, rl_bounded_range(7, 9), &c, RL_ERR_TRUNCATED, 0,
                 "remoteledger: stream ended before the requested range was delivered: received no "
                 "ledgers, requested [7,9]");
    ss_stop(ss);
}

/* 126, 127 */
static void test_truncated_mid_assembly(void **state)
{
    (void)state;
    for (int bounded = 1; bounded >= 0; bounded--) {
        ss_server *ss = ss_start();
        const void *p[] = {"whole"};
        size_t l[] = {5};
        ss_flow(ss, 1, 0, 0, 1, p, l);
        ss_begin(ss, 2, 0);
        ss_chunk(ss, 2, 0, CS_CODEC_RAW, "partial", 7);
        ss_send_close(ss, 1000, "source ended");
        collected c = {0};
        drain_expect(ss, NULL, bounded ? rl_bounded_range(1, 3) : rl_unbounded_range(1), &c, RL_ERR_TRUNCATED, 1,
                     "remoteledger: stream ended before the requested range was delivered: stream "
                     "closed mid-assembly of ledger 2");
        ss_stop(ss);
        collected_free(&c);
    }
}

/* 128 */
static void test_truncated_on_going_away(void **state)
{
    (void)state;
    ss_server *ss = ss_start();
    ss_ledger(ss, 4, 32);
    ss_send_close(ss, 1001, "source ended before range complete");
    collected c = {0};
    drain_expect(ss, NULL, rl_bounded_range(4, 6), &c, RL_ERR_TRUNCATED, 1, NULL);
    assert_contains(c.err, "got through ledger 4");
    ss_stop(ss);
    collected_free(&c);
}

/* 129 */
static void test_complete_bounded_range_has_no_error(void **state)
{
    (void)state;
    ss_server *ss = ss_start();
    for (uint32_t i = 1; i <= 3; i++)
        ss_ledger(ss, i, 32);
    ss_send_close(ss, 1000, "range complete");
    collected c = {0};
    drain_expect(ss, NULL, rl_bounded_range(1, 3), &c, RL_OK, 3, NULL);
    ss_stop(ss);
    collected_free(&c);
}

/* 130 */
static void test_tip_bounded_close_stays_clean(void **state)
{
    (void)state;
    ss_server *ss = ss_start();
    ss_send_close(ss, 1000, "source ended");
    collected c = {0};
    drain_expect(ss, NULL, rl_bounded_range(0, 5), &c, RL_OK, 0, NULL);
    ss_stop(ss);
}

/* 131 */
static void test_abrupt_close_is_an_error(void **state)
{
    (void)state;
    ss_server *ss = ss_start();
    ss_ledger(ss, 1, 32);
    ss_drop(ss);
    collected c = {0};
    drain_expect(ss, NULL, rl_bounded_range(1, 4), &c, RL_ERR_READ, 1,
                 "remoteledger: read: failed to get reader: failed to read frame header: EOF");
    ss_stop(ss);
    collected_free(&c);

    /* dropped in the middle of a message (lws hands over a partial frame once its receive buffer
     * is full, so the message sent is bigger than that buffer) */
    ss = ss_start();
    const size_t half = 1u << 20;
    uint8_t *part = malloc(half);
    cs_wire_put_chunk_header(part, 1, 0, CS_CODEC_RAW);
    memset(part + CS_WIRE_CHUNK_HEADER_LEN, 7, half - CS_WIRE_CHUNK_HEADER_LEN);
    ss_begin(ss, 1, 0);
    ss_send_partial(ss, part, half, 2 * half);
    free(part);
    ss_drop(ss);
    collected_reset(&c);
    drain_expect(ss, NULL, rl_bounded_range(1, 4), &c, RL_ERR_READ, 0,
                 "remoteledger: read: failed to read frame payload: unexpected EOF");
    ss_stop(ss);
}

/* Other close codes are read errors, in coder/websocket's words. */
static void test_other_close_codes(void **state)
{
    (void)state;
    ss_server *ss = ss_start();
    ss_ledger(ss, 1, 32);
    ss_send_close(ss, 1011, "source failed");
    collected c = {0};
    drain_expect(ss, NULL, rl_unbounded_range(1), &c, RL_ERR_READ, 1,
                 "remoteledger: read: failed to get reader: received close frame: status = "
                 "StatusInternalError and reason = \"source failed\"");
    ss_stop(ss);
    collected_free(&c);

    ss = ss_start();
    ss_send_close_empty(ss);
    collected_reset(&c);
    drain_expect(ss, NULL, rl_unbounded_range(1), &c, RL_ERR_READ, 0,
                 "remoteledger: read: failed to get reader: received close frame: status = "
                 "StatusNoStatusRcvd and reason = \"\"");
    ss_stop(ss);

    ss = ss_start();
    ss_send_close(ss, 4002, "odd \"one\"");
    collected_reset(&c);
    drain_expect(ss, NULL, rl_unbounded_range(1), &c, RL_ERR_READ, 0,
                 "remoteledger: read: failed to get reader: received close frame: status = "
                 "StatusCode(4002) and reason = \"odd \\\"one\\\"\"");
    ss_stop(ss);
}

/* 132 */
static void test_too_far_behind(void **state)
{
    (void)state;
    ss_server *ss = ss_start();
    char reason[64];
    cs_wire_format_too_far_behind(reason, sizeof reason, 500, 900);
    ss_send_close(ss, 4001, reason);
    collected c = {0};
    drain_url(ss_url(ss), NULL, rl_unbounded_range(100), &c);
    expect(&c, RL_ERR_TOO_FAR_BEHIND, 0);
    assert_string_equal(c.err, "remoteledger: requested ledger is behind the server's retention: requested 100, "
                               "server retains [500,900]");
    uint32_t req = 0, oldest = 0, latest = 0;
    assert_true(rl_stream_too_far_behind(c.s, &req, &oldest, &latest));
    assert_int_equal(req, 100);
    assert_int_equal(oldest, 500);
    assert_int_equal(latest, 900);
    drain_done(ss, &c);
    ss_stop(ss);

    /* Requested is the NEXT ledger expected, not the original start */
    ss = ss_start();
    ss_ledger(ss, 100, 8);
    ss_ledger(ss, 101, 8);
    ss_send_close(ss, 4001, reason);
    collected_reset(&c);
    drain_url(ss_url(ss), NULL, rl_unbounded_range(100), &c);
    expect(&c, RL_ERR_TOO_FAR_BEHIND, 2);
    assert_true(rl_stream_too_far_behind(c.s, &req, NULL, NULL));
    assert_int_equal(req, 102);
    drain_done(ss, &c);
    ss_stop(ss);
    collected_free(&c);
}

/* 133 */
static void test_too_far_behind_without_bounds(void **state)
{
    (void)state;
    ss_server *ss = ss_start();
    ss_send_close(ss, 4001, "nope");
    collected c = {0};
    drain_url(ss_url(ss), NULL, rl_unbounded_range(100), &c);
    expect(&c, RL_ERR_TOO_FAR_BEHIND, 0);
    assert_string_equal(c.err, "remoteledger: requested ledger is behind the server's retention: requested 100");
    uint32_t req = 1, oldest = 1, latest = 1;
    assert_true(rl_stream_too_far_behind(c.s, &req, &oldest, &latest));
    assert_int_equal(req, 100);
    assert_int_equal(oldest, 0);
    assert_int_equal(latest, 0);
    drain_done(ss, &c);
    ss_stop(ss);
}

/* 134 */
static void test_discards_partial_on_ring_redelivery(void **state)
{
    (void)state;
    ss_server *ss = ss_start();
    ss_begin(ss, 9, wall_ns());
    ss_chunk(ss, 9, 0, CS_CODEC_RAW, "partial that must v", 19);
    ss_chunk(ss, 9, 1, CS_CODEC_RAW, "anish", 5);
    const void *p[] = {"the complete", " ledger"};
    size_t l[] = {12, 7};
    ss_flow(ss, 9, 0, 0, 2, p, l);
    collected c = {0};
    drain_expect(ss, NULL, rl_single_ledger_range(9), &c, RL_OK, 1, NULL);
    assert_int_equal(c.sizes[0], 19);
    assert_memory_equal(c.copies[0], "the complete ledger", 19);
    assert_int_equal(c.observed, 1);
    assert_int_equal(c.observed_infos[0].discarded_partials, 1);
    int64_t d;
    assert_false(rl_info_delivery(&c.observed_infos[0], &d));
    ss_stop(ss);
    collected_free(&c);
}

/* 135 */
static void test_protocol_violations(void **state)
{
    (void)state;
    uint64_t hx = XXH64("x", 1, 0);
    for (int k = 0; k < 9; k++) {
        ss_server *ss = ss_start();
        const char *want = NULL;
        switch (k) {
        case 0:
            ss_begin(ss, 1, 0);
            ss_chunk(ss, 1, 1, CS_CODEC_RAW, "x", 1);
            want = "expected chunk 0";
            break;
        case 1:
            ss_chunk(ss, 1, 0, CS_CODEC_RAW, "x", 1);
            want = "outside its flow";
            break;
        case 2:
            ss_begin(ss, 1, 0);
            ss_chunk(ss, 2, 0, CS_CODEC_RAW, "x", 1);
            want = "outside its flow";
            break;
        case 3:
            ss_end(ss, 1, 0, 0, 0, 0);
            want = "outside its flow";
            break;
        case 4:
            ss_begin(ss, 1, 0);
            ss_chunk(ss, 1, 0, CS_CODEC_RAW, "x", 1);
            ss_end(ss, 1, 2, 1, 0, hx);
            want = "declares 2 chunks";
            break;
        case 5:
            ss_begin(ss, 1, 0);
            ss_chunk(ss, 1, 0, CS_CODEC_RAW, "x", 1);
            ss_end(ss, 1, 1, 2, 0, hx);
            want = "declares 2 bytes";
            break;
        case 6:
            ss_begin(ss, 1, 0);
            ss_chunk(ss, 1, 0, CS_CODEC_RAW, "x", 1);
            ss_end(ss, 1, 1, 1, 0, 0xbad);
            want = "checksum mismatch";
            break;
        case 7: {
            uint8_t two[2] = {CS_WIRE_VERSION, CS_WIRE_TYPE_BEGIN};
            ss_send_binary(ss, two, 2);
            want = "shorter than header";
            break;
        }
        default: {
            uint8_t b[CS_WIRE_BEGIN_LEN];
            cs_wire_put_begin(b, 1, 0);
            b[0] = 0x01;
            ss_send_binary(ss, b, sizeof b);
            want = "version";
            break;
        }
        }
        collected c = {0};
        drain_expect(ss, NULL, rl_unbounded_range(1), &c, RL_ERR_PROTOCOL, 0, NULL);
        assert_contains(c.err, "remoteledger: protocol violation: ");
        assert_contains(c.err, want);
        ss_stop(ss);
    }
}

/* 136 */
static void test_rejects_text_messages(void **state)
{
    (void)state;
    ss_server *ss = ss_start();
    ss_send_text(ss, "hello");
    collected c = {0};
    drain_expect(ss, NULL, rl_unbounded_range(1), &c, RL_ERR_PROTOCOL, 0,
                 "remoteledger: protocol violation: unexpected MessageText message");
    ss_stop(ss);
}

/* An empty binary message is a message too: shorter than any header. */
static void test_empty_message(void **state)
{
    (void)state;
    ss_server *ss = ss_start();
    ss_send_binary(ss, "", 0);
    collected c = {0};
    drain_expect(ss, NULL, rl_unbounded_range(1), &c, RL_ERR_PROTOCOL, 0,
                 "remoteledger: protocol violation: wire: message shorter than header: got 0 bytes, want at least 6");
    ss_stop(ss);
}

/* 137: the buffer handed to the first callback is the one the second ledger overwrote. */
static void test_yields_borrowed_buffers(void **state)
{
    (void)state;
    ss_server *ss = ss_start();
    ss_ledger(ss, 1, 64);
    ss_ledger(ss, 2, 64);
    collected c = {0};
    drain_expect(ss, NULL, rl_bounded_range(1, 2), &c, RL_OK, 2, NULL);
    assert_true(c.same_buffer);
    assert_true(c.borrowed_overwritten);
    ss_stop(ss);
    collected_free(&c);
}

/* 138 */
static void test_assembly_cap(void **state)
{
    (void)state;
    uint8_t a100[100], b100[100], both[150];
    memset(a100, 1, sizeof a100);
    memset(b100, 2, sizeof b100);
    memcpy(both, a100, 100);
    memcpy(both + 100, b100, 50);
    rl_options o;
    rl_options_init(&o);
    o.max_message_size = 150;

    ss_server *ss = ss_start();
    ss_begin(ss, 1, 0);
    ss_chunk(ss, 1, 0, CS_CODEC_RAW, a100, 100);
    ss_chunk(ss, 1, 1, CS_CODEC_RAW, b100, 100);
    collected c = {0};
    drain_expect(ss, &o, rl_unbounded_range(1), &c, RL_ERR_PROTOCOL, 0, NULL);
    assert_contains(c.err, "payload cap");
    ss_stop(ss);

    ss = ss_start();
    const void *p[] = {a100, b100};
    size_t l[] = {100, 50};
    ss_flow(ss, 1, 0, 0, 2, p, l);
    collected_reset(&c);
    drain_expect(ss, &o, rl_single_ledger_range(1), &c, RL_OK, 1, NULL);
    assert_int_equal(c.sizes[0], 150);
    assert_memory_equal(c.copies[0], both, 150);
    ss_stop(ss);
    collected_free(&c);
}

/* 139 */
static void test_chunk_over_the_read_limit_is_rejected(void **state)
{
    (void)state;
    rl_options o;
    rl_options_init(&o);
    o.max_chunk_size = 4096;
    static uint8_t big[8192];
    ss_server *ss = ss_start();
    ss_begin(ss, 1, 0);
    ss_chunk(ss, 1, 0, CS_CODEC_RAW, big, sizeof big);
    collected c = {0};
    drain_expect(ss, &o, rl_unbounded_range(1), &c, RL_ERR_READ, 0, "remoteledger: read: read limited at 4108 bytes");
    expect_client_close(ss, 0, 1009, "read limited at 4108 bytes");
    ss_stop(ss);

    /* a chunk exactly at the limit passes */
    ss = ss_start();
    const void *p[] = {big};
    size_t l[] = {4096};
    ss_flow(ss, 1, 0, 0, 1, p, l);
    collected_reset(&c);
    drain_expect(ss, &o, rl_single_ledger_range(1), &c, RL_OK, 1, NULL);
    ss_stop(ss);
    collected_free(&c);

    /* no limit at all */
    o.max_chunk_size = -1;
    ss = ss_start();
    const void *p2[] = {big};
    size_t l2[] = {sizeof big};
    ss_flow(ss, 1, 0, 0, 1, p2, l2);
    collected_reset(&c);
    drain_expect(ss, &o, rl_single_ledger_range(1), &c, RL_OK, 1, NULL);
    ss_stop(ss);
    collected_free(&c);
}

/* 140 */
static void test_cancel_tears_down(void **state)
{
    (void)state;
    ss_server *ss = ss_start();
    ss_ledger(ss, 1, 32);
    ss_stall(ss);
    collected c = {0};
    c.cancel_in_callback = true;
    drain_url(ss_url(ss), NULL, rl_unbounded_range(1), &c);
    expect(&c, RL_ERR_CANCELLED, 1);
    assert_string_equal(c.err, "context canceled");
    /* sticky: the next call returns at once, without a connection */
    collected c2 = {0};
    assert_int_equal(rl_stream_raw_ledgers(c.s, rl_unbounded_range(1), on_ledger, &c2), RL_ERR_CANCELLED);
    assert_string_equal(rl_stream_error(c.s), "context canceled");
    assert_int_equal(c2.count, 0);
    drain_done(ss, &c);
    assert_int_equal(ss_connections(ss), 1);
    /* the connection was dropped, not closed with a frame */
    assert_int_equal(ss_client_close(ss, 0, NULL, 0), 0);
    ss_stop(ss);
    collected_free(&c);
}

/* 141 (TestRawLedgersIgnoresStreamOptions): not applicable. The Go iterator accepts the SDK's
 * StreamOption values and ignores them; the C call has no such parameter. */

/* The consumer stopping: RL_OK and a 1000 "consumer done". */
static void test_consumer_done(void **state)
{
    (void)state;
    ss_server *ss = ss_start();
    for (uint32_t i = 1; i <= 3; i++)
        ss_ledger(ss, i, 32);
    collected c = {0};
    c.stop_after = 2;
    drain_expect(ss, NULL, rl_unbounded_range(1), &c, RL_OK, 2, NULL);
    expect_client_close(ss, 0, 1000, "consumer done");
    ss_stop(ss);
    collected_free(&c);
}

/* 142 */
static void test_dial_failures(void **state)
{
    (void)state;
    static const struct {
        const char *url, *msg;
    } invalid[] = {
        {"ftp://example.invalid", "remoteledger: url \"ftp://example.invalid\" must use ws, wss, http or https"},
        {"ws://", "remoteledger: url \"ws://\" has no host"},
        {"ws://[::1", "remoteledger: invalid url \"ws://[::1\": parse \"ws://[::1\": missing ']' in host"},
    };
    rl_options o;
    rl_options_init(&o);
    o.dial_timeout_ns = 2000000000LL;
    for (size_t i = 0; i < sizeof invalid / sizeof invalid[0]; i++) {
        rl_stream *s = NULL;
        assert_int_equal(rl_stream_new(&s, invalid[i].url, &o), RL_ERR_INVALID);
        assert_non_null(s);
        assert_string_equal(rl_stream_error(s), invalid[i].msg);
        collected c = {0};
        assert_int_equal(rl_stream_raw_ledgers(s, rl_unbounded_range(1), on_ledger, &c), RL_ERR_INVALID);
        assert_string_equal(rl_stream_error(s), invalid[i].msg);
        assert_string_equal(rl_stream_endpoint(s), "");
        rl_stream_free(s);
    }

    /* nothing listening */
    collected c = {0};
    drain_url("ws://127.0.0.1:1", &o, rl_unbounded_range(1), &c);
    expect(&c, RL_ERR_DIAL, 0);
    assert_contains(c.err, "remoteledger: dial ws://127.0.0.1:1/stream?start=1: ");
    assert_true(c.elapsed_ms < 2500);
    rl_stream_free(c.s);

    /* a server that accepts and never answers the upgrade: the handshake timeout fires */
    ss_server *ss = ss_start();
    ss_no_handshake(ss);
    o.handshake_timeout_ns = 200000000LL;
    collected_reset(&c);
    drain_expect(ss, &o, rl_unbounded_range(1), &c, RL_ERR_HANDSHAKE_TIMEOUT, 0, NULL);
    char want[256];
    snprintf(want, sizeof want, "remoteledger: dial %s/stream?start=1: handshake timeout: no upgrade response within 200ms",
             ss_url(ss));
    assert_string_equal(c.err, want);
    if (c.elapsed_ms < 190 || c.elapsed_ms > 2000)
        fail_msg("a 200 ms handshake timeout took %lld ms", (long long)c.elapsed_ms);
    assert_string_equal(rl_result_name(RL_ERR_HANDSHAKE_TIMEOUT), "RL_ERR_HANDSHAKE_TIMEOUT");
    ss_stop(ss);

    /* the upgrade refused */
    ss = ss_start();
    ss_reject_handshake(ss, 400);
    collected_reset(&c);
    drain_expect(ss, &o, rl_unbounded_range(1), &c, RL_ERR_DIAL, 0, NULL);
    assert_contains(c.err, "remoteledger: dial ");
    ss_stop(ss);

    /* cancelled while the handshake hangs, with no dial timeout at all */
    ss = ss_start();
    o.dial_timeout_ns = -1;
    rl_stream *s;
    assert_int_equal(rl_stream_new(&s, ss_url(ss), &o), RL_OK);
    ss_no_handshake(ss);
    ss_call(ss, cancel_stream, s); /* runs once the upgrade request has arrived */
    collected_reset(&c);
    int64_t t0 = mono_ms();
    assert_int_equal(rl_stream_raw_ledgers(s, rl_unbounded_range(1), on_ledger, &c), RL_ERR_CANCELLED);
    assert_true(mono_ms() - t0 < 5000);
    assert_string_equal(rl_stream_error(s), "context canceled");
    rl_stream_free(s);
    assert_true(ss_wait(ss, SERVER_WAIT_MS));
    ss_stop(ss);
}

/* wss:// (and https://) dial with TLS: against a server that never speaks TLS the handshake cannot
 * finish, and the handshake timeout ends it. */
static void test_wss_dial_timeout(void **state)
{
    (void)state;
    ss_server *ss = ss_start();
    ss_no_handshake(ss);
    rl_options o;
    rl_options_init(&o);
    o.handshake_timeout_ns = 300000000LL;
    char url[128];
    snprintf(url, sizeof url, "wss://127.0.0.1:%d", ss_port(ss));
    collected c = {0};
    drain_url(url, &o, rl_unbounded_range(1), &c);
    expect(&c, RL_ERR_HANDSHAKE_TIMEOUT, 0);
    char want[256];
    snprintf(want, sizeof want, "remoteledger: dial wss://127.0.0.1:%d/stream?start=1: handshake timeout: no TLS "
             "handshake within 300ms", ss_port(ss));
    assert_string_equal(c.err, want);
    assert_true(c.elapsed_ms >= 290 && c.elapsed_ms < 3000);
    drain_done(ss, &c);
    ss_stop(ss);
}

/* The idle timeout: a server that completes the upgrade and then says nothing; one that goes
 * silent after a ledger (the clock restarts at each message); one that keeps sending bytes of a
 * message it never completes (bytes are not messages). */
static void test_idle_timeout(void **state)
{
    (void)state;
    rl_options o;
    rl_options_init(&o);
    o.idle_timeout_ns = 300000000LL;

    ss_server *ss = ss_start();
    ss_stall(ss);
    collected c = {0};
    drain_expect(ss, &o, rl_unbounded_range(1), &c, RL_ERR_IDLE_TIMEOUT, 0,
                 "remoteledger: read: idle timeout: no complete message for 300ms");
    if (c.elapsed_ms < 290 || c.elapsed_ms > 3000)
        fail_msg("a 300 ms idle timeout took %lld ms", (long long)c.elapsed_ms);
    assert_int_equal(ss_client_close(ss, 0, NULL, 0), 0); /* dropped, no close frame */
    assert_string_equal(rl_result_name(RL_ERR_IDLE_TIMEOUT), "RL_ERR_IDLE_TIMEOUT");
    ss_stop(ss);

    ss = ss_start();
    ss_ledger(ss, 1, 100);
    ss_ledger(ss, 2, 100);
    ss_stall(ss);
    collected_reset(&c);
    drain_expect(ss, &o, rl_unbounded_range(1), &c, RL_ERR_IDLE_TIMEOUT, 2,
                 "remoteledger: read: idle timeout: no complete message for 300ms");
    ss_stop(ss);

    ss = ss_start();
    uint8_t part[64] = {0};
    ss_begin(ss, 1, 0);
    ss_send_partial(ss, part, sizeof part, 100000); /* a CHUNK frame that never completes */
    ss_stall(ss);
    collected_reset(&c);
    drain_expect(ss, &o, rl_unbounded_range(1), &c, RL_ERR_IDLE_TIMEOUT, 0, NULL);
    ss_stop(ss);

    /* negative: no idle timeout; only a cancel ends the wait */
    ss = ss_start();
    o.idle_timeout_ns = -1;
    rl_stream *s;
    assert_int_equal(rl_stream_new(&s, ss_url(ss), &o), RL_OK);
    ss_ledger(ss, 1, 10);
    ss_call(ss, cancel_stream, s);
    ss_stall(ss);
    collected_reset(&c);
    assert_int_equal(rl_stream_raw_ledgers(s, rl_unbounded_range(1), on_ledger, &c), RL_ERR_CANCELLED);
    rl_stream_free(s);
    assert_true(ss_wait(ss, SERVER_WAIT_MS));
    ss_stop(ss);
    collected_free(&c);
}

/* ==== the pull API (rl_stream_open / rl_stream_next / rl_stream_close) ======================== */

static void wait_event(void *arg) { assert_true(event_wait(arg, 10LL * 1000000000LL)); }

static void test_pull_timeouts_and_partial_ledgers(void **state)
{
    (void)state;
    event go;
    event_init(&go);
    ss_server *ss = ss_start();
    ss_ledger(ss, 1, 100);
    uint8_t raw[200];
    memset(raw, 2, sizeof raw);
    ss_begin(ss, 2, 0);
    ss_chunk(ss, 2, 0, CS_CODEC_RAW, raw, 100);
    ss_call(ss, wait_event, &go); /* ledger 2 stays half sent until the client has timed out */
    ss_chunk(ss, 2, 1, CS_CODEC_RAW, raw + 100, 100);
    ss_end(ss, 2, 2, 200, 0, XXH64(raw, 200, 0));
    ss_stall(ss);

    rl_stream *s;
    assert_int_equal(rl_stream_new(&s, ss_url(ss), NULL), RL_OK);
    const uint8_t *p;
    size_t n;
    rl_ledger_info info;
    assert_int_equal(rl_stream_next(s, -1, &p, &n, &info), RL_ERR_INVALID);
    assert_string_equal(rl_stream_error(s), "remoteledger: rl_stream_next without an open stream (rl_stream_open)");
    assert_int_equal(rl_stream_open(s, rl_unbounded_range(1)), RL_OK);
    assert_string_equal(rl_stream_error(s), "");
    assert_int_equal(rl_stream_open(s, rl_unbounded_range(1)), RL_ERR_INVALID);
    assert_string_equal(rl_stream_error(s), "remoteledger: a stream is already open: rl_stream_close it first");
    assert_int_equal(rl_stream_raw_ledgers(s, rl_unbounded_range(1), NULL, NULL), RL_ERR_INVALID);

    assert_int_equal(rl_stream_next(s, -1, &p, &n, &info), RL_OK);
    assert_int_equal(info.sequence, 1);
    assert_int_equal(n, 100);
    assert_true(info.received_unix_nano > 0);
    const uint8_t *first = p;
    int64_t t0 = mono_ms();
    assert_int_equal(rl_stream_next(s, 150000000LL, &p, &n, &info), RL_AGAIN);
    int64_t took = mono_ms() - t0;
    if (took < 140 || took > 3000)
        fail_msg("a 150 ms next took %lld ms", (long long)took);
    assert_string_equal(rl_stream_error(s), "");
    assert_int_equal(rl_stream_next(s, 0, &p, &n, &info), RL_AGAIN); /* 0: poll */
    event_set(&go);
    assert_int_equal(rl_stream_next(s, 5000000000LL, &p, &n, &info), RL_OK);
    assert_int_equal(info.sequence, 2);
    assert_int_equal(info.chunks, 2);
    assert_int_equal(n, 200);
    assert_memory_equal(p, raw, 200);
    assert_ptr_equal(p, first); /* borrowed: the same assembly buffer */
    rl_stream_close(s);
    rl_stream_close(s); /* a no-op */
    assert_true(ss_wait(ss, SERVER_WAIT_MS));
    expect_client_close(ss, 0, 1000, "consumer done");

    /* closed: a new session on the same stream */
    assert_int_equal(rl_stream_next(s, 0, NULL, NULL, NULL), RL_ERR_INVALID);
    rl_stream_free(s);
    ss_stop(ss);
    event_destroy(&go);
}

/* Polls fd for input, at most ms; whether it became readable. */
static bool readable_within(int fd, int ms)
{
    struct pollfd p = {.fd = fd, .events = POLLIN};
    return poll(&p, 1, ms) == 1 && (p.revents & POLLIN);
}

/* rl_stream_next(s, 0, ...), failing when it takes longer than bound_ms. */
static rl_result next0(rl_stream *s, rl_ledger_info *info, int64_t bound_ms)
{
    int64_t t0 = mono_ms();
    rl_result r = rl_stream_next(s, 0, NULL, NULL, info);
    int64_t took = mono_ms() - t0;
    if (took > bound_ms)
        fail_msg("rl_stream_next(0) took %lld ms (%s)", (long long)took, rl_result_name(r));
    return r;
}

/* rl_stream_fd: -1 without a session, the socket while one is open (readable when a ledger has
 * come), -1 once it has ended and after close. next(0) on a frame whose header promised more than
 * has come, and on a lone first header byte, returns RL_AGAIN at once, every time. */
static void test_pull_fd_and_next0_never_waits(void **state)
{
    (void)state;
    event go;
    event_init(&go);
    uint8_t part[40];
    memset(part, 7, sizeof part);
    ss_server *ss = ss_start();
    ss_ledger(ss, 1, 100);
    ss_call(ss, wait_event, &go); /* then half a frame, and it stalls */
    ss_send_partial(ss, part, sizeof part, 1000);
    ss_stall(ss);

    rl_stream *s;
    assert_int_equal(rl_stream_new(&s, ss_url(ss), NULL), RL_OK);
    assert_int_equal(rl_stream_fd(s), -1);
    assert_int_equal(rl_stream_open(s, rl_unbounded_range(1)), RL_OK);
    int fd = rl_stream_fd(s);
    assert_true(fd >= 0);
    struct stat st;
    assert_int_equal(fstat(fd, &st), 0);
    assert_true(S_ISSOCK(st.st_mode));
    /* ledger 1, then nothing: the contract's loop (next(0) until RL_AGAIN) */
    rl_ledger_info info;
    rl_result r;
    for (int i = 0; i < 100 && (r = next0(s, &info, 500)) == RL_AGAIN; i++)
        readable_within(rl_stream_fd(s), 100);
    assert_int_equal(r, RL_OK);
    assert_int_equal(info.sequence, 1);
    assert_int_equal(next0(s, &info, 500), RL_AGAIN);
    assert_int_equal(rl_stream_fd(s), fd);
    /* half a frame arrives: readable, and still RL_AGAIN without a wait, again and again */
    event_set(&go);
    assert_true(readable_within(fd, 5000));
    for (int i = 0; i < 20; i++)
        assert_int_equal(next0(s, &info, 200), RL_AGAIN);
    assert_int_equal(rl_stream_fd(s), fd);
    rl_stream_close(s);
    assert_int_equal(rl_stream_fd(s), -1);
    assert_true(ss_wait(ss, SERVER_WAIT_MS));
    ss_stop(ss);

    /* a lone byte of a frame header */
    ss = ss_start();
    static const uint8_t b0 = 0x82;
    ss_send_bytes(ss, &b0, 1);
    ss_stall(ss);
    rl_stream_free(s);
    assert_int_equal(rl_stream_new(&s, ss_url(ss), NULL), RL_OK);
    assert_int_equal(rl_stream_open(s, rl_unbounded_range(1)), RL_OK);
    /* (it may have come with the upgrade response, already read: no poll first, as the contract
     * says) */
    for (int i = 0; i < 20; i++)
        assert_int_equal(next0(s, &info, 200), RL_AGAIN);
    rl_stream_close(s);
    assert_true(ss_wait(ss, SERVER_WAIT_MS));
    ss_stop(ss);

    /* a bounded range: -1 once it is over */
    ss = ss_start();
    ss_ledger(ss, 5, 10);
    ss_stall(ss);
    rl_stream_free(s);
    assert_int_equal(rl_stream_new(&s, ss_url(ss), NULL), RL_OK);
    assert_int_equal(rl_stream_open(s, rl_single_ledger_range(5)), RL_OK);
    r = RL_AGAIN;
    for (int i = 0; i < 100 && (r = next0(s, &info, 500)) == RL_AGAIN; i++)
        readable_within(rl_stream_fd(s), 100);
    assert_int_equal(r, RL_OK);
    assert_int_equal(next0(s, &info, 1500), RL_END); /* the close frame goes out at once */
    assert_int_equal(rl_stream_fd(s), -1);
    rl_stream_close(s);
    assert_true(ss_wait(ss, SERVER_WAIT_MS));
    expect_client_close(ss, 0, 1000, "range complete");
    ss_stop(ss);
    rl_stream_free(s);
    event_destroy(&go);
}

/* With resume, between connections the descriptor is a timer that becomes readable when the
 * attempt is due; next(0) returns RL_AGAIN at once before that, and dials after it. */
static void test_pull_fd_across_resume(void **state)
{
    (void)state;
    ss_server *ss = ss_start();
    ss_ledger(ss, 1, 10);
    ss_drop(ss);
    ss_next_connection(ss);
    ss_ledger(ss, 2, 10);
    ss_stall(ss);
    rl_options o;
    rl_options_init(&o);
    o.resume_retries = 3;
    o.resume_backoff_ns = 400000000LL; /* the wait: 200 to 400 ms */
    o.resume_backoff_max_ns = 400000000LL;
    rl_stream *s;
    assert_int_equal(rl_stream_new(&s, ss_url(ss), &o), RL_OK);
    assert_int_equal(rl_stream_open(s, rl_unbounded_range(1)), RL_OK);
    int sock = rl_stream_fd(s);
    rl_ledger_info info;
    rl_result r = RL_AGAIN;
    for (int i = 0; i < 100 && (r = next0(s, &info, 500)) == RL_AGAIN; i++)
        readable_within(rl_stream_fd(s), 100);
    assert_int_equal(r, RL_OK);
    assert_int_equal(info.sequence, 1);
    /* the drop: read as it comes, then backing off */
    int fd = sock;
    for (int i = 0; i < 100 && fd == sock; i++) {
        readable_within(fd, 100);
        assert_int_equal(next0(s, &info, 500), RL_AGAIN);
        fd = rl_stream_fd(s);
    }
    assert_true(fd >= 0 && fd != sock);
    struct stat st;
    assert_int_equal(fstat(fd, &st), 0);
    assert_false(S_ISSOCK(st.st_mode)); /* the timer */
    int64_t t0 = mono_ms();
    assert_int_equal(next0(s, &info, 100), RL_AGAIN); /* still backing off: no wait */
    assert_true(readable_within(fd, 5000));
    int64_t waited = mono_ms() - t0;
    if (waited > 1500)
        fail_msg("the backoff timer became readable after %lld ms (want at most 400)", (long long)waited);
    /* due: this call dials (loopback: quickly), and ledger 2 comes on the new socket */
    r = RL_AGAIN;
    for (int i = 0; i < 100 && (r = next0(s, &info, 1000)) == RL_AGAIN; i++) {
        int now = rl_stream_fd(s);
        assert_true(now >= 0);
        readable_within(now, 100);
    }
    assert_int_equal(r, RL_OK);
    assert_int_equal(info.sequence, 2);
    assert_int_equal(rl_stream_reconnects(s), 1);
    assert_int_equal(fstat(rl_stream_fd(s), &st), 0);
    assert_true(S_ISSOCK(st.st_mode));
    rl_stream_free(s);
    assert_true(ss_wait(ss, SERVER_WAIT_MS));
    assert_int_equal(ss_connections(ss), 2);
    ss_stop(ss);
}

/* A bounded range: RL_END after its last ledger (the client closes with "range complete"), and
 * again on every later call until the session is closed. */
static void test_pull_end_of_range(void **state)
{
    (void)state;
    ss_server *ss = ss_start();
    ss_ledger(ss, 7, 10);
    ss_ledger(ss, 8, 10);
    rl_stream *s;
    assert_int_equal(rl_stream_new(&s, ss_url(ss), NULL), RL_OK);
    assert_int_equal(rl_stream_open(s, rl_bounded_range(7, 8)), RL_OK);
    rl_ledger_info info;
    assert_int_equal(rl_stream_next(s, -1, NULL, NULL, &info), RL_OK);
    assert_int_equal(info.sequence, 7);
    assert_int_equal(rl_stream_next(s, -1, NULL, NULL, &info), RL_OK);
    assert_int_equal(info.sequence, 8);
    assert_int_equal(rl_stream_next(s, -1, NULL, NULL, &info), RL_END);
    assert_int_equal(rl_stream_next(s, -1, NULL, NULL, &info), RL_END);
    assert_string_equal(rl_stream_error(s), "");
    assert_true(ss_wait(ss, SERVER_WAIT_MS));
    expect_client_close(ss, 0, 1000, "range complete");
    rl_stream_close(s);
    ss_stop(ss);

    rl_stream_free(s);

    /* closed right after the last ledger, without asking for more: still "range complete" */
    ss = ss_start();
    ss_ledger(ss, 7, 10);
    ss_stall(ss);
    assert_int_equal(rl_stream_new(&s, ss_url(ss), NULL), RL_OK);
    assert_int_equal(rl_stream_open(s, rl_single_ledger_range(7)), RL_OK);
    assert_int_equal(rl_stream_next(s, -1, NULL, NULL, &info), RL_OK);
    rl_stream_close(s);
    assert_true(ss_wait(ss, SERVER_WAIT_MS));
    expect_client_close(ss, 0, 1000, "range complete");
    rl_stream_free(s);
    ss_stop(ss);
}

/* The idle clock does not run while the caller holds a ledger: only the library's own waiting
 * counts. The caller here takes 700 ms over ledger 1 (the slowness under test, not a
 * synchronisation), against a 500 ms idle timeout; ledger 2 is sent only after that. */
static void test_pull_idle_excludes_the_callers_time(void **state)
{
    (void)state;
    event go;
    event_init(&go);
    ss_server *ss = ss_start();
    ss_ledger(ss, 1, 10);
    ss_call(ss, wait_event, &go);
    ss_ledger(ss, 2, 10);
    ss_stall(ss);
    rl_options o;
    rl_options_init(&o);
    o.idle_timeout_ns = 500000000LL;
    rl_stream *s;
    assert_int_equal(rl_stream_new(&s, ss_url(ss), &o), RL_OK);
    assert_int_equal(rl_stream_open(s, rl_unbounded_range(1)), RL_OK);
    assert_int_equal(rl_stream_next(s, -1, NULL, NULL, NULL), RL_OK);
    int64_t t0 = mono_ms();
    while (mono_ms() - t0 < 700)
        poll(NULL, 0, 50);
    event_set(&go);
    rl_ledger_info info;
    assert_int_equal(rl_stream_next(s, -1, NULL, NULL, &info), RL_OK);
    assert_int_equal(info.sequence, 2);
    /* then the server is silent: the idle timeout, from the library's own wait */
    assert_int_equal(rl_stream_next(s, -1, NULL, NULL, &info), RL_ERR_IDLE_TIMEOUT);
    assert_string_equal(rl_stream_error(s), "remoteledger: read: idle timeout: no complete message for 500ms");
    rl_stream_close(s);
    rl_stream_free(s);
    assert_true(ss_wait(ss, SERVER_WAIT_MS));
    ss_stop(ss);
    event_destroy(&go);
}

/* A cancelled stream stays cancelled (sticky) until rl_stream_reset; then it streams again. A
 * cancel from another thread wakes a blocked rl_stream_next. */
static void test_reset_after_cancel(void **state)
{
    (void)state;
    event opened;
    event_init(&opened);
    ss_server *ss = ss_start();
    rl_stream *s;
    assert_int_equal(rl_stream_new(&s, ss_url(ss), NULL), RL_OK);
    ss_call(ss, wait_event, &opened);
    ss_ledger(ss, 1, 10);
    ss_call(ss, cancel_stream, s); /* on the server's thread, while the client waits */
    ss_stall(ss);
    ss_next_connection(ss);
    ss_ledger(ss, 1, 10);
    ss_next_connection(ss);
    ss_ledger(ss, 1, 10);
    ss_stall(ss);

    assert_int_equal(rl_stream_open(s, rl_unbounded_range(1)), RL_OK);
    event_set(&opened);
    rl_result r;
    int got = 0;
    while ((r = rl_stream_next(s, -1, NULL, NULL, NULL)) == RL_OK && got < 10)
        got++;
    assert_int_equal(r, RL_ERR_CANCELLED);
    assert_string_equal(rl_stream_error(s), "context canceled");
    rl_stream_close(s);
    /* sticky: nothing is dialled */
    assert_int_equal(rl_stream_raw_ledgers(s, rl_single_ledger_range(1), NULL, NULL), RL_ERR_CANCELLED);
    assert_int_equal(rl_stream_open(s, rl_single_ledger_range(1)), RL_ERR_CANCELLED);

    rl_stream_reset(s);
    assert_string_equal(rl_stream_error(s), "");
    assert_int_equal(rl_stream_raw_ledgers(s, rl_single_ledger_range(1), NULL, NULL), RL_OK);

    /* reset also ends an open session, politely */
    assert_int_equal(rl_stream_open(s, rl_unbounded_range(1)), RL_OK);
    assert_int_equal(rl_stream_next(s, -1, NULL, NULL, NULL), RL_OK);
    rl_stream_reset(s);
    assert_int_equal(rl_stream_next(s, 0, NULL, NULL, NULL), RL_ERR_INVALID);
    rl_stream_free(s);
    assert_true(ss_wait(ss, SERVER_WAIT_MS));
    assert_int_equal(ss_connections(ss), 3);
    expect_client_close(ss, 1, 1000, "range complete");
    expect_client_close(ss, 2, 1000, "consumer done");
    ss_stop(ss);
    event_destroy(&opened);
}

/* ==== GET /healthz (healthz.c) ================================================================== */

static void expect_hz(const char *answer, bool eof, rli_hz_status want, int status, uint32_t o, uint32_t l,
                      const char *why)
{
    size_t n = strlen(answer);
    char *copy = malloc(n ? n : 1); /* exact size: ASan sees a read past it */
    memcpy(copy, answer, n);
    int st = 0;
    uint32_t oldest = 7, latest = 7;
    const char *w = NULL;
    rli_hz_status got = rli_hz_parse(copy, n, eof, &st, &oldest, &latest, &w);
    free(copy);
    if (got != want)
        fail_msg("%s: status %d (%s), want %d", answer, got, w ? w : "", want);
    if (want == RLI_HZ_DONE) {
        assert_int_equal(st, status);
        if (status == 200) {
            assert_int_equal(oldest, o);
            assert_int_equal(latest, l);
        }
    }
    if (why)
        assert_string_equal(w, why);
}

static void test_healthz_parse(void **state)
{
    (void)state;
    char *t = rli_hz_target("/stream");
    assert_string_equal(t, "/healthz");
    free(t);
    t = rli_hz_target("/core/stream");
    assert_string_equal(t, "/core/healthz");
    free(t);
    t = rli_hz_target("/core/");
    assert_string_equal(t, "/core/healthz");
    free(t);
    t = rli_hz_target("");
    assert_string_equal(t, "/healthz");
    free(t);
    char req[256];
    rli_hz_request(req, sizeof req, "/healthz", "box:8462", "tok");
    assert_string_equal(req, "GET /healthz HTTP/1.1\r\nHost: box:8462\r\nAccept: application/json\r\n"
                             "Authorization: Bearer tok\r\nConnection: close\r\n\r\n");
    assert_int_equal(rli_hz_request(NULL, 0, "/healthz", "b", NULL), strlen("GET /healthz HTTP/1.1\r\nHost: b\r\n"
                                                                            "Accept: application/json\r\nConnection: close\r\n\r\n"));

    const char *body = "{\"oldest\":16,\"latest\":4294967294,\"subscribers\":1}\n";
    char ok[512];
    snprintf(ok, sizeof ok, "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\ncontent-length: %zu\r\n\r\n%s",
             strlen(body), body);
    expect_hz(ok, false, RLI_HZ_DONE, 200, 16, 4294967294u, NULL);
    /* every prefix is "more", or a failure once the stream has ended */
    for (size_t k = 0; k < strlen(ok); k++) {
        char pre[512];
        memcpy(pre, ok, k);
        pre[k] = 0;
        expect_hz(pre, false, RLI_HZ_MORE, 0, 0, 0, NULL);
        expect_hz(pre, true, RLI_HZ_FAILED, 0, 0, 0, NULL);
    }
    /* without a length the body runs to the end of the stream */
    expect_hz("HTTP/1.1 200 OK\r\n\r\n{\"latest\": 9, \"oldest\" : 3}", false, RLI_HZ_MORE, 0, 0, 0, NULL);
    expect_hz("HTTP/1.1 200 OK\r\n\r\n{\"latest\": 9, \"oldest\" : 3}", true, RLI_HZ_DONE, 200, 3, 9, NULL);
    expect_hz("HTTP/1.1 200 OK\r\n\r\n{\"oldest\":0,\"latest\":0}", true, RLI_HZ_DONE, 200, 0, 0, NULL);
    /* another status: the body does not matter */
    expect_hz("HTTP/1.1 401 Unauthorized\r\nContent-Length: 100\r\n\r\n", false, RLI_HZ_DONE, 401, 0, 0, NULL);
    /* what is wrong is said */
    expect_hz("HTTP/1.1 200 OK\r\n\r\n{\"oldest\":3}", true, RLI_HZ_FAILED, 0, 0, 0,
              "the answer has no \"oldest\" and \"latest\" numbers");
    expect_hz("HTTP/1.1 200 OK\r\n\r\n{\"oldest\":3,\"latest\":4294967296}", true, RLI_HZ_FAILED, 0, 0, 0, NULL);
    expect_hz("HTTP/1.1 200 OK\r\n\r\n{\"oldest\":-3,\"latest\":4}", true, RLI_HZ_FAILED, 0, 0, 0, NULL);
    expect_hz("HTTP/1.1 200 OK\r\nContent-Length: x\r\n\r\n", false, RLI_HZ_FAILED, 0, 0, 0,
              "the answer's Content-Length is unusable");
    expect_hz("HTTP/1.1 200 OK\r\nContent-Length: 1\r\nContent-Length: 2\r\n\r\n{}", false, RLI_HZ_FAILED, 0, 0, 0,
              "the answer's Content-Length is unusable");
    expect_hz("HTTP/1.1 200 OK\r\nContent-Length: 99999999999999999999\r\n\r\n", false, RLI_HZ_FAILED, 0, 0, 0,
              NULL);
    expect_hz("SSH-2.0-OpenSSH\r\n\r\n", true, RLI_HZ_FAILED, 0, 0, 0, "the answer is not HTTP");
    expect_hz("", true, RLI_HZ_FAILED, 0, 0, 0, "the server closed without answering");
    /* the numbers of the first "oldest" key with a colon count; a key inside a string value does not fool it
     * into reading past the body */
    expect_hz("HTTP/1.1 200 OK\r\nContent-Length: 10\r\n\r\n{\"oldest\":1}{\"latest\":2}", false, RLI_HZ_FAILED, 0, 0,
              0, NULL);
}

/* ==== resume (rl_options.resume_retries) ======================================================= */

static rl_options resuming(int64_t retries)
{
    rl_options o;
    rl_options_init(&o);
    o.resume_retries = retries;
    o.resume_backoff_ns = 5000000LL; /* 5 ms, at most 20 ms: the tests do not wait long */
    o.resume_backoff_max_ns = 20000000LL;
    return o;
}

static void expect_sequences(const collected *c, uint32_t from, int count)
{
    assert_int_equal(c->count, count);
    for (int i = 0; i < count && i < MAX_LEDGERS; i++)
        if (c->infos[i].sequence != from + (uint32_t)i)
            fail_msg("ledger %d is %u, want %u", i, c->infos[i].sequence, from + (uint32_t)i);
}

/* Cut mid-ledger, then a close 1011, then a truncated bounded range: each time the next
 * connection asks for the ledger expected next, and the caller sees every ledger once, in
 * order. */
static void test_resume_exactly_once(void **state)
{
    (void)state;
    uint8_t part[40] = {0};
    ss_server *ss = ss_start();
    ss_ledger(ss, 1, 10);
    ss_ledger(ss, 2, 10);
    ss_begin(ss, 3, 0);
    ss_send_partial(ss, part, sizeof part, 1000); /* ledger 3 is cut in the middle of a chunk */
    ss_drop(ss);
    ss_next_connection(ss);
    ss_ledger(ss, 3, 10);
    ss_send_close(ss, 1011, "source failed");
    ss_next_connection(ss);
    ss_ledger(ss, 4, 10);
    ss_send_close(ss, 1001, "source ended before range complete");
    ss_next_connection(ss);
    ss_ledger(ss, 5, 10);
    ss_ledger(ss, 6, 10);
    rl_options o = resuming(3);
    collected c = {0};
    drain_url(ss_url(ss), &o, rl_bounded_range(1, 6), &c);
    expect(&c, RL_OK, 6);
    expect_sequences(&c, 1, 6);
    assert_int_equal(rl_stream_reconnects(c.s), 3);
    drain_done(ss, &c);
    assert_int_equal(ss_connections(ss), 4);
    assert_string_equal(ss_target(ss, 0), "/stream?end=6&start=1");
    assert_string_equal(ss_target(ss, 1), "/stream?end=6&start=3");
    assert_string_equal(ss_target(ss, 2), "/stream?end=6&start=4");
    assert_string_equal(ss_target(ss, 3), "/stream?end=6&start=5");
    expect_client_close(ss, 3, 1000, "range complete");
    ss_stop(ss);
    collected_free(&c);
}

/* An unbounded stream: a restart's 1001 is resumed (a tip subscription from the ledger after the
 * last one seen), the source's clean end (1000) ends it. */
static void test_resume_unbounded_going_away(void **state)
{
    (void)state;
    ss_server *ss = ss_start();
    ss_ledger(ss, 40, 10);
    ss_send_close(ss, 1001, "server shutting down");
    ss_next_connection(ss);
    ss_ledger(ss, 41, 10);
    ss_send_close(ss, 1000, "source ended");
    rl_options o = resuming(-1);
    collected c = {0};
    drain_url(ss_url(ss), &o, rl_unbounded_range(0), &c);
    expect(&c, RL_OK, 2);
    expect_sequences(&c, 40, 2);
    assert_int_equal(rl_stream_reconnects(c.s), 1);
    drain_done(ss, &c);
    assert_string_equal(ss_target(ss, 1), "/stream?start=41");
    ss_stop(ss);
    collected_free(&c);
}

/* Never retried: a 4001 (returned at once, with the ledger expected next), a gap, a refused token. */
static void test_resume_does_not_retry(void **state)
{
    (void)state;
    rl_options o = resuming(-1);
    ss_server *ss = ss_start();
    ss_ledger(ss, 5, 10);
    ss_send_close(ss, 4001, "too far behind: oldest=16 latest=20");
    collected c = {0};
    drain_url(ss_url(ss), &o, rl_unbounded_range(5), &c);
    expect(&c, RL_ERR_TOO_FAR_BEHIND, 1);
    uint32_t req = 0, oldest = 0, latest = 0;
    assert_true(rl_stream_too_far_behind(c.s, &req, &oldest, &latest));
    assert_int_equal(req, 6);
    assert_int_equal(oldest, 16);
    assert_int_equal(latest, 20);
    assert_int_equal(rl_stream_reconnects(c.s), 0);
    drain_done(ss, &c);
    assert_int_equal(ss_connections(ss), 1);
    ss_stop(ss);

    ss = ss_start();
    ss_ledger(ss, 5, 10);
    ss_ledger(ss, 7, 10);
    collected_reset(&c);
    drain_url(ss_url(ss), &o, rl_unbounded_range(5), &c);
    expect(&c, RL_ERR_GAP, 1);
    drain_done(ss, &c);
    assert_int_equal(ss_connections(ss), 1);
    ss_stop(ss);

    ss = ss_start();
    ss_reject_handshake(ss, 401);
    collected_reset(&c);
    drain_url(ss_url(ss), &o, rl_unbounded_range(5), &c);
    expect(&c, RL_ERR_DIAL, 0);
    drain_done(ss, &c);
    assert_int_equal(ss_connections(ss), 1);
    ss_stop(ss);
    collected_free(&c);
}

/* The budget: attempts in a row without a ledger. Two retries allowed, three connections cut
 * before a ledger: the last failure is returned. A ledger in between makes the budget whole. */
static void test_resume_budget(void **state)
{
    (void)state;
    ss_server *ss = ss_start();
    ss_drop(ss);
    ss_next_connection(ss);
    ss_drop(ss);
    ss_next_connection(ss);
    ss_send_close(ss, 1011, "source failed");
    rl_options o = resuming(2);
    collected c = {0};
    drain_url(ss_url(ss), &o, rl_unbounded_range(1), &c);
    expect(&c, RL_ERR_READ, 0);
    assert_string_equal(c.err, "remoteledger: read: failed to get reader: received close frame: status = "
                               "StatusInternalError and reason = \"source failed\"");
    assert_int_equal(rl_stream_reconnects(c.s), 2);
    drain_done(ss, &c);
    assert_int_equal(ss_connections(ss), 3);
    ss_stop(ss);

    ss = ss_start();
    ss_drop(ss);
    ss_next_connection(ss);
    ss_ledger(ss, 1, 10);
    ss_drop(ss);
    ss_next_connection(ss);
    ss_drop(ss);
    ss_next_connection(ss);
    ss_ledger(ss, 2, 10);
    ss_send_close(ss, 1000, "");
    o = resuming(2);
    collected_reset(&c);
    drain_url(ss_url(ss), &o, rl_bounded_range(1, 2), &c);
    expect(&c, RL_OK, 2);
    drain_done(ss, &c);
    assert_int_equal(ss_connections(ss), 4);
    ss_stop(ss);

    /* nothing listening at all: the dial is retried, and its failure returned in the end */
    o = resuming(2);
    collected_reset(&c);
    drain_url("ws://127.0.0.1:1", &o, rl_unbounded_range(1), &c);
    expect(&c, RL_ERR_DIAL, 0);
    assert_contains(c.err, "connection refused");
    rl_stream_free(c.s);
    collected_free(&c);
}

/* The pull API during a backoff: rl_stream_next's own timeout returns RL_AGAIN, and the attempt
 * happens on a later call; a cancel cuts the backoff short. */
static void test_resume_backoff_and_next_timeout(void **state)
{
    (void)state;
    ss_server *ss = ss_start();
    ss_ledger(ss, 1, 10);
    ss_drop(ss);
    ss_next_connection(ss);
    ss_ledger(ss, 2, 10);
    ss_drop(ss);
    rl_options o = resuming(-1);
    o.resume_backoff_ns = 2000000000LL; /* each wait: 1 to 2 s, well past the bound below */
    o.resume_backoff_max_ns = 2000000000LL;
    rl_stream *s;
    assert_int_equal(rl_stream_new(&s, ss_url(ss), &o), RL_OK);
    assert_int_equal(rl_stream_open(s, rl_unbounded_range(1)), RL_OK);
    rl_ledger_info info;
    assert_int_equal(rl_stream_next(s, -1, NULL, NULL, &info), RL_OK);
    assert_int_equal(rl_stream_next(s, 50000000LL, NULL, NULL, &info), RL_AGAIN); /* cut, then backing off */
    assert_int_equal(rl_stream_next(s, -1, NULL, NULL, &info), RL_OK);
    assert_int_equal(info.sequence, 2);
    assert_int_equal(rl_stream_reconnects(s), 1);
    /* the second cut: a cancel from another thread ends the backoff at once */
    assert_int_equal(rl_stream_next(s, 50000000LL, NULL, NULL, &info), RL_AGAIN);
    rl_stream_cancel(s);
    int64_t t0 = mono_ms();
    assert_int_equal(rl_stream_next(s, -1, NULL, NULL, &info), RL_ERR_CANCELLED);
    assert_true(mono_ms() - t0 < 700);
    rl_stream_free(s);
    assert_true(ss_wait(ss, SERVER_WAIT_MS));
    assert_int_equal(ss_connections(ss), 2);
    ss_stop(ss);
}

/* 146 */
static void test_rejects_ceiling_range_before_dialing(void **state)
{
    (void)state;
    collected c = {0};
    drain_url("ws://127.0.0.1:1", NULL, rl_bounded_range(5, MAXU32), &c);
    expect(&c, RL_ERR_INVALID, 0);
    assert_null(strstr(c.err, "dial"));
    assert_string_equal(c.err,
                        "remoteledger: range [5,4294967295] reaches ledger 4294967295, the last representable sequence");
    rl_stream_free(c.s);
}

/* 148 */
static void test_expands_compressed_chunks(void **state)
{
    (void)state;
    const size_t zlen = 100000, rlen = 40000;
    uint8_t *zsrc = malloc(zlen), *rsrc = malloc(rlen), *both = malloc(zlen + rlen);
    cs_synthetic_fill(zsrc, zlen, 3, true);
    cs_synthetic_fill(rsrc, rlen, 4, false);
    memcpy(both, zsrc, zlen);
    memcpy(both + zlen, rsrc, rlen);
    size_t cb = ZSTD_compressBound(zlen);
    uint8_t *z = malloc(cb);
    size_t zn = ZSTD_compress(z, cb, zsrc, zlen, 1);
    assert_false(ZSTD_isError(zn));

    ss_server *ss = ss_start();
    ss_begin(ss, 1, 0);
    ss_chunk(ss, 1, 0, CS_CODEC_ZSTD, z, zn);
    ss_chunk(ss, 1, 1, CS_CODEC_RAW, rsrc, rlen);
    ss_end(ss, 1, 2, zlen + rlen, 0, XXH64(both, zlen + rlen, 0));
    collected c = {0};
    drain_expect(ss, NULL, rl_single_ledger_range(1), &c, RL_OK, 1, NULL);
    assert_int_equal(c.sizes[0], zlen + rlen);
    assert_memory_equal(c.copies[0], both, zlen + rlen);
    assert_int_equal(c.infos[0].chunks, 2);
    ss_stop(ss);
    collected_free(&c);
    free(zsrc);
    free(rsrc);
    free(both);
    free(z);
}

/* 149 */
static void test_rejects_corrupt_compressed_chunk(void **state)
{
    (void)state;
    ss_server *ss = ss_start();
    ss_begin(ss, 1, 0);
    ss_chunk(ss, 1, 0, CS_CODEC_ZSTD, "not a zstd frame", 16);
    collected c = {0};
    drain_expect(ss, NULL, rl_unbounded_range(1), &c, RL_ERR_PROTOCOL, 0, NULL);
    assert_contains(c.err, "remoteledger: protocol violation: ledger 1 chunk 0: decompress: ");
    ss_stop(ss);
}

/* 150: cancelled while blocked in the middle of a 2 MiB message, from another thread. */
static void test_cancel_while_blocked_mid_message(void **state)
{
    (void)state;
    const size_t half = 1u << 20;
    uint8_t *msg = malloc(half);
    cs_wire_put_chunk_header(msg, 1, 0, CS_CODEC_RAW);
    memset(msg + CS_WIRE_CHUNK_HEADER_LEN, 9, half - CS_WIRE_CHUNK_HEADER_LEN);
    ss_server *ss = ss_start();
    rl_stream *s;
    assert_int_equal(rl_stream_new(&s, ss_url(ss), NULL), RL_OK);
    ss_begin(ss, 1, 0);
    ss_send_partial(ss, msg, half, 2 * half);
    ss_call(ss, cancel_stream, s);
    ss_stall(ss);
    collected c = {0};
    int64_t t0 = mono_ms();
    rl_result r = rl_stream_raw_ledgers(s, rl_unbounded_range(1), on_ledger, &c);
    if (r != RL_ERR_CANCELLED)
        fail_msg("%s: %s", rl_result_name(r), rl_stream_error(s));
    assert_true(mono_ms() - t0 < 5000);
    assert_string_equal(rl_stream_error(s), "context canceled");
    assert_int_equal(c.count, 0);
    rl_stream_free(s);
    assert_true(ss_wait(ss, SERVER_WAIT_MS));
    assert_int_equal(ss_client_close(ss, 0, NULL, 0), 0); /* dropped, no close frame */
    ss_stop(ss);
    free(msg);
}

/* Messages split into WebSocket fragments, and chunks bigger than the receive buffer, take the
 * incremental path of the assembler; the bytes must come out the same. */
static void test_fragmented_and_large_messages(void **state)
{
    (void)state;
    const size_t big = 3u << 20; /* bigger than lws's per-connection receive buffer */
    uint8_t *led = malloc(big + 1000);
    cs_synthetic_fill(led, big + 1000, 77, false);
    size_t cb = ZSTD_compressBound(big);
    uint8_t *z = malloc(cb);
    size_t zn = ZSTD_compress(z, cb, led, big, 1);
    assert_false(ZSTD_isError(zn));
    uint8_t *m = malloc(CS_WIRE_CHUNK_HEADER_LEN + (cb > big + 1000 ? cb : big + 1000));

    ss_server *ss = ss_start();
    /* ledger 1: a raw 3 MiB chunk, then a 1000-byte chunk sent as 3-byte fragments */
    ss_begin(ss, 1, 0);
    ss_chunk(ss, 1, 0, CS_CODEC_RAW, led, big);
    size_t ml = cs_wire_append_chunk(m, 1, 1, CS_CODEC_RAW, led + big, 1000);
    ss_send_fragmented(ss, m, ml, 3);
    ss_end(ss, 1, 2, big + 1000, 0, XXH64(led, big + 1000, 0));
    /* ledger 2: the 3 MiB as one zstd chunk in 64 KiB fragments, BEGIN and END fragmented too */
    uint8_t b[CS_WIRE_BEGIN_LEN], e[CS_WIRE_END_LEN];
    ss_send_fragmented(ss, b, cs_wire_put_begin(b, 2, 5), 5);
    ml = cs_wire_append_chunk(m, 2, 0, CS_CODEC_ZSTD, z, zn);
    ss_send_fragmented(ss, m, ml, 65536);
    ss_send_fragmented(ss, e, cs_wire_put_end(e, 2, 1, big, 6, XXH64(led, big, 0)), 1);
    collected c = {0};
    drain_expect(ss, NULL, rl_bounded_range(1, 2), &c, RL_OK, 2, NULL);
    assert_int_equal(c.sizes[0], big + 1000);
    assert_memory_equal(c.copies[0], led, big + 1000);
    assert_int_equal(c.sizes[1], big);
    assert_memory_equal(c.copies[1], led, big);
    assert_int_equal(c.infos[1].emit_start_unix_nano, 5);
    assert_int_equal(c.infos[1].emit_end_unix_nano, 6);
    ss_stop(ss);
    collected_free(&c);
    free(led);
    free(z);
    free(m);
}

/* A stream is reusable: each call dials its own connection and reports its own outcome. */
static void test_stream_is_reusable(void **state)
{
    (void)state;
    ss_server *ss = ss_start();
    ss_send_close(ss, 4001, "too far behind: oldest=50 latest=60");
    ss_next_connection(ss);
    ss_ledger(ss, 50, 8);
    ss_ledger(ss, 51, 8);
    rl_stream *s;
    char url[128];
    snprintf(url, sizeof url, "%s/stream?token=abc&start=1", ss_url(ss));
    assert_int_equal(rl_stream_new(&s, url, NULL), RL_OK);
    assert_string_equal(rl_stream_endpoint(s), "");
    collected c = {0};
    assert_int_equal(rl_stream_raw_ledgers(s, rl_unbounded_range(10), on_ledger, &c), RL_ERR_TOO_FAR_BEHIND);
    uint32_t req, oldest, latest;
    assert_true(rl_stream_too_far_behind(s, &req, &oldest, &latest));
    assert_int_equal(oldest, 50);
    char want[256];
    snprintf(want, sizeof want, "%s/stream?start=10&token=abc", ss_url(ss));
    assert_string_equal(rl_stream_endpoint(s), want);
    assert_int_equal(rl_stream_raw_ledgers(s, rl_bounded_range(50, 51), on_ledger, &c), RL_OK);
    assert_string_equal(rl_stream_error(s), "");
    assert_false(rl_stream_too_far_behind(s, &req, &oldest, &latest));
    assert_int_equal(c.count, 2);
    snprintf(want, sizeof want, "%s/stream?end=51&start=50&token=abc", ss_url(ss));
    assert_string_equal(rl_stream_endpoint(s), want);
    rl_stream_free(s);
    assert_true(ss_wait(ss, SERVER_WAIT_MS));
    assert_int_equal(ss_connections(ss), 2);
    assert_string_equal(ss_target(ss, 1), "/stream?end=51&start=50&token=abc");
    ss_stop(ss);
    collected_free(&c);
}

static void test_names_and_defaults(void **state)
{
    (void)state;
    assert_string_equal(rl_result_name(RL_OK), "RL_OK");
    assert_string_equal(rl_result_name(RL_ERR_GAP), "RL_ERR_GAP");
    assert_string_equal(rl_result_name(RL_ERR_NOMEM), "RL_ERR_NOMEM");
    assert_string_equal(rl_result_name((rl_result)99), "RL_ERR_UNKNOWN");
    /* rl_options_init is the zero struct with its size: zero means "the default" everywhere. */
    rl_options o;
    memset(&o, 0xAB, sizeof o);
    rl_options_init(&o);
    assert_int_equal(o.struct_size, sizeof o);
    assert_int_equal(o.max_message_size, 0);
    assert_int_equal(o.max_chunk_size, 0);
    assert_int_equal(o.dial_timeout_ns, 0);
    assert_null(o.observer);
    assert_null(o.bearer_token);
    assert_false(o.tls_insecure_skip_verify);
    assert_int_equal(RL_DEFAULT_MAX_MESSAGE_SIZE, 268435456);
    assert_int_equal(RL_DEFAULT_MAX_CHUNK_SIZE, 8388608);
    assert_int_equal(RL_DEFAULT_DIAL_TIMEOUT_NS, 30000000000LL);
    rl_range r = rl_bounded_range(3, 4);
    assert_true(r.bounded);
    r = rl_unbounded_range(3);
    assert_false(r.bounded);
    r = rl_single_ledger_range(8);
    assert_true(r.bounded && r.from == 8 && r.to == 8);
    rl_stream_free(NULL);
}

/* ==== WebSocket framing (wsframe.c) ============================================================ */

typedef struct tbuf {
    char *p;
    size_t len, cap;
} tbuf;

static void tb_add(tbuf *t, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

static void tb_add(tbuf *t, const char *fmt, ...)
{
    char line[512];
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(line, sizeof line, fmt, ap);
    va_end(ap);
    assert_true(n >= 0 && (size_t)n < sizeof line);
    if (t->len + (size_t)n + 1 > t->cap) {
        t->cap = (t->len + (size_t)n + 1) * 2;
        t->p = realloc(t->p, t->cap);
        assert_non_null(t->p);
    }
    memcpy(t->p + t->len, line, (size_t)n + 1);
    t->len += (size_t)n;
}

/* A server frame: first byte b0, payload p[0..n) declared as `declared` bytes with the given
 * length encoding (0: minimal, 2: 16-bit, 8: 64-bit). */
static size_t srv_frame(uint8_t *out, uint8_t b0, const void *p, size_t n, int enc)
{
    size_t h = 0;
    out[h++] = b0;
    if (enc == 0 && n < 126) {
        out[h++] = (uint8_t)n;
    } else if (enc != 8 && n <= 0xFFFF) {
        out[h++] = 126;
        out[h++] = (uint8_t)(n >> 8);
        out[h++] = (uint8_t)n;
    } else {
        out[h++] = 127;
        for (int i = 7; i >= 0; i--)
            out[h++] = (uint8_t)((uint64_t)n >> (8 * i));
    }
    if (n)
        memcpy(out + h, p, n);
    return h + n;
}

static uint64_t split_rng(uint64_t *x)
{
    *x ^= *x << 13;
    *x ^= *x >> 7;
    *x ^= *x << 17;
    return *x;
}

/* The next piece of input: mode 0 all of it, 1 one byte, otherwise random sizes (seeded by mode),
 * mostly small so headers straddle pieces, sometimes large. */
static size_t next_piece(int mode, uint64_t *rng, size_t left)
{
    size_t k;
    if (mode == 0)
        k = left;
    else if (mode == 1)
        k = 1;
    else if (split_rng(rng) % 8 == 0)
        k = 1 + split_rng(rng) % 20000;
    else
        k = 1 + split_rng(rng) % 17;
    return k < left ? k : left;
}

/* Parses the stream in the pieces `mode` chooses and writes what came out, in a form that does not
 * depend on the slicing: frame headers, whole messages (length and hash), control frames, the
 * error. Checks the event invariants on the way. Returns how many data events there were. */
static int ws_transcript(const uint8_t *in, size_t n, int mode, tbuf *t)
{
    rli_ws_parser p;
    rli_ws_parser_init(&p);
    uint64_t rng = 0x9E3779B97F4A7C15ull * (uint64_t)(mode + 1);
    uint8_t *msg = NULL;
    size_t msg_len = 0, msg_cap = 0;
    uint64_t frame_left = 0;
    bool in_frame = false, in_msg = false, fresh = false;
    int data_events = 0;
    size_t off = 0;
    bool failed = false;
    while (!failed) {
        size_t k = next_piece(mode, &rng, n - off);
        const uint8_t *piece = in + off;
        size_t used = 0;
        for (;;) {
            rli_ws_event ev;
            size_t u = rli_ws_parse(&p, piece + used, k - used, &ev);
            assert_true(u <= k - used);
            used += u;
            if (ev.kind == RLI_WS_EV_NONE) {
                assert_int_equal(used, k);
                break;
            }
            if (ev.kind == RLI_WS_EV_FRAME) {
                assert_false(in_frame);
                assert_int_equal(ev.first, !in_msg);
                tb_add(t, "frame op=%u first=%d fin=%d len=%llu\n", ev.opcode, ev.first, ev.fin,
                       (unsigned long long)ev.frame_len);
                in_frame = true;
                frame_left = ev.frame_len;
                if (ev.first) {
                    in_msg = true;
                    fresh = true;
                    msg_len = 0;
                }
                assert_true(rli_ws_parser_in_message(&p));
            } else if (ev.kind == RLI_WS_EV_DATA) {
                data_events++;
                assert_true(in_frame);
                assert_int_equal(ev.msg_start, fresh);
                fresh = false;
                assert_true(ev.len <= frame_left);
                if (ev.len) {
                    assert_true(ev.data >= piece && ev.data + ev.len <= piece + k); /* in place */
                    if (msg_len + ev.len > msg_cap) {
                        msg_cap = (msg_len + ev.len) * 2;
                        msg = realloc(msg, msg_cap);
                        assert_non_null(msg);
                    }
                    memcpy(msg + msg_len, ev.data, ev.len);
                    msg_len += ev.len;
                }
                frame_left -= ev.len;
                assert_int_equal(ev.frame_end, frame_left == 0);
                if (ev.frame_end)
                    in_frame = false;
                if (ev.msg_end) {
                    assert_true(ev.frame_end);
                    tb_add(t, "message len=%zu xxh=%016llx\n", msg_len,
                           (unsigned long long)XXH64(msg ? msg : (const uint8_t *)"", msg_len, 0));
                    in_msg = false;
                    assert_false(rli_ws_parser_in_message(&p));
                }
            } else if (ev.kind == RLI_WS_EV_CONTROL) {
                assert_false(in_frame);
                assert_true(ev.len <= RLI_WS_MAX_CONTROL);
                char hex[2 * RLI_WS_MAX_CONTROL + 1];
                for (size_t i = 0; i < ev.len; i++)
                    snprintf(hex + 2 * i, 3, "%02x", ev.data[i]);
                hex[2 * ev.len] = '\0';
                tb_add(t, "control op=%u len=%zu %s\n", ev.opcode, ev.len, hex);
            } else {
                assert_int_equal(ev.kind, RLI_WS_EV_ERROR);
                tb_add(t, "error boundary=%d %s\n", ev.at_boundary, ev.err);
                /* the parser stays failed */
                rli_ws_event again;
                assert_int_equal(rli_ws_parse(&p, piece, k, &again), 0);
                assert_int_equal(again.kind, RLI_WS_EV_ERROR);
                assert_string_equal(again.err, ev.err);
                assert_int_equal(again.at_boundary, ev.at_boundary);
                failed = true;
                break;
            }
        }
        off += k;
        if (off == n)
            break;
    }
    if (!failed && in_msg)
        tb_add(t, "open message\n");
    free(msg);
    return data_events;
}

/* Every slicing gives the transcript of the whole-buffer parse. */
static void expect_split_invariant(const uint8_t *in, size_t n, const char *want)
{
    tbuf whole = {0};
    ws_transcript(in, n, 0, &whole);
    if (want)
        assert_string_equal(whole.p ? whole.p : "", want);
    for (int mode = 1; mode < 40; mode++) {
        tbuf t = {0};
        ws_transcript(in, n, mode, &t);
        if (strcmp(t.p ? t.p : "", whole.p ? whole.p : ""))
            fail_msg("split mode %d:\n%s\nwhole:\n%s", mode, t.p ? t.p : "", whole.p ? whole.p : "");
        free(t.p);
    }
    free(whole.p);
}

static void test_wsframe_splits(void **state)
{
    (void)state;
    const size_t cap = 1u << 20;
    uint8_t *s = malloc(cap), *pay = malloc(80000);
    cs_synthetic_fill(pay, 80000, 5, false);
    size_t n = 0;
    n += srv_frame(s + n, 0x82, "hello", 5, 0);        /* 7-bit length */
    n += srv_frame(s + n, 0x82, pay, 300, 0);          /* 16-bit length */
    n += srv_frame(s + n, 0x82, pay, 70000, 0);        /* 64-bit length */
    n += srv_frame(s + n, 0x89, "p1", 2, 0);           /* ping */
    n += srv_frame(s + n, 0x02, pay, 1000, 0);         /* fragmented: first frame */
    n += srv_frame(s + n, 0x89, "mid", 3, 0);          /* ping between fragments */
    n += srv_frame(s + n, 0x00, NULL, 0, 0);           /* empty continuation */
    n += srv_frame(s + n, 0x8A, "x", 1, 0);            /* pong */
    n += srv_frame(s + n, 0x80, pay + 1000, 2000, 0);  /* final continuation */
    n += srv_frame(s + n, 0x82, NULL, 0, 0);           /* empty message */
    n += srv_frame(s + n, 0x02, NULL, 0, 0);           /* empty first frame... */
    n += srv_frame(s + n, 0x80, "abc", 3, 0);          /* ...then the payload */
    n += srv_frame(s + n, 0x81, "txt", 3, 0);          /* text: the caller's business */
    n += srv_frame(s + n, 0x82, pay, 10, 2);           /* non-minimal lengths are accepted */
    n += srv_frame(s + n, 0x82, pay, 10, 8);
    n += srv_frame(s + n, 0x89, pay, 125, 0);          /* the largest control frame */
    n += srv_frame(s + n, 0x89, NULL, 0, 0);           /* an empty one */
    n += srv_frame(s + n, 0x88, "\x03\xe8" "bye", 5, 0); /* close */
    n += srv_frame(s + n, 0x02, "tail", 4, 0);         /* a message left open */
    char want[4096];
    snprintf(want, sizeof want,
             "frame op=2 first=1 fin=1 len=5\nmessage len=5 xxh=%016llx\n"
             "frame op=2 first=1 fin=1 len=300\nmessage len=300 xxh=%016llx\n"
             "frame op=2 first=1 fin=1 len=70000\nmessage len=70000 xxh=%016llx\n"
             "control op=9 len=2 7031\n"
             "frame op=2 first=1 fin=0 len=1000\n"
             "control op=9 len=3 6d6964\n"
             "frame op=2 first=0 fin=0 len=0\n"
             "control op=10 len=1 78\n"
             "frame op=2 first=0 fin=1 len=2000\nmessage len=3000 xxh=%016llx\n"
             "frame op=2 first=1 fin=1 len=0\nmessage len=0 xxh=%016llx\n"
             "frame op=2 first=1 fin=0 len=0\nframe op=2 first=0 fin=1 len=3\nmessage len=3 xxh=%016llx\n"
             "frame op=1 first=1 fin=1 len=3\nmessage len=3 xxh=%016llx\n"
             "frame op=2 first=1 fin=1 len=10\nmessage len=10 xxh=%016llx\n"
             "frame op=2 first=1 fin=1 len=10\nmessage len=10 xxh=%016llx\n",
             (unsigned long long)XXH64("hello", 5, 0), (unsigned long long)XXH64(pay, 300, 0),
             (unsigned long long)XXH64(pay, 70000, 0), (unsigned long long)XXH64(pay, 3000, 0),
             (unsigned long long)XXH64("", 0, 0), (unsigned long long)XXH64("abc", 3, 0),
             (unsigned long long)XXH64("txt", 3, 0), (unsigned long long)XXH64(pay, 10, 0),
             (unsigned long long)XXH64(pay, 10, 0));
    size_t wl = strlen(want);
    snprintf(want + wl, sizeof want - wl, "control op=9 len=125 ");
    wl = strlen(want);
    for (int i = 0; i < 125; i++)
        wl += (size_t)snprintf(want + wl, sizeof want - wl, "%02x", pay[i]);
    snprintf(want + wl, sizeof want - wl,
             "\ncontrol op=9 len=0 \ncontrol op=8 len=5 03e8627965\n"
             "frame op=2 first=1 fin=0 len=4\nopen message\n");
    expect_split_invariant(s, n, want);

    /* Fed whole, each unfragmented message is one event pointing into the input. */
    uint8_t one[16];
    size_t ol = srv_frame(one, 0x82, "hello", 5, 0);
    rli_ws_parser p;
    rli_ws_parser_init(&p);
    rli_ws_event ev;
    assert_int_equal(rli_ws_parse(&p, one, ol, &ev), 2);
    assert_int_equal(ev.kind, RLI_WS_EV_FRAME);
    assert_int_equal(rli_ws_parse(&p, one + 2, ol - 2, &ev), 5);
    assert_int_equal(ev.kind, RLI_WS_EV_DATA);
    assert_true(ev.msg_start && ev.frame_end && ev.msg_end);
    assert_ptr_equal(ev.data, one + 2);
    assert_int_equal(rli_ws_parse(&p, one + ol, 0, &ev), 0);
    assert_int_equal(ev.kind, RLI_WS_EV_NONE);
    assert_false(rli_ws_parser_in_message(&p));

    /* A large stream of chunk-sized frames: one data event per input piece at most. */
    n = 0;
    for (int i = 0; i < 12; i++)
        n += srv_frame(s + n, 0x82, pay, 65536 + (size_t)i, 0);
    tbuf t = {0};
    int events = ws_transcript(s, n, 0, &t);
    assert_int_equal(events, 12);
    free(t.p);
    expect_split_invariant(s, n, NULL);
    free(s);
    free(pay);
}

static void test_wsframe_violations(void **state)
{
    (void)state;
    static const struct {
        const char *name;
        uint8_t bytes[16];
        size_t n;
        bool boundary;
        const char *err;
    } cases[] = {
        {"rsv1", {0xC2, 0x00}, 2, true, "received header with unexpected rsv bits set: true:false:false"},
        {"rsv2", {0xA2, 0x00}, 2, true, "received header with unexpected rsv bits set: false:true:false"},
        {"rsv3", {0x92, 0x00}, 2, true, "received header with unexpected rsv bits set: false:false:true"},
        {"masked", {0x82, 0x81, 1, 2, 3, 4, 'x' ^ 1}, 7, true, "received masked frame from server"},
        {"opcode 3", {0x83, 0x00}, 2, true, "received unknown opcode opcode(3)"},
        {"opcode 11", {0x8B, 0x00}, 2, true, "received unknown opcode opcode(11)"},
        {"long ping", {0x89, 126, 0x00, 126}, 4, true,
         "failed to handle control frame opPing: received control frame payload with invalid length: 126"},
        {"long close", {0x88, 127, 0, 0, 0, 0, 0, 0, 0, 200}, 10, true,
         "failed to handle control frame opClose: received control frame payload with invalid length: 200"},
        {"fragmented ping", {0x09, 0x00}, 2, true,
         "failed to handle control frame opPing: received fragmented control frame"},
        {"fragmented pong", {0x0A, 0x01, 'x'}, 3, true,
         "failed to handle control frame opPong: received fragmented control frame"},
        {"stray continuation", {0x80, 0x01, 'x'}, 3, true,
         "received continuation frame without text or binary frame"},
        {"negative length", {0x82, 127, 0x80, 0, 0, 0, 0, 0, 0, 0}, 10, true,
         "failed to read frame header: received negative payload length: -9223372036854775808"},
    };
    /* Each violation at the start, after a whole message, and (where it can be) inside a
     * fragmented one. */
    static const uint8_t after_msg[] = {0x82, 0x01, 'z'};
    static const uint8_t in_msg[] = {0x02, 0x02, 'a', 'b'};
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        for (int where = 0; where < 3; where++) {
            uint8_t buf[64];
            size_t n = 0;
            if (where == 1) {
                memcpy(buf, after_msg, sizeof after_msg);
                n = sizeof after_msg;
            } else if (where == 2) {
                memcpy(buf, in_msg, sizeof in_msg);
                n = sizeof in_msg;
            }
            memcpy(buf + n, cases[i].bytes, cases[i].n);
            n += cases[i].n;
            memcpy(buf + n, "\x82\x01q", 3); /* never reached */
            n += 3;
            bool boundary = where == 2 ? false : cases[i].boundary;
            const char *err = cases[i].err;
            if (where == 2 && !strcmp(cases[i].name, "stray continuation"))
                continue; /* inside a message a continuation is fine */
            char want[512];
            const char *prefix = where == 0 ? ""
                                 : where == 1 ? "frame op=2 first=1 fin=1 len=1\nmessage len=1 xxh=%016llx\n"
                                              : "frame op=2 first=1 fin=0 len=2\n";
            char pre[256];
            snprintf(pre, sizeof pre, prefix, (unsigned long long)XXH64("z", 1, 0));
            snprintf(want, sizeof want, "%serror boundary=%d %s\n", pre, boundary, err);
            expect_split_invariant(buf, n, want);
        }
    }
    /* A new data message inside a fragmented one. */
    uint8_t b[] = {0x02, 0x01, 'a', 0x82, 0x01, 'b'};
    expect_split_invariant(b, sizeof b,
                           "frame op=2 first=1 fin=0 len=1\n"
                           "error boundary=0 received new data message without finishing the previous message\n");
    uint8_t t[] = {0x01, 0x01, 'a', 0x89, 0x00, 0x81, 0x01, 'b'};
    expect_split_invariant(t, sizeof t,
                           "frame op=1 first=1 fin=0 len=1\ncontrol op=9 len=0 \n"
                           "error boundary=0 received new data message without finishing the previous message\n");
}

static void test_wsframe_build(void **state)
{
    (void)state;
    static const size_t sizes[] = {0, 1, 125, 126, 65535, 65536, 70000};
    uint8_t *p = malloc(70000), *out = malloc(70000 + RLI_WS_MAX_HEADER);
    cs_synthetic_fill(p, 70000, 9, false);
    const uint8_t mask[4] = {0x11, 0x22, 0x33, 0x44};
    for (size_t i = 0; i < sizeof sizes / sizeof sizes[0]; i++) {
        size_t n = sizes[i];
        size_t fl = rli_ws_build_frame(out, RLI_WS_OP_CLOSE, p, n, mask);
        size_t h = n < 126 ? 2 : n <= 0xFFFF ? 4 : 10;
        assert_int_equal(fl, h + 4 + n);
        assert_int_equal(out[0], 0x88);
        assert_true(out[1] & 0x80); /* masked */
        uint64_t len = out[1] & 0x7F;
        if (len == 126)
            len = (uint64_t)out[2] << 8 | out[3];
        else if (len == 127) {
            len = 0;
            for (int k = 0; k < 8; k++)
                len = len << 8 | out[2 + k];
        }
        assert_int_equal(len, n);
        assert_memory_equal(out + h, mask, 4);
        for (size_t k = 0; k < n; k++)
            if ((uint8_t)(out[h + 4 + k] ^ mask[k & 3]) != p[k])
                fail_msg("size %zu: byte %zu not masked right", n, k);
    }
    /* masks are random */
    uint8_t a[4], b2[4], c[4];
    rli_random_bytes(a, 4);
    rli_random_bytes(b2, 4);
    rli_random_bytes(c, 4);
    assert_false(memcmp(a, b2, 4) == 0 && memcmp(b2, c, 4) == 0);
    free(p);
    free(out);
}

/* ==== the opening handshake (handshake.c) ====================================================== */

static void test_handshake_key_and_accept(void **state)
{
    (void)state;
    /* RFC 6455 sections 1.3 and 4.1 */
    char acc[RLI_HS_ACCEPT_LEN + 1];
    rli_hs_accept("dGhlIHNhbXBsZSBub25jZQ==", acc);
    assert_string_equal(acc, "s3pPLMBiTxaQ9kYGzzhZRbK+xOo=");
    const uint8_t nonce[16] = {1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16};
    char key[RLI_HS_KEY_LEN + 1];
    rli_hs_key_encode(nonce, key);
    assert_string_equal(key, "AQIDBAUGBwgJCgsMDQ4PEA==");
    rli_hs_key_encode((const uint8_t *)"the sample nonce", key);
    assert_string_equal(key, "dGhlIHNhbXBsZSBub25jZQ==");
    char k1[RLI_HS_KEY_LEN + 1], k2[RLI_HS_KEY_LEN + 1];
    rli_hs_key_new(k1);
    rli_hs_key_new(k2);
    assert_int_equal(strlen(k1), 24);
    assert_string_not_equal(k1, k2);
    assert_string_equal(k1 + 22, "==");
}

static void test_handshake_request(void **state)
{
    (void)state;
    char buf[512];
    size_t n = rli_hs_request(buf, sizeof buf, "/stream?end=7&start=5", "box:8462", "dGhlIHNhbXBsZSBub25jZQ==", NULL);
    const char *want = "GET /stream?end=7&start=5 HTTP/1.1\r\n"
                       "Pragma: no-cache\r\n"
                       "Cache-Control: no-cache\r\n"
                       "Host: box:8462\r\n"
                       "Upgrade: websocket\r\n"
                       "Connection: Upgrade\r\n"
                       "Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\n"
                       "Sec-WebSocket-Version: 13\r\n"
                       "\r\n";
    assert_string_equal(buf, want);
    assert_int_equal(n, strlen(want));
    assert_int_equal(rli_hs_request(NULL, 0, "/stream?end=7&start=5", "box:8462", "dGhlIHNhbXBsZSBub25jZQ==", NULL),
                     strlen(want));
}

#define HS_KEY "dGhlIHNhbXBsZSBub25jZQ=="
#define HS_ACC "s3pPLMBiTxaQ9kYGzzhZRbK+xOo="

static void test_handshake_check(void **state)
{
    (void)state;
    static const struct {
        const char *head;
        const char *want; /* NULL: accepted */
    } cases[] = {
        {"HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
         "Sec-WebSocket-Accept: " HS_ACC "\r\n\r\n", NULL},
        {"HTTP/1.1 101 OK\r\nupgrade:WebSocket\r\nconnection: keep-alive, upgrade \r\n"
         "sec-websocket-accept:   " HS_ACC "  \r\nServer: x\r\n\r\n", NULL},
        {"HTTP/1.0 101 Switching Protocols\nUpgrade: websocket\nConnection: Upgrade\n"
         "Sec-WebSocket-Accept: " HS_ACC "\n\n", NULL},
        {"HTTP/1.1 101\r\nUpgrade: websocket\r\nConnection: Upgrade\r\nSec-WebSocket-Accept: " HS_ACC
         "\r\nSec-WebSocket-Extensions:\r\n\r\n", NULL},
        {"HTTP/1.1 400 Bad Request\r\nContent-Length: 0\r\n\r\n", "HS: ws upgrade response not 101"},
        {"HTTP/1.1 200 OK\r\nUpgrade: websocket\r\nConnection: Upgrade\r\nSec-WebSocket-Accept: " HS_ACC
         "\r\n\r\n", "HS: ws upgrade response not 101"},
        {"HTTP/1.1 401 Unauthorized\r\n\r\n", "server requires a token (401)"},
        {"HTTP/1.1 400 Bad Request\r\ncontent-length: 0\r\nx-corestream-tls: required\r\n\r\n",
         "the server speaks TLS on this port (is it wss://?)"},
        {"HTTP/1.1 400 Bad Request\r\nX-Corestream-TLS: optional\r\n\r\n", "HS: ws upgrade response not 101"},
        {"SSH-2.0-OpenSSH_9.2\r\n\r\n", "HS: URI missing"},
        {"HTTP/1.1 1O1 Switching\r\n\r\n", "HS: URI missing"},
        {"HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n\r\n",
         "HS: ACCEPT missing"},
        {"HTTP/1.1 101 Switching Protocols\r\nConnection: Upgrade\r\nSec-WebSocket-Accept: " HS_ACC "\r\n\r\n",
         "HS: UPGRADE missing"},
        {"HTTP/1.1 101 Switching Protocols\r\nUpgrade: h2c\r\nConnection: Upgrade\r\n"
         "Sec-WebSocket-Accept: " HS_ACC "\r\n\r\n", "HS: Upgrade to something other than websocket"},
        {"HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nSec-WebSocket-Accept: " HS_ACC "\r\n\r\n",
         "HS: UPGRADE malformed"},
        {"HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: keep-alive\r\n"
         "Sec-WebSocket-Accept: " HS_ACC "\r\n\r\n", "HS: UPGRADE malformed"},
        {"HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
         "Sec-WebSocket-Protocol: chat\r\nSec-WebSocket-Accept: " HS_ACC "\r\n\r\n", "HS: PROTOCOL malformed"},
        {"HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
         "Sec-WebSocket-Extensions: permessage-deflate\r\nSec-WebSocket-Accept: " HS_ACC "\r\n\r\n",
         "HS: EXT: unknown ext"},
        {"HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
         "Sec-WebSocket-Accept: s3pPLMBiTxaQ9kYGzzhZRbK+xOo\r\n\r\n", "HS: Accept hash wrong"},
        {"HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
         "Sec-WebSocket-Accept: S3PPLMBITXAQ9KYGZZHZRBK+XOO=\r\n\r\n", "HS: Accept hash wrong"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        const char *got = rli_hs_check(cases[i].head, strlen(cases[i].head), HS_KEY);
        if (cases[i].want ? !got || strcmp(got, cases[i].want) : got != NULL)
            fail_msg("case %zu: got \"%s\", want \"%s\"", i, got ? got : "(accepted)",
                     cases[i].want ? cases[i].want : "(accepted)");
    }
}

/* The head is found in any slicing, and the bytes after it are left for the framing. */
static void test_handshake_feed(void **state)
{
    (void)state;
    const char *heads[] = {
        "HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
        "Sec-WebSocket-Accept: " HS_ACC "\r\n\r\n",
        "HTTP/1.1 101 Switching Protocols\nUpgrade: websocket\nConnection: Upgrade\n"
        "Sec-WebSocket-Accept: " HS_ACC "\n\n",
    };
    const uint8_t frames[] = {0x82, 0x03, '\r', '\n', '\n'};
    rli_hs_reader *r = malloc(sizeof *r);
    for (size_t h = 0; h < 2; h++) {
        uint8_t in[512];
        size_t hl = strlen(heads[h]);
        memcpy(in, heads[h], hl);
        memcpy(in + hl, frames, sizeof frames);
        size_t n = hl + sizeof frames;
        for (int mode = 0; mode < 30; mode++) {
            uint64_t rng = 77 + (uint64_t)mode;
            rli_hs_reader_init(r);
            size_t off = 0;
            rli_hs_status st = RLI_HS_MORE;
            while (off < n) {
                size_t k = next_piece(mode, &rng, n - off);
                size_t used = 0;
                const char *err = NULL;
                st = rli_hs_feed(r, in + off, k, &used, HS_KEY, &err);
                if (st == RLI_HS_FAILED)
                    fail_msg("mode %d: %s", mode, err);
                if (st == RLI_HS_DONE) {
                    assert_null(err);
                    off += used;
                    break;
                }
                assert_int_equal(used, k);
                off += k;
            }
            assert_int_equal(st, RLI_HS_DONE);
            assert_int_equal(off, hl); /* the frames are left over */
        }
    }
    /* a failing head, and one that never ends */
    rli_hs_reader_init(r);
    size_t used;
    const char *err = NULL;
    const char *bad = "HTTP/1.1 403 Forbidden\r\n\r\n";
    assert_int_equal(rli_hs_feed(r, (const uint8_t *)bad, strlen(bad), &used, HS_KEY, &err), RLI_HS_FAILED);
    assert_string_equal(err, "HS: ws upgrade response not 101");
    rli_hs_reader_init(r);
    uint8_t junk[4096];
    memset(junk, 'a', sizeof junk);
    rli_hs_status st = RLI_HS_MORE;
    int rounds = 0;
    while (st == RLI_HS_MORE && rounds++ < 10)
        st = rli_hs_feed(r, junk, sizeof junk, &used, HS_KEY, &err);
    assert_int_equal(st, RLI_HS_FAILED);
    assert_string_equal(err, "HS: response headers too long");
    free(r);
}

/* ==== ws:// framing through the client, end to end ============================================== */

/* The upgrade request is ours now: the same headers lws sent, a fresh key per connection. */
static void test_upgrade_request(void **state)
{
    (void)state;
    ss_server *ss = ss_start();
    ss_ledger(ss, 1, 8);
    ss_next_connection(ss);
    ss_ledger(ss, 2, 8);
    rl_stream *s;
    assert_int_equal(rl_stream_new(&s, ss_url(ss), NULL), RL_OK);
    collected c = {0};
    assert_int_equal(rl_stream_raw_ledgers(s, rl_single_ledger_range(1), on_ledger, &c), RL_OK);
    assert_int_equal(rl_stream_raw_ledgers(s, rl_single_ledger_range(2), on_ledger, &c), RL_OK);
    rl_stream_free(s);
    assert_true(ss_wait(ss, SERVER_WAIT_MS));
    char host[64], keys[2][64];
    snprintf(host, sizeof host, "\r\nHost: 127.0.0.1:%d\r\n", ss_port(ss));
    for (int i = 0; i < 2; i++) {
        const char *req = ss_request(ss, i);
        char line[64];
        snprintf(line, sizeof line, "GET /stream?end=%d&start=%d HTTP/1.1\r\n", i + 1, i + 1);
        assert_true(strncmp(req, line, strlen(line)) == 0);
        assert_contains(req, host);
        assert_contains(req, "\r\nUpgrade: websocket\r\n");
        assert_contains(req, "\r\nConnection: Upgrade\r\n");
        assert_contains(req, "\r\nSec-WebSocket-Version: 13\r\n");
        assert_null(strcasestr(req, "Sec-WebSocket-Extensions"));
        assert_null(strcasestr(req, "Sec-WebSocket-Protocol"));
        const char *k = strstr(req, "\r\nSec-WebSocket-Key: ");
        assert_non_null(k);
        k += strlen("\r\nSec-WebSocket-Key: ");
        size_t kl = strcspn(k, "\r");
        assert_int_equal(kl, 24);
        memcpy(keys[i], k, kl);
        keys[i][kl] = '\0';
        assert_int_equal(ss_client_unmasked(ss, i), 0);
        assert_string_equal(ss_client_frames(ss, i), "close");
    }
    assert_string_not_equal(keys[0], keys[1]);
    ss_stop(ss);
    collected_free(&c);
}

/* Pings are answered with masked pongs carrying the ping's payload, also between the fragments of
 * a message. */
static void test_pings_are_answered(void **state)
{
    (void)state;
    for (int mid = 0; mid < 2; mid++) {
        ss_server *ss = ss_start();
        uint8_t m[CS_WIRE_CHUNK_HEADER_LEN + 100], piece[100];
        memset(piece, 0x5a, sizeof piece);
        size_t ml = cs_wire_append_chunk(m, 1, 0, CS_CODEC_RAW, piece, sizeof piece);
        if (!mid)
            ss_send_ping(ss, "are you there?");
        ss_begin(ss, 1, 0);
        if (mid) {
            ss_send_frame(ss, 0x02, m, 40);
            ss_send_ping(ss, "mid-message");
            ss_send_frame(ss, 0x80, m + 40, ml - 40);
        } else {
            ss_send_binary(ss, m, ml);
        }
        ss_end(ss, 1, 1, sizeof piece, 0, XXH64(piece, sizeof piece, 0));
        collected c = {0};
        drain_expect(ss, NULL, rl_single_ledger_range(1), &c, RL_OK, 1, NULL);
        assert_memory_equal(c.copies[0], piece, sizeof piece);
        assert_string_equal(ss_client_frames(ss, 0), "pong close");
        assert_string_equal(ss_client_pong(ss, 0), mid ? "mid-message" : "are you there?");
        assert_int_equal(ss_client_unmasked(ss, 0), 0);
        expect_client_close(ss, 0, 1000, "range complete");
        ss_stop(ss);
        collected_free(&c);
    }
}

/* What a server may not send ends the call with a read error in coder/websocket's words, and a
 * close 1002 saying why. */
static void test_framing_violations(void **state)
{
    (void)state;
    uint8_t big[126];
    memset(big, 'p', sizeof big);
    static const uint8_t masked[] = {0x82, 0x81, 1, 2, 3, 4, 'x' ^ 1};
    for (int k = 0; k < 8; k++) {
        ss_server *ss = ss_start();
        ss_ledger(ss, 1, 16);
        const char *want = NULL;
        bool mid = false;
        switch (k) {
        case 0:
            ss_send_frame(ss, 0xC2, "x", 1);
            want = "received header with unexpected rsv bits set: true:false:false";
            break;
        case 1:
            ss_send_bytes(ss, masked, sizeof masked);
            want = "received masked frame from server";
            break;
        case 2:
            ss_send_frame(ss, 0x83, "x", 1);
            want = "received unknown opcode opcode(3)";
            break;
        case 3:
            ss_send_frame(ss, 0x89, big, sizeof big);
            want = "failed to handle control frame opPing: received control frame payload with invalid length: 126";
            break;
        case 4:
            ss_send_frame(ss, 0x09, "p", 1);
            want = "failed to handle control frame opPing: received fragmented control frame";
            break;
        case 5:
            ss_send_frame(ss, 0x80, "x", 1);
            want = "received continuation frame without text or binary frame";
            break;
        case 6:
            ss_send_frame(ss, 0x02, "ab", 2);
            ss_send_frame(ss, 0x82, "cd", 2);
            want = "received new data message without finishing the previous message";
            mid = true;
            break;
        default:
            ss_send_frame(ss, 0x02, "ab", 2);
            ss_send_frame(ss, 0xC0, "cd", 2);
            want = "received header with unexpected rsv bits set: true:false:false";
            mid = true;
            break;
        }
        collected c = {0};
        char full[512];
        snprintf(full, sizeof full, "remoteledger: read: %s%s", mid ? "" : "failed to get reader: ", want);
        drain_expect(ss, NULL, rl_unbounded_range(1), &c, RL_ERR_READ, 1, full);
        char trunc[124];
        snprintf(trunc, sizeof trunc, "%s", want); /* a close reason holds 123 bytes */
        expect_client_close(ss, 0, 1002, trunc);
        assert_int_equal(ss_client_unmasked(ss, 0), 0);
        ss_stop(ss);
        collected_free(&c);
    }
}

/* End of stream inside a frame header reads as before (lws's client said the same); inside a
 * fragmented message it is a payload EOF. */
static void test_eof_inside_frames(void **state)
{
    (void)state;
    ss_server *ss = ss_start();
    ss_ledger(ss, 1, 16);
    ss_send_bytes(ss, "\x82", 1);
    ss_drop(ss);
    collected c = {0};
    drain_expect(ss, NULL, rl_unbounded_range(1), &c, RL_ERR_READ, 1,
                 "remoteledger: read: failed to get reader: failed to read frame header: EOF");
    ss_stop(ss);
    collected_free(&c);

    ss = ss_start();
    ss_begin(ss, 1, 0);
    ss_send_frame(ss, 0x02, "ab", 2);
    ss_drop(ss);
    collected_reset(&c);
    drain_expect(ss, NULL, rl_unbounded_range(1), &c, RL_ERR_READ, 0,
                 "remoteledger: read: failed to read frame payload: unexpected EOF");
    ss_stop(ss);
}

/* The read limit covers the whole message, however it is fragmented. */
static void test_read_limit_across_fragments(void **state)
{
    (void)state;
    rl_options o;
    rl_options_init(&o);
    o.max_chunk_size = 4096; /* read limit 4107 */
    static uint8_t piece[5000], m[CS_WIRE_CHUNK_HEADER_LEN + 5000];
    cs_synthetic_fill(piece, sizeof piece, 3, false);
    for (int exact = 0; exact < 2; exact++) {
        size_t plen = exact ? 4096 : 5000;
        size_t ml = cs_wire_append_chunk(m, 1, 0, CS_CODEC_RAW, piece, plen);
        ss_server *ss = ss_start();
        ss_begin(ss, 1, 0);
        ss_send_fragmented(ss, m, ml, 1000);
        ss_end(ss, 1, 1, plen, 0, XXH64(piece, plen, 0));
        collected c = {0};
        drain(ss, &o, rl_single_ledger_range(1), &c);
        char reason[128];
        if (exact) {
            expect(&c, RL_OK, 1);
            assert_memory_equal(c.copies[0], piece, plen);
        } else {
            expect(&c, RL_ERR_READ, 0);
            assert_string_equal(c.err, "remoteledger: read: read limited at 4108 bytes");
            assert_int_equal(ss_client_close(ss, 0, reason, sizeof reason), 1009);
            assert_string_equal(reason, "read limited at 4108 bytes");
        }
        ss_stop(ss);
        collected_free(&c);
    }
}

/* The server's close frame is echoed back as it came (lws parroted it too). */
static void test_close_is_echoed(void **state)
{
    (void)state;
    ss_server *ss = ss_start();
    ss_ledger(ss, 1, 16);
    ss_send_close(ss, 4002, "odd one");
    collected c = {0};
    drain_expect(ss, NULL, rl_unbounded_range(1), &c, RL_ERR_READ, 1, NULL);
    expect_client_close(ss, 0, 4002, "odd one");
    assert_string_equal(ss_client_frames(ss, 0), "close");
    assert_int_equal(ss_client_unmasked(ss, 0), 0);
    ss_stop(ss);
    collected_free(&c);

    ss = ss_start();
    ss_send_close_empty(ss);
    collected_reset(&c);
    drain_expect(ss, NULL, rl_unbounded_range(1), &c, RL_ERR_READ, 0, NULL);
    assert_int_equal(ss_client_close(ss, 0, NULL, 0), 1005); /* an empty close, echoed empty */
    ss_stop(ss);
}

/* A bad upgrade response fails the dial in lws's words, as before. */
static void test_handshake_failures(void **state)
{
    (void)state;
    static const struct {
        const char *resp, *want;
    } cases[] = {
        {"HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
         "Sec-WebSocket-Accept: AAAA\r\n\r\n", "HS: Accept hash wrong"},
        {"HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
         "Sec-WebSocket-Extensions: permessage-deflate\r\nSec-WebSocket-Accept: %s\r\n\r\n",
         "HS: EXT: unknown ext"},
        {"HTTP/1.1 401 Unauthorized\r\nContent-Length: 0\r\n\r\n", "server requires a token (401)"},
        {"HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nSec-WebSocket-Accept: %s\r\n\r\n",
         "HS: UPGRADE malformed"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        ss_server *ss = ss_start();
        ss_handshake_with(ss, cases[i].resp);
        collected c = {0};
        drain_expect(ss, NULL, rl_unbounded_range(1), &c, RL_ERR_DIAL, 0, NULL);
        char want[256];
        snprintf(want, sizeof want, "remoteledger: dial %s/stream?start=1: %s", ss_url(ss), cases[i].want);
        assert_string_equal(c.err, want);
        ss_stop(ss);
    }
    /* and a valid but unusual one works */
    ss_server *ss = ss_start();
    ss_handshake_with(ss, "HTTP/1.1 101 OK\r\nconnection: keep-alive, upgrade\r\nupgrade: WebSocket\r\n"
                          "sec-websocket-accept: %s\r\nServer: scripted\r\n\r\n");
    ss_ledger(ss, 3, 64);
    collected c = {0};
    drain_expect(ss, NULL, rl_single_ledger_range(3), &c, RL_OK, 1, NULL);
    ss_stop(ss);
    collected_free(&c);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_endpoint),
        cmocka_unit_test(test_endpoint_scrubs_stale_range_params),
        cmocka_unit_test(test_endpoint_query_encoding),
        cmocka_unit_test(test_endpoint_rejects),
        cmocka_unit_test(test_url_dial_target),
        cmocka_unit_test(test_range_format),
        cmocka_unit_test(test_read_limit_is_chunk_sized),
        cmocka_unit_test(test_asm_reassembles),
        cmocka_unit_test(test_asm_violations),
        cmocka_unit_test(test_asm_cap),
        cmocka_unit_test(test_asm_redelivery),
        cmocka_unit_test(test_asm_tip_and_ceiling),
        cmocka_unit_test(test_asm_incremental_hash),
        cmocka_unit_test(test_asm_mixed_codecs_and_reuse),
        cmocka_unit_test(test_asm_decompress_errors),
        cmocka_unit_test(test_asm_bound_is_per_chunk),
        cmocka_unit_test(test_wsframe_splits),
        cmocka_unit_test(test_wsframe_violations),
        cmocka_unit_test(test_wsframe_build),
        cmocka_unit_test(test_handshake_key_and_accept),
        cmocka_unit_test(test_handshake_request),
        cmocka_unit_test(test_handshake_check),
        cmocka_unit_test(test_handshake_feed),
        cmocka_unit_test(test_healthz_parse),
        cmocka_unit_test(test_delivers_bounded_range),
        cmocka_unit_test(test_reassembles_chunk_flows),
        cmocka_unit_test(test_received_stamp_without_observer),
        cmocka_unit_test(test_stops_at_range_end),
        cmocka_unit_test(test_from_tip_accepts_any_first_ledger),
        cmocka_unit_test(test_sequence_rules),
        cmocka_unit_test(test_normal_close_ends_iteration),
        cmocka_unit_test(test_truncated_bounded_range),
        cmocka_unit_test(test_truncated_with_nothing_delivered),
        cmocka_unit_test(test_truncated_mid_assembly),
        cmocka_unit_test(test_truncated_on_going_away),
        cmocka_unit_test(test_complete_bounded_range_has_no_error),
        cmocka_unit_test(test_tip_bounded_close_stays_clean),
        cmocka_unit_test(test_abrupt_close_is_an_error),
        cmocka_unit_test(test_other_close_codes),
        cmocka_unit_test(test_too_far_behind),
        cmocka_unit_test(test_too_far_behind_without_bounds),
        cmocka_unit_test(test_discards_partial_on_ring_redelivery),
        cmocka_unit_test(test_protocol_violations),
        cmocka_unit_test(test_rejects_text_messages),
        cmocka_unit_test(test_empty_message),
        cmocka_unit_test(test_yields_borrowed_buffers),
        cmocka_unit_test(test_assembly_cap),
        cmocka_unit_test(test_chunk_over_the_read_limit_is_rejected),
        cmocka_unit_test(test_cancel_tears_down),
        cmocka_unit_test(test_consumer_done),
        cmocka_unit_test(test_dial_failures),
        cmocka_unit_test(test_wss_dial_timeout),
        cmocka_unit_test(test_idle_timeout),
        cmocka_unit_test(test_pull_timeouts_and_partial_ledgers),
        cmocka_unit_test(test_pull_end_of_range),
        cmocka_unit_test(test_pull_fd_and_next0_never_waits),
        cmocka_unit_test(test_pull_fd_across_resume),
        cmocka_unit_test(test_pull_idle_excludes_the_callers_time),
        cmocka_unit_test(test_reset_after_cancel),
        cmocka_unit_test(test_resume_exactly_once),
        cmocka_unit_test(test_resume_unbounded_going_away),
        cmocka_unit_test(test_resume_does_not_retry),
        cmocka_unit_test(test_resume_budget),
        cmocka_unit_test(test_resume_backoff_and_next_timeout),
        cmocka_unit_test(test_rejects_ceiling_range_before_dialing),
        cmocka_unit_test(test_expands_compressed_chunks),
        cmocka_unit_test(test_rejects_corrupt_compressed_chunk),
        cmocka_unit_test(test_cancel_while_blocked_mid_message),
        cmocka_unit_test(test_fragmented_and_large_messages),
        cmocka_unit_test(test_stream_is_reusable),
        cmocka_unit_test(test_names_and_defaults),
        cmocka_unit_test(test_upgrade_request),
        cmocka_unit_test(test_pings_are_answered),
        cmocka_unit_test(test_framing_violations),
        cmocka_unit_test(test_eof_inside_frames),
        cmocka_unit_test(test_read_limit_across_fragments),
        cmocka_unit_test(test_close_is_echoed),
        cmocka_unit_test(test_handshake_failures),
    };
    return RLSUITE_RUN(tests);
}
