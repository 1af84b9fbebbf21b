/* SPDX-License-Identifier: Apache-2.0 */
/* The edge source's connection to NATS and its JetStream API lookups (jetstream_internal.h):
 * connecting, noticing disconnections and the close, the run to follow, the last message of a
 * subject, and waiting while JetStream cannot answer. */
#include "corestreamd/sources/jetstream_internal.h"

#include <stdio.h>
#include <string.h>
#include <time.h>

#include "common/log.h"
#include "corestreamd/jetstream/connect.h"
#include "corestreamd/jetstream/library.h"

const char *cs_jss_nats_detail(natsStatus s)
{
    const char *last = nats_GetLastError(NULL);
    return last && *last ? last : natsStatus_GetText(s);
}

/* Whether a JetStream API call failed because JetStream cannot answer yet (a cluster electing a
 * leader, a quorum lost: code 10008 or no reply within API_WAIT_MS) rather than because of what
 * was asked: such a call is made again. */
static bool js_unavailable(natsStatus st, jsErrCode jerr)
{
    return st != NATS_OK && (jerr == JSClusterNotAvailErr || st == NATS_TIMEOUT);
}

/* Before a retry of a call js_unavailable refused: logs WARN once per wait and sleeps RETRY_NS.
 * -1 with err (CS_ERR_CANCELLED) when cancelled. */
static int await_jetstream(js_source *s, bool *warned, const char *what, natsStatus st, jsErrCode jerr, cs_err *err)
{
    if (!*warned)
        CS_LOG(CS_LOG_WARN, "jetstream source waiting for JetStream to answer", KV_S("stream", s->stream),
               KV_S("call", what), KV_S("error", cs_jss_nats_detail(st)), KV_I("code", (int)jerr));
    *warned = true;
    cs_cancel_sleep_until(s->cancel, cs_mono_ns() + RETRY_NS);
    if (cs_cancel_is_set(s->cancel))
        return cs_err_set(err, CS_ERR_CANCELLED, "cancelled while waiting for JetStream to answer");
    return 0;
}

int cs_jss_last_msg(js_source *s, const char *subj, const char *what, natsMsg **m, cs_err *err)
{
    *m = NULL;
    bool warned = false;
    for (;;) {
        jsErrCode jerr = 0;
        natsStatus st = js_GetLastMsg(m, s->js, s->stream, subj, NULL, &jerr);
        if (st == NATS_OK)
            return 0;
        *m = NULL;
        if (st == NATS_NOT_FOUND || jerr == JSNoMessageFoundErr)
            return 0;
        if (!what || !js_unavailable(st, jerr))
            return cs_err_set(err, 0, "jetstream source: read the last message of %s: %s (code %d)", subj,
                              cs_jss_nats_detail(st), (int)jerr);
        if (await_jetstream(s, &warned, what, st, jerr, err) != 0)
            return -1;
    }
}

static void on_disconnected(natsConnection *nc, void *arg)
{
    (void)nc;
    js_source *s = arg;
    atomic_fetch_add(&s->disconnects, 1);
}

static void on_closed(natsConnection *nc, void *arg)
{
    (void)nc;
    js_source *s = arg;
    pthread_mutex_lock(&s->mu);
    s->closed = true;
    pthread_cond_broadcast(&s->cv);
    pthread_mutex_unlock(&s->mu);
}

/* Closes the connection and waits (at most 5 s) for its last callback, which nats.c runs on its
 * own thread after Close has returned. */
void cs_jss_close_connection(js_source *s)
{
    natsConnection_Close(s->nc);
    struct timespec until;
    clock_gettime(CLOCK_REALTIME, &until);
    until.tv_sec += 5;
    pthread_mutex_lock(&s->mu);
    while (!s->closed)
        if (pthread_cond_timedwait(&s->cv, &s->mu, &until) != 0)
            break;
    pthread_mutex_unlock(&s->mu);
}

/* The run of the stream's newest message, from its subject. */
int cs_jss_newest_run(js_source *s, cs_err *err)
{
    char all[CS_JS_SUBJECT_MAX];
    cs_js_stream_subjects(all, sizeof all, s->stream);
    natsMsg *m;
    if (cs_jss_last_msg(s, all, "newest message", &m, err) != 0)
        return -1;
    if (!m)
        return cs_err_set(err, 0,
                          "jetstream source: stream %s holds no message; start the core's publisher first, or "
                          "name --jetstream-run",
                          s->stream);
    const char *subj = natsMsg_GetSubject(m);
    size_t ls = strlen(s->stream);
    const char *r = subj + ls + 1, *dot = strncmp(subj, s->stream, ls) == 0 && subj[ls] == '.' ? strchr(r, '.') : NULL;
    int rc = 0;
    if (!dot || dot == r || (size_t)(dot - r) >= sizeof s->run)
        rc = cs_err_set(err, 0, "jetstream source: the newest message's subject \"%.200s\" is not %s.<run>.<seq>", subj,
                        s->stream);
    else
        snprintf(s->run, sizeof s->run, "%.*s", (int)(dot - r), r);
    natsMsg_Destroy(m);
    return rc;
}

int cs_jss_connect(js_source *s, int64_t timeout_ms, const cs_js_auth *auth, cs_err *err)
{
    natsStatus st = cs_js_library_open();
    if (st != NATS_OK)
        return cs_err_set(err, 0, "jetstream source: open nats.c: %s", natsStatus_GetText(st));
    cs_js_conn_config cc = {.urls = s->url, .name = "corestreamd-edge", .timeout_ms = timeout_ms, .auth = auth};
    if (cs_js_options_new(&s->opts, &cc, err) != 0)
        return -1;
    st = natsOptions_SetMaxReconnect(s->opts, -1);
    if (st == NATS_OK)
        st = natsOptions_SetReconnectWait(s->opts, 250);
    /* A dead server is noticed within about 4 s even when no fetch is waiting on it. */
    if (st == NATS_OK)
        st = natsOptions_SetPingInterval(s->opts, 2000);
    if (st == NATS_OK)
        st = natsOptions_SetMaxPingsOut(s->opts, 2);
    if (st == NATS_OK)
        st = natsOptions_SetIOBufSize(s->opts, 1 << 20);
    if (st == NATS_OK)
        st = natsOptions_SetDisconnectedCB(s->opts, on_disconnected, s);
    if (st == NATS_OK)
        st = natsOptions_SetClosedCB(s->opts, on_closed, s);
    if (st == NATS_OK)
        st = natsConnection_Connect(&s->nc, s->opts);
    if (st != NATS_OK) {
        char cause[CS_ERR_MSG_MAX / 2];
        return cs_err_set(err, 0, "jetstream source: connect to %s: %s", s->url,
                          cs_js_connect_cause(st, auth && cs_js_auth_tls(auth), cause, sizeof cause));
    }
    jsOptions jo;
    jsOptions_Init(&jo);
    jo.Wait = API_WAIT_MS;
    st = natsConnection_JetStream(&s->js, s->nc, &jo);
    if (st != NATS_OK)
        return cs_err_set(err, 0, "jetstream source: JetStream context on %s: %s", s->url, cs_jss_nats_detail(st));
    return 0;
}

