/* SPDX-License-Identifier: Apache-2.0 */
/* The data directory (--data-dir): made with its parents, and owned by one process at a time.
 * Everything under it (the ring, the captive core's storage, the quarantine) is written by its
 * owner only, so two daemons never interleave writes to one ring. */
#ifndef CS_COMMON_DATADIR_H
#define CS_COMMON_DATADIR_H

#include "common/err.h"

/* The lock file's name inside the data directory. */
#define CS_DATADIR_LOCK_NAME "corestreamd.lock"

/* mkdir -p dir with mode 0755; a component that exists must be a directory (else ENOTDIR).
 * Returns 0, or -1 with errno. */
int cs_mkdir_all(const char *dir);

/* Makes dir (cs_mkdir_all) and takes an exclusive lock on dir/corestreamd.lock (flock, LOCK_NB),
 * writing this process's PID into it. Call before anything under dir is read. Returns the lock's
 * descriptor (close-on-exec: children never hold it; the lock lasts while it is open, and the
 * kernel drops it when the process ends, however it ends), or -1 with err:
 *   `data directory "<dir>" is in use by another corestreamd (pid <N>): stop it, or give this one
 *    another --data-dir` (the holder's PID as it wrote it; "pid unknown" when unreadable),
 *   `data directory "<dir>": create: <strerror>`, `data directory "<dir>": lock <file>: <strerror>`.
 * Any thread; the caller owns the descriptor and closes it at exit (or never). */
int cs_datadir_lock(const char *dir, cs_err *err);

#endif
