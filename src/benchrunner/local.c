/* SPDX-License-Identifier: Apache-2.0 */
#include "benchrunner/local.h"

#include <errno.h>
#include <ftw.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "corestreamd/config.h"
#include "corestreamd/sources/captive/captive.h"
#include "corestreamd/sources/pipe/pipe.h"

/* Drains src. With per_read_timing (localtap) each body is read in plain chunk-size reads and
 * timed from the first to the last; otherwise (local, whole metas) only arrivals are recorded. */
static int drain(cs_source *src, const br_options *o, bool per_read_timing, br_progress *prog, br_collector *c,
                 cs_err *err)
{
    size_t cap = (size_t)o->chunk_size;
    uint8_t *buf = malloc(cap);
    if (!buf)
        return cs_err_set(err, 0, "out of memory");
    int rc = 0;
    for (;;) {
        cs_emission em;
        cs_err e;
        int got = src->ops->next(src, &em, &e);
        if (got == 0)
            break;
        if (got < 0) {
            rc = cs_err_set(err, e.kind, "%s", e.msg);
            break;
        }
        int64_t t0 = br_mono_ns();
        uint64_t bytes = 0;
        uint32_t reads = 0;
        ssize_t n;
        while ((n = src->ops->read(src, buf, cap, &e)) > 0) {
            bytes += (uint64_t)n;
            reads++;
        }
        if (n < 0) {
            rc = cs_err_set(err, e.kind, "%s", e.msg);
            break;
        }
        int64_t t1 = br_mono_ns();
        br_sample s = {.seq = em.seq, .bytes = bytes};
        if (per_read_timing) {
            s.chunks = reads;
            s.emit = s.pipeline = t1 - t0;
            s.has_emit = s.has_pipeline = true;
        }
        if (br_collector_add(c, t1, &s) != 0) {
            rc = cs_err_set(err, 0, "out of memory recording ledger %u", em.seq);
            break;
        }
        br_progress_note(prog, 0, &s);
        if (o->end && em.seq >= o->end)
            break;
    }
    free(buf);
    return rc;
}

int br_run_localtap(const br_options *o, cs_cancel *cancel, br_progress *prog, br_collector **out, cs_err *err)
{
    *out = br_collector_new("local tap (core's pipe, no network)");
    if (!*out)
        return cs_err_set(err, 0, "out of memory");
    cs_source *src;
    if (cs_pipe_source_new(&src, o->pipe_cmd, o->pipe_size, cancel, err) != 0)
        return -1;
    int rc = drain(src, o, true, prog, *out, err);
    src->ops->destroy(src);
    return rc;
}

static int rm_entry(const char *path, const struct stat *st, int flag, struct FTW *ftw)
{
    (void)st, (void)flag, (void)ftw;
    remove(path);
    return 0;
}

int br_run_local(const br_options *o, cs_cancel *cancel, br_progress *prog, br_collector **out, cs_err *err)
{
    *out = br_collector_new("local (captive core in this process)");
    if (!*out)
        return cs_err_set(err, 0, "out of memory");
    char tmp[PATH_MAX] = "";
    const char *storage = o->storage_dir;
    if (!*storage) {
        const char *root = getenv("TMPDIR");
        snprintf(tmp, sizeof tmp, "%s/benchrunner-core-XXXXXX", root && *root ? root : "/tmp");
        if (!mkdtemp(tmp))
            return cs_err_set(err, 0, "mkdtemp %s: %s", tmp, strerror(errno));
        storage = tmp;
    }
    char *list = strdup(o->history_archive_urls);
    const char *urls[32];
    size_t nurls = list ? cs_split_urls(list, urls, sizeof urls / sizeof urls[0]) : 0;
    cs_captive_config cc = {.core_binary = o->core_binary,
                            .core_config = o->core_config,
                            .storage_dir = storage,
                            .network_passphrase = o->network_passphrase,
                            .urls = urls,
                            .nurls = nurls,
                            .start = (uint32_t)o->start,
                            .user_agent = "corestream-benchrunner"};
    cs_source *src = NULL;
    int rc = list ? cs_captive_source_new(&src, &cc, cancel, err) : cs_err_set(err, 0, "out of memory");
    if (rc == 0) {
        rc = drain(src, o, false, prog, *out, err);
        src->ops->destroy(src);
    }
    free(list);
    if (*tmp)
        nftw(tmp, rm_entry, 16, FTW_DEPTH | FTW_PHYS);
    return rc;
}
