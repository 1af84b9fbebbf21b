/* SPDX-License-Identifier: Apache-2.0 */
/* The lake's readers (cs-lake): the objects /lake/ requests ask for, made off the I/O threads. The
 * judge (routes.c) admits a request and hands it over as a job; a reader builds the object from
 * the ring (lakeobject.h), formats the answer and gives it back to the head reader, which writes
 * it. See server_internal.h for the calls and their threads. */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <xxhash.h>

#include "common/invariant.h"
#include "common/log.h"
#include "common/strbuf.h"
#include "common/thread.h"
#include "corestreamd/lake/lakeconfig.h"
#include "corestreamd/lake/lakeobject.h"
#include "corestreamd/net/httpanswer.h"
#include "corestreamd/server/server_internal.h"

/* A batch's bytes never change, whichever reader asks: caches may keep an object for a year. */
#define OBJECT_CACHE "max-age=31536000, immutable"

struct srv_lake_job {
    cs_head_pending *pending; /* set by srv_lake_later */
    cs_lake_batch batch;
    bool sig;  /* the batch's signature object */
    bool head; /* HEAD: the headers only */
    bool keep; /* the connection reads its next request after the answer */
    srv_lake_job *next;
};

struct srv_lake {
    cs_ring *ring;
    cs_headreader *heads;
    cs_lake_layout layout;
    char *config_json;   /* /lake/config.json */
    char *manifest_json; /* /lake/ledgers/.config.json */
    int64_t started;     /* Unix seconds: the texts' Last-Modified */
    uint32_t cap;        /* jobs admitted at once: queued and being made */
    atomic_uint admitted;
    pthread_mutex_t mu; /* the queue and stop */
    pthread_cond_t cv;
    srv_lake_job *first, *last;
    bool stop;
    pthread_t threads[CS_LAKE_READERS_MAX];
    int nthreads;
    struct {
        atomic_uint_fast64_t objects, bytes, not_found, busy, failed;
    } counts;
};

/* The answer to one job, on a reader. */
static char *make_answer(srv_lake *l, const srv_lake_job *j, size_t *len)
{
    uint8_t *obj = NULL;
    size_t n = 0;
    int64_t modified = 0;
    cs_err err = {0};
    cs_strbuf out = CS_STRBUF_INIT;
    unsigned extra = (j->head ? CS_ANS_NO_BODY : 0) | (j->keep ? 0 : CS_ANS_CLOSE);
    int rc = j->sig ? cs_lake_sig_build(l->ring, j->batch, &obj, &n, &err)
                    : cs_lake_object_build(l->ring, j->batch, CS_LAKE_LEVEL, &obj, &n, &modified, &err);
    if (rc == 0) {
        char etag[24];
        snprintf(etag, sizeof etag, "\"%016" PRIx64 "\"", (uint64_t)XXH3_64bits(obj, n));
        cs_http_meta m = {.etag = etag, .last_modified = modified, .cache = OBJECT_CACHE};
        cs_http_answer_bytes(&out, 200, j->sig ? "application/octet-stream" : CS_LAKE_OBJECT_TYPE, obj, n, &m, extra);
        free(obj);
        atomic_fetch_add(&l->counts.objects, 1);
        atomic_fetch_add(&l->counts.bytes, j->head ? 0 : n);
    } else if (err.kind == CS_LAKE_OBJ_ERR_NOT_AVAILABLE) {
        cs_http_answer_text(&out, 404, err.msg, extra);
        srv_lake_not_found(l);
    } else {
        CS_LOG(CS_LOG_WARN, "lake object could not be made; the request was answered 503", KV_U("start", j->batch.start),
               KV_U("end", j->batch.end), KV_S("error", err.msg));
        srv_lake_unavailable(&out, err.msg, extra);
        atomic_fetch_add(&l->counts.failed, 1);
    }
    return cs_strbuf_take(&out, len);
}

static srv_lake_job *next_job(srv_lake *l)
{
    pthread_mutex_lock(&l->mu);
    while (!l->first && !l->stop)
        pthread_cond_wait(&l->cv, &l->mu);
    srv_lake_job *j = l->first;
    if (j && !l->stop) {
        l->first = j->next;
        if (!l->first)
            l->last = NULL;
    } else {
        j = NULL; /* stopping: srv_lake_stop answers what is queued */
    }
    pthread_mutex_unlock(&l->mu);
    return j;
}

static void *reader_main(void *arg)
{
    srv_lake *l = arg;
    cs_thread_role("cs-lake", cs_thread_background_nice());
    for (srv_lake_job *j; (j = next_job(l)) != NULL;) {
        size_t len = 0;
        char *resp = make_answer(l, j, &len);
        cs_headreader_answer(l->heads, j->pending, resp, len, j->keep);
        free(j);
        atomic_fetch_sub(&l->admitted, 1);
    }
    return NULL;
}

void srv_lake_unavailable(cs_strbuf *out, const char *msg, unsigned extra)
{
    cs_strbuf body = CS_STRBUF_INIT;
    cs_strbuf_printf(&body, "%s\n", msg);
    size_t n;
    char *text = cs_strbuf_take(&body, &n);
    cs_http_meta m = {.retry_after = 1};
    cs_http_answer_bytes(out, 503, "text/plain; charset=utf-8", text ? text : "", text ? n : 0, &m, extra);
    free(text);
}

int srv_lake_start(srv_lake **out, const cs_server_config *cfg, cs_headreader *heads, cs_err *err)
{
    *out = NULL;
    srv_lake *l = calloc(1, sizeof *l);
    if (!l)
        return cs_err_set(err, 0, "lake: out of memory");
    l->ring = cfg->ring;
    l->heads = heads;
    l->layout = (cs_lake_layout){cfg->lake_ledgers_per_batch ? cfg->lake_ledgers_per_batch
                                                             : CS_LAKE_LEDGERS_PER_BATCH_DEFAULT,
                                 cfg->lake_batches_per_partition ? cfg->lake_batches_per_partition
                                                                 : CS_LAKE_BATCHES_PER_PARTITION_DEFAULT};
    int64_t readers = cfg->lake_readers ? cfg->lake_readers : CS_LAKE_READERS_DEFAULT;
    l->started = (int64_t)time(NULL);
    pthread_mutex_init(&l->mu, NULL);
    pthread_cond_init(&l->cv, NULL);
    *out = l; /* from here on srv_lake_stop and srv_lake_free undo what was done */
    if (readers < 1 || readers > CS_LAKE_READERS_MAX)
        return cs_err_set(err, 0, "lake: %lld readers is outside [1,%d]", (long long)readers, CS_LAKE_READERS_MAX);
    if (cs_lake_layout_check(&l->layout, err) != 0 ||
        !(l->config_json = cs_lake_config_json(cfg->lake_passphrase, &l->layout, err)) ||
        !(l->manifest_json = cs_lake_manifest_json(cfg->lake_passphrase, &l->layout, err)))
        return -1;
    l->cap = (uint32_t)readers * CS_LAKE_QUEUE_PER_READER;
    for (; l->nthreads < readers; l->nthreads++)
        if (pthread_create(&l->threads[l->nthreads], NULL, reader_main, l) != 0)
            return cs_err_set(err, 0, "lake: cannot start a reader thread");
    return 0;
}

const cs_lake_layout *srv_lake_layout(const srv_lake *l)
{
    return &l->layout;
}

void srv_lake_texts(const srv_lake *l, const char **config_json, const char **manifest_json, int64_t *modified)
{
    *config_json = l->config_json;
    *manifest_json = l->manifest_json;
    *modified = l->started;
}

/* The judge's and later's side of a /lake/ request runs on the head reader's thread; what it
 * touches here is atomics and the mutexed queue, so the check is the debug builds' alone. */
#define HEADS_THREAD "lake requests: admitted and queued on the head reader's thread (lakeserve.c)"

bool srv_lake_admit(srv_lake *l)
{
    CS_OWNED_DEBUG(cs_headreader_owner(l->heads), HEADS_THREAD);
    unsigned n = atomic_fetch_add(&l->admitted, 1);
    if (n < l->cap)
        return true;
    atomic_fetch_sub(&l->admitted, 1);
    atomic_fetch_add(&l->counts.busy, 1);
    return false;
}

srv_lake_job *srv_lake_job_new(srv_lake *l, cs_lake_batch b, bool sig, bool head, bool keep)
{
    CS_OWNED_DEBUG(cs_headreader_owner(l->heads), HEADS_THREAD);
    srv_lake_job *j = calloc(1, sizeof *j);
    if (!j) {
        atomic_fetch_sub(&l->admitted, 1);
        return NULL;
    }
    *j = (srv_lake_job){.batch = b, .sig = sig, .head = head, .keep = keep};
    return j;
}

void srv_lake_later(void *ctx, cs_head_pending *p, void *arg)
{
    cs_server *s = ctx;
    srv_lake *l = s->lake;
    srv_lake_job *j = arg;
    CS_OWNED_DEBUG(cs_headreader_owner(l->heads), HEADS_THREAD);
    j->pending = p;
    pthread_mutex_lock(&l->mu);
    bool stopped = l->stop;
    if (!stopped) {
        if (l->last)
            l->last->next = j;
        else
            l->first = j;
        l->last = j;
        pthread_cond_signal(&l->cv);
    }
    pthread_mutex_unlock(&l->mu);
    if (stopped) { /* the readers are gone: closed unanswered, as srv_lake_stop does */
        cs_headreader_answer(l->heads, p, NULL, 0, false);
        free(j);
        atomic_fetch_sub(&l->admitted, 1);
    }
}

void srv_lake_stop(srv_lake *l)
{
    if (!l)
        return;
    pthread_mutex_lock(&l->mu);
    l->stop = true;
    pthread_cond_broadcast(&l->cv);
    pthread_mutex_unlock(&l->mu);
    for (int i = 0; i < l->nthreads; i++)
        pthread_join(l->threads[i], NULL);
    l->nthreads = 0;
    /* What no reader took: closed without an answer, as the server is going away. */
    pthread_mutex_lock(&l->mu);
    srv_lake_job *queued = l->first;
    l->first = l->last = NULL;
    pthread_mutex_unlock(&l->mu);
    for (srv_lake_job *j = queued, *next; j; j = next) {
        next = j->next;
        cs_headreader_answer(l->heads, j->pending, NULL, 0, false);
        free(j);
        atomic_fetch_sub(&l->admitted, 1);
    }
}

void srv_lake_not_found(srv_lake *l)
{
    atomic_fetch_add(&l->counts.not_found, 1);
}

void srv_lake_count(srv_lake *l, cs_metrics_lake *out)
{
    out->in_progress = atomic_load(&l->admitted);
    out->objects = atomic_load(&l->counts.objects);
    out->bytes = atomic_load(&l->counts.bytes);
    out->not_found = atomic_load(&l->counts.not_found);
    out->busy = atomic_load(&l->counts.busy);
    out->failed = atomic_load(&l->counts.failed);
}

void srv_lake_free(srv_lake *l)
{
    if (!l)
        return;
    srv_lake_stop(l);
    pthread_cond_destroy(&l->cv);
    pthread_mutex_destroy(&l->mu);
    free(l->config_json);
    free(l->manifest_json);
    free(l);
}
