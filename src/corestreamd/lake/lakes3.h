/* SPDX-License-Identifier: Apache-2.0 */
/* An S3-compatible bucket as a lake's store (--lake-url s3://bucket/prefix, docs/LAKE.md
 * "Export"): objects put, fetched and looked for by key under the prefix, every request signed
 * with AWS Signature Version 4 by libcurl itself (CURLOPT_AWS_SIGV4). Path-style requests
 * (<endpoint>/<bucket>/<prefix>/<key>), so any S3-compatible service answers them.
 *
 * Credentials, as the AWS tools find them: AWS_ACCESS_KEY_ID, AWS_SECRET_ACCESS_KEY and
 * AWS_SESSION_TOKEN from the environment, else the [default] profile (or AWS_PROFILE's) of the
 * file AWS_SHARED_CREDENTIALS_FILE names (~/.aws/credentials when unset). The region is
 * AWS_REGION (or AWS_DEFAULT_REGION), else us-east-1; the endpoint AWS_ENDPOINT_URL_S3 (or
 * AWS_ENDPOINT_URL), else https://s3.<region>.amazonaws.com.
 *
 * Threads: a store belongs to one thread at a time (one libcurl handle, one kept-alive
 * connection). */
#ifndef CS_LAKE_LAKES3_H
#define CS_LAKE_LAKES3_H

#include <stddef.h>
#include <stdint.h>

#include "common/err.h"
#include "corestreamd/lake/lakekey.h"
#include "corestreamd/lake/lakestore.h"

enum {
    CS_S3_ERR_CONFIG = 1, /* a bad URL or no credentials: fix the command line or environment */
    CS_S3_ERR_IO = 2,     /* a transfer failed, or the service answered 5xx, 429 or 408: try again */
    CS_S3_ERR_DENIED = 3, /* any other answer (403 SignatureDoesNotMatch, AccessDenied, 404 NoSuchBucket…) */
};

typedef struct cs_s3 cs_s3;

/* url: s3://bucket or s3://bucket/prefix. Reads the credentials, region and endpoint (above).
 * Errors (CS_S3_ERR_CONFIG): `--lake-url <url>: not s3://bucket[/prefix]`, `--lake-url: no AWS
 * credentials: set AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY, or a [default] profile in <file>`. */
int cs_s3_open(cs_s3 **out, const char *url, cs_err *err);

/* Where the store is, for logs: "s3://bucket/prefix at <endpoint>". */
const char *cs_s3_name(const cs_s3 *s);

/* PUTs p[0..n) at key (relative to the prefix) with content type ctype. 0, or -1 with err
 * (`s3: PUT <key>: HTTP 403: SignatureDoesNotMatch`, …). */
int cs_s3_put(cs_s3 *s, const char *key, const void *p, size_t n, const char *ctype, cs_err *err);

/* GETs key into *p (malloc'd, at most max bytes), *n its length. 0; 1 when there is no such key
 * (404 NoSuchKey); -1 with err. */
int cs_s3_get(cs_s3 *s, const char *key, size_t max, uint8_t **p, size_t *n, cs_err *err);

/* 0 when key exists (HEAD 200), 1 when it does not (404), -1 with err. */
int cs_s3_exists(cs_s3 *s, const char *key, cs_err *err);

void cs_s3_free(cs_s3 *s);

/* The bucket at url (s3://bucket[/prefix]) as the lake exporter's store (lakes3store.c, --lake-url;
 * docs/LAKE.md "Export to S3"): objects at <prefix>/ledgers/<key> (a signed batch's signatures at
 * <key>.sig, put_sig), config.json at <prefix>/config.json and the manifest at
 * <prefix>/ledgers/.config.json, written by settle where absent. Never overwrites: put and put_sig
 * look for the key (HEAD) first, and fetch and compare what is there instead
 * (cs_lake_compare_object, cs_lake_compare_sig); has_sig is a HEAD. newest does not list the bucket: it finds the first
 * batch absent between the ring's oldest whole batch and its latest with HEAD requests, by binary
 * search, on the assumption that the exported objects form one run without holes (a hole only
 * costs a comparison of the objects after it). Errors at open fail the start: cs_s3_open's
 * (CS_S3_ERR_CONFIG), a config in place of another lake (CS_S3_ERR_DENIED: `lake:
 * "s3://bucket/prefix/config.json" is another lake's: <difference>; give another --lake-url, or
 * the flags it was made with`), or a request refused (CS_S3_ERR_DENIED: 403, 404 NoSuchBucket…);
 * a bucket that does not answer (CS_S3_ERR_IO) leaves the check to settle, retried by the
 * exporter. passphrase is copied; l must pass cs_lake_layout_check. */
int cs_lake_s3_store_open(cs_lake_store **out, const char *url, const char *passphrase, const cs_lake_layout *l,
                          cs_err *err);

#endif
