/* SPDX-License-Identifier: Apache-2.0 */
#include "common/thread.h"

#include <errno.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <unistd.h>

static atomic_int g_background = CS_NICE_BACKGROUND_DEFAULT;

int cs_thread_background_nice(void)
{
    return atomic_load_explicit(&g_background, memory_order_relaxed);
}

void cs_thread_set_background_nice(int steps)
{
    atomic_store_explicit(&g_background, steps < 0 ? 0 : steps > 19 ? 19 : steps, memory_order_relaxed);
}

void cs_thread_nice(int steps)
{
    if (steps <= 0)
        return;
    /* Linux applies PRIO_PROCESS with a thread id to that thread alone. */
    id_t tid = (id_t)syscall(SYS_gettid);
    errno = 0;
    int now = getpriority(PRIO_PROCESS, tid);
    if (now == -1 && errno != 0)
        return;
    int want = now + steps > 19 ? 19 : now + steps;
    if (want > now)
        (void)setpriority(PRIO_PROCESS, tid, want);
}

void cs_thread_role(const char *name, int steps)
{
    /* The priority comes first, so a thread that shows its role's name already runs at its
     * role's priority. */
    cs_thread_nice(steps);
    char comm[16];
    snprintf(comm, sizeof comm, "%s", name);
    (void)pthread_setname_np(pthread_self(), comm);
}
