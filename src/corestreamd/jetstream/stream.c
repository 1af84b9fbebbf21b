/* SPDX-License-Identifier: Apache-2.0 */
#include "corestreamd/jetstream/stream.h"

#include <string.h>

#include "common/godur.h"
#include "common/log.h"
#include "corestream/wire.h"
#include "wire/wire.h"

uint64_t cs_js_max_message(size_t chunk_size)
{
    return (uint64_t)CS_WIRE_CHUNK_HEADER_LEN + chunk_size + CS_JS_HEADER_ROOM;
}

int cs_js_check_payload(int64_t max_payload, size_t chunk_size, const char *url, cs_err *err)
{
    uint64_t need = cs_js_max_message(chunk_size);
    if (max_payload > 0 && need <= (uint64_t)max_payload)
        return 0;
    int64_t fits = max_payload - CS_WIRE_CHUNK_HEADER_LEN - CS_JS_HEADER_ROOM;
    return cs_err_set(err, 0,
                      "--chunk-size %zu makes JetStream messages of up to %llu bytes (chunk, header and "
                      "Nats-Msg-Id), over the max_payload of %lld bytes that %s announces; use --chunk-size "
                      "%lld or less, or raise max_payload on the server",
                      chunk_size, (unsigned long long)need, (long long)max_payload, url,
                      (long long)(fits > 0 ? fits : 0));
}

static int js_fail(cs_err *err, const char *what, const char *name, natsStatus s, jsErrCode jerr)
{
    const char *last = nats_GetLastError(NULL);
    return cs_err_set(err, 0, "jetstream: %s %s: %s (%s, code %d)", what, name, natsStatus_GetText(s),
                      last && *last ? last : "no detail", (int)jerr);
}

static int mismatch(cs_err *err, const char *name, const char *field, const char *have, const char *flag,
                    const char *want)
{
    return cs_err_set(err, 0, "jetstream: stream %s has %s %s but --%s is %s; change one of them (nats stream edit %s)",
                      name, field, have, flag, want, name);
}

static void fmt_age(int64_t ns, char *buf, size_t len)
{
    if (ns == 0)
        snprintf(buf, len, "0 (no limit)");
    else
        cs_dur_format(ns, buf, len);
}

static int check_existing(const jsStreamConfig *have, const cs_js_stream_spec *spec, const char *subjects,
                          cs_err *err)
{
    bool covered = false;
    for (int i = 0; i < have->SubjectsLen; i++)
        covered = covered || strcmp(have->Subjects[i], subjects) == 0;
    if (!covered)
        return cs_err_set(err, 0,
                          "jetstream: stream %s exists but does not capture %s; corestreamd publishes there (add "
                          "the subject, or choose another --jetstream-stream)",
                          spec->name, subjects);
    char a[64], b[64];
    if (have->MaxAge != spec->max_age_ns) {
        fmt_age(have->MaxAge, a, sizeof a);
        fmt_age(spec->max_age_ns, b, sizeof b);
        return mismatch(err, spec->name, "max_age", a, "jetstream-max-age", b);
    }
    if (have->MaxBytes != spec->max_bytes) {
        snprintf(a, sizeof a, "%lld", (long long)have->MaxBytes);
        snprintf(b, sizeof b, "%lld", (long long)spec->max_bytes);
        return mismatch(err, spec->name, "max_bytes", a, "jetstream-max-bytes", b);
    }
    if (have->Replicas != spec->replicas) {
        snprintf(a, sizeof a, "%lld", (long long)have->Replicas);
        snprintf(b, sizeof b, "%lld", (long long)spec->replicas);
        return mismatch(err, spec->name, "replicas", a, "jetstream-replicas", b);
    }
    return 0;
}

int cs_js_stream_ensure(jsCtx *js, const cs_js_stream_spec *spec, bool *created, cs_err *err)
{
    char subjects[CS_JS_SUBJECT_MAX];
    cs_js_stream_subjects(subjects, sizeof subjects, spec->name);
    *created = false;
    jsStreamInfo *si = NULL;
    jsErrCode jerr = 0;
    natsStatus s = js_GetStreamInfo(&si, js, spec->name, NULL, &jerr);
    if (s == NATS_OK) {
        int rc = check_existing(si->Config, spec, subjects, err);
        jsStreamInfo_Destroy(si);
        return rc;
    }
    if (s != NATS_NOT_FOUND && jerr != JSStreamNotFoundErr)
        return js_fail(err, "look up stream", spec->name, s, jerr);

    jsStreamConfig cfg;
    jsStreamConfig_Init(&cfg);
    const char *subj[1] = {subjects};
    cfg.Name = spec->name;
    cfg.Description = "corestream ledger flows (BEGIN/CHUNK/END wire messages), one subject per ledger";
    cfg.Subjects = subj;
    cfg.SubjectsLen = 1;
    cfg.Retention = js_LimitsPolicy;
    cfg.Discard = js_DiscardOld;
    cfg.Storage = js_FileStorage;
    cfg.MaxAge = spec->max_age_ns;
    cfg.MaxBytes = spec->max_bytes;
    cfg.Replicas = spec->replicas;
    jerr = 0;
    s = js_AddStream(&si, js, &cfg, NULL, &jerr);
    if (s != NATS_OK)
        return js_fail(err, "create stream", spec->name, s, jerr);
    jsStreamInfo_Destroy(si);
    *created = true;
    return 0;
}

/* Whether m is a wire message of run whose ledger is its subject's: *next is the position after
 * it then. */
static bool run_message(natsMsg *m, const char *stream, const char *run, cs_js_pos *next)
{
    char prefix[CS_JS_SUBJECT_MAX];
    int n = snprintf(prefix, sizeof prefix, "%s.%s.", stream, run);
    const char *subj = natsMsg_GetSubject(m);
    if (n <= 0 || strncmp(subj, prefix, (size_t)n) != 0)
        return false;
    cs_wire_msg w;
    if (cs_wire_decode((const uint8_t *)natsMsg_GetData(m), (size_t)natsMsg_GetDataLength(m), &w, NULL) != 0)
        return false;
    char want[16];
    snprintf(want, sizeof want, "%u", w.seq);
    return strcmp(subj + n, want) == 0 &&
           cs_js_pos_after((const uint8_t *)natsMsg_GetData(m), (size_t)natsMsg_GetDataLength(m), next, NULL) == 0;
}

/* The run's last message m is not one of its wire messages (junk another publisher put there):
 * the stream's messages before it are looked at, newest first, for the run's last real one
 * (at most CS_JS_JUNK_LOOKBACK of them). 1 with *next after it, 0 when none is found. */
static int before_junk(jsCtx *js, const char *stream, const char *run, natsMsg *m, cs_js_pos *next)
{
    uint64_t seq = natsMsg_GetSequence(m);
    CS_LOG(CS_LOG_WARN, "jetstream stream's last message of the run is not a wire message; looking before it",
           KV_S("subject", natsMsg_GetSubject(m)), KV_U("stream_seq", seq), KV_S("stream", stream));
    for (uint64_t k = 1; k <= CS_JS_JUNK_LOOKBACK && k < seq; k++) {
        natsMsg *prev = NULL;
        if (js_GetMsg(&prev, js, stream, seq - k, NULL, NULL) != NATS_OK)
            continue; /* deleted, or not readable: older ones may be */
        bool ok = run_message(prev, stream, run, next);
        natsMsg_Destroy(prev);
        if (ok)
            return 1;
    }
    return 0;
}

int cs_js_stream_resume_pos(jsCtx *js, const char *stream, const char *run, bool *found, cs_js_pos *next,
                            cs_err *err)
{
    char filter[CS_JS_SUBJECT_MAX];
    cs_js_run_filter(filter, sizeof filter, stream, run);
    *found = false;
    natsMsg *m = NULL;
    jsErrCode jerr = 0;
    natsStatus s = js_GetLastMsg(&m, js, stream, filter, NULL, &jerr);
    if (s == NATS_NOT_FOUND || jerr == JSNoMessageFoundErr)
        return 0;
    if (s != NATS_OK) {
        char what[CS_JS_SUBJECT_MAX + 32];
        snprintf(what, sizeof what, "read the last message of %s in", filter);
        return js_fail(err, what, stream, s, jerr);
    }
    if (run_message(m, stream, run, next)) {
        natsMsg_Destroy(m);
        *found = true;
        return 0;
    }
    int got = before_junk(js, stream, run, m, next);
    int rc = 0;
    if (got)
        *found = true;
    else
        rc = cs_js_pos_after((const uint8_t *)natsMsg_GetData(m), (size_t)natsMsg_GetDataLength(m), next, err);
    natsMsg_Destroy(m);
    return rc;
}
