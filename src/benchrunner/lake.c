/* SPDX-License-Identifier: Apache-2.0 */
/* benchrunner --mode lake: reads --start..--end from a SEP-54 lake (lakereader.h) and, with
 * --verify-dir, checks every ledger against the dump. See lake.h. */
#include "benchrunner/lake.h"

#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>


#include "benchrunner/dumpverify.h"
#include "corestreamd/lake/lakereader.h"
#include "corestreamd/sources/source.h"
#include "wire/ledgersig.h"

/* One batch's ledgers within the range. A batch of one ledger is that ledger, after the 12-byte
 * header, checked against the dump with --verify-dir; a larger batch is counted ledger by ledger,
 * its bytes shared evenly among them (cutting it into ledgers needs an XDR decoder). */
static int take_batch(br_dump *dump, cs_lake_batch b, const uint8_t *xdr, size_t len, uint32_t first, uint32_t last,
                      br_progress *prog, br_collector *c, cs_err *err)
{
    uint64_t count = (uint64_t)b.end - b.start + 1;
    int64_t now = br_mono_ns();
    for (uint64_t s = b.start < first ? first : b.start; s <= b.end && s <= last; s++) {
        if (dump && br_dump_check(dump, (uint32_t)s, xdr + 12, len - 12, err) != 0)
            return -1;
        br_sample smp = {.seq = (uint32_t)s, .bytes = (len - 12) / count};
        if (br_collector_add(c, now, &smp) != 0)
            return cs_err_set(err, 0, "out of memory");
        br_progress_note(prog, 0, &smp);
    }
    return 0;
}

int br_run_lake(const br_options *o, cs_cancel *cancel, br_progress *prog, br_collector **out, cs_err *err)
{
    cs_err_clear(err);
    *out = br_collector_new("lake (SEP-54 objects)");
    if (!*out)
        return cs_err_set(err, 0, "out of memory");
    char tok[1024];
    if (br_bearer_token(o, tok, sizeof tok, err) != 0)
        return -1;
    cs_lake_reader_opts ro = {.url = o->url, .bearer_token = tok, .ca_file = *o->tls_ca ? o->tls_ca : NULL};
    cs_lake_reader *r = NULL;
    br_dump *dump = NULL;
    if (cs_lake_reader_open(&r, &ro, err) != 0 || (*o->verify_dir && br_dump_open(&dump, o->verify_dir, err) != 0)) {
        cs_lake_reader_free(r);
        return -1;
    }
    cs_sig_keyset *ks = NULL;
    cs_sig_chain chain = {0};
    if ((dump || *o->trusted_keys) && cs_lake_reader_layout(r)->ledgers_per_batch != 1)
        cs_err_set(err, 0, "--verify-dir and --trusted-keys need a lake of one ledger per batch: %s has %" PRIu32,
                   o->url, cs_lake_reader_layout(r)->ledgers_per_batch);
    else if (*o->trusted_keys)
        cs_sig_keyset_load(o->trusted_keys, &ks, err);
    if (err->msg[0]) {
        cs_lake_reader_free(r);
        br_dump_free(dump);
        return -1;
    }
    uint32_t first = (uint32_t)o->start, last = (uint32_t)o->end;
    int rc = 0;
    for (uint64_t s = first; rc == 0 && s <= last;) {
        cs_lake_batch b;
        uint8_t *xdr = NULL;
        size_t len = 0;
        if (cs_cancel_is_set(cancel))
            rc = cs_err_set(err, CS_ERR_CANCELLED, "cancelled at ledger %" PRIu64, s);
        else if ((rc = cs_lake_reader_get(r, (uint32_t)s, &b, &xdr, &len, err)) == 0 &&
                 (!ks || (rc = cs_lake_reader_check_sig(r, ks, &chain, b.start, xdr + 12, len - 12, err)) == 0))
            rc = take_batch(dump, b, xdr, len, first, last, prog, *out, err);
        free(xdr);
        if (rc == 0)
            s = (uint64_t)b.end + 1;
    }
    cs_sig_keyset_free(ks);
    br_dump_free(dump);
    cs_lake_reader_free(r);
    return rc;
}
