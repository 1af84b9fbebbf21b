/* SPDX-License-Identifier: Apache-2.0 */
#include "transport/xport.h"

#include <errno.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <openssl/bio.h>
#include <openssl/err.h>
#include <openssl/ssl.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

/* What one SSL_write is given at most: one record. Sealing starts only while the buffer has room
 * for it under CS_XPORT_OUT_MAX, so the buffer never grows past its first size. */
#define SEAL_MAX 16384u
#define OUT_ROOM (CS_XPORT_OUT_MAX + 1024u) /* its size: the bound, and a record's framing */

/* ---- plaintext, and kTLS's sending side ---- */

static ssize_t sock_read(cs_xport *x, void *buf, size_t len)
{
    for (;;) {
        ssize_t n = recv(x->fd, buf, len, 0);
        if (n >= 0)
            return n;
        if (errno == EINTR)
            continue;
        return errno == EAGAIN || errno == EWOULDBLOCK ? CS_XP_AGAIN : CS_XP_FAIL;
    }
}

static ssize_t sock_writev(cs_xport *x, const struct iovec *iov, int n)
{
    if (n == 0)
        return 0;
    struct msghdr mh = {.msg_iov = (struct iovec *)iov, .msg_iovlen = (size_t)n};
    for (;;) {
        ssize_t w = sendmsg(x->fd, &mh, MSG_NOSIGNAL);
        if (w >= 0)
            return w;
        if (errno == EINTR)
            continue;
        return errno == EAGAIN || errno == EWOULDBLOCK ? 0 : CS_XP_FAIL;
    }
}

static size_t none_pending(const cs_xport *x)
{
    (void)x;
    return 0;
}

static void sock_shutdown(cs_xport *x)
{
    shutdown(x->fd, SHUT_WR);
}

static const cs_xport_ops plain_ops = {sock_read, sock_writev, none_pending, sock_shutdown};

/* ---- TLS: the output buffer OpenSSL writes its records into ----
 *
 * Sealing goes into the calling thread's own buffer (OUT_ROOM bytes, one per thread that ever
 * seals: the head reader and the stream I/O threads), which out_push empties into the socket. Only
 * what the socket refused is copied into a buffer of the connection's own, kept until it is out
 * (out_settle, at the end of every operation). A connection that keeps up therefore holds no
 * output buffer between writes: thousands of wss:// subscribers do not each keep 64 KiB. */

static pthread_key_t scratch_key;
static pthread_once_t scratch_once = PTHREAD_ONCE_INIT;
static bool scratch_keyed;

static void scratch_key_make(void)
{
    scratch_keyed = pthread_key_create(&scratch_key, free) == 0;
}

/* The calling thread's sealing buffer, OUT_ROOM bytes; NULL when out of memory. */
static uint8_t *scratch_get(void)
{
    pthread_once(&scratch_once, scratch_key_make);
    if (!scratch_keyed)
        return NULL;
    uint8_t *b = pthread_getspecific(scratch_key);
    if (!b && (b = malloc(OUT_ROOM)) != NULL && pthread_setspecific(scratch_key, b) != 0) {
        free(b);
        b = NULL;
    }
    return b;
}

static int out_bio_write(BIO *b, const char *p, size_t len, size_t *written)
{
    cs_xport *x = BIO_get_data(b);
    if (!x->out) { /* nothing pending: seal into this thread's buffer */
        x->out = scratch_get();
        x->out_cap = x->out ? OUT_ROOM : 0;
        x->out_own = false;
        x->out_off = x->out_len = 0;
    }
    if (x->out_len + len > x->out_cap) {
        if (x->out_off) { /* what went out makes room first */
            memmove(x->out, x->out + x->out_off, x->out_len - x->out_off);
            x->out_len -= x->out_off;
            x->out_off = 0;
        }
        if (x->out_len + len > x->out_cap) {
            size_t cap = x->out_cap ? x->out_cap : OUT_ROOM;
            while (cap < x->out_len + len)
                cap *= 2;
            uint8_t *nb = x->out_own ? realloc(x->out, cap) : malloc(cap);
            if (!nb)
                return 0;
            if (!x->out_own && x->out_len)
                memcpy(nb, x->out, x->out_len);
            x->out = nb;
            x->out_cap = cap;
            x->out_own = true;
        }
    }
    memcpy(x->out + x->out_len, p, len);
    x->out_len += len;
    *written = len;
    return 1;
}

/* At the end of every operation: an empty buffer is let go (the thread's goes back to it, the
 * connection's is freed); what the socket refused moves out of the thread's buffer into one of
 * the connection's own. -1 when out of memory for that. */
static int out_settle(cs_xport *x)
{
    if (x->out_off == x->out_len) {
        if (x->out_own)
            free(x->out);
        x->out = NULL;
        x->out_own = false;
        x->out_off = x->out_len = x->out_cap = 0;
        return 0;
    }
    if (x->out_own)
        return 0;
    size_t n = x->out_len - x->out_off;
    uint8_t *nb = malloc(n);
    if (!nb)
        return -1;
    memcpy(nb, x->out + x->out_off, n);
    x->out = nb;
    x->out_own = true;
    x->out_off = 0;
    x->out_len = x->out_cap = n;
    return 0;
}

static long out_bio_ctrl(BIO *b, int cmd, long num, void *ptr)
{
    (void)b, (void)num, (void)ptr;
    return cmd == BIO_CTRL_FLUSH; /* the transport sends the buffer itself */
}

static BIO_METHOD *out_method;
static pthread_once_t out_once = PTHREAD_ONCE_INIT;

static void out_method_make(void)
{
    BIO_METHOD *m = BIO_meth_new(BIO_get_new_index() | BIO_TYPE_SOURCE_SINK, "cs-xport-out");
    if (m && (BIO_meth_set_write_ex(m, out_bio_write) != 1 || BIO_meth_set_ctrl(m, out_bio_ctrl) != 1)) {
        BIO_meth_free(m);
        m = NULL;
    }
    out_method = m;
}

static BIO *out_bio_new(cs_xport *x)
{
    pthread_once(&out_once, out_method_make);
    BIO *b = out_method ? BIO_new(out_method) : NULL;
    if (b) {
        BIO_set_data(b, x);
        BIO_set_init(b, 1);
    }
    return b;
}

/* Sends what the buffer holds: 1 all out, 0 the socket is full, -1 failed. */
static int out_push(cs_xport *x)
{
    while (x->out_off < x->out_len) {
        ssize_t w = send(x->fd, x->out + x->out_off, x->out_len - x->out_off, MSG_NOSIGNAL);
        if (w < 0) {
            if (errno == EINTR)
                continue;
            return errno == EAGAIN || errno == EWOULDBLOCK ? 0 : -1;
        }
        x->out_off += (size_t)w;
    }
    x->out_off = x->out_len = 0;
    return 1;
}

static ssize_t tls_read(cs_xport *x, void *buf, size_t len)
{
    size_t n = 0;
    ERR_clear_error();
    int rc = SSL_read_ex(x->ssl, buf, len, &n);
    int e = rc == 1 ? SSL_ERROR_NONE : SSL_get_error(x->ssl, rc);
    ERR_clear_error();
    int p = out_push(x); /* what reading made OpenSSL write (an alert, a key update) */
    if (out_settle(x) < 0 || p < 0)
        return CS_XP_FAIL;
    if (rc == 1)
        return (ssize_t)n;
    if (e == SSL_ERROR_WANT_READ || e == SSL_ERROR_WANT_WRITE)
        return CS_XP_AGAIN;
    return e == SSL_ERROR_ZERO_RETURN ? 0 : CS_XP_FAIL;
}

/* Seals from iov while the buffer is under its bound, sending as it fills. */
static ssize_t tls_writev(cs_xport *x, const struct iovec *iov, int n)
{
    int p = out_push(x);
    if (p == 1 && out_settle(x) < 0) /* all out: seal into the thread's buffer */
        return CS_XP_FAIL;
    size_t took = 0;
    for (int i = 0; i < n && p == 1; i++) {
        const uint8_t *b = iov[i].iov_base;
        size_t off = 0;
        while (off < iov[i].iov_len) {
            if (x->out_len - x->out_off > CS_XPORT_OUT_MAX - SEAL_MAX && (p = out_push(x)) != 1)
                break;
            size_t k = iov[i].iov_len - off, w = 0;
            if (k > SEAL_MAX)
                k = SEAL_MAX;
            ERR_clear_error();
            if (SSL_write_ex(x->ssl, b + off, k, &w) != 1) {
                ERR_clear_error();
                (void)out_settle(x); /* never leave the thread's buffer behind */
                return CS_XP_FAIL;   /* never a full socket: OpenSSL's output always fits */
            }
            off += w;
            took += w;
        }
    }
    if (p >= 0)
        p = out_push(x);
    if (out_settle(x) < 0 || p < 0)
        return CS_XP_FAIL;
    return (ssize_t)took;
}

static size_t tls_pending(const cs_xport *x)
{
    return x->out_len - x->out_off;
}

static void tls_shutdown(cs_xport *x)
{
    ERR_clear_error();
    SSL_shutdown(x->ssl); /* close_notify; the peer's is not waited for */
    ERR_clear_error();
    int p = out_push(x);
    (void)out_settle(x); /* out of memory: the close_notify is lost, close(2) still ends it */
    if (p == 1)
        shutdown(x->fd, SHUT_WR); /* else close(2) ends it, after whatever the socket took */
}

static const cs_xport_ops tls_ops = {tls_read, tls_writev, tls_pending, tls_shutdown};
static const cs_xport_ops ktls_ops = {tls_read, sock_writev, none_pending, tls_shutdown};

/* ---- kTLS: whether this kernel has it ---- */

static bool ktls_ok;
static const char *ktls_why = "not asked";
static pthread_once_t ktls_once = PTHREAD_ONCE_INIT;

static void ktls_ask(void)
{
    static char why[160];
    int l = socket(AF_INET, SOCK_STREAM, 0), c = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in sa = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    socklen_t sl = sizeof sa;
    if (l < 0 || c < 0 || bind(l, (struct sockaddr *)&sa, sizeof sa) != 0 || listen(l, 1) != 0 ||
        getsockname(l, (struct sockaddr *)&sa, &sl) != 0 || connect(c, (struct sockaddr *)&sa, sizeof sa) != 0) {
        snprintf(why, sizeof why, "could not ask the kernel (a loopback socket: %s)", strerror(errno));
    } else if (setsockopt(c, IPPROTO_TCP, TCP_ULP, "tls", sizeof "tls") != 0) {
        snprintf(why, sizeof why, "the kernel has no TLS upper-layer protocol (TCP_ULP tls: %s)", strerror(errno));
    } else {
        ktls_ok = true;
        snprintf(why, sizeof why, "the kernel seals TLS records (TCP_ULP tls)");
    }
    ktls_why = why;
    if (c >= 0)
        close(c);
    if (l >= 0)
        close(l);
}

bool cs_xport_ktls_probe(const char **why)
{
    pthread_once(&ktls_once, ktls_ask);
    if (why)
        *why = ktls_why;
    return ktls_ok;
}

/* ---- making, handshaking and freeing ---- */

cs_xport *cs_xport_plain(int fd)
{
    cs_xport *x = calloc(1, sizeof *x);
    if (!x)
        return NULL;
    x->ops = &plain_ops;
    x->fd = fd;
    return x;
}

cs_xport *cs_xport_tls_server(int fd, SSL_CTX *ctx)
{
    cs_xport *x = calloc(1, sizeof *x);
    SSL *ssl = x ? SSL_new(ctx) : NULL;
    if (!ssl) {
        free(x);
        ERR_clear_error();
        return NULL;
    }
    x->ops = &tls_ops;
    x->fd = fd;
    x->ssl = ssl;
    bool ok;
    if (cs_xport_ktls_probe(NULL)) { /* OpenSSL hands the keys to the socket it writes to */
        SSL_set_options(ssl, SSL_OP_ENABLE_KTLS);
        ok = SSL_set_fd(ssl, fd) == 1;
    } else {
        BIO *r = BIO_new_socket(fd, BIO_NOCLOSE), *w = out_bio_new(x);
        ok = r && w;
        if (ok)
            SSL_set_bio(ssl, r, w);
        else {
            BIO_free(r);
            BIO_free(w);
        }
    }
    if (!ok) {
        SSL_free(ssl);
        free(x);
        ERR_clear_error();
        return NULL;
    }
    return x;
}

/* The handshake is done on a socket BIO: kTLS took the sending side, or the records go through
 * the output buffer from now on. */
static int settle_ktls(cs_xport *x)
{
    BIO *w = SSL_get_wbio(x->ssl);
    if (BIO_method_type(w) != BIO_TYPE_SOCKET)
        return 0;
    if (BIO_get_ktls_send(w)) {
        x->ktls_tx = true;
        x->ops = &ktls_ops;
        return 0;
    }
    BIO *ours = out_bio_new(x);
    if (!ours)
        return -1;
    SSL_set0_wbio(x->ssl, ours);
    return 0;
}

int cs_xport_tls_accept(cs_xport *x, const char **why)
{
    ERR_clear_error();
    int rc = SSL_accept(x->ssl);
    int e = rc == 1 ? SSL_ERROR_NONE : SSL_get_error(x->ssl, rc);
    unsigned long le = ERR_peek_error();
    *why = le ? ERR_reason_error_string(le) : NULL;
    ERR_clear_error();
    int p = out_push(x); /* the flight OpenSSL wrote */
    if (out_settle(x) < 0)
        p = -1;
    if (rc == 1 && p >= 0 && settle_ktls(x) == 0)
        return p == 1 ? 1 : 2;
    if ((e == SSL_ERROR_WANT_READ || e == SSL_ERROR_WANT_WRITE) && p >= 0)
        return p == 0 || e == SSL_ERROR_WANT_WRITE ? 2 : 0;
    if (!*why)
        *why = e == SSL_ERROR_SYSCALL || p < 0 ? "connection closed" : "unknown";
    return -1;
}

void cs_xport_free(cs_xport *x)
{
    if (!x)
        return;
    SSL_free(x->ssl);
    if (x->fd >= 0)
        close(x->fd);
    if (x->out_own)
        free(x->out);
    free(x);
}
