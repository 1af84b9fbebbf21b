/* SPDX-License-Identifier: Apache-2.0 */
#include "corestreamd/start.h"

#include <limits.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <xxhash.h>

#include "common/synthetic.h"
#include "corestream/wire.h"
#include "corestreamd/sources/jetstream.h"

const char *cs_start_mode_name(cs_start_mode mode)
{
    switch (mode) {
    case CS_START_GIVEN:
        return "given";
    case CS_START_CONTINUE:
        return "continue";
    case CS_START_DEFAULT:
        break;
    }
    return "default";
}

void cs_run_identity(const cs_daemon_config *c, const cs_source *src, char *buf, size_t len)
{
    if (strcmp(c->source, "jetstream") == 0) {
        cs_js_source_identity(src, buf, len);
    } else if (strcmp(c->source, "synthetic") == 0) {
        long long size = c->synthetic_size > 0 ? (long long)c->synthetic_size : CS_SYNTHETIC_DEFAULT_SIZE;
        snprintf(buf, len, "source=synthetic size=%lld compressible=%s", size,
                 c->synthetic_compressible ? "true" : "false");
    } else if (strcmp(c->source, "file") == 0) {
        char real[PATH_MAX];
        snprintf(buf, len, "source=file dir=%s", realpath(c->file_dir, real) ? real : c->file_dir);
    } else {
        /* pipe and captive: one network's ledgers are one chain, whichever core produced them. */
        snprintf(buf, len, "source=%s network=%s", c->source, c->network_passphrase);
    }
}

void cs_run_token(const cs_daemon_config *c, const char *identity, uint64_t nonce, char *buf, size_t len)
{
    uint64_t seed = strcmp(c->source, "jetstream") == 0 ? 0 : nonce;
    snprintf(buf, len, "%.24s-%016llx", c->source, (unsigned long long)XXH64(identity, strlen(identity), seed));
}

int cs_run_start_decide(const cs_daemon_config *c, cs_ring *ring, const char *identity, cs_run_start *out,
                        cs_err *err)
{
    *out = (cs_run_start){.mode = CS_START_DEFAULT, .first = 1};
    if (c->start_ledger) {
        *out = (cs_run_start){.mode = CS_START_GIVEN, .first = (uint32_t)c->start_ledger};
        return 0;
    }
    uint32_t latest;
    if (cs_ring_continues(ring, identity, &latest))
        *out = (cs_run_start){.mode = CS_START_CONTINUE, .first = latest + 1, .ring_latest = latest};
    else if (strcmp(c->source, "captive") == 0)
        return cs_err_set(err, 0,
                          "--start-ledger is required with --source captive: the ring \"%s\" holds no ledgers "
                          "of this run to continue",
                          cs_ring_dir(ring));
    bool synthetic = strcmp(c->source, "synthetic") == 0;
    uint64_t count = synthetic ? c->synthetic_count : strcmp(c->source, "file") == 0 ? c->file_count : 0;
    if (out->mode == CS_START_CONTINUE && count && (uint64_t)out->first + count - 1 >= CS_LAST_SEQUENCE)
        return cs_err_set(err, 0,
                          "the run continues the ring at ledger %u, so --%s-count %llu would reach ledger %u, "
                          "which is not streamable",
                          out->first, synthetic ? "synthetic" : "file", (unsigned long long)count,
                          CS_LAST_SEQUENCE);
    return 0;
}
