/* SPDX-License-Identifier: Apache-2.0 */
/* Test support: a nats.c consumer that reads one run's messages back from a JetStream stream, in
 * stream order (by stream sequence, so what is checked is exactly what the stream holds), and
 * checks them as an edge would: each ledger's BEGIN, its chunks in index order, its END with
 * count, length and XXH64; ledgers contiguous; each message's Nats-Msg-Id "<run>:<seq>:<item>:<tag>"
 * (the tag is not checked: only the core holds its secret).
 * Anything else (a duplicate, a gap, a message out of place) is a violation, described in text.
 * Every call is bounded (the JetStream API wait is 5 s a request). Not thread-safe. */
#ifndef CS_TESTS_SUPPORT_JSREADER_H
#define CS_TESTS_SUPPORT_JSREADER_H

#include <nats/nats.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

typedef struct cs_jsr_msg {
    uint32_t seq;  /* ledger */
    uint32_t item; /* 0 BEGIN, 1..n chunks, n+1 END */
    uint8_t *data;
    size_t len;
} cs_jsr_msg;

typedef struct cs_jsr_ledger {
    uint32_t seq;
    uint8_t *data; /* the reassembled ledger */
    size_t len;
    uint32_t chunks;
    uint32_t zstd_chunks;
    int64_t emit_start; /* 0 when the ledger came from the ring (stampless) */
    bool sig;           /* a SIG came between its last chunk and END */
} cs_jsr_ledger;

typedef struct cs_jsr {
    cs_jsr_msg *msgs;
    size_t nmsgs;
    cs_jsr_ledger *ledgers; /* complete, verified ledgers in stream order */
    size_t nledgers;
    char violation[512]; /* "" when the run's messages are a clean sequence of ledgers */
} cs_jsr;

/* Reads every message of "<stream>.<run>.*". Returns 0 (violations are data, not errors), or
 * -1 with err filled when the stream cannot be read. A partial last ledger (its END not yet
 * stored) is not a violation; it is left out of ledgers. */
int cs_jsr_read(const char *url, const char *stream, const char *run, cs_jsr *out, char *err, size_t errlen);
/* The message of ledger seq, item, or NULL. */
const cs_jsr_msg *cs_jsr_find(const cs_jsr *r, uint32_t seq, uint32_t item);
void cs_jsr_free(cs_jsr *r);

/* The run's newest message in the stream, read through js (any connection, credentials or TLS
 * included): its ledger into *seq and, when id is not NULL, its Nats-Msg-Id into id. 0, or -1 when
 * there is none or it is not a wire message with an id. */
int cs_jsr_tip(jsCtx *js, const char *stream, const char *run, uint32_t *seq, char *id, size_t idlen);

/* Waits until the stream holds the END of ledger seq of the run: 0, or -1 after timeout_ms. It
 * subscribes to the ledger's subject first and then looks in the stream, so it cannot miss it. */
int cs_jsr_wait_ledger(const char *url, const char *stream, const char *run, uint32_t seq, int timeout_ms);

/* Waits until a JetStream API request about stream, sent to url, is refused as "JetStream system
 * temporarily unavailable" (code 10008: the stream has no leader, as in a cluster that lost its
 * quorum): 0, or -1 after timeout_ms. */
int cs_jsr_wait_unavailable(const char *url, const char *stream, int timeout_ms);

#endif
