/* SPDX-License-Identifier: Apache-2.0 */
/* An S3-compatible bucket as a lake's store: see lakes3.h. */
#include "corestreamd/lake/lakes3.h"

#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <curl/curl.h>
#include <openssl/evp.h>

#include "common/strbuf.h"
#include "corestreamd/lake/lakecurl.h"

#define ERROR_BODY_MAX 4096 /* an error answer's XML, for its <Code> */

struct cs_s3 {
    CURL *curl;
    char *base; /* <endpoint>/<bucket>[/<prefix>], no trailing slash */
    char *name;
    char userpwd[512];
    char sigv4[128];
    char token_header[2100]; /* x-amz-security-token: …, "" without a session token */
};

static const char *env_first(const char *a, const char *b)
{
    const char *v = getenv(a);
    if ((!v || !*v) && b)
        v = getenv(b);
    return v && *v ? v : NULL;
}

/* The [profile] section's key from an AWS credentials file, into out. */
static bool profile_value(const char *path, const char *profile, const char *key, char *out, size_t len)
{
    FILE *fp = fopen(path, "r");
    if (!fp)
        return false;
    char line[2200], want[300];
    snprintf(want, sizeof want, "[%s]", profile);
    bool in = false, found = false;
    while (!found && fgets(line, sizeof line, fp)) {
        char *s = line + strspn(line, " \t");
        s[strcspn(s, "\r\n")] = '\0';
        if (*s == '[') {
            in = strcmp(s, want) == 0;
            continue;
        }
        char *eq = strchr(s, '=');
        if (!in || !eq)
            continue;
        char *k = s, *v = eq + 1;
        *eq = '\0';
        k[strcspn(k, " \t")] = '\0';
        v += strspn(v, " \t");
        v[strcspn(v, " \t")] = '\0';
        if (strcmp(k, key) == 0) {
            snprintf(out, len, "%s", v);
            found = true;
        }
    }
    fclose(fp);
    return found;
}

static int credentials(cs_s3 *s, cs_err *err)
{
    char id[256] = "", secret[256] = "", token[2048] = "", path[1024];
    const char *e_id = getenv("AWS_ACCESS_KEY_ID"), *e_secret = getenv("AWS_SECRET_ACCESS_KEY");
    const char *e_token = getenv("AWS_SESSION_TOKEN");
    const char *file = env_first("AWS_SHARED_CREDENTIALS_FILE", NULL), *home = getenv("HOME");
    const char *profile = env_first("AWS_PROFILE", NULL);
    snprintf(path, sizeof path, "%s", file ? file : "");
    if (!file)
        snprintf(path, sizeof path, "%s/.aws/credentials", home ? home : "");
    if (e_id && *e_id && e_secret && *e_secret) {
        snprintf(id, sizeof id, "%s", e_id);
        snprintf(secret, sizeof secret, "%s", e_secret);
        snprintf(token, sizeof token, "%s", e_token ? e_token : "");
    } else {
        const char *p = profile ? profile : "default";
        if (!profile_value(path, p, "aws_access_key_id", id, sizeof id) ||
            !profile_value(path, p, "aws_secret_access_key", secret, sizeof secret))
            return cs_err_set(err, CS_S3_ERR_CONFIG,
                              "--lake-url: no AWS credentials: set AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY, or "
                              "a [%s] profile in %s",
                              p, path);
        profile_value(path, p, "aws_session_token", token, sizeof token);
    }
    snprintf(s->userpwd, sizeof s->userpwd, "%s:%s", id, secret);
    if (*token)
        snprintf(s->token_header, sizeof s->token_header, "x-amz-security-token: %s", token);
    return 0;
}

int cs_s3_open(cs_s3 **out, const char *url, cs_err *err)
{
    *out = NULL;
    if (strncmp(url, "s3://", 5) != 0 || !url[5] || url[5] == '/')
        return cs_err_set(err, CS_S3_ERR_CONFIG, "--lake-url %.200s: not s3://bucket[/prefix]", url);
    cs_s3 *s = calloc(1, sizeof *s);
    if (!s)
        return cs_err_set(err, CS_S3_ERR_IO, "s3: out of memory");
    const char *region = env_first("AWS_REGION", "AWS_DEFAULT_REGION");
    region = region ? region : "us-east-1";
    const char *endpoint = env_first("AWS_ENDPOINT_URL_S3", "AWS_ENDPOINT_URL");
    char aws[200];
    snprintf(aws, sizeof aws, "https://s3.%s.amazonaws.com", region);
    endpoint = endpoint ? endpoint : aws;
    size_t el = strlen(endpoint), ul = strlen(url);
    while (el && endpoint[el - 1] == '/')
        el--;
    while (ul > 5 && url[ul - 1] == '/')
        ul--;
    cs_strbuf b = CS_STRBUF_INIT;
    cs_strbuf_printf(&b, "%.*s/%.*s", (int)el, endpoint, (int)(ul - 5), url + 5);
    s->base = cs_strbuf_take(&b, NULL);
    cs_strbuf_printf(&b, "%.*s at %.*s", (int)ul, url, (int)el, endpoint);
    s->name = cs_strbuf_take(&b, NULL);
    snprintf(s->sigv4, sizeof s->sigv4, "aws:amz:%s:s3", region);
    int rc = 0;
    if (!s->base || !s->name)
        rc = cs_err_set(err, CS_S3_ERR_IO, "s3: out of memory");
    else if (!cs_lake_curl_ready() || !(s->curl = curl_easy_init()))
        rc = cs_err_set(err, CS_S3_ERR_IO, "s3: cannot start libcurl");
    else
        rc = credentials(s, err);
    if (rc != 0) {
        cs_s3_free(s);
        return -1;
    }
    *out = s;
    return 0;
}

const char *cs_s3_name(const cs_s3 *s)
{
    return s->name;
}

/* An S3 error answer's <Code>, or "" (the body is small XML; only this element is read). */
static void error_code(const cs_lake_body *b, char *out, size_t len)
{
    out[0] = '\0';
    if (!b->p)
        return;
    const char *p = memmem(b->p, b->len, "<Code>", 6), *end = NULL;
    if (p)
        end = memmem(p, b->len - (size_t)(p - (const char *)b->p), "</Code>", 7);
    if (p && end)
        snprintf(out, len, "%.*s", (int)(end - p - 6), p + 6);
}

/* One request: method on key, with body (PUT) or into *got. Returns the HTTP status, or -1 with
 * err for a transfer that failed. */
static long request(cs_s3 *s, const char *method, const char *key, const void *body, size_t n, const char *ctype,
                    cs_lake_body *got, cs_err *err)
{
    char url[4200], why[CURL_ERROR_SIZE] = "", type[160], hash[100];
    snprintf(url, sizeof url, "%s/%s", s->base, key);
    /* S3 takes the payload's SHA-256 in a header of its own, signed with the rest. */
    uint8_t sha[32];
    unsigned shalen = 0;
    if (EVP_Digest(body ? body : "", n, sha, &shalen, EVP_sha256(), NULL) != 1)
        return cs_err_set(err, CS_S3_ERR_IO, "s3: %s %s: SHA-256 failed", method, key);
    int k = snprintf(hash, sizeof hash, "x-amz-content-sha256: ");
    for (unsigned i = 0; i < shalen; i++)
        k += snprintf(hash + k, sizeof hash - (size_t)k, "%02x", sha[i]);
    struct curl_slist *h = curl_slist_append(NULL, "Expect:");
    h = curl_slist_append(h, hash);
    if (*s->token_header)
        h = curl_slist_append(h, s->token_header);
    if (ctype) {
        snprintf(type, sizeof type, "Content-Type: %s", ctype);
        h = curl_slist_append(h, type);
    }
    CURL *c = s->curl;
    curl_easy_reset(c);
    curl_easy_setopt(c, CURLOPT_URL, url);
    curl_easy_setopt(c, CURLOPT_PROTOCOLS_STR, "http,https");
    curl_easy_setopt(c, CURLOPT_AWS_SIGV4, s->sigv4);
    curl_easy_setopt(c, CURLOPT_USERPWD, s->userpwd);
    curl_easy_setopt(c, CURLOPT_HTTPHEADER, h);
    curl_easy_setopt(c, CURLOPT_NOSIGNAL, 1L);
    curl_easy_setopt(c, CURLOPT_CONNECTTIMEOUT_MS, 15000L);
    curl_easy_setopt(c, CURLOPT_TIMEOUT_MS, 120000L);
    curl_easy_setopt(c, CURLOPT_USERAGENT, "corestream");
    curl_easy_setopt(c, CURLOPT_ERRORBUFFER, why);
    curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, cs_lake_body_write);
    curl_easy_setopt(c, CURLOPT_WRITEDATA, got);
    if (strcmp(method, "PUT") == 0) {
        curl_easy_setopt(c, CURLOPT_CUSTOMREQUEST, "PUT");
        curl_easy_setopt(c, CURLOPT_POSTFIELDS, body ? body : "");
        curl_easy_setopt(c, CURLOPT_POSTFIELDSIZE_LARGE, (curl_off_t)n);
    } else if (strcmp(method, "HEAD") == 0) {
        curl_easy_setopt(c, CURLOPT_NOBODY, 1L);
    }
    CURLcode rc = curl_easy_perform(c);
    long status = 0;
    curl_easy_getinfo(c, CURLINFO_RESPONSE_CODE, &status);
    curl_slist_free_all(h);
    if (got->over && (status == 200 || status == 0))
        return cs_err_set(err, CS_S3_ERR_DENIED, "s3: %s %s: more than %zu bytes", method, key, got->max);
    if (rc != CURLE_OK && !got->over)
        return cs_err_set(err, CS_S3_ERR_IO, "s3: %s %s: %s", method, key, *why ? why : curl_easy_strerror(rc));
    return status;
}

/* An answer other than the ones the caller takes: the error it is. */
static int answer_error(const char *method, const char *key, long status, const cs_lake_body *b, cs_err *err)
{
    char code[128];
    error_code(b, code, sizeof code);
    int kind = status >= 500 || status == 429 || status == 408 ? CS_S3_ERR_IO : CS_S3_ERR_DENIED;
    return cs_err_set(err, kind, "s3: %s %s: HTTP %ld%s%s", method, key, status, *code ? ": " : "", code);
}

int cs_s3_put(cs_s3 *s, const char *key, const void *p, size_t n, const char *ctype, cs_err *err)
{
    cs_lake_body b = {.max = ERROR_BODY_MAX};
    long status = request(s, "PUT", key, p, n, ctype, &b, err);
    int rc = status < 0 ? -1 : status == 200 ? 0 : answer_error("PUT", key, status, &b, err);
    free(b.p);
    return rc;
}

int cs_s3_get(cs_s3 *s, const char *key, size_t max, uint8_t **p, size_t *n, cs_err *err)
{
    cs_lake_body b = {.max = max > ERROR_BODY_MAX ? max : ERROR_BODY_MAX};
    long status = request(s, "GET", key, NULL, 0, NULL, &b, err);
    int rc = status < 0 ? -1 : status == 200 ? 0 : status == 404 ? 1 : answer_error("GET", key, status, &b, err);
    if (rc == 0) {
        *p = b.p ? b.p : malloc(1);
        *n = b.len;
        return *p ? 0 : cs_err_set(err, CS_S3_ERR_IO, "s3: out of memory");
    }
    free(b.p);
    return rc;
}

int cs_s3_exists(cs_s3 *s, const char *key, cs_err *err)
{
    cs_lake_body b = {.max = ERROR_BODY_MAX};
    long status = request(s, "HEAD", key, NULL, 0, NULL, &b, err);
    int rc = status < 0 ? -1 : status == 200 ? 0 : status == 404 ? 1 : answer_error("HEAD", key, status, &b, err);
    free(b.p);
    return rc;
}

void cs_s3_free(cs_s3 *s)
{
    if (!s)
        return;
    if (s->curl)
        curl_easy_cleanup(s->curl);
    free(s->base);
    free(s->name);
    free(s);
}
