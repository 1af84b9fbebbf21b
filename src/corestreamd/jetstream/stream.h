/* SPDX-License-Identifier: Apache-2.0 */
/* The JetStream side of the publisher's start-up and recovery: the max_payload check, creating or
 * checking the stream, and asking the stream where a run ends. Each call is a request/reply on
 * the caller's connection, bounded by the context's Wait (5 s); call from one thread at a time. */
#ifndef CS_CORESTREAMD_JETSTREAM_STREAM_H
#define CS_CORESTREAMD_JETSTREAM_STREAM_H

#include <nats/nats.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "common/err.h"
#include "corestreamd/jetstream/naming.h"

/* Bytes a message's header block takes at most with its Nats-Msg-Id (an id is at most
 * CS_JS_MSG_ID_MAX, 96 bytes; "NATS/1.0\r\nNats-Msg-Id: …\r\n\r\n" adds 27). */
#define CS_JS_HEADER_ROOM 128

/* The largest message the publisher sends for a chunk size: a raw CHUNK (a zstd frame ships only
 * when smaller) plus CS_JS_HEADER_ROOM. */
uint64_t cs_js_max_message(size_t chunk_size);

/* Refuses a chunk size whose messages cannot fit the server's max_payload:
 * `--chunk-size 1048576 makes JetStream messages of up to 1048715 bytes (chunk, header and
 * Nats-Msg-Id), over the max_payload of 1048576 bytes that nats://… announces; use --chunk-size
 * 1048437 or less, or raise max_payload on the server`. */
int cs_js_check_payload(int64_t max_payload, size_t chunk_size, const char *url, cs_err *err);

typedef struct cs_js_stream_spec {
    const char *name;
    int64_t max_age_ns; /* 0: no age limit */
    int64_t max_bytes;  /* -1: no size limit */
    int64_t replicas;
} cs_js_stream_spec;

/* Creates the stream (file storage, limits retention, discard old, subjects "<name>.>") or,
 * when it exists, checks it: subjects must include "<name>.>", and max_age, max_bytes and
 * replicas must equal the spec, else an error naming the field with both values, e.g.
 * `jetstream: stream CORESTREAM has max_age 1h0m0s but --jetstream-max-age is 24h0m0s; change
 * one of them (nats stream edit CORESTREAM)`. *created tells which happened. */
int cs_js_stream_ensure(jsCtx *js, const cs_js_stream_spec *spec, bool *created, cs_err *err);

/* Where run stands in the stream: *found false when the stream holds no message of it, else
 * *next is the position after its last message (cs_js_pos_after). A last message that is not a
 * wire message of its subject's ledger (junk someone else published there) is passed over: WARN
 * `jetstream stream's last message of the run is not a wire message; looking before it`, and the
 * run's last real message among the CS_JS_JUNK_LOOKBACK stream messages before it counts; with
 * none there, the junk's own error. Errors name the request: `jetstream: read the last message
 * of CORESTREAM.<run>.*: …`. */
#define CS_JS_JUNK_LOOKBACK 1024
int cs_js_stream_resume_pos(jsCtx *js, const char *stream, const char *run, bool *found, cs_js_pos *next,
                            cs_err *err);

#endif
