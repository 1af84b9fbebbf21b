/* SPDX-License-Identifier: Apache-2.0 */
/* The SDK's unbounded start sequence (CAPTIVE.md 1.1-1.2, the plain catchup path; captive.h has
 * the steps): the version probe, the archive's latest checkpoint, offline-info's LCL, new-db and
 * catchup when the database cannot be reused, then `run` on the meta pipe. */
#include "corestreamd/sources/captive/captive_internal.h"

#include <cjson/cJSON.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common/log.h"
#include "corestream/wire.h"
#include "corestreamd/sources/captive/archive.h"

#define VERSION_TIMEOUT_NS (60 * 1000000000LL) /* `<bin> version` must answer within this */

/* Runs `<bin> --conf <conf> [--console] args…` to completion (conf rewritten first). */
static int core_cmd(captive_source *cs, bool console, const char *a1, const char *a2, cs_err *err)
{
    if (captive_write_conf(cs, err) != 0)
        return -1;
    char c1[] = "--conf", c2[] = "--console";
    char *argv[7];
    int i = 0;
    argv[i++] = cs->bin;
    argv[i++] = c1;
    argv[i++] = cs->conf;
    if (console)
        argv[i++] = c2;
    argv[i++] = (char *)a1;
    if (a2)
        argv[i++] = (char *)a2;
    argv[i] = NULL;
    return captive_run_cmd(cs, argv, err);
}

int captive_core_version(captive_source *cs, char **out, cs_err *err)
{
    char v[] = "version";
    char *argv[] = {cs->bin, v, NULL};
    return captive_capture_cmd(cs, argv, NULL, OUT_NULL, VERSION_TIMEOUT_NS, out, err);
}

void captive_first_line(const char *s, char *buf, size_t len)
{
    size_t n = strcspn(s, "\n");
    if (n >= len)
        n = len - 1;
    memcpy(buf, s, n);
    buf[n] = 0;
}

/* offline-info → LCL. Returns 0 with *lcl, or -1 with the reason (CS_ERR_CANCELLED kept). */
static int offline_info(captive_source *cs, int64_t *lcl, cs_err *err)
{
    if (captive_write_conf(cs, err) != 0)
        return cs_err_prefix(err, "error creating offline-info cmd: ");
    char c1[] = "--conf", oi[] = "offline-info";
    char *argv[] = {cs->bin, c1, cs->conf, oi, NULL};
    char *out;
    if (captive_capture_cmd(cs, argv, cs->workdir, OUT_LOG, 0, &out, err) != 0)
        return err->kind == CS_ERR_CANCELLED ? -1 : cs_err_prefix(err, "error executing offline-info cmd: ");
    cJSON *root = cJSON_Parse(out);
    free(out);
    if (!root)
        return cs_err_set(err, 0, "invalid output of offline-info cmd: not JSON");
    /* stellarcore.InfoResponse: info.ledger.num, 0 when absent. */
    const cJSON *info = cJSON_GetObjectItem(root, "info");
    const cJSON *ledger = cJSON_IsObject(info) ? cJSON_GetObjectItem(info, "ledger") : NULL;
    const cJSON *num = cJSON_IsObject(ledger) ? cJSON_GetObjectItem(ledger, "num") : NULL;
    int rc = 0;
    *lcl = 0;
    if ((info && !cJSON_IsObject(info) && !cJSON_IsNull(info)) ||
        (ledger && !cJSON_IsObject(ledger) && !cJSON_IsNull(ledger)) ||
        (num && !cJSON_IsNull(num) &&
         (!cJSON_IsNumber(num) || !(num->valuedouble >= -9007199254740992.0 && num->valuedouble <= 9007199254740992.0) ||
          (double)(int64_t)num->valuedouble != num->valuedouble)))
        rc = cs_err_set(err, 0, "invalid output of offline-info cmd: unexpected info.ledger.num");
    else if (num && cJSON_IsNumber(num))
        *lcl = (int64_t)num->valuedouble;
    cJSON_Delete(root);
    return rc;
}

/* NewCaptive: the binary must speak protocol 23 or later. */
static int check_protocol(captive_source *cs, cs_err *err)
{
    cs_err e;
    char *ver;
    if (captive_core_version(cs, &ver, &e) != 0) {
        if (e.kind == CS_ERR_CANCELLED)
            return captive_cancelled(err);
        return cs_err_set(err, 0, "error determining stellar-core protocol version: error executing stellar-core "
                                  "version command (%s): %s", cs->bin, e.msg);
    }
    unsigned proto;
    int prc = cs_coretoml_protocol_version(ver, &proto, &e);
    char build[256];
    captive_first_line(ver, build, sizeof build);
    free(ver);
    if (prc != 0)
        return cs_err_set(err, 0, "error determining stellar-core protocol version: %s", e.msg);
    if (proto < CS_CAPTIVE_MIN_PROTOCOL)
        return cs_err_set(err, 0,
                          "stellar-core version not supported. Installed stellar-core version is at protocol %u, but "
                          "minimum required version is %d. Please upgrade stellar-core to a version that supports "
                          "protocol version %d or higher",
                          proto, CS_CAPTIVE_MIN_PROTOCOL, CS_CAPTIVE_MIN_PROTOCOL);
    CS_LOG(CS_LOG_INFO, "stellar-core version", KV_S("version", build), KV_U("protocol", proto), SUBSERVICE);
    return 0;
}

/* runFromParams: the ledger core runs from (*run_from), checked against the archives' latest
 * checkpoint. */
static int plan_run(captive_source *cs, uint32_t *run_from, cs_err *err)
{
    cs_err e;
    uint32_t from = cs->from;
    if (from == 1)
        return cs_err_set(err, 0, "CaptiveCore is unable to start from ledger 1, start from ledger 2");
    if (from <= 63)
        from = 3; /* core streams ledger 2 on for the first checkpoint */
    cs_archive_opts ao = {
        .urls = (const char *const *)cs->urls,
        .nurls = cs->nurls,
        .user_agent = cs->user_agent,
        .network_passphrase = cs->passphrase,
        .cancel = cs->cancel,
    };
    cs_archive_has has;
    if (cs_archive_root_has(&ao, &has, &e) != 0) {
        if (e.kind == CS_ERR_CANCELLED)
            return captive_cancelled(err);
        return cs_err_set(err, 0, "error getting latest checkpoint sequence: error getting root HAS: %s", e.msg);
    }
    uint64_t latest = has.current_ledger;
    if ((uint64_t)from > latest + 2 * 64)
        return cs_err_set(err, 0,
                          "trying to start online mode too far (latest checkpoint=%u), only two checkpoints in the "
                          "future allowed",
                          has.current_ledger);
    *run_from = from - 1;
    CS_LOG(CS_LOG_INFO, "captive: starting stellar-core", KV_U("from", cs->from), KV_U("run_from", *run_from),
           KV_U("latest_checkpoint", latest), KV_S("workdir", cs->workdir), SUBSERVICE);
    return 0;
}

/* runFromStream.start: whether the database can be reused (its LCL is in range) or must be
 * built anew; one that cannot be read is rebuilt. Only a cancellation stops it: *cancelled, with
 * err. */
static bool needs_new_db(captive_source *cs, uint32_t run_from, cs_err *err, bool *cancelled)
{
    cs_err e;
    int64_t lcl = 0;
    *cancelled = false;
    if (offline_info(cs, &lcl, &e) != 0) {
        if (e.kind == CS_ERR_CANCELLED) {
            *cancelled = true;
            captive_cancelled(err);
            return false;
        }
        char *msg = NULL;
        if (asprintf(&msg, "Error running offline-info: %s, removing existing storage-dir contents", e.msg) >= 0) {
            CS_LOG(CS_LOG_INFO, msg, SUBSERVICE);
            free(msg);
        }
        return true;
    }
    if (lcl <= 2 || lcl > (int64_t)run_from) {
        char msg[160];
        snprintf(msg, sizeof msg, "Unexpected LCL in Stellar-Core DB: %lld (want: %u), removing existing storage-dir contents",
                 (long long)lcl, run_from);
        CS_LOG(CS_LOG_INFO, msg, SUBSERVICE);
        return true;
    }
    CS_LOG(CS_LOG_INFO, "captive: reusing the stellar-core database", KV_I("lcl", lcl), KV_U("run_from", run_from),
           SUBSERVICE);
    return false;
}

/* A new database in the emptied working dir: `new-db`, then `catchup <run_from>/0` (or, below
 * ledger 3, CATCHUP_COMPLETE in the conf). Returns 0, or -1 with err. */
static int build_db(captive_source *cs, uint32_t run_from, cs_err *err)
{
    cs_err e;
    if (core_cmd(cs, true, "new-db", NULL, &e) != 0)
        return e.kind == CS_ERR_CANCELLED ? captive_cancelled(err) : cs_err_set(err, 0, "error initializing core db: %s", e.msg);
    if (run_from < 3) {
        /* Core replays from ledger 2 itself once told catchup is complete (LCL = 1). */
        cs->params.catchup_complete = true;
        return 0;
    }
    char target[32];
    snprintf(target, sizeof target, "%u/0", run_from);
    if (core_cmd(cs, true, "catchup", target, &e) != 0)
        return e.kind == CS_ERR_CANCELLED ? captive_cancelled(err)
                                          : cs_err_set(err, 0, "error running stellar-core catchup: %s", e.msg);
    return 0;
}

/* `run --metadata-output-stream fd:3`: the long-lived process on the meta pipe. Returns 0 with
 * cs->fr and cs->meta_rfd set, or -1 with err and nothing left open. */
static int start_run(captive_source *cs, cs_err *err)
{
    cs_err e;
    int rc = 0;
    int p[2] = {-1, -1};
    if (captive_write_conf(cs, &e) != 0)
        rc = cs_err_set(err, 0, "error creating command: %s", e.msg);
    if (rc == 0 && pipe2(p, O_CLOEXEC) != 0)
        rc = cs_err_set(err, 0, "error starting `stellar-core run` subprocess: pipe: %s", strerror(errno));
    if (rc == 0 && (p[1] = cs_child_fd_above_3(p[1])) < 0)
        rc = cs_err_set(err, 0, "error starting `stellar-core run` subprocess: %s", strerror(errno));
    if (rc == 0 && cs_frame_reader_new(&cs->fr, p[0], cs->cancel, CS_FRAME_BUFFER_DEFAULT, CS_MAX_PAYLOAD_SIZE, &e) != 0)
        rc = cs_err_set(err, 0, "error starting `stellar-core run` subprocess: %s", e.msg);
    if (rc == 0) {
        char c1[] = "--conf", c2[] = "--console", r[] = "run", m[] = "--metadata-output-stream", fd3[] = "fd:3";
        char *argv[] = {cs->bin, c1, cs->conf, c2, r, m, fd3, NULL};
        if (captive_proc_start(&cs->run, argv, cs->workdir, OUT_LOG, OUT_LOG, p[1], NULL, &e) != 0)
            rc = cs_err_set(err, 0, "error starting `stellar-core run` subprocess: %s", e.msg);
    }
    /* The parent keeps no write end: core's exit is the pipe's EOF. */
    if (p[1] >= 0)
        close(p[1]);
    if (rc == 0) {
        cs->meta_rfd = p[0];
        return 0;
    }
    cs_frame_reader_free(cs->fr);
    cs->fr = NULL;
    if (p[0] >= 0)
        close(p[0]);
    return -1;
}

int captive_start_core(captive_source *cs, cs_err *err)
{
    uint32_t run_from = 0;
    if (check_protocol(cs, err) != 0 || plan_run(cs, &run_from, err) != 0)
        return -1;
    bool cancelled;
    bool new_db = needs_new_db(cs, run_from, err, &cancelled);
    if (cancelled)
        return -1;
    int rc = 0;
    if (new_db) {
        cs_err e;
        if (captive_remove_all(cs->workdir, &e) != 0)
            return cs_err_set(err, 0, "error removing existing storage-dir contents: %s", e.msg);
        rc = build_db(cs, run_from, err);
    }
    if (rc == 0)
        rc = start_run(cs, err);
    if (rc == 0) {
        CS_LOG(CS_LOG_INFO, "captive: stellar-core running", KV_I("core_pid", cs->run.c.pid), KV_B("new_db", new_db),
               SUBSERVICE);
        return 0;
    }
    /* A database this start created and could not use is not kept. */
    cs_err e;
    if (new_db && captive_remove_all(cs->workdir, &e) != 0)
        CS_LOG(CS_LOG_WARN, "captive: cannot remove the working dir", KV_S("error", e.msg), SUBSERVICE);
    return -1;
}
