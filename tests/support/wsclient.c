/* SPDX-License-Identifier: Apache-2.0 */
/* Test support: blocking WebSocket client, HTTP helpers and the ledger-flow reader.
 * See wsclient.h. All sockets are non-blocking; every wait is a poll(2) bounded by the call's
 * deadline, and EINTR is retried. */
#include "support/wsclient.h"

#include <arpa/inet.h>
#include <ctype.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/random.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include <xxhash.h>
#include <zstd.h>

#include "corestream/wire.h"
#include "wire/wire.h"

#define WS_GUID "258EAFA5-E914-47DA-95CA-C5AB0DC85B11"
#define DEFAULT_MAX_MESSAGE (32u << 20)
#define DEFAULT_SEND_TIMEOUT_MS 10000
#define ZSTD_CHUNK_BOUND ((size_t)8 << 20)
#define RECV_MIN_FREE 65536
#define HTTP_MAX_RESPONSE (64u << 20)

/* ------------------------------------------------------------------------------------------ */
/* SHA-1 (FIPS 180-4) and base64 (RFC 4648)                                                     */

static uint32_t rol32(uint32_t v, int n)
{
    return (v << n) | (v >> (32 - n));
}

static void sha1_block(uint32_t h[5], const uint8_t *p)
{
    uint32_t w[80];
    for (int i = 0; i < 16; i++)
        w[i] = (uint32_t)p[4 * i] << 24 | (uint32_t)p[4 * i + 1] << 16 |
               (uint32_t)p[4 * i + 2] << 8 | (uint32_t)p[4 * i + 3];
    for (int i = 16; i < 80; i++)
        w[i] = rol32(w[i - 3] ^ w[i - 8] ^ w[i - 14] ^ w[i - 16], 1);
    uint32_t a = h[0], b = h[1], c = h[2], d = h[3], e = h[4];
    for (int i = 0; i < 80; i++) {
        uint32_t f, k;
        if (i < 20) {
            f = (b & c) | (~b & d);
            k = 0x5a827999u;
        } else if (i < 40) {
            f = b ^ c ^ d;
            k = 0x6ed9eba1u;
        } else if (i < 60) {
            f = (b & c) | (b & d) | (c & d);
            k = 0x8f1bbcdcu;
        } else {
            f = b ^ c ^ d;
            k = 0xca62c1d6u;
        }
        uint32_t t = rol32(a, 5) + f + e + k + w[i];
        e = d;
        d = c;
        c = rol32(b, 30);
        b = a;
        a = t;
    }
    h[0] += a;
    h[1] += b;
    h[2] += c;
    h[3] += d;
    h[4] += e;
}

void cs_sha1(const void *data, size_t len, uint8_t out[20])
{
    uint32_t h[5] = {0x67452301u, 0xefcdab89u, 0x98badcfeu, 0x10325476u, 0xc3d2e1f0u};
    const uint8_t *p = data;
    size_t left = len;
    while (left >= 64) {
        sha1_block(h, p);
        p += 64;
        left -= 64;
    }
    uint8_t tail[128];
    memset(tail, 0, sizeof tail);
    if (left)
        memcpy(tail, p, left);
    tail[left] = 0x80;
    size_t tlen = left + 1 + 8 <= 64 ? 64 : 128;
    uint64_t bits = (uint64_t)len * 8;
    for (int i = 0; i < 8; i++)
        tail[tlen - 1 - i] = (uint8_t)(bits >> (8 * i));
    sha1_block(h, tail);
    if (tlen == 128)
        sha1_block(h, tail + 64);
    for (int i = 0; i < 5; i++) {
        out[4 * i] = (uint8_t)(h[i] >> 24);
        out[4 * i + 1] = (uint8_t)(h[i] >> 16);
        out[4 * i + 2] = (uint8_t)(h[i] >> 8);
        out[4 * i + 3] = (uint8_t)h[i];
    }
}

int cs_base64_encode(const uint8_t *data, size_t len, char *out, size_t outlen)
{
    static const char tbl[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    size_t need = (len + 2) / 3 * 4 + 1;
    if (outlen < need || need > INT_MAX)
        return -1;
    size_t o = 0;
    for (size_t i = 0; i < len; i += 3) {
        uint32_t v = (uint32_t)data[i] << 16;
        if (i + 1 < len)
            v |= (uint32_t)data[i + 1] << 8;
        if (i + 2 < len)
            v |= data[i + 2];
        out[o++] = tbl[(v >> 18) & 63];
        out[o++] = tbl[(v >> 12) & 63];
        out[o++] = i + 1 < len ? tbl[(v >> 6) & 63] : '=';
        out[o++] = i + 2 < len ? tbl[v & 63] : '=';
    }
    out[o] = '\0';
    return (int)o;
}

void cs_ws_accept_for_key(const char *key, char out[29])
{
    size_t klen = strlen(key), glen = strlen(WS_GUID);
    char *cat = malloc(klen + glen);
    uint8_t digest[20];
    if (!cat) {
        out[0] = '\0';
        return;
    }
    memcpy(cat, key, klen);
    memcpy(cat + klen, WS_GUID, glen);
    cs_sha1(cat, klen + glen, digest);
    free(cat);
    cs_base64_encode(digest, sizeof digest, out, 29);
}

/* ------------------------------------------------------------------------------------------ */
/* Small utilities                                                                              */

static void fmt(char *buf, size_t len, const char *f, ...) __attribute__((format(printf, 3, 4)));
static void fmt(char *buf, size_t len, const char *f, ...)
{
    if (!buf || !len)
        return;
    va_list ap;
    va_start(ap, f);
    vsnprintf(buf, len, f, ap);
    va_end(ap);
}

static int64_t mono_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static int64_t deadline_after(int timeout_ms)
{
    return mono_ms() + (timeout_ms > 0 ? timeout_ms : 0);
}

static int remaining_ms(int64_t deadline)
{
    int64_t r = deadline - mono_ms();
    if (r <= 0)
        return 0;
    return r > INT_MAX ? INT_MAX : (int)r;
}

/* 1 ready, 0 timed out, -1 error (errno set). */
static int wait_fd(int fd, short events, int64_t deadline)
{
    for (;;) {
        struct pollfd pfd = {.fd = fd, .events = events};
        int r = poll(&pfd, 1, remaining_ms(deadline));
        if (r < 0 && errno == EINTR)
            continue;
        if (r < 0)
            return -1;
        return r > 0 ? 1 : 0;
    }
}

typedef struct gbuf {
    uint8_t *p;
    size_t len, cap;
} gbuf;

static int gb_reserve(gbuf *b, size_t extra)
{
    if (b->cap - b->len >= extra)
        return 0;
    if (extra > SIZE_MAX / 2 - b->len)
        return -1;
    size_t ncap = b->cap ? b->cap : 4096;
    while (ncap - b->len < extra)
        ncap *= 2;
    uint8_t *np = realloc(b->p, ncap);
    if (!np)
        return -1;
    b->p = np;
    b->cap = ncap;
    return 0;
}

static int gb_append(gbuf *b, const void *data, size_t len)
{
    if (gb_reserve(b, len + 1) < 0)
        return -1;
    if (len)
        memcpy(b->p + b->len, data, len);
    b->len += len;
    b->p[b->len] = 0;
    return 0;
}

static void gb_free(gbuf *b)
{
    free(b->p);
    b->p = NULL;
    b->len = b->cap = 0;
}

static void random_bytes(uint8_t *out, size_t n)
{
    size_t got = 0;
    while (got < n) {
        ssize_t r = getrandom(out + got, n - got, GRND_NONBLOCK);
        if (r < 0 && errno == EINTR)
            continue;
        if (r <= 0)
            break;
        got += (size_t)r;
    }
    if (got < n) { /* getrandom unavailable: anything unpredictable enough for a test mask */
        static uint64_t x;
        if (!x)
            x = (uint64_t)mono_ms() * 0x9e3779b97f4a7c15ull ^ (uint64_t)getpid();
        for (; got < n; got++) {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            out[got] = (uint8_t)x;
        }
    }
}

static int send_all(int fd, const void *data, size_t len, int64_t deadline)
{
    const uint8_t *p = data;
    while (len) {
        ssize_t n = send(fd, p, len, MSG_NOSIGNAL);
        if (n > 0) {
            p += n;
            len -= (size_t)n;
            continue;
        }
        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
            int w = wait_fd(fd, POLLOUT, deadline);
            if (w == 0) {
                errno = ETIMEDOUT;
                return -1;
            }
            if (w < 0)
                return -1;
            continue;
        }
        return -1;
    }
    return 0;
}

/* Binds s to the numeric address addr of family; -1 with errno otherwise (EAFNOSUPPORT when addr
 * is of another family). */
static int bind_local(int s, int family, const char *addr)
{
    struct sockaddr_storage ss;
    memset(&ss, 0, sizeof ss);
    socklen_t len;
    if (family == AF_INET && inet_pton(AF_INET, addr, &((struct sockaddr_in *)&ss)->sin_addr) == 1) {
        ss.ss_family = AF_INET;
        len = sizeof(struct sockaddr_in);
    } else if (family == AF_INET6 && inet_pton(AF_INET6, addr, &((struct sockaddr_in6 *)&ss)->sin6_addr) == 1) {
        ss.ss_family = AF_INET6;
        len = sizeof(struct sockaddr_in6);
    } else {
        errno = EAFNOSUPPORT;
        return -1;
    }
    return bind(s, (struct sockaddr *)&ss, len);
}

/* Connects a non-blocking TCP socket; returns the fd or -1 with err filled. */
static int tcp_connect(const char *host, int port, const cs_ws_opts *o, int64_t deadline, char *err,
                       size_t errlen)
{
    char portstr[16];
    snprintf(portstr, sizeof portstr, "%d", port);
    struct addrinfo hints = {.ai_family = AF_UNSPEC, .ai_socktype = SOCK_STREAM,
                             .ai_flags = AI_NUMERICSERV};
    struct addrinfo *res = NULL;
    int gr = getaddrinfo(host, portstr, &hints, &res);
    if (gr != 0) {
        fmt(err, errlen, "resolve %s: %s", host, gai_strerror(gr));
        return -1;
    }
    int fd = -1, last_errno = 0;
    bool timed_out = false;
    for (struct addrinfo *ai = res; ai && fd < 0; ai = ai->ai_next) {
        int s = socket(ai->ai_family, ai->ai_socktype | SOCK_NONBLOCK | SOCK_CLOEXEC, ai->ai_protocol);
        if (s < 0) {
            last_errno = errno;
            continue;
        }
        if (o && o->rcvbuf > 0)
            setsockopt(s, SOL_SOCKET, SO_RCVBUF, &o->rcvbuf, sizeof o->rcvbuf);
        if (o && o->sndbuf > 0)
            setsockopt(s, SOL_SOCKET, SO_SNDBUF, &o->sndbuf, sizeof o->sndbuf);
        if (o && o->bind_addr && bind_local(s, ai->ai_family, o->bind_addr) != 0) {
            last_errno = errno;
            close(s);
            continue;
        }
        int one = 1;
        setsockopt(s, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
        int r;
        do
            r = connect(s, ai->ai_addr, ai->ai_addrlen);
        while (r < 0 && errno == EINTR);
        if (r < 0 && errno == EINPROGRESS) {
            int w = wait_fd(s, POLLOUT, deadline);
            if (w == 0) {
                timed_out = true;
                last_errno = ETIMEDOUT;
                close(s);
                break;
            }
            int soerr = 0;
            socklen_t sl = sizeof soerr;
            if (w < 0 || getsockopt(s, SOL_SOCKET, SO_ERROR, &soerr, &sl) < 0)
                soerr = errno;
            r = soerr ? -1 : 0;
            errno = soerr;
        }
        if (r < 0) {
            last_errno = errno;
            close(s);
            continue;
        }
        fd = s;
    }
    freeaddrinfo(res);
    if (fd < 0)
        fmt(err, errlen, "connect %s:%d: %s", host, port,
            timed_out ? "timeout" : strerror(last_errno ? last_errno : ECONNREFUSED));
    return fd;
}

/* ------------------------------------------------------------------------------------------ */
/* HTTP response parsing                                                                        */

typedef struct http_resp {
    int status;
    size_t hdr_len; /* through the blank line */
    bool chunked;
    long long clen; /* -1 when absent */
    size_t total;   /* response length once complete */
} http_resp;

static const char *find_crlfcrlf(const uint8_t *buf, size_t len)
{
    return memmem(buf, len, "\r\n\r\n", 4);
}

/* Finds header `name` (case-insensitive) in the header block; value trimmed. */
static bool hdr_find(const uint8_t *buf, size_t hdr_len, const char *name, const char **val,
                     size_t *vlen)
{
    const char *p = (const char *)buf, *end = p + hdr_len;
    const char *eol = memmem(p, (size_t)(end - p), "\r\n", 2); /* skip the status line */
    if (!eol)
        return false;
    p = eol + 2;
    size_t nlen = strlen(name);
    while (p < end) {
        eol = memmem(p, (size_t)(end - p), "\r\n", 2);
        if (!eol || eol == p)
            break;
        const char *colon = memchr(p, ':', (size_t)(eol - p));
        if (colon && (size_t)(colon - p) == nlen && strncasecmp(p, name, nlen) == 0) {
            const char *v = colon + 1, *ve = eol;
            while (v < ve && (*v == ' ' || *v == '\t'))
                v++;
            while (ve > v && (ve[-1] == ' ' || ve[-1] == '\t'))
                ve--;
            *val = v;
            *vlen = (size_t)(ve - v);
            return true;
        }
        p = eol + 2;
    }
    return false;
}

static void hdr_copy(const uint8_t *buf, size_t hdr_len, const char *name, char *out, size_t outlen)
{
    const char *v;
    size_t vl;
    if (!out || !outlen)
        return;
    if (!hdr_find(buf, hdr_len, name, &v, &vl))
        vl = 0, v = "";
    if (vl >= outlen)
        vl = outlen - 1;
    memcpy(out, v, vl);
    out[vl] = '\0';
}

/* True when the comma-separated header value contains `token` (case-insensitive). */
static bool value_has_token(const char *v, size_t vl, const char *token)
{
    size_t tl = strlen(token);
    const char *p = v, *end = v + vl;
    while (p < end) {
        const char *comma = memchr(p, ',', (size_t)(end - p));
        const char *te = comma ? comma : end;
        const char *ts = p;
        while (ts < te && (*ts == ' ' || *ts == '\t'))
            ts++;
        const char *tend = te;
        while (tend > ts && (tend[-1] == ' ' || tend[-1] == '\t'))
            tend--;
        if ((size_t)(tend - ts) == tl && strncasecmp(ts, token, tl) == 0)
            return true;
        p = comma ? comma + 1 : end;
    }
    return false;
}

/* Walks a chunked body from `off`. Returns the offset just past the final CRLF once the last
 * chunk and trailers are complete, 0 when more bytes are needed, (size_t)-1 when malformed.
 * When out is given, the chunk data seen so far is appended to it. */
static size_t walk_chunked(const uint8_t *buf, size_t len, size_t off, gbuf *out)
{
    for (;;) {
        const uint8_t *eol = memmem(buf + off, len - off, "\r\n", 2);
        if (!eol)
            return 0;
        size_t sz = 0;
        const uint8_t *q = buf + off;
        if (q == eol || !isxdigit(*q))
            return (size_t)-1;
        for (; q < eol && isxdigit(*q); q++) {
            if (sz > (SIZE_MAX >> 5))
                return (size_t)-1;
            sz = sz * 16 + (size_t)(isdigit(*q) ? *q - '0' : (tolower(*q) - 'a' + 10));
        }
        off = (size_t)(eol - buf) + 2;
        if (sz == 0) {
            /* Trailers: lines until an empty one. */
            for (;;) {
                const uint8_t *t = memmem(buf + off, len - off, "\r\n", 2);
                if (!t)
                    return 0;
                bool empty = t == buf + off;
                off = (size_t)(t - buf) + 2;
                if (empty)
                    return off;
            }
        }
        size_t avail = len - off;
        if (out)
            gb_append(out, buf + off, avail < sz ? avail : sz);
        if (avail < sz + 2)
            return 0;
        if (buf[off + sz] != '\r' || buf[off + sz + 1] != '\n')
            return (size_t)-1;
        off += sz + 2;
    }
}

/* 1 complete (r->total set), 0 incomplete, -1 malformed. Headers are parsed once complete. */
static int http_parse(const uint8_t *buf, size_t len, http_resp *r)
{
    memset(r, 0, sizeof *r);
    r->clen = -1;
    if (len >= 5 && memcmp(buf, "HTTP/", 5) != 0)
        return -1;
    const char *e = find_crlfcrlf(buf, len);
    if (!e)
        return 0;
    r->hdr_len = (size_t)(e - (const char *)buf) + 4;
    const char *sp = memchr(buf, ' ', r->hdr_len);
    if (!sp || sp + 4 > (const char *)buf + r->hdr_len || !isdigit((unsigned char)sp[1]) ||
        !isdigit((unsigned char)sp[2]) || !isdigit((unsigned char)sp[3]))
        return -1;
    r->status = (sp[1] - '0') * 100 + (sp[2] - '0') * 10 + (sp[3] - '0');
    const char *v;
    size_t vl;
    if (hdr_find(buf, r->hdr_len, "Transfer-Encoding", &v, &vl) && value_has_token(v, vl, "chunked"))
        r->chunked = true;
    if (hdr_find(buf, r->hdr_len, "Content-Length", &v, &vl)) {
        long long n = 0;
        for (size_t i = 0; i < vl && isdigit((unsigned char)v[i]) && n < (1LL << 40); i++)
            n = n * 10 + (v[i] - '0');
        r->clen = n;
    }
    if ((r->status >= 100 && r->status < 200) || r->status == 204 || r->status == 304) {
        r->total = r->hdr_len;
        return 1;
    }
    if (r->chunked) {
        size_t end = walk_chunked(buf, len, r->hdr_len, NULL);
        if (end == (size_t)-1)
            return -1;
        if (end == 0)
            return 0;
        r->total = end;
        return 1;
    }
    if (r->clen >= 0) {
        if (len - r->hdr_len < (size_t)r->clen)
            return 0;
        r->total = r->hdr_len + (size_t)r->clen;
        return 1;
    }
    return 0; /* until the peer closes */
}

/* Reads a response into b. Returns 1 with *r describing it (complete, or ended by EOF), 0 when
 * the peer closed or sent something that is not an HTTP response (b holds what arrived),
 * -1 on timeout/error with err filled. */
static int http_read(int fd, gbuf *b, http_resp *r, int64_t deadline, char *err, size_t errlen)
{
    for (;;) {
        int pr = http_parse(b->p ? b->p : (const uint8_t *)"", b->len, r);
        if (pr == 1)
            return 1;
        if (pr < 0)
            return 0;
        if (b->len >= HTTP_MAX_RESPONSE) {
            fmt(err, errlen, "response larger than %u bytes", HTTP_MAX_RESPONSE);
            return -1;
        }
        if (gb_reserve(b, RECV_MIN_FREE) < 0) {
            fmt(err, errlen, "out of memory");
            return -1;
        }
        ssize_t n = recv(fd, b->p + b->len, b->cap - b->len - 1, 0);
        if (n > 0) {
            b->len += (size_t)n;
            b->p[b->len] = 0;
            continue;
        }
        if (n == 0 || (n < 0 && errno == ECONNRESET)) {
            /* Ended by the peer: complete if headers were seen. */
            if (r->hdr_len) {
                r->total = b->len;
                return 1;
            }
            return 0;
        }
        if (errno == EINTR)
            continue;
        if (errno == EAGAIN || errno == EWOULDBLOCK) {
            int w = wait_fd(fd, POLLIN, deadline);
            if (w > 0)
                continue;
            fmt(err, errlen, "%s", w == 0 ? "timeout waiting for the HTTP response" : strerror(errno));
            return -1;
        }
        fmt(err, errlen, "recv: %s", strerror(errno));
        return -1;
    }
}

/* Copies the (de-chunked) body into out, NUL-terminated and truncated. */
static void http_body(const gbuf *b, const http_resp *r, char *out, size_t outlen)
{
    if (!out || !outlen)
        return;
    size_t end = r->total ? r->total : b->len;
    if (r->chunked) {
        gbuf d = {0};
        walk_chunked(b->p, end, r->hdr_len, &d);
        size_t n = d.len < outlen - 1 ? d.len : outlen - 1;
        if (n)
            memcpy(out, d.p, n);
        out[n] = '\0';
        gb_free(&d);
        return;
    }
    size_t n = end > r->hdr_len ? end - r->hdr_len : 0;
    if (n > outlen - 1)
        n = outlen - 1;
    if (n)
        memcpy(out, b->p + r->hdr_len, n);
    out[n] = '\0';
}

static void host_header(char *out, size_t len, const char *host, int port)
{
    if (strchr(host, ':'))
        snprintf(out, len, "[%s]:%d", host, port);
    else
        snprintf(out, len, "%s:%d", host, port);
}

int cs_http_raw(const char *host, int port, const char *request, int timeout_ms, char *resp,
                size_t resplen)
{
    int64_t deadline = deadline_after(timeout_ms);
    if (resp && resplen)
        resp[0] = '\0';
    char err[256];
    int fd = tcp_connect(host, port, NULL, deadline, err, sizeof err);
    if (fd < 0) {
        fmt(resp, resplen, "%s", err);
        return -1;
    }
    int ret = -1;
    gbuf b = {0};
    http_resp r;
    if (send_all(fd, request, strlen(request), deadline) < 0) {
        /* The peer may have answered and closed before the whole request went out: still read. */
        if (errno == ETIMEDOUT) {
            fmt(resp, resplen, "send: timeout");
            goto out;
        }
    }
    int hr = http_read(fd, &b, &r, deadline, err, sizeof err);
    if (hr < 0) {
        fmt(resp, resplen, "%s", err);
        goto out;
    }
    if (resp && resplen) {
        size_t end = hr == 1 ? r.total : b.len;
        size_t n = end < resplen - 1 ? end : resplen - 1;
        if (n)
            memcpy(resp, b.p, n);
        resp[n] = '\0';
    }
    ret = hr == 1 ? r.status : 0;
out:
    gb_free(&b);
    close(fd);
    return ret;
}

int cs_http_get(const char *host, int port, const char *path_and_query, int timeout_ms, char *body,
                size_t bodylen, char *ctype, size_t ctypelen)
{
    int64_t deadline = deadline_after(timeout_ms);
    if (body && bodylen)
        body[0] = '\0';
    if (ctype && ctypelen)
        ctype[0] = '\0';
    char err[256], hosthdr[300];
    int fd = tcp_connect(host, port, NULL, deadline, err, sizeof err);
    if (fd < 0) {
        fmt(body, bodylen, "%s", err);
        return -1;
    }
    host_header(hosthdr, sizeof hosthdr, host, port);
    size_t reqcap = strlen(path_and_query) + strlen(hosthdr) + 128;
    char *req = malloc(reqcap);
    int ret = -1;
    gbuf b = {0};
    http_resp r;
    if (!req) {
        fmt(body, bodylen, "out of memory");
        goto out;
    }
    snprintf(req, reqcap,
             "GET %s HTTP/1.1\r\nHost: %s\r\nUser-Agent: cs-testsupport\r\nConnection: close\r\n\r\n",
             path_and_query, hosthdr);
    if (send_all(fd, req, strlen(req), deadline) < 0) {
        fmt(body, bodylen, "send: %s", strerror(errno));
        goto out;
    }
    int hr = http_read(fd, &b, &r, deadline, err, sizeof err);
    if (hr <= 0) {
        fmt(body, bodylen, "%s", hr < 0 ? err : "no HTTP response");
        goto out;
    }
    http_body(&b, &r, body, bodylen);
    hdr_copy(b.p, r.hdr_len, "Content-Type", ctype, ctypelen);
    ret = r.status;
out:
    free(req);
    gb_free(&b);
    close(fd);
    return ret;
}

/* ------------------------------------------------------------------------------------------ */
/* WebSocket                                                                                    */

enum { ST_OPEN, ST_CLOSED, ST_EOF, ST_ERROR };

struct cs_ws {
    int fd;
    gbuf in;        /* received bytes; in_pos is the first unconsumed one */
    size_t in_pos;
    gbuf msg;       /* message being reassembled / last delivered */
    bool frag_active;
    int frag_opcode;
    size_t max_message;
    int send_timeout_ms;
    int state;
    bool close_received, close_sent;
    int close_code;
    char close_reason[128];
    char err[256];
    /* ledger assembly */
    bool la_active;
    uint32_t la_seq;
    int64_t la_start;
    gbuf la_buf;
    uint32_t la_chunks;
    unsigned la_discarded;
    int la_zstd;
    uint8_t *zscratch;
};

static int ws_send_frame(cs_ws *ws, int fin, int opcode, const void *data, size_t len)
{
    uint8_t hdr[14];
    size_t h = 0;
    hdr[h++] = (uint8_t)((fin ? 0x80 : 0) | (opcode & 0x0f));
    if (len < 126) {
        hdr[h++] = (uint8_t)(0x80 | len);
    } else if (len <= 0xffff) {
        hdr[h++] = 0x80 | 126;
        hdr[h++] = (uint8_t)(len >> 8);
        hdr[h++] = (uint8_t)len;
    } else {
        hdr[h++] = 0x80 | 127;
        for (int i = 7; i >= 0; i--)
            hdr[h++] = (uint8_t)((uint64_t)len >> (8 * i));
    }
    uint8_t mask[4];
    random_bytes(mask, 4);
    memcpy(hdr + h, mask, 4);
    h += 4;
    uint8_t *frame = malloc(h + len + 1);
    if (!frame) {
        fmt(ws->err, sizeof ws->err, "out of memory");
        return -1;
    }
    memcpy(frame, hdr, h);
    const uint8_t *src = data;
    for (size_t i = 0; i < len; i++)
        frame[h + i] = src[i] ^ mask[i & 3];
    int r = send_all(ws->fd, frame, h + len, deadline_after(ws->send_timeout_ms));
    if (r < 0)
        fmt(ws->err, sizeof ws->err, "send: %s", strerror(errno));
    free(frame);
    return r;
}

int cs_ws_send_frame(cs_ws *ws, int fin, int opcode, const void *data, size_t len)
{
    return ws_send_frame(ws, fin, opcode, data, len);
}

int cs_ws_send(cs_ws *ws, int opcode, const void *data, size_t len)
{
    return ws_send_frame(ws, 1, opcode, data, len);
}

int cs_ws_send_raw(cs_ws *ws, const void *data, size_t len)
{
    int r = send_all(ws->fd, data, len, deadline_after(ws->send_timeout_ms));
    if (r < 0)
        fmt(ws->err, sizeof ws->err, "send: %s", strerror(errno));
    return r;
}

int cs_ws_send_close(cs_ws *ws, int code, const char *reason)
{
    uint8_t payload[125];
    size_t n = 0;
    if (code > 0) {
        payload[0] = (uint8_t)(code >> 8);
        payload[1] = (uint8_t)code;
        n = 2;
        if (reason) {
            size_t rl = strlen(reason);
            if (rl > sizeof payload - 2)
                rl = sizeof payload - 2;
            memcpy(payload + 2, reason, rl);
            n += rl;
        }
    }
    ws->close_sent = true;
    return ws_send_frame(ws, 1, 8, payload, n);
}

int cs_ws_last_close(const cs_ws *ws, int *code, char *reason, size_t reasonlen)
{
    if (!ws->close_received) {
        if (code)
            *code = 0;
        fmt(reason, reasonlen, "%s", "");
        return 0;
    }
    if (code)
        *code = ws->close_code;
    fmt(reason, reasonlen, "%s", ws->close_reason);
    return 1;
}

const char *cs_ws_error(const cs_ws *ws)
{
    return ws->err;
}

int cs_ws_fd(const cs_ws *ws)
{
    return ws->fd;
}

void cs_ws_close(cs_ws *ws)
{
    if (!ws)
        return;
    if (ws->fd >= 0)
        close(ws->fd);
    gb_free(&ws->in);
    gb_free(&ws->msg);
    gb_free(&ws->la_buf);
    free(ws->zscratch);
    free(ws);
}

cs_ws *cs_ws_connect(const char *host, int port, const char *path_and_query, int timeout_ms,
                     int *status, char *body, size_t bodylen)
{
    return cs_ws_connect_opts(host, port, path_and_query, NULL, timeout_ms, status, body, bodylen);
}

cs_ws *cs_ws_connect_opts(const char *host, int port, const char *path_and_query,
                          const cs_ws_opts *opts, int timeout_ms, int *status, char *body,
                          size_t bodylen)
{
    int64_t deadline = deadline_after(timeout_ms);
    int dummy_status;
    if (!status)
        status = &dummy_status;
    *status = 0;
    if (body && bodylen)
        body[0] = '\0';
    if (opts && opts->resp_headers && opts->resp_headers_len)
        opts->resp_headers[0] = '\0';
    char err[256], hosthdr[300];
    int fd = tcp_connect(host, port, opts, deadline, err, sizeof err);
    if (fd < 0) {
        fmt(body, bodylen, "%s", err);
        return NULL;
    }
    uint8_t keyraw[16];
    char key[32], want_accept[29];
    random_bytes(keyraw, sizeof keyraw);
    cs_base64_encode(keyraw, sizeof keyraw, key, sizeof key);
    cs_ws_accept_for_key(key, want_accept);
    host_header(hosthdr, sizeof hosthdr, host, port);
    const char *extra = opts && opts->extra_headers ? opts->extra_headers : "";
    size_t reqcap = strlen(path_and_query) + strlen(hosthdr) + strlen(extra) + 256;
    char *req = malloc(reqcap);
    cs_ws *ws = NULL;
    gbuf b = {0};
    http_resp r;
    if (!req) {
        fmt(body, bodylen, "out of memory");
        goto fail;
    }
    snprintf(req, reqcap,
             "GET %s HTTP/1.1\r\nHost: %s\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
             "Sec-WebSocket-Key: %s\r\nSec-WebSocket-Version: 13\r\n"
             "User-Agent: cs-testsupport\r\n%s\r\n",
             path_and_query, hosthdr, key, extra);
    if (send_all(fd, req, strlen(req), deadline) < 0 && errno == ETIMEDOUT) {
        fmt(body, bodylen, "send: timeout");
        goto fail;
    }
    int hr = http_read(fd, &b, &r, deadline, err, sizeof err);
    if (hr <= 0) {
        fmt(body, bodylen, "%s", hr < 0 ? err : "no HTTP response");
        goto fail;
    }
    *status = r.status;
    if (opts && opts->resp_headers && opts->resp_headers_len) {
        size_t n = r.hdr_len < opts->resp_headers_len - 1 ? r.hdr_len : opts->resp_headers_len - 1;
        memcpy(opts->resp_headers, b.p, n);
        opts->resp_headers[n] = '\0';
    }
    if (r.status != 101) {
        http_body(&b, &r, body, bodylen);
        goto fail;
    }
    const char *v;
    size_t vl;
    if (!hdr_find(b.p, r.hdr_len, "Upgrade", &v, &vl) || !value_has_token(v, vl, "websocket")) {
        fmt(body, bodylen, "101 without Upgrade: websocket");
        goto fail;
    }
    if (!hdr_find(b.p, r.hdr_len, "Connection", &v, &vl) || !value_has_token(v, vl, "upgrade")) {
        fmt(body, bodylen, "101 without Connection: Upgrade");
        goto fail;
    }
    if (!hdr_find(b.p, r.hdr_len, "Sec-WebSocket-Accept", &v, &vl) || vl != 28 ||
        memcmp(v, want_accept, 28) != 0) {
        fmt(body, bodylen, "bad Sec-WebSocket-Accept (want %s)", want_accept);
        goto fail;
    }
    if (hdr_find(b.p, r.hdr_len, "Sec-WebSocket-Extensions", &v, &vl)) {
        fmt(body, bodylen, "server selected extensions \"%.*s\" that were not offered", (int)vl, v);
        goto fail;
    }
    if (hdr_find(b.p, r.hdr_len, "Sec-WebSocket-Protocol", &v, &vl)) {
        fmt(body, bodylen, "server selected subprotocol \"%.*s\" that was not offered", (int)vl, v);
        goto fail;
    }
    ws = calloc(1, sizeof *ws);
    if (!ws) {
        fmt(body, bodylen, "out of memory");
        goto fail;
    }
    ws->fd = fd;
    ws->max_message = opts && opts->max_message ? opts->max_message : DEFAULT_MAX_MESSAGE;
    ws->send_timeout_ms =
        opts && opts->send_timeout_ms > 0 ? opts->send_timeout_ms : DEFAULT_SEND_TIMEOUT_MS;
    ws->state = ST_OPEN;
    /* Frame bytes that came with the handshake answer. */
    if (b.len > r.hdr_len && gb_append(&ws->in, b.p + r.hdr_len, b.len - r.hdr_len) < 0) {
        fmt(body, bodylen, "out of memory");
        free(ws);
        ws = NULL;
        goto fail;
    }
    free(req);
    gb_free(&b);
    return ws;
fail:
    free(req);
    gb_free(&b);
    close(fd);
    return NULL;
}

static int ws_fail(cs_ws *ws, cs_ws_msg *out, const char *f, ...) __attribute__((format(printf, 3, 4)));
static int ws_fail(cs_ws *ws, cs_ws_msg *out, const char *f, ...)
{
    va_list ap;
    va_start(ap, f);
    vsnprintf(ws->err, sizeof ws->err, f, ap);
    va_end(ap);
    ws->state = ST_ERROR;
    ws->frag_active = false;
    out->kind = CS_WS_ERROR;
    fmt(out->reason, sizeof out->reason, "%s", ws->err);
    return CS_WS_ERROR;
}

static int ws_fill_terminal(cs_ws *ws, cs_ws_msg *out)
{
    switch (ws->state) {
    case ST_CLOSED:
        out->kind = CS_WS_CLOSE;
        out->close_code = ws->close_code;
        fmt(out->reason, sizeof out->reason, "%s", ws->close_reason);
        return CS_WS_CLOSE;
    case ST_EOF:
        out->kind = CS_WS_EOF;
        fmt(out->reason, sizeof out->reason, "%s", ws->err);
        return CS_WS_EOF;
    default:
        out->kind = CS_WS_ERROR;
        fmt(out->reason, sizeof out->reason, "%s", ws->err);
        return CS_WS_ERROR;
    }
}

/* Handles one complete frame; returns a kind when a message is ready to deliver, -1 otherwise. */
static int ws_frame(cs_ws *ws, cs_ws_msg *out, bool fin, int opcode, const uint8_t *pl, size_t plen)
{
    switch (opcode) {
    case 0x0:
    case 0x1:
    case 0x2:
        if (opcode == 0 && !ws->frag_active)
            return ws_fail(ws, out, "continuation frame with no message in progress");
        if (opcode != 0 && ws->frag_active)
            return ws_fail(ws, out, "new data frame (opcode %d) inside a fragmented message", opcode);
        if (opcode != 0) {
            ws->msg.len = 0;
            ws->frag_opcode = opcode;
        }
        if (plen > ws->max_message - ws->msg.len)
            return ws_fail(ws, out, "message exceeds %zu bytes", ws->max_message);
        if (gb_append(&ws->msg, pl, plen) < 0)
            return ws_fail(ws, out, "out of memory");
        if (!fin) {
            ws->frag_active = true;
            return -1;
        }
        ws->frag_active = false;
        out->kind = ws->frag_opcode == 1 ? CS_WS_TEXT : CS_WS_BINARY;
        out->data = ws->msg.p;
        out->len = ws->msg.len;
        return out->kind;
    case 0x8: {
        if (plen == 1)
            return ws_fail(ws, out, "close frame with a 1-byte payload");
        int code = plen >= 2 ? (pl[0] << 8 | pl[1]) : 1005;
        size_t rl = plen > 2 ? plen - 2 : 0;
        if (rl >= sizeof ws->close_reason)
            rl = sizeof ws->close_reason - 1;
        memcpy(ws->close_reason, pl + 2 * (plen >= 2), rl);
        ws->close_reason[rl] = '\0';
        ws->close_code = code;
        ws->close_received = true;
        ws->frag_active = false;
        ws->state = ST_CLOSED;
        if (!ws->close_sent) {
            /* Echo the code, as a well-behaved client does; the peer may already be gone. */
            uint8_t echo[2] = {(uint8_t)(code >> 8), (uint8_t)code};
            ws->close_sent = true;
            ws_send_frame(ws, 1, 8, echo, code == 1005 ? 0 : 2);
        }
        return ws_fill_terminal(ws, out);
    }
    case 0x9:
        if (!ws->close_sent)
            ws_send_frame(ws, 1, 0xA, pl, plen);
        return -1;
    case 0xA:
        return -1;
    default:
        return ws_fail(ws, out, "frame with unknown opcode 0x%x", opcode);
    }
}

int cs_ws_read(cs_ws *ws, cs_ws_msg *out, int timeout_ms)
{
    memset(out, 0, sizeof *out);
    if (ws->state != ST_OPEN)
        return ws_fill_terminal(ws, out);
    int64_t deadline = deadline_after(timeout_ms);
    for (;;) {
        /* Parse as many whole frames as are buffered. */
        for (;;) {
            const uint8_t *p = ws->in.p + ws->in_pos;
            size_t avail = ws->in.len - ws->in_pos;
            if (avail < 2)
                break;
            bool fin = p[0] & 0x80;
            int opcode = p[0] & 0x0f;
            if (p[0] & 0x70)
                return ws_fail(ws, out, "frame with RSV bits set (0x%02x)", p[0]);
            if (p[1] & 0x80)
                return ws_fail(ws, out, "masked frame from the server");
            uint64_t plen = p[1] & 0x7f;
            size_t h = 2;
            if (plen == 126) {
                if (avail < 4)
                    break;
                plen = (uint64_t)p[2] << 8 | p[3];
                h = 4;
            } else if (plen == 127) {
                if (avail < 10)
                    break;
                plen = 0;
                for (int i = 0; i < 8; i++)
                    plen = plen << 8 | p[2 + i];
                h = 10;
                if (plen >> 63)
                    return ws_fail(ws, out, "frame length with the top bit set");
            }
            if (opcode & 0x8) {
                if (!fin)
                    return ws_fail(ws, out, "fragmented control frame (opcode 0x%x)", opcode);
                if (plen > 125)
                    return ws_fail(ws, out, "control frame of %llu bytes", (unsigned long long)plen);
            } else if (plen > ws->max_message) {
                return ws_fail(ws, out, "message exceeds %zu bytes", ws->max_message);
            }
            if (avail - h < plen) {
                /* Make room for the whole frame so the next recv can complete it. */
                if (gb_reserve(&ws->in, (size_t)plen + h - avail + 1) < 0)
                    return ws_fail(ws, out, "out of memory");
                break;
            }
            ws->in_pos += h + (size_t)plen;
            int k = ws_frame(ws, out, fin, opcode, ws->in.p + (ws->in_pos - (size_t)plen), (size_t)plen);
            if (k >= 0)
                return k;
        }
        /* Need more bytes. */
        if (ws->in_pos && (ws->in_pos == ws->in.len || ws->in_pos > ws->in.cap / 2)) {
            memmove(ws->in.p, ws->in.p + ws->in_pos, ws->in.len - ws->in_pos);
            ws->in.len -= ws->in_pos;
            ws->in_pos = 0;
        }
        if (gb_reserve(&ws->in, RECV_MIN_FREE) < 0)
            return ws_fail(ws, out, "out of memory");
        ssize_t n = recv(ws->fd, ws->in.p + ws->in.len, ws->in.cap - ws->in.len, 0);
        if (n > 0) {
            ws->in.len += (size_t)n;
            continue;
        }
        if (n == 0 || errno == ECONNRESET) {
            bool mid = ws->in.len > ws->in_pos || ws->frag_active;
            fmt(ws->err, sizeof ws->err, "connection %s without a close frame%s",
                n == 0 ? "closed" : "reset", mid ? " (mid-message)" : "");
            ws->state = ST_EOF;
            return ws_fill_terminal(ws, out);
        }
        if (errno == EINTR)
            continue;
        if (errno == EAGAIN || errno == EWOULDBLOCK) {
            int w = wait_fd(ws->fd, POLLIN, deadline);
            if (w > 0)
                continue;
            if (w == 0) {
                out->kind = CS_WS_TIMEOUT;
                fmt(out->reason, sizeof out->reason, "timeout");
                return CS_WS_TIMEOUT;
            }
        }
        return ws_fail(ws, out, "recv: %s", strerror(errno));
    }
}

/* ------------------------------------------------------------------------------------------ */
/* Ledger flows                                                                                 */

static void la_reset(cs_ws *ws)
{
    ws->la_active = false;
    ws->la_buf.len = 0;
    ws->la_chunks = 0;
    ws->la_discarded = 0;
    ws->la_zstd = 0;
}

static int la_fail(cs_ws *ws, char *err, size_t errlen, const char *f, ...)
    __attribute__((format(printf, 4, 5)));
static int la_fail(cs_ws *ws, char *err, size_t errlen, const char *f, ...)
{
    if (err && errlen) {
        va_list ap;
        va_start(ap, f);
        vsnprintf(err, errlen, f, ap);
        va_end(ap);
    }
    la_reset(ws);
    return -1;
}

int cs_ws_read_ledger(cs_ws *ws, cs_ledger *out, int timeout_ms, char *err, size_t errlen)
{
    memset(out, 0, sizeof *out);
    fmt(err, errlen, "%s", "");
    int64_t deadline = deadline_after(timeout_ms);
    for (;;) {
        cs_ws_msg m;
        int k = cs_ws_read(ws, &m, remaining_ms(deadline));
        switch (k) {
        case CS_WS_TIMEOUT:
            if (ws->la_active)
                fmt(err, errlen, "timeout after %d ms assembling ledger %u (%u chunks so far)",
                    timeout_ms, ws->la_seq, ws->la_chunks);
            else
                fmt(err, errlen, "timeout after %d ms waiting for a ledger", timeout_ms);
            return -1;
        case CS_WS_EOF:
            return la_fail(ws, err, errlen, "read: %s", m.reason);
        case CS_WS_ERROR:
            return la_fail(ws, err, errlen, "read: %s", m.reason);
        case CS_WS_CLOSE:
            if (ws->la_active)
                la_fail(ws, err, errlen, "stream closed mid-assembly of ledger %u", ws->la_seq);
            return 0;
        case CS_WS_TEXT:
            return la_fail(ws, err, errlen, "protocol violation: unexpected text message");
        default:
            break;
        }
        cs_wire_msg w;
        cs_err cerr;
        if (cs_wire_decode(m.data, m.len, &w, &cerr) < 0)
            return la_fail(ws, err, errlen, "protocol violation: %s", cerr.msg);
        switch (w.type) {
        case CS_WIRE_TYPE_BEGIN: {
            unsigned discarded = ws->la_discarded;
            if (ws->la_active && w.seq != ws->la_seq)
                return la_fail(ws, err, errlen, "BEGIN for ledger %u while assembling %u", w.seq,
                               ws->la_seq);
            if (ws->la_active)
                discarded++;
            la_reset(ws);
            ws->la_active = true;
            ws->la_seq = w.seq;
            ws->la_start = w.stamp;
            ws->la_discarded = discarded;
            break;
        }
        case CS_WIRE_TYPE_CHUNK: {
            if (!ws->la_active || w.seq != ws->la_seq)
                return la_fail(ws, err, errlen, "CHUNK for ledger %u outside its flow", w.seq);
            if (w.chunk_idx != ws->la_chunks)
                return la_fail(ws, err, errlen, "ledger %u chunk %u arrived, expected chunk %u",
                               w.seq, w.chunk_idx, ws->la_chunks);
            const uint8_t *data = w.payload;
            size_t dlen = w.payload_len;
            if (w.codec == CS_CODEC_ZSTD) {
                size_t fl = ZSTD_findFrameCompressedSize(w.payload, w.payload_len);
                if (ZSTD_isError(fl))
                    return la_fail(ws, err, errlen, "ledger %u chunk %u: decompress: %s", w.seq,
                                   w.chunk_idx, ZSTD_getErrorName(fl));
                if (fl != w.payload_len)
                    return la_fail(ws, err, errlen,
                                   "ledger %u chunk %u: decompress: %zu trailing bytes after the zstd frame",
                                   w.seq, w.chunk_idx, w.payload_len - fl);
                if (!ws->zscratch && !(ws->zscratch = malloc(ZSTD_CHUNK_BOUND)))
                    return la_fail(ws, err, errlen, "out of memory");
                size_t dn = ZSTD_decompress(ws->zscratch, ZSTD_CHUNK_BOUND, w.payload, w.payload_len);
                if (ZSTD_isError(dn))
                    return la_fail(ws, err, errlen, "ledger %u chunk %u: decompress: %s", w.seq,
                                   w.chunk_idx, ZSTD_getErrorName(dn));
                data = ws->zscratch;
                dlen = dn;
                ws->la_zstd++;
            }
            if (dlen > (size_t)CS_MAX_PAYLOAD_SIZE - ws->la_buf.len)
                return la_fail(ws, err, errlen, "ledger %u exceeds the %d-byte payload cap", w.seq,
                               CS_MAX_PAYLOAD_SIZE);
            if (gb_append(&ws->la_buf, data, dlen) < 0)
                return la_fail(ws, err, errlen, "out of memory");
            ws->la_chunks++;
            break;
        }
        case CS_WIRE_TYPE_END: {
            if (!ws->la_active || w.seq != ws->la_seq)
                return la_fail(ws, err, errlen, "END for ledger %u outside its flow", w.seq);
            if (w.chunk_count != ws->la_chunks)
                return la_fail(ws, err, errlen, "ledger %u END declares %u chunks, %u arrived", w.seq,
                               w.chunk_count, ws->la_chunks);
            if (w.total_len != ws->la_buf.len)
                return la_fail(ws, err, errlen, "ledger %u END declares %llu bytes, %zu assembled",
                               w.seq, (unsigned long long)w.total_len, ws->la_buf.len);
            uint64_t h = XXH64(ws->la_buf.p ? ws->la_buf.p : (const uint8_t *)"", ws->la_buf.len, 0);
            if (h != w.checksum)
                return la_fail(ws, err, errlen, "ledger %u checksum mismatch: got 0x%016llx, want 0x%016llx",
                               w.seq, (unsigned long long)h, (unsigned long long)w.checksum);
            struct timespec ts;
            clock_gettime(CLOCK_REALTIME, &ts);
            out->received_unix_nano = (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
            out->seq = w.seq;
            if (!ws->la_buf.p && gb_reserve(&ws->la_buf, 1) < 0)
                return la_fail(ws, err, errlen, "out of memory");
            out->data = ws->la_buf.p;
            out->len = ws->la_buf.len;
            out->emit_start = ws->la_start;
            out->emit_end = w.stamp;
            out->chunks = ws->la_chunks;
            out->discarded = ws->la_discarded;
            out->n_zstd_chunks = ws->la_zstd;
            ws->la_buf = (gbuf){0};
            la_reset(ws);
            return 1;
        }
        default:
            return la_fail(ws, err, errlen, "protocol violation: message type 0x%02x", w.type);
        }
    }
}

void cs_ledger_free(cs_ledger *l)
{
    if (!l)
        return;
    free(l->data);
    l->data = NULL;
    l->len = 0;
}
