/* SPDX-License-Identifier: Apache-2.0 */
/* Test support: hand-built XDR LedgerCloseMeta prefixes and RFC 5531 record-marked frames of
 * them, for the xdrwalk, pipe source and corestreamd end-to-end tests.
 *
 * A meta is written up to and including ledgerSeq, field by field as the walk reads it
 * (CAPTIVE.md 3.3), then `tail` bytes of filler stand in for the rest of the meta. Discriminants
 * and counts are written raw, so a test can put any value anywhere, valid or not.
 *
 * Buffers grow on demand; allocation failure aborts. Also: what the stub writer commands of
 * those tests leave behind (pid files). Include as "support/metabuild.h". */
#ifndef CS_TESTS_SUPPORT_METABUILD_H
#define CS_TESTS_SUPPORT_METABUILD_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

/* ---- a growable byte buffer with XDR put helpers ---- */

typedef struct cs_mb_buf {
    uint8_t *p;
    size_t n, cap;
} cs_mb_buf; /* {0} is an empty buffer */

void cs_mb_put(cs_mb_buf *b, const void *data, size_t n);
void cs_mb_put_u32(cs_mb_buf *b, uint32_t v); /* big-endian */
void cs_mb_put_u64(cs_mb_buf *b, uint64_t v);
void cs_mb_put_fill(cs_mb_buf *b, uint8_t byte, size_t n);
/* opaque<>: the length, len data bytes (0xA0 + len + i, so each opaque differs), then padding to
 * a multiple of 4 made of pad_byte (0 in a valid encoding). */
void cs_mb_put_opaque(cs_mb_buf *b, uint32_t len, uint8_t pad_byte);
/* Frees the storage and leaves an empty buffer. */
void cs_mb_free(cs_mb_buf *b);

/* ---- LedgerCloseMeta ---- */

typedef struct cs_mb_meta {
    uint32_t version;   /* LedgerCloseMeta.v: 0, 1 or 2 (anything else to test refusals) */
    uint32_t ext;       /* LedgerCloseMetaExt.v (v1/v2 only); 1 writes an ExtV1 */
    uint32_t ext_point; /* ExtensionPoint.v inside LedgerCloseMetaExtV1 */
    uint32_t nup;       /* StellarValue upgrades count as written */
    uint32_t uplen[8];  /* lengths of the first min(nup, 8) upgrades */
    uint32_t svt;       /* StellarValue.ext.v: 1 writes a signed LedgerCloseValueSignature */
    uint32_t key_type;  /* NodeID type (signed only) */
    uint32_t siglen;    /* signature length (signed only) */
    uint8_t pad_byte;   /* what opaque padding holds (0 in a valid meta; else fault injection) */
    uint32_t seq;       /* ledgerSeq */
    size_t tail;        /* bytes after ledgerSeq: filler varied by position and seq */
} cs_mb_meta;

/* The Go test fixture's shape: optional ext v1, `upgrades` upgrades of 5+i bytes, an optional
 * signed StellarValue with a 7-byte signature, then `tail` bytes. */
cs_mb_meta cs_mb_go_meta(uint32_t version, uint32_t seq, bool signed_value, uint32_t upgrades, bool ext_v1,
                         size_t tail);

/* Appends the meta m describes to b. Returns the offset in b of ledgerSeq. */
size_t cs_mb_put_meta(cs_mb_buf *b, const cs_mb_meta *m);

/* ---- RFC 5531 record marking ---- */

#define CS_MB_LAST_FRAGMENT 0x80000000u

/* Appends the 4-byte record marker of a last fragment of len bytes. */
void cs_mb_put_marker(cs_mb_buf *b, uint32_t len);
/* Appends a whole record: the marker, then body (which must not point into b). */
void cs_mb_put_record(cs_mb_buf *b, const void *body, size_t n);
/* Appends a record whose body is the meta m describes (its prefix and m->tail more bytes).
 * Returns the offset of the body in b: the body is b->p[off .. b->n) right after the call. */
size_t cs_mb_put_frame(cs_mb_buf *b, const cs_mb_meta *m);

/* ---- the stub writers' processes ---- */

/* The pid a writer command wrote (`echo $$ > path`) at the start of the file at path, or -1. */
pid_t cs_mb_read_pid(const char *path);
/* True when pid is a live (or zombie) process whose command name (/proc/PID/comm) starts with
 * name, so that a recycled pid is never signalled. */
bool cs_mb_pid_runs(pid_t pid, const char *name);

/* ---- a core writing a FIFO ---- */

/* What a core on its own unit does to corestreamd's --pipe-path: the frames of ledgers from..to
 * (cs_mb_go_meta v1, tail bytes each) written to <dir>/frames-<from>-<to>.bin, then sent by a
 * `cat` into fifo that exits at their end (it waits for a reader to open the FIFO). Returns 0, or
 * -1 with what failed in why (the file, or the writer's status). */
int cs_mb_feed_fifo(const char *dir, const char *fifo, uint32_t from, uint32_t to, size_t tail, char *why,
                    size_t why_len);

#endif
