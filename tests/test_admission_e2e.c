/* SPDX-License-Identifier: Apache-2.0 */
/* Admission at accept, end to end in process (issue 10): the per-address and total connection
 * caps close a socket at once and are released when a connection ends, the header deadline
 * closes a connection that never completes its request, and running out of descriptors pauses
 * accept instead of spinning on it. Clients bind their own source address in 127.0.0.0/8 so
 * one test can be several peers. */
#include <stdarg.h>
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
#include <sys/resource.h>
#include <sys/socket.h>
#include <unistd.h>

#include "common/clock.h"
#include "corestreamd/server/server.h"
#include "support/serverharness.h"
#include "support/wait.h"


static int tcp_socket_from(const char *src_ip)
{
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    assert_true(fd >= 0);
    struct sockaddr_in src = {.sin_family = AF_INET};
    assert_int_equal(inet_pton(AF_INET, src_ip, &src.sin_addr), 1);
    assert_int_equal(bind(fd, (struct sockaddr *)&src, sizeof src), 0);
    return fd;
}

static void tcp_connect(int fd, int port)
{
    struct sockaddr_in dst = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port)};
    inet_pton(AF_INET, "127.0.0.1", &dst.sin_addr);
    assert_int_equal(connect(fd, (struct sockaddr *)&dst, sizeof dst), 0);
}

static int connect_from(const char *src_ip, int port)
{
    int fd = tcp_socket_from(src_ip);
    tcp_connect(fd, port);
    return fd;
}

/* Waits for the peer to close: 0 on EOF (or reset), -1 when data came or timeout_ms passed. */
static int wait_eof(int fd, int timeout_ms)
{
    struct pollfd p = {.fd = fd, .events = POLLIN};
    if (poll(&p, 1, timeout_ms) != 1)
        return -1;
    char c;
    ssize_t n = recv(fd, &c, 1, 0);
    return n == 0 || (n < 0 && errno == ECONNRESET) ? 0 : -1;
}

/* GET /healthz on a connected socket: the status code, or -1. */
static int healthz_on(int fd)
{
    static const char req[] = "GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n";
    if (send(fd, req, sizeof req - 1, MSG_NOSIGNAL) != (ssize_t)(sizeof req - 1))
        return -1;
    char buf[1024];
    size_t got = 0;
    int64_t deadline = cs_mono_ns() + WAIT_MS * T_MS;
    while (got < sizeof buf - 1 && cs_mono_ns() < deadline) {
        struct pollfd p = {.fd = fd, .events = POLLIN};
        if (poll(&p, 1, 100) != 1)
            continue;
        ssize_t n = recv(fd, buf + got, sizeof buf - 1 - got, 0);
        if (n <= 0)
            break;
        got += (size_t)n;
        buf[got] = '\0';
        if (strstr(buf, "\r\n\r\n"))
            break;
    }
    buf[got] = '\0';
    int code;
    return sscanf(buf, "HTTP/1.1 %d", &code) == 1 ? code : -1;
}

/* The server counts a connection from accept until it ends: wait until it holds n. */
static void wait_connections(harness *h, int n)
{
    int64_t deadline = cs_mono_ns() + WAIT_MS * T_MS;
    while (cs_server_connections(h->srv) != n && cs_mono_ns() < deadline) {
        struct timespec ts = {0, 2 * 1000 * 1000};
        nanosleep(&ts, NULL); /* the count has no event to wait on; bounded by the deadline */
    }
    assert_int_equal(cs_server_connections(h->srv), n);
}

static harness_opts tip_opts(void)
{
    return (harness_opts){.start = 1, .size = 1024, .interval_ms = 50, .window_ms = 0, .retention = 100};
}

static void test_per_address_cap_closes_at_accept(void **state)
{
    (void)state;
    harness h;
    harness_opts o = tip_opts();
    o.max_connections_per_ip = 2;
    harness_start(&h, &o);
    int a = connect_from("127.0.0.1", h.port), b = connect_from("127.0.0.1", h.port);
    wait_connections(&h, 2);
    int c = connect_from("127.0.0.1", h.port);
    assert_int_equal(wait_eof(c, WAIT_MS), 0); /* closed at once, nothing answered */
    assert_int_equal(cs_server_refused_per_ip(h.srv), 1);
    assert_int_equal(cs_server_refused_total(h.srv), 0);
    /* Another address still gets in while this one is full. */
    int d = connect_from("127.0.0.2", h.port);
    assert_int_equal(healthz_on(d), 200);
    /* And the full one gets a place back once one of its connections ends. */
    close(a);
    close(d);
    wait_connections(&h, 1);
    int e = connect_from("127.0.0.1", h.port);
    assert_int_equal(healthz_on(e), 200);
    close(b);
    close(c);
    close(e);
    harness_stop(&h);
}

static void test_total_cap_closes_at_accept(void **state)
{
    (void)state;
    harness h;
    harness_opts o = tip_opts();
    o.max_connections = 3;
    o.max_connections_per_ip = -1;
    harness_start(&h, &o);
    assert_int_equal(cs_server_max_connections(h.srv), 3);
    int fds[3];
    const char *ips[3] = {"127.0.0.1", "127.0.0.2", "127.0.0.3"};
    for (int i = 0; i < 3; i++)
        fds[i] = connect_from(ips[i], h.port);
    wait_connections(&h, 3);
    int x = connect_from("127.0.0.4", h.port);
    assert_int_equal(wait_eof(x, WAIT_MS), 0);
    assert_int_equal(cs_server_refused_total(h.srv), 1);
    close(fds[0]);
    wait_connections(&h, 2);
    int y = connect_from("127.0.0.4", h.port);
    assert_int_equal(healthz_on(y), 200);
    for (int i = 1; i < 3; i++)
        close(fds[i]);
    close(x);
    close(y);
    wait_connections(&h, 0);
    harness_stop(&h);
}

static void test_header_deadline_closes_a_silent_connection(void **state)
{
    (void)state;
    harness h;
    harness_opts o = tip_opts();
    o.header_timeout_s = 1;
    harness_start(&h, &o);
    int silent = connect_from("127.0.0.1", h.port);
    int partial = connect_from("127.0.0.1", h.port);
    static const char head[] = "GET /stream HTTP/1.1\r\nHost: 127.0.0.1\r\n"; /* never finished */
    assert_int_equal(send(partial, head, sizeof head - 1, MSG_NOSIGNAL), (ssize_t)(sizeof head - 1));
    int64_t t0 = cs_mono_ns();
    assert_int_equal(wait_eof(silent, 5000), 0);
    assert_int_equal(wait_eof(partial, 5000), 0);
    int64_t took = cs_mono_ns() - t0;
    assert_true(took >= 500 * T_MS);
    wait_connections(&h, 0);
    close(silent);
    close(partial);
    harness_stop(&h);
}

/* Under a low descriptor limit the total cap shrinks to what the limit leaves, and the
 * per-address cap with it, to half the total: one address flooding the port holds at most half
 * the slots, and a second address still gets in. */
static void test_one_address_never_holds_every_slot(void **state)
{
    (void)state;
    struct rlimit saved, low;
    assert_int_equal(getrlimit(RLIMIT_NOFILE, &saved), 0);
    int probe = dup(0); /* the descriptors in use now */
    assert_true(probe >= 0);
    close(probe);
    low = saved;
    /* The server's threads and its descriptor budget's reserve (fdbudget.h) take some. */
    low.rlim_cur = (rlim_t)(probe + 200);
    assert_int_equal(setrlimit(RLIMIT_NOFILE, &low), 0);
    harness h;
    harness_opts o = tip_opts(); /* the default caps: 4096 in total, 256 per address */
    harness_start(&h, &o);
    assert_int_equal(setrlimit(RLIMIT_NOFILE, &saved), 0);
    uint32_t total = cs_server_max_connections(h.srv), per = cs_server_max_connections_per_ip(h.srv);
    assert_true(total > 10 && total < 200);
    assert_int_equal(per, total / 2);
    int flood[200];
    size_t n = 0;
    for (; n < total; n++)
        flood[n] = connect_from("127.0.0.1", h.port);
    int64_t deadline = cs_mono_ns() + WAIT_MS * T_MS;
    while (cs_server_refused_per_ip(h.srv) < total - per && cs_mono_ns() < deadline) {
        struct timespec ts = {0, 2 * 1000 * 1000};
        nanosleep(&ts, NULL); /* the count has no event to wait on; bounded by the deadline */
    }
    assert_int_equal(cs_server_refused_per_ip(h.srv), total - per);
    wait_connections(&h, (int)per);
    int other = connect_from("127.0.0.2", h.port);
    assert_int_equal(healthz_on(other), 200);
    close(other);
    for (size_t i = 0; i < n; i++)
        close(flood[i]);
    wait_connections(&h, 0);
    harness_stop(&h);
}

/* With no descriptor left, accept4 fails with EMFILE while the listener stays readable: the
 * server must rest instead of retrying in a loop, and serve the waiting connection once a
 * descriptor is free again. The limit is lowered in this process after the sockets the test
 * needs exist. */
static void test_out_of_descriptors_pauses_accept(void **state)
{
    (void)state;
    harness h;
    harness_opts o = tip_opts();
    o.max_connections = -1;
    o.max_connections_per_ip = -1;
    harness_start(&h, &o);
    int pending = tcp_socket_from("127.0.0.1");
    struct rlimit saved, low;
    assert_int_equal(getrlimit(RLIMIT_NOFILE, &saved), 0);
    /* The lowest descriptor a new file would get is the count that is in use; a limit at the
     * highest in use leaves none free. */
    int probe = dup(0);
    assert_true(probe >= 0);
    close(probe);
    low = saved;
    low.rlim_cur = (rlim_t)probe;
    assert_int_equal(setrlimit(RLIMIT_NOFILE, &low), 0);
    tcp_connect(pending, h.port);
    int64_t deadline = cs_mono_ns() + WAIT_MS * T_MS;
    while (cs_server_accept_pauses(h.srv) == 0 && cs_mono_ns() < deadline) {
        struct timespec ts = {0, 2 * 1000 * 1000};
        nanosleep(&ts, NULL);
    }
    uint64_t first = cs_server_accept_pauses(h.srv);
    struct timespec second = {1, 0};
    nanosleep(&second, NULL); /* a second at the limit: how often accept was tried meanwhile */
    uint64_t after = cs_server_accept_pauses(h.srv);
    assert_int_equal(setrlimit(RLIMIT_NOFILE, &saved), 0);
    assert_true(first >= 1);
    /* One try per 100 ms pause, give or take scheduling: a spin would be thousands. */
    assert_true(after - first <= 15);
    assert_int_equal(healthz_on(pending), 200);
    close(pending);
    harness_stop(&h);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_per_address_cap_closes_at_accept),
        cmocka_unit_test(test_total_cap_closes_at_accept),
        cmocka_unit_test(test_one_address_never_holds_every_slot),
        cmocka_unit_test(test_header_deadline_closes_a_silent_connection),
        cmocka_unit_test(test_out_of_descriptors_pauses_accept),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
