/* SPDX-License-Identifier: Apache-2.0 */
/* benchrunner: streaming through the pull API, one subscriber or many. See consume.h. */
#include "benchrunner/consume.h"

#include <errno.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "benchrunner/dumpverify.h"
#include "common/goquote.h"
#include "common/synthetic.h"

/* The poll loop's timeout: it bounds how late an idle timeout, a cancel or a resume's backoff
 * timer that could not be made is noticed; readiness itself wakes it at once. */
#define TICK_MS 100

/* ---- verification ------------------------------------------------------------------------------- */

/* The synthetic payload of the last sequence checked, shared by every subscriber: they receive
 * the same ledgers at about the same time, so each is regenerated once. With --verify-dir the
 * expected bytes are the dump's instead (dumpverify.h), read once per sequence likewise. */
typedef struct verifier {
    bool on;
    br_dump *dump;
    bool compressible;
    uint64_t size;
    uint8_t *expected;
    size_t cap;
    bool filled;
    uint32_t seq;
} verifier;

static int verify_ledger(verifier *v, const uint8_t *p, size_t len, uint32_t seq, cs_err *err)
{
    if (!v->on)
        return 0;
    if (v->dump)
        return br_dump_check(v->dump, seq, p, len, err);
    /* The length first: a short, long or empty ledger can match the regenerated prefix. */
    if ((uint64_t)len != v->size)
        return cs_err_set(err, 0, "ledger %u is %zu bytes, the synthetic source makes %llu (--synthetic-size)", seq,
                          len, (unsigned long long)v->size);
    if (len > v->cap) {
        uint8_t *grown = realloc(v->expected, len);
        if (!grown)
            return cs_err_set(err, 0, "out of memory verifying ledger %u", seq);
        v->expected = grown;
        v->cap = len;
        v->filled = false;
    }
    if (!v->filled || v->seq != seq) {
        /* Fill leaves a buffer shorter than 4 bytes alone: compare against a fresh, zeroed one. */
        if (len < 4)
            memset(v->expected, 0, len);
        cs_synthetic_fill(v->expected, len, seq, v->compressible);
        v->filled = true;
        v->seq = seq;
    }
    if (len > 0 && memcmp(p, v->expected, len) != 0)
        return cs_err_set(err, 0, "ledger %u payload does not match the synthetic source", seq);
    return 0;
}

/* ---- options ------------------------------------------------------------------------------------- */

/* The remote flags' TLS and token settings, into opts; the token (br_bearer_token) read into
 * token[len]. Returns 0, or -1 with err. */
static int remote_options(const br_options *o, rl_options *opts, char *token, size_t len, cs_err *err)
{
    if (*o->tls_ca) {
        struct stat st;
        if (stat(o->tls_ca, &st) == 0 && S_ISDIR(st.st_mode))
            opts->tls_ca_dir = o->tls_ca;
        else
            opts->tls_ca_file = o->tls_ca; /* a missing file is the library's error to word */
    }
    opts->tls_server_name = o->tls_server_name;
    opts->tls_cert_file = o->tls_cert;
    opts->tls_key_file = o->tls_key;
    opts->trusted_keys_file = o->trusted_keys;
    opts->bearer_token = token;
    return br_bearer_token(o, token, len, err);
}

/* ---- one subscriber's session ---------------------------------------------------------------------- */

typedef struct session {
    size_t index; /* 0-based */
    br_subscriber *sub;
    rl_stream *s;
    bool over;
} session;

/* Records the ledger next just returned and verifies it. 0, or -1 with the subscriber failed (its
 * session is then to be closed). */
static int take(verifier *v, session *x, const uint8_t *p, size_t n,
                const rl_ledger_info *info)
{
    int64_t now = br_mono_ns();
    br_sample smp = {
        .seq = info->sequence,
        .bytes = info->size,
        .chunks = info->chunks,
        .discarded = info->discarded_partials,
        .reconnects = rl_stream_reconnects(x->s),
    };
    smp.has_delivery = rl_info_delivery(info, &smp.delivery);
    smp.has_pipeline = rl_info_pipeline(info, &smp.pipeline);
    smp.has_emit = rl_info_emit_window(info, &smp.emit);
    br_subscriber *b = x->sub;
    if (br_collector_add(b->c, now, &smp) != 0) {
        cs_err_set(&b->err, 0, "out of memory recording ledger %u", info->sequence);
        b->failed = true;
        return -1;
    }
    if (verify_ledger(v, p, n, info->sequence, &b->err) != 0) {
        b->failed = true;
        return -1;
    }
    return 0;
}

/* The session ended with r (anything but RL_OK and RL_AGAIN). */
static void finish(const br_consume_spec *spec, session *x, rl_result r)
{
    br_subscriber *b = x->sub;
    x->over = true;
    br_collector_set_reconnects(b->c, rl_stream_reconnects(x->s));
    if (b->failed) { /* a verification failure: the ledgers were fine, the bytes were not */
        rl_stream_close(x->s);
        return;
    }
    if (r == RL_END)
        r = RL_OK;
    if (r == RL_ERR_CANCELLED && !spec->range.bounded && spec->interrupted && spec->interrupted())
        r = RL_OK; /* Ctrl-C is how an unbounded run ends */
    b->r = r;
    if (r != RL_OK) {
        const char *msg = rl_stream_error(x->s);
        cs_err_set(&b->err, 0, "%s", *msg ? msg : rl_result_name(r));
        b->failed = true;
    }
    rl_stream_close(x->s);
}

/* The subscriber failed before its session was open (r from rl_stream_new or rl_stream_open). */
static void open_failed(const br_consume_spec *spec, session *x, rl_result r)
{
    br_subscriber *b = x->sub;
    x->over = true;
    if (r == RL_ERR_CANCELLED && !spec->range.bounded && spec->interrupted && spec->interrupted())
        return; /* interrupted before it began: an unbounded run that stopped cleanly */
    b->r = r;
    b->failed = true;
    const char *msg = x->s ? rl_stream_error(x->s) : "";
    cs_err_set(&b->err, 0, "%s", *msg ? msg : rl_result_name(r));
}

/* ---- the runs ----------------------------------------------------------------------------------- */

/* The ledger x just recorded, to the progress line. */
static void noted(const br_consume_spec *spec, const session *x)
{
    const br_collector *c = x->sub->c;
    if (spec->progress)
        spec->progress(x->index, br_collector_sample(c, br_collector_len(c) - 1), spec->progress_ctx);
}

/* One subscriber: next(-1) until the end. */
static void run_one(const br_consume_spec *spec, verifier *v, session *x)
{
    for (;;) {
        const uint8_t *p;
        size_t n;
        rl_ledger_info info;
        rl_result r = rl_stream_next(x->s, -1, &p, &n, &info);
        if (r != RL_OK) {
            finish(spec, x, r);
            return;
        }
        if (take(v, x, p, n, &info) != 0) {
            finish(spec, x, RL_OK);
            return;
        }
        noted(spec, x);
    }
}

/* Many subscribers on this thread. Each pass over the sessions due (readable, or all of them
 * when the poll timed out or at the start) takes at most one ledger from each, starting one
 * further along every round, and goes on until every one of them has answered RL_AGAIN: the
 * contract for polling again. */
static void run_many(const br_consume_spec *spec, verifier *v, session *xs, size_t k)
{
    struct pollfd *pf = calloc(k, sizeof *pf);
    size_t *at = calloc(k, sizeof *at); /* pf[i] is session at[i] */
    bool *due = calloc(k, sizeof *due);
    if (!pf || !at || !due) {
        for (size_t i = 0; i < k; i++)
            if (!xs[i].over) {
                cs_err_set(&xs[i].sub->err, 0, "out of memory");
                xs[i].sub->failed = true;
                xs[i].over = true;
                rl_stream_close(xs[i].s);
            }
        free(pf), free(at), free(due);
        return;
    }
    for (size_t i = 0; i < k; i++)
        due[i] = !xs[i].over; /* bytes may have come with the upgrade response */
    size_t first = 0;
    for (;;) {
        bool more = true;
        while (more) {
            more = false;
            for (size_t j = 0; j < k; j++) {
                size_t i = (first + j) % k;
                session *x = &xs[i];
                if (!due[i] || x->over)
                    continue;
                const uint8_t *p;
                size_t n;
                rl_ledger_info info;
                rl_result r = rl_stream_next(x->s, 0, &p, &n, &info);
                if (r == RL_AGAIN) {
                    due[i] = false;
                    continue;
                }
                if (r != RL_OK || take(v, x, p, n, &info) != 0) {
                    finish(spec, x, r);
                    continue;
                }
                noted(spec, x);
                more = true;
            }
        }
        first = (first + 1) % k;
        nfds_t m = 0;
        for (size_t i = 0; i < k; i++) {
            if (xs[i].over)
                continue;
            int fd = rl_stream_fd(xs[i].s); /* read again: a reconnect changes it */
            if (fd < 0) {
                due[i] = true; /* no timer for the backoff: the tick brings it back */
                continue;
            }
            pf[m] = (struct pollfd){.fd = fd, .events = POLLIN};
            at[m++] = i;
        }
        bool any_open = false;
        for (size_t i = 0; i < k; i++)
            any_open |= !xs[i].over;
        if (!any_open)
            break;
        int ready = poll(pf, m, TICK_MS);
        if (ready < 0 && errno != EINTR)
            ready = 0;
        if (ready <= 0) {
            /* a quiet tick: ask everyone, so idle timeouts and cancels are seen */
            for (size_t i = 0; i < k; i++)
                due[i] = !xs[i].over;
            continue;
        }
        for (nfds_t j = 0; j < m; j++)
            if (pf[j].revents)
                due[at[j]] = true;
    }
    free(pf), free(at), free(due);
}

int br_consume(const br_consume_spec *spec, br_subscriber **out, cs_err *err)
{
    size_t k = spec->subscribers;
    *out = NULL;
    br_subscriber *subs = calloc(k, sizeof *subs);
    session *xs = calloc(k, sizeof *xs);
    rl_stream **streams = calloc(k, sizeof *streams);
    if (!subs || !xs || !streams) {
        free(subs), free(xs), free(streams);
        return cs_err_set(err, 0, "out of memory");
    }
    for (size_t i = 0; i < k; i++) {
        char label[512];
        if (k == 1)
            snprintf(label, sizeof label, "%s", spec->label);
        else
            snprintf(label, sizeof label, "%s, subscriber %zu", spec->label, i + 1);
        subs[i].c = br_collector_new(label);
        if (!subs[i].c) {
            br_consume_free(subs, k);
            free(xs), free(streams);
            return cs_err_set(err, 0, "out of memory");
        }
        br_collector_set_resume(subs[i].c, spec->resume);
        xs[i].sub = &subs[i];
        xs[i].index = i;
    }
    *out = subs;

    rl_options opts;
    rl_options_init(&opts);
    char token[4096];
    int rc = 0;
    if (spec->remote && remote_options(spec->remote, &opts, token, sizeof token, err) != 0) {
        for (size_t i = 0; i < k; i++)
            subs[i].r = RL_ERR_INVALID, subs[i].failed = true, subs[i].err = *err;
        free(xs), free(streams);
        return -1;
    }
    if (spec->resume)
        opts.resume_retries = spec->resume_retries;
    opts.busy_poll_ns = spec->busy_poll_us * 1000;
    verifier v = {.on = spec->verify, .compressible = spec->compressible, .size = spec->size};
    if (spec->verify_dir && *spec->verify_dir && br_dump_open(&v.dump, spec->verify_dir, err) != 0) {
        for (size_t i = 0; i < k; i++) /* before any dial, as a bad token file */
            subs[i].r = RL_ERR_INVALID, subs[i].failed = true, subs[i].err = *err;
        free(xs), free(streams);
        return -1;
    }

    /* Every stream exists (and a signal can cancel it) before the first dial, and every session
     * is open (subscribed) before any is read, so they all see the same ledgers. */
    for (size_t i = 0; i < k; i++) {
        rl_result r = rl_stream_new(&xs[i].s, spec->url, &opts);
        if (r != RL_OK)
            open_failed(spec, &xs[i], r);
        streams[i] = xs[i].s;
    }
    if (spec->publish)
        spec->publish(streams, k);
    for (size_t i = 0; i < k; i++) {
        rl_result r = xs[i].over ? RL_OK : rl_stream_open(xs[i].s, spec->range);
        if (r != RL_OK)
            open_failed(spec, &xs[i], r);
    }
    if (k == 1) {
        if (!xs[0].over)
            run_one(spec, &v, &xs[0]);
    } else {
        run_many(spec, &v, xs, k);
    }
    if (spec->publish)
        spec->publish(NULL, 0);

    size_t failed = 0, first_failed = 0;
    for (size_t i = 0; i < k; i++) {
        if (subs[i].failed && failed++ == 0)
            first_failed = i;
        rl_stream_free(xs[i].s);
    }
    if (failed == 1 && k == 1)
        rc = cs_err_set(err, 0, "%s", subs[0].err.msg);
    else if (failed)
        rc = cs_err_set(err, 0, "subscriber %zu: %s (%zu of %zu subscribers failed)", first_failed + 1,
                        subs[first_failed].err.msg, failed, k);
    free(v.expected);
    br_dump_free(v.dump);
    free(xs);
    free(streams);
    return rc;
}

void br_consume_free(br_subscriber *subs, size_t n)
{
    if (!subs)
        return;
    for (size_t i = 0; i < n; i++)
        br_collector_free(subs[i].c);
    free(subs);
}

void br_subscriber_csv_path(const char *path, size_t i, char *buf, size_t len)
{
    size_t n = strlen(path);
    if (n >= 4 && strcmp(path + n - 4, ".csv") == 0)
        snprintf(buf, len, "%.*s-%03zu.csv", (int)(n - 4), path, i + 1);
    else
        snprintf(buf, len, "%s-%03zu", path, i + 1);
}
