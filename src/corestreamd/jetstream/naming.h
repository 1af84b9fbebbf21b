/* SPDX-License-Identifier: Apache-2.0 */
/* How corestream's flows are named in JetStream: the subject a ledger's messages go to, the
 * Nats-Msg-Id of each message, the run identity token, and the position a message stands for.
 *
 *   subject     <stream>.<run>.<seq>          every message of ledger seq (BEGIN, CHUNK…, [SIG,] END)
 *   Nats-Msg-Id <run>:<seq>:<item>:<tag>      item 0 is BEGIN, 1..n chunk item-1, then a signed
 *                                             ledger's SIG n+1 and END n+2, or END n+1; tag the
 *                                             first 128 bits, in hex, of HMAC-SHA256 under the
 *                                             publisher's secret (idkey.h) of "<run>:<seq>:<item>:<gen>"
 *
 * The position stays readable; the tag makes an id that has not been used yet impossible to
 * guess for anyone without the secret, so nobody who may publish on the subjects can take the
 * id of a message the core is about to send (the stream's duplicate window would drop the
 * core's). gen is 0 for a message's first publication, and a fresh random number when the
 * publisher republishes a ledger whose id was taken (publisher.h). The run identity names what
 * defines the byte stream (cs_js_run_id). Pure functions, any thread. */
#ifndef CS_CORESTREAMD_JETSTREAM_NAMING_H
#define CS_CORESTREAMD_JETSTREAM_NAMING_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "common/err.h"

/* A stream name is at most this long; a run token too. */
#define CS_JS_NAME_MAX 64
/* Room for a subject or a message id built from valid names. */
#define CS_JS_SUBJECT_MAX (2 * CS_JS_NAME_MAX + 16)

/* The next message to append for a run: ledger seq, item (0 BEGIN, 1..n chunks, n+1 SIG or END,
 * n+2 END after a SIG). CS_JS_ITEM_END: the ledger's END, after its SIG, whatever n is (the
 * position after a stored SIG, which does not carry the chunk count). */
#define CS_JS_ITEM_END UINT32_MAX
typedef struct cs_js_pos {
    uint32_t seq;
    uint32_t item;
} cs_js_pos;

/* --jetstream-stream: 1..32 characters of [A-Za-z0-9_-] (NATS forbids '.', '*', '>', spaces
 * and path separators; the stricter set keeps it a file name on every server).
 * `--jetstream-stream "a.b" must be 1 to 32 characters of A-Z a-z 0-9 _ -`. */
int cs_js_validate_stream_name(const char *name, cs_err *err);

/* The run token for a source: "<kind>-<16 hex digits of XXH64(defined_by)>", e.g.
 * "synthetic-3f2a…". kind must be [a-z]+ and short; out needs CS_JS_NAME_MAX bytes. */
void cs_js_run_id(char *out, size_t len, const char *kind, const char *defined_by);

/* "<stream>.<run>.<seq>" and "<stream>.<run>.*" (every ledger of a run). */
void cs_js_subject(char *out, size_t len, const char *stream, const char *run, uint32_t seq);
void cs_js_run_filter(char *out, size_t len, const char *stream, const char *run);
/* "<stream>.>": what the stream captures (every run). */
void cs_js_stream_subjects(char *out, size_t len, const char *stream);
/* The secret a publisher's ids are derived from (idkey.h), and the tag's length in hex digits. */
#define CS_JS_ID_KEY_LEN 32
#define CS_JS_ID_TAG_HEX 32
/* The longest id cs_js_msg_id makes for a run token of cs_js_run_id: a 24-letter kind, the
 * largest seq and item. */
#define CS_JS_MSG_ID_MAX (24 + 1 + 16 + 1 + 10 + 1 + 10 + 1 + CS_JS_ID_TAG_HEX)
/* "<run>:<seq>:<item>:<tag>" for generation gen (see above); out needs CS_JS_SUBJECT_MAX bytes.
 * 0, or -1 when OpenSSL could not compute the HMAC (out of memory): no id, nothing to publish. */
int cs_js_msg_id(char *out, size_t len, const char *run, uint32_t seq, uint32_t item,
                 const uint8_t key[CS_JS_ID_KEY_LEN], uint64_t gen);

/* The position after a stored wire message (BEGIN → (seq,1), CHUNK i → (seq,i+2),
 * SIG → (seq,CS_JS_ITEM_END), END → (seq+1,0)). -1 with `jetstream: last message of the run is not a wire message: …` when
 * the body does not decode, or names ledger 4294967295's END (no next ledger). */
int cs_js_pos_after(const uint8_t *msg, size_t len, cs_js_pos *next, cs_err *err);

#endif
