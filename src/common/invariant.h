/* SPDX-License-Identifier: Apache-2.0 */
/* Invariants in code, on in the build that ships (issue 39, item 6).
 *
 * Two kinds of check, each a macro that costs a load, a compare and a branch predicted taken when
 * it holds:
 *
 *   CS_CHECK(cond, what)        an invariant: cond holds here. what names it in words.
 *   CS_OWNED(owner, contract)   a thread contract: the calling thread is owner's (a cs_owner,
 *                               below). contract names the rule as its header states it.
 *
 * These two are compiled into every build, Release and RelWithDebInfo too (NDEBUG does not remove
 * them), in the manner of redis keeping serverAssert on where it guards data: they stand where a
 * breach means state about to be raced on, freed twice or left pointing at freed memory, and
 * carrying on would corrupt what subscribers are sent or what the ring stores. The rule for
 * choosing: a check that guards data and costs no more than a compare is always on.
 *
 *   CS_DCHECK(cond, what), CS_OWNED_DEBUG(owner, contract)
 *
 * are the same checks compiled only without NDEBUG (the Debug, ASan and TSan builds): for stated
 * contracts whose breach corrupts nothing by itself, and for checks that cost more than a compare.
 * Under NDEBUG they evaluate nothing.
 *
 * A violation writes one ERROR line through the process logger (common/log.h; stdout unless the
 * program configured otherwise, the journal under systemd) and aborts (SIGABRT, a core dump where
 * the system keeps them):
 *
 *   time=… level=ERROR msg="thread contract violated" pid=4200 contract="cursor: its
 *     subscriber's stream I/O thread only (cursor.h)" at=src/corestreamd/stream/cursor.c:352
 *     func=cs_cursor_step thread=4242 thread_name=cs-ws-bulk owner=4240 owner_name=cs-ws-0
 *   time=… level=ERROR msg="invariant violated" pid=4200 what="cursor: a replay exactly in
 *     REPLAY" check="(c->mode == CS_CUR_REPLAY) == (c->replay != NULL)"
 *     at=src/corestreamd/stream/cursor.c:331 func=check_state thread=4240 thread_name=cs-ws-0
 * (one line each; wrapped here). The contract strings end with the header that states the rule.
 *
 * thread and owner are kernel thread ids, as `top -H`, `ps -L` and /proc/<pid>/task show them;
 * the names are the threads' (common/thread.h), "?" for an owner that has exited.
 *
 * Owner records. A cs_owner holds its owning thread's id, 0 while it has none. The caller's id is
 * a thread-local read with one load (a gettid the first time a thread asks), so CS_OWNED is a
 * thread-local load, a relaxed atomic load and a compare. A record is
 *   - unbound when zeroed (a calloc'd or memset struct, CS_OWNER_INIT) or released: the first
 *     CS_OWNED on it claims it for the calling thread ("set at first use"). CS_OWNED_DEBUG never
 *     claims: on an unbound record it passes (so a debug-only check cannot change who owns what
 *     between builds);
 *   - bound by cs_owner_bind: the calling thread owns it from now on, whoever did before. That is a
 *     hand-over, and it must be synchronised by its caller (a pthread_join, a thread's start, a
 *     mutexed queue): a thread that goes on using the record after it was taken from it is
 *     caught at its next check;
 *   - released by cs_owner_release (its owner only, checked): unbound again, for a hand-over
 *     through a queue where the next thread's first check claims it.
 * Limits: the kernel reuses a thread's id after it exits, so a thread started after the owner
 * ended may pass as it (a missed report, never a false one). A forked child's one thread has an
 * id of its own (the cached one is dropped at fork): what the forking thread owned, the child
 * binds again before it uses it (nothing here forks without exec; the tests' children do). */
#ifndef CS_COMMON_INVARIANT_H
#define CS_COMMON_INVARIANT_H

#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>

typedef struct cs_owner {
    _Atomic int32_t tid; /* 0: unbound */
} cs_owner;

#define CS_OWNER_INIT {0}

/* The calling thread's id (its kernel tid), cached in a thread-local. initial-exec: one load, no
 * call, in the programs and static libraries that use it (never dlopen'd). */
extern _Thread_local int32_t cs_tl_thread_id __attribute__((tls_model("initial-exec")));
int32_t cs_thread_id_slow(void);

static inline int32_t cs_thread_id(void)
{
    int32_t id = cs_tl_thread_id;
    return __builtin_expect(id != 0, 1) ? id : cs_thread_id_slow();
}

/* The calling thread owns o from now on (a hand-over: see above). */
void cs_owner_bind(cs_owner *o);
/* o's owner gives it up (checked as CS_OWNED, contract naming the rule); the next CS_OWNED claims. */
void cs_owner_release_at(cs_owner *o, const char *contract, const char *file, int line, const char *func);
#define cs_owner_release(o, contract) cs_owner_release_at((o), (contract), __FILE__, __LINE__, __func__)

/* Whether the calling thread owns o (false while o is unbound). Any thread. */
static inline bool cs_owner_mine(const cs_owner *o)
{
    return atomic_load_explicit(&((cs_owner *)o)->tid, memory_order_relaxed) == cs_thread_id();
}

/* Whether o has an owner now. Any thread. */
static inline bool cs_owner_bound(const cs_owner *o)
{
    return atomic_load_explicit(&((cs_owner *)o)->tid, memory_order_relaxed) != 0;
}

/* The slow paths, out of line: claim an unbound record (claim true; returns), or report and abort. */
void cs_owner_mismatch(cs_owner *o, int32_t me, bool claim, const char *contract, const char *file, int line,
                       const char *func);
_Noreturn void cs_check_failed(const char *what, const char *cond, const char *file, int line, const char *func);

#define CS_OWNED_(o, contract, claim)                                                                  \
    do {                                                                                               \
        cs_owner *cs_o_ = (o);                                                                         \
        int32_t cs_me_ = cs_thread_id();                                                               \
        if (__builtin_expect(atomic_load_explicit(&cs_o_->tid, memory_order_relaxed) != cs_me_, 0))    \
            cs_owner_mismatch(cs_o_, cs_me_, (claim), (contract), __FILE__, __LINE__, __func__);       \
    } while (0)

#define CS_OWNED(o, contract) CS_OWNED_((o), (contract), true)

#define CS_CHECK(cond, what)                                                                           \
    do {                                                                                               \
        if (__builtin_expect(!(cond), 0))                                                              \
            cs_check_failed((what), #cond, __FILE__, __LINE__, __func__);                              \
    } while (0)

#ifdef NDEBUG
#define CS_OWNED_DEBUG(o, contract) ((void)sizeof((o)), (void)sizeof((contract)))
#define CS_DCHECK(cond, what) ((void)sizeof(!(cond)), (void)sizeof((what)))
#else
#define CS_OWNED_DEBUG(o, contract) CS_OWNED_((o), (contract), false)
#define CS_DCHECK(cond, what) CS_CHECK((cond), (what))
#endif

#endif
