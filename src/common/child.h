/* SPDX-License-Identifier: Apache-2.0 */
/* Child processes, shared by the pipe tap and captive core: spawning one as Go's os/exec would,
 * waiting for it (a pidfd where the kernel has one, waitpid otherwise), and its exit in Go's
 * words. */
#ifndef CS_COMMON_CHILD_H
#define CS_COMMON_CHILD_H

#include <stdbool.h>
#include <spawn.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "common/cancel.h"

typedef struct cs_child {
    pid_t pid;      /* -1: none */
    int pidfd;      /* -1 when the kernel has no pidfd_open: waits then poll waitpid */
    bool reaped;    /* exactly one waitpid ever succeeds */
    int status;     /* wait status, once reaped */
    int wait_errno; /* non-zero when waitpid failed instead (the child was reaped elsewhere) */
} cs_child;

/* Moves fd to a number >= 4 (close-on-exec) and closes the original, so a child's dup2 onto 0-3
 * never collides with another source fd and always is a real dup (one that clears O_CLOEXEC).
 * Returns the fd (fd itself when already > 3), or -1 with errno. */
int cs_child_fd_above_3(int fd);

/* Spawns file (looked up on PATH when it has no '/') with argv and our environment. The child
 * gets an empty signal mask and SIGHUP, SIGINT, SIGQUIT, SIGPIPE and SIGTERM at their defaults:
 * corestreamd blocks SIGINT/SIGTERM in every thread and ignores SIGPIPE, and a child must get them
 * back, or a stop signal does nothing and a writer whose reader went away spins on EPIPE. Fds
 * keep_fds and above are closed in the child where the C library can (glibc >= 2.34), like Go's
 * exec. With new_pgroup it leads a process group of its own. fa (required, still the caller's)
 * holds the caller's dup2/open/chdir actions; the close is appended to it.
 * Returns 0 with *c a fresh, unreaped child (pidfd -1 where the kernel has none), or the
 * posix_spawn error number with c->pid = -1. */
int cs_child_spawn(cs_child *c, const char *file, char *const argv[], posix_spawn_file_actions_t *fa, int keep_fds,
                   bool new_pgroup);

/* Waits until the child is reaped (1), the monotonic deadline passes (0; < 0 means none), or
 * cancel fires (-1; NULL: not cancellable). While waiting it reads and drops whatever arrives on
 * drain_fd (>= 0), so a child blocked writing to us can reach its signal handler. */
int cs_child_wait(cs_child *c, int64_t deadline, cs_cancel *cancel, int drain_fd);

/* Reaped with exit status 0. */
bool cs_child_exited_ok(const cs_child *c);

/* How a reaped child ended, as os.ProcessState.String says it with Go's signal names ("exit status
 * N", "signal: killed", "signal: aborted (core dumped)"), or "wait: <strerror>" when the wait
 * itself failed. */
void cs_child_status_string(const cs_child *c, char *buf, size_t len);

#endif
