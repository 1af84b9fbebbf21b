/* SPDX-License-Identifier: Apache-2.0 */
/* Test support: whole files read and written, and zstd frames unpacked, for the tests that
 * check what the code under test wrote to disk (the lake's objects). No cmocka: failures are NULL
 * or -1, and the caller asserts. */
#ifndef CS_TESTS_SUPPORT_FILES_H
#define CS_TESTS_SUPPORT_FILES_H

#include <stddef.h>
#include <stdint.h>

/* The whole file at path, malloc'd, with a NUL after its *len bytes; NULL when it cannot be read
 * (errno set). */
uint8_t *cs_slurp(const char *path, size_t *len);

/* path created or truncated (mode 0644) and written with len bytes. 0, or -1 with errno. */
int cs_write_file(const char *path, const void *bytes, size_t len);

/* z (zlen bytes) as whole zstd frames, one or more (RFC 8878; the lake's objects made from stored
 * frames have several), decompressed and concatenated: malloc'd, *len its length, *frames (unless
 * NULL) how many frames; NULL otherwise, having said why on stderr (zstd's error, `a frame cut
 * short`, `no frame`). */
uint8_t *cs_unzstd_frames(const uint8_t *z, size_t zlen, size_t *len, int *frames);
uint8_t *cs_unzstd(const uint8_t *z, size_t zlen, size_t *len);

/* Galexie's object of public network ledger 53312000 (<realmeta>/pubnet-batch-53312000.xdr.zst,
 * read in place), decompressed: its LedgerCloseMetaBatch, malloc'd, *len its length. NULL when the
 * file is absent or not one zstd frame, having said `SKIP: …` (absent) or why on stderr: the
 * caller skips (cmocka's skip()) or fails. */
uint8_t *cs_galexie_batch_53312000(const char *realmeta, size_t *len);

#endif
