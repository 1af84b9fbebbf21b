/* SPDX-License-Identifier: Apache-2.0 */
/* A program built against the installed libremoteledger-dev (pkg-config remoteledger): it
 * streams ledgers [1,3] from the installed corestreamd and prints one line per ledger, checking
 * each payload's first 4 bytes (the synthetic source writes the sequence there, big-endian). */
#include <corestream/remoteledger.h>
#include <corestream/wire.h>
#include <stdio.h>

static int on_ledger(const uint8_t *ledger, size_t len, const rl_ledger_info *info, void *ctx)
{
    (void)ctx;
    uint32_t head = len >= 4 ? (uint32_t)ledger[0] << 24 | (uint32_t)ledger[1] << 16 | (uint32_t)ledger[2] << 8 | ledger[3] : 0;
    printf("ledger %u bytes %zu head %s\n", info->sequence, len, head == info->sequence ? "ok" : "wrong");
    return 0;
}

int main(int argc, char **argv)
{
    if (argc != 2) {
        fprintf(stderr, "usage: consumer ws://HOST:PORT\n");
        return 2;
    }
    rl_stream *s;
    rl_result r = rl_stream_new(&s, argv[1], NULL);
    if (r == RL_OK)
        r = rl_stream_raw_ledgers(s, rl_bounded_range(1, 3), on_ledger, NULL);
    if (r != RL_OK)
        fprintf(stderr, "consumer: %s: %s\n", rl_result_name(r), s ? rl_stream_error(s) : "");
    printf("result %s, wire version %d, path %s\n", rl_result_name(r), CS_WIRE_VERSION, CS_WIRE_STREAM_PATH);
    rl_stream_free(s);
    return r == RL_OK ? 0 : 1;
}
