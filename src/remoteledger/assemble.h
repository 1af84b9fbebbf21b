/* SPDX-License-Identifier: Apache-2.0 */
/* libremoteledger internals: the reassembly state machine and sequence tracker of docs/PROTOCOL.md,
 * section 2, independent of the transport.
 *
 * Messages are fed either whole (rli_asm_message) or as a run of fragments (rli_asm_msg_begin,
 * rli_asm_msg_data..., rli_asm_msg_end); a fragment may have been received in place
 * (rli_asm_recv_slot). Raw chunk bytes are appended to the assembly buffer as they arrive; a zstd
 * chunk is decoded straight into the assembly buffer when it is complete (from the caller's buffer
 * when it came whole, from a reused scratch buffer of the compressed bytes when it came in
 * fragments, which the transport may receive into directly). XXH64 runs incrementally over the
 * appended raw bytes, so END verification costs nothing extra. The assembly buffer is reused
 * across ledgers and never shrinks.
 *
 * Memory. Every CHUNK is held to the chunk bound: a raw payload, a compressed payload, and what a
 * zstd payload decodes to, which its frames' headers must announce (a frame without a content
 * size is refused) and which is checked against the bound and the ledger cap before any room is
 * made for it, then decoded into exactly that room. The assembly buffer grows by doubling from
 * 64 KiB but never past the cap, and the scratch buffer never past the bound, so an assembler
 * holds at most cap + bound bytes of buffers plus the zstd decoder's state (rli_asm_footprint),
 * whatever the bytes on the wire.
 *
 * Errors are reported when the message that caused them is complete, in the order the prototype
 * checks them (decode, flow, index, expansion, cap), so a transport error that cuts a message
 * short still wins over a violation inside it. After an error the assembler must be reset before
 * it is fed again. */
#ifndef RLI_ASSEMBLE_H
#define RLI_ASSEMBLE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "common/err.h"
#include "corestream/remoteledger.h"

typedef struct rli_asm rli_asm;

/* The result of feeding a message. */
typedef enum rli_asm_status {
    RLI_ASM_ERROR = -1, /* err is set; kind RL_ERR_PROTOCOL, RL_ERR_GAP or RL_ERR_NOMEM */
    RLI_ASM_MORE = 0,   /* accepted; no ledger completed */
    RLI_ASM_LEDGER = 1, /* an END verified: see rli_asm_ledger */
} rli_asm_status;

/* max_payload: the assembled-ledger cap, negative for none (a ledger of exactly the cap passes).
 * chunk_bound: the most one CHUNK may carry or decode to (rli_expand_bound; 0: 8 MiB). */
rli_asm *rli_asm_new(int64_t max_payload, size_t chunk_bound);
void rli_asm_free(rli_asm *a);

/* Starts a stream: no assembly in progress, the tracker expecting `from` (0 accepts any first
 * ledger). The buffer, the decoder and the scratch space are kept. */
void rli_asm_reset(rli_asm *a, uint32_t from);

/* Whole-message form: msg[0..len) is one complete binary message. */
rli_asm_status rli_asm_message(rli_asm *a, const uint8_t *msg, size_t len, cs_err *err);

/* Fragment form. size_hint is the message's expected total length when known (0 when not); it
 * only pre-sizes buffers. */
void rli_asm_msg_begin(rli_asm *a, uint64_t size_hint);
void rli_asm_msg_data(rli_asm *a, const uint8_t *p, size_t n);
rli_asm_status rli_asm_msg_end(rli_asm *a, cs_err *err);

/* Receiving in place, so that payload bytes cost no copy past the read itself. During a raw
 * CHUNK's payload the slot is the end of the assembly buffer (within the cap); during a
 * fragmented zstd CHUNK's, the end of the compressed bytes gathered so far (decoded from there at
 * the message's end). Makes room for up to `want` bytes and returns the slot with *room set
 * (1..want), or NULL when the next bytes must come through the caller's own buffer: the message's
 * header still being collected, an error pending, the cap reached, no memory, want 0.
 * Bytes received into the slot are then fed as any others, rli_asm_msg_data(a, slot, n) with
 * n <= *room, before any other call on the assembler; it sees that they are already in place and
 * only accounts for them (length, hash, checks: the same verification and errors as a copy). */
uint8_t *rli_asm_recv_slot(rli_asm *a, size_t want, size_t *room);

/* After RLI_ASM_LEDGER: the verified ledger (borrowed until the next feed or reset) and its info;
 * received_unix_nano is left 0 for the caller to stamp. */
const uint8_t *rli_asm_ledger(const rli_asm *a, size_t *len, rl_ledger_info *info);

/* While a flow is open: the raw bytes assembled so far (*len of them, not yet verified; borrowed
 * until the next feed or reset, and a later feed may move them) and how many partial copies of
 * this ledger a repeated BEGIN has discarded so far (a discard restarts the bytes from 0). Lets a
 * relay forward bytes as they arrive and still hold back the ledger's end until END verifies. */
const uint8_t *rli_asm_partial(const rli_asm *a, size_t *len, uint32_t *discarded);

/* The sequence the tracker expects next (0: any, or wrapped after the last representable one). */
uint32_t rli_asm_expected(const rli_asm *a);

/* Whether a BEGIN has opened a flow that has not ended; *seq is its ledger. */
bool rli_asm_active(const rli_asm *a, uint32_t *seq);

/* Signed ledgers (docs/PROTOCOL.md, "Signed ledgers"). A SIG message of the ledger being
 * assembled is accepted once, after its last CHUNK (a CHUNK after it, a second SIG or one for
 * another ledger is RL_ERR_PROTOCOL) and kept as it came; the assembler does not verify it.
 * rli_asm_want_sha256: from the next BEGIN on, the raw bytes are also hashed with SHA-256 as they
 * are appended (false when out of memory). After RLI_ASM_LEDGER, rli_asm_sig is the ledger's SIG
 * message (NULL, *len 0, when it had none) and rli_asm_sha256 its digest (32 bytes; NULL without
 * want_sha256); both borrowed until the next feed or reset. rli_asm_xxh64: its XXH64. */
bool rli_asm_want_sha256(rli_asm *a);
const uint8_t *rli_asm_sig(const rli_asm *a, size_t *len);
const uint8_t *rli_asm_sha256(const rli_asm *a);
uint64_t rli_asm_xxh64(const rli_asm *a);

/* The chunk bound of one connection: the server's (its 101 answer's X-Corestream-Chunk-Size) when
 * that is smaller than the caller's, else the caller's again (announced 0: none given). Errors
 * name which: "(max_chunk_size)" or "(the server's X-Corestream-Chunk-Size)". Between messages. */
void rli_asm_set_server_bound(rli_asm *a, size_t announced);

/* Current assembly-buffer capacity, for tests. */
size_t rli_asm_capacity(const rli_asm *a);

/* Everything the assembler holds now, in bytes: itself, the assembly and scratch buffers and the
 * zstd decoder's state. Buffers never shrink, so it is also the most it has held (the decoder's
 * state aside, which zstd may resize). For tests and the documented bound. */
size_t rli_asm_footprint(const rli_asm *a);

#endif
