/* SPDX-License-Identifier: Apache-2.0 */
/* The lake exporter's thread: see lakeexport.h. */
#include "corestreamd/lake/lakeexport.h"

#include <errno.h>
#include <inttypes.h>
#include <limits.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/clock.h"
#include "common/log.h"
#include "common/thread.h"
#include "corestreamd/lake/lakeobject.h"

/* How long the thread sleeps on the ring's doorbell before it looks again anyway. */
#define IDLE_WAIT_NS (10 * 1000000000LL)

/* Where the look for signatures a previous run left out is (resume). */
typedef enum back_phase { BACK_DONE, BACK_LOOK, BACK_WRITE } back_phase;

struct cs_lake_export {
    cs_lake_export_config cfg;
    cs_lake_store *store;
    pthread_t thread;
    bool started, joined;
    atomic_bool stop;
    _Atomic int64_t drain_until; /* mono ns; 0: not draining */
    /* Stats: written by the thread, read by any. done_end: the last ledger passed (0: none). */
    atomic_uint_fast64_t objects, signatures, bytes, io_errors, conflicts, lost;
    _Atomic uint32_t done_end;
    /* The thread's own. */
    bool settled, looked;
    uint64_t next;      /* the first ledger of the next batch to export; 0: from the ring's oldest */
    bool obj_done;      /* the object of the batch at next is in place: its .sig comes next */
    back_phase back;    /* signatures a previous run left out (resume): see "signatures left out" */
    cs_lake_batch back_at, back_low, back_top;
    bool back_found;    /* back_low is set: the lowest batch found without its .sig */
    uint64_t back_written;
    bool failing;       /* a failure streak is on */
    uint64_t failures;  /* attempts failed in it */
    int64_t backoff_ns; /* the next wait after a failure */
};

/* What one step of the thread did. */
typedef enum step { STEP_PROGRESS, STEP_IDLE, STEP_RETRY, STEP_END } step;

/* ---- waiting ----------------------------------------------------------------------------- */

static bool stopping(cs_lake_export *x)
{
    if (atomic_load(&x->stop))
        return true;
    int64_t until = atomic_load(&x->drain_until);
    return until != 0 && cs_mono_ns() >= until;
}

/* Sleeps on the ring's doorbell until it rings (seen is what was read before looking), the stop,
 * or timeout_ns. */
static void wait_change(cs_lake_export *x, uint32_t seen, int64_t timeout_ns)
{
    int64_t until = atomic_load(&x->drain_until);
    if (until != 0 && until - cs_mono_ns() < timeout_ns)
        timeout_ns = until - cs_mono_ns();
    cs_ring_wait_change(x->cfg.ring, seen, timeout_ns);
}

/* The back-off after a failure: woken by puts, it sleeps on until its time is up or the stop. */
static void back_off(cs_lake_export *x)
{
    int64_t deadline = cs_mono_ns() + x->backoff_ns;
    for (;;) {
        uint32_t seen = cs_ring_changes(x->cfg.ring);
        int64_t left = deadline - cs_mono_ns();
        if (stopping(x) || left <= 0)
            break;
        wait_change(x, seen, left);
    }
    x->backoff_ns = x->backoff_ns * 2 < x->cfg.retry_max_ns ? x->backoff_ns * 2 : x->cfg.retry_max_ns;
}

/* ---- failures ---------------------------------------------------------------------------- */

static step failed(cs_lake_export *x, const cs_err *err)
{
    atomic_fetch_add(&x->io_errors, 1);
    x->failures++;
    if (!x->failing)
        CS_LOG(CS_LOG_WARN, "lake export failed; retrying", KV_S("error", err->msg), KV_D("retry_in", x->backoff_ns));
    x->failing = true;
    return STEP_RETRY;
}

static void succeeded(cs_lake_export *x)
{
    if (x->failing)
        CS_LOG(CS_LOG_INFO, "lake export recovered", KV_U("failures", x->failures));
    x->failing = false;
    x->failures = 0;
    x->backoff_ns = x->cfg.retry_min_ns;
}

/* ---- where the export goes next ---------------------------------------------------------- */

/* The first ledger of the first batch that starts at or after seq (a batch that starts before it
 * cannot be made whole); past the last batch, 2^32. */
static uint64_t first_whole_from(const cs_lake_layout *l, uint64_t seq)
{
    cs_lake_batch b;
    if (seq > UINT32_MAX || cs_lake_batch_of(l, (uint32_t)seq, &b, NULL) != 0)
        return (uint64_t)UINT32_MAX + 1;
    return b.start == seq ? seq : (uint64_t)b.end + 1;
}

/* Ledgers [next, to) are passed without an object: the ring does not have them. */
static void pass_over(cs_lake_export *x, uint64_t to)
{
    x->next = to;
    x->obj_done = false;
    if (to > 0)
        atomic_store(&x->done_end, (uint32_t)(to - 1));
}

/* The first look at the ring: where the export starts, and what it cannot have. -1 with err when
 * the store could not tell its newest object (retried). */
static int first_look(cs_lake_export *x, uint32_t oldest, uint32_t latest, cs_err *err)
{
    cs_lake_batch newest = {0, 0};
    int found = x->store->ops->newest(x->store, oldest, latest, &newest, err);
    if (found < 0)
        return -1;
    bool resumed = found == 1;
    x->next = resumed ? (uint64_t)newest.end + 1 : first_whole_from(&x->cfg.layout, oldest);
    if (resumed) {
        atomic_store(&x->done_end, newest.end);
        x->back = BACK_LOOK;
        x->back_at = x->back_top = newest;
    }
    CS_LOG(CS_LOG_INFO, "lake export starts", KV_S(x->store->ops->kind, x->store->ops->name(x->store)),
           KV_U("next", x->next),
           KV_U("newest", resumed ? newest.end : 0), KV_U("ring_oldest", oldest), KV_U("ring_latest", latest));
    if (x->next < oldest) {
        uint64_t to = first_whole_from(&x->cfg.layout, oldest);
        CS_LOG(CS_LOG_INFO, "lake export: ledgers before the ring's oldest are skipped; this ring cannot give them to the lake",
               KV_U("first", x->next), KV_U("last", to - 1));
        pass_over(x, to);
    }
    x->looked = true;
    return 0;
}

/* Ledgers the ring pruned (or reset away) before their batch's turn. */
static void note_pruned(cs_lake_export *x, uint32_t oldest)
{
    uint64_t to = first_whole_from(&x->cfg.layout, oldest);
    CS_LOG(CS_LOG_WARN, "lake export fell behind: the ring pruned these ledgers before they were exported; they are lost to the lake",
           KV_U("first", x->next), KV_U("last", to - 1));
    atomic_fetch_add(&x->lost, to - x->next);
    pass_over(x, to);
}

/* ---- one batch --------------------------------------------------------------------------- */

/* A batch the ring will not give whole although its bounds hold it (a hole, a ledger proven bad):
 * lost. One the bounds no longer hold is looked at again by the next step. */
static step not_available(cs_lake_export *x, cs_lake_batch b, const cs_err *err)
{
    uint32_t oldest, latest;
    if (!cs_ring_bounds(x->cfg.ring, &oldest, &latest) || b.start < oldest || b.end > latest)
        return STEP_PROGRESS;
    CS_LOG(CS_LOG_WARN, "lake export: a batch is not wholly in the ring; it is lost to the lake", KV_U("first", b.start),
           KV_U("last", b.end), KV_S("error", err->msg));
    atomic_fetch_add(&x->lost, (uint64_t)b.end - b.start + 1);
    pass_over(x, (uint64_t)b.end + 1);
    return STEP_PROGRESS;
}

/* What a put found at batch b's key (suffix "" for its object, CS_LAKE_SIG_SUFFIX for its
 * signatures), counted and logged. */
static void note_put(cs_lake_export *x, cs_lake_batch b, const char *suffix, size_t len, cs_lake_put_outcome outcome,
                     const char *why)
{
    char path[PATH_MAX + CS_LAKE_KEY_MAX], key[CS_LAKE_KEY_MAX + sizeof CS_LAKE_SIG_SUFFIX];
    x->store->ops->object_name(x->store, b, path, sizeof path - sizeof CS_LAKE_SIG_SUFFIX);
    strcat(path, suffix);
    if (outcome == CS_LAKE_PUT_WRITTEN) {
        atomic_fetch_add(*suffix ? &x->signatures : &x->objects, 1);
        atomic_fetch_add(&x->bytes, len);
    } else if (outcome == CS_LAKE_PUT_SAME) {
        CS_LOG(CS_LOG_DEBUG, "lake export: the object in place is the ring's batch already", KV_S("path", path));
    } else {
        cs_lake_key(&x->cfg.layout, b, key);
        strcat(key, suffix);
        atomic_fetch_add(&x->conflicts, 1);
        CS_LOG(CS_LOG_ERROR, "lake export: an object in place differs from the ring's batch; it is kept",
               KV_S("key", key), KV_S("path", path), KV_S("problem", why));
    }
}

/* Batch b's signature object put at <key>.sig: 1 when the ring has none to give (a ledger of it
 * unsigned, or not in the ring), 0 put (noted), -1 with err. */
static int put_sig(cs_lake_export *x, cs_lake_batch b, cs_err *err)
{
    uint8_t *sig = NULL;
    size_t len = 0;
    if (cs_lake_sig_build(x->cfg.ring, b, &sig, &len, err) != 0)
        return err->kind == CS_LAKE_OBJ_ERR_NOT_AVAILABLE ? 1 : -1;
    cs_lake_put_outcome outcome;
    char why[256];
    int rc = x->store->ops->put_sig(x->store, b, sig, len, &outcome, why, sizeof why, err);
    free(sig);
    if (rc == 0)
        note_put(x, b, CS_LAKE_SIG_SUFFIX, len, outcome, why);
    return rc;
}

/* The object first, then its .sig (docs/LAKE.md "Signatures in an export"): the Go SDK learns
 * the objects' extension from the first name a listing gives that looks like a ledger file, which
 * is the newest batch's, and a <key>.sig looks like one; written after its object it sorts after
 * it. A stop or crash between the two leaves the newest object without its .sig, which the next
 * start's look gives it. The .sig follows whatever object is in place (another writer's too: a
 * reader holding the key then refuses that object); a batch the ring has no signatures for has
 * none. A failed .sig is retried without writing the object again. */
static step export_batch(cs_lake_export *x, cs_lake_batch b)
{
    cs_err err = {0};
    if (!x->obj_done) {
        uint8_t *obj = NULL;
        size_t len = 0;
        if (cs_lake_object_build(x->cfg.ring, b, x->cfg.level, &obj, &len, NULL, &err) != 0)
            return err.kind == CS_LAKE_OBJ_ERR_NOT_AVAILABLE ? not_available(x, b, &err) : failed(x, &err);
        cs_lake_put_outcome outcome;
        char why[256];
        int rc = x->store->ops->put(x->store, b, obj, len, &outcome, why, sizeof why, &err);
        free(obj);
        if (rc != 0)
            return failed(x, &err);
        note_put(x, b, "", len, outcome, why);
        x->obj_done = true;
    }
    if (put_sig(x, b, &err) < 0)
        return failed(x, &err);
    succeeded(x);
    pass_over(x, (uint64_t)b.end + 1);
    return STEP_PROGRESS;
}

/* ---- signatures left out ----------------------------------------------------------------- */

/* At resume, objects a previous run left without their .sig (a stop between an object and its
 * .sig, a corestreamd that wrote none, a .sig removed) are given theirs while the ring has them: from the newest object down, the look
 * goes on while a batch has no .sig and the ring has its signatures, then the .sig objects are
 * written from the lowest found up to the newest. Upwards, so that a stop half-way leaves the
 * newest still without, and the next resume looks again. New batches wait until it is done. */

static step back_done(cs_lake_export *x)
{
    if (x->back_written > 0)
        CS_LOG(CS_LOG_INFO, "lake export: signatures written beside objects that had none",
               KV_U("first", x->back_low.start), KV_U("last", x->back_top.end), KV_U("signatures", x->back_written));
    x->back = BACK_DONE;
    return STEP_PROGRESS;
}

/* The look ends: the .sig objects are written from the lowest batch found, if any. */
static step back_turn(cs_lake_export *x)
{
    if (!x->back_found)
        return back_done(x);
    x->back = BACK_WRITE;
    x->back_at = x->back_low;
    return STEP_PROGRESS;
}

static step back_look(cs_lake_export *x)
{
    cs_err err = {0};
    cs_lake_batch b = x->back_at;
    int has = x->store->ops->has_sig(x->store, b, &err);
    if (has < 0)
        return failed(x, &err);
    uint8_t *sig = NULL;
    size_t len;
    if (has == 1 || cs_lake_sig_build(x->cfg.ring, b, &sig, &len, &err) != 0) {
        if (has == 0 && err.kind != CS_LAKE_OBJ_ERR_NOT_AVAILABLE)
            return failed(x, &err);
        succeeded(x);
        return back_turn(x);
    }
    free(sig);
    succeeded(x);
    x->back_found = true;
    x->back_low = b;
    if (b.start == 0 || cs_lake_batch_of(&x->cfg.layout, b.start - 1, &x->back_at, NULL) != 0)
        return back_turn(x);
    return STEP_PROGRESS;
}

static step back_write(cs_lake_export *x)
{
    cs_err err = {0};
    cs_lake_batch b = x->back_at;
    uint64_t before = atomic_load(&x->signatures);
    if (put_sig(x, b, &err) < 0)
        return failed(x, &err);
    succeeded(x);
    x->back_written += atomic_load(&x->signatures) - before;
    if (b.start >= x->back_top.start || cs_lake_batch_of(&x->cfg.layout, b.end + 1, &x->back_at, NULL) != 0)
        return back_done(x);
    return STEP_PROGRESS;
}

/* One step: settle the store, look at the ring first, give objects a previous run left without
 * signatures theirs, or export the next batch when the ring holds it whole. */
static step one_step(cs_lake_export *x)
{
    cs_err err = {0};
    if (!x->settled) {
        if (x->store->ops->settle(x->store, &err) != 0)
            return failed(x, &err);
        succeeded(x);
        x->settled = true;
    }
    uint32_t oldest, latest;
    if (!cs_ring_bounds(x->cfg.ring, &oldest, &latest))
        return STEP_IDLE;
    if (!x->looked) {
        if (first_look(x, oldest, latest, &err) != 0)
            return failed(x, &err);
        succeeded(x);
        return STEP_PROGRESS;
    }
    if (x->back != BACK_DONE)
        return x->back == BACK_LOOK ? back_look(x) : back_write(x);
    if (x->next < oldest)
        note_pruned(x, oldest);
    cs_lake_batch b;
    if (x->next > UINT32_MAX || cs_lake_batch_of(&x->cfg.layout, (uint32_t)x->next, &b, NULL) != 0)
        return STEP_END; /* past the last batch a key can name */
    if (b.end > latest)
        return STEP_IDLE;
    return export_batch(x, b);
}

static void *export_main(void *arg)
{
    cs_lake_export *x = arg;
    cs_thread_role("cs-lake-export", cs_thread_background_nice());
    for (;;) {
        uint32_t seen = cs_ring_changes(x->cfg.ring); /* before looking: a change after it wakes the wait */
        if (stopping(x))
            break;
        step s = one_step(x);
        if (s == STEP_RETRY)
            back_off(x);
        else if (s != STEP_PROGRESS && atomic_load(&x->drain_until) != 0)
            break; /* drained: nothing more the ring holds whole */
        else if (s != STEP_PROGRESS)
            wait_change(x, seen, IDLE_WAIT_NS);
    }
    return NULL;
}

/* ---- life cycle -------------------------------------------------------------------------- */

int cs_lake_export_new(cs_lake_export **out, const cs_lake_export_config *cfg, cs_err *err)
{
    *out = NULL;
    cs_lake_export *x = calloc(1, sizeof *x);
    if (!x) {
        cs_lake_store_close(cfg->store);
        return cs_err_set(err, 0, "lake: out of memory");
    }
    x->cfg = *cfg;
    x->store = cfg->store;
    x->cfg.level = cfg->level ? cfg->level : CS_LAKE_EXPORT_LEVEL_DEFAULT;
    x->cfg.retry_min_ns = cfg->retry_min_ns > 0 ? cfg->retry_min_ns : CS_LAKE_EXPORT_RETRY_MIN_NS;
    x->cfg.retry_max_ns = cfg->retry_max_ns > 0 ? cfg->retry_max_ns : CS_LAKE_EXPORT_RETRY_MAX_NS;
    x->backoff_ns = x->cfg.retry_min_ns;
    cs_lake_batch newest;
    if (x->store->ops->newest_known && x->store->ops->newest_known(x->store, &newest))
        atomic_store(&x->done_end, newest.end);
    *out = x;
    return 0;
}

int cs_lake_export_start(cs_lake_export *x, cs_err *err)
{
    int e = pthread_create(&x->thread, NULL, export_main, x);
    if (e != 0)
        return cs_err_set(err, 0, "lake: cannot start the export thread: %s", strerror(e));
    x->started = true;
    return 0;
}

void cs_lake_export_stop(cs_lake_export *x, int64_t drain_ns)
{
    if (!x || !x->started || x->joined)
        return;
    if (drain_ns > 0)
        atomic_store(&x->drain_until, cs_mono_ns() + drain_ns);
    else
        atomic_store(&x->stop, true);
    cs_ring_wake(x->cfg.ring);
    pthread_join(x->thread, NULL);
    x->joined = true;
}

void cs_lake_export_stats_get(cs_lake_export *x, cs_lake_export_stats *out)
{
    uint32_t oldest, latest, done = atomic_load(&x->done_end);
    bool filled = cs_ring_bounds(x->cfg.ring, &oldest, &latest);
    *out = (cs_lake_export_stats){.objects = atomic_load(&x->objects),
                                  .signatures = atomic_load(&x->signatures),
                                  .bytes = atomic_load(&x->bytes),
                                  .io_errors = atomic_load(&x->io_errors),
                                  .conflicts = atomic_load(&x->conflicts),
                                  .lost = atomic_load(&x->lost),
                                  .lag = filled && latest > done ? latest - done : 0};
}

void cs_lake_export_free(cs_lake_export *x)
{
    if (!x)
        return;
    cs_lake_export_stop(x, 0);
    cs_lake_store_close(x->store);
    free(x);
}
