/* SPDX-License-Identifier: Apache-2.0 */
/* What the ring wrote, as a test reads and changes it (docs/RING.md, "Layout"): a ledger's current
 * record line in its segment's log (records-<base>.log, base = seq - seq % 1024) and where its
 * stored frames lie in frames-<base>.seg. Plain functions over a ring directory; no assertions, so
 * any test (unit or end-to-end) can use them. */
#ifndef CS_TEST_RINGFILES_H
#define CS_TEST_RINGFILES_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define CS_RINGFILES_SEG 1024u

/* "<ring>/records-<base>.log" and "<ring>/frames-<base>.seg" of seq's segment. */
void cs_ringfiles_log_path(char *buf, size_t len, const char *ring, uint32_t seq);
void cs_ringfiles_seg_path(char *buf, size_t len, const char *ring, uint32_t seq);

/* seq's current record line (the last line naming it, unless a later `corestream-ring-gone` line
 * took it out) into buf, its newline included, and its offset in the log into *off (may be NULL).
 * Returns false when there is none (or no log). */
bool cs_ringfiles_record(const char *ring, uint32_t seq, char *buf, size_t len, long *off);

/* The number of sequences with a current record line in the ring's logs. */
int cs_ringfiles_count_records(const char *ring);

/* Replaces seq's current record line with text (a whole line, its newline included): in place
 * when of the same length, else by rewriting the log (the daemon must not be running then).
 * Returns false when seq has no record or the log cannot be written. */
bool cs_ringfiles_replace_record(const char *ring, uint32_t seq, const char *text);

/* Where seq's stored frames lie in its segment's frames file, by its current record: *off and
 * *len. Returns false when the record names no frames. */
bool cs_ringfiles_frames(const char *ring, uint32_t seq, uint64_t *off, uint64_t *len);

/* Whether name is one of the ring's segment files (records-<n>.log, frames-<n>.seg). */
bool cs_ringfiles_is_segment(const char *name);

#endif
