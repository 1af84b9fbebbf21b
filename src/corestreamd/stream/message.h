/* SPDX-License-Identifier: Apache-2.0 */
/* An immutable, reference-counted wire message with CS_MSG_HEADROOM bytes of headroom in front of
 * it, where the WebSocket frame header is written in place, once: when the message is published
 * (cs_msg_ws_seal), or by the first stream I/O thread to send it (cs_msg_ws_header). Built once,
 * written to every subscriber without a copy. */
#ifndef CS_CORESTREAMD_MESSAGE_H
#define CS_CORESTREAMD_MESSAGE_H

#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>

/* Room for the longest server frame header (10 bytes), rounded up. */
#define CS_MSG_HEADROOM 16

typedef struct cs_msg_pool cs_msg_pool;

typedef struct cs_msg {
    atomic_uint refs;
    cs_msg_pool *pool; /* where the memory goes on the last release; NULL: back to malloc */
    size_t len; /* bytes of message at data */
    size_t cap; /* bytes available at data */
    /* Monotonic ns at which a live message was published (set before it is handed to the
     * broadcaster, read by the I/O thread for corestreamd_publish_to_write_seconds); 0 for a
     * message built from the ring. */
    int64_t published_ns;
    /* The RFC 6455 frame header in the headroom (cs_msg_ws_seal at publish, else
     * cs_msg_ws_header on first use): 0 not written, 1 being written, 2 written. */
    atomic_uint ws_header;
    /* A replay CHUNK's origin, for corestreamd_replay_chunk_bytes_total: CS_MSG_STORED (the ring's
     * stored frames, sent as published) or CS_MSG_ENCODED (compressed again at replay); 0 for
     * anything else. Set by its maker before it is shared. */
    uint8_t origin;
    uint8_t *data; /* the CS_MSG_HEADROOM bytes just before it are the message's too */
    uint8_t buf[]; /* CS_MSG_HEADROOM + cap, data at buf + CS_MSG_HEADROOM (unless aligned) */
} cs_msg;

/* A message with room for cap bytes; len starts at 0 and refs at 1. NULL on allocation failure. */
enum { CS_MSG_STORED = 1, CS_MSG_ENCODED = 2 };

cs_msg *cs_msg_new(size_t cap);
cs_msg *cs_msg_retain(cs_msg *m);
/* Writes the server-to-client frame header (FIN, binary, unmasked, the 2/4/10-byte length) just in
 * front of data, once per message whichever thread comes first, and returns its length: the frame
 * is data - n .. data + len. Any thread, once the message is complete (len final); several stream
 * I/O threads may ask at once. A sealed message (every live message: the broadcaster seals what
 * it publishes) costs one load: its header is already there. */
size_t cs_msg_ws_header(cs_msg *m);
/* Writes the frame header once, before the message is shared (len final): its owner alone, with
 * no other thread holding it yet. Idempotent. The broadcaster calls it on everything published. */
void cs_msg_ws_seal(cs_msg *m);
/* Drops a reference (NULL is ignored). The last one frees the message, or hands a pooled
 * message back to its pool. Any thread. */
void cs_msg_release(cs_msg *m);

/* A pool of same-capacity messages for the source loop's chunks. A ledger's chunks are released
 * together once the ring has them; without a pool every next ledger's chunks are fresh memory
 * (256 KiB each, so mmap'd or trimmed back to the kernel by malloc) and the source loop pays a
 * page fault and a page clearing per 4 KiB, inside its emit window. The pool keeps the memory.
 *
 * cs_msg_pool_new: messages of capacity cap; at most `keep` idle messages are held, more go back
 *   to malloc. NULL when out of memory.
 * cs_msg_pool_get: a message as cs_msg_new would give (refs 1, len 0, cap >= the pool's cap),
 *   reused when one is idle. NULL when out of memory. Any thread.
 * cs_msg_pool_idle: idle messages held now (for tests and counters). Any thread.
 * cs_msg_pool_free: the owner lets go: idle memory is freed at once; messages still out keep the
 *   pool's remains alive and free them with the last release. The owner calls no other pool
 *   function afterwards; NULL is ignored. */
cs_msg_pool *cs_msg_pool_new(size_t cap, size_t keep);
/* The same, with every message's data + align_at on a CS_MSG_ALIGN boundary (the source loop's
 * raw chunks: their payloads, at data + 11, can then be written to the ring with O_DIRECT).
 * align_at at most CS_MSG_ALIGN_AT_MAX, else NULL. Such a message's data is not at buf. */
#define CS_MSG_ALIGN 4096
#define CS_MSG_ALIGN_AT_MAX (CS_MSG_ALIGN - CS_MSG_HEADROOM - sizeof(cs_msg))
cs_msg_pool *cs_msg_pool_new_aligned(size_t cap, size_t keep, size_t align_at);
cs_msg *cs_msg_pool_get(cs_msg_pool *p);
size_t cs_msg_pool_idle(cs_msg_pool *p);
void cs_msg_pool_free(cs_msg_pool *p);

#endif
