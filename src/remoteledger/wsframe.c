/* SPDX-License-Identifier: Apache-2.0 */
/* RFC 6455 framing, client side: see wsframe.h. */
#include "remoteledger/wsframe.h"

#include <errno.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <sys/random.h>
#include <time.h>

enum {
    S_HDR,     /* collecting a frame header */
    S_PAYLOAD, /* handing out a data frame's payload */
    S_CTL,     /* collecting a control frame's payload */
    S_ERROR,   /* failed, for good */
};

void rli_ws_parser_init(rli_ws_parser *p)
{
    memset(p, 0, sizeof *p);
    p->state = S_HDR;
    p->hdr_need = 2;
}

bool rli_ws_parser_in_message(const rli_ws_parser *p) { return p->in_msg; }

uint64_t rli_ws_payload_left(const rli_ws_parser *p) { return p->state == S_PAYLOAD ? p->remaining : 0; }

static const char *op_name(uint8_t op, char *buf, size_t len)
{
    switch (op) {
    case RLI_WS_OP_CONT: return "opContinuation";
    case RLI_WS_OP_TEXT: return "opText";
    case RLI_WS_OP_BINARY: return "opBinary";
    case RLI_WS_OP_CLOSE: return "opClose";
    case RLI_WS_OP_PING: return "opPing";
    case RLI_WS_OP_PONG: return "opPong";
    default: snprintf(buf, len, "opcode(%u)", op); return buf;
    }
}

static void fail(rli_ws_parser *p, rli_ws_event *ev, bool at_boundary, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));

/* Fails the parser for good; in_msg is left as it was, so the caller can still tell where the
 * stream stopped. */
static void fail(rli_ws_parser *p, rli_ws_event *ev, bool at_boundary, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(p->err, sizeof p->err, fmt, ap);
    va_end(ap);
    p->state = S_ERROR;
    p->err_boundary = at_boundary;
    ev->kind = RLI_WS_EV_ERROR;
    ev->err = p->err;
    ev->at_boundary = at_boundary;
}

/* The header in p->hdr is complete: validate it in coder/websocket's order and set up the frame.
 * Returns true when an event was produced, false when the parser should go on (a control frame
 * with payload to collect). */
static bool header_done(rli_ws_parser *p, rli_ws_event *ev)
{
    const uint8_t *h = p->hdr;
    bool fin = h[0] & 0x80;
    uint8_t op = h[0] & 0x0F;
    uint8_t len7 = h[1] & 0x7F;
    uint64_t len = len7;
    if (len7 == 126) {
        len = (uint64_t)h[2] << 8 | h[3];
    } else if (len7 == 127) {
        len = 0;
        for (int i = 0; i < 8; i++)
            len = len << 8 | h[2 + i];
    }
    p->hdr_len = 0;
    p->hdr_need = 2;
    bool boundary = !p->in_msg;
    char nb[24];
    if (len >> 63) {
        fail(p, ev, boundary, "failed to read frame header: received negative payload length: %" PRId64,
             (int64_t)len);
        return true;
    }
    if (h[0] & 0x70) {
        fail(p, ev, boundary, "received header with unexpected rsv bits set: %s:%s:%s",
             h[0] & 0x40 ? "true" : "false", h[0] & 0x20 ? "true" : "false", h[0] & 0x10 ? "true" : "false");
        return true;
    }
    if (h[1] & 0x80) {
        fail(p, ev, boundary, "received masked frame from server");
        return true;
    }
    switch (op) {
    case RLI_WS_OP_CLOSE:
    case RLI_WS_OP_PING:
    case RLI_WS_OP_PONG:
        if (len > RLI_WS_MAX_CONTROL) {
            fail(p, ev, boundary,
                 "failed to handle control frame %s: received control frame payload with invalid length: %" PRIu64,
                 op_name(op, nb, sizeof nb), len);
            return true;
        }
        if (!fin) {
            fail(p, ev, boundary, "failed to handle control frame %s: received fragmented control frame",
                 op_name(op, nb, sizeof nb));
            return true;
        }
        p->opcode = op;
        p->fin = true;
        p->remaining = len;
        p->ctl_len = 0;
        if (len) {
            p->state = S_CTL;
            return false;
        }
        ev->kind = RLI_WS_EV_CONTROL;
        ev->opcode = op;
        ev->data = p->ctl;
        ev->len = 0;
        return true;
    case RLI_WS_OP_CONT:
    case RLI_WS_OP_TEXT:
    case RLI_WS_OP_BINARY:
        break;
    default:
        fail(p, ev, boundary, "received unknown opcode %s", op_name(op, nb, sizeof nb));
        return true;
    }
    if (op == RLI_WS_OP_CONT && !p->in_msg) {
        fail(p, ev, true, "received continuation frame without text or binary frame");
        return true;
    }
    if (op != RLI_WS_OP_CONT && p->in_msg) {
        fail(p, ev, false, "received new data message without finishing the previous message");
        return true;
    }
    bool first = op != RLI_WS_OP_CONT;
    if (first) {
        p->in_msg = true;
        p->msg_fresh = true;
        p->msg_opcode = op;
    }
    p->opcode = op;
    p->fin = fin;
    p->remaining = len;
    p->state = S_PAYLOAD;
    ev->kind = RLI_WS_EV_FRAME;
    ev->opcode = p->msg_opcode;
    ev->first = first;
    ev->fin = fin;
    ev->frame_len = len;
    return true;
}

size_t rli_ws_parse(rli_ws_parser *p, const uint8_t *in, size_t len, rli_ws_event *ev)
{
    size_t used = 0;
    ev->kind = RLI_WS_EV_NONE;
    for (;;) {
        size_t avail = len - used;
        switch (p->state) {
        case S_HDR: {
            size_t want = p->hdr_need - p->hdr_len;
            size_t take = want < avail ? want : avail;
            if (take) {
                memcpy(p->hdr + p->hdr_len, in + used, take);
                p->hdr_len += take;
                used += take;
            }
            if (p->hdr_len < p->hdr_need)
                return used; /* RLI_WS_EV_NONE */
            if (p->hdr_need == 2) {
                uint8_t len7 = p->hdr[1] & 0x7F;
                size_t need = 2 + (len7 == 126 ? 2 : len7 == 127 ? 8 : 0) + (p->hdr[1] & 0x80 ? 4 : 0);
                if (need > 2) {
                    p->hdr_need = need;
                    continue;
                }
            }
            if (header_done(p, ev))
                return used;
            continue;
        }
        case S_PAYLOAD: {
            if (p->remaining && !avail)
                return used; /* RLI_WS_EV_NONE */
            size_t n = p->remaining < (uint64_t)avail ? (size_t)p->remaining : avail;
            p->remaining -= n;
            ev->kind = RLI_WS_EV_DATA;
            ev->data = n ? in + used : NULL;
            ev->len = n;
            ev->msg_start = p->msg_fresh;
            ev->frame_end = p->remaining == 0;
            ev->msg_end = ev->frame_end && p->fin;
            p->msg_fresh = false;
            if (ev->frame_end) {
                p->state = S_HDR;
                if (p->fin)
                    p->in_msg = false;
            }
            return used + n;
        }
        case S_CTL: {
            size_t n = p->remaining < (uint64_t)avail ? (size_t)p->remaining : avail;
            if (n) {
                memcpy(p->ctl + p->ctl_len, in + used, n);
                p->ctl_len += n;
                p->remaining -= n;
                used += n;
            }
            if (p->remaining)
                return used; /* RLI_WS_EV_NONE */
            p->state = S_HDR;
            ev->kind = RLI_WS_EV_CONTROL;
            ev->opcode = p->opcode;
            ev->data = p->ctl;
            ev->len = p->ctl_len;
            return used;
        }
        default:
            ev->kind = RLI_WS_EV_ERROR;
            ev->err = p->err;
            ev->at_boundary = p->err_boundary;
            return 0;
        }
    }
}

size_t rli_ws_build_frame(uint8_t *out, uint8_t opcode, const uint8_t *p, size_t n, const uint8_t mask[4])
{
    size_t h = 0;
    out[h++] = (uint8_t)(0x80 | (opcode & 0x0F));
    if (n < 126) {
        out[h++] = (uint8_t)(0x80 | n);
    } else if (n <= 0xFFFF) {
        out[h++] = 0x80 | 126;
        out[h++] = (uint8_t)(n >> 8);
        out[h++] = (uint8_t)n;
    } else {
        out[h++] = 0x80 | 127;
        for (int i = 7; i >= 0; i--)
            out[h++] = (uint8_t)((uint64_t)n >> (8 * i));
    }
    memcpy(out + h, mask, 4);
    h += 4;
    for (size_t i = 0; i < n; i++)
        out[h + i] = p[i] ^ mask[i & 3];
    return h + n;
}

void rli_random_bytes(uint8_t *out, size_t n)
{
    size_t got = 0;
    while (got < n) {
        ssize_t r = getrandom(out + got, n - got, 0);
        if (r > 0) {
            got += (size_t)r;
            continue;
        }
        if (r < 0 && errno == EINTR)
            continue;
        break;
    }
    if (got == n)
        return;
    /* No getrandom (ENOSYS under an old kernel or a seccomp filter): masks need only be
     * unpredictable to intermediaries, so a clock-seeded mix will do. */
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    uint64_t x = (uint64_t)ts.tv_nsec * 0x9E3779B97F4A7C15ull ^ (uint64_t)ts.tv_sec ^ (uint64_t)(uintptr_t)out;
    for (; got < n; got++) {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        out[got] = (uint8_t)(x >> 32);
    }
}
