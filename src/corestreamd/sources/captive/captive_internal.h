/* SPDX-License-Identifier: Apache-2.0 */
/* What the captive source's files share (captive.h has the public side): the source struct,
 * the process wrapper, and each file's entry points. One file per concern:
 *   captive.c    construction, the streaming checks (sequence, hash chain), next/read/destroy
 *   start.c      the start sequence (version probe, offline-info, new-db / catchup, run)
 *   supervise.c  spawning core's commands, stopping them (SIGINT, grace, SIGKILL), their exit
 *   corelog.c    core's stdout/stderr lines relayed into our log (subservice=stellar-core)
 *   workdir.c    the working dir and the stellar-core.conf written into it
 * Not for use outside sources/captive/. */
#ifndef CS_CORESTREAMD_SOURCES_CAPTIVE_INTERNAL_H
#define CS_CORESTREAMD_SOURCES_CAPTIVE_INTERNAL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "common/child.h"
#include "common/err.h"
#include "common/log.h"
#include "corestreamd/sources/captive/captive.h"
#include "corestreamd/sources/captive/coretoml.h"
#include "corestreamd/sources/pipe/framereader.h"

#define SUBSERVICE KV_S("subservice", "stellar-core")

/* errno in Go's words (syscall.Errno.Error()), in a temporary buffer. */
#define GOERR(e) cs_go_errno((e), (char[128]){0}, 128)

/* ---- corelog.c ---- */

/* A thread that reads one process's log pipe to EOF and logs each line as core's own. */
typedef struct captive_log captive_log;

/* Takes ownership of fd (also on failure). Returns NULL with err set when the thread cannot
 * start. */
captive_log *captive_log_start(int fd, cs_err *err);
/* Waits for the pipe's EOF until the monotonic deadline, then stops the reader anyway (a
 * grandchild may hold the pipe), joins it and frees it. NULL is a no-op. */
void captive_log_finish(captive_log *l, int64_t deadline);

/* ---- supervise.c ---- */

typedef struct captive_proc {
    cs_child c;
    captive_log *log; /* its stdout/stderr reader, when either is logged */
} captive_proc;

/* Where a child's stdout or stderr goes. */
typedef enum captive_out { OUT_NULL, OUT_LOG, OUT_CAPTURE } captive_out;

typedef struct captive_source {
    cs_source base;
    cs_cancel *cancel;
    char *bin;
    char *config_path;
    char *storage; /* absolute */
    char *workdir; /* <storage>/captive-core */
    char *conf;    /* <workdir>/stellar-core.conf */
    char *passphrase;
    char **urls;
    size_t nurls;
    char *user_agent;
    uint32_t from;
    uint32_t emit_from; /* frames from here on are emitted (<= from) */
    int64_t grace;
    cs_coretoml *toml;
    cs_coretoml_params params;

    bool started;
    bool failed;
    cs_err failure;
    captive_proc run;
    int meta_rfd;
    cs_frame_reader *fr;
    bool dir_settled;     /* the keep-or-wipe decision was taken */
    uint32_t expect;      /* the ledger the next emission carries */
    uint32_t next_ledger; /* the next frame's seq once one arrived (0 before) */
    bool have_prev;
    uint8_t prev_hash[32];
} captive_source;

/* Sets CS_ERR_CANCELLED ("context canceled"); returns -1. */
int captive_cancelled(cs_err *err);

/* No process yet (pid and pidfd -1). */
void captive_proc_init(captive_proc *p);
/* Spawns argv with stdin /dev/null, stdout/stderr per the modes, cwd (NULL: ours) and, when
 * meta_wfd >= 0, that pipe as fd 3. A log pipe gets a reader thread; a capture pipe's read end
 * goes to *capture_rfd (the caller closes it). Errors: `fork/exec <bin>: …`, `chdir <dir>: …`. */
int captive_proc_start(captive_proc *p, char *const argv[], const char *cwd, captive_out out, captive_out errm,
                       int meta_wfd, int *capture_rfd, cs_err *err);
/* After the process was reaped (or given up on): the log reader gets the grace to see EOF. */
void captive_proc_release(captive_source *cs, captive_proc *p);
/* SIGINT, the grace, SIGKILL; reaps; releases. Idempotent. */
void captive_proc_stop(captive_source *cs, captive_proc *p, int drain_fd);
/* Runs a command to completion in the working dir, its output logged. Returns 0 when it exited
 * 0; -1 with the exit ("exit status N", "signal: …") or the spawn error, or CS_ERR_CANCELLED
 * (after stopping it). */
int captive_run_cmd(captive_source *cs, char *const argv[], cs_err *err);
/* Runs a command for its stdout (at most 1 MiB kept, malloc'd and NUL-terminated in *out), with
 * stderr logged or dropped, within timeout_ns (0: none). Errors as captive_run_cmd's, plus
 * "timed out". */
int captive_capture_cmd(captive_source *cs, char *const argv[], const char *cwd, captive_out errm, int64_t timeout_ns,
                        char **out, cs_err *err);
/* Stops `run` (if it still runs), then keeps the working dir when core's exit status was 0 and
 * wipes it otherwise. */
void captive_stop_core(captive_source *cs);

/* ---- workdir.c ---- */

/* rm -rf; a missing path is no error. */
int captive_remove_all(const char *path, cs_err *err);
/* mkdir -p, 0755. */
int captive_mkdir_all(const char *path, cs_err *err);
/* filepath.Abs: joined to the cwd and cleaned lexically (no symlinks resolved); malloc'd, NULL
 * when out of memory or the cwd is unknown. */
char *captive_abs_path(const char *path);
/* Creates the working dir and (re)writes the generated stellar-core.conf into it. */
int captive_write_conf(captive_source *cs, cs_err *err);

/* ---- start.c ---- */

/* `<bin> version`, run as the SDK runs it (no conf, our cwd, stderr dropped, 60 s at most). */
int captive_core_version(captive_source *cs, char **out, cs_err *err);
/* The first line of s, cut to fit buf[len]. */
void captive_first_line(const char *s, char *buf, size_t len);
/* The SDK's unbounded start sequence (captive.h, steps 1-5): on success `run` is up and cs->fr
 * reads its meta pipe. Errors unprefixed (next() adds `captive: `), or CS_ERR_CANCELLED. */
int captive_start_core(captive_source *cs, cs_err *err);

#endif
