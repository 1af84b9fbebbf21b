/* SPDX-License-Identifier: Apache-2.0 */
/* What the source loop reads: a sequence of emissions, each one ledger whose body arrives as a
  * byte stream, read incrementally (docs/operations/sources.md). Implemented by the paced adapter
  * (synthetic and file), the pipe tap and captive core. */
#ifndef CS_CORESTREAMD_SOURCE_H
#define CS_CORESTREAMD_SOURCE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "common/err.h"
#include "corestream/wire.h"

/* A ledger range: [from,to] when bounded, [from,latest) otherwise. */
typedef struct cs_range {
    uint32_t from;
    uint32_t to;
    bool bounded;
} cs_range;

/* CountedRange: count 0 is unbounded from start; otherwise [start, start+count-1]. */
cs_range cs_counted_range(uint32_t start, uint32_t count);

/* "[a,b]" or "[a,latest)". */
void cs_range_format(cs_range r, char *buf, size_t len);

/* Error kind that marks a cancellation (shutdown), as opposed to a failure. */
#define CS_ERR_CANCELLED 100
/* Error kind of read(): the body bytes of the current emission handed out so far are void (they
 * were not the ledger's); the same ledger begins again, and the next read() starts its body from
 * its first byte. Not a failure: the source loop sends a fresh BEGIN of the same ledger (a
 * redelivery, PROTOCOL.md section 2 rule 4) and reads on. */
#define CS_ERR_LEDGER_VOID 101

typedef struct cs_emission {
    uint32_t seq;
    uint64_t declared_size; /* 0 = unknown */
    /* The source could not get the ledgers between the last one it emitted and seq, and has
     * reported them (a relay whose stream went on without them): seq may be past the last + 1.
     * False for every other emission, which must be dense. */
    bool after_gap;
} cs_emission;

typedef struct cs_source cs_source;

typedef struct cs_source_ops {
    /* Starts the next emission. Returns 1 and fills em, 0 when the source is exhausted, -1 on
     * error (err->kind CS_ERR_CANCELLED when the run was cancelled). On error em->seq still names
     * the ledger that was expected, for the failure message. */
    int (*next)(cs_source *s, cs_emission *em, cs_err *err);
    /* Reads up to len body bytes of the current emission. Returns the count, 0 at the end of the
     * body, -1 on error (CS_ERR_CANCELLED on cancellation). */
    ssize_t (*read)(cs_source *s, uint8_t *buf, size_t len, cs_err *err);
    void (*destroy)(cs_source *s);
    /* A relay's source (the edge): the SIG message the current emission came with, asked once
     * its body has ended (read returned 0). Returns its length, 0 when it had none. NULL: the
     * source never carries signatures (the source loop signs, when it has a key). */
    size_t (*signature)(cs_source *s, uint8_t out[CS_WIRE_SIG_MAX_LEN]);
} cs_source_ops;

/* Called by a source, on the source loop's thread from inside next() or read(), when its writer
 * went away and it waits for another (on true), and when the writer is back (on false). */
typedef void (*cs_source_reconnecting_fn)(void *arg, bool on);

/* Called by a source, on the source loop's thread from inside next() or read(), when it waits for
 * ledger seq past a message it could not serve (seq), and when that ledger has come (0). */
typedef void (*cs_source_waiting_fn)(void *arg, uint32_t seq);

struct cs_source {
    const cs_source_ops *ops;
    /* Set by the source loop before the first next(); NULL when nobody listens. A wrapping source
     * hands it on to the source it wraps. */
    cs_source_reconnecting_fn reconnecting;
    void *reconnecting_arg;
    /* The same for waiting past a skipped message (waiting_arg). */
    cs_source_waiting_fn waiting;
    void *waiting_arg;
};

static inline void cs_source_tell_waiting(cs_source *s, uint32_t seq)
{
    if (s->waiting)
        s->waiting(s->waiting_arg, seq);
}

/* Tells s's listener, if any. */
static inline void cs_source_tell_reconnecting(cs_source *s, bool on)
{
    if (s->reconnecting)
        s->reconnecting(s->reconnecting_arg, on);
}

/* A source of complete ledgers (synthetic, file dump): each pull yields one whole ledger, borrowed
 * until the next pull. Sequence numbers are assigned by the paced adapter, counting from its range
 * start. */
typedef struct cs_ledger_stream cs_ledger_stream;

typedef struct cs_ledger_stream_ops {
    /* Returns 1 with the ledger for seq, 0 when exhausted, -1 on error. */
    int (*pull)(cs_ledger_stream *ls, uint32_t seq, const uint8_t **data, size_t *len, cs_err *err);
    void (*destroy)(cs_ledger_stream *ls);
} cs_ledger_stream_ops;

struct cs_ledger_stream {
    const cs_ledger_stream_ops *ops;
};

#endif
