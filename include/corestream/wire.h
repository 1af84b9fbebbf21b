/* SPDX-License-Identifier: Apache-2.0 */
/* corestream wire protocol v2: constants shared by corestreamd and libremoteledger.
 *
 * Every message is one binary WebSocket message; integers are big-endian.
 *   BEGIN (14 B): 02 10 seq:u32 emitStartUnixNano:i64
 *   CHUNK (11 B + payload): 02 11 seq:u32 chunkIdx:u32 codec:u8 payload...
 *   END   (34 B): 02 12 seq:u32 chunkCount:u32 totalLen:u64 emitEndUnixNano:i64 xxhash64:u64
 *   SIG   (199 B + run): 02 13 seq:u32 alg:u8 publicKey[32] sha256[32] prevSignature[64]
 *         signature[64] run[1..64]; only to a subscriber that asked (`sig=1`), just before END
 * Stamps are 0 for stampless deliveries (ring replays, late arrivals). totalLen, chunkCount and
 * the XXH64 (seed 0) always describe the raw, uncompressed ledger. */
#ifndef CORESTREAM_WIRE_H
#define CORESTREAM_WIRE_H

#define CS_WIRE_VERSION 0x02
#define CS_WIRE_TYPE_BEGIN 0x10
#define CS_WIRE_TYPE_CHUNK 0x11
#define CS_WIRE_TYPE_END 0x12
#define CS_WIRE_TYPE_SIG 0x13 /* a signed ledger's signature (docs/PROTOCOL.md, "Signed ledgers") */

#define CS_WIRE_BEGIN_LEN 14
#define CS_WIRE_CHUNK_HEADER_LEN 11
#define CS_WIRE_END_LEN 34
#define CS_WIRE_MIN_LEN 6 /* version, type, seq */
#define CS_WIRE_SIG_FIXED_LEN 199 /* SIG without its run token */
#define CS_WIRE_SIG_RUN_MAX 64
#define CS_WIRE_SIG_MAX_LEN (CS_WIRE_SIG_FIXED_LEN + CS_WIRE_SIG_RUN_MAX)
#define CS_SIG_ALG_ED25519 0x01

#define CS_CODEC_RAW 0x00
#define CS_CODEC_ZSTD 0x01 /* one independent zstd frame */

#define CS_WIRE_STREAM_PATH "/stream"

#define CS_DEFAULT_CHUNK_SIZE 262144
#define CS_MIN_CHUNK_SIZE 4096
#define CS_MAX_CHUNK_SIZE 8388608

/* Per-ledger cap: the protocol's ceiling, not a setting. */
#define CS_MAX_PAYLOAD_SIZE 268435456

/* The last representable ledger sequence is not streamable: the protocol has no wrap. */
#define CS_LAST_SEQUENCE 4294967295u

/* Close codes. */
#define CS_CLOSE_NORMAL 1000         /* range done ("") or source ended ("source ended") */
#define CS_CLOSE_GOING_AWAY 1001     /* "source ended before range complete" */
#define CS_CLOSE_POLICY 1008         /* data message from a subscriber */
#define CS_CLOSE_TOO_BIG 1009        /* message over the read limit */
#define CS_CLOSE_INTERNAL_ERROR 1011 /* "source failed" */
#define CS_CLOSE_TOO_FAR_BEHIND 4001 /* "too far behind: oldest=%d latest=%d" */
#define CS_CLOSE_RING_HOLE 4002      /* "missing from the ring: first=%d last=%d": the requested range
                                        crosses ledgers the server's ring does not hold (quarantined
                                        or never written); everything before them was sent */

#define CS_REASON_SOURCE_ENDED "source ended"
#define CS_REASON_RANGE_INCOMPLETE "source ended before range complete"
#define CS_REASON_SOURCE_FAILED "source failed"
#define CS_REASON_SHUTTING_DOWN "server shutting down"

#endif
