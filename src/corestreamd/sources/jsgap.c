/* SPDX-License-Identifier: Apache-2.0 */
#include "corestreamd/sources/jsgap.h"

#include <stdlib.h>

#include "corestream/wire.h"

struct cs_jsgap {
    int64_t wait_ns;
    const cs_sig_keyset *keys;
    rli_asm *probe;
    uint64_t probe_sseq; /* the stream sequence of the BEGIN the probe assembles from */
    bool have;           /* a candidate: ledger seq, its BEGIN at sseq, verified at since_ns */
    uint32_t seq;
    uint64_t sseq;
    int64_t since_ns;
};

cs_jsgap *cs_jsgap_new(int64_t wait_ns, const cs_sig_keyset *keys)
{
    cs_jsgap *g = calloc(1, sizeof *g);
    if (!g)
        return NULL;
    g->wait_ns = wait_ns;
    g->keys = keys;
    g->probe = rli_asm_new(CS_MAX_PAYLOAD_SIZE, CS_MAX_CHUNK_SIZE);
    if (!g->probe || (keys && !rli_asm_want_sha256(g->probe))) {
        cs_jsgap_free(g);
        return NULL;
    }
    return g;
}

void cs_jsgap_free(cs_jsgap *g)
{
    if (!g)
        return;
    rli_asm_free(g->probe);
    free(g);
}

void cs_jsgap_clear(cs_jsgap *g)
{
    rli_asm_reset(g->probe, 0);
    g->have = false;
}

int cs_jsgap_check_signature(const rli_asm *a, const cs_sig_keyset *keys, cs_sig_chain *chain, cs_err *e)
{
    size_t len, n;
    rl_ledger_info info;
    rli_asm_ledger(a, &len, &info);
    const uint8_t *sig = rli_asm_sig(a, &n);
    if (!sig)
        return cs_err_set(e, 0, "ledger %u is unsigned", info.sequence);
    return cs_sig_chain_check(chain, keys, sig, n, info.sequence, len, rli_asm_xxh64(a), rli_asm_sha256(a), false,
                              e);
}

/* The probe has verified a whole ledger: a candidate when it holds (signature included) and is
 * lower than the one kept. */
static void verified(cs_jsgap *g, const cs_sig_chain *chain, int64_t now_ns)
{
    size_t len;
    rl_ledger_info info;
    rli_asm_ledger(g->probe, &len, &info);
    cs_sig_chain copy = *chain;
    cs_err e;
    if (g->keys && cs_jsgap_check_signature(g->probe, g->keys, &copy, &e) != 0)
        return;
    if (g->have && info.sequence >= g->seq)
        return;
    g->have = true;
    g->seq = info.sequence;
    g->sseq = g->probe_sseq;
    g->since_ns = now_ns;
}

void cs_jsgap_offer(cs_jsgap *g, uint32_t want, const cs_wire_msg *w, const uint8_t *data, size_t len,
                    uint64_t sseq, const cs_sig_chain *chain, int64_t now_ns)
{
    if (!want || w->seq <= want)
        return;
    uint32_t open;
    if (w->type == CS_WIRE_TYPE_BEGIN) {
        rli_asm_reset(g->probe, w->seq);
        g->probe_sseq = sseq;
    } else if (!rli_asm_active(g->probe, &open) || open != w->seq) {
        return;
    }
    cs_err e;
    rli_asm_status rs = rli_asm_message(g->probe, data, len, &e);
    if (rs == RLI_ASM_ERROR)
        rli_asm_reset(g->probe, 0);
    else if (rs == RLI_ASM_LEDGER)
        verified(g, chain, now_ns);
}

bool cs_jsgap_deadline(const cs_jsgap *g, int64_t *deadline_ns)
{
    *deadline_ns = g->have ? g->since_ns + g->wait_ns : 0;
    return g->have;
}

bool cs_jsgap_due(const cs_jsgap *g, int64_t now_ns, uint32_t *seq, uint64_t *sseq)
{
    int64_t deadline;
    if (!cs_jsgap_deadline(g, &deadline) || now_ns < deadline)
        return false;
    *seq = g->seq;
    *sseq = g->sseq;
    return true;
}
