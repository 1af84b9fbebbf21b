/* SPDX-License-Identifier: Apache-2.0 */
#include "corestreamd/sources/captive/archive.h"

#include <cjson/cJSON.h>
#include <curl/curl.h>
#include <poll.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common/clock.h"
#include "common/log.h"
#include "corestreamd/sources/source.h"

static pthread_once_t g_curl_once = PTHREAD_ONCE_INIT;
static CURLcode g_curl_init;

static void curl_init_once(void)
{
    g_curl_init = curl_global_init(CURL_GLOBAL_DEFAULT);
}

typedef struct fetch {
    cs_cancel *cancel;
    char *body;
    size_t n, cap;
    bool over; /* more than CS_ARCHIVE_MAX_HAS bytes arrived */
    char reason[128]; /* the reason phrase of the last status line */
} fetch;

static size_t on_body(char *data, size_t size, size_t nmemb, void *arg)
{
    fetch *f = arg;
    size_t n = size * nmemb;
    /* Keep one byte past the cap, as the SDK's LimitedReader does, to tell "too big" apart. */
    size_t room = CS_ARCHIVE_MAX_HAS + 1 - f->n;
    size_t take = n < room ? n : room;
    if (f->n + take > f->cap) {
        size_t cap = f->cap ? f->cap : 16384;
        while (cap < f->n + take)
            cap *= 2;
        char *p = realloc(f->body, cap + 1);
        if (!p)
            return 0;
        f->body = p;
        f->cap = cap;
    }
    memcpy(f->body + f->n, data, take);
    f->n += take;
    if (take < n) {
        f->over = true;
        return 0; /* abort the transfer */
    }
    return n;
}

static size_t on_header(char *data, size_t size, size_t nmemb, void *arg)
{
    fetch *f = arg;
    size_t n = size * nmemb;
    /* "HTTP/1.1 404 Not Found\r\n": keep "Not Found". Each redirect hop overwrites it. */
    if (n > 5 && memcmp(data, "HTTP/", 5) == 0) {
        f->reason[0] = 0;
        size_t i = 0;
        while (i < n && data[i] != ' ')
            i++; /* the version */
        i++;
        while (i < n && data[i] != ' ' && data[i] != '\r' && data[i] != '\n')
            i++; /* the code */
        if (i < n && data[i] == ' ') {
            i++;
            size_t k = n - i;
            while (k && (data[i + k - 1] == '\r' || data[i + k - 1] == '\n'))
                k--;
            if (k >= sizeof f->reason)
                k = sizeof f->reason - 1;
            memcpy(f->reason, data + i, k);
            f->reason[k] = 0;
        }
    }
    return n;
}

static int on_progress(void *arg, curl_off_t dt, curl_off_t dn, curl_off_t ut, curl_off_t un)
{
    (void)dt, (void)dn, (void)ut, (void)un;
    fetch *f = arg;
    return cs_cancel_is_set(f->cancel) ? 1 : 0;
}

static int cancelled(cs_err *err)
{
    return cs_err_set(err, CS_ERR_CANCELLED, "context canceled");
}

int cs_archive_parse_has(const char *body, size_t len, const char *url, const char *network_passphrase,
                         cs_archive_has *has, cs_err *err)
{
    memset(has, 0, sizeof *has);
    const char *end = NULL;
    cJSON *root = cJSON_ParseWithLengthOpts(body, len, &end, 0);
    if (!root)
        return cs_err_set(err, CS_ARCHIVE_ERR_NOT_JSON, "history archive state: %s is not valid JSON", url);
    int rc = -1;
    /* encoding/json matches field names case-insensitively; so does cJSON_GetObjectItem. */
    const cJSON *cl = cJSON_IsObject(root) ? cJSON_GetObjectItem(root, "currentLedger") : NULL;
    const cJSON *np = cJSON_IsObject(root) ? cJSON_GetObjectItem(root, "networkPassphrase") : NULL;
    if (!cJSON_IsObject(root)) {
        cs_err_set(err, 0, "history archive state: %s does not hold a JSON object", url);
    } else if (cl && !cJSON_IsNull(cl) &&
               (!cJSON_IsNumber(cl) || !(cl->valuedouble >= 0 && cl->valuedouble <= 4294967295.0) ||
                (double)(uint32_t)cl->valuedouble != cl->valuedouble)) {
        cs_err_set(err, 0, "history archive state: currentLedger is not a uint32");
    } else if (np && !cJSON_IsNull(np) && !cJSON_IsString(np)) {
        cs_err_set(err, 0, "history archive state: networkPassphrase is not a string");
    } else {
        if (cl && cJSON_IsNumber(cl))
            has->current_ledger = (uint32_t)cl->valuedouble;
        if (np && cJSON_IsString(np))
            snprintf(has->network_passphrase, sizeof has->network_passphrase, "%s", np->valuestring);
        /* Compared only when both are known (the field arrived with stellar-core 14.1.0). */
        if (has->network_passphrase[0] && network_passphrase && network_passphrase[0] &&
            strcmp(has->network_passphrase, network_passphrase) != 0)
            cs_err_set(err, 0, "Network passphrase does not match! expected=%s actual=%s", network_passphrase,
                       has->network_passphrase);
        else
            rc = 0;
    }
    cJSON_Delete(root);
    return rc;
}

/* One GET of one archive's root HAS. */
static int fetch_has(const char *base, const cs_archive_opts *o, cs_archive_has *has, cs_err *err)
{
    size_t bn = strlen(base);
    while (bn && base[bn - 1] == '/')
        bn--;
    char *url = NULL;
    if (asprintf(&url, "%.*s/%s", (int)bn, base, CS_ARCHIVE_HAS_PATH) < 0)
        return cs_err_set(err, 0, "out of memory");

    fetch f = {.cancel = o->cancel};
    char errbuf[CURL_ERROR_SIZE] = {0};
    CURL *h = curl_easy_init();
    CURLM *m = h ? curl_multi_init() : NULL;
    int rc = -1;
    if (!m) {
        cs_err_set(err, 0, "Get \"%s\": cannot initialise libcurl", url);
        goto out;
    }
    curl_easy_setopt(h, CURLOPT_URL, url);
    curl_easy_setopt(h, CURLOPT_PROTOCOLS_STR, "http,https,file");
    curl_easy_setopt(h, CURLOPT_REDIR_PROTOCOLS_STR, "http,https");
    curl_easy_setopt(h, CURLOPT_USERAGENT, o->user_agent ? o->user_agent : CS_ARCHIVE_USER_AGENT);
    curl_easy_setopt(h, CURLOPT_FOLLOWLOCATION, 1L);
    curl_easy_setopt(h, CURLOPT_MAXREDIRS, 10L); /* Go's http.Client stops after 10 */
    curl_easy_setopt(h, CURLOPT_CONNECTTIMEOUT_MS, o->connect_timeout_ms > 0 ? o->connect_timeout_ms : 15000L);
    curl_easy_setopt(h, CURLOPT_TIMEOUT_MS, o->timeout_ms > 0 ? o->timeout_ms : 60000L);
    curl_easy_setopt(h, CURLOPT_NOSIGNAL, 1L);
    curl_easy_setopt(h, CURLOPT_ACCEPT_ENCODING, ""); /* whatever libcurl can decode */
    curl_easy_setopt(h, CURLOPT_WRITEFUNCTION, on_body);
    curl_easy_setopt(h, CURLOPT_WRITEDATA, &f);
    curl_easy_setopt(h, CURLOPT_HEADERFUNCTION, on_header);
    curl_easy_setopt(h, CURLOPT_HEADERDATA, &f);
    curl_easy_setopt(h, CURLOPT_NOPROGRESS, 0L);
    curl_easy_setopt(h, CURLOPT_XFERINFOFUNCTION, on_progress);
    curl_easy_setopt(h, CURLOPT_XFERINFODATA, &f);
    curl_easy_setopt(h, CURLOPT_ERRORBUFFER, errbuf);
    curl_multi_add_handle(m, h);

    /* The multi loop waits on the cancel's eventfd as well, so a cancel aborts at once rather
     * than at the next progress callback. */
    CURLcode res = CURLE_OK;
    for (;;) {
        if (cs_cancel_is_set(o->cancel)) {
            cancelled(err);
            goto out;
        }
        int running = 0;
        CURLMcode mc = curl_multi_perform(m, &running);
        if (mc != CURLM_OK) {
            cs_err_set(err, 0, "Get \"%s\": %s", url, curl_multi_strerror(mc));
            goto out;
        }
        if (!running)
            break;
        struct curl_waitfd extra = {.fd = o->cancel->efd, .events = CURL_WAIT_POLLIN};
        mc = curl_multi_poll(m, &extra, 1, 1000, NULL);
        if (mc != CURLM_OK) {
            cs_err_set(err, 0, "Get \"%s\": %s", url, curl_multi_strerror(mc));
            goto out;
        }
    }
    int left;
    for (CURLMsg *msg; (msg = curl_multi_info_read(m, &left));)
        if (msg->msg == CURLMSG_DONE)
            res = msg->data.result;
    if (cs_cancel_is_set(o->cancel) || res == CURLE_ABORTED_BY_CALLBACK) {
        cancelled(err);
        goto out;
    }
    long code = 0;
    curl_easy_getinfo(h, CURLINFO_RESPONSE_CODE, &code);
    bool is_file = bn >= 7 && strncasecmp(base, "file://", 7) == 0;
    if (res != CURLE_OK && !(res == CURLE_WRITE_ERROR && f.over)) {
        cs_err_set(err, 0, "Get \"%s\": %s", url, errbuf[0] ? errbuf : curl_easy_strerror(res));
        goto out;
    }
    if (!is_file && (code < 200 || code >= 400)) {
        cs_err_set(err, 0, "Bad HTTP response '%ld%s%s' for GET '%s'", code, f.reason[0] ? " " : "", f.reason, url);
        goto out;
    }

    if (cs_archive_parse_has(f.body ? f.body : "", f.n, url, o->network_passphrase, has, err) == 0)
        rc = 0;
    else if (err->kind == CS_ARCHIVE_ERR_NOT_JSON && f.over)
        cs_err_set(err, 0, "history archive state response exceeds %d bytes limit", CS_ARCHIVE_MAX_HAS);
    else
        err->kind = 0; /* callers only tell CS_ERR_CANCELLED apart */
out:
    if (m) {
        curl_multi_remove_handle(m, h);
        curl_multi_cleanup(m);
    }
    if (h)
        curl_easy_cleanup(h);
    free(f.body);
    free(url);
    return rc;
}

int cs_archive_root_has(const cs_archive_opts *o, cs_archive_has *has, cs_err *err)
{
    if (o->nurls == 0)
        return cs_err_set(err, 0, "No history archives provided");
    pthread_once(&g_curl_once, curl_init_once);
    if (g_curl_init != CURLE_OK)
        return cs_err_set(err, 0, "cannot initialise libcurl: %s", curl_easy_strerror(g_curl_init));
    /* NewArchivePool: a random current index; each try first moves to the next archive. */
    size_t curr = (size_t)((uint64_t)cs_mono_ns() / 1000 ^ (uint64_t)getpid()) % o->nurls;
    cs_err last = {0};
    int tries = o->tries > 0 ? o->tries : CS_ARCHIVE_TRIES;
    int64_t backoff = o->backoff_ns > 0 ? o->backoff_ns : CS_ARCHIVE_BACKOFF_NS;
    for (int try = 0; try < tries; try++) {
        if (try > 0 && cs_cancel_sleep_until(o->cancel, cs_mono_ns() + backoff) != 0)
            return cancelled(err);
        curr = (curr + 1) % o->nurls;
        if (fetch_has(o->urls[curr], o, has, &last) == 0)
            return 0;
        if (last.kind == CS_ERR_CANCELLED)
            break;
        CS_LOG(CS_LOG_WARN, "Encountered an error with archive", KV_S("archive", o->urls[curr]),
               KV_S("error", last.msg), KV_S("subservice", "stellar-core"));
    }
    if (err)
        *err = last;
    return -1;
}
