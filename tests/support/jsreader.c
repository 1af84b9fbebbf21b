/* SPDX-License-Identifier: Apache-2.0 */
#include "support/jsreader.h"

#include <nats/nats.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <xxhash.h>
#include <zstd.h>

#include "wire/wire.h"

#define CHUNK_DECODE_CAP (8u << 20)

static int64_t mono_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

typedef struct conn {
    natsConnection *nc;
    jsCtx *js;
} conn;

static int conn_open(conn *c, const char *url, char *err, size_t errlen)
{
    memset(c, 0, sizeof *c);
    natsOptions *o = NULL;
    natsStatus s = natsOptions_Create(&o);
    if (s == NATS_OK)
        s = natsOptions_SetURL(o, url);
    if (s == NATS_OK)
        s = natsOptions_SetTimeout(o, 5000);
    if (s == NATS_OK)
        s = natsOptions_SetAllowReconnect(o, false);
    if (s == NATS_OK)
        s = natsConnection_Connect(&c->nc, o);
    natsOptions_Destroy(o);
    if (s == NATS_OK)
        s = natsConnection_JetStream(&c->js, c->nc, NULL);
    if (s != NATS_OK) {
        if (err)
            snprintf(err, errlen, "connect %s: %s", url, natsStatus_GetText(s));
        natsConnection_Destroy(c->nc);
        c->nc = NULL;
        return -1;
    }
    return 0;
}

static void conn_close(conn *c)
{
    jsCtx_Destroy(c->js);
    natsConnection_Destroy(c->nc);
}

static void violate(cs_jsr *r, const char *fmt, uint32_t a, uint32_t b, uint32_t c)
{
    if (!r->violation[0])
        snprintf(r->violation, sizeof r->violation, fmt, a, b, c);
}

/* Checks and assembles the messages, in order. */
static void analyse(cs_jsr *r, const char *run)
{
    size_t cap = 0, have = 0, ncap = 0;
    uint8_t *buf = NULL;
    bool open = false;
    uint32_t seq = 0, next_idx = 0, zstd = 0, prev_seq = 0;
    bool sig = false;
    int64_t stamp = 0;
    XXH64_state_t *h = XXH64_createState();
    for (size_t i = 0; i < r->nmsgs && !r->violation[0]; i++) {
        cs_jsr_msg *m = &r->msgs[i];
        cs_wire_msg w;
        if (cs_wire_decode(m->data, m->len, &w, NULL) != 0) {
            violate(r, "message %u of the run does not decode%.0u%.0u", (uint32_t)i, 0, 0);
            break;
        }
        (void)run;
        if (w.type == CS_WIRE_TYPE_BEGIN) {
            if (open)
                violate(r, "BEGIN %u while ledger %u is open (after %u chunks)", w.seq, seq, next_idx);
            else if (prev_seq && w.seq != prev_seq + 1 && !r->violation[0])
                snprintf(r->violation, sizeof r->violation, "ledger %u follows ledger %u (%s)", w.seq, prev_seq,
                         w.seq <= prev_seq ? "duplicate" : "gap");
            open = true;
            seq = w.seq;
            next_idx = 0;
            zstd = 0;
            sig = false;
            have = 0;
            stamp = w.stamp;
            XXH64_reset(h, 0);
            continue;
        }
        if (!open || w.seq != seq) {
            /* A run that starts mid-ledger (a gap the publisher reported) is a violation too. */
            violate(r, "message for ledger %u outside an open flow (open ledger %u, item %u)", w.seq, seq, m->item);
            break;
        }
        if (w.type == CS_WIRE_TYPE_SIG) {
            if (sig)
                violate(r, "ledger %u: a second SIG%.0u%.0u", seq, 0, 0);
            sig = true;
            continue;
        }
        if (w.type == CS_WIRE_TYPE_CHUNK) {
            if (sig)
                violate(r, "ledger %u: chunk %u after its SIG%.0u", seq, w.chunk_idx, 0);
            if (w.chunk_idx != next_idx) {
                violate(r, "ledger %u: chunk %u where chunk %u was due", seq, w.chunk_idx, next_idx);
                break;
            }
            next_idx++;
            size_t room = w.codec == 1 ? CHUNK_DECODE_CAP : w.payload_len;
            if (have + room > cap) {
                cap = (have + room) * 2;
                buf = realloc(buf, cap);
            }
            size_t n = w.payload_len;
            if (w.codec == 1) {
                n = ZSTD_decompress(buf + have, room, w.payload, w.payload_len);
                if (ZSTD_isError(n)) {
                    violate(r, "ledger %u chunk %u: zstd frame does not decode%.0u", seq, w.chunk_idx, 0);
                    break;
                }
                zstd++;
            } else {
                memcpy(buf + have, w.payload, n);
            }
            XXH64_update(h, buf + have, n);
            have += n;
            continue;
        }
        /* END */
        if (w.chunk_count != next_idx || w.total_len != have || w.checksum != XXH64_digest(h)) {
            violate(r, "ledger %u: END does not verify (count %u, chunks seen %u)", seq, w.chunk_count, next_idx);
            break;
        }
        if (r->nledgers == ncap) {
            ncap = ncap ? ncap * 2 : 64;
            r->ledgers = realloc(r->ledgers, ncap * sizeof *r->ledgers);
        }
        cs_jsr_ledger *l = &r->ledgers[r->nledgers++];
        l->seq = seq;
        l->sig = sig;
        l->len = have;
        l->data = malloc(have ? have : 1);
        memcpy(l->data, buf, have);
        l->chunks = next_idx;
        l->zstd_chunks = zstd;
        l->emit_start = stamp;
        open = false;
        prev_seq = seq;
    }
    XXH64_freeState(h);
    free(buf);
}

int cs_jsr_read(const char *url, const char *stream, const char *run, cs_jsr *out, char *err, size_t errlen)
{
    memset(out, 0, sizeof *out);
    conn c;
    if (conn_open(&c, url, err, errlen) != 0)
        return -1;
    jsStreamInfo *si = NULL;
    jsErrCode jerr = 0;
    natsStatus s = js_GetStreamInfo(&si, c.js, stream, NULL, &jerr);
    if (s != NATS_OK) {
        snprintf(err, errlen, "stream info %s: %s (%d)", stream, natsStatus_GetText(s), (int)jerr);
        conn_close(&c);
        return -1;
    }
    uint64_t first = si->State.FirstSeq, last = si->State.LastSeq;
    jsStreamInfo_Destroy(si);
    char prefix[256];
    snprintf(prefix, sizeof prefix, "%s.%s.", stream, run);
    size_t cap = 0;
    int rc = 0;
    for (uint64_t q = first; q && q <= last; q++) {
        natsMsg *m = NULL;
        s = js_GetMsg(&m, c.js, stream, q, NULL, &jerr);
        if (s == NATS_NOT_FOUND)
            continue; /* deleted */
        if (s != NATS_OK) {
            snprintf(err, errlen, "get message %llu: %s", (unsigned long long)q, natsStatus_GetText(s));
            rc = -1;
            break;
        }
        if (strncmp(natsMsg_GetSubject(m), prefix, strlen(prefix)) != 0) {
            natsMsg_Destroy(m);
            continue;
        }
        if (out->nmsgs == cap) {
            cap = cap ? cap * 2 : 256;
            out->msgs = realloc(out->msgs, cap * sizeof *out->msgs);
        }
        cs_jsr_msg *jm = &out->msgs[out->nmsgs++];
        jm->len = (size_t)natsMsg_GetDataLength(m);
        jm->data = malloc(jm->len ? jm->len : 1);
        memcpy(jm->data, natsMsg_GetData(m), jm->len);
        const char *id = NULL;
        unsigned iseq = 0, iitem = 0;
        char want_run[128];
        if (natsMsgHeader_Get(m, "Nats-Msg-Id", &id) != NATS_OK || sscanf(id, "%127[^:]:%u:%u", want_run, &iseq, &iitem) != 3 ||
            strcmp(want_run, run) != 0)
            violate(out, "stream message %u has no Nats-Msg-Id of the run%.0u%.0u", (uint32_t)q, 0, 0);
        jm->seq = iseq;
        jm->item = iitem;
        natsMsg_Destroy(m);
    }
    conn_close(&c);
    if (rc == 0)
        analyse(out, run);
    /* The id must name the message: item 0 BEGIN, the chunks, a SIG, END last. */
    uint32_t chunks = 0;
    bool signed_ = false;
    for (size_t i = 0; rc == 0 && i < out->nmsgs && !out->violation[0]; i++) {
        cs_wire_msg w;
        if (cs_wire_decode(out->msgs[i].data, out->msgs[i].len, &w, NULL) != 0)
            continue;
        if (w.type == CS_WIRE_TYPE_BEGIN)
            chunks = 0, signed_ = false;
        chunks += w.type == CS_WIRE_TYPE_CHUNK;
        signed_ |= w.type == CS_WIRE_TYPE_SIG;
        uint32_t item = w.type == CS_WIRE_TYPE_BEGIN   ? 0
                        : w.type == CS_WIRE_TYPE_CHUNK ? w.chunk_idx + 1
                        : w.type == CS_WIRE_TYPE_SIG   ? chunks + 1
                                                       : w.chunk_count + 1 + signed_;
        if (w.seq != out->msgs[i].seq || item != out->msgs[i].item)
            violate(out, "ledger %u item %u carries the Nats-Msg-Id of item %u", w.seq, item, out->msgs[i].item);
    }
    return rc;
}

const cs_jsr_msg *cs_jsr_find(const cs_jsr *r, uint32_t seq, uint32_t item)
{
    for (size_t i = 0; i < r->nmsgs; i++)
        if (r->msgs[i].seq == seq && r->msgs[i].item == item)
            return &r->msgs[i];
    return NULL;
}

void cs_jsr_free(cs_jsr *r)
{
    for (size_t i = 0; i < r->nmsgs; i++)
        free(r->msgs[i].data);
    for (size_t i = 0; i < r->nledgers; i++)
        free(r->ledgers[i].data);
    free(r->msgs);
    free(r->ledgers);
    memset(r, 0, sizeof *r);
}

static bool is_end(natsMsg *m)
{
    return natsMsg_GetDataLength(m) >= 2 && (uint8_t)natsMsg_GetData(m)[1] == CS_WIRE_TYPE_END;
}

int cs_jsr_wait_ledger(const char *url, const char *stream, const char *run, uint32_t seq, int timeout_ms)
{
    int64_t deadline = mono_ms() + timeout_ms;
    char subj[256];
    snprintf(subj, sizeof subj, "%s.%s.%u", stream, run, seq);
    conn c;
    if (conn_open(&c, url, NULL, 0) != 0)
        return -1;
    natsSubscription *sub = NULL;
    int rc = -1;
    bool seen_end = false;
    if (natsConnection_SubscribeSync(&sub, c.nc, subj) == NATS_OK && natsConnection_Flush(c.nc) == NATS_OK) {
        while (mono_ms() < deadline) {
            /* The stream is the truth; the subscription only tells when to look again. */
            natsMsg *last = NULL;
            jsErrCode jerr = 0;
            natsStatus st = js_GetLastMsg(&last, c.js, stream, subj, NULL, &jerr);
            if (st == NATS_OK) {
                bool done = is_end(last);
                natsMsg_Destroy(last);
                if (done) {
                    rc = 0;
                    break;
                }
            }
            /* A stream that did not answer (no leader yet, after a cluster lost its quorum) may
             * have stored the END before the subscription began: look again soon, as once the
             * END went by (the stream stores it within moments). Only "not there yet" leaves the
             * subscription to tell when. */
            bool answered = st == NATS_OK || st == NATS_NOT_FOUND || jerr == JSNoMessageFoundErr;
            int64_t left = deadline - mono_ms();
            natsMsg *m = NULL;
            int64_t wait = seen_end ? 20 : !answered ? 250 : (left > 0 ? left : 1);
            if (natsSubscription_NextMsg(&m, sub, wait) == NATS_OK) {
                seen_end = seen_end || is_end(m);
                natsMsg_Destroy(m);
            }
        }
    }
    natsSubscription_Destroy(sub);
    conn_close(&c);
    return rc;
}

int cs_jsr_wait_unavailable(const char *url, const char *stream, int timeout_ms)
{
    int64_t deadline = mono_ms() + timeout_ms;
    char all[256];
    snprintf(all, sizeof all, "%s.>", stream);
    conn c;
    if (conn_open(&c, url, NULL, 0) != 0)
        return -1;
    int rc = -1;
    while (rc != 0 && mono_ms() < deadline) {
        natsMsg *m = NULL;
        jsErrCode jerr = 0;
        js_GetLastMsg(&m, c.js, stream, all, NULL, &jerr);
        natsMsg_Destroy(m);
        if (jerr == JSClusterNotAvailErr)
            rc = 0;
        else
            nats_Sleep(250);
    }
    conn_close(&c);
    return rc;
}

int cs_jsr_tip(jsCtx *js, const char *stream, const char *run, uint32_t *seq, char *id, size_t idlen)
{
    char filter[256];
    snprintf(filter, sizeof filter, "%s.%s.*", stream, run);
    natsMsg *m = NULL;
    if (js_GetLastMsg(&m, js, stream, filter, NULL, NULL) != NATS_OK)
        return -1;
    cs_wire_msg w;
    const char *h = NULL;
    int rc = cs_wire_decode((const uint8_t *)natsMsg_GetData(m), (size_t)natsMsg_GetDataLength(m), &w, NULL) == 0 &&
                     natsMsgHeader_Get(m, "Nats-Msg-Id", &h) == NATS_OK
                 ? 0
                 : -1;
    if (rc == 0) {
        *seq = w.seq;
        if (id)
            snprintf(id, idlen, "%s", h);
    }
    natsMsg_Destroy(m);
    return rc;
}
