/* SPDX-License-Identifier: Apache-2.0 */
/* What the lake export's end-to-end tests share (test_lake_export_e2e, --lake-dir, and
 * test_lake_export_s3_e2e, --lake-url): the keys of the default layout, a synthetic ledger's
 * object checked, the run of objects found. Failures are cmocka assertions. */
#ifndef CS_TEST_LAKEE2E_H
#define CS_TEST_LAKEE2E_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/stat.h>

/* --synthetic-size of the tests' synthetic runs. */
#define CS_LAKEE2E_SYN_SIZE 4096

/* The key of ledger seq under the default layout (one ledger a batch, 64000 a partition), from the
 * lake's root: ledgers/<partition>/<batch>.xdr.zst. */
char *cs_lakee2e_key(uint32_t seq, char *buf, size_t len);

/* z[0..zlen) must be ledger seq's object from a synthetic run of CS_LAKEE2E_SYN_SIZE: one batch of
 * one ledger whose bytes are cs_synthetic_fill's. */
void cs_lakee2e_expect_synthetic(const uint8_t *z, size_t zlen, uint32_t seq);

/* A lake the test reads back: a directory's files, or a bucket's objects. */
typedef struct cs_lakee2e_lake {
    bool (*exists)(void *arg, uint32_t seq);                    /* whether seq's object is there */
    uint8_t *(*object)(void *arg, uint32_t seq, size_t *len);   /* its bytes, malloc'd (fails the test) */
    void (*stat)(void *arg, uint32_t seq, struct stat *st);     /* the file that holds it */
    void *arg;
} cs_lakee2e_lake;

/* The highest ledger with an object, looking up from `from` (objects are written in order). */
uint32_t cs_lakee2e_newest(const cs_lakee2e_lake *l, uint32_t from);

/* The files of objects 1..end, indexed by ledger (calloc'd; the caller frees). */
struct stat *cs_lakee2e_stat_run(const cs_lakee2e_lake *l, uint32_t end);

/* After a restart: objects 1..end are the synthetic ledgers, none is after end, and those of
 * 1..first_end are still the files before[] recorded (inode, mtime): nothing rewritten. */
void cs_lakee2e_expect_kept(const cs_lakee2e_lake *l, uint32_t end, const struct stat *before, uint32_t first_end);

#endif
