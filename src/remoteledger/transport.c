/* SPDX-License-Identifier: Apache-2.0 */
/* The transport under ws:// and wss://: see transport.h. */
#include "remoteledger/transport.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <openssl/err.h>
#include <openssl/ssl.h>
#include <openssl/x509v3.h>
#include <poll.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "common/err.h"

/* TCP keepalive, as Go's default dialer sets it (KeepAlive 30 s, 9 probes). */
#define KA_TIME_S 30
#define KA_INTERVAL_S 30
#define KA_PROBES 9
/* The ciphertext buffer under TLS reads. Measured with bench/rl_throughput (2 vCPUs, loopback):
 * 1 MiB gave the client about 1.6 GB/s per core where OpenSSL reading the socket itself, 64 KiB at
 * a time, gave 1.25; 256 KiB fell in between. */
#define CIPHER_BUF (1024u << 10)

int64_t rli_mono_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

int rli_tp_wake_new(void) { return eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK); }

void rli_tp_wake(int wake_fd)
{
    uint64_t one = 1;
    ssize_t w = write(wake_fd, &one, sizeof one);
    (void)w; /* a full counter is still signalled */
}

void rli_tp_init(rli_tp *t, int wake_fd)
{
    memset(t, 0, sizeof *t);
    t->fd = -1;
    t->wake_fd = wake_fd;
}

void rli_tp_close(rli_tp *t)
{
    if (t->ssl) {
        if (t->tls_up)
            (void)SSL_shutdown(t->ssl); /* one non-blocking close_notify; no wait for the answer */
        SSL_free(t->ssl);
        t->ssl = NULL;
    }
    if (t->ctx) {
        SSL_CTX_free(t->ctx);
        t->ctx = NULL;
    }
    free(t->cbuf);
    t->cbuf = NULL;
    t->cb_off = t->cb_len = 0;
    if (t->fd >= 0) {
        close(t->fd);
        t->fd = -1;
    }
    ERR_clear_error(); /* the thread's OpenSSL error queue is left as the caller found it */
}

static rli_tp_status fail(rli_tp *t, bool tls, const char *fmt, ...) __attribute__((format(printf, 3, 4)));

static rli_tp_status fail(rli_tp *t, bool tls, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(t->err, sizeof t->err, fmt, ap);
    va_end(ap);
    t->err_tls = tls;
    t->tls_up = false;
    return RLI_TP_ERROR;
}

static int64_t mono_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

bool rli_tp_spin(rli_tp *t, int64_t spin_ns)
{
    if (spin_ns <= 0 || t->rd_want_write)
        return false;
    int64_t end = mono_ns() + spin_ns;
    /* A zero-timeout poll per round: the thread stays on its CPU (no sleep, no wake-up latency)
     * and sees data the moment the kernel queues it. */
    struct pollfd p[2] = {{.fd = t->fd, .events = POLLIN}, {.fd = t->wake_fd, .events = POLLIN}};
    do {
        if (poll(p, 2, 0) > 0)
            return true;
    } while (mono_ns() < end);
    return false;
}

rli_tp_status rli_tp_wait(rli_tp *t, bool want_read, bool want_write, int64_t deadline_ms)
{
    short ev = 0;
    if (want_read)
        ev |= t->rd_want_write ? POLLOUT : POLLIN;
    if (want_write)
        ev |= t->wr_want_read ? POLLIN : POLLOUT;
    for (;;) {
        int timeout = -1;
        if (deadline_ms >= 0) {
            int64_t left = deadline_ms - rli_mono_ms();
            if (left <= 0)
                return RLI_TP_TIMEOUT;
            timeout = left > 1000000 ? 1000000 : (int)left;
        }
        struct pollfd p[2] = {{.fd = t->fd, .events = ev}, {.fd = t->wake_fd, .events = POLLIN}};
        int n = poll(p, 2, timeout);
        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0) {
            char e[128];
            return fail(t, false, "poll: %s", cs_go_errno(errno, e, sizeof e));
        }
        if (p[1].revents)
            return RLI_TP_WOKEN;
        if (p[0].revents) /* POLLERR and POLLHUP too: the next read or write says what happened */
            return RLI_TP_OK;
    }
}

/* ---- TCP -------------------------------------------------------------------------------------- */

static void tune(int fd)
{
    int one = 1, idle = KA_TIME_S, intvl = KA_INTERVAL_S, cnt = KA_PROBES;
    setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    setsockopt(fd, SOL_SOCKET, SO_KEEPALIVE, &one, sizeof one);
    setsockopt(fd, IPPROTO_TCP, TCP_KEEPIDLE, &idle, sizeof idle);
    setsockopt(fd, IPPROTO_TCP, TCP_KEEPINTVL, &intvl, sizeof intvl);
    setsockopt(fd, IPPROTO_TCP, TCP_KEEPCNT, &cnt, sizeof cnt);
}

/* "127.0.0.1:1", "[::1]:1", as Go prints a dialled address. */
static void format_addr(const struct addrinfo *ai, char *buf, size_t len)
{
    char h[INET6_ADDRSTRLEN] = "?";
    int port = 0;
    if (ai->ai_family == AF_INET) {
        const struct sockaddr_in *a = (const void *)ai->ai_addr;
        inet_ntop(AF_INET, &a->sin_addr, h, sizeof h);
        port = ntohs(a->sin_port);
        snprintf(buf, len, "%s:%d", h, port);
    } else {
        const struct sockaddr_in6 *a = (const void *)ai->ai_addr;
        inet_ntop(AF_INET6, &a->sin6_addr, h, sizeof h);
        port = ntohs(a->sin6_port);
        snprintf(buf, len, "[%s]:%d", h, port);
    }
}

/* One address: 0 connected, 1 failed (t->err says why), or a status to return as it is. */
static int connect_one(rli_tp *t, const struct addrinfo *ai, int64_t deadline_ms, rli_tp_status *st)
{
    char addr[INET6_ADDRSTRLEN + 16], e[128];
    format_addr(ai, addr, sizeof addr);
    int fd = socket(ai->ai_family, ai->ai_socktype | SOCK_NONBLOCK | SOCK_CLOEXEC, ai->ai_protocol);
    if (fd < 0) {
        fail(t, false, "dial tcp %s: socket: %s", addr, cs_go_errno(errno, e, sizeof e));
        return 1;
    }
    tune(fd);
    t->fd = fd;
    if (connect(fd, ai->ai_addr, ai->ai_addrlen) != 0) {
        if (errno != EINPROGRESS) {
            fail(t, false, "dial tcp %s: connect: %s", addr, cs_go_errno(errno, e, sizeof e));
            goto failed;
        }
        rli_tp_status w = rli_tp_wait(t, false, true, deadline_ms);
        if (w != RLI_TP_OK) {
            *st = w;
            return -1;
        }
        int soerr = 0;
        socklen_t sl = sizeof soerr;
        if (getsockopt(fd, SOL_SOCKET, SO_ERROR, &soerr, &sl) != 0)
            soerr = errno;
        if (soerr) {
            fail(t, false, "dial tcp %s: connect: %s", addr, cs_go_errno(soerr, e, sizeof e));
            goto failed;
        }
    }
    return 0;
failed:
    close(fd);
    t->fd = -1;
    return 1;
}

rli_tp_status rli_tp_connect(rli_tp *t, const char *host, int port, int64_t deadline_ms)
{
    char ports[16];
    snprintf(ports, sizeof ports, "%d", port);
    struct addrinfo hints = {.ai_family = AF_UNSPEC, .ai_socktype = SOCK_STREAM};
    struct addrinfo *res = NULL;
    int g = getaddrinfo(host, ports, &hints, &res);
    if (g != 0) {
        char e[128];
        const char *why = g == EAI_NONAME ? "no such host"
                          : g == EAI_SYSTEM ? cs_go_errno(errno, e, sizeof e)
                                            : gai_strerror(g);
        return fail(t, false, "dial tcp: lookup %s: %s", host, why);
    }
    rli_tp_status st = fail(t, false, "dial tcp: lookup %s: no suitable address", host);
    for (const struct addrinfo *ai = res; ai; ai = ai->ai_next) {
        if (ai->ai_family != AF_INET && ai->ai_family != AF_INET6)
            continue;
        int r = connect_one(t, ai, deadline_ms, &st);
        if (r == 0) {
            st = RLI_TP_OK;
            break;
        }
        if (r < 0)
            break;
    }
    freeaddrinfo(res);
    return st;
}

/* ---- TLS -------------------------------------------------------------------------------------- */

/* OpenSSL's own socket BIO writes with write(2), which raises SIGPIPE on a reset connection; this
 * one sends with MSG_NOSIGNAL, so the library never touches the process's signal dispositions. */
static int bio_write(BIO *b, const char *p, int n)
{
    int fd = ((rli_tp *)BIO_get_data(b))->fd;
    BIO_clear_retry_flags(b);
    ssize_t k = send(fd, p, (size_t)n, MSG_NOSIGNAL);
    if (k < 0 && (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR))
        BIO_set_retry_write(b);
    return (int)k;
}

/* Reads go through a large buffer of ciphertext: one recv() per CIPHER_BUF rather than per
 * OpenSSL read-ahead buffer, as ws:// reads (fewer syscalls, and fewer rounds of the socket
 * lock's backlog processing, which dominate the client's kernel time on loopback). */
static int bio_read(BIO *b, char *p, int n)
{
    rli_tp *t = BIO_get_data(b);
    BIO_clear_retry_flags(b);
    if (t->cb_off == t->cb_len) {
        ssize_t k = recv(t->fd, t->cbuf, CIPHER_BUF, 0);
        if (k <= 0) {
            if (k < 0 && (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR))
                BIO_set_retry_read(b);
            return (int)k;
        }
        t->cb_off = 0;
        t->cb_len = (size_t)k;
    }
    size_t k = t->cb_len - t->cb_off;
    if (k > (size_t)n)
        k = (size_t)n;
    memcpy(p, t->cbuf + t->cb_off, k);
    t->cb_off += k;
    return (int)k;
}

static long bio_ctrl(BIO *b, int cmd, long num, void *ptr)
{
    (void)b;
    (void)num;
    (void)ptr;
    return cmd == BIO_CTRL_FLUSH ? 1 : 0;
}

static int bio_create(BIO *b)
{
    BIO_set_init(b, 1);
    return 1;
}

static BIO_METHOD *bio_method;
static pthread_once_t bio_once = PTHREAD_ONCE_INIT;

static void bio_method_make(void)
{
    BIO_METHOD *m = BIO_meth_new(BIO_get_new_index() | BIO_TYPE_SOURCE_SINK, "remoteledger socket");
    if (m && BIO_meth_set_write(m, bio_write) && BIO_meth_set_read(m, bio_read) &&
        BIO_meth_set_ctrl(m, bio_ctrl) && BIO_meth_set_create(m, bio_create))
        bio_method = m; /* made once per process, freed by OpenSSL's exit handler never: a few bytes */
    else
        BIO_meth_free(m);
}

/* The reason of the most recent error on the queue, "" when there is none. */
static const char *last_reason(void)
{
    unsigned long e = ERR_peek_last_error();
    const char *r = e ? ERR_reason_error_string(e) : NULL;
    return r ? r : "";
}

static rli_tp_status load_fail(rli_tp *t, const char *what, const char *path)
{
    const char *r = last_reason();
    char e[128];
    if (!*r && errno)
        r = cs_go_errno(errno, e, sizeof e);
    return fail(t, true, "tls: %s \"%s\": %s", what, path, *r ? r : "cannot be loaded");
}

static bool set(const char *s) { return s && *s; }

static rli_tp_status make_ctx(rli_tp *t, const rli_tls_config *cfg)
{
    ERR_clear_error();
    SSL_CTX *ctx = SSL_CTX_new(TLS_client_method());
    if (!ctx)
        return fail(t, true, "tls: cannot create a context: %s", last_reason());
    t->ctx = ctx;
    SSL_CTX_set_min_proto_version(ctx, TLS1_2_VERSION);
    /* A FIN without close_notify ends the stream like a plain one: WebSocket frames its own
     * messages, so a truncation is seen there and reported in the same words as on ws://. */
    SSL_CTX_set_options(ctx, SSL_OP_IGNORE_UNEXPECTED_EOF | SSL_OP_NO_RENEGOTIATION);
    SSL_CTX_set_mode(ctx, SSL_MODE_ENABLE_PARTIAL_WRITE | SSL_MODE_ACCEPT_MOVING_WRITE_BUFFER);
    /* Take what the ciphertext buffer holds a record at a time, not a header then a body. */
    SSL_CTX_set_read_ahead(ctx, 1);
    /* AES-128-GCM first, as Go's client orders them on AES hardware: the same strength against
     * any attack that matters here, and faster to decrypt than AES-256. */
    SSL_CTX_set_ciphersuites(ctx, "TLS_AES_128_GCM_SHA256:TLS_AES_256_GCM_SHA384:TLS_CHACHA20_POLY1305_SHA256");
    if (set(cfg->ca_file) || set(cfg->ca_dir)) {
        const char *f = set(cfg->ca_file) ? cfg->ca_file : NULL;
        const char *d = set(cfg->ca_dir) ? cfg->ca_dir : NULL;
        errno = 0;
        if (SSL_CTX_load_verify_locations(ctx, f, d) != 1)
            return load_fail(t, f ? "CA file" : "CA directory", f ? f : d);
    } else if (SSL_CTX_set_default_verify_paths(ctx) != 1) {
        return fail(t, true, "tls: cannot load the system CA paths: %s", last_reason());
    }
    if (set(cfg->cert_file)) {
        const char *key = set(cfg->key_file) ? cfg->key_file : cfg->cert_file;
        errno = 0;
        if (SSL_CTX_use_certificate_chain_file(ctx, cfg->cert_file) != 1)
            return load_fail(t, "client certificate", cfg->cert_file);
        errno = 0;
        if (SSL_CTX_use_PrivateKey_file(ctx, key, SSL_FILETYPE_PEM) != 1 || SSL_CTX_check_private_key(ctx) != 1) {
            if (ERR_GET_REASON(ERR_peek_last_error()) == X509_R_KEY_VALUES_MISMATCH)
                return fail(t, true, "tls: client key \"%s\" does not match certificate \"%s\"", key,
                            cfg->cert_file);
            return load_fail(t, "client key", key);
        }
    }
    SSL_CTX_set_verify(ctx, cfg->insecure_skip_verify ? SSL_VERIFY_NONE : SSL_VERIFY_PEER, NULL);
    return RLI_TP_OK;
}

/* A handshake that failed, in words. */
static rli_tp_status handshake_fail(rli_tp *t, int sslerr, const char *name)
{
    long v = SSL_get_verify_result(t->ssl);
    if (v != X509_V_OK) {
        bool name_err = v == X509_V_ERR_HOSTNAME_MISMATCH || v == X509_V_ERR_IP_ADDRESS_MISMATCH;
        return fail(t, true, "certificate verify failed: %s%s%s", X509_verify_cert_error_string(v),
                    name_err ? " for " : "", name_err ? name : "");
    }
    if (sslerr == SSL_ERROR_SSL) {
        unsigned long e = ERR_peek_last_error();
        int reason = ERR_GET_REASON(e);
        if (ERR_GET_LIB(e) == ERR_LIB_SSL &&
            (reason == SSL_R_WRONG_VERSION_NUMBER || reason == SSL_R_PACKET_LENGTH_TOO_LONG ||
             reason == SSL_R_UNKNOWN_PROTOCOL))
            return fail(t, true, "tls handshake failed: the server did not answer TLS (is it plain ws://?)");
        const char *r = last_reason();
        return fail(t, true, "tls handshake failed: %s", *r ? r : "protocol error");
    }
    if (sslerr == SSL_ERROR_ZERO_RETURN || (sslerr == SSL_ERROR_SYSCALL && errno == 0))
        return fail(t, true, "tls handshake failed: the server closed the connection");
    char e[128];
    return fail(t, true, "tls handshake failed: %s", cs_go_errno(errno, e, sizeof e));
}

/* An IP literal is verified as an address and never sent as SNI (RFC 6066 3). */
static bool is_ip(const char *s)
{
    unsigned char buf[sizeof(struct in6_addr)];
    return inet_pton(AF_INET, s, buf) == 1 || inet_pton(AF_INET6, s, buf) == 1;
}

rli_tp_status rli_tp_tls_start(rli_tp *t, const rli_tls_config *cfg, const char *host, int64_t deadline_ms)
{
    rli_tp_status st = make_ctx(t, cfg);
    if (st != RLI_TP_OK)
        return st;
    pthread_once(&bio_once, bio_method_make);
    const char *name = set(cfg->server_name) ? cfg->server_name : host;
    SSL *ssl = SSL_new(t->ctx);
    BIO *bio = bio_method ? BIO_new(bio_method) : NULL;
    if (!ssl || !bio) {
        SSL_free(ssl);
        BIO_free(bio);
        return fail(t, true, "tls: cannot create a session: %s", last_reason());
    }
    t->ssl = ssl;
    t->cbuf = malloc(CIPHER_BUF);
    if (!t->cbuf)
        return fail(t, true, "tls: out of memory");
    BIO_set_data(bio, t);
    SSL_set_bio(ssl, bio, bio);
    static const unsigned char alpn[] = "\x08http/1.1";
    SSL_set_alpn_protos(ssl, alpn, sizeof alpn - 1);
    X509_VERIFY_PARAM *vp = SSL_get0_param(ssl);
    bool ip = is_ip(name);
    if (!ip)
        SSL_set_tlsext_host_name(ssl, name);
    if (!cfg->insecure_skip_verify) {
        X509_VERIFY_PARAM_set_hostflags(vp, X509_CHECK_FLAG_NO_PARTIAL_WILDCARDS);
        if (ip ? X509_VERIFY_PARAM_set1_ip_asc(vp, name) != 1 : X509_VERIFY_PARAM_set1_host(vp, name, 0) != 1)
            return fail(t, true, "tls: cannot verify against the name \"%s\"", name);
    }
    for (;;) {
        ERR_clear_error();
        errno = 0;
        int r = SSL_connect(ssl);
        if (r == 1)
            break;
        int e = SSL_get_error(ssl, r);
        if (e != SSL_ERROR_WANT_READ && e != SSL_ERROR_WANT_WRITE)
            return handshake_fail(t, e, name);
        t->rd_want_write = e == SSL_ERROR_WANT_WRITE;
        st = rli_tp_wait(t, true, false, deadline_ms);
        t->rd_want_write = false;
        if (st != RLI_TP_OK)
            return st;
    }
    t->tls_up = true;
    return RLI_TP_OK;
}

/* A TLS read or write that failed for good. */
static rli_tp_status io_fail(rli_tp *t, int e)
{
    if (e == SSL_ERROR_ZERO_RETURN || (e == SSL_ERROR_SYSCALL && errno == 0)) {
        t->tls_up = false;
        return RLI_TP_EOF;
    }
    if (e == SSL_ERROR_SYSCALL) {
        char b[128];
        return fail(t, false, "%s", cs_go_errno(errno, b, sizeof b));
    }
    /* In TLS 1.3 the server judges the client's certificate after the client's handshake is done,
     * so its refusal arrives here, as an alert before the first byte of data. */
    const char *r = last_reason();
    return fail(t, true, "%s: %s", t->got_data ? "tls" : "tls handshake failed", *r ? r : "protocol error");
}

rli_tp_status rli_tp_read(rli_tp *t, uint8_t *buf, size_t cap, size_t *n)
{
    *n = 0;
    if (!t->ssl) {
        ssize_t k = recv(t->fd, buf, cap, 0);
        if (k > 0) {
            *n = (size_t)k;
            return RLI_TP_OK;
        }
        if (k == 0)
            return RLI_TP_EOF;
        if (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR)
            return RLI_TP_AGAIN;
        char b[128];
        return fail(t, false, "%s", cs_go_errno(errno, b, sizeof b));
    }
    t->rd_want_write = false;
    /* One record per SSL_read: keep going while records are there, so a wake-up hands the
     * caller as much as one plain recv() would. */
    while (*n < cap) {
        size_t k = 0;
        ERR_clear_error();
        errno = 0;
        int r = SSL_read_ex(t->ssl, buf + *n, cap - *n, &k);
        if (r == 1) {
            *n += k;
            t->got_data = true;
            continue;
        }
        int e = SSL_get_error(t->ssl, r);
        if (e == SSL_ERROR_WANT_READ || e == SSL_ERROR_WANT_WRITE) {
            t->rd_want_write = e == SSL_ERROR_WANT_WRITE;
            break;
        }
        if (*n)
            break; /* hand over what arrived; the failure repeats on the next read */
        return io_fail(t, e);
    }
    return *n ? RLI_TP_OK : RLI_TP_AGAIN;
}

rli_tp_status rli_tp_write(rli_tp *t, const uint8_t *p, size_t len, size_t *n)
{
    *n = 0;
    if (!t->ssl) {
        ssize_t k = send(t->fd, p, len, MSG_NOSIGNAL);
        if (k >= 0) {
            *n = (size_t)k;
            return k ? RLI_TP_OK : RLI_TP_AGAIN;
        }
        if (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR)
            return RLI_TP_AGAIN;
        char b[128];
        return fail(t, false, "%s", cs_go_errno(errno, b, sizeof b));
    }
    t->wr_want_read = false;
    ERR_clear_error();
    errno = 0;
    int r = SSL_write_ex(t->ssl, p, len, n);
    if (r == 1)
        return RLI_TP_OK;
    int e = SSL_get_error(t->ssl, r);
    if (e == SSL_ERROR_WANT_READ || e == SSL_ERROR_WANT_WRITE) {
        t->wr_want_read = e == SSL_ERROR_WANT_READ;
        return RLI_TP_AGAIN;
    }
    return io_fail(t, e);
}
