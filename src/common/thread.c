#include "common/thread.h"

#include <pthread.h>
#include <stdio.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <unistd.h>

void cs_thread_nice(int nice)
{
    /* Linux applies PRIO_PROCESS with a thread id to that thread alone. */
    if (nice > 0)
        (void)setpriority(PRIO_PROCESS, (id_t)syscall(SYS_gettid), nice);
}

void cs_thread_role(const char *name, int nice)
{
    /* The priority comes first, so a thread that shows its role's name already runs at its
     * role's priority. */
    cs_thread_nice(nice);
    char comm[16];
    snprintf(comm, sizeof comm, "%s", name);
    (void)pthread_setname_np(pthread_self(), comm);
}
