/* SPDX-License-Identifier: Apache-2.0 */
/* Self-test of the end-to-end test support: the WebSocket/HTTP client and the ledger-flow reader
 * against a tiny scripted in-test server, and the child-process harness on /bin/sh. */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include <xxhash.h>
#include <zstd.h>

#include "support/procharness.h"
#include "support/wsclient.h"
#include "wire/wire.h"

#define SRV_WAIT_MS 5000
#define CLIENT_WAIT_MS 5000

/* ------------------------------------------------------------------------------------------ */
/* A one-connection scripted server. Nothing in the server thread asserts (cmocka is not
 * thread-safe): it records what it saw and the main thread asserts after joining. */

enum { HS_OK, HS_BAD_ACCEPT, HS_RAW };

typedef struct srv srv;
typedef void (*script_fn)(srv *s, int fd);

struct srv {
    int lfd, port;
    pthread_t th;
    int mode;
    const char *raw_response; /* HS_RAW: sent verbatim instead of a 101 */
    script_fn script;
    int gate[2]; /* main → server: one byte per "go on" */
    char request[4096];
    bool handshake_ok;
    /* what the server received from the client */
    int n_pongs;
    uint8_t pong[126];
    size_t pong_len;
    bool pong_masked;
    bool got_close;
    int close_code; /* 1005 for an empty close payload */
    size_t close_len;
    char failure[256]; /* server-side problem, "" when fine */
};

static int64_t now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static int wait_in(int fd, int timeout_ms)
{
    for (;;) {
        struct pollfd pfd = {.fd = fd, .events = POLLIN};
        int r = poll(&pfd, 1, timeout_ms);
        if (r < 0 && errno == EINTR)
            continue;
        return r;
    }
}

static int read_full(int fd, void *buf, size_t len, int timeout_ms)
{
    uint8_t *p = buf;
    int64_t deadline = now_ms() + timeout_ms;
    while (len) {
        int left = (int)(deadline - now_ms());
        if (left <= 0 || wait_in(fd, left) <= 0)
            return -1;
        ssize_t n = recv(fd, p, len, 0);
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0)
            return -1;
        p += n;
        len -= (size_t)n;
    }
    return 0;
}

static void write_all(int fd, const void *buf, size_t len)
{
    const uint8_t *p = buf;
    while (len) {
        ssize_t n = send(fd, p, len, MSG_NOSIGNAL);
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0)
            return;
        p += n;
        len -= (size_t)n;
    }
}

static void srv_frame(int fd, int fin, int opcode, const void *data, size_t len)
{
    uint8_t hdr[10];
    size_t h = 0;
    hdr[h++] = (uint8_t)((fin ? 0x80 : 0) | opcode);
    if (len < 126) {
        hdr[h++] = (uint8_t)len;
    } else if (len <= 0xffff) {
        hdr[h++] = 126;
        hdr[h++] = (uint8_t)(len >> 8);
        hdr[h++] = (uint8_t)len;
    } else {
        hdr[h++] = 127;
        for (int i = 7; i >= 0; i--)
            hdr[h++] = (uint8_t)((uint64_t)len >> (8 * i));
    }
    write_all(fd, hdr, h);
    write_all(fd, data, len);
}

static void srv_binary(int fd, const void *data, size_t len)
{
    srv_frame(fd, 1, 2, data, len);
}

static void srv_close(int fd, int code, const char *reason)
{
    uint8_t p[125] = {0};
    size_t n = 0;
    if (code > 0) {
        p[0] = (uint8_t)(code >> 8);
        p[1] = (uint8_t)code;
        n = 2 + strlen(reason);
        memcpy(p + 2, reason, strlen(reason));
    }
    srv_frame(fd, 1, 8, p, n);
}

/* Reads one client frame (unmasking it). Returns the opcode or -1. */
static int srv_read_frame(int fd, uint8_t *buf, size_t cap, size_t *len, bool *masked)
{
    uint8_t h[2];
    if (read_full(fd, h, 2, SRV_WAIT_MS) < 0)
        return -1;
    uint64_t n = h[1] & 0x7f;
    if (n == 126) {
        uint8_t e[2];
        if (read_full(fd, e, 2, SRV_WAIT_MS) < 0)
            return -1;
        n = (uint64_t)e[0] << 8 | e[1];
    } else if (n == 127) {
        uint8_t e[8];
        if (read_full(fd, e, 8, SRV_WAIT_MS) < 0)
            return -1;
        n = 0;
        for (int i = 0; i < 8; i++)
            n = n << 8 | e[i];
    }
    *masked = h[1] & 0x80;
    uint8_t mask[4] = {0};
    if (*masked && read_full(fd, mask, 4, SRV_WAIT_MS) < 0)
        return -1;
    if (n > cap || read_full(fd, buf, (size_t)n, SRV_WAIT_MS) < 0)
        return -1;
    for (size_t i = 0; i < n; i++)
        buf[i] ^= mask[i & 3];
    *len = (size_t)n;
    return h[0] & 0x0f;
}

/* Reads client frames until a close (recorded) or EOF; pongs are recorded too. */
static void srv_expect_close(srv *s, int fd)
{
    uint8_t buf[256];
    size_t len;
    bool masked;
    for (;;) {
        int op = srv_read_frame(fd, buf, sizeof buf, &len, &masked);
        if (op < 0)
            return;
        if (op == 0xA) {
            s->n_pongs++;
            continue;
        }
        if (op == 8) {
            s->got_close = true;
            s->close_len = len;
            s->close_code = len >= 2 ? (buf[0] << 8 | buf[1]) : 1005;
            return;
        }
    }
}

static void srv_gate(srv *s)
{
    char c;
    if (wait_in(s->gate[0], SRV_WAIT_MS) <= 0 || read(s->gate[0], &c, 1) != 1)
        snprintf(s->failure, sizeof s->failure, "gate never opened");
}

static void srv_open_gate(srv *s)
{
    char c = 'g';
    assert_int_equal(write(s->gate[1], &c, 1), 1);
}

static void *srv_main(void *arg)
{
    srv *s = arg;
    if (wait_in(s->lfd, SRV_WAIT_MS) <= 0) {
        snprintf(s->failure, sizeof s->failure, "no connection");
        return NULL;
    }
    int fd = accept(s->lfd, NULL, NULL);
    if (fd < 0) {
        snprintf(s->failure, sizeof s->failure, "accept: %s", strerror(errno));
        return NULL;
    }
    size_t got = 0;
    while (!strstr(s->request, "\r\n\r\n")) {
        if (got + 1 >= sizeof s->request || wait_in(fd, SRV_WAIT_MS) <= 0)
            goto out;
        ssize_t n = recv(fd, s->request + got, 1, 0); /* byte by byte: never read past the head */
        if (n <= 0)
            goto out;
        got += (size_t)n;
        s->request[got] = '\0';
    }
    if (s->mode == HS_RAW) {
        write_all(fd, s->raw_response, strlen(s->raw_response));
        goto out;
    }
    const char *k = strstr(s->request, "Sec-WebSocket-Key: ");
    char key[64] = "";
    if (k) {
        k += strlen("Sec-WebSocket-Key: ");
        size_t n = strcspn(k, "\r");
        if (n < sizeof key) {
            memcpy(key, k, n);
            key[n] = '\0';
        }
    }
    s->handshake_ok = strncmp(s->request, "GET ", 4) == 0 && strstr(s->request, " HTTP/1.1\r\n") &&
                      strstr(s->request, "\r\nUpgrade: websocket\r\n") &&
                      strstr(s->request, "\r\nConnection: Upgrade\r\n") &&
                      strstr(s->request, "\r\nSec-WebSocket-Version: 13\r\n") &&
                      strstr(s->request, "\r\nHost: 127.0.0.1:") && strlen(key) == 24 &&
                      strcmp(key + 22, "==") == 0;
    char accept[29];
    cs_ws_accept_for_key(s->mode == HS_BAD_ACCEPT ? "not-the-key" : key, accept);
    char resp[256];
    snprintf(resp, sizeof resp,
             "HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
             "Sec-WebSocket-Accept: %s\r\n\r\n",
             accept);
    write_all(fd, resp, strlen(resp));
    if (s->mode == HS_OK && s->script)
        s->script(s, fd);
out:
    close(fd);
    return NULL;
}

static void srv_start(srv *s, int mode, script_fn script, const char *raw)
{
    memset(s, 0, sizeof *s);
    s->mode = mode;
    s->script = script;
    s->raw_response = raw;
    s->lfd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    assert_true(s->lfd >= 0);
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = 0,
                            .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    assert_int_equal(bind(s->lfd, (struct sockaddr *)&a, sizeof a), 0);
    assert_int_equal(listen(s->lfd, 4), 0);
    socklen_t al = sizeof a;
    assert_int_equal(getsockname(s->lfd, (struct sockaddr *)&a, &al), 0);
    s->port = ntohs(a.sin_port);
    assert_int_equal(pipe(s->gate), 0);
    assert_int_equal(pthread_create(&s->th, NULL, srv_main, s), 0);
}

static void srv_join(srv *s)
{
    assert_int_equal(pthread_join(s->th, NULL), 0);
    close(s->lfd);
    close(s->gate[0]);
    close(s->gate[1]);
    assert_string_equal(s->failure, "");
}

static cs_ws *connect_ok(srv *s, const char *path)
{
    int status = -1;
    char body[256];
    cs_ws *ws = cs_ws_connect("127.0.0.1", s->port, path, CLIENT_WAIT_MS, &status, body, sizeof body);
    if (!ws)
        fail_msg("connect: status %d: %s", status, body);
    assert_int_equal(status, 101);
    return ws;
}

/* ------------------------------------------------------------------------------------------ */
/* Primitives                                                                                   */

static void test_sha1_base64_vectors(void **state)
{
    (void)state;
    uint8_t d[20];
    char hex[41];
    cs_sha1("abc", 3, d);
    for (int i = 0; i < 20; i++)
        snprintf(hex + 2 * i, 3, "%02x", d[i]);
    assert_string_equal(hex, "a9993e364706816aba3e25717850c26c9cd0d89d");
    cs_sha1("", 0, d);
    for (int i = 0; i < 20; i++)
        snprintf(hex + 2 * i, 3, "%02x", d[i]);
    assert_string_equal(hex, "da39a3ee5e6b4b0d3255bfef95601890afd80709");
    const char *two = "abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq"; /* 56 B: 2 blocks */
    cs_sha1(two, strlen(two), d);
    for (int i = 0; i < 20; i++)
        snprintf(hex + 2 * i, 3, "%02x", d[i]);
    assert_string_equal(hex, "84983e441c3bd26ebaae4aa1f95129e5e54670f1");

    const char *in[] = {"", "f", "fo", "foo", "foob", "fooba", "foobar"};
    const char *want[] = {"", "Zg==", "Zm8=", "Zm9v", "Zm9vYg==", "Zm9vYmE=", "Zm9vYmFy"};
    for (int i = 0; i < 7; i++) {
        char out[16];
        assert_int_equal(cs_base64_encode((const uint8_t *)in[i], strlen(in[i]), out, sizeof out),
                         (int)strlen(want[i]));
        assert_string_equal(out, want[i]);
    }
    char small[4];
    assert_int_equal(cs_base64_encode((const uint8_t *)"foo", 3, small, sizeof small), -1);

    char acc[29];
    cs_ws_accept_for_key("dGhlIHNhbXBsZSBub25jZQ==", acc); /* RFC 6455 section 1.3 */
    assert_string_equal(acc, "s3pPLMBiTxaQ9kYGzzhZRbK+xOo=");
}

/* ------------------------------------------------------------------------------------------ */
/* Handshake, messages, control frames                                                          */

static void script_binary(srv *s, int fd)
{
    srv_binary(fd, "hello", 5);
    srv_binary(fd, "", 0);
    srv_close(fd, 1000, "");
    srv_expect_close(s, fd);
}

static void test_handshake_and_binary(void **state)
{
    (void)state;
    srv s;
    srv_start(&s, HS_OK, script_binary, NULL);
    char hdrs[512];
    cs_ws_opts o = {.rcvbuf = 4096, .resp_headers = hdrs, .resp_headers_len = sizeof hdrs};
    int status = 0;
    cs_ws *ws = cs_ws_connect_opts("127.0.0.1", s.port, "/stream?start=5&end=9", &o, CLIENT_WAIT_MS,
                                   &status, NULL, 0);
    assert_non_null(ws);
    assert_int_equal(status, 101);
    assert_non_null(strstr(hdrs, "HTTP/1.1 101 Switching Protocols\r\n"));
    int rcv = 0;
    socklen_t sl = sizeof rcv;
    assert_int_equal(getsockopt(cs_ws_fd(ws), SOL_SOCKET, SO_RCVBUF, &rcv, &sl), 0);
    assert_true(rcv <= 8192 * 2); /* the kernel doubles the request, and keeps a floor */

    cs_ws_msg m;
    assert_int_equal(cs_ws_read(ws, &m, CLIENT_WAIT_MS), CS_WS_BINARY);
    assert_int_equal(m.kind, CS_WS_BINARY);
    assert_int_equal(m.len, 5);
    assert_memory_equal(m.data, "hello", 5);
    assert_int_equal(cs_ws_read(ws, &m, CLIENT_WAIT_MS), CS_WS_BINARY);
    assert_int_equal(m.len, 0);
    assert_non_null(m.data);
    assert_int_equal(cs_ws_read(ws, &m, CLIENT_WAIT_MS), CS_WS_CLOSE);
    assert_int_equal(m.close_code, 1000);
    assert_string_equal(m.reason, "");
    cs_ws_close(ws);
    srv_join(&s);
    assert_true(s.handshake_ok);
    assert_true(strncmp(s.request, "GET /stream?start=5&end=9 HTTP/1.1\r\n", 36) == 0);
    assert_true(s.got_close);
    assert_int_equal(s.close_code, 1000); /* the client echoed the code */
}

static void test_bad_accept_rejected(void **state)
{
    (void)state;
    srv s;
    srv_start(&s, HS_BAD_ACCEPT, NULL, NULL);
    int status = 0;
    char body[256];
    cs_ws *ws = cs_ws_connect("127.0.0.1", s.port, "/stream", CLIENT_WAIT_MS, &status, body,
                              sizeof body);
    assert_null(ws);
    assert_int_equal(status, 101);
    assert_non_null(strstr(body, "Sec-WebSocket-Accept"));
    srv_join(&s);
}

static uint8_t big[70000];

static void script_fragmented(srv *s, int fd)
{
    srv_frame(fd, 0, 2, "abc", 3);
    srv_frame(fd, 1, 9, "mid", 3); /* a control frame between fragments */
    srv_frame(fd, 0, 0, "def", 3);
    srv_frame(fd, 1, 0, "ghi", 3);
    srv_binary(fd, big, 300);         /* 16-bit length */
    srv_binary(fd, big, sizeof big);  /* 64-bit length */
    srv_frame(fd, 1, 1, "h\xc3\xa9llo", 6);
    srv_frame(fd, 0, 1, "te", 2); /* fragmented text */
    srv_frame(fd, 1, 0, "xt", 2);
    srv_close(fd, 1000, "");
    srv_expect_close(s, fd);
}

static void test_fragmented_and_text(void **state)
{
    (void)state;
    for (size_t i = 0; i < sizeof big; i++)
        big[i] = (uint8_t)(i * 31 + 7);
    srv s;
    srv_start(&s, HS_OK, script_fragmented, NULL);
    cs_ws *ws = connect_ok(&s, "/stream");
    cs_ws_msg m;
    assert_int_equal(cs_ws_read(ws, &m, CLIENT_WAIT_MS), CS_WS_BINARY);
    assert_int_equal(m.len, 9);
    assert_memory_equal(m.data, "abcdefghi", 9);
    assert_int_equal(cs_ws_read(ws, &m, CLIENT_WAIT_MS), CS_WS_BINARY);
    assert_int_equal(m.len, 300);
    assert_memory_equal(m.data, big, 300);
    assert_int_equal(cs_ws_read(ws, &m, CLIENT_WAIT_MS), CS_WS_BINARY);
    assert_int_equal(m.len, sizeof big);
    assert_memory_equal(m.data, big, sizeof big);
    assert_int_equal(cs_ws_read(ws, &m, CLIENT_WAIT_MS), CS_WS_TEXT);
    assert_int_equal(m.kind, CS_WS_TEXT);
    assert_string_equal((char *)m.data, "h\xc3\xa9llo");
    assert_int_equal(cs_ws_read(ws, &m, CLIENT_WAIT_MS), CS_WS_TEXT);
    assert_string_equal((char *)m.data, "text");
    assert_int_equal(cs_ws_read(ws, &m, CLIENT_WAIT_MS), CS_WS_CLOSE);
    cs_ws_close(ws);
    srv_join(&s);
    assert_int_equal(s.n_pongs, 1); /* the ping between fragments was answered */
}

static void script_ping(srv *s, int fd)
{
    srv_frame(fd, 1, 9, "p1", 2);
    srv_binary(fd, "after", 5);
    int op = srv_read_frame(fd, s->pong, sizeof s->pong, &s->pong_len, &s->pong_masked);
    if (op == 0xA)
        s->n_pongs++;
    srv_close(fd, 1000, "");
    srv_expect_close(s, fd);
}

static void test_ping_answered_with_pong(void **state)
{
    (void)state;
    srv s;
    srv_start(&s, HS_OK, script_ping, NULL);
    cs_ws *ws = connect_ok(&s, "/stream");
    cs_ws_msg m;
    assert_int_equal(cs_ws_read(ws, &m, CLIENT_WAIT_MS), CS_WS_BINARY);
    assert_memory_equal(m.data, "after", 5);
    assert_int_equal(cs_ws_read(ws, &m, CLIENT_WAIT_MS), CS_WS_CLOSE);
    cs_ws_close(ws);
    srv_join(&s);
    assert_int_equal(s.n_pongs, 1);
    assert_true(s.pong_masked);
    assert_int_equal(s.pong_len, 2);
    assert_memory_equal(s.pong, "p1", 2);
}

static void script_close_4001(srv *s, int fd)
{
    srv_close(fd, 4001, "too far behind: oldest=5 latest=9");
    srv_expect_close(s, fd);
}

static void test_close_code_and_reason(void **state)
{
    (void)state;
    srv s;
    srv_start(&s, HS_OK, script_close_4001, NULL);
    cs_ws *ws = connect_ok(&s, "/stream");
    cs_ws_msg m;
    int code;
    char reason[128];
    assert_int_equal(cs_ws_last_close(ws, &code, reason, sizeof reason), 0);
    assert_int_equal(cs_ws_read(ws, &m, CLIENT_WAIT_MS), CS_WS_CLOSE);
    assert_int_equal(m.close_code, 4001);
    assert_string_equal(m.reason, "too far behind: oldest=5 latest=9");
    assert_int_equal(cs_ws_last_close(ws, &code, reason, sizeof reason), 1);
    assert_int_equal(code, 4001);
    assert_string_equal(reason, "too far behind: oldest=5 latest=9");
    /* Sticky: a further read reports the same close. */
    assert_int_equal(cs_ws_read(ws, &m, 0), CS_WS_CLOSE);
    assert_int_equal(m.close_code, 4001);
    cs_ws_close(ws);
    srv_join(&s);
    assert_true(s.got_close);
    assert_int_equal(s.close_code, 4001);
    assert_int_equal(s.close_len, 2);
}

static void script_close_empty(srv *s, int fd)
{
    srv_close(fd, 0, "");
    srv_expect_close(s, fd);
}

static void test_close_without_code_is_1005(void **state)
{
    (void)state;
    srv s;
    srv_start(&s, HS_OK, script_close_empty, NULL);
    cs_ws *ws = connect_ok(&s, "/stream");
    cs_ws_msg m;
    assert_int_equal(cs_ws_read(ws, &m, CLIENT_WAIT_MS), CS_WS_CLOSE);
    assert_int_equal(m.close_code, 1005);
    assert_string_equal(m.reason, "");
    cs_ws_close(ws);
    srv_join(&s);
    assert_true(s.got_close);
    assert_int_equal(s.close_len, 0); /* 1005 is never sent on the wire */
}

static void script_client_closes(srv *s, int fd)
{
    srv_expect_close(s, fd);
    if (s->got_close)
        srv_close(fd, s->close_code, "bye");
}

static void test_client_initiated_close(void **state)
{
    (void)state;
    srv s;
    srv_start(&s, HS_OK, script_client_closes, NULL);
    cs_ws *ws = connect_ok(&s, "/stream");
    assert_int_equal(cs_ws_send_close(ws, 1000, "consumer done"), 0);
    cs_ws_msg m;
    assert_int_equal(cs_ws_read(ws, &m, CLIENT_WAIT_MS), CS_WS_CLOSE);
    assert_int_equal(m.close_code, 1000);
    assert_string_equal(m.reason, "bye");
    cs_ws_close(ws);
    srv_join(&s);
    assert_int_equal(s.close_code, 1000);
    assert_int_equal(s.close_len, 2 + strlen("consumer done"));
}

static void script_eof(srv *s, int fd)
{
    (void)s;
    srv_binary(fd, "last", 4);
}

static void test_eof_without_close(void **state)
{
    (void)state;
    srv s;
    srv_start(&s, HS_OK, script_eof, NULL);
    cs_ws *ws = connect_ok(&s, "/stream");
    cs_ws_msg m;
    assert_int_equal(cs_ws_read(ws, &m, CLIENT_WAIT_MS), CS_WS_BINARY);
    assert_memory_equal(m.data, "last", 4);
    assert_int_equal(cs_ws_read(ws, &m, CLIENT_WAIT_MS), CS_WS_EOF);
    assert_int_equal(cs_ws_last_close(ws, NULL, NULL, 0), 0);
    assert_int_equal(cs_ws_read(ws, &m, 0), CS_WS_EOF);
    cs_ws_close(ws);
    srv_join(&s);
}

static void script_slow(srv *s, int fd)
{
    const uint8_t frame[] = {0x82, 10, 's', 'l', 'o', 'w', '-', 'f', 'r', 'a', 'm', 'e'};
    write_all(fd, frame, 3); /* header and one byte: a partial frame */
    srv_gate(s);
    write_all(fd, frame + 3, sizeof frame - 3);
    srv_close(fd, 1000, "");
    srv_expect_close(s, fd);
}

static void test_read_timeout_keeps_partial_frame(void **state)
{
    (void)state;
    srv s;
    srv_start(&s, HS_OK, script_slow, NULL);
    cs_ws *ws = connect_ok(&s, "/stream");
    cs_ws_msg m;
    int64_t t0 = now_ms();
    assert_int_equal(cs_ws_read(ws, &m, 200), CS_WS_TIMEOUT);
    int64_t took = now_ms() - t0;
    assert_true(took >= 190 && took < 3000);
    assert_int_equal(cs_ws_read(ws, &m, 0), CS_WS_TIMEOUT);
    srv_open_gate(&s);
    assert_int_equal(cs_ws_read(ws, &m, CLIENT_WAIT_MS), CS_WS_BINARY);
    assert_int_equal(m.len, 10);
    assert_memory_equal(m.data, "slow-frame", 10);
    assert_int_equal(cs_ws_read(ws, &m, CLIENT_WAIT_MS), CS_WS_CLOSE);
    cs_ws_close(ws);
    srv_join(&s);
}

static void script_violation(srv *s, int fd)
{
    (void)s;
    const uint8_t masked[] = {0x82, 0x81, 1, 2, 3, 4, 'x'};
    write_all(fd, masked, sizeof masked);
    srv_gate(s);
}

static void test_masked_server_frame_is_an_error(void **state)
{
    (void)state;
    srv s;
    srv_start(&s, HS_OK, script_violation, NULL);
    cs_ws *ws = connect_ok(&s, "/stream");
    cs_ws_msg m;
    assert_int_equal(cs_ws_read(ws, &m, CLIENT_WAIT_MS), CS_WS_ERROR);
    assert_non_null(strstr(m.reason, "masked"));
    assert_non_null(strstr(cs_ws_error(ws), "masked"));
    srv_open_gate(&s);
    cs_ws_close(ws);
    srv_join(&s);
}

/* ------------------------------------------------------------------------------------------ */
/* Plain HTTP answers                                                                           */

#define BODY400 "invalid start parameter \"x\"\n"
static const char resp400[] = "HTTP/1.1 400 Bad Request\r\n"
                              "Content-Type: text/plain; charset=utf-8\r\n"
                              "X-Content-Type-Options: nosniff\r\n"
                              "Content-Length: 28\r\n\r\n" BODY400;

static void test_non101_gives_status_and_body(void **state)
{
    (void)state;
    assert_int_equal(strlen(BODY400), 28);
    srv s;
    srv_start(&s, HS_RAW, NULL, resp400);
    int status = 0;
    char body[256];
    cs_ws *ws = cs_ws_connect("127.0.0.1", s.port, "/stream?start=x", CLIENT_WAIT_MS, &status, body,
                              sizeof body);
    assert_null(ws);
    assert_int_equal(status, 400);
    assert_string_equal(body, BODY400);
    srv_join(&s);

    /* Truncation keeps the NUL. */
    srv_start(&s, HS_RAW, NULL, resp400);
    char tiny[8];
    ws = cs_ws_connect("127.0.0.1", s.port, "/stream?start=x", CLIENT_WAIT_MS, &status, tiny,
                       sizeof tiny);
    assert_null(ws);
    assert_int_equal(status, 400);
    assert_string_equal(tiny, "invalid");
    srv_join(&s);
}

static void test_http_get_chunked_and_ctype(void **state)
{
    (void)state;
    static const char chunked404[] = "HTTP/1.1 404 Not Found\r\n"
                                     "Content-Type: text/plain; charset=utf-8\r\n"
                                     "Transfer-Encoding: chunked\r\n\r\n"
                                     "5\r\n404 p\r\ne\r\nage not found\n\r\n0\r\n\r\n";
    srv s;
    srv_start(&s, HS_RAW, NULL, chunked404);
    char body[256], ctype[64];
    assert_int_equal(cs_http_get("127.0.0.1", s.port, "/nope", CLIENT_WAIT_MS, body, sizeof body,
                                 ctype, sizeof ctype),
                     404);
    assert_string_equal(body, "404 page not found\n");
    assert_string_equal(ctype, "text/plain; charset=utf-8");
    srv_join(&s);
    assert_true(strncmp(s.request, "GET /nope HTTP/1.1\r\n", 20) == 0);
    assert_null(strstr(s.request, "Upgrade"));

    static const char health[] = "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\n"
                                 "Content-Length: 76\r\n\r\n"
                                 "{\"oldest\":0,\"latest\":0,\"subscribers\":0,\"live_abandons\":0,"
                                 "\"raw_fallbacks\":0}\n";
    srv_start(&s, HS_RAW, NULL, health);
    assert_int_equal(cs_http_get("127.0.0.1", s.port, "/healthz", CLIENT_WAIT_MS, body, sizeof body,
                                 ctype, sizeof ctype),
                     200);
    assert_string_equal(body, "{\"oldest\":0,\"latest\":0,\"subscribers\":0,\"live_abandons\":0,"
                              "\"raw_fallbacks\":0}\n");
    assert_string_equal(ctype, "application/json");
    srv_join(&s);
}

static void test_http_raw(void **state)
{
    (void)state;
    static const char r426[] = "HTTP/1.1 426 Upgrade Required\r\nConnection: close\r\n\r\n"
                               "body until close";
    srv s;
    srv_start(&s, HS_RAW, NULL, r426);
    char resp[512];
    assert_int_equal(cs_http_raw("127.0.0.1", s.port,
                                 "GET /stream HTTP/1.0\r\nHost: x\r\n\r\n", CLIENT_WAIT_MS, resp,
                                 sizeof resp),
                     426);
    assert_string_equal(resp, r426);
    srv_join(&s);
    assert_string_equal(s.request, "GET /stream HTTP/1.0\r\nHost: x\r\n\r\n");

    /* Content-Length satisfied: returns without waiting for the close. */
    srv_start(&s, HS_RAW, NULL, resp400);
    assert_int_equal(cs_http_raw("127.0.0.1", s.port, "GET /stream?start=x HTTP/1.1\r\n\r\n",
                                 CLIENT_WAIT_MS, resp, sizeof resp),
                     400);
    assert_string_equal(resp, resp400);
    srv_join(&s);

    /* Nothing listening: -1 with the error text. */
    int lfd = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    socklen_t al = sizeof a;
    assert_int_equal(bind(lfd, (struct sockaddr *)&a, sizeof a), 0);
    assert_int_equal(getsockname(lfd, (struct sockaddr *)&a, &al), 0);
    int port = ntohs(a.sin_port);
    close(lfd); /* bound, never listened, closed: connection refused */
    assert_int_equal(cs_http_raw("127.0.0.1", port, "GET / HTTP/1.1\r\n\r\n", 1000, resp,
                                 sizeof resp),
                     -1);
    assert_non_null(strstr(resp, "refused"));
    int status = 7;
    char body[128];
    assert_null(cs_ws_connect("127.0.0.1", port, "/stream", 1000, &status, body, sizeof body));
    assert_int_equal(status, 0);
    assert_non_null(strstr(body, "refused"));
}

/* ------------------------------------------------------------------------------------------ */
/* Ledger flows                                                                                 */

static void send_begin(int fd, uint32_t seq, int64_t stamp)
{
    uint8_t m[CS_WIRE_BEGIN_LEN];
    cs_wire_put_begin(m, seq, stamp);
    srv_binary(fd, m, sizeof m);
}

static void send_chunk(int fd, uint32_t seq, uint32_t idx, uint8_t codec, const void *p, size_t n)
{
    uint8_t *m = malloc(CS_WIRE_CHUNK_HEADER_LEN + n);
    size_t len = cs_wire_append_chunk(m, seq, idx, codec, p, n);
    srv_binary(fd, m, len);
    free(m);
}

static void send_end(int fd, uint32_t seq, uint32_t count, uint64_t total, int64_t stamp, uint64_t h)
{
    uint8_t m[CS_WIRE_END_LEN];
    cs_wire_put_end(m, seq, count, total, stamp, h);
    srv_binary(fd, m, sizeof m);
}

static void send_zstd_chunk(int fd, uint32_t seq, uint32_t idx, const void *raw, size_t n)
{
    size_t cap = ZSTD_compressBound(n);
    void *z = malloc(cap);
    size_t zn = ZSTD_compress(z, cap, raw, n, 1);
    send_chunk(fd, seq, idx, CS_CODEC_ZSTD, z, ZSTD_isError(zn) ? 0 : zn);
    free(z);
}

#define PART2_LEN 5000
static uint8_t ledger7[7 + PART2_LEN];

static void script_ledgers(srv *s, int fd)
{
    /* 7: a raw chunk and a zstd chunk. */
    send_begin(fd, 7, 111);
    send_chunk(fd, 7, 0, CS_CODEC_RAW, ledger7, 7);
    send_zstd_chunk(fd, 7, 1, ledger7 + 7, PART2_LEN);
    send_end(fd, 7, 2, sizeof ledger7, 222, XXH64(ledger7, sizeof ledger7, 0));
    /* 8: a partial, then a stampless redelivery. */
    const char *full = "the complete ledger";
    send_begin(fd, 8, 333);
    send_chunk(fd, 8, 0, CS_CODEC_RAW, "partial", 7);
    send_begin(fd, 8, 0);
    send_chunk(fd, 8, 0, CS_CODEC_RAW, full, strlen(full));
    send_end(fd, 8, 1, strlen(full), 0, XXH64(full, strlen(full), 0));
    /* 9: bad checksum. */
    send_begin(fd, 9, 0);
    send_chunk(fd, 9, 0, CS_CODEC_RAW, "abc", 3);
    send_end(fd, 9, 1, 3, 0, XXH64("abc", 3, 0) + 1);
    /* 10: empty, no chunks. */
    send_begin(fd, 10, 5);
    send_end(fd, 10, 0, 0, 6, XXH64("", 0, 0));
    srv_close(fd, 1000, "");
    srv_expect_close(s, fd);
}

static void test_read_ledger_flow(void **state)
{
    (void)state;
    memcpy(ledger7, "hello, ", 7);
    for (size_t i = 0; i < PART2_LEN; i++)
        ledger7[7 + i] = (uint8_t)"world "[i % 6];
    srv s;
    srv_start(&s, HS_OK, script_ledgers, NULL);
    cs_ws *ws = connect_ok(&s, "/stream?start=7");
    cs_ledger l;
    char err[256];

    assert_int_equal(cs_ws_read_ledger(ws, &l, CLIENT_WAIT_MS, err, sizeof err), 1);
    assert_string_equal(err, "");
    assert_int_equal(l.seq, 7);
    assert_int_equal(l.len, sizeof ledger7);
    assert_memory_equal(l.data, ledger7, sizeof ledger7);
    assert_int_equal(l.emit_start, 111);
    assert_int_equal(l.emit_end, 222);
    assert_int_equal(l.chunks, 2);
    assert_int_equal(l.n_zstd_chunks, 1);
    assert_int_equal(l.discarded, 0);
    assert_true(l.received_unix_nano > 0);
    cs_ledger_free(&l);
    assert_null(l.data);

    assert_int_equal(cs_ws_read_ledger(ws, &l, CLIENT_WAIT_MS, err, sizeof err), 1);
    assert_int_equal(l.seq, 8);
    assert_int_equal(l.len, strlen("the complete ledger"));
    assert_memory_equal(l.data, "the complete ledger", l.len);
    assert_int_equal(l.discarded, 1);
    assert_int_equal(l.emit_start, 0);
    assert_int_equal(l.chunks, 1);
    assert_int_equal(l.n_zstd_chunks, 0);
    cs_ledger_free(&l);

    assert_int_equal(cs_ws_read_ledger(ws, &l, CLIENT_WAIT_MS, err, sizeof err), -1);
    assert_non_null(strstr(err, "checksum"));
    assert_non_null(strstr(err, "ledger 9"));
    assert_null(l.data);

    assert_int_equal(cs_ws_read_ledger(ws, &l, CLIENT_WAIT_MS, err, sizeof err), 1);
    assert_int_equal(l.seq, 10);
    assert_int_equal(l.len, 0);
    assert_int_equal(l.chunks, 0);
    assert_int_equal(l.emit_start, 5);
    assert_int_equal(l.emit_end, 6);
    cs_ledger_free(&l);

    assert_int_equal(cs_ws_read_ledger(ws, &l, CLIENT_WAIT_MS, err, sizeof err), 0);
    assert_string_equal(err, "");
    int code = 0;
    char reason[64];
    assert_int_equal(cs_ws_last_close(ws, &code, reason, sizeof reason), 1);
    assert_int_equal(code, 1000);
    assert_string_equal(reason, "");
    cs_ws_close(ws);
    srv_join(&s);
    assert_int_equal(s.close_code, 1000);
}

static void script_ledger_violations(srv *s, int fd)
{
    send_begin(fd, 1, 0);
    send_chunk(fd, 1, 1, CS_CODEC_RAW, "x", 1); /* index 1 first */
    send_begin(fd, 2, 0);
    send_chunk(fd, 2, 0, CS_CODEC_ZSTD, "notzstd", 7);
    srv_frame(fd, 1, 1, "hi", 2);
    send_begin(fd, 3, 0);
    send_begin(fd, 4, 0);
    send_chunk(fd, 4, 0, CS_CODEC_RAW, "x", 1); /* outside its flow after the reset */
    send_begin(fd, 5, 0);
    uint8_t *zeros = calloc(1, (9u << 20));
    send_zstd_chunk(fd, 5, 0, zeros, 9u << 20); /* expands past the 8 MiB per-chunk bound */
    free(zeros);
    uint8_t junk[] = {0x02, 0x7f, 0, 0, 0, 6};
    srv_binary(fd, junk, sizeof junk);
    send_begin(fd, 6, 0);
    send_chunk(fd, 6, 0, CS_CODEC_RAW, "x", 1);
    send_end(fd, 6, 2, 1, 0, XXH64("x", 1, 0));
    send_begin(fd, 7, 0);
    send_chunk(fd, 7, 0, CS_CODEC_RAW, "x", 1);
    send_end(fd, 7, 1, 2, 0, XXH64("x", 1, 0));
    send_begin(fd, 8, 0);
    send_chunk(fd, 8, 0, CS_CODEC_RAW, "x", 1);
    srv_close(fd, 1001, "source ended before range complete");
    srv_expect_close(s, fd);
}

static void test_read_ledger_violations(void **state)
{
    (void)state;
    srv s;
    srv_start(&s, HS_OK, script_ledger_violations, NULL);
    cs_ws *ws = connect_ok(&s, "/stream");
    cs_ledger l;
    char err[256];
    static const char *want[] = {
        "ledger 1 chunk 1 arrived, expected chunk 0",
        "ledger 2 chunk 0: decompress:",
        "unexpected text message",
        "BEGIN for ledger 4 while assembling 3",
        "CHUNK for ledger 4 outside its flow",
        "ledger 5 chunk 0: decompress:",
        "wire: unknown message type: 0x7f",
        "ledger 6 END declares 2 chunks, 1 arrived",
        "ledger 7 END declares 2 bytes, 1 assembled",
    };
    for (size_t i = 0; i < sizeof want / sizeof want[0]; i++) {
        assert_int_equal(cs_ws_read_ledger(ws, &l, CLIENT_WAIT_MS, err, sizeof err), -1);
        if (!strstr(err, want[i]))
            fail_msg("violation %zu: got \"%s\", want \"%s\"", i, err, want[i]);
    }
    assert_int_equal(cs_ws_read_ledger(ws, &l, CLIENT_WAIT_MS, err, sizeof err), 0);
    assert_string_equal(err, "stream closed mid-assembly of ledger 8");
    int code;
    char reason[64];
    assert_int_equal(cs_ws_last_close(ws, &code, reason, sizeof reason), 1);
    assert_int_equal(code, 1001);
    assert_string_equal(reason, "source ended before range complete");
    cs_ws_close(ws);
    srv_join(&s);
}

static void script_ledger_slow(srv *s, int fd)
{
    send_begin(fd, 20, 1);
    send_chunk(fd, 20, 0, CS_CODEC_RAW, "ab", 2);
    srv_gate(s);
    send_chunk(fd, 20, 1, CS_CODEC_RAW, "cd", 2);
    send_end(fd, 20, 2, 4, 2, XXH64("abcd", 4, 0));
    srv_gate(s); /* then drop the connection without a close frame */
}

static void test_read_ledger_timeout_resumes_and_eof(void **state)
{
    (void)state;
    srv s;
    srv_start(&s, HS_OK, script_ledger_slow, NULL);
    cs_ws *ws = connect_ok(&s, "/stream");
    cs_ledger l;
    char err[256];
    assert_int_equal(cs_ws_read_ledger(ws, &l, 200, err, sizeof err), -1);
    assert_non_null(strstr(err, "timeout"));
    srv_open_gate(&s);
    assert_int_equal(cs_ws_read_ledger(ws, &l, CLIENT_WAIT_MS, err, sizeof err), 1);
    assert_int_equal(l.seq, 20);
    assert_int_equal(l.len, 4);
    assert_memory_equal(l.data, "abcd", 4);
    assert_int_equal(l.chunks, 2);
    cs_ledger_free(&l);
    srv_open_gate(&s);
    assert_int_equal(cs_ws_read_ledger(ws, &l, CLIENT_WAIT_MS, err, sizeof err), -1);
    assert_non_null(strstr(err, "without a close frame"));
    cs_ws_close(ws);
    srv_join(&s);
}

/* ------------------------------------------------------------------------------------------ */
/* procharness                                                                                  */

static void test_proc_listening_and_sigterm(void **state)
{
    (void)state;
    char *argv[] = {"/bin/sh", "-c",
                    "echo hello; echo \"time=x level=INFO msg=\\\"corestreamd listening\\\" "
                    "addr=127.0.0.1:4321\"; sleep 30",
                    NULL};
    cs_proc p;
    assert_int_equal(cs_proc_start(&p, argv), 0);
    assert_true(p.pid > 0);
    assert_int_equal(cs_proc_wait_line(&p, "hello", CLIENT_WAIT_MS), 0);
    char line[256];
    cs_proc_line(&p, line, sizeof line);
    assert_string_equal(line, "hello");
    assert_int_equal(cs_proc_wait_listening(&p, CLIENT_WAIT_MS), 0);
    assert_int_equal(p.port, 4321);
    assert_string_equal(p.addr, "127.0.0.1:4321");
    assert_non_null(strstr(p.log, "hello\n"));
    int64_t t0 = now_ms();
    assert_int_equal(cs_proc_stop(&p, SIGTERM, CLIENT_WAIT_MS), 128 + SIGTERM);
    assert_true(now_ms() - t0 < 3000);
    assert_int_equal(cs_proc_wait_exit(&p, 0), 128 + SIGTERM); /* sticky */
    cs_proc_free(&p);
    cs_proc_free(&p); /* idempotent */
}

static void test_proc_ipv6_listen_form(void **state)
{
    (void)state;
    char *argv[] = {"/bin/sh", "-c",
                    "echo 'time=x level=INFO msg=\"corestreamd listening\" addr=[::]:8462 "
                    "source=synthetic'",
                    NULL};
    cs_proc p;
    assert_int_equal(cs_proc_start(&p, argv), 0);
    assert_int_equal(cs_proc_wait_listening(&p, CLIENT_WAIT_MS), 0);
    assert_int_equal(p.port, 8462);
    assert_string_equal(p.addr, "[::]:8462");
    assert_int_equal(cs_proc_wait_exit(&p, CLIENT_WAIT_MS), 0);
    cs_proc_free(&p);
}

static void test_proc_exit_status_and_stderr(void **state)
{
    (void)state;
    char *argv[] = {"/bin/sh", "-c", "echo one; echo two >&2; printf tail; exit 3", NULL};
    cs_proc p;
    assert_int_equal(cs_proc_start(&p, argv), 0);
    assert_int_equal(cs_proc_wait_line(&p, "two", CLIENT_WAIT_MS), 0);
    /* The unterminated last line counts once the output is over. */
    assert_int_equal(cs_proc_wait_line(&p, "tail", CLIENT_WAIT_MS), 0);
    assert_int_equal(cs_proc_wait_exit(&p, CLIENT_WAIT_MS), 3);
    assert_int_equal(cs_proc_log_count(&p, "one"), 1);
    assert_string_equal(p.log, "one\ntwo\ntail");
    /* A needle that never comes, from a child that is gone: -1 at once. */
    int64_t t0 = now_ms();
    assert_int_equal(cs_proc_wait_line(&p, "never", CLIENT_WAIT_MS), -1);
    assert_true(now_ms() - t0 < 1000);
    cs_proc_free(&p);
}

static void test_proc_successive_matches_and_timeout(void **state)
{
    (void)state;
    char *argv[] = {"/bin/sh", "-c", "echo a 1; echo b; echo a 2; sleep 30", NULL};
    cs_proc p;
    char line[64];
    assert_int_equal(cs_proc_start(&p, argv), 0);
    assert_int_equal(cs_proc_wait_line(&p, "a ", CLIENT_WAIT_MS), 0);
    cs_proc_line(&p, line, sizeof line);
    assert_string_equal(line, "a 1");
    assert_int_equal(cs_proc_wait_line(&p, "a ", CLIENT_WAIT_MS), 0);
    cs_proc_line(&p, line, sizeof line);
    assert_string_equal(line, "a 2");
    int64_t t0 = now_ms();
    assert_int_equal(cs_proc_wait_line(&p, "b", 200), -1); /* "b" came before the last match */
    int64_t took = now_ms() - t0;
    assert_true(took >= 190 && took < 3000);
    assert_int_equal(cs_proc_log_count(&p, "a "), 2);
    assert_int_equal(cs_proc_wait_exit(&p, 100), -1); /* still running */
    cs_proc_free(&p); /* SIGKILLs the group */
}

static void test_proc_stop_timeout_kills(void **state)
{
    (void)state;
    char *argv[] = {"/bin/sh", "-c", "trap '' TERM; echo ready; while :; do sleep 1; done", NULL};
    cs_proc p;
    assert_int_equal(cs_proc_start(&p, argv), 0);
    assert_int_equal(cs_proc_wait_line(&p, "ready", CLIENT_WAIT_MS), 0);
    int64_t t0 = now_ms();
    assert_int_equal(cs_proc_stop(&p, SIGTERM, 300), -1);
    assert_true(now_ms() - t0 < 3000);
    assert_int_equal(p.exited, 1);
    assert_int_equal(p.status, 128 + SIGKILL);
    cs_proc_free(&p);
}

static void test_proc_start_failure(void **state)
{
    (void)state;
    char *argv[] = {"/nonexistent/corestreamd", NULL};
    cs_proc p;
    assert_int_equal(cs_proc_start(&p, argv), -1);
    assert_int_equal(errno, ENOENT);
    cs_proc_free(&p);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_sha1_base64_vectors),
        cmocka_unit_test(test_handshake_and_binary),
        cmocka_unit_test(test_bad_accept_rejected),
        cmocka_unit_test(test_fragmented_and_text),
        cmocka_unit_test(test_ping_answered_with_pong),
        cmocka_unit_test(test_close_code_and_reason),
        cmocka_unit_test(test_close_without_code_is_1005),
        cmocka_unit_test(test_client_initiated_close),
        cmocka_unit_test(test_eof_without_close),
        cmocka_unit_test(test_read_timeout_keeps_partial_frame),
        cmocka_unit_test(test_masked_server_frame_is_an_error),
        cmocka_unit_test(test_non101_gives_status_and_body),
        cmocka_unit_test(test_http_get_chunked_and_ctype),
        cmocka_unit_test(test_http_raw),
        cmocka_unit_test(test_read_ledger_flow),
        cmocka_unit_test(test_read_ledger_violations),
        cmocka_unit_test(test_read_ledger_timeout_resumes_and_eof),
        cmocka_unit_test(test_proc_listening_and_sigterm),
        cmocka_unit_test(test_proc_ipv6_listen_form),
        cmocka_unit_test(test_proc_exit_status_and_stderr),
        cmocka_unit_test(test_proc_successive_matches_and_timeout),
        cmocka_unit_test(test_proc_stop_timeout_kills),
        cmocka_unit_test(test_proc_start_failure),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
