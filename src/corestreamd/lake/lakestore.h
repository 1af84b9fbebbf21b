/* SPDX-License-Identifier: Apache-2.0 */
/* Where the lake exporter (lakeexport.h) writes: a store of the lake's files behind a small table
 * of operations, so the exporter itself has no libcurl. Two stores: a lake directory (--lake-dir,
 * lakedir.h; cs_lake_dir_store_open here, in cs_lake) and an S3-compatible bucket (--lake-url,
 * lakes3.h's cs_lake_s3_store_open, in cs_lake_reader with libcurl).
 *
 * Threads: open and close on one thread (the daemon's main thread); the others on one
 * thread at a time (the exporter's), never concurrently with close. */
#ifndef CS_LAKE_LAKESTORE_H
#define CS_LAKE_LAKESTORE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "common/err.h"
#include "corestreamd/lake/lakekey.h"

/* What put found at the key. */
typedef enum cs_lake_put_outcome {
    CS_LAKE_PUT_WRITTEN, /* the object is in place now */
    CS_LAKE_PUT_SAME,    /* an object was there already: the same bytes, or other bytes of the same
                            batch once decompressed (another compression level); it is kept */
    CS_LAKE_PUT_OTHER,   /* an object was there already with other content (or not an object at
                            all): it is kept, and *why says what differs */
} cs_lake_put_outcome;

typedef struct cs_lake_store cs_lake_store;

typedef struct cs_lake_store_ops {
    /* The log field that names the store in `lake export starts`: "dir" or "url". */
    const char *kind;
    /* The newest batch of the lake's run of objects the export resumes after, given the ring's
     * bounds: 1 with *out, 0 when there is none to resume after, -1 with err (retried). */
    int (*newest)(cs_lake_store *s, uint32_t ring_oldest, uint32_t ring_latest, cs_lake_batch *out, cs_err *err);
    /* The newest batch found at open without the ring's bounds (true), or false when none was or
     * the store finds it only with them (newest). For the lag before the first look. */
    bool (*newest_known)(const cs_lake_store *s, cs_lake_batch *out);
    /* The first writes (the config files where absent): 0, or -1 with err (retried). */
    int (*settle)(cs_lake_store *s, cs_err *err);
    /* Batch b's object at its key, never replacing one in place: see cs_lake_dir_put. 0 with
     * *outcome (and *why for OTHER), or -1 with err (retried). */
    int (*put)(cs_lake_store *s, cs_lake_batch b, const uint8_t *obj, size_t len, cs_lake_put_outcome *outcome,
               char *why, size_t why_len, cs_err *err);
    /* Batch b's signature object (cs_lake_sig_build's bytes) at <key>.sig beside its object, never
     * replacing one in place: see cs_lake_dir_put_sig. SAME only for exactly these bytes; else as
     * put. */
    int (*put_sig)(cs_lake_store *s, cs_lake_batch b, const uint8_t *sig, size_t len, cs_lake_put_outcome *outcome,
                   char *why, size_t why_len, cs_err *err);
    /* Whether batch b's <key>.sig is in place (whatever it holds): 1 yes, 0 no, -1 with err
     * (retried). For the resume's look for objects a previous run left without signatures. */
    int (*has_sig)(cs_lake_store *s, cs_lake_batch b, cs_err *err);
    /* Where batch b's object is, for log lines (a path, or s3://bucket/prefix/ledgers/<key>). */
    void (*object_name)(const cs_lake_store *s, cs_lake_batch b, char *buf, size_t len);
    /* The store as given (the directory, or the URL and its endpoint). */
    const char *(*name)(const cs_lake_store *s);
    void (*close)(cs_lake_store *s);
} cs_lake_store_ops;

struct cs_lake_store {
    const cs_lake_store_ops *ops;
};

/* The lake directory dir as a store (cs_lake_dir_open: its checks, errors and newest object; see
 * lakedir.h). newest ignores the ring's bounds: it is the newest object open found. */
int cs_lake_dir_store_open(cs_lake_store **out, const char *dir, const char *ring_dir, const char *passphrase,
                           const cs_lake_layout *l, cs_err *err);

/* What a put found at a taken key: there[0..there_len) compared with batch b's object obj[0..len):
 * the same bytes, or the same bytes once decompressed (another compression level), SAME; else
 * OTHER with why (`its content differs from the ring's batch A-B`, `it is not a zstd object:
 * <zstd error>`). 0, or -1 when out of memory. (lakeput.c) */
int cs_lake_compare_object(cs_lake_batch b, const uint8_t *obj, size_t len, const uint8_t *there, size_t there_len,
                           cs_lake_put_outcome *outcome, char *why, size_t why_len);

/* The same for a signature object: SAME when there[0..there_len) is exactly sig[0..len) (the ring's
 * signatures are the same bytes however often they are read), else OTHER with why (`its bytes
 * differ from the ring's signatures of batch A-B`). Always 0. (lakeput.c) */
int cs_lake_compare_sig(cs_lake_batch b, const uint8_t *sig, size_t len, const uint8_t *there, size_t there_len,
                        cs_lake_put_outcome *outcome, char *why, size_t why_len);

/* Closes the store (its close). NULL is a no-op. */
void cs_lake_store_close(cs_lake_store *s);

#endif
