/* SPDX-License-Identifier: Apache-2.0 */
/* The server's HTTP answers byte for byte, from a real server in process: the prototype's
 * WebSocket handshake rules (version, key, method, HTTP/1.0), the URI and header limits (414,
 * 431), the header deadline, `too many query parameters` instead of dropping pairs, request
 * bodies refused, keep-alive. Every refusal is one DEBUG line naming the peer.
 *
 * With CS_TEST_TLS=1 (ctest test_handshake_e2e_tls) every case runs against a TLS port, through a
 * plaintext-to-TLS tunnel (support/tlstunnel.h): the same bytes must come back. */
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "common/clock.h"
#include "common/log.h"
#include "corestreamd/server/server.h"
#include "support/certs.h"
#include "support/logcapture.h"
#include "support/tlstunnel.h"
#include "support/serverharness.h"
#include "support/wsclient.h"
#include "support/wait.h"

#define KEY "Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\n"
#define V13 "Sec-WebSocket-Version: 13\r\n"
#define UPGRADE "Host: 127.0.0.1\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"

static harness g_h;
static int g_port; /* the server's port, or the tunnel's to it */
static bool g_tls;
static cs_certs g_certs;

/* A server for o (TLS with CS_TEST_TLS) and the port its clients use. */
static int start_server(harness *h, harness_opts *o, cs_tlstunnel **tun)
{
    if (g_tls) {
        o->tls_cert = g_certs.server_cert;
        o->tls_key = g_certs.server_key;
    }
    harness_start(h, o);
    *tun = NULL;
    if (!g_tls)
        return h->port;
    int port = 0;
    assert_int_equal(cs_tlstunnel_start(tun, h->port, g_certs.ca, &port), 0);
    return port;
}

static cs_tlstunnel *g_tun;

static int setup(void **state)
{
    (void)state;
    const char *t = getenv("CS_TEST_TLS");
    g_tls = t && strcmp(t, "1") == 0;
    if (g_tls && cs_certs_make(&g_certs) != 0)
        return -1;
    if (cs_logcap_start(CS_LOG_DEBUG) != 0)
        return -1;
    harness_opts o = {.start = 1, .size = 1024, .interval_ms = 100, .retention = 100,
                      .run = "synthetic-0123456789abcdef"};
    g_port = start_server(&g_h, &o, &g_tun);
    return 0;
}

static int teardown(void **state)
{
    (void)state;
    cs_tlstunnel_stop(g_tun);
    harness_stop(&g_h);
    cs_logcap_stop();
    if (g_tls)
        cs_certs_remove(&g_certs);
    return 0;
}

/* The exact response for a refusal (httpanswer.h), after which the server closes: it says so
 * (`connection: close`, or with a 426's offer `connection: Upgrade, close`). */
static char *expected(unsigned code, const char *reason, const char *extra, const char *body)
{
    static const char offer[] = "connection: Upgrade\r\n";
    bool upgrade = strncmp(extra, offer, strlen(offer)) == 0;
    char *out = malloc(strlen(body) + 512);
    sprintf(out,
            "HTTP/1.1 %u %s\r\ncontent-type: text/plain; charset=utf-8\r\ncontent-length: %zu\r\n"
            "x-content-type-options: nosniff\r\n%s%s\r\n%s\n",
            code, reason, strlen(body) + 1, upgrade ? "connection: Upgrade, close\r\n" : "connection: close\r\n",
            upgrade ? extra + strlen(offer) : extra, body);
    return out;
}

static void expect_answer(const char *request, unsigned code, const char *reason, const char *extra,
                          const char *body)
{
    static char resp[1 << 16];
    int st = cs_http_raw("127.0.0.1", g_port, request, WAIT_MS, resp, sizeof resp);
    char *want = expected(code, reason, extra, body);
    if (st != (int)code || strcmp(resp, want) != 0)
        fail_msg("status %d, response\n%s\nwant\n%s", st, resp, want);
    free(want);
}

/* How many lines of the log so far contain needle. */
static void test_other_websocket_versions_get_400_with_13(void **state)
{
    (void)state;
    expect_answer("GET /stream HTTP/1.1\r\n" UPGRADE "Sec-WebSocket-Version: 8\r\n" KEY "\r\n", 400,
                  "Bad Request", "sec-websocket-version: 13\r\n",
                  "unsupported WebSocket protocol version (only 13 is supported): \"8\"");
    expect_answer("GET /stream HTTP/1.1\r\n" UPGRADE KEY "\r\n", 400, "Bad Request",
                  "sec-websocket-version: 13\r\n",
                  "unsupported WebSocket protocol version (only 13 is supported): \"\"");
    assert_int_equal(cs_logcap_count("msg=\"websocket handshake failed\""), 2);
    char want[128];
    snprintf(want, sizeof want, "level=DEBUG msg=\"websocket handshake failed\" pid=%ld remote=127.0.0.1:",
             (long)getpid());
    assert_int_equal(cs_logcap_count(want), 2);
}

static void test_bad_keys_get_400(void **state)
{
    (void)state;
    expect_answer("GET /stream HTTP/1.1\r\n" UPGRADE V13 "\r\n", 400, "Bad Request", "",
                  "WebSocket protocol violation: missing Sec-WebSocket-Key");
    expect_answer("GET /stream HTTP/1.1\r\n" UPGRADE V13 KEY KEY "\r\n", 400, "Bad Request", "",
                  "WebSocket protocol violation: multiple Sec-WebSocket-Key headers");
    expect_answer("GET /stream HTTP/1.1\r\n" UPGRADE V13 "Sec-WebSocket-Key: abc\r\n\r\n", 400, "Bad Request",
                  "",
                  "WebSocket protocol violation: invalid Sec-WebSocket-Key \"abc\", must be a 16 byte base64 "
                  "encoded string");
    /* 16 bytes of base64 but with padding bits set: Go's decoder refuses it too. */
    expect_answer("GET /stream HTTP/1.1\r\n" UPGRADE V13 "Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZR==\r\n\r\n",
                  400, "Bad Request", "",
                  "WebSocket protocol violation: invalid Sec-WebSocket-Key \"dGhlIHNhbXBsZSBub25jZR==\", must "
                  "be a 16 byte base64 encoded string");
}

static void test_non_get_gets_405(void **state)
{
    (void)state;
    expect_answer("POST /stream HTTP/1.1\r\n" UPGRADE V13 KEY "\r\n", 405, "Method Not Allowed", "",
                  "WebSocket protocol violation: handshake request method is not GET but \"POST\"");
}

static void test_http_1_0_gets_426(void **state)
{
    (void)state;
    expect_answer("GET /stream HTTP/1.0\r\n" UPGRADE V13 KEY "\r\n", 426, "Upgrade Required", "",
                  "WebSocket protocol violation: handshake request must be at least HTTP/1.1: \"HTTP/1.0\"");
    expect_answer("GET /stream HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n", 426, "Upgrade Required",
                  "connection: Upgrade\r\nupgrade: websocket\r\n",
                  "WebSocket protocol violation: Connection header \"\" does not contain Upgrade");
}

static void test_query_pairs_are_never_dropped(void **state)
{
    (void)state;
    char req[4096];
    int n = snprintf(req, sizeof req, "GET /stream?");
    for (int i = 0; i < 32; i++)
        n += snprintf(req + n, sizeof req - (size_t)n, "x%d=1&", i);
    snprintf(req + n, sizeof req - (size_t)n, "start=abc HTTP/1.1\r\n" UPGRADE V13 KEY "\r\n");
    /* Pair 33 is the bad start: it must not be lost. */
    expect_answer(req, 400, "Bad Request", "", "too many query parameters");
    /* 32 pairs are read, the last of them included. */
    n = snprintf(req, sizeof req, "GET /stream?");
    for (int i = 0; i < 31; i++)
        n += snprintf(req + n, sizeof req - (size_t)n, "x%d=1&", i);
    snprintf(req + n, sizeof req - (size_t)n, "start=abc HTTP/1.1\r\n" UPGRADE V13 KEY "\r\n");
    expect_answer(req, 400, "Bad Request", "", "invalid start parameter \"abc\"");
    /* More pairs than the pair limit (the head reader answers), and as many as fit in the URI
     * limit: still that answer, not a hang-up. */
    n = snprintf(req, sizeof req, "GET /stream?");
    for (int i = 0; i < 36; i++)
        n += snprintf(req + n, sizeof req - (size_t)n, "x&");
    snprintf(req + n, sizeof req - (size_t)n, "x HTTP/1.1\r\n" UPGRADE V13 KEY "\r\n");
    expect_answer(req, 400, "Bad Request", "", "too many query parameters");
    n = snprintf(req, sizeof req, "GET /stream?");
    for (int i = 0; i < 1000; i++)
        n += snprintf(req + n, sizeof req - (size_t)n, "x&");
    snprintf(req + n, sizeof req - (size_t)n, "x HTTP/1.1\r\n" UPGRADE V13 KEY "\r\n");
    expect_answer(req, 400, "Bad Request", "", "too many query parameters");
}

/* A URI past 4 KiB is answered 414, a head past 16 KiB or 64 header lines 431, whatever the
 * path; the server carries on serving. */
static void test_oversized_requests(void **state)
{
    (void)state;
    char refused_line[128];
    snprintf(refused_line, sizeof refused_line, "level=DEBUG msg=\"request refused\" pid=%ld remote=127.0.0.1:",
             (long)getpid());
    int refused_before = cs_logcap_count(refused_line);
    size_t big = 70 * 1024;
    char *req = malloc(big + 8192);
    char *p = req + sprintf(req, "GET /stream?x=");
    memset(p, 'a', 5000);
    sprintf(p + 5000, " HTTP/1.1\r\n" UPGRADE V13 KEY "\r\n");
    expect_answer(req, 414, "Request URI Too Long", "", "request URI too long");
    p = req + sprintf(req, "GET /healthz?x=");
    memset(p, 'a', 5000);
    sprintf(p + 5000, " HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n");
    expect_answer(req, 414, "Request URI Too Long", "", "request URI too long");
    assert_int_equal(cs_logcap_count("status=414 error=\"request URI too long\""), 2);
    p = req + sprintf(req, "GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Big: ");
    memset(p, 'b', big);
    sprintf(p + big, "\r\n\r\n");
    expect_answer(req, 431, "Request Header Fields Too Large", "", "request header fields too large");
    /* Over the URI limit and the size limit at once: the request line comes first. */
    p = req + sprintf(req, "GET /stream?x=");
    memset(p, 'a', 5000);
    p += 5000;
    p += sprintf(p, " HTTP/1.1\r\n" UPGRADE V13 KEY "X-Big: ");
    memset(p, 'b', big);
    sprintf(p + big, "\r\n\r\n");
    expect_answer(req, 414, "Request URI Too Long", "", "request URI too long");
    /* 49 header lines, each short. */
    p = req + sprintf(req, "GET /stream HTTP/1.1\r\n" UPGRADE V13 KEY);
    for (int i = 0; i < 44; i++)
        p += sprintf(p, "X-H%d: v\r\n", i);
    sprintf(p, "\r\n");
    expect_answer(req, 431, "Request Header Fields Too Large", "", "request header fields too large");
    assert_int_equal(cs_logcap_count("status=431 error=\"request header fields too large\""), 2);
    assert_int_equal(cs_logcap_count("status=414 error=\"request URI too long\""), 3);
    assert_int_equal(cs_logcap_count(refused_line) - refused_before, 5);
    free(req);
    char body[512];
    assert_int_equal(cs_http_get("127.0.0.1", g_port, "/healthz", WAIT_MS, body, sizeof body, NULL, 0), 200);
}

/* Heads just within the limits are served: 48 header lines (repeats of a known header among
 * them) with 32 query pairs, a head of exactly 16 KiB. */
static void test_heads_within_the_limits_are_served(void **state)
{
    (void)state;
    char *req = malloc(20000);
    char *p = req + sprintf(req, "GET /healthz?a=1");
    for (int i = 1; i < 32; i++)
        p += sprintf(p, "&a=1");
    p += sprintf(p, " HTTP/1.1\r\nHost: 127.0.0.1\r\n");
    for (int i = 0; i < 47; i++)
        p += sprintf(p, "Accept: text/plain\r\n");
    sprintf(p, "\r\n");
    static char resp[4096];
    assert_int_equal(cs_http_raw("127.0.0.1", g_port, req, WAIT_MS, resp, sizeof resp), 200);
    p = req + sprintf(req, "GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Big: ");
    size_t fill = 16384 - (size_t)(p - req) - 4; /* the head is exactly 16 KiB */
    memset(p, 'b', fill);
    sprintf(p + fill, "\r\n\r\n");
    assert_int_equal(strlen(req), 16384);
    assert_int_equal(cs_http_raw("127.0.0.1", g_port, req, WAIT_MS, resp, sizeof resp), 200);
    free(req);
}

static int connect_to(int port)
{
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    assert_true(fd >= 0);
    struct sockaddr_in dst = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port)};
    inet_pton(AF_INET, "127.0.0.1", &dst.sin_addr);
    assert_int_equal(connect(fd, (struct sockaddr *)&dst, sizeof dst), 0);
    return fd;
}

static void pause_ms(int ms)
{
    struct timespec ts = {ms / 1000, (long)(ms % 1000) * 1000000L};
    nanosleep(&ts, NULL); /* the trickle itself is what is tested, not a wait for an event */
}

/* Everything the peer sends until it closes, NUL-terminated; -1 on timeout. */
static int read_to_eof(int fd, char *buf, size_t len, int timeout_ms)
{
    size_t got = 0;
    int64_t deadline = cs_mono_ns() + (int64_t)timeout_ms * T_MS;
    while (cs_mono_ns() < deadline) {
        struct pollfd p = {.fd = fd, .events = POLLIN};
        if (poll(&p, 1, 50) != 1)
            continue;
        ssize_t n = recv(fd, buf + got, len - 1 - got, 0);
        if (n == 0 || (n < 0 && errno == ECONNRESET) || got + (size_t)(n > 0 ? n : 0) >= len - 1) {
            if (n > 0)
                got += (size_t)n;
            buf[got] = '\0';
            return 0;
        }
        if (n > 0)
            got += (size_t)n;
    }
    buf[got] = '\0';
    return -1;
}

/* A head that arrives a few bytes at a time but is complete within the deadline is served. */
static void test_a_slow_head_within_the_deadline_is_served(void **state)
{
    (void)state;
    harness h;
    harness_opts o = {.start = 1, .size = 1024, .interval_ms = 100, .retention = 100, .header_timeout_s = 3};
    cs_tlstunnel *tun;
    int port = start_server(&h, &o, &tun);
    static const char req[] = "GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n";
    int fd = connect_to(port);
    for (size_t off = 0; off < sizeof req - 1; off += 8) { /* 9 pieces over about 1.6 s */
        size_t n = sizeof req - 1 - off < 8 ? sizeof req - 1 - off : 8;
        assert_int_equal(send(fd, req + off, n, MSG_NOSIGNAL), (ssize_t)n);
        pause_ms(200);
    }
    char resp[2048];
    assert_int_equal(read_to_eof(fd, resp, sizeof resp, WAIT_MS), 0);
    if (strncmp(resp, "HTTP/1.1 200 OK\r\n", 17) != 0)
        fail_msg("response %s", resp);
    close(fd);
    cs_tlstunnel_stop(tun);
    harness_stop(&h);
}

/* A head still incomplete at the deadline is closed then with no answer, however busily it
 * trickles: the deadline is counted from accept, not from the last byte. The connection's place
 * is released. */
static void test_a_head_past_the_deadline_is_closed(void **state)
{
    (void)state;
    harness h;
    harness_opts o = {.start = 1, .size = 1024, .interval_ms = 100, .retention = 100, .header_timeout_s = 1};
    cs_tlstunnel *tun;
    int port = start_server(&h, &o, &tun);
    int fd = connect_to(port);
    int64_t t0 = cs_mono_ns();
    static const char head[] = "GET /stream HTTP/1.1\r\nHost: 127.0.0.1\r\n";
    assert_int_equal(send(fd, head, sizeof head - 1, MSG_NOSIGNAL), (ssize_t)(sizeof head - 1));
    int closed = 0;
    for (int i = 0; i < 50 && !closed; i++) { /* a header line every 100 ms, for at most 5 s */
        pause_ms(100);
        if (send(fd, "X-A: b\r\n", 8, MSG_NOSIGNAL) != 8)
            closed = 1;
        struct pollfd p = {.fd = fd, .events = POLLIN};
        if (poll(&p, 1, 0) == 1)
            closed = 1;
    }
    assert_true(closed);
    char resp[256];
    assert_int_equal(read_to_eof(fd, resp, sizeof resp, WAIT_MS), 0);
    assert_string_equal(resp, ""); /* no answer */
    int64_t took = cs_mono_ns() - t0;
    if (took < 900 * T_MS || took > 3000 * T_MS)
        fail_msg("closed after %lld ms; the deadline is 1 s", (long long)(took / T_MS));
    for (int i = 0; i < 500 && cs_server_connections(h.srv) != 0; i++)
        pause_ms(10); /* the count has no event to wait on; bounded */
    assert_int_equal(cs_server_connections(h.srv), 0);
    close(fd);
    cs_tlstunnel_stop(tun);
    harness_stop(&h);
}

static void test_valid_handshake_still_upgrades(void **state)
{
    (void)state;
    char resp[1024];
    int st = cs_http_raw("127.0.0.1", g_port, "GET /stream?start=1&end=1 HTTP/1.1\r\n" UPGRADE V13 KEY "\r\n",
                         WAIT_MS, resp, sizeof resp);
    assert_int_equal(st, 101);
    /* Upgrade is a list (RFC 9110 7.8): websocket among other protocols is an upgrade too. */
    st = cs_http_raw("127.0.0.1", g_port,
                     "GET /stream?start=1&end=1 HTTP/1.1\r\nHost: 127.0.0.1\r\nUpgrade: h2c, websocket\r\n"
                     "Connection: keep-alive, Upgrade\r\n" V13 KEY "\r\n",
                     WAIT_MS, resp, sizeof resp);
    assert_int_equal(st, 101);
}

/* A /stream upgrade gets the server's own 101, its exact bytes: the run token and the chunk bound
 * (the server's --chunk-size, 262144 by default, its ring holding nothing cut larger) after the
 * handshake's headers. */
static void test_stream_upgrade_gets_the_servers_own_101(void **state)
{
    (void)state;
    char resp[1024];
    int st = cs_http_raw("127.0.0.1", g_port, "GET /stream?start=1&end=1 HTTP/1.1\r\n" UPGRADE V13 KEY "\r\n",
                         WAIT_MS, resp, sizeof resp);
    assert_int_equal(st, 101);
    assert_string_equal(resp, "HTTP/1.1 101 Switching Protocols\r\nupgrade: websocket\r\nconnection: Upgrade\r\n"
                              "sec-websocket-accept: s3pPLMBiTxaQ9kYGzzhZRbK+xOo=\r\n"
                              "x-corestream-run: synthetic-0123456789abcdef\r\n"
                              "x-corestream-chunk-size: 262144\r\n\r\n");
}

/* Reads from fd until the peer closes or WAIT_MS passes; returns the bytes read. */
static size_t read_to_end(int fd, char *buf, size_t cap)
{
    size_t n = 0;
    int64_t until = cs_mono_ns() + (int64_t)WAIT_MS * 1000000;
    while (n < cap) {
        int left = (int)((until - cs_mono_ns()) / 1000000);
        struct pollfd p = {.fd = fd, .events = POLLIN};
        if (left <= 0 || poll(&p, 1, left) <= 0)
            break;
        ssize_t r = recv(fd, buf + n, cap - n, 0);
        if (r <= 0)
            break;
        n += (size_t)r;
    }
    return n;
}

/* Keep-alive: a probe, then an upgrade on the same connection (sent in one go) gets its 200, then
 * its 101, and the subscriber's bounded stream runs to the close 1000. */
static void test_an_upgrade_after_a_probe_on_one_connection_still_streams(void **state)
{
    (void)state;
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons((uint16_t)g_port)};
    inet_pton(AF_INET, "127.0.0.1", &a.sin_addr);
    assert_int_equal(connect(fd, (struct sockaddr *)&a, sizeof a), 0);
    /* Ledgers past the tip, so the subscriber waits for them live. */
    assert_true(cs_server_wait_retained(g_h.srv, 3, (int64_t)WAIT_MS * 1000000));
    uint32_t tip = 3;
    while (tip < 100000 && cs_server_wait_retained(g_h.srv, tip + 1, 0))
        tip++;
    char req[512];
    snprintf(req, sizeof req, "GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n"
                              "GET /stream?start=%u&end=%u HTTP/1.1\r\n" UPGRADE V13 KEY "\r\n",
             tip + 2, tip + 3);
    assert_int_equal(send(fd, req, strlen(req), MSG_NOSIGNAL), (ssize_t)strlen(req));
    static char buf[1 << 20];
    size_t n = read_to_end(fd, buf, sizeof buf);
    close(fd);
    assert_true(n > 0);
    buf[n < sizeof buf ? n : sizeof buf - 1] = '\0';
    assert_true(strncmp(buf, "HTTP/1.1 200 OK\r\n", 17) == 0);
    const char *up = strstr(buf, "HTTP/1.1 101 ");
    assert_non_null(up);
    const char *end = strstr(up, "\r\n\r\n");
    assert_non_null(end);
    /* The frames: at least one binary message, then the close 1000 as the last. */
    size_t off = (size_t)(end + 4 - buf), binaries = 0;
    int close_code = -1;
    while (off + 2 <= n && close_code < 0) {
        const uint8_t *h = (const uint8_t *)buf + off;
        size_t plen = h[1] & 0x7f, hl = 2;
        if (plen == 126) {
            plen = (size_t)h[2] << 8 | h[3];
            hl = 4;
        } else if (plen == 127) {
            plen = 0;
            for (int i = 0; i < 8; i++)
                plen = plen << 8 | h[2 + i];
            hl = 10;
        }
        if (off + hl + plen > n)
            break;
        if ((h[0] & 0x0f) == 0x2)
            binaries++;
        else if ((h[0] & 0x0f) == 0x8 && plen >= 2)
            close_code = h[hl] << 8 | h[hl + 1];
        off += hl + plen;
    }
    assert_true(binaries >= 2);
    assert_int_equal(close_code, 1000);
}

/* The server takes no request body: a request that declares one is refused (413 for a
 * Content-Length above 0, 400 for any Transfer-Encoding or a Content-Length that is not one
 * number) and closed, on any path, and the server goes on answering. (A body used to wedge the
 * plaintext port's HTTP thread at a full core.) A declared empty body changes nothing. */
static void test_a_request_body_is_refused_and_the_server_goes_on(void **state)
{
    (void)state;
    static const char *const too_large[] = {
        "POST /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Length: 1\r\n\r\nx",
        "GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Length: 5\r\n\r\nhello",
        "GET /nope HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Length: 1\r\n\r\nx",
        "GET /metrics HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Length: 100000\r\n\r\nonly a part of it",
        "GET /stream HTTP/1.1\r\n" UPGRADE V13 KEY "Content-Length: 2\r\n\r\nab",
        "GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Length: 3\r\nContent-Length: 3\r\n\r\nabc",
    };
    for (size_t i = 0; i < sizeof too_large / sizeof too_large[0]; i++)
        expect_answer(too_large[i], 413, "Request Entity Too Large", "", "request bodies are not accepted");
    static const char *const chunked[] = {
        "POST /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\nTransfer-Encoding: chunked\r\n\r\n1\r\nx\r\n0\r\n\r\n",
        "POST /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\nTransfer-Encoding: chunked\r\nContent-Length: 3\r\n\r\nabc",
        "GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\nTransfer-Encoding: identity\r\n\r\n",
    };
    for (size_t i = 0; i < sizeof chunked / sizeof chunked[0]; i++)
        expect_answer(chunked[i], 400, "Bad Request", "", "Transfer-Encoding is not accepted");
    static const char *const invalid[] = {
        "GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Length: abc\r\n\r\n",
        "GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Length: -1\r\n\r\n",
        "GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Length: 1\r\nContent-Length: 2\r\n\r\nx",
        "GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Length: 99999999999999999999\r\n\r\n",
    };
    for (size_t i = 0; i < sizeof invalid / sizeof invalid[0]; i++)
        expect_answer(invalid[i], 400, "Bad Request", "", "invalid Content-Length");
    static char resp[1 << 16];
    assert_int_equal(cs_http_raw("127.0.0.1", g_port,
                                 "POST /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Length: 0\r\n\r\n", WAIT_MS,
                                 resp, sizeof resp),
                     405);
    char body[4096];
    assert_int_equal(cs_http_get("127.0.0.1", g_port, "/healthz", WAIT_MS, body, sizeof body, NULL, 0), 200);
    cs_ws *ws = cs_ws_connect("127.0.0.1", g_port, "/stream", WAIT_MS, NULL, NULL, 0);
    assert_non_null(ws);
    cs_ledger l;
    assert_int_equal(cs_ws_read_ledger(ws, &l, WAIT_MS, NULL, 0), 1);
    cs_ledger_free(&l);
    cs_ws_close(ws);
}

/* A kept-alive connection carries one request after another (pipelined too), each answered in
 * order; `Connection: close` and HTTP/1.0 end it after their answer. */
/* Sends req (pipelined requests) on one connection and reads every answer until the server
 * closes it, into buf (NUL-terminated). */
static void pipeline(const char *req, char *buf, size_t cap)
{
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons((uint16_t)g_port)};
    inet_pton(AF_INET, "127.0.0.1", &a.sin_addr);
    assert_int_equal(connect(fd, (struct sockaddr *)&a, sizeof a), 0);
    assert_int_equal(send(fd, req, strlen(req), MSG_NOSIGNAL), (ssize_t)strlen(req));
    size_t n = 0;
    struct pollfd p = {.fd = fd, .events = POLLIN};
    while (n < cap - 1 && poll(&p, 1, WAIT_MS) == 1) {
        ssize_t r = recv(fd, buf + n, cap - 1 - n, 0);
        if (r <= 0)
            break;
        n += (size_t)r;
    }
    close(fd);
    buf[n] = '\0';
}

static void test_probes_keep_the_connection_alive(void **state)
{
    (void)state;
    static const char req[] = "GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n"
                              "GET /nope HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n"
                              "HEAD /readyz HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n"
                              "GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n"
                              "GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n";
    static char buf[1 << 16];
    pipeline(req, buf, sizeof buf);
    /* four answers, then the close: the fifth request is never answered */
    const char *at = buf, *statuses[] = {"HTTP/1.1 200 OK\r\n", "HTTP/1.1 404 Not Found\r\n", "HTTP/1.1 ",
                                         "HTTP/1.1 200 OK\r\n"};
    for (size_t i = 0; i < 4; i++) {
        if (strncmp(at, statuses[i], strlen(statuses[i])) != 0)
            fail_msg("answer %zu: %s", i, at);
        const char *cl = strstr(at, "content-length: "), *end = strstr(at, "\r\n\r\n");
        assert_non_null(cl);
        assert_non_null(end);
        /* Only the answer the server closes after says so. */
        const char *close = strstr(at, "\r\nconnection: close\r\n");
        assert_int_equal(close != NULL && close < end, i == 3);
        at = end + 4 + (i == 2 ? 0 : strtoul(cl + 16, NULL, 10)); /* HEAD: no body */
    }
    assert_int_equal(*at, '\0');
}

/* A kept-alive connection is answered 100 times; the 100th answer says `connection: close`, and
 * the connection then ends. */
static void test_the_last_kept_alive_answer_says_close(void **state)
{
    (void)state;
    enum { ASKED = 101 };
    static const char one[] = "GET /nope HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n";
    static char req[ASKED * sizeof one];
    for (int i = 0; i < ASKED; i++)
        memcpy(req + i * (sizeof one - 1), one, sizeof one);
    static char resp[1 << 17];
    pipeline(req, resp, sizeof resp);
    size_t answers = 0, closes = 0;
    const char *last = NULL;
    for (const char *at = resp; (at = strstr(at, "HTTP/1.1 404 Not Found\r\n")) != NULL; at++) {
        answers++;
        last = at;
    }
    for (const char *at = resp; (at = strstr(at, "\r\nconnection: close\r\n")) != NULL; at++)
        closes++;
    assert_int_equal(answers, 100);
    assert_int_equal(closes, 1);
    assert_non_null(strstr(last, "\r\nconnection: close\r\n"));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_other_websocket_versions_get_400_with_13),
        cmocka_unit_test(test_bad_keys_get_400),
        cmocka_unit_test(test_non_get_gets_405),
        cmocka_unit_test(test_http_1_0_gets_426),
        cmocka_unit_test(test_query_pairs_are_never_dropped),
        cmocka_unit_test(test_oversized_requests),
        cmocka_unit_test(test_heads_within_the_limits_are_served),
        cmocka_unit_test(test_a_slow_head_within_the_deadline_is_served),
        cmocka_unit_test(test_a_head_past_the_deadline_is_closed),
        cmocka_unit_test(test_valid_handshake_still_upgrades),
        cmocka_unit_test(test_stream_upgrade_gets_the_servers_own_101),
        cmocka_unit_test(test_an_upgrade_after_a_probe_on_one_connection_still_streams),
        cmocka_unit_test(test_a_request_body_is_refused_and_the_server_goes_on),
        cmocka_unit_test(test_probes_keep_the_connection_alive),
        cmocka_unit_test(test_the_last_kept_alive_answer_says_close),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
