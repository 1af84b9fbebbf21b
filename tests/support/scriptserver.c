/* SPDX-License-Identifier: Apache-2.0 */
/* The scripted WebSocket server of the libremoteledger tests; see scriptserver.h. */
#include "support/scriptserver.h"
#include "support/wait.h"

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <openssl/err.h>
#include <openssl/evp.h>
#include <openssl/ssl.h>
#include <openssl/x509.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>
#include <xxhash.h>

#include "corestream/wire.h"
#include "transport/xport.h"
#include "wire/wire.h"

#define MAX_CONNS 8
#define WS_GUID "258EAFA5-E914-47DA-95CA-C5AB0DC85B11"

enum step_kind {
    ST_FRAME,     /* data: a complete frame, header included */
    ST_CLOSE,     /* data: a close frame; then wait for the client */
    ST_DROP,      /* FIN, then wait for the client */
    ST_STALL,     /* wait for the client */
    ST_CALL,      /* fn(arg) */
    ST_NO_HS,     /* never answer the upgrade */
    ST_REJECT_HS, /* answer with status */
    ST_CUSTOM_HS, /* data: a response head format ("%s": the accept key) */
    ST_ANSWER_RAW,/* data: sent as soon as the client sends anything, before TLS or HTTP */
    ST_BULK,      /* data: one ledger's frames, sent `count` times with the sequence patched */
    ST_NEXT,      /* connection separator */
};

typedef struct step {
    enum step_kind kind;
    uint8_t *data;
    size_t len;
    int status;
    void (*fn)(void *);
    void *arg;
    uint32_t from, count; /* ST_BULK */
    size_t *patch;        /* ST_BULK: where each message's sequence sits in data */
    size_t npatch;
} step;

typedef struct conn_rec {
    char target[2048];
    char request[8192];
    int close_code; /* from the client: 0 none */
    char close_reason[128];
    char frames[512]; /* opcodes of the client's frames, space-separated */
    int unmasked;
    char pong[128];
    char client_cert[128]; /* CN of the client's certificate */
    char tls_error[256];   /* why the TLS handshake failed */
} conn_rec;

/* One accepted connection: the socket (non-blocking) and, once the first step says plaintext or
 * TLS, its transport: the one corestreamd's connections use (transport/xport.h). */
typedef struct sconn {
    int fd;
    cs_xport *x;
} sconn;

struct ss_server {
    int lfd;
    int wake[2];
    int port;
    char url[64];
    pthread_t thread;
    atomic_bool stop;
    SSL_CTX *tls; /* TLS mode */
    char *token;  /* ss_require_token */

    pthread_mutex_t mu;
    pthread_cond_t cv;
    step *steps;
    size_t nsteps, capsteps;
    int scripted; /* connections the script describes */
    int finished; /* connections completed */
    int accepted;
    conn_rec conns[MAX_CONNS];
};

/* ---- script building ------------------------------------------------------------------------- */

static void add_step(ss_server *s, step st)
{
    pthread_mutex_lock(&s->mu);
    if (s->nsteps == s->capsteps) {
        s->capsteps = s->capsteps ? s->capsteps * 2 : 64;
        s->steps = realloc(s->steps, s->capsteps * sizeof *s->steps);
        if (!s->steps)
            abort();
    }
    s->steps[s->nsteps++] = st;
    if (st.kind == ST_NEXT)
        s->scripted++;
    pthread_mutex_unlock(&s->mu);
}

/* Server frames are unmasked. */
static uint8_t *make_frame(uint8_t b0, const void *p, size_t n, uint64_t declared, size_t *outlen)
{
    uint8_t hdr[10];
    size_t h;
    hdr[0] = b0;
    if (declared < 126) {
        hdr[1] = (uint8_t)declared;
        h = 2;
    } else if (declared <= 0xFFFF) {
        hdr[1] = 126;
        hdr[2] = (uint8_t)(declared >> 8);
        hdr[3] = (uint8_t)declared;
        h = 4;
    } else {
        hdr[1] = 127;
        for (int i = 0; i < 8; i++)
            hdr[2 + i] = (uint8_t)(declared >> (56 - 8 * i));
        h = 10;
    }
    uint8_t *f = malloc(h + n + 1);
    if (!f)
        abort();
    memcpy(f, hdr, h);
    if (n)
        memcpy(f + h, p, n);
    *outlen = h + n;
    return f;
}

static void add_frame(ss_server *s, enum step_kind kind, uint8_t b0, const void *p, size_t n, uint64_t declared)
{
    step st = {.kind = kind};
    st.data = make_frame(b0, p, n, declared, &st.len);
    add_step(s, st);
}

void ss_send_binary(ss_server *s, const void *p, size_t n) { add_frame(s, ST_FRAME, 0x82, p, n, n); }
void ss_send_text(ss_server *s, const char *t) { add_frame(s, ST_FRAME, 0x81, t, strlen(t), strlen(t)); }

void ss_send_close(ss_server *s, uint16_t code, const char *reason)
{
    uint8_t p[2 + 123];
    size_t rl = strlen(reason);
    if (rl > 123)
        rl = 123;
    p[0] = (uint8_t)(code >> 8);
    p[1] = (uint8_t)code;
    memcpy(p + 2, reason, rl);
    add_frame(s, ST_CLOSE, 0x88, p, 2 + rl, 2 + rl);
}

void ss_send_close_empty(ss_server *s) { add_frame(s, ST_CLOSE, 0x88, NULL, 0, 0); }

void ss_send_partial(ss_server *s, const void *p, size_t n, uint64_t declared)
{
    add_frame(s, ST_FRAME, 0x82, p, n, declared);
}

void ss_send_fragmented(ss_server *s, const void *p, size_t n, size_t frag)
{
    const uint8_t *b = p;
    size_t off = 0;
    bool first = true;
    do {
        size_t k = n - off < frag ? n - off : frag;
        bool last = off + k == n;
        uint8_t b0 = (uint8_t)((last ? 0x80 : 0) | (first ? 0x2 : 0x0));
        add_frame(s, ST_FRAME, b0, b + off, k, k);
        off += k;
        first = false;
    } while (off < n);
}

void ss_send_frame(ss_server *s, uint8_t b0, const void *p, size_t n) { add_frame(s, ST_FRAME, b0, p, n, n); }
void ss_send_ping(ss_server *s, const char *payload) { ss_send_frame(s, 0x89, payload, strlen(payload)); }

void ss_send_bytes(ss_server *s, const void *p, size_t n)
{
    step st = {.kind = ST_FRAME, .len = n};
    st.data = malloc(n ? n : 1);
    if (!st.data)
        abort();
    if (n)
        memcpy(st.data, p, n);
    add_step(s, st);
}

void ss_handshake_with(ss_server *s, const char *fmt)
{
    step st = {.kind = ST_CUSTOM_HS, .len = strlen(fmt)};
    st.data = (uint8_t *)strdup(fmt);
    if (!st.data)
        abort();
    add_step(s, st);
}

void ss_handshake_run(ss_server *s, const char *run)
{
    char fmt[1024];
    int n = snprintf(fmt, sizeof fmt,
                     "HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
                     "Sec-WebSocket-Accept: %%s\r\nX-Corestream-Run: %s\r\n\r\n",
                     run);
    if (n < 0 || (size_t)n >= sizeof fmt || strstr(run, "%s"))
        abort(); /* a run this long, or one with the accept's placeholder, is the test's mistake */
    ss_handshake_with(s, fmt);
}

void ss_answer_raw(ss_server *s, const char *bytes)
{
    step st = {.kind = ST_ANSWER_RAW, .len = strlen(bytes)};
    st.data = (uint8_t *)strdup(bytes);
    if (!st.data)
        abort();
    add_step(s, st);
}

void ss_drop(ss_server *s) { add_step(s, (step){.kind = ST_DROP}); }
void ss_stall(ss_server *s) { add_step(s, (step){.kind = ST_STALL}); }
void ss_call(ss_server *s, void (*fn)(void *), void *arg) { add_step(s, (step){.kind = ST_CALL, .fn = fn, .arg = arg}); }
void ss_no_handshake(ss_server *s) { add_step(s, (step){.kind = ST_NO_HS}); }
void ss_reject_handshake(ss_server *s, int status) { add_step(s, (step){.kind = ST_REJECT_HS, .status = status}); }
void ss_next_connection(ss_server *s) { add_step(s, (step){.kind = ST_NEXT}); }

/* Appends one unmasked binary frame holding msg to *buf, noting where its sequence sits. */
static void bulk_put(uint8_t **buf, size_t *len, size_t *cap, size_t **patch, size_t *npatch, const uint8_t *msg,
                     size_t n)
{
    size_t fl;
    uint8_t *f = make_frame(0x82, msg, n, n, &fl);
    if (*len + fl > *cap) {
        *cap = (*len + fl) * 2;
        *buf = realloc(*buf, *cap);
        if (!*buf)
            abort();
    }
    memcpy(*buf + *len, f, fl);
    *patch = realloc(*patch, (*npatch + 1) * sizeof **patch);
    if (!*patch)
        abort();
    (*patch)[(*npatch)++] = *len + (fl - n) + 2; /* version, type, then seq */
    *len += fl;
    free(f);
}

void ss_bulk_ledgers(ss_server *s, uint32_t from, uint32_t count, const void *payload, size_t size, size_t chunk)
{
    step st = {.kind = ST_BULK, .from = from, .count = count};
    size_t cap = 0;
    uint8_t m[CS_WIRE_END_LEN];
    cs_wire_put_begin(m, 0, 0);
    bulk_put(&st.data, &st.len, &cap, &st.patch, &st.npatch, m, CS_WIRE_BEGIN_LEN);
    uint8_t *cm = malloc(CS_WIRE_CHUNK_HEADER_LEN + chunk);
    if (!cm)
        abort();
    uint32_t idx = 0;
    for (size_t off = 0; off < size || (size == 0 && idx == 0); off += chunk, idx++) {
        size_t k = size - off < chunk ? size - off : chunk;
        size_t n = cs_wire_append_chunk(cm, 0, idx, CS_CODEC_RAW, (const uint8_t *)payload + off, k);
        bulk_put(&st.data, &st.len, &cap, &st.patch, &st.npatch, cm, n);
        if (size == 0)
            break;
    }
    free(cm);
    cs_wire_put_end(m, 0, idx ? idx : 1, size, 0, XXH64(payload, size, 0));
    bulk_put(&st.data, &st.len, &cap, &st.patch, &st.npatch, m, CS_WIRE_END_LEN);
    add_step(s, st);
}

void ss_begin(ss_server *s, uint32_t seq, int64_t emit_start)
{
    uint8_t m[CS_WIRE_BEGIN_LEN];
    cs_wire_put_begin(m, seq, emit_start);
    ss_send_binary(s, m, sizeof m);
}

void ss_chunk(ss_server *s, uint32_t seq, uint32_t idx, uint8_t codec, const void *p, size_t n)
{
    uint8_t *m = malloc(CS_WIRE_CHUNK_HEADER_LEN + n);
    if (!m)
        abort();
    size_t len = cs_wire_append_chunk(m, seq, idx, codec, p, n);
    ss_send_binary(s, m, len);
    free(m);
}

void ss_end(ss_server *s, uint32_t seq, uint32_t count, uint64_t total, int64_t emit_end, uint64_t sum)
{
    uint8_t m[CS_WIRE_END_LEN];
    cs_wire_put_end(m, seq, count, total, emit_end, sum);
    ss_send_binary(s, m, sizeof m);
}

void ss_flow(ss_server *s, uint32_t seq, int64_t emit_start, int64_t emit_end, size_t npieces,
             const void *const *pieces, const size_t *lens)
{
    XXH64_state_t *h = XXH64_createState();
    XXH64_reset(h, 0);
    uint64_t total = 0;
    ss_begin(s, seq, emit_start);
    for (size_t i = 0; i < npieces; i++) {
        XXH64_update(h, pieces[i], lens[i]);
        total += lens[i];
        ss_chunk(s, seq, (uint32_t)i, CS_CODEC_RAW, pieces[i], lens[i]);
    }
    ss_end(s, seq, (uint32_t)npieces, total, emit_end, XXH64_digest(h));
    XXH64_freeState(h);
}

static int64_t now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    return (int64_t)ts.tv_sec * 1000000000LL + ts.tv_nsec;
}

void ss_ledger(ss_server *s, uint32_t seq, size_t size)
{
    uint8_t *p = malloc(size ? size : 1);
    if (!p)
        abort();
    memset(p, (int)(seq & 0xFF), size);
    const void *pieces[1] = {p};
    size_t lens[1] = {size};
    int64_t t = now_ns();
    ss_flow(s, seq, t, t, 1, pieces, lens);
    free(p);
}

/* ---- I/O helpers -------------------------------------------------------------------------------- */

static int64_t mono_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* Polls fd for events (and the wake pipe). Returns 1 ready, 0 timeout, -1 stop requested. */
static int wait_fd(ss_server *s, int fd, short events, int64_t deadline)
{
    for (;;) {
        if (atomic_load(&s->stop))
            return -1;
        int64_t left = deadline - mono_ms();
        if (left <= 0)
            return 0;
        struct pollfd p[2] = {{.fd = fd, .events = events}, {.fd = s->wake[0], .events = POLLIN}};
        int n = poll(p, 2, (int)left);
        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0)
            return -1;
        if (p[1].revents)
            return -1;
        if (p[0].revents)
            return 1;
    }
}

/* Client frames, parsed as they arrive so the close frame can be recorded. */
typedef struct rxstate {
    uint8_t buf[65536];
    size_t len;
    bool eof;
} rxstate;

static void parse_client_frames(rxstate *rx, conn_rec *rec)
{
    for (;;) {
        if (rx->len < 2)
            return;
        uint8_t op = rx->buf[0] & 0x0F;
        uint64_t plen = rx->buf[1] & 0x7F;
        bool masked = rx->buf[1] & 0x80;
        size_t h = 2;
        if (plen == 126) {
            if (rx->len < 4)
                return;
            plen = (uint64_t)rx->buf[2] << 8 | rx->buf[3];
            h = 4;
        } else if (plen == 127) {
            if (rx->len < 10)
                return;
            plen = 0;
            for (int i = 0; i < 8; i++)
                plen = plen << 8 | rx->buf[2 + i];
            h = 10;
        }
        size_t mh = masked ? 4 : 0;
        if (h + mh + plen > sizeof rx->buf) { /* larger than anything a client sends here */
            rx->len = 0;
            return;
        }
        if (rx->len < h + mh + plen)
            return;
        uint8_t *pl = rx->buf + h + mh;
        if (masked)
            for (uint64_t i = 0; i < plen; i++)
                pl[i] ^= rx->buf[h + (i & 3)];
        else
            rec->unmasked++;
        static const char *const names[16] = {"cont", "text", "binary", "op3", "op4", "op5", "op6", "op7",
                                              "close", "ping", "pong", "opB", "opC", "opD", "opE", "opF"};
        size_t fl = strlen(rec->frames);
        snprintf(rec->frames + fl, sizeof rec->frames - fl, "%s%s", fl ? " " : "", names[op]);
        if (op == 0xA) {
            size_t n = plen < sizeof rec->pong - 1 ? (size_t)plen : sizeof rec->pong - 1;
            memcpy(rec->pong, pl, n);
            rec->pong[n] = '\0';
        }
        if (op == 0x8 && rec->close_code == 0) {
            if (plen >= 2) {
                rec->close_code = pl[0] << 8 | pl[1];
                size_t rl = plen - 2 < sizeof rec->close_reason - 1 ? plen - 2 : sizeof rec->close_reason - 1;
                memcpy(rec->close_reason, pl + 2, rl);
                rec->close_reason[rl] = '\0';
            } else {
                rec->close_code = 1005;
            }
        }
        size_t used = h + mh + (size_t)plen;
        memmove(rx->buf, rx->buf + used, rx->len - used);
        rx->len -= used;
    }
}

/* Reads whatever is there without blocking. */
static void drain(sconn *c, rxstate *rx, conn_rec *rec)
{
    while (!rx->eof) {
        if (rx->len == sizeof rx->buf)
            rx->len = 0;
        ssize_t n = cs_xport_read(c->x, rx->buf + rx->len, sizeof rx->buf - rx->len);
        if (n > 0) {
            rx->len += (size_t)n;
            parse_client_frames(rx, rec);
            continue;
        }
        if (n != CS_XP_AGAIN)
            rx->eof = true;
        return;
    }
}

/* Waits for the client to hang up, reading (and parsing) what it sends meanwhile. */
static void linger_until_eof(ss_server *s, sconn *c, rxstate *rx, conn_rec *rec)
{
    int64_t deadline = mono_ms() + WAIT_MS;
    drain(c, rx, rec); /* TLS may hold decrypted bytes poll() cannot see */
    while (!rx->eof) {
        int r = wait_fd(s, c->fd, POLLIN, deadline);
        if (r <= 0)
            return;
        drain(c, rx, rec);
    }
}

/* All of p[0..n) through the transport and out of it onto the socket. */
static int send_all(ss_server *s, sconn *c, const uint8_t *p, size_t n, rxstate *rx, conn_rec *rec)
{
    int64_t deadline = mono_ms() + WAIT_MS;
    while (n || cs_xport_pending(c->x)) {
        size_t before = cs_xport_pending(c->x);
        struct iovec iov = {(void *)p, n};
        ssize_t k = cs_xport_writev(c->x, n ? &iov : NULL, n ? 1 : 0);
        if (k < 0)
            return -1;
        p += k;
        n -= (size_t)k;
        if (k > 0 || cs_xport_pending(c->x) < before)
            continue;
        drain(c, rx, rec);
        if (wait_fd(s, c->fd, POLLOUT, deadline) <= 0)
            return -1;
    }
    return 0;
}

/* Reads the upgrade request; returns the header length or -1. */
static int read_request(ss_server *s, sconn *c, conn_rec *rec)
{
    size_t len = 0;
    int64_t deadline = mono_ms() + WAIT_MS;
    for (;;) {
        ssize_t n = cs_xport_read(c->x, rec->request + len, sizeof rec->request - 1 - len);
        if (n == CS_XP_AGAIN) {
            if (wait_fd(s, c->fd, POLLIN, deadline) <= 0)
                return -1;
            continue;
        }
        if (n <= 0)
            return -1;
        len += (size_t)n;
        rec->request[len] = '\0';
        char *end = strstr(rec->request, "\r\n\r\n");
        if (end) {
            end[4] = '\0';
            /* "GET <target> HTTP/1.1" */
            const char *sp = strchr(rec->request, ' ');
            const char *sp2 = sp ? strchr(sp + 1, ' ') : NULL;
            if (sp && sp2 && (size_t)(sp2 - sp - 1) < sizeof rec->target) {
                memcpy(rec->target, sp + 1, (size_t)(sp2 - sp - 1));
                rec->target[sp2 - sp - 1] = '\0';
            }
            return (int)(end + 4 - rec->request);
        }
        if (len == sizeof rec->request - 1)
            return -1;
    }
}

static bool header_value(const char *req, const char *name, char *out, size_t outlen)
{
    size_t nl = strlen(name);
    for (const char *line = strstr(req, "\r\n"); line; line = strstr(line, "\r\n")) {
        line += 2;
        if (strncasecmp(line, name, nl) == 0 && line[nl] == ':') {
            const char *v = line + nl + 1;
            while (*v == ' ' || *v == '\t')
                v++;
            const char *e = strstr(v, "\r\n");
            size_t n = e ? (size_t)(e - v) : strlen(v);
            while (n && (v[n - 1] == ' ' || v[n - 1] == '\t'))
                n--;
            if (n >= outlen)
                return false;
            memcpy(out, v, n);
            out[n] = '\0';
            return true;
        }
    }
    return false;
}

static void accept_key(const char *key, char out[64])
{
    char buf[256];
    snprintf(buf, sizeof buf, "%s%s", key, WS_GUID);
    unsigned char md[EVP_MAX_MD_SIZE];
    unsigned int mdlen = 0;
    EVP_Digest(buf, strlen(buf), md, &mdlen, EVP_sha1(), NULL);
    EVP_EncodeBlock((unsigned char *)out, md, (int)mdlen);
}

/* ---- the server thread --------------------------------------------------------------------------- */

/* Reads (and drops) raw bytes until the client hangs up, bounded. */
static void linger_raw(ss_server *s, int fd)
{
    int64_t deadline = mono_ms() + WAIT_MS;
    char buf[4096];
    while (wait_fd(s, fd, POLLIN, deadline) > 0) {
        ssize_t n = recv(fd, buf, sizeof buf, MSG_DONTWAIT);
        if (n == 0 || (n < 0 && errno != EAGAIN && errno != EINTR))
            return;
    }
}

/* The server side of the TLS handshake, bounded. On failure the reason is recorded, and the
 * server reads on until the client hangs up, so the client gets the alert rather than a reset. */
static int tls_accept(ss_server *s, sconn *c, conn_rec *rec)
{
    c->x = cs_xport_tls_server(c->fd, s->tls);
    if (!c->x)
        abort();
    int64_t deadline = mono_ms() + WAIT_MS;
    for (;;) {
        const char *why;
        int r = cs_xport_tls_accept(c->x, &why);
        if (r == 1)
            break;
        if (r >= 0) {
            if (wait_fd(s, c->fd, r == 0 ? POLLIN : POLLOUT, deadline) <= 0)
                return -1;
            continue;
        }
        snprintf(rec->tls_error, sizeof rec->tls_error, "%s", why);
        linger_raw(s, c->fd);
        return -1;
    }
    X509 *peer = SSL_get1_peer_certificate(c->x->ssl);
    if (peer) {
        X509_NAME_get_text_by_NID(X509_get_subject_name(peer), NID_commonName, rec->client_cert,
                                  sizeof rec->client_cert);
        X509_free(peer);
    }
    return 0;
}

static void serve_conn(ss_server *s, sconn *c, conn_rec *rec, size_t first, size_t last)
{
    rxstate *rx = calloc(1, sizeof *rx);
    if (!rx)
        abort();
    step *steps;
    pthread_mutex_lock(&s->mu);
    steps = s->steps;
    pthread_mutex_unlock(&s->mu);
    if (first < last && steps[first].kind == ST_ANSWER_RAW) {
        c->x = cs_xport_plain(c->fd);
        if (!c->x)
            abort();
        if (wait_fd(s, c->fd, POLLIN, mono_ms() + WAIT_MS) > 0)
            send_all(s, c, steps[first].data, steps[first].len, rx, rec);
        shutdown(c->fd, SHUT_WR);
        linger_raw(s, c->fd);
        goto out;
    }
    if (s->tls ? tls_accept(s, c, rec) < 0 : (c->x = cs_xport_plain(c->fd)) == NULL)
        goto out;
    if (read_request(s, c, rec) < 0)
        goto out;
    if (s->token) {
        char auth[512], want[512];
        snprintf(want, sizeof want, "Bearer %s", s->token);
        if (!header_value(rec->request, "Authorization", auth, sizeof auth) || strcmp(auth, want) != 0) {
            static const char resp[] = "HTTP/1.1 401 Unauthorized\r\nContent-Length: 0\r\nConnection: close\r\n\r\n";
            send_all(s, c, (const uint8_t *)resp, sizeof resp - 1, rx, rec);
            goto out;
        }
    }

    if (first < last && steps[first].kind == ST_NO_HS) {
        for (size_t i = first + 1; i < last; i++)
            if (steps[i].kind == ST_CALL)
                steps[i].fn(steps[i].arg);
        linger_until_eof(s, c, rx, rec);
        goto out;
    }
    if (first < last && steps[first].kind == ST_REJECT_HS) {
        char resp[256];
        int n = snprintf(resp, sizeof resp,
                         "HTTP/1.1 %d Rejected\r\nContent-Length: 0\r\nConnection: close\r\n\r\n",
                         steps[first].status);
        send_all(s, c, (const uint8_t *)resp, (size_t)n, rx, rec);
        goto out;
    }
    char key[128], acc[64], resp[1024];
    if (!header_value(rec->request, "Sec-WebSocket-Key", key, sizeof key))
        goto out;
    accept_key(key, acc);
    int n;
    if (first < last && steps[first].kind == ST_CUSTOM_HS) {
        const char *fmt = (const char *)steps[first].data;
        const char *pct = strstr(fmt, "%s");
        if (pct)
            n = snprintf(resp, sizeof resp, "%.*s%s%s", (int)(pct - fmt), fmt, acc, pct + 2);
        else
            n = snprintf(resp, sizeof resp, "%s", fmt);
        first++;
    } else {
        n = snprintf(resp, sizeof resp,
                     "HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
                     "Sec-WebSocket-Accept: %s\r\n\r\n",
                     acc);
    }
    if (n < 0 || (size_t)n >= sizeof resp || send_all(s, c, (const uint8_t *)resp, (size_t)n, rx, rec))
        goto out;

    for (size_t i = first; i < last; i++) {
        step *st = &steps[i];
        switch (st->kind) {
        case ST_FRAME:
            if (send_all(s, c, st->data, st->len, rx, rec))
                goto failed;
            break;
        case ST_CLOSE:
            if (send_all(s, c, st->data, st->len, rx, rec))
                goto failed;
            linger_until_eof(s, c, rx, rec);
            goto out;
        case ST_DROP:
            cs_xport_shutdown(c->x); /* TLS: close_notify, which the client reads as the end */
            linger_until_eof(s, c, rx, rec);
            goto out;
        case ST_STALL:
            linger_until_eof(s, c, rx, rec);
            goto out;
        case ST_CALL:
            st->fn(st->arg);
            break;
        case ST_BULK:
            for (uint32_t k = 0; k < st->count; k++) {
                uint32_t seq = st->from + k;
                for (size_t p = 0; p < st->npatch; p++) {
                    uint8_t *q = st->data + st->patch[p];
                    q[0] = (uint8_t)(seq >> 24);
                    q[1] = (uint8_t)(seq >> 16);
                    q[2] = (uint8_t)(seq >> 8);
                    q[3] = (uint8_t)seq;
                }
                if (send_all(s, c, st->data, st->len, rx, rec))
                    goto failed;
            }
            break;
        default:
            break;
        }
    }
    linger_until_eof(s, c, rx, rec);
    goto out;
failed:
    /* The client hung up while the script was still sending (it stopped early and reset the
     * connection): what it sent before, its close frame included, is still queued here. */
    linger_until_eof(s, c, rx, rec);
out:
    free(rx);
}

static void *server_main(void *arg)
{
    ss_server *s = arg;
    size_t next = 0;
    for (int c = 0; c < MAX_CONNS; c++) {
        int64_t deadline = mono_ms() + 3600 * 1000; /* until ss_stop */
        if (wait_fd(s, s->lfd, POLLIN, deadline) <= 0)
            break;
        int fd = accept(s->lfd, NULL, NULL);
        if (fd < 0)
            continue;
        int one = 1;
        setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
        /* This connection's steps: up to the next separator. */
        pthread_mutex_lock(&s->mu);
        size_t first = next, last = next;
        while (last < s->nsteps && s->steps[last].kind != ST_NEXT)
            last++;
        next = last < s->nsteps ? last + 1 : last;
        s->accepted++;
        pthread_mutex_unlock(&s->mu);

        fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) | O_NONBLOCK);
        sconn sc = {.fd = fd};
        serve_conn(s, &sc, &s->conns[c], first, last);
        if (sc.x)
            cs_xport_free(sc.x); /* and the socket with it */
        else
            close(fd);

        pthread_mutex_lock(&s->mu);
        s->finished++;
        pthread_cond_broadcast(&s->cv);
        pthread_mutex_unlock(&s->mu);
    }
    return NULL;
}

static ss_server *start(SSL_CTX *tls)
{
    ss_server *s = calloc(1, sizeof *s);
    if (!s)
        return NULL;
    s->tls = tls;
    s->lfd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK), .sin_port = 0};
    socklen_t al = sizeof a;
    if (s->lfd < 0 || bind(s->lfd, (struct sockaddr *)&a, sizeof a) || listen(s->lfd, 8) ||
        getsockname(s->lfd, (struct sockaddr *)&a, &al) || pipe2(s->wake, O_CLOEXEC)) {
        if (s->lfd >= 0)
            close(s->lfd);
        free(s);
        return NULL;
    }
    s->port = ntohs(a.sin_port);
    snprintf(s->url, sizeof s->url, "%s://127.0.0.1:%d", tls ? "wss" : "ws", s->port);
    s->scripted = 1;
    pthread_mutex_init(&s->mu, NULL);
    pthread_cond_init(&s->cv, NULL);
    atomic_init(&s->stop, false);
    if (pthread_create(&s->thread, NULL, server_main, s)) {
        close(s->lfd);
        free(s);
        return NULL;
    }
    return s;
}

ss_server *ss_start(void) { return start(NULL); }

ss_server *ss_start_tls(const ss_tls *t)
{
    /* OpenSSL writes with write(2): a client that resets would raise SIGPIPE in the test. */
    signal(SIGPIPE, SIG_IGN);
    SSL_CTX *ctx = SSL_CTX_new(TLS_server_method());
    if (!ctx)
        return NULL;
    if (SSL_CTX_use_certificate_chain_file(ctx, t->cert_file) != 1 ||
        SSL_CTX_use_PrivateKey_file(ctx, t->key_file, SSL_FILETYPE_PEM) != 1 ||
        (t->client_ca_file && SSL_CTX_load_verify_locations(ctx, t->client_ca_file, NULL) != 1)) {
        SSL_CTX_free(ctx);
        return NULL;
    }
    if (t->client_ca_file)
        SSL_CTX_set_verify(ctx, SSL_VERIFY_PEER | (t->require_client_cert ? SSL_VERIFY_FAIL_IF_NO_PEER_CERT : 0),
                           NULL);
    ss_server *s = start(ctx);
    if (!s)
        SSL_CTX_free(ctx);
    return s;
}

void ss_require_token(ss_server *s, const char *token)
{
    free(s->token);
    s->token = strdup(token);
    if (!s->token)
        abort();
}

void ss_stop(ss_server *s)
{
    if (!s)
        return;
    atomic_store(&s->stop, true);
    ssize_t w = write(s->wake[1], "x", 1);
    (void)w;
    pthread_join(s->thread, NULL);
    close(s->lfd);
    close(s->wake[0]);
    close(s->wake[1]);
    for (size_t i = 0; i < s->nsteps; i++) {
        free(s->steps[i].data);
        free(s->steps[i].patch);
    }
    free(s->steps);
    free(s->token);
    SSL_CTX_free(s->tls);
    pthread_mutex_destroy(&s->mu);
    pthread_cond_destroy(&s->cv);
    free(s);
}

int ss_port(const ss_server *s) { return s->port; }
const char *ss_url(const ss_server *s) { return s->url; }

bool ss_wait(ss_server *s, int timeout_ms)
{
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    ts.tv_sec += timeout_ms / 1000;
    ts.tv_nsec += (long)(timeout_ms % 1000) * 1000000L;
    if (ts.tv_nsec >= 1000000000L) {
        ts.tv_sec++;
        ts.tv_nsec -= 1000000000L;
    }
    pthread_mutex_lock(&s->mu);
    while (s->finished < s->scripted) {
        if (pthread_cond_timedwait(&s->cv, &s->mu, &ts) != 0)
            break;
    }
    bool ok = s->finished >= s->scripted;
    pthread_mutex_unlock(&s->mu);
    return ok;
}

int ss_connections(const ss_server *s)
{
    ss_server *m = (ss_server *)s;
    pthread_mutex_lock(&m->mu);
    int n = m->accepted;
    pthread_mutex_unlock(&m->mu);
    return n;
}

const char *ss_target(const ss_server *s, int i) { return i < MAX_CONNS ? s->conns[i].target : ""; }
const char *ss_request(const ss_server *s, int i) { return i < MAX_CONNS ? s->conns[i].request : ""; }

const char *ss_client_frames(const ss_server *s, int i) { return i < MAX_CONNS ? s->conns[i].frames : ""; }
int ss_client_unmasked(const ss_server *s, int i) { return i < MAX_CONNS ? s->conns[i].unmasked : 0; }
const char *ss_client_pong(const ss_server *s, int i) { return i < MAX_CONNS ? s->conns[i].pong : ""; }
const char *ss_client_cert(const ss_server *s, int i) { return i < MAX_CONNS ? s->conns[i].client_cert : ""; }
const char *ss_tls_error(const ss_server *s, int i) { return i < MAX_CONNS ? s->conns[i].tls_error : ""; }

int ss_client_close(const ss_server *s, int i, char *reason, size_t len)
{
    if (i >= MAX_CONNS)
        return 0;
    if (reason && len)
        snprintf(reason, len, "%s", s->conns[i].close_reason);
    return s->conns[i].close_code;
}
