/* SPDX-License-Identifier: Apache-2.0 */
/* The descriptor-exhaustion attack of issue 10, against the real daemon: corestreamd runs under a
 * low `ulimit -n`, a verified subscriber is streaming, and a stranger opens more WebSocket
 * connections than the daemon has descriptors. The subscriber must receive every ledger
 * byte-exact, the ring must keep being written (a failed ring write would stop the daemon with
 * exit 1), the excess must be closed at accept (and logged), and accept must not spin.
 *
 * With CS_TEST_TLS=1 (ctest test_fd_exhaustion_tls) the daemon serves TLS: every stranger
 * completes a TLS handshake before its upgrade request, and the subscriber streams through a
 * plaintext-to-TLS tunnel (support/tlstunnel.h). */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <poll.h>
#include <stdbool.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include <openssl/err.h>
#include <openssl/ssl.h>

#include "common/synthetic.h"
#include "support/certs.h"
#include "support/procharness.h"
#include "support/tlstunnel.h"
#include "support/tmpdir.h"
#include "support/wsclient.h"
#include "support/wait.h"

#ifndef CORESTREAMD_BIN
#error "CORESTREAMD_BIN must name the binary under test"
#endif
#define NOFILE 128   /* the daemon's soft and hard descriptor limit */
#define ATTACKERS 400 /* well past NOFILE */
#define LEDGERS 60
#define LEDGER_SIZE 4096

/* utime + stime of pid in clock ticks. */
static long cpu_ticks(pid_t pid)
{
    char path[64], buf[1024];
    snprintf(path, sizeof path, "/proc/%d/stat", (int)pid);
    FILE *f = fopen(path, "r");
    if (!f)
        return -1;
    size_t n = fread(buf, 1, sizeof buf - 1, f);
    fclose(f);
    buf[n] = '\0';
    const char *p = strrchr(buf, ')'); /* the command name may hold spaces */
    long ut = 0, st = 0;
    if (!p || sscanf(p + 2, "%*c %*d %*d %*d %*d %*d %*u %*u %*u %*u %*u %ld %ld", &ut, &st) != 2)
        return -1;
    return ut + st;
}

static SSL_CTX *g_tls; /* CS_TEST_TLS: the strangers' client context */
static SSL *g_ssl[ATTACKERS];

/* A stranger's WebSocket upgrade for a ledger far in the future: held open, never served. */
static int attacker(int port, int i)
{
    int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0)
        return -1;
    struct sockaddr_in dst = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port)};
    inet_pton(AF_INET, "127.0.0.1", &dst.sin_addr);
    if (connect(fd, (struct sockaddr *)&dst, sizeof dst) != 0) {
        close(fd);
        return -1;
    }
    static const char req[] = "GET /stream?start=4000000000 HTTP/1.1\r\nHost: 127.0.0.1\r\n"
                              "Upgrade: websocket\r\nConnection: Upgrade\r\n"
                              "Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Version: 13\r\n\r\n";
    if (g_tls) {
        /* A refused connection is closed at accept: the handshake then fails at once. */
        struct timeval tv = {.tv_sec = 5};
        setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
        SSL *ssl = SSL_new(g_tls);
        if (ssl && SSL_set_fd(ssl, fd) == 1 && SSL_connect(ssl) == 1) {
            (void)SSL_write(ssl, req, sizeof req - 1);
            g_ssl[i] = ssl;
        } else {
            SSL_free(ssl);
        }
        ERR_clear_error();
        return fd;
    }
    (void)send(fd, req, sizeof req - 1, MSG_NOSIGNAL);
    return fd;
}

static void test_more_connections_than_descriptors(void **state)
{
    (void)state;
    cs_tmpdir tmp;
    assert_int_equal(cs_tmpdir_make(&tmp, "fdx"), 0);
    const char *t = getenv("CS_TEST_TLS");
    bool tls = t && strcmp(t, "1") == 0;
    cs_certs certs;
    char tls_args[PATH_MAX * 2 + 64] = "";
    if (tls) {
        signal(SIGPIPE, SIG_IGN); /* SSL_write to a refused stranger's socket */
        assert_int_equal(cs_certs_make(&certs), 0);
        snprintf(tls_args, sizeof tls_args, " --tls-cert '%s' --tls-key '%s'", certs.server_cert, certs.server_key);
        g_tls = SSL_CTX_new(TLS_client_method());
        assert_non_null(g_tls);
        assert_int_equal(SSL_CTX_load_verify_locations(g_tls, certs.ca, NULL), 1);
    }
    char cmd[PATH_MAX * 4 + 512];
    snprintf(cmd, sizeof cmd,
             "ulimit -n %d && exec '%s' --listen 127.0.0.1:0 --data-dir '%s/data' --synthetic-size %d "
             "--synthetic-interval 50ms --emit-window 0s --synthetic-count %d --max-connections-per-ip -1%s",
             NOFILE, CORESTREAMD_BIN, tmp.path, LEDGER_SIZE, LEDGERS, tls_args);
    char *argv[] = {"/bin/sh", "-c", cmd, NULL};
    cs_proc p;
    assert_int_equal(cs_proc_start(&p, argv), 0);
    assert_int_equal(cs_proc_wait_listening(&p, WAIT_MS), 0);

    int status = 0;
    char body[256];
    cs_tlstunnel *tun = NULL;
    int port = p.port;
    if (tls)
        assert_int_equal(cs_tlstunnel_start(&tun, p.port, certs.ca, &port), 0);
    cs_ws *ws = cs_ws_connect("127.0.0.1", port, "/stream?start=1&end=60", WAIT_MS, &status, body, sizeof body);
    if (!ws)
        fail_msg("subscriber: status %d %s", status, body);

    long cpu0 = cpu_ticks(p.pid);
    static int fds[ATTACKERS];
    int opened = 0;
    for (int i = 0; i < ATTACKERS; i++)
        if ((fds[i] = attacker(p.port, i)) >= 0)
            opened++;
    assert_true(opened > NOFILE);

    uint8_t *want = malloc(LEDGER_SIZE);
    for (uint32_t seq = 1; seq <= LEDGERS; seq++) {
        cs_ledger l;
        char err[256];
        int r = cs_ws_read_ledger(ws, &l, WAIT_MS, err, sizeof err);
        if (r != 1)
            fail_msg("ledger %u: %d %s", seq, r, err);
        assert_int_equal(l.seq, seq);
        assert_int_equal(l.len, LEDGER_SIZE);
        memset(want, 0, LEDGER_SIZE);
        cs_synthetic_fill(want, LEDGER_SIZE, seq, false);
        assert_memory_equal(l.data, want, LEDGER_SIZE);
        cs_ledger_free(&l);
    }
    free(want);
    long cpu1 = cpu_ticks(p.pid);
    cs_ws_close(ws);

    /* The source ran to its end with every ring write done: a clean exit, not 1. */
    assert_int_equal(cs_proc_wait_exit(&p, WAIT_MS), 0);
    assert_true(cs_proc_log_count(&p, "connections refused at accept") >= 1);
    assert_int_equal(cs_proc_log_count(&p, "too many open files"), 0);
    assert_int_equal(cs_proc_log_count(&p, "level=ERROR"), 0);
    /* ~3 s of streaming 4 KiB ledgers through a flood: an accept spin would burn a core. */
    long hz = sysconf(_SC_CLK_TCK);
    assert_true(cpu0 >= 0 && cpu1 >= cpu0);
    if ((cpu1 - cpu0) * 1000 / hz > 1500)
        fail_msg("the daemon used %ld ms of CPU during the flood", (cpu1 - cpu0) * 1000 / hz);
    for (int i = 0; i < ATTACKERS; i++) {
        SSL_free(g_ssl[i]);
        if (fds[i] >= 0)
            close(fds[i]);
    }
    cs_tlstunnel_stop(tun);
    SSL_CTX_free(g_tls);
    if (tls)
        cs_certs_remove(&certs);
    cs_proc_free(&p);
    cs_tmpdir_remove(&tmp);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_more_connections_than_descriptors),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
