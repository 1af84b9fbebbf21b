/* libremoteledger: a session's signed ledgers (rl_options.trusted_keys_file, docs/PROTOCOL.md
 * "Signed ledgers"). Each ledger the assembler completes must carry a SIG that one of the
 * trusted keys made over exactly its bytes, for the session's signing run, chained to the
 * ledger before it when the session has that one. The stream's calling thread only. */
#include <inttypes.h>
#include <string.h>

#include "remoteledger/stream_internal.h"

#define SIG_PREFIX "remoteledger: signature: "

/* The run a SIG was signed for against the session's: the first signed ledger sets it; another
 * one later is refused unless the caller accepts a change of run (the chain restarts then). */
static int check_run(rl_stream *s, const cs_sig *sig, cs_err *err)
{
    rli_sigstate *st = &s->sig;
    bool same = st->run_len == sig->run_len && memcmp(st->run, sig->run, sig->run_len) == 0;
    if (st->run_len && !same && !s->opts.allow_run_change)
        return cs_err_set(err, RL_ERR_SIGNATURE, SIG_PREFIX "ledger %" PRIu32 ": signed for run %.*s, the session's ledgers for run %.*s",
                          sig->seq, (int)sig->run_len, sig->run, (int)st->run_len, st->run);
    if (!same) {
        st->run_len = sig->run_len;
        memcpy(st->run, sig->run, sig->run_len);
        st->have_prev = false;
    }
    return 0;
}

int rli_sigcheck(rl_stream *s, const rli_asm *a, cs_err *err)
{
    size_t len, sig_len;
    rl_ledger_info info;
    rli_asm_ledger(a, &len, &info);
    const uint8_t *msg = rli_asm_sig(a, &sig_len);
    if (!msg)
        return cs_err_set(err, RL_ERR_SIGNATURE, SIG_PREFIX "ledger %" PRIu32 " is unsigned", info.sequence);
    cs_sig sig;
    cs_err why;
    if (cs_sig_decode(msg, sig_len, &sig, &why) ||
        cs_sig_verify(s->keys, &sig, len, rli_asm_xxh64(a), rli_asm_sha256(a), &why))
        return cs_err_set(err, RL_ERR_SIGNATURE, SIG_PREFIX "ledger %" PRIu32 ": %s", info.sequence, why.msg);
    if (check_run(s, &sig, err))
        return -1;
    rli_sigstate *st = &s->sig;
    /* A zero previous signature is the signer saying it had none (its first ledger, or a ring
     * reset): the chain starts again there. */
    if (st->have_prev && st->prev_seq + 1 == sig.seq && !cs_sig_prev_none(&sig) &&
        memcmp(st->prev, sig.prev, CS_SIG_LEN) != 0)
        return cs_err_set(err, RL_ERR_SIGNATURE, SIG_PREFIX "ledger %" PRIu32 " does not chain to ledger %" PRIu32,
                          sig.seq, st->prev_seq);
    st->have_prev = true;
    st->prev_seq = sig.seq;
    memcpy(st->prev, sig.sig, CS_SIG_LEN);
    return 0;
}
