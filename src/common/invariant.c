/* SPDX-License-Identifier: Apache-2.0 */
#include "common/invariant.h"

#include <fcntl.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "common/log.h"

_Thread_local int32_t cs_tl_thread_id __attribute__((tls_model("initial-exec")));

/* A forked child's one thread is a new thread with its own id: the value cached in the forking
 * thread's thread-local is dropped. */
static void forget_id_in_child(void)
{
    cs_tl_thread_id = 0;
}

static void register_atfork(void)
{
    (void)pthread_atfork(NULL, NULL, forget_id_in_child);
}

int32_t cs_thread_id_slow(void)
{
    static pthread_once_t once = PTHREAD_ONCE_INIT;
    pthread_once(&once, register_atfork);
    int32_t id = (int32_t)syscall(SYS_gettid);
    cs_tl_thread_id = id;
    return id;
}

/* The path from the source tree's src/ (or tests/) on: __FILE__ is absolute in a CMake build. */
static const char *short_path(const char *file)
{
    const char *best = NULL;
    for (const char *p = file; (p = strstr(p, "/src/")) != NULL; p++)
        best = p + 1;
    if (!best)
        for (const char *p = file; (p = strstr(p, "/tests/")) != NULL; p++)
            best = p + 1;
    return best ? best : file;
}

/* A thread's name from /proc (the kernel's comm); "?" when it cannot be read (the thread exited). */
static void thread_name(int32_t tid, char *buf, size_t len)
{
    snprintf(buf, len, "?");
    char path[64];
    snprintf(path, sizeof path, "/proc/self/task/%d/comm", (int)tid);
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0)
        return;
    ssize_t n = read(fd, buf, len - 1);
    close(fd);
    if (n <= 0) {
        snprintf(buf, len, "?");
        return;
    }
    buf[n] = '\0';
    buf[strcspn(buf, "\n")] = '\0';
}

static void own_name(char *buf, size_t len)
{
    if (pthread_getname_np(pthread_self(), buf, len) != 0)
        thread_name(cs_thread_id(), buf, len);
}

_Noreturn static void owner_violated(int32_t owner, int32_t me, const char *contract, const char *file, int line,
                                     const char *func)
{
    char at[512], mine[32], theirs[32];
    snprintf(at, sizeof at, "%s:%d", short_path(file), line);
    own_name(mine, sizeof mine);
    thread_name(owner, theirs, sizeof theirs);
    CS_LOG(CS_LOG_ERROR, "thread contract violated", KV_S("contract", contract), KV_S("at", at), KV_S("func", func),
           KV_I("thread", me), KV_S("thread_name", mine), KV_I("owner", owner), KV_S("owner_name", theirs));
    abort();
}

void cs_owner_mismatch(cs_owner *o, int32_t me, bool claim, const char *contract, const char *file, int line,
                       const char *func)
{
    int32_t owner = atomic_load(&o->tid);
    if (owner == 0) {
        if (!claim)
            return; /* a debug check on an unbound record: nothing to compare with */
        /* First use: claimed, unless another thread claimed it a moment before. */
        if (atomic_compare_exchange_strong(&o->tid, &owner, me))
            return;
    }
    if (owner == me)
        return; /* a release and a claim raced with the fast path's load; it is ours */
    owner_violated(owner, me, contract, file, line, func);
}

void cs_owner_bind(cs_owner *o)
{
    atomic_store(&o->tid, cs_thread_id());
}

void cs_owner_release_at(cs_owner *o, const char *contract, const char *file, int line, const char *func)
{
    int32_t me = cs_thread_id();
    int32_t owner = me;
    if (!atomic_compare_exchange_strong(&o->tid, &owner, 0) && owner != 0)
        owner_violated(owner, me, contract, file, line, func);
}

_Noreturn void cs_check_failed(const char *what, const char *cond, const char *file, int line, const char *func)
{
    char at[512], mine[32];
    snprintf(at, sizeof at, "%s:%d", short_path(file), line);
    own_name(mine, sizeof mine);
    CS_LOG(CS_LOG_ERROR, "invariant violated", KV_S("what", what), KV_S("check", cond), KV_S("at", at),
           KV_S("func", func), KV_I("thread", cs_thread_id()), KV_S("thread_name", mine));
    abort();
}
