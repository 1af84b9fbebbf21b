/* SPDX-License-Identifier: Apache-2.0 */
/* `--source captive` (docs/operations/captive.md): corestreamd runs and supervises
 * stellar-core itself, as the Go SDK's captive-core backend did for the prototype, and emits each
 * LedgerCloseMeta core writes on its meta pipe, from the start ledger on, unpaced and unbounded.
 *
 * cs_captive_source_new validates the configuration, reads the operator's toml (coretoml.h) and
 * probes `<bin> version` for the toml defaults; it starts nothing. The first next() runs the
 * SDK's unbounded start sequence (CAPTIVE.md 1.1-1.2, the plain catchup path):
 *   1. `<bin> version`: `ledger protocol version: N` must be >= 23;
 *   2. the archives' root HAS gives the latest checkpoint L (archive.h);
 *   3. from == 1 is refused; from <= 63 starts core as for 3; from > L + 128 is refused;
 *   4. `offline-info` reports core's LCL: with 2 < LCL <= from-1 the database is reused;
 *      otherwise the working dir is wiped, `new-db` runs, then `catchup <from-1>/0` — or, when
 *      from-1 < 3, CATCHUP_COMPLETE=true goes into the conf instead of a catchup;
 *   5. `run --metadata-output-stream fd:3` streams; frames before `from` are read, checked and
 *      dropped (those from `emit_from` on are emitted instead). The first frame must be <= from;
 *      after it every frame must be the next sequence and its previousLedgerHash the hash of the
 *      frame before.
 * Every command is `<bin> --conf <abs workdir>/stellar-core.conf [--console] <cmd…>` (no
 * --console for offline-info), with cwd = the working dir <storage>/captive-core, stdin
 * /dev/null, SIGINT/SIGTERM/SIGPIPE at their defaults and unblocked, only fds 0-2 (and 3 for
 * `run`) open, and the conf rewritten before it. Core's stdout and stderr are read line by line
 * on a small thread per process and logged with subservice=stellar-core ("<Category>: <msg>" at
 * core's level; see CAPTIVE.md 4.3); offline-info's stdout is JSON and is parsed instead.
 *
 * Supervision: core is never restarted. If it exits, or the stream breaks a rule, the source ends
 * with an error: `captive: stellar-core exited unexpectedly: exit status N`, `captive: unexpected
 * ledger sequence (expected=A actual=B)`, `captive: unexpected previous ledger hash for ledger S
 * (expected=X actual=Y)`, … Stopping (on those errors and in destroy) sends core SIGINT, keeps
 * draining its meta pipe, waits up to the grace (10 s) and then sends SIGKILL. The working dir is
 * kept when core's exit status was 0 (a clean stop), and wiped when core failed (so the next start
 * builds a fresh database), as is a database created by a start that then failed.
 *
 * Errors start `captive: `. Once the run's cancel fires, next() and read() report
 * CS_ERR_CANCELLED ("context canceled"). On an error, em->seq names the ledger expected next. */
#ifndef CS_CORESTREAMD_SOURCE_CAPTIVE_H
#define CS_CORESTREAMD_SOURCE_CAPTIVE_H

#include <stddef.h>
#include <stdint.h>

#include "common/err.h"
#include "common/cancel.h"
#include "corestreamd/sources/source.h"

/* SIGINT → SIGKILL grace, as the SDK's WaitDelay; also how long a reaped core's log pipe may stay
 * open (held by a grandchild) before its reader is stopped. */
#define CS_CAPTIVE_STOP_GRACE_NS (10 * 1000000000LL)
/* The oldest core protocol the SDK runs (minProtocolVersionSupported). */
#define CS_CAPTIVE_MIN_PROTOCOL 23

typedef struct cs_captive_config {
    const char *core_binary;        /* NULL/"" → `stellar-core` looked up on PATH */
    const char *core_config;        /* the operator's captive-core toml (required) */
    const char *storage_dir;        /* required; main passes <data-dir>/captive-core by default */
    const char *network_passphrase; /* NULL/"" → peeked from the toml (docs/operations/captive.md) */
    const char *const *urls;        /* history archives (at least one) */
    size_t nurls;
    uint32_t start;                 /* the ledger core is started for (>= 1) */
    /* Frames core writes before start are checked and dropped, except from emit_from on (0 or
     * >= start: none): a caller that holds those ledgers compares them (sources/rejoin.h). */
    uint32_t emit_from;
    const char *user_agent;         /* archive requests; NULL → "corestream" */
    int64_t stop_grace_ns;          /* 0 → CS_CAPTIVE_STOP_GRACE_NS (tests shorten it) */
} cs_captive_config;

/* Validates and prepares; the prototype's messages, in its order:
 * `captive: config path is required`, `captive: storage path is required`,
 * `captive: at least one history archive URL is required`, `captive: read config "<p>": …`,
 * `captive: config "<p>": NETWORK_PASSPHRASE is not …`,
 * `captive: no --core-binary given and stellar-core is not on PATH: …`,
 * `captive: create storage path "<p>": …`, `captive: invalid config "<p>": …` (coretoml.h; a
 * passphrase that disagrees with the file names NETWORK_PASSPHRASE). The storage dir is created
 * (mkdir -p, 0755) and made absolute. Nothing is started until the first next(). */
int cs_captive_source_new(cs_source **out, const cs_captive_config *cfg, cs_cancel *cancel, cs_err *err);

/* For tests and logs: the absolute working dir (<storage>/captive-core), and the PID of the
 * running `stellar-core run` (-1 when there is none, or once it was reaped). */
const char *cs_captive_source_workdir(const cs_source *s);
int cs_captive_source_core_pid(const cs_source *s);

#endif
