/* SPDX-License-Identifier: Apache-2.0 */
/* The pipe tap (docs/operations/sources.md): runs `sh -c <cmd>` with a pipe's write end as its fd
 * 3 and emits each record-marked LedgerCloseMeta it writes there, as it is written. The frame
 * marker gives the declared size, an XDR walk of the frame's first bytes gives the seq, and the
 * body streams straight from the pipe. The stream ends when the pipe reaches EOF at a frame
 * boundary and the command exited 0; a non-zero exit is an error. Unpaced; the range is not needed.
 */
#ifndef CS_CORESTREAMD_SOURCE_PIPE_H
#define CS_CORESTREAMD_SOURCE_PIPE_H

#include <stddef.h>
#include <stdint.h>

#include "common/err.h"
#include "common/cancel.h"
#include "corestreamd/sources/source.h"

/* How long teardown waits for the command after SIGTERM before it SIGKILLs it (Go's WaitDelay). */
#define CS_PIPE_KILL_GRACE_NS (5 * 1000000000LL)

/* Creates the pipe, asks for pipe_size bytes of kernel buffer (0 → 1 MiB, negative → left alone;
 * failures ignored) and spawns the command in its own process group, with stdout and stderr
 * inherited, SIGINT/SIGTERM/SIGPIPE at their defaults and unblocked, and only fds 0-3 open where
 * the C library can arrange it. Errors: `pipe source: …` (pipe creation) and
 * `pipe source: start "<cmd>": …`.
 *
 * next() errors carry em->seq = 0 (no ledger was identified) and read `pipe source: read frame
 * marker: …`, `pipe source: read frame prefix: …`, `pipe source: read ledger seq: …` or
 * `pipe source: "<cmd>" exited: exit status N` (`signal: killed`, … for a signal). read() fails
 * with `pipe source: frame truncated K bytes short: unexpected EOF` when the command stops
 * mid-frame. Once cancel fires, both report CS_ERR_CANCELLED ("context canceled") and the process
 * group is sent SIGTERM. destroy() closes the pipe, SIGTERMs the group if that has not happened,
 * waits up to CS_PIPE_KILL_GRACE_NS for the command (then SIGKILLs it, with a WARN `pipe source:
 * command did not stop after SIGTERM; killing it`), reaps it, and SIGKILLs
 * the group to sweep grandchildren. A writer that escaped the group and holds fd 3 open cannot
 * stall any of this. */
int cs_pipe_source_new(cs_source **out, const char *cmd, int64_t pipe_size, cs_cancel *cancel,
                       cs_err *err);

/* Child PID and process group (the same number) of a live source, for tests; -1 once reaped. */
int cs_pipe_source_pid(const cs_source *s);

/* Sets the kernel buffer of the pipe fd belongs to (want > 0) and reports the size it has
 * afterwards in *got. Returns 0, or -1 with errno set when the resize (or the query) failed —
 * for an unprivileged process asking past /proc/sys/fs/pipe-max-size that is EPERM. */
int cs_pipe_set_size(int fd, int want, int *got);

#endif
