/* SPDX-License-Identifier: Apache-2.0 */
/* libremoteledger: a session's signed ledgers (rl_options.trusted_keys_file, docs/PROTOCOL.md
 * "Signed ledgers"). Each ledger the assembler completes must carry a SIG that one of the
 * trusted keys made over exactly its bytes, for the session's signing run, chained to the
 * ledger before it when the session has that one (cs_sig_chain_check). The stream's calling
 * thread only. */
#include <inttypes.h>

#include "remoteledger/stream_internal.h"

#define SIG_PREFIX "remoteledger: signature: "

int rli_sigcheck(rl_stream *s, const rli_asm *a, cs_err *err)
{
    size_t len, sig_len;
    rl_ledger_info info;
    rli_asm_ledger(a, &len, &info);
    const uint8_t *msg = rli_asm_sig(a, &sig_len);
    if (!msg)
        return cs_err_set(err, RL_ERR_SIGNATURE, SIG_PREFIX "ledger %" PRIu32 " is unsigned", info.sequence);
    cs_err why;
    if (cs_sig_chain_check(&s->sig, s->keys, msg, sig_len, info.sequence, len, rli_asm_xxh64(a), rli_asm_sha256(a),
                           s->opts.allow_run_change, &why))
        return cs_err_set(err, RL_ERR_SIGNATURE, SIG_PREFIX "%s", why.msg);
    return 0;
}
