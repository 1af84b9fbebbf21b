/* SPDX-License-Identifier: Apache-2.0 */
/* libFuzzer target for the client's WebSocket frame parser (remoteledger/wsframe.c).
 *
 * Input: byte 0 says how many split sizes follow (1-8), then those sizes; the rest is the byte
 * stream a server sends. The stream is parsed once whole and once cut into pieces of the given
 * sizes in turn (0: an empty feed, then one byte). Each piece is an exact-size heap copy, so ASan
 * sees any read past what was fed. Checked:
 *  - both runs give the same frames, control frames, payload bytes and error, at the same offset;
 *  - a data slice lies inside the input just fed, at the parser's position (no copy);
 *  - every frame's slices add up to its declared length, flagged first/last as the header said;
 *  - control payloads stay within 125 bytes; the parser never reports using more than it got and
 *    stays failed after an error;
 *  - rli_ws_payload_left is always what the current data frame has left (0 outside one), and a
 *    third run that never reads past it inside a payload (the client's in-place reads) gives the
 *    same events, each such read one payload slice.
 *
 * Build and run: tests/fuzz/CMakeLists.txt (clang, -DCS_FUZZ=ON). */
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "remoteledger/wsframe.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void check(bool ok, const char *what)
{
    if (!ok) {
        fprintf(stderr, "fuzz_wsframe: property violated: %s\n", what);
        abort();
    }
}

/* A canonical record of what the parser reported, independent of how payloads were sliced. */
typedef struct trace {
    uint8_t *p;
    size_t len, cap;
} trace;

static void put(trace *t, const void *p, size_t n)
{
    if (t->len + n > t->cap) {
        size_t cap = t->cap ? t->cap : 256;
        while (cap < t->len + n)
            cap *= 2;
        t->p = realloc(t->p, cap);
        check(t->p != NULL, "realloc");
        t->cap = cap;
    }
    memcpy(t->p + t->len, p, n);
    t->len += n;
}

static void put_u64(trace *t, uint64_t v) { put(t, &v, sizeof v); }

/* What one run of the parser saw. */
typedef struct run {
    rli_ws_parser p;
    trace t;
    uint64_t consumed;
    /* the data frame being handed out */
    bool in_frame, fin, msg_fresh;
    uint64_t frame_len, frame_got;
    trace payload;
    bool failed;
} run;

static void flush_payload(run *r)
{
    put(&r->t, "P", 1);
    put_u64(&r->t, r->payload.len);
    if (r->payload.len)
        put(&r->t, r->payload.p, r->payload.len);
    r->payload.len = 0;
}

/* Feeds in[0..len) (an exact-size buffer) until the parser wants more or fails. */
static void feed(run *r, const uint8_t *in, size_t len)
{
    size_t off = 0;
    int idle = 0; /* events in a row that used no input */
    while (!r->failed) {
        rli_ws_event ev;
        size_t used = rli_ws_parse(&r->p, in + off, len - off, &ev);
        check(used <= len - off, "used no more than was given");
        idle = used ? 0 : idle + 1;
        check(idle < 4, "progress");
        switch (ev.kind) {
        case RLI_WS_EV_NONE:
            check(off + used == len, "NONE only once the input is used up");
            r->consumed += len;
            return;
        case RLI_WS_EV_FRAME:
            check(!r->in_frame, "a header only after the previous frame's payload");
            check(ev.opcode == RLI_WS_OP_TEXT || ev.opcode == RLI_WS_OP_BINARY, "data opcode");
            check(ev.frame_len >> 63 == 0, "63-bit length");
            check(rli_ws_parser_in_message(&r->p), "in a message after its header");
            put(&r->t, "F", 1);
            put(&r->t, &ev.opcode, 1);
            put(&r->t, &ev.first, 1);
            put(&r->t, &ev.fin, 1);
            put_u64(&r->t, ev.frame_len);
            r->in_frame = true;
            r->fin = ev.fin;
            r->frame_len = ev.frame_len;
            r->frame_got = 0;
            if (ev.first)
                r->msg_fresh = true;
            break;
        case RLI_WS_EV_DATA:
            check(r->in_frame, "data inside a frame");
            check(ev.len == used, "a data event uses exactly its slice");
            check(ev.len == 0 ? ev.data == NULL : ev.data == in + off, "the slice is the input, in place");
            check(ev.len <= r->frame_len - r->frame_got, "no more than the frame declared");
            r->frame_got += ev.len;
            check(ev.msg_start == r->msg_fresh, "msg_start on the message's first slice only");
            r->msg_fresh = false;
            check(ev.frame_end == (r->frame_got == r->frame_len), "frame_end exactly at the frame's end");
            check(ev.msg_end == (ev.frame_end && r->fin), "msg_end on the final frame's end");
            if (ev.len)
                put(&r->payload, ev.data, ev.len);
            if (ev.frame_end) {
                flush_payload(r);
                r->in_frame = false;
                check(rli_ws_parser_in_message(&r->p) == !r->fin, "in a message until its final frame");
            }
            break;
        case RLI_WS_EV_CONTROL:
            check(!r->in_frame, "control frames between data frames");
            check(ev.opcode == RLI_WS_OP_CLOSE || ev.opcode == RLI_WS_OP_PING || ev.opcode == RLI_WS_OP_PONG,
                  "control opcode");
            check(ev.len <= RLI_WS_MAX_CONTROL, "control payload within 125 bytes");
            put(&r->t, "C", 1);
            put(&r->t, &ev.opcode, 1);
            put_u64(&r->t, ev.len);
            if (ev.len)
                put(&r->t, ev.data, ev.len);
            break;
        case RLI_WS_EV_ERROR: {
            check(ev.err && ev.err[0], "an error says why");
            size_t n = strlen(ev.err);
            put(&r->t, "E", 1);
            put(&r->t, &ev.at_boundary, 1);
            put_u64(&r->t, r->consumed + off + used);
            put(&r->t, ev.err, n + 1);
            r->failed = true;
            /* Failed for good: the next call reports the same error and uses nothing. */
            rli_ws_event again;
            uint8_t byte = 0x82;
            check(rli_ws_parse(&r->p, &byte, 1, &again) == 0, "a failed parser uses nothing");
            check(again.kind == RLI_WS_EV_ERROR && strcmp(again.err, ev.err) == 0, "stays failed");
            break;
        }
        default:
            check(false, "event kind");
        }
        off += used;
        /* What conn_input.c asks before reading in place: exactly the current frame's payload to
         * come. */
        check(rli_ws_payload_left(&r->p) == (r->in_frame && !r->failed ? r->frame_len - r->frame_got : 0),
              "payload_left is what the frame has left");
    }
    r->consumed += off;
}

static void feed_copy(run *r, const uint8_t *p, size_t n)
{
    uint8_t *copy = malloc(n ? n : 1);
    check(copy != NULL, "malloc");
    if (n)
        memcpy(copy, p, n);
    feed(r, copy, n);
    free(copy);
}

static void finish(run *r)
{
    if (r->in_frame && !r->failed)
        flush_payload(r); /* a frame cut short by the end of the stream */
    put_u64(&r->t, r->consumed);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 2)
        return 0;
    size_t nsplit = (size_t)(data[0] % 8) + 1;
    if (size < 1 + nsplit)
        return 0;
    const uint8_t *splits = data + 1;
    const uint8_t *stream = data + 1 + nsplit;
    size_t len = size - 1 - nsplit;

    run *whole = calloc(1, sizeof *whole), *cut = calloc(1, sizeof *cut);
    check(whole && cut, "calloc");
    rli_ws_parser_init(&whole->p);
    rli_ws_parser_init(&cut->p);

    feed_copy(whole, stream, len);
    finish(whole);

    size_t off = 0;
    for (size_t i = 0; off < len && !cut->failed; i++) {
        size_t n = splits[i % nsplit];
        if (n == 0) {
            feed_copy(cut, stream + off, 0);
            n = 1;
        }
        if (n > len - off)
            n = len - off;
        feed_copy(cut, stream + off, n);
        off += n;
    }
    finish(cut);

    check(whole->t.len == cut->t.len && memcmp(whole->t.p, cut->t.p, whole->t.len) == 0,
          "the same events whatever the split");

    /* As the client reads in place: inside a data frame's payload no read goes past what the
     * frame has left (rli_ws_payload_left), so such a piece is all payload, one slice. */
    run *inplace = calloc(1, sizeof *inplace);
    check(inplace != NULL, "calloc");
    rli_ws_parser_init(&inplace->p);
    off = 0;
    for (size_t i = 0; off < len && !inplace->failed; i++) {
        size_t n = splits[i % nsplit];
        n = n ? n : 1;
        if (n > len - off)
            n = len - off;
        uint64_t left = rli_ws_payload_left(&inplace->p);
        if (left && n > left)
            n = (size_t)left;
        size_t payload_before = inplace->payload.len;
        feed_copy(inplace, stream + off, n);
        if (left && !inplace->failed)
            check(rli_ws_payload_left(&inplace->p) == left - n &&
                      (left > n ? inplace->payload.len == payload_before + n : true),
                  "a read within payload_left is all payload");
        off += n;
    }
    finish(inplace);
    check(whole->t.len == inplace->t.len && memcmp(whole->t.p, inplace->t.p, whole->t.len) == 0,
          "the same events read as the client reads in place");
    free(inplace->t.p);
    free(inplace->payload.p);
    free(inplace);

    free(whole->t.p);
    free(whole->payload.p);
    free(cut->t.p);
    free(cut->payload.p);
    free(whole);
    free(cut);
    return 0;
}
