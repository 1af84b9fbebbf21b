/* One child process being waited for: a pidfd where the kernel has one, waitpid otherwise. Shared
 * by the pipe tap and captive core. */
#ifndef CS_COMMON_CHILD_H
#define CS_COMMON_CHILD_H

#include <stdbool.h>
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

/* Waits until the child is reaped (1), the monotonic deadline passes (0; < 0 means none), or
 * cancel fires (-1; NULL: not cancellable). While waiting it reads and drops whatever arrives on
 * drain_fd (>= 0), so a child blocked writing to us can reach its signal handler. */
int cs_child_wait(cs_child *c, int64_t deadline, cs_cancel *cancel, int drain_fd);

#endif
