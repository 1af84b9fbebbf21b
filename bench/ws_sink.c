/* SPDX-License-Identifier: Apache-2.0 */
/* ws_sink: K light /stream subscribers in one process, on one thread, for the server's scale cell
 * (bench/cell11-scale-subscribers.sh).
 *
 *   ws_sink [--ca FILE] URL K START END CSV TIMEOUT_S
 *
 * URL is ws://host:port or wss://host:port. Each of the K subscribers connects in turn (blocking
 * dial, TLS handshake for wss:// against FILE, the upgrade), asking for /stream?start=START&end=END;
 * then one epoll loop reads every connection. The sink parses the WebSocket frames and, of each
 * message, only its first bytes: the type, the sequence, END's chunk count and its emit-end stamp.
 * It never decompresses nor hashes the payload, so one client thread keeps up with thousands of
 * subscribers and the cell measures the server, not the clients. What it checks: every ledger
 * START..END once, in order, with BEGIN, as many CHUNKs as END says, and END; the close code 1000.
 * A BEGIN inside an unfinished ledger is a discarded partial (the server abandoned the live flow
 * and redelivers the ledger from its ring).
 *
 * Delivery of a ledger = this host's CLOCK_REALTIME when its END is read minus END's
 * emitEndUnixNano (server and sink share the clock on one host); a ledger with no stamp (a ring
 * redelivery) is stampless. CSV, one row per ledger per subscriber:
 *   subscriber,sequence,chunks,begin_unix_ns,end_unix_ns,received_unix_ns,delivery_ns
 * (delivery_ns is column 7, as in benchrunner's CSV; empty for stampless rows). Prints one summary
 * line of key=value pairs. Exit 0 when every subscriber received every ledger and a 1000 close,
 * 1 otherwise (the first failure on stderr), 2 on a usage error. */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/resource.h>
#include <time.h>

#include "corestream/wire.h"
#include "remoteledger/handshake.h"
#include "remoteledger/transport.h"
#include "remoteledger/wsframe.h"

#define HEAD_KEEP 40 /* a message's first bytes kept: END is 34 */
#define READ_BUF (256 * 1024)

typedef struct row {
    int64_t begin_ns, end_ns, received_ns;
    uint32_t chunks;
} row;

typedef struct conn {
    rli_tp tp;
    rli_ws_parser ps;
    size_t idx;
    bool open;  /* connected and not yet closed */
    bool done;  /* closed 1000 after the whole range */
    bool in_ledger;
    uint32_t cur, chunks, next;
    int64_t begin_ns;
    uint8_t head[HEAD_KEEP];
    size_t head_len;
    uint32_t partials, stampless, received;
    int close_code;
    row *rows; /* END - START + 1 */
} conn;

static uint32_t g_start, g_end;
static char g_fail[512];

static void fail_once(const conn *c, const char *what)
{
    if (!g_fail[0])
        snprintf(g_fail, sizeof g_fail, "subscriber %zu: %.400s", c->idx + 1, what);
}

static int64_t now_real_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

static uint32_t be32(const uint8_t *p)
{
    return (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 | (uint32_t)p[2] << 8 | p[3];
}

static int64_t be64s(const uint8_t *p)
{
    return (int64_t)((uint64_t)be32(p) << 32 | be32(p + 4));
}

static void finish(conn *c)
{
    if (c->open) {
        rli_tp_close(&c->tp);
        c->open = false;
    }
    if (!c->done && !g_fail[0]) {
        char why[96];
        snprintf(why, sizeof why, "ended after %" PRIu32 " ledgers, close code %d", c->received, c->close_code);
        fail_once(c, why);
    }
}

static void on_message(conn *c, int64_t now)
{
    if (c->head_len < CS_WIRE_MIN_LEN || c->head[0] != CS_WIRE_VERSION) {
        fail_once(c, "a message that is not a wire message");
        return;
    }
    uint32_t seq = be32(c->head + 2);
    switch (c->head[1]) {
    case CS_WIRE_TYPE_BEGIN:
        if (c->in_ledger)
            c->partials++;
        c->in_ledger = true;
        c->cur = seq;
        c->chunks = 0;
        c->begin_ns = c->head_len >= CS_WIRE_BEGIN_LEN ? be64s(c->head + 6) : 0;
        break;
    case CS_WIRE_TYPE_CHUNK:
        c->chunks++;
        break;
    case CS_WIRE_TYPE_SIG:
        break;
    case CS_WIRE_TYPE_END: {
        if (!c->in_ledger || seq != c->cur || c->head_len < CS_WIRE_END_LEN) {
            fail_once(c, "END without its BEGIN");
            return;
        }
        c->in_ledger = false;
        if (be32(c->head + 6) != c->chunks) {
            fail_once(c, "END's chunk count differs from the chunks received");
            return;
        }
        if (seq != c->next || seq < g_start || seq > g_end) {
            char why[96];
            snprintf(why, sizeof why, "ledger %" PRIu32 " where %" PRIu32 " was due", seq, c->next);
            fail_once(c, why);
            return;
        }
        row *r = &c->rows[seq - g_start];
        r->begin_ns = c->begin_ns;
        r->end_ns = be64s(c->head + 18);
        r->received_ns = now;
        r->chunks = c->chunks;
        if (r->end_ns == 0)
            c->stampless++;
        c->received++;
        c->next = seq + 1;
        break;
    }
    default:
        fail_once(c, "a message of an unknown type");
    }
}

/* Feeds bytes read from c; false when the connection is over. */
static bool feed(conn *c, const uint8_t *in, size_t len, int64_t now)
{
    for (;;) {
        rli_ws_event ev;
        size_t used = rli_ws_parse(&c->ps, in, len, &ev);
        in += used;
        len -= used;
        if (ev.kind == RLI_WS_EV_NONE)
            break;
        if (ev.kind == RLI_WS_EV_ERROR) {
            fail_once(c, ev.err);
            return false;
        }
        if (ev.kind == RLI_WS_EV_CONTROL) {
            if (ev.opcode == RLI_WS_OP_CLOSE) {
                c->close_code = ev.len >= 2 ? (ev.data[0] << 8 | ev.data[1]) : 1005;
                c->done = c->close_code == CS_CLOSE_NORMAL && c->next == g_end + 1;
                return false;
            }
            if (ev.opcode == RLI_WS_OP_PING) {
                uint8_t f[RLI_WS_MAX_HEADER + RLI_WS_MAX_CONTROL], mask[4];
                rli_random_bytes(mask, sizeof mask);
                size_t n = rli_ws_build_frame(f, RLI_WS_OP_PONG, ev.data, ev.len, mask), w = 0;
                (void)rli_tp_write(&c->tp, f, n, &w); /* best effort: a pong is tiny */
            }
            continue;
        }
        if (ev.kind != RLI_WS_EV_DATA)
            continue;
        if (ev.msg_start)
            c->head_len = 0;
        size_t take = ev.len < HEAD_KEEP - c->head_len ? ev.len : HEAD_KEEP - c->head_len;
        if (take)
            memcpy(c->head + c->head_len, ev.data, take);
        c->head_len += take;
        if (ev.msg_end)
            on_message(c, now);
        if (g_fail[0] && !c->done)
            return false;
    }
    return true;
}

/* Dials, upgrades and feeds what came with the 101. false with g_fail set on failure. */
static bool dial(conn *c, const char *host, int port, bool tls, const char *ca, uint8_t *buf)
{
    int64_t deadline = rli_mono_ms() + 10000;
    rli_tp_init(&c->tp, -1);
    if (rli_tp_connect(&c->tp, host, port, deadline) != RLI_TP_OK) {
        fail_once(c, c->tp.err);
        return false;
    }
    c->open = true;
    if (tls) {
        rli_tls_config cfg = {.ca_file = ca};
        if (rli_tp_tls_start(&c->tp, &cfg, host, deadline) != RLI_TP_OK) {
            fail_once(c, c->tp.err);
            return false;
        }
    }
    char key[RLI_HS_KEY_LEN + 1], target[96], hosthdr[300], req[1024];
    rli_hs_key_new(key);
    snprintf(target, sizeof target, "/stream?start=%" PRIu32 "&end=%" PRIu32, g_start, g_end);
    snprintf(hosthdr, sizeof hosthdr, "%s:%d", host, port);
    size_t rl = rli_hs_request(req, sizeof req, target, hosthdr, key, NULL), off = 0;
    while (off < rl) {
        size_t n = 0;
        rli_tp_status st = rli_tp_write(&c->tp, (const uint8_t *)req + off, rl - off, &n);
        if (st == RLI_TP_OK)
            off += n;
        else if (st != RLI_TP_AGAIN || rli_tp_wait(&c->tp, false, true, deadline) != RLI_TP_OK) {
            fail_once(c, "the upgrade request could not be written");
            return false;
        }
    }
    static rli_hs_reader hr;
    rli_hs_reader_init(&hr);
    for (;;) {
        size_t n = 0, used = 0;
        rli_tp_status st = rli_tp_read(&c->tp, buf, READ_BUF, &n);
        if (st == RLI_TP_AGAIN) {
            if (rli_tp_wait(&c->tp, true, false, deadline) != RLI_TP_OK) {
                fail_once(c, "no upgrade answer within 10 s");
                return false;
            }
            continue;
        }
        if (st != RLI_TP_OK) {
            fail_once(c, "the connection ended before the upgrade answer");
            return false;
        }
        const char *err = NULL;
        rli_hs_status hs = rli_hs_feed(&hr, buf, n, &used, key, &err);
        if (hs == RLI_HS_FAILED) {
            fail_once(c, err ? err : "upgrade refused");
            return false;
        }
        if (hs == RLI_HS_DONE)
            return feed(c, buf + used, n - used, now_real_ns()) || c->done;
    }
}

static int usage(void)
{
    fprintf(stderr, "usage: ws_sink [--ca FILE] URL K START END CSV TIMEOUT_S\n");
    return 2;
}

int main(int argc, char **argv)
{
    const char *ca = NULL;
    int a = 1;
    if (argc > 2 && strcmp(argv[1], "--ca") == 0) {
        ca = argv[2];
        a = 3;
    }
    if (argc - a != 6)
        return usage();
    const char *url = argv[a];
    long k = strtol(argv[a + 1], NULL, 10);
    g_start = (uint32_t)strtoul(argv[a + 2], NULL, 10);
    g_end = (uint32_t)strtoul(argv[a + 3], NULL, 10);
    const char *csv = argv[a + 4];
    long timeout_s = strtol(argv[a + 5], NULL, 10);
    bool tls = strncmp(url, "wss://", 6) == 0;
    if (!tls && strncmp(url, "ws://", 5) != 0)
        return usage();
    char host[256];
    int port = 0;
    if (sscanf(url + (tls ? 6 : 5), "%255[^:]:%d", host, &port) != 2 || k < 1 || g_start < 1 || g_end < g_start ||
        timeout_s < 1)
        return usage();
    FILE *out = fopen(csv, "w");
    if (!out) {
        fprintf(stderr, "ws_sink: %s: %s\n", csv, strerror(errno));
        return 2;
    }
    size_t n = (size_t)k, span = g_end - g_start + 1;
    conn *cs = calloc(n, sizeof *cs);
    uint8_t *buf = malloc(READ_BUF);
    int ep = epoll_create1(EPOLL_CLOEXEC);
    if (!cs || !buf || ep < 0) {
        fprintf(stderr, "ws_sink: out of memory\n");
        return 1;
    }
    int64_t t0 = rli_mono_ms(), deadline = t0 + timeout_s * 1000;
    size_t connected = 0;
    for (size_t i = 0; i < n; i++) {
        conn *c = &cs[i];
        c->idx = i;
        c->next = g_start;
        rli_ws_parser_init(&c->ps);
        c->rows = calloc(span, sizeof *c->rows);
        if (!c->rows || !dial(c, host, port, tls, ca, buf)) {
            finish(c);
            continue;
        }
        connected++;
        struct epoll_event ev = {.events = EPOLLIN, .data.ptr = c};
        if (epoll_ctl(ep, EPOLL_CTL_ADD, c->tp.fd, &ev) != 0) {
            fail_once(c, "epoll_ctl failed");
            finish(c);
        }
    }
    fprintf(stderr, "ws_sink: %zu of %zu connected in %" PRId64 " ms\n", connected, n, rli_mono_ms() - t0);
    size_t live = 0;
    for (size_t i = 0; i < n; i++)
        live += cs[i].open;
    struct epoll_event evs[256];
    while (live > 0) {
        int64_t left = deadline - rli_mono_ms();
        if (left <= 0)
            break;
        int m = epoll_wait(ep, evs, 256, left > 1000 ? 1000 : (int)left);
        if (m < 0 && errno != EINTR)
            break;
        for (int j = 0; j < m; j++) {
            conn *c = evs[j].data.ptr;
            if (!c->open)
                continue;
            /* Read until the transport has nothing (under TLS OpenSSL may hold records the socket no
             * longer shows), at most 1 MiB per turn so one busy subscriber does not starve the rest. */
            for (size_t turn = 0; turn < 4; turn++) {
                size_t got = 0;
                rli_tp_status st = rli_tp_read(&c->tp, buf, READ_BUF, &got);
                if (st == RLI_TP_AGAIN)
                    break;
                if (st != RLI_TP_OK || !feed(c, buf, got, now_real_ns())) {
                    if (st == RLI_TP_ERROR)
                        fail_once(c, c->tp.err);
                    epoll_ctl(ep, EPOLL_CTL_DEL, c->tp.fd, NULL);
                    finish(c);
                    live--;
                    break;
                }
            }
        }
    }
    size_t ok = 0, partials = 0, stampless = 0, received = 0;
    fprintf(out, "subscriber,sequence,chunks,begin_unix_ns,end_unix_ns,received_unix_ns,delivery_ns\n");
    for (size_t i = 0; i < n; i++) {
        conn *c = &cs[i];
        if (c->open)
            finish(c);
        ok += c->done;
        partials += c->partials;
        stampless += c->stampless;
        received += c->received;
        for (size_t s = 0; c->rows && s < span; s++) {
            const row *r = &c->rows[s];
            if (!r->received_ns)
                continue;
            fprintf(out, "%zu,%zu,%" PRIu32 ",%" PRId64 ",%" PRId64 ",%" PRId64 ",", i + 1, g_start + s, r->chunks,
                    r->begin_ns, r->end_ns, r->received_ns);
            if (r->end_ns)
                fprintf(out, "%" PRId64, r->received_ns - r->end_ns);
            fputc('\n', out);
        }
        free(c->rows);
    }
    if (fclose(out) != 0) {
        fprintf(stderr, "ws_sink: %s: %s\n", csv, strerror(errno));
        return 1;
    }
    struct rusage ru;
    getrusage(RUSAGE_SELF, &ru);
    double cpu = (double)ru.ru_utime.tv_sec + (double)ru.ru_stime.tv_sec +
                 ((double)ru.ru_utime.tv_usec + (double)ru.ru_stime.tv_usec) / 1e6;
    printf("subscribers=%zu connected=%zu ended_well=%zu failed=%zu ledgers=%zu expected=%zu partials=%zu "
           "stampless=%zu cpu_s=%.2f wall_ms=%" PRId64 "\n",
           n, connected, ok, n - ok, received, n * span, partials, stampless, cpu, rli_mono_ms() - t0);
    if (ok != n) {
        fprintf(stderr, "ws_sink: %s\n", g_fail[0] ? g_fail : "timed out");
        return 1;
    }
    free(cs);
    free(buf);
    return 0;
}
