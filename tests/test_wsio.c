/* SPDX-License-Identifier: Apache-2.0 */
/* The stream I/O threads (corestreamd/net/wsio.h) against a real in-process client over
 * loopback, TLS and plaintext through the one transport (xport.h): what a subscriber can send
 * after the server's close, and pings answered while the socket is full, must not corrupt the
 * connection's state; batches (several messages in one gather write) must arrive whole and in
 * order across partial writes, with pongs between whole frames only. cs_wsio_move hands a connection from the
 * background thread to a live one mid-stream: its byte stream stays whole and in order, pings are
 * answered on the new thread, a close works there, and a stop with it in transit ends it once.
 * Frames the client sent right behind its upgrade request (early bytes) are all acted on, however
 * many. */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <openssl/err.h>
#include <openssl/ssl.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <unistd.h>

#include "corestreamd/stream/message.h"
#include "corestreamd/net/tls.h"
#include "corestreamd/net/wsio.h"
#include "support/certs.h"
#include "support/event.h"
#include "support/tcppair.h"

#define WAIT_NS (20 * 1000000000LL)

static cs_certs g_certs;
static int g_plain = 1; /* a test's prestate: plaintext (NULL: TLS) */
static int64_t g_busy_ns; /* the I/O threads' busy poll for the next fixture */

typedef struct fixture {
    cs_wsio *io;
    SSL_CTX *sctx, *cctx;
    int cfd;
    SSL *cssl;
    cs_wsconn *conn;  /* the server's, set by open (its thread) */
    atomic_int send_msg; /* wake: write send_n messages of this many bytes */
    atomic_int send_n;   /* 0: 1 */
    atomic_int write_rc;
    atomic_int batch;     /* how many messages the last writable turn that wrote wrote */
    atomic_int turns;     /* writable turns that wrote */
    atomic_int close_now; /* wake: queue a close frame with this code */
    atomic_int letter;    /* the next message's fill byte is 'a' + letter % 26 */
    atomic_int move_to;   /* -1: none; else the writable hook asks cs_wsio_move after writing */
    atomic_int thread;    /* the connection's thread (open, moved) */
    atomic_int left_from, gone_count;
    atomic_bool hold_wake; /* thread 0's wake hook waits for release (stop-in-transit test) */
    /* wrote, wrote_again: the first, the second writable turn that wrote is over */
    event opened, gone, wrote, wrote_again, moved, left, held, release;
    int pings, pongs; /* the client's (the test's thread): pings sent, pongs read */
} fixture;

static void *h_open(void *ctx, int thread, cs_wsconn *c, void *arg)
{
    (void)arg;
    fixture *f = ctx;
    f->conn = c;
    atomic_store(&f->thread, thread);
    event_set(&f->opened);
    return f;
}

static int h_writable(void *ctx, void *user)
{
    (void)user;
    fixture *f = ctx;
    int n = atomic_exchange(&f->send_msg, 0);
    int count = atomic_load(&f->send_n), written = 0;
    for (int i = 0; n > 0 && i < (count ? count : 1); i++) {
        cs_msg *m = cs_msg_new((size_t)n);
        memset(m->data, 'a' + atomic_fetch_add(&f->letter, 1) % 26, (size_t)n);
        m->len = (size_t)n;
        int rc = cs_wsio_write(f->conn, m);
        cs_msg_release(m); /* the connection holds its own until the bytes are out */
        if (rc >= 0)
            written++;
        if (rc < 0 || i + 1 == (count ? count : 1) || !cs_wsio_can_write(f->conn)) {
            atomic_store(&f->write_rc, rc);
            break;
        }
    }
    int to = atomic_exchange(&f->move_to, -1);
    if (to >= 0)
        cs_wsio_move(f->conn, to);
    if (n > 0) {
        atomic_store(&f->batch, written);
        event_set(atomic_fetch_add(&f->turns, 1) == 0 ? &f->wrote : &f->wrote_again);
    }
    return 0;
}

static void h_leave(void *ctx, void *user)
{
    (void)user;
    fixture *f = ctx;
    atomic_store(&f->left_from, atomic_load(&f->thread));
    atomic_store(&f->thread, -1);
    event_set(&f->left);
}

static void h_moved(void *ctx, int thread, void *user)
{
    (void)user;
    fixture *f = ctx;
    atomic_store(&f->thread, thread);
    event_set(&f->moved);
}

static void h_data(void *ctx, void *user)
{
    (void)ctx;
    (void)user;
}

static void h_gone(void *ctx, void *user)
{
    (void)user;
    fixture *f = ctx;
    atomic_fetch_add(&f->gone_count, 1);
    event_set(&f->gone);
}

static void h_wake(void *ctx, int thread)
{
    fixture *f = ctx;
    if (thread == 0 && atomic_exchange(&f->hold_wake, false)) {
        event_set(&f->held);
        (void)event_wait(&f->release, WAIT_NS); /* bounded: the test's own asserts say the rest */
    }
    if (thread != atomic_load(&f->thread))
        return; /* the connection is another thread's (or in transit) */
    if (f->conn && atomic_load(&f->send_msg) > 0)
        cs_wsio_want_write(f->conn);
    int code = f->conn ? atomic_exchange(&f->close_now, 0) : 0;
    if (code)
        cs_wsio_close(f->conn, code, "going");
}

static void h_tick(void *ctx, int thread)
{
    (void)ctx;
    (void)thread;
}

static void h_discard(void *ctx, void *arg)
{
    (void)ctx;
    (void)arg;
}

typedef struct client_hs {
    SSL *ssl;
    int rc;
} client_hs;

static void *client_connect(void *arg)
{
    client_hs *h = arg;
    h->rc = SSL_connect(h->ssl);
    return NULL;
}

/* A connected pair (handshaken unless plain): the server end goes to the I/O thread with
 * early[0..n_early) (the bytes the head reader read past the request head), the client end stays
 * here (blocking, with 20 s timeouts). small: tiny socket buffers, so that the server's writes
 * stall. */
static void fixture_up_on(fixture *f, bool small, bool plain, bool bulk, const uint8_t *early, size_t n_early)
{
    memset(f, 0, sizeof *f);
    atomic_store(&f->move_to, -1);
    atomic_store(&f->thread, -1);
    event_init(&f->opened);
    event_init(&f->gone);
    event_init(&f->wrote);
    event_init(&f->wrote_again);
    event_init(&f->moved);
    event_init(&f->left);
    event_init(&f->held);
    event_init(&f->release);
    cs_err err;
    f->sctx = cs_tls_ctx_new(g_certs.server_cert, g_certs.server_key, NULL, &err);
    assert_non_null(f->sctx);
    f->cctx = SSL_CTX_new(TLS_client_method());
    assert_non_null(f->cctx);
    cs_wsio_hooks h = {.ctx = f, .open = h_open, .writable = h_writable, .data = h_data, .gone = h_gone,
                        .wake = h_wake, .tick = h_tick, .discard = h_discard, .leave = h_leave,
                        .moved = h_moved};
    assert_int_equal(cs_wsio_start(&f->io, 1, g_busy_ns, &h, &err), 0);

    int sfd;
    cs_tcp_pair(&sfd, &f->cfd, small);
    fcntl(sfd, F_SETFL, fcntl(sfd, F_GETFL) | O_NONBLOCK);
    cs_xport *x = plain ? cs_xport_plain(sfd) : cs_xport_tls_server(sfd, f->sctx);
    assert_non_null(x);
    if (!plain) { /* the server's side of the handshake as the head reader drives it */
        f->cssl = SSL_new(f->cctx);
        SSL_set_fd(f->cssl, f->cfd);
        client_hs ch = {.ssl = f->cssl};
        pthread_t th;
        assert_int_equal(pthread_create(&th, NULL, client_connect, &ch), 0);
        int rc = 0;
        for (int i = 0; i < 1000 && rc != 1; i++) {
            const char *why;
            rc = cs_xport_tls_accept(x, &why);
            assert_true(rc >= 0);
            struct pollfd p = {.fd = sfd, .events = rc == 2 ? POLLOUT : POLLIN};
            if (rc != 1)
                assert_int_equal(poll(&p, 1, 20000), 1);
        }
        pthread_join(th, NULL);
        assert_int_equal(rc, 1);
        assert_int_equal(ch.rc, 1);
    }
    assert_int_equal(cs_wsio_add(f->io, x, early, n_early, bulk, NULL), 0);
    assert_true(event_wait(&f->opened, WAIT_NS));
}

static void fixture_up(fixture *f, bool small, bool plain)
{
    fixture_up_on(f, small, plain, false, NULL, 0);
}

static void fixture_down(fixture *f)
{
    cs_wsio_free(f->io);
    SSL_free(f->cssl);
    close(f->cfd);
    SSL_CTX_free(f->sctx);
    SSL_CTX_free(f->cctx);
    event_destroy(&f->opened);
    event_destroy(&f->gone);
    event_destroy(&f->wrote);
    event_destroy(&f->wrote_again);
    event_destroy(&f->moved);
    event_destroy(&f->left);
    event_destroy(&f->held);
    event_destroy(&f->release);
}

static void client_write(fixture *f, const uint8_t *p, size_t n)
{
    if (!f->cssl) {
        assert_int_equal(send(f->cfd, p, n, MSG_NOSIGNAL), (ssize_t)n);
        return;
    }
    assert_int_equal(SSL_write(f->cssl, p, (int)n), (int)n);
}

static int client_read(fixture *f, uint8_t *p, size_t n)
{
    if (!f->cssl)
        return (int)recv(f->cfd, p, n, 0);
    return SSL_read(f->cssl, p, (int)n);
}

/* Exactly n bytes, or -1. */
static int client_read_all(fixture *f, uint8_t *p, size_t n)
{
    for (size_t got = 0; got < n;) {
        int r = client_read(f, p + got, n - got);
        if (r <= 0)
            return -1;
        got += (size_t)r;
    }
    return 0;
}

/* One server frame: opcode, payload length; -1 on EOF or error. Payload into out (cap bytes). */
static int client_frame(fixture *f, uint8_t *op, uint8_t *out, size_t cap, size_t *len)
{
    uint8_t h[10];
    if (client_read_all(f, h, 2) != 0)
        return -1;
    size_t plen = h[1] & 0x7f, ext = plen == 126 ? 2 : plen == 127 ? 8 : 0;
    size_t got = 0;
    if (client_read_all(f, h + 2, ext) != 0)
        return -1;
    if (plen >= 126) {
        plen = 0;
        for (size_t i = 0; i < ext; i++)
            plen = plen << 8 | h[2 + i];
    }
    *op = h[0] & 0x0f;
    *len = plen;
    for (got = 0; got < plen;) {
        uint8_t scratch[4096];
        size_t want = plen - got > sizeof scratch ? sizeof scratch : plen - got;
        int n = client_read(f, scratch, want);
        if (n <= 0)
            return -1;
        if (got < cap)
            memcpy(out + got, scratch, (size_t)n > cap - got ? cap - got : (size_t)n);
        got += (size_t)n;
    }
    return 0;
}

/* After the server's 1008 the peer sends another data frame and, in the same read, more frames.
 * The buffer's used bytes must not be reset under the parser: those frames would be parsed past
 * the end of the read buffer, and a ping there unmasked (written) over the connection's own state
 * (here: its pending-message pointer, freed when the connection ends). The connection must
 * simply end. */
static void test_data_frame_while_closing_ends_the_connection(void **state)
{
    bool plain = *state != NULL;
    fixture f;
    fixture_up(&f, false, plain);
    const uint8_t data[] = {0x82, 0x80, 0, 0, 0, 0};
    client_write(&f, data, sizeof data);
    uint8_t op, pl[128];
    size_t len;
    assert_int_equal(client_frame(&f, &op, pl, sizeof pl, &len), 0);
    assert_int_equal(op, 0x8);
    assert_int_equal(pl[0] << 8 | pl[1], 1008);

    /* 1024 bytes, the read buffer's size: a data header, more empty data headers up to byte
     * 1018, then a masked ping whose 16-byte payload lies past the buffer's end. */
    uint8_t evil[1024];
    size_t o = 0;
    memcpy(evil, data, 6);
    o = 6;
    while (o + 6 <= 1002) {
        memcpy(evil + o, data, 6);
        o += 6;
    }
    const uint8_t data126[] = {0x82, 0xfe, 0, 0, 0, 0, 0, 0};
    memcpy(evil + o, data126, 8);
    o += 8;
    memcpy(evil + o, data126, 8);
    o += 8;
    assert_int_equal(o, 1018);
    const uint8_t ping[] = {0x89, 0x80 | 16, 0x41, 0x41, 0x41, 0x41};
    memcpy(evil + o, ping, 6);
    client_write(&f, evil, sizeof evil);

    assert_true(event_wait(&f.gone, WAIT_NS));
    fixture_down(&f);
}

/* A client may send frames right behind its upgrade request; the head reader hands what it read
 * of them to cs_wsio_add as early bytes (up to its head limit, about 16 KiB). Here 5 KiB of masked
 * pings, each with its own payload, and then a close: far more than the 1 KiB read buffer, with a
 * frame across its end. Every ping is answered with its pong, in order, and the close is
 * echoed: the server's bytes are exactly those. The client's write side is shut, so a frame
 * cut short by a lost byte would end the connection at once instead of waiting for more. */
static void test_early_frames_past_the_read_buffer_are_all_parsed(void **state)
{
    bool plain = *state != NULL;
    static uint8_t early[5 * 1024], want[5 * 1024];
    const uint8_t close_frame[] = {0x88, 0x82, 9, 8, 7, 6, 0x03 ^ 9, 0xe8 ^ 8};
    size_t n = 0, wn = 0;
    int pings = 0;
    for (;; pings++) {
        size_t plen = 100 + (size_t)pings % 26; /* 100..125: frames of 106..131 bytes */
        if (n + 6 + plen + sizeof close_frame > sizeof early)
            break;
        const uint8_t mask[4] = {(uint8_t)pings, 0x5a, (uint8_t)(pings * 7), 0xc3};
        early[n++] = 0x89;
        early[n++] = (uint8_t)(0x80 | plen);
        memcpy(early + n, mask, 4);
        n += 4;
        want[wn++] = 0x8a;
        want[wn++] = (uint8_t)plen;
        for (size_t k = 0; k < plen; k++) {
            uint8_t b = (uint8_t)(pings * 31 + k);
            early[n++] = b ^ mask[k % 4];
            want[wn++] = b;
        }
    }
    memcpy(early + n, close_frame, sizeof close_frame);
    n += sizeof close_frame;
    const uint8_t echo[] = {0x88, 0x02, 0x03, 0xe8};
    memcpy(want + wn, echo, sizeof echo);
    wn += sizeof echo;
    assert_int_equal(pings, 43);
    assert_int_equal(n, 5027); /* the 10th ping spans bytes 990..1105 */

    fixture f;
    fixture_up_on(&f, false, plain, false, early, n);
    assert_int_equal(shutdown(f.cfd, SHUT_WR), 0);
    static uint8_t got[sizeof want];
    assert_int_equal(client_read_all(&f, got, wn), 0);
    assert_memory_equal(got, want, wn);
    uint8_t more;
    assert_true(client_read(&f, &more, 1) <= 0); /* the end: nothing after the close */
    assert_true(event_wait(&f.gone, WAIT_NS));
    assert_int_equal(atomic_load(&f.gone_count), 1);
    fixture_down(&f);
}

/* A close the server must not echo is answered on the wire with what RFC 6455 asks: a code
 * that may not be sent and a one-byte payload with 1002, a reason that is not UTF-8 with 1007
 * (the table of answers is test_wsserver's); then the connection ends. */
static void test_refused_closes_are_answered_1002_or_1007(void **state)
{
    bool plain = *state != NULL;
    static const struct {
        uint8_t payload[4];
        size_t len;
        const char *answer; /* code, then reason */
        size_t answer_len;
    } cases[] = {
        {{0x03, 0xed}, 2, "\x03\xea" "close code 1005 may not be sent", 33},
        {{0x03}, 1, "\x03\xea" "close payload of one byte", 27},
        {{0x03, 0xe8, 0xc0, 0xaf}, 4, "\x03\xef" "close reason is not UTF-8", 27},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        const uint8_t mask[4] = {0x11, 0x22, 0x33, 0x44};
        uint8_t frame[16] = {0x88, (uint8_t)(0x80 | cases[i].len), 0x11, 0x22, 0x33, 0x44};
        for (size_t k = 0; k < cases[i].len; k++)
            frame[6 + k] = cases[i].payload[k] ^ mask[k % 4];
        fixture f;
        fixture_up_on(&f, false, plain, false, frame, 6 + cases[i].len);
        uint8_t want[2 + 125], got[2 + 125];
        want[0] = 0x88;
        want[1] = (uint8_t)cases[i].answer_len;
        memcpy(want + 2, cases[i].answer, cases[i].answer_len);
        assert_int_equal(client_read_all(&f, got, 2 + cases[i].answer_len), 0);
        assert_memory_equal(got, want, 2 + cases[i].answer_len);
        uint8_t more;
        assert_true(client_read(&f, &more, 1) <= 0);
        assert_true(event_wait(&f.gone, WAIT_NS));
        fixture_down(&f);
    }
}

/* Pings of alternating sizes while the client reads nothing, then a message: a pong the socket
 * took only part of goes out whole before anything else, and a newer ping does not rewrite it.
 * The connection survives, and the message arrives whole after the pongs. */
static void test_half_written_pong_goes_first(void **state)
{
    bool plain = *state != NULL;
    fixture f;
    fixture_up(&f, true, plain);
    uint8_t big[6 + 125], small[6] = {0x89, 0x80, 1, 2, 3, 4};
    big[0] = 0x89;
    big[1] = 0x80 | 125;
    memset(big + 2, 0, sizeof big - 2);
    /* ~300 KB of pongs asked for: far more than the two small socket buffers hold. */
    for (int i = 0; i < 2000; i++) {
        client_write(&f, big, sizeof big);
        client_write(&f, small, sizeof small);
    }
    atomic_store(&f.send_msg, 1000);
    cs_wsio_wake(f.io, 0);

    int pongs = 0, msgs = 0;
    for (int i = 0; i < 10000 && !msgs; i++) {
        uint8_t op, pl[1000];
        size_t len;
        if (client_frame(&f, &op, pl, sizeof pl, &len) != 0)
            break;
        if (op == 0xA) {
            assert_true(len == 125 || len == 0);
            pongs++;
        } else {
            assert_int_equal(op, 0x2);
            assert_int_equal(len, 1000);
            assert_int_equal(pl[0], 'a');
            assert_int_equal(pl[999], 'a');
            msgs++;
        }
    }
    assert_true(pongs > 0);
    assert_int_equal(msgs, 1);
    assert_true(atomic_load(&f.write_rc) >= 0);
    fixture_down(&f);
}

/* A close decided while a message is stuck behind a peer that reads nothing: the close frame can
 * never go out, and the connection must still end (the write deadline no longer watches a
 * closing subscriber), not hold its socket and admission slot for ever. */
static void test_close_behind_a_stalled_write_still_ends(void **state)
{
    bool plain = *state != NULL;
    fixture f;
    fixture_up(&f, true, plain);
    atomic_store(&f.send_msg, 4 << 20);
    cs_wsio_wake(f.io, 0);
    assert_true(event_wait(&f.wrote, WAIT_NS));
    /* queued, then stuck behind the peer that reads nothing */
    assert_int_equal(atomic_load(&f.write_rc), 1);
    atomic_store(&f.close_now, 1008);
    cs_wsio_wake(f.io, 0);
    assert_true(event_wait(&f.gone, WAIT_NS));
    fixture_down(&f);
}

/* 16 messages of 50 KB in one writable turn, through tiny socket buffers (so every gather write
 * is partial and resumes mid-message, TLS's buffer included), with pings arriving meanwhile: every message
 * arrives whole and in order, each pong lies between whole frames, and the messages stay alive
 * (the hook dropped its references at once) until their last byte is out. */
static void test_batch_survives_partial_writes(void **state)
{
    fixture f;
    fixture_up(&f, true, *state != NULL);
    atomic_store(&f.send_n, 16);
    atomic_store(&f.send_msg, 50000);
    cs_wsio_wake(f.io, 0);
    assert_true(event_wait(&f.wrote, WAIT_NS));
    assert_int_equal(atomic_load(&f.write_rc), 1);
    const uint8_t ping[] = {0x89, 0x84, 1, 2, 3, 4, 'p' ^ 1, 'i' ^ 2, 'n' ^ 3, 'g' ^ 4};
    int msgs = 0, pongs = 0;
    static uint8_t pl[100000];
    for (int i = 0; i < 1000 && msgs < 16; i++) {
        if (i % 3 == 0)
            client_write(&f, ping, sizeof ping);
        uint8_t op;
        size_t len;
        assert_int_equal(client_frame(&f, &op, pl, sizeof pl, &len), 0);
        if (op == 0xA) {
            assert_int_equal(len, 4);
            assert_memory_equal(pl, "ping", 4);
            pongs++;
            continue;
        }
        assert_int_equal(op, 0x2);
        assert_int_equal(len, 50000);
        for (size_t k = 0; k < len; k += 997)
            assert_int_equal(pl[k], 'a' + msgs);
        assert_int_equal(pl[len - 1], 'a' + msgs);
        msgs++;
    }
    assert_int_equal(msgs, 16);
    assert_true(pongs > 0);
    fixture_down(&f);
}

/* --busy-poll-us: the same batch while the I/O thread spins before each wait; wakes, reads and
 * EPOLLOUT resumptions are all found by the non-blocking polls. */
static void test_batch_with_busy_polling(void **state)
{
    g_busy_ns = 200 * 1000;
    test_batch_survives_partial_writes(state);
    g_busy_ns = 0;
}

/* A pong for one of the client's pings: "ping" (read_messages) or "movd" (ping_answered). */
static void assert_our_pong(fixture *f, uint8_t op, const uint8_t *pl, size_t len)
{
    assert_int_equal(op, 0xA);
    assert_int_equal(len, 4);
    if (memcmp(pl, "movd", 4) != 0)
        assert_memory_equal(pl, "ping", 4);
    f->pongs++;
}

/* Reads want messages of len bytes (fill 'a' + k % 26 for the k-th from first), pinging every
 * third frame: every message whole and in order, every pong whole and between frames. The
 * pongs read. */
static int read_messages(fixture *f, int first, int want, size_t len)
{
    static uint8_t pl[100000];
    const uint8_t ping[] = {0x89, 0x84, 1, 2, 3, 4, 'p' ^ 1, 'i' ^ 2, 'n' ^ 3, 'g' ^ 4};
    int msgs = 0, pongs = 0;
    for (int i = 0; i < 10 * want + 100 && msgs < want; i++) {
        if (i % 3 == 0) {
            client_write(f, ping, sizeof ping);
            f->pings++;
        }
        uint8_t op;
        size_t got;
        assert_int_equal(client_frame(f, &op, pl, sizeof pl, &got), 0);
        if (op == 0xA) {
            assert_our_pong(f, op, pl, got);
            pongs++;
            continue;
        }
        assert_int_equal(op, 0x2);
        assert_int_equal(got, len);
        uint8_t c = (uint8_t)('a' + (first + msgs) % 26);
        for (size_t k = 0; k < got; k += 997)
            assert_int_equal(pl[k], c);
        assert_int_equal(pl[got - 1], c);
        msgs++;
    }
    assert_int_equal(msgs, want);
    return pongs;
}

/* A ping with its own payload ("movd"), answered; the client reads nothing but pongs meanwhile.
 * Pongs owed for earlier pings may come first. A ping that arrives while one of them is still
 * half-written goes unanswered (RFC 6455 5.5.3, as the module does), and that pong is then on its
 * way here: so the ping goes again after each older pong. Only the owed pongs can come before the
 * answer, so that many and one more frames are read at most. An answer to a ping sent again that
 * comes after this one is read by read_messages or before the close echo. */
static void ping_answered(fixture *f)
{
    const uint8_t ping[] = {0x89, 0x84, 1, 2, 3, 4, 'm' ^ 1, 'o' ^ 2, 'v' ^ 3, 'd' ^ 4};
    int owed = f->pings - f->pongs;
    client_write(f, ping, sizeof ping);
    f->pings++;
    for (int i = 0; i <= owed; i++) {
        uint8_t op, pl[128];
        size_t len;
        assert_int_equal(client_frame(f, &op, pl, sizeof pl, &len), 0);
        assert_our_pong(f, op, pl, len);
        if (memcmp(pl, "movd", 4) == 0)
            return;
        client_write(f, ping, sizeof ping);
        f->pings++;
    }
    fail_msg("no pong for the ping sent after the move");
}

/* A connection added as bulk lives on the background thread (index 1 beside one live thread);
 * a move asked in the same turn as a 16-message batch waits
 * for the output to be idle, then the connection goes to thread 0: the batch and the next one,
 * written there, arrive whole and in order across the hand-off, pings are answered on both
 * threads, and the client's close is echoed by the new thread.
 *
 * Each batch is read only once its turn is over, and exactly as many messages as the turn wrote:
 * all 16, queued for the turn's one gather write, plaintext and TLS alike. */
static void test_move_keeps_the_stream_whole(void **state)
{
    bool plain = *state != NULL;
    fixture f;
    fixture_up_on(&f, true, plain, true, NULL, 0);
    assert_int_equal(cs_wsio_threads(f.io), 1);
    assert_int_equal(cs_wsio_bulk_thread(f.io), 1);
    assert_int_equal(atomic_load(&f.thread), 1);
    atomic_store(&f.send_n, 16);
    atomic_store(&f.move_to, 0);
    atomic_store(&f.send_msg, 30000);
    cs_wsio_wake(f.io, 1);
    assert_true(event_wait(&f.wrote, WAIT_NS));
    assert_true(atomic_load(&f.write_rc) >= 0);
    int batch = atomic_load(&f.batch);
    assert_int_equal(batch, 16);
    int pongs = read_messages(&f, 0, batch, 30000);
    assert_true(event_wait(&f.moved, WAIT_NS));
    assert_int_equal(atomic_load(&f.left_from), 1);
    assert_int_equal(atomic_load(&f.thread), 0);
    ping_answered(&f);
    assert_int_equal(atomic_load(&f.letter), batch);
    atomic_store(&f.send_msg, 30000);
    cs_wsio_wake(f.io, 0);
    assert_true(event_wait(&f.wrote_again, WAIT_NS));
    assert_true(atomic_load(&f.write_rc) >= 0);
    int batch2 = atomic_load(&f.batch);
    assert_int_equal(batch2, 16);
    pongs += read_messages(&f, batch, batch2, 30000);
    assert_true(pongs > 0);
    const uint8_t close_frame[] = {0x88, 0x82, 0, 0, 0, 0, 0x03, 0xe8};
    client_write(&f, close_frame, sizeof close_frame);
    /* Nothing but pongs still owed can come before the echo. */
    int owed = f.pings - f.pongs;
    uint8_t op, pl[128];
    size_t len;
    for (int i = 0; i <= owed; i++) {
        assert_int_equal(client_frame(&f, &op, pl, sizeof pl, &len), 0);
        if (op != 0xA)
            break;
        assert_our_pong(&f, op, pl, len);
    }
    assert_int_equal(op, 0x8);
    assert_int_equal(len, 2);
    assert_int_equal(pl[0] << 8 | pl[1], 1000);
    assert_true(event_wait(&f.gone, WAIT_NS));
    assert_int_equal(atomic_load(&f.gone_count), 1);
    fixture_down(&f);
}

/* A stop while a moved connection sits in the target's inbox (thread 0 is held in its wake hook
 * as the connection leaves thread 1): it ends once, with gone, and nothing leaks. */
static void test_stop_with_a_connection_in_transit(void **state)
{
    bool plain = *state != NULL;
    fixture f;
    fixture_up_on(&f, false, plain, true, NULL, 0);
    atomic_store(&f.hold_wake, true);
    cs_wsio_wake(f.io, 0);
    assert_true(event_wait(&f.held, WAIT_NS));
    atomic_store(&f.move_to, 0);
    atomic_store(&f.send_msg, 100);
    cs_wsio_wake(f.io, 1);
    assert_true(event_wait(&f.left, WAIT_NS));
    /* thread 0 stops right after its hook: its stop flag may come before or after it looks at
     * its inbox, and the connection must end once either way */
    atomic_store(&f.thread, -2);
    event_set(&f.release);
    cs_wsio_stop(f.io);
    assert_int_equal(atomic_load(&f.gone_count), 1);
    if (event_wait(&f.moved, 0)) /* adopted just before the stop: by thread 0 */
        assert_int_equal(atomic_load(&f.thread), 0);
    fixture_down(&f);
}

static int setup(void **state)
{
    (void)state;
    return cs_certs_make(&g_certs);
}

static int teardown(void **state)
{
    (void)state;
    cs_certs_remove(&g_certs);
    return 0;
}

int main(void)
{
    signal(SIGPIPE, SIG_IGN); /* as corestreamd: a dropped connection is an error, not a signal */
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_prestate(test_data_frame_while_closing_ends_the_connection, NULL),
        cmocka_unit_test_prestate(test_half_written_pong_goes_first, NULL),
        cmocka_unit_test_prestate(test_close_behind_a_stalled_write_still_ends, NULL),
        cmocka_unit_test_prestate(test_data_frame_while_closing_ends_the_connection, &g_plain),
        cmocka_unit_test_prestate(test_half_written_pong_goes_first, &g_plain),
        cmocka_unit_test_prestate(test_close_behind_a_stalled_write_still_ends, &g_plain),
        cmocka_unit_test_prestate(test_early_frames_past_the_read_buffer_are_all_parsed, NULL),
        cmocka_unit_test_prestate(test_early_frames_past_the_read_buffer_are_all_parsed, &g_plain),
        cmocka_unit_test_prestate(test_refused_closes_are_answered_1002_or_1007, NULL),
        cmocka_unit_test_prestate(test_refused_closes_are_answered_1002_or_1007, &g_plain),
        cmocka_unit_test_prestate(test_batch_survives_partial_writes, NULL),
        cmocka_unit_test_prestate(test_batch_survives_partial_writes, &g_plain),
        cmocka_unit_test_prestate(test_batch_with_busy_polling, NULL),
        cmocka_unit_test_prestate(test_batch_with_busy_polling, &g_plain),
        cmocka_unit_test_prestate(test_move_keeps_the_stream_whole, NULL),
        cmocka_unit_test_prestate(test_move_keeps_the_stream_whole, &g_plain),
        cmocka_unit_test_prestate(test_stop_with_a_connection_in_transit, NULL),
        cmocka_unit_test_prestate(test_stop_with_a_connection_in_transit, &g_plain),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
