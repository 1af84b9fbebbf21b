/* SPDX-License-Identifier: Apache-2.0 */
/* An S3-compatible bucket as the lake exporter's store (--lake-url s3://bucket/prefix, docs/LAKE.md
 * "Export to S3"): see lakes3.h (cs_lake_s3_store_open) and lakestore.h.
 *
 *   <prefix>/config.json                          SEP-54's config
 *   <prefix>/ledgers/.config.json                 the Go SDK's manifest
 *   <prefix>/ledgers/<partition>/<batch>.xdr.zst  each batch's object, at its key (lakekey.h)
 *   <prefix>/ledgers/<partition>/<batch>.xdr.zst.sig  a signed batch's signatures, beside it
 *
 * Nothing is ever overwritten: a key is looked for (HEAD) before it is put, and an object (or
 * .sig) found there is fetched and compared instead. There is no listing (no XML read): the newest object is
 * found by a binary search of HEAD requests over the batches the ring holds whole, on the
 * assumption that the exported objects form one run without holes (what the export writes). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "corestreamd/lake/lakeconfig.h"
#include "corestreamd/lake/lakedir.h"
#include "corestreamd/lake/lakeobject.h" /* CS_LAKE_SIG_SUFFIX */
#include "corestreamd/lake/lakes3.h"
#include "corestreamd/lake/lakestore.h"

/* A config file larger than this is not one of ours (ours are under 300 bytes). */
#define CONFIG_MAX 65536
/* An object larger than this is not one of ours: not fetched whole to be compared. */
#define OBJECT_MAX ((size_t)1 << 30)

/* The two config files: their keys under the prefix, and which text each holds. */
static const struct conf_file {
    const char *key;
    cs_lake_conf_kind kind;
} k_conf[2] = {
    {CS_LAKE_CONFIG_NAME, CS_LAKE_CONF_SEP},
    {CS_LAKE_DIR_LEDGERS "/" CS_LAKE_MANIFEST_NAME, CS_LAKE_CONF_MANIFEST},
};

typedef struct s3_store {
    cs_lake_store base;
    cs_s3 *s3;
    char *url; /* s3://bucket[/prefix], no trailing slash */
    char *passphrase;
    cs_lake_layout layout;
    bool settled[2]; /* k_conf[i] is known to be in place and this lake's */
} s3_store;

/* The config file in place (when there is one) must be this lake's: 0 with *present; -1 with err
 * (a request's kind, or CS_S3_ERR_DENIED naming the file and the difference). */
static int check_conf(s3_store *s, int i, bool *present, cs_err *err)
{
    uint8_t *text = NULL;
    size_t n = 0;
    int rc = cs_s3_get(s->s3, k_conf[i].key, CONFIG_MAX, &text, &n, err);
    *present = rc == 0;
    if (rc != 0)
        return rc < 0 ? -1 : 0;
    cs_err why = {0};
    rc = cs_lake_config_agrees((const char *)text, n, k_conf[i].kind, s->passphrase, &s->layout, &why);
    free(text);
    if (rc != 0 && why.kind == CS_LAKE_CONF_ERR_MEMORY)
        return cs_err_set(err, CS_S3_ERR_IO, "lake: \"%s/%s\": out of memory", s->url, k_conf[i].key);
    if (rc != 0)
        return cs_err_set(err, CS_S3_ERR_DENIED,
                          "lake: \"%s/%s\" is another lake's: %s; give another --lake-url, or the flags it was made "
                          "with",
                          s->url, k_conf[i].key, why.msg);
    s->settled[i] = true;
    return 0;
}

static int s3_settle(cs_lake_store *base, cs_err *err)
{
    s3_store *s = (s3_store *)base;
    for (int i = 0; i < 2; i++) {
        bool present;
        if (s->settled[i])
            continue;
        if (check_conf(s, i, &present, err) != 0)
            return -1;
        if (present)
            continue;
        char *text = k_conf[i].kind == CS_LAKE_CONF_SEP ? cs_lake_config_json(s->passphrase, &s->layout, err)
                                                         : cs_lake_manifest_json(s->passphrase, &s->layout, err);
        if (!text)
            return -1;
        int rc = cs_s3_put(s->s3, k_conf[i].key, text, strlen(text), "application/json", err);
        free(text);
        if (rc != 0)
            return -1;
        s->settled[i] = true;
    }
    return 0;
}

/* The object key of batch b under the prefix: ledgers/<key>. */
static void object_key(const s3_store *s, cs_lake_batch b, char key[CS_LAKE_KEY_MAX + 16])
{
    char k[CS_LAKE_KEY_MAX];
    cs_lake_key(&s->layout, b, k);
    snprintf(key, CS_LAKE_KEY_MAX + 16, "%s/%s", CS_LAKE_DIR_LEDGERS, k);
}

/* What is put at a batch's key: its object, or beside it its signature object. */
typedef struct s3_file {
    const char *suffix; /* appended to the key: "" or CS_LAKE_SIG_SUFFIX */
    const char *ctype;  /* the Content-Type it is put with, as the server serves it */
    int (*compare)(cs_lake_batch b, const uint8_t *mine, size_t len, const uint8_t *there, size_t there_len,
                   cs_lake_put_outcome *outcome, char *why, size_t why_len);
} s3_file;

static const s3_file k_object = {"", "application/zstd", cs_lake_compare_object};
static const s3_file k_sig = {CS_LAKE_SIG_SUFFIX, "application/octet-stream", cs_lake_compare_sig};

/* bytes put at batch b's key with sf's suffix when it is free (HEAD), else compared with what is
 * there (GET). */
static int put_file(s3_store *s, cs_lake_batch b, const s3_file *sf, const uint8_t *bytes, size_t len,
                    cs_lake_put_outcome *outcome, char *why, size_t why_len, cs_err *err)
{
    char key[CS_LAKE_KEY_MAX + 32];
    object_key(s, b, key);
    strcat(key, sf->suffix);
    if (why_len > 0)
        why[0] = '\0';
    int rc = cs_s3_exists(s->s3, key, err);
    if (rc < 0)
        return -1;
    if (rc == 1) {
        if (cs_s3_put(s->s3, key, bytes, len, sf->ctype, err) != 0)
            return -1;
        *outcome = CS_LAKE_PUT_WRITTEN;
        return 0;
    }
    uint8_t *there = NULL;
    size_t there_len = 0;
    rc = cs_s3_get(s->s3, key, OBJECT_MAX, &there, &there_len, err);
    if (rc == 1) /* gone since the HEAD: looked at again by the retry */
        return cs_err_set(err, CS_S3_ERR_IO, "s3: GET %s: gone since its HEAD", key);
    if (rc < 0)
        return -1;
    rc = sf->compare(b, bytes, len, there, there_len, outcome, why, why_len);
    free(there);
    return rc == 0 ? 0 : cs_err_set(err, CS_S3_ERR_IO, "s3: compare %s: out of memory", key);
}

static int s3_put(cs_lake_store *base, cs_lake_batch b, const uint8_t *obj, size_t len, cs_lake_put_outcome *outcome,
                  char *why, size_t why_len, cs_err *err)
{
    return put_file((s3_store *)base, b, &k_object, obj, len, outcome, why, why_len, err);
}

static int s3_put_sig(cs_lake_store *base, cs_lake_batch b, const uint8_t *sig, size_t len,
                      cs_lake_put_outcome *outcome, char *why, size_t why_len, cs_err *err)
{
    return put_file((s3_store *)base, b, &k_sig, sig, len, outcome, why, why_len, err);
}

static int s3_has_sig(cs_lake_store *base, cs_lake_batch b, cs_err *err)
{
    s3_store *s = (s3_store *)base;
    char key[CS_LAKE_KEY_MAX + 32];
    object_key(s, b, key);
    strcat(key, CS_LAKE_SIG_SUFFIX);
    int rc = cs_s3_exists(s->s3, key, err);
    return rc < 0 ? -1 : rc == 0;
}

/* The batch i batches after first. */
static cs_lake_batch nth_batch(const s3_store *s, cs_lake_batch first, uint32_t i)
{
    cs_lake_batch b = first;
    (void)cs_lake_batch_of(&s->layout, first.start + i * s->layout.ledgers_per_batch, &b, NULL);
    return b;
}

/* The newest object of the run the ring's whole batches begin: a binary search of HEADs between
 * the ring's first whole batch (absent: none to resume after) and its last. */
static int s3_newest(cs_lake_store *base, uint32_t ring_oldest, uint32_t ring_latest, cs_lake_batch *out,
                     cs_err *err)
{
    s3_store *s = (s3_store *)base;
    cs_lake_batch first;
    if (cs_lake_batch_of(&s->layout, ring_oldest, &first, NULL) != 0)
        return 0;
    if (first.start != ring_oldest &&
        (first.end == UINT32_MAX || cs_lake_batch_of(&s->layout, first.end + 1, &first, NULL) != 0))
        return 0;
    if (first.end > ring_latest)
        return 0; /* the ring holds no batch whole */
    /* The last batch the ring holds whole: the one holding ring_latest, or the one before. */
    uint32_t per = s->layout.ledgers_per_batch, last_start = ring_latest - ring_latest % per;
    if ((uint64_t)last_start + per - 1 > ring_latest)
        last_start -= per;
    uint32_t n = (last_start - first.start) / per + 1;
    char key[CS_LAKE_KEY_MAX + 16];
    /* lo: present; hi: absent, or past the last. */
    uint32_t lo = 0, hi = n;
    object_key(s, first, key);
    int rc = cs_s3_exists(s->s3, key, err);
    if (rc != 0)
        return rc < 0 ? -1 : 0;
    while (hi - lo > 1) {
        uint32_t mid = lo + (hi - lo) / 2;
        object_key(s, nth_batch(s, first, mid), key);
        rc = cs_s3_exists(s->s3, key, err);
        if (rc < 0)
            return -1;
        if (rc == 0)
            lo = mid;
        else
            hi = mid;
    }
    *out = nth_batch(s, first, lo);
    return 1;
}

static void s3_object_name(const cs_lake_store *base, cs_lake_batch b, char *buf, size_t len)
{
    const s3_store *s = (const s3_store *)base;
    char key[CS_LAKE_KEY_MAX + 16];
    object_key(s, b, key);
    snprintf(buf, len, "%s/%s", s->url, key);
}

static const char *s3_name(const cs_lake_store *base)
{
    return cs_s3_name(((const s3_store *)base)->s3);
}

static void s3_close(cs_lake_store *base)
{
    s3_store *s = (s3_store *)base;
    cs_s3_free(s->s3);
    free(s->url);
    free(s->passphrase);
    free(s);
}

static const cs_lake_store_ops s3_ops = {.kind = "url",
                                         .newest = s3_newest,
                                         .newest_known = NULL,
                                         .settle = s3_settle,
                                         .put = s3_put,
                                         .put_sig = s3_put_sig,
                                         .has_sig = s3_has_sig,
                                         .object_name = s3_object_name,
                                         .name = s3_name,
                                         .close = s3_close};

int cs_lake_s3_store_open(cs_lake_store **out, const char *url, const char *passphrase, const cs_lake_layout *l,
                          cs_err *err)
{
    *out = NULL;
    s3_store *s = calloc(1, sizeof *s);
    if (!s)
        return cs_err_set(err, CS_S3_ERR_IO, "lake: out of memory");
    s->base.ops = &s3_ops;
    s->layout = *l;
    size_t ul = strlen(url);
    while (ul > 5 && url[ul - 1] == '/')
        ul--;
    s->url = strndup(url, ul);
    s->passphrase = strdup(passphrase);
    if (!s->url || !s->passphrase) {
        s3_close(&s->base);
        return cs_err_set(err, CS_S3_ERR_IO, "lake: out of memory");
    }
    if (cs_s3_open(&s->s3, url, err) != 0) {
        s3_close(&s->base);
        return -1;
    }
    /* The configs in place are checked now, so another lake's fails the start; a bucket that does
     * not answer (CS_S3_ERR_IO) leaves them to the exporter's settle, which checks them again. */
    for (int i = 0; i < 2; i++) {
        bool present;
        cs_err e = {0};
        if (check_conf(s, i, &present, &e) == 0)
            continue;
        if (e.kind == CS_S3_ERR_IO)
            break;
        *err = e;
        s3_close(&s->base);
        return -1;
    }
    *out = &s->base;
    return 0;
}
