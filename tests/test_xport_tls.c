/* SPDX-License-Identifier: Apache-2.0 */
/* The TLS transport's output buffer (issue 41.2): records are sealed into the writing thread's own
 * buffer, and a connection keeps a buffer of its own only for what its socket refused. What a
 * client sees: every byte written arrives, in order, on its own connection, also when two
 * connections written from the same thread alternate while one of them cannot take everything;
 * and a connection that keeps up holds nothing between writes. */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <openssl/ssl.h>
#include <poll.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <unistd.h>

#include "corestreamd/net/tls.h"
#include "support/certs.h"
#include "support/tcppair.h"
#include "transport/xport.h"

static cs_certs g_certs;

typedef struct conn {
    cs_xport *x;
    SSL *cssl;
    int cfd;
} conn;

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

/* A handshaken pair on 127.0.0.1: the server end a non-blocking TLS transport, the client end
 * blocking. small: socket buffers of 4 KiB, so that the server's writes stall. */
static void conn_up(conn *c, SSL_CTX *sctx, SSL_CTX *cctx, bool small)
{
    int sfd;
    cs_tcp_pair(&sfd, &c->cfd, small);
    fcntl(sfd, F_SETFL, fcntl(sfd, F_GETFL) | O_NONBLOCK);
    c->x = cs_xport_tls_server(sfd, sctx);
    assert_non_null(c->x);
    c->cssl = SSL_new(cctx);
    SSL_set_fd(c->cssl, c->cfd);
    client_hs ch = {.ssl = c->cssl};
    pthread_t th;
    assert_int_equal(pthread_create(&th, NULL, client_connect, &ch), 0);
    int rc = 0;
    for (int i = 0; i < 1000 && rc != 1; i++) {
        const char *why;
        rc = cs_xport_tls_accept(c->x, &why);
        assert_true(rc >= 0);
        struct pollfd p = {.fd = sfd, .events = rc == 2 ? POLLOUT : POLLIN};
        if (rc != 1)
            assert_int_equal(poll(&p, 1, 20000), 1);
    }
    pthread_join(th, NULL);
    assert_int_equal(rc, 1);
    assert_int_equal(ch.rc, 1);
}

static void conn_down(conn *c)
{
    cs_xport_free(c->x);
    SSL_free(c->cssl);
    close(c->cfd);
}

/* Byte i of connection k's stream. */
static uint8_t pattern(int k, size_t i)
{
    return (uint8_t)(i * 131 + (size_t)k * 17 + i / 251);
}

typedef struct reader {
    conn *c;
    int k;
    size_t want;
    size_t got;
    bool same;
} reader;

static void *read_all(void *arg)
{
    reader *r = arg;
    uint8_t buf[16384];
    r->same = true;
    while (r->got < r->want) {
        int n = SSL_read(r->c->cssl, buf, sizeof buf);
        if (n <= 0)
            break;
        for (int i = 0; i < n; i++)
            r->same &= buf[i] == pattern(r->k, r->got + (size_t)i);
        r->got += (size_t)n;
    }
    return NULL;
}

/* Writes bytes [off, off + len) of connection k's pattern through its transport; returns what it
 * took. */
static size_t write_pattern(conn *c, int k, size_t off, size_t len)
{
    uint8_t *b = malloc(len);
    assert_non_null(b);
    for (size_t i = 0; i < len; i++)
        b[i] = pattern(k, off + i);
    struct iovec iov[2] = {{b, len / 3}, {b + len / 3, len - len / 3}};
    ssize_t w = cs_xport_writev(c->x, iov, 2);
    free(b);
    assert_true(w >= 0);
    return (size_t)w;
}

static void test_a_connection_that_keeps_up_holds_no_buffer(void **state)
{
    SSL_CTX **ctx = *state;
    conn c;
    conn_up(&c, ctx[0], ctx[1], false);
    reader r = {.c = &c, .k = 1, .want = 3 * 40000};
    pthread_t th;
    assert_int_equal(pthread_create(&th, NULL, read_all, &r), 0);
    size_t off = 0;
    for (int i = 0; i < 3; i++) {
        size_t took = write_pattern(&c, 1, off, 40000);
        off += took;
        /* drained by the reader: what stays pending is flushed by empty writes */
        for (int t = 0; t < 2000 && cs_xport_pending(c.x); t++) {
            struct pollfd p = {.fd = c.x->fd, .events = POLLOUT};
            poll(&p, 1, 10);
            assert_true(cs_xport_writev(c.x, NULL, 0) >= 0);
        }
        assert_int_equal(cs_xport_pending(c.x), 0);
        assert_null(c.x->out); /* nothing held between writes */
    }
    assert_int_equal(off, 3 * 40000);
    pthread_join(th, NULL);
    assert_int_equal(r.got, r.want);
    assert_true(r.same);
    conn_down(&c);
}

static void test_refused_bytes_stay_the_connections_own(void **state)
{
    SSL_CTX **ctx = *state;
    conn a, b;
    conn_up(&a, ctx[0], ctx[1], true);  /* its client reads nothing yet */
    conn_up(&b, ctx[0], ctx[1], false); /* read as it goes */
    const size_t total = 600000;
    reader rb = {.c = &b, .k = 2, .want = total};
    pthread_t tb;
    assert_int_equal(pthread_create(&tb, NULL, read_all, &rb), 0);
    size_t offa = 0, offb = 0;
    /* Alternate the two on this one thread: a's socket fills and its refused records must survive
     * b's sealing, which goes through the same thread's buffer. */
    for (int round = 0; round < 200 && offb < total; round++) {
        offa += write_pattern(&a, 1, offa, 30000);
        if (round == 0)
            assert_true(cs_xport_pending(a.x) > 0); /* the small socket refused some */
        size_t n = total - offb < 30000 ? total - offb : 30000;
        offb += write_pattern(&b, 2, offb, n);
        while (cs_xport_pending(b.x)) {
            struct pollfd p = {.fd = b.x->fd, .events = POLLOUT};
            poll(&p, 1, 100);
            assert_true(cs_xport_writev(b.x, NULL, 0) >= 0);
        }
    }
    assert_int_equal(offb, total);
    pthread_join(tb, NULL);
    assert_int_equal(rb.got, total);
    assert_true(rb.same);
    /* Now a's client reads: everything a's transport took arrives, byte-exact. */
    reader ra = {.c = &a, .k = 1, .want = offa};
    pthread_t ta;
    assert_int_equal(pthread_create(&ta, NULL, read_all, &ra), 0);
    while (cs_xport_pending(a.x)) {
        struct pollfd p = {.fd = a.x->fd, .events = POLLOUT};
        poll(&p, 1, 100);
        assert_true(cs_xport_writev(a.x, NULL, 0) >= 0);
    }
    pthread_join(ta, NULL);
    assert_int_equal(ra.got, offa);
    assert_true(ra.same);
    conn_down(&a);
    conn_down(&b);
}

static int setup(void **state)
{
    static SSL_CTX *ctx[2];
    if (cs_certs_make(&g_certs) != 0)
        return -1;
    cs_err err;
    ctx[0] = cs_tls_ctx_new(g_certs.server_cert, g_certs.server_key, NULL, &err);
    ctx[1] = SSL_CTX_new(TLS_client_method());
    if (!ctx[0] || !ctx[1])
        return -1;
    *state = ctx;
    return 0;
}

static int teardown(void **state)
{
    SSL_CTX **ctx = *state;
    SSL_CTX_free(ctx[0]);
    SSL_CTX_free(ctx[1]);
    cs_certs_remove(&g_certs);
    return 0;
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_a_connection_that_keeps_up_holds_no_buffer),
        cmocka_unit_test(test_refused_bytes_stay_the_connections_own),
    };
    return cmocka_run_group_tests(tests, setup, teardown);
}
