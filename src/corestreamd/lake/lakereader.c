/* SPDX-License-Identifier: Apache-2.0 */
/* A reader of SEP-54 lakes: see lakereader.h. */
#include "corestreamd/lake/lakereader.h"

#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include <curl/curl.h>
#include <openssl/evp.h>
#include <xxhash.h>
#include <zstd.h>

#include "common/strbuf.h"
#include "corestreamd/lake/lakeconfig.h"
#include "corestreamd/lake/lakecurl.h"
#include "corestream/wire.h"
#include "corestreamd/lake/lakeobject.h"

#define CONFIG_MAX (64 * 1024)         /* a config.json is a few hundred bytes */
#define OBJECT_MAX (1024ull << 20)     /* a compressed object; a batch decompresses to at most 4 GiB */
#define DECOMPRESSED_MAX (4096ull << 20)

struct cs_lake_reader {
    char *url;         /* as given, without a trailing slash */
    char *objects;     /* where keys are appended (a URL or a directory), no trailing slash */
    bool http;
    CURL *curl;        /* http only: one handle, so one kept-alive connection */
    struct curl_slist *headers;
    cs_lake_layout layout;
    char *passphrase;
};

/* GET url into *b: 0, or -1 with err. *status is the HTTP status (0 when none came). */
static int http_get(cs_lake_reader *r, const char *url, cs_lake_body *b, long *status, cs_err *err)
{
    char why[CURL_ERROR_SIZE] = "";
    curl_easy_setopt(r->curl, CURLOPT_URL, url);
    curl_easy_setopt(r->curl, CURLOPT_WRITEDATA, b);
    curl_easy_setopt(r->curl, CURLOPT_ERRORBUFFER, why);
    CURLcode rc = curl_easy_perform(r->curl);
    *status = 0;
    curl_easy_getinfo(r->curl, CURLINFO_RESPONSE_CODE, status);
    if (b->over)
        return cs_err_set(err, CS_LAKE_READ_ERR_FORMAT, "lake: %s: more than %zu bytes", url, b->max);
    if (rc != CURLE_OK)
        return cs_err_set(err, CS_LAKE_READ_ERR_IO, "lake: %s: %s", url, *why ? why : curl_easy_strerror(rc));
    return 0;
}

/* The whole file at path into *b: 0; 1 when it does not exist; -1 with err. */
static int file_get(const char *path, cs_lake_body *b, cs_err *err)
{
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0 && errno == ENOENT)
        return 1;
    struct stat st;
    if (fd < 0 || fstat(fd, &st) != 0) {
        int e = errno;
        if (fd >= 0)
            close(fd);
        return cs_err_set(err, CS_LAKE_READ_ERR_IO, "lake: %s: %s", path, strerror(e));
    }
    if ((uint64_t)st.st_size > b->max) {
        close(fd);
        return cs_err_set(err, CS_LAKE_READ_ERR_FORMAT, "lake: %s: more than %zu bytes", path, b->max);
    }
    b->p = malloc(st.st_size ? (size_t)st.st_size : 1);
    if (!b->p) {
        close(fd);
        return cs_err_set(err, CS_LAKE_READ_ERR_IO, "lake: %s: out of memory", path);
    }
    while (b->len < (size_t)st.st_size) {
        ssize_t k = read(fd, b->p + b->len, (size_t)st.st_size - b->len);
        if (k < 0 && errno == EINTR)
            continue;
        if (k <= 0) {
            int e = k < 0 ? errno : EIO;
            close(fd);
            return cs_err_set(err, CS_LAKE_READ_ERR_IO, "lake: %s: %s", path, k < 0 ? strerror(e) : "shorter than its size");
        }
        b->len += (size_t)k;
    }
    close(fd);
    return 0;
}

/* where's bytes into *b: 0; 1 when the lake has nothing there (404, no such file); -1 with err.
 * Any HTTP status but 200 and 404 is an error: 5xx and 429 CS_LAKE_READ_ERR_IO, others FORMAT. */
static int fetch(cs_lake_reader *r, const char *where, cs_lake_body *b, cs_err *err)
{
    if (!r->http)
        return file_get(where, b, err);
    long status;
    if (http_get(r, where, b, &status, err) != 0)
        return -1;
    if (status == 200)
        return 0;
    if (status == 404)
        return 1;
    return cs_err_set(err, status >= 500 || status == 429 ? CS_LAKE_READ_ERR_IO : CS_LAKE_READ_ERR_FORMAT,
                      "lake: %s: HTTP %ld", where, status);
}

static int config_u32(const cs_lake_conf_value *v, const char *name, uint32_t *out, const char *url, cs_err *err)
{
    if (!cs_lake_conf_count(v, out))
        return cs_err_set(err, CS_LAKE_READ_ERR_FORMAT, "lake: %s/config.json: %s is not a count of 1 or more", url,
                          name);
    return 0;
}

/* Where objects are, from ledgersPath (lakereader.h). */
static int objects_at(cs_lake_reader *r, const char *lp, cs_err *err)
{
    size_t n = strlen(lp);
    while (n > 1 && lp[n - 1] == '/')
        n--;
    cs_strbuf b = CS_STRBUF_INIT;
    if (r->http && lp[0] == '/') {
        const char *host = strstr(r->url, "://") + 3, *path = strchr(host, '/');
        cs_strbuf_put(&b, r->url, path ? (size_t)(path - r->url) : strlen(r->url));
        cs_strbuf_put(&b, lp, n);
    } else if (lp[0] == '/') {
        const char *last = lp + n;
        while (last > lp && last[-1] != '/')
            last--;
        cs_strbuf_printf(&b, "%s/%.*s", r->url, (int)(lp + n - last), last);
    } else {
        cs_strbuf_printf(&b, "%s/%.*s", r->url, (int)n, lp);
    }
    if (!(r->objects = cs_strbuf_take(&b, NULL)))
        return cs_err_set(err, CS_LAKE_READ_ERR_IO, "lake: out of memory");
    return 0;
}

/* config.json's members checked (cs_lake_conf_read, lakeconfig.h, read it) and taken. */
static int take_config(cs_lake_reader *r, const cs_lake_conf *c, const char *where, cs_err *err)
{
    const cs_lake_conf_value *comp = &c->compression;
    if (c->passphrase.type != CS_LAKE_CONF_STRING || c->ledgers_path.type != CS_LAKE_CONF_STRING ||
        !*c->ledgers_path.str)
        return cs_err_set(err, CS_LAKE_READ_ERR_FORMAT, "lake: %s lacks networkPassphrase or ledgersPath", where);
    if (comp->type != CS_LAKE_CONF_STRING || strcmp(comp->str, "zstd") != 0)
        return cs_err_set(err, CS_LAKE_READ_ERR_FORMAT, "lake: %s: compression %s: only zstd is read", where,
                          comp->type == CS_LAKE_CONF_STRING ? comp->str : "(none)");
    if (config_u32(&c->ledgers_per_batch, "ledgersPerBatch", &r->layout.ledgers_per_batch, r->url, err) != 0 ||
        config_u32(&c->batches_per_partition, "batchesPerPartition", &r->layout.batches_per_partition, r->url, err) !=
            0 ||
        cs_lake_layout_check(&r->layout, err) != 0 || objects_at(r, c->ledgers_path.str, err) != 0)
        return -1;
    if (!(r->passphrase = strdup(c->passphrase.str)))
        return cs_err_set(err, CS_LAKE_READ_ERR_IO, "lake: out of memory");
    return 0;
}

static int read_config(cs_lake_reader *r, cs_err *err)
{
    char where[4096];
    snprintf(where, sizeof where, "%s/config.json", r->url);
    cs_lake_body b = {.max = CONFIG_MAX};
    int rc = fetch(r, where, &b, err);
    if (rc == 1)
        cs_err_set(err, CS_LAKE_READ_ERR_NOT_FOUND, "lake: %s: not found: not a SEP-54 lake", where);
    cs_lake_conf c = {0};
    cs_err why = {0};
    if (rc == 0 && cs_lake_conf_read((const char *)b.p, b.len, &c, &why) != 0)
        rc = why.kind == CS_LAKE_CONF_ERR_MEMORY ? cs_err_set(err, CS_LAKE_READ_ERR_IO, "lake: out of memory")
                                                 : cs_err_set(err, CS_LAKE_READ_ERR_FORMAT, "lake: %s is not a JSON object",
                                                              where);
    free(b.p);
    if (rc == 0)
        rc = take_config(r, &c, where, err);
    cs_lake_conf_free(&c);
    return rc;
}

static int open_http(cs_lake_reader *r, const cs_lake_reader_opts *o, cs_err *err)
{
    if (!cs_lake_curl_ready() || !(r->curl = curl_easy_init()))
        return cs_err_set(err, CS_LAKE_READ_ERR_IO, "lake: cannot start libcurl");
    if (o->bearer_token && *o->bearer_token) {
        char h[1100];
        snprintf(h, sizeof h, "Authorization: Bearer %s", o->bearer_token);
        if (!(r->headers = curl_slist_append(NULL, h)))
            return cs_err_set(err, CS_LAKE_READ_ERR_IO, "lake: out of memory");
        curl_easy_setopt(r->curl, CURLOPT_HTTPHEADER, r->headers);
    }
    curl_easy_setopt(r->curl, CURLOPT_PROTOCOLS_STR, "http,https");
    curl_easy_setopt(r->curl, CURLOPT_REDIR_PROTOCOLS_STR, "http,https");
    curl_easy_setopt(r->curl, CURLOPT_FOLLOWLOCATION, 1L);
    curl_easy_setopt(r->curl, CURLOPT_MAXREDIRS, 10L);
    curl_easy_setopt(r->curl, CURLOPT_UNRESTRICTED_AUTH, 0L); /* no token to another host */
    curl_easy_setopt(r->curl, CURLOPT_TIMEOUT_MS, o->timeout_ms > 0 ? o->timeout_ms : 60000L);
    curl_easy_setopt(r->curl, CURLOPT_CONNECTTIMEOUT_MS, 15000L);
    curl_easy_setopt(r->curl, CURLOPT_NOSIGNAL, 1L);
    curl_easy_setopt(r->curl, CURLOPT_USERAGENT, "corestream");
    curl_easy_setopt(r->curl, CURLOPT_WRITEFUNCTION, cs_lake_body_write);
    if (o->ca_file && *o->ca_file)
        curl_easy_setopt(r->curl, CURLOPT_CAINFO, o->ca_file);
    return 0;
}

int cs_lake_reader_open(cs_lake_reader **out, const cs_lake_reader_opts *o, cs_err *err)
{
    *out = NULL;
    cs_lake_reader *r = calloc(1, sizeof *r);
    if (!r || !(r->url = strdup(o->url))) {
        free(r);
        return cs_err_set(err, CS_LAKE_READ_ERR_IO, "lake: out of memory");
    }
    size_t n = strlen(r->url);
    while (n > 1 && r->url[n - 1] == '/')
        r->url[--n] = '\0';
    r->http = strncmp(r->url, "http://", 7) == 0 || strncmp(r->url, "https://", 8) == 0;
    if (!r->http && strstr(r->url, "://")) {
        cs_err_set(err, CS_LAKE_READ_ERR_FORMAT, "lake: %s: only http://, https:// and directories are read", r->url);
        cs_lake_reader_free(r);
        return -1;
    }
    if ((r->http && open_http(r, o, err) != 0) || read_config(r, err) != 0) {
        cs_lake_reader_free(r);
        return -1;
    }
    *out = r;
    return 0;
}

const cs_lake_layout *cs_lake_reader_layout(const cs_lake_reader *r)
{
    return &r->layout;
}

const char *cs_lake_reader_passphrase(const cs_lake_reader *r)
{
    return r->passphrase;
}

/* Every frame of z into *out (malloc'd). */
static int unzstd(const uint8_t *z, size_t zlen, uint8_t **out, size_t *len, const char *where, cs_err *err)
{
    ZSTD_DCtx *d = ZSTD_createDCtx();
    cs_lake_body b = {.max = DECOMPRESSED_MAX};
    ZSTD_inBuffer in = {z, zlen, 0};
    size_t left = 0;
    int rc = d ? 0 : cs_err_set(err, CS_LAKE_READ_ERR_IO, "lake: out of memory");
    while (rc == 0 && in.pos < in.size) {
        if (b.cap - b.len < ZSTD_DStreamOutSize()) {
            size_t cap = b.cap ? b.cap * 2 : ZSTD_DStreamOutSize() * 4;
            uint8_t *p = cap <= b.max ? realloc(b.p, cap) : NULL;
            if (!p) {
                rc = cs_err_set(err, CS_LAKE_READ_ERR_FORMAT, "lake: %s: does not decompress within %llu bytes",
                                where, (unsigned long long)b.max);
                break;
            }
            b.p = p;
            b.cap = cap;
        }
        ZSTD_outBuffer ob = {b.p, b.cap, b.len};
        left = ZSTD_decompressStream(d, &ob, &in);
        b.len = ob.pos;
        if (ZSTD_isError(left))
            rc = cs_err_set(err, CS_LAKE_READ_ERR_FORMAT, "lake: %s: zstd: %s", where, ZSTD_getErrorName(left));
    }
    if (rc == 0 && left != 0)
        rc = cs_err_set(err, CS_LAKE_READ_ERR_FORMAT, "lake: %s: its last zstd frame is cut short", where);
    ZSTD_freeDCtx(d);
    if (rc != 0) {
        free(b.p);
        return -1;
    }
    *out = b.p;
    *len = b.len;
    return 0;
}

static uint32_t be32(const uint8_t *p)
{
    return (uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 | (uint32_t)p[2] << 8 | p[3];
}

/* The batch holding seq, its key, and where its object (with suffix) is. -1 with err when the
 * layout has no batch for seq. */
static int batch_at(const cs_lake_reader *r, uint32_t seq, const char *suffix, cs_lake_batch *bt,
                    char key[CS_LAKE_KEY_MAX], char *where, size_t wlen, cs_err *err)
{
    if (cs_lake_batch_of(&r->layout, seq, bt, err) != 0) {
        err->kind = CS_LAKE_READ_ERR_NOT_FOUND;
        return -1;
    }
    cs_lake_key(&r->layout, *bt, key);
    snprintf(where, wlen, "%s/%s%s", r->objects, key, suffix);
    return 0;
}

int cs_lake_reader_get(cs_lake_reader *r, uint32_t seq, cs_lake_batch *batch, uint8_t **xdr, size_t *len,
                       cs_err *err)
{
    cs_lake_batch bt;
    char key[CS_LAKE_KEY_MAX], where[4200];
    if (batch_at(r, seq, "", &bt, key, where, sizeof where, err) != 0)
        return -1;
    cs_lake_body b = {.max = OBJECT_MAX};
    int rc = fetch(r, where, &b, err);
    if (rc == 1)
        cs_err_set(err, CS_LAKE_READ_ERR_NOT_FOUND, "lake: %s: ledger %" PRIu32 ": no object at %s", r->url, seq, key);
    uint8_t *raw = NULL;
    size_t n = 0;
    if (rc == 0)
        rc = unzstd(b.p, b.len, &raw, &n, where, err);
    free(b.p);
    if (rc != 0)
        return -1;
    if (n < 12 || be32(raw) != bt.start || be32(raw + 4) != bt.end || be32(raw + 8) != bt.end - bt.start + 1) {
        cs_err_set(err, CS_LAKE_READ_ERR_FORMAT,
                   "lake: %s: its LedgerCloseMetaBatch header does not name ledgers %" PRIu32 " to %" PRIu32, where,
                   bt.start, bt.end);
        free(raw);
        return -1;
    }
    *batch = bt;
    *xdr = raw;
    *len = n;
    return 0;
}

int cs_lake_reader_get_sig(cs_lake_reader *r, uint32_t seq, uint8_t **sig, size_t *len, cs_err *err)
{
    cs_lake_batch bt;
    char key[CS_LAKE_KEY_MAX], where[4200];
    if (batch_at(r, seq, CS_LAKE_SIG_SUFFIX, &bt, key, where, sizeof where, err) != 0)
        return -1;
    cs_lake_body b = {.max = (size_t)r->layout.ledgers_per_batch * (2 + CS_WIRE_SIG_MAX_LEN)};
    int rc = fetch(r, where, &b, err);
    if (rc == 1)
        cs_err_set(err, CS_LAKE_READ_ERR_NOT_FOUND, "lake: %s: ledger %" PRIu32 ": no signatures at %s" CS_LAKE_SIG_SUFFIX,
                   r->url, seq, key);
    if (rc != 0) {
        free(b.p);
        return -1;
    }
    *sig = b.p;
    *len = b.len;
    return 0;
}

int cs_lake_reader_check_sig(cs_lake_reader *r, const cs_sig_keyset *ks, cs_sig_chain *chain, uint32_t seq,
                             const uint8_t *ledger, size_t len, cs_err *err)
{
    uint8_t *sig = NULL;
    size_t n = 0;
    if (cs_lake_reader_get_sig(r, seq, &sig, &n, err) != 0)
        return -1;
    uint8_t sha[CS_SIG_SHA_LEN];
    unsigned shalen = 0;
    int rc = 0;
    cs_err why;
    if (n < 2 || (size_t)(sig[0] << 8 | sig[1]) != n - 2)
        rc = cs_err_set(err, 0, "lake: %s: ledger %" PRIu32 ": its signature object is not one SIG", r->url, seq);
    else if (EVP_Digest(ledger, len, sha, &shalen, EVP_sha256(), NULL) != 1)
        rc = cs_err_set(err, 0, "lake: SHA-256 failed");
    else if (cs_sig_chain_check(chain, ks, sig + 2, n - 2, seq, len, XXH64(ledger, len, 0), sha, false, &why) != 0)
        rc = cs_err_set(err, 0, "lake: signature: %s", why.msg);
    free(sig);
    return rc;
}

void cs_lake_reader_free(cs_lake_reader *r)
{
    if (!r)
        return;
    if (r->curl)
        curl_easy_cleanup(r->curl);
    curl_slist_free_all(r->headers);
    free(r->url);
    free(r->objects);
    free(r->passphrase);
    free(r);
}
