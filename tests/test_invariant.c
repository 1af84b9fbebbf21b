/* SPDX-License-Identifier: Apache-2.0 */
/* The always-on checks (common/invariant.h): owner records claimed at first use, bound and
 * released; a checked call on its owner's thread passes, on any other thread the process logs
 * `thread contract violated`, naming the contract, the file and line and both threads, and aborts.
 * Each abort is a forked child's (its output read back through a pipe, its end seen by waitpid):
 * the generic record, the streaming core's cursor, level control, encoder pool and ledger hasher,
 * the ring's single writer, and CS_CHECK's `invariant violated`. Checks that are debug-only are seen to abort
 * in a Debug build and to pass under NDEBUG. */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <errno.h>
#include <limits.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/uio.h>
#include <sys/wait.h>
#include <unistd.h>

#include "common/invariant.h"
#include "wire/wire.h"
#include "corestreamd/stream/broadcast.h"
#include "corestreamd/stream/compress.h"
#include "corestreamd/stream/cursor.h"
#include "corestreamd/stream/ledgerhash.h"
#include "corestreamd/stream/levelctl.h"
#include "corestreamd/stream/replayslots.h"
#include "store/ring.h"
#include "support/tmpdir.h"

/* ---- a child that may abort ----------------------------------------------------------------- */

/* In a child (and its threads) a failed expectation must not reach cmocka, whose jump would run
 * the rest of the suite in the child: it says what failed and exits 3. */
#define CHILD_CHECK(cond)                                                                              \
    do {                                                                                               \
        if (!(cond)) {                                                                                 \
            fprintf(stderr, "child: %s:%d: %s failed\n", __FILE__, __LINE__, #cond);                   \
            fflush(stderr);                                                                            \
            _exit(3);                                                                                  \
        }                                                                                              \
    } while (0)

typedef struct outcome {
    pid_t pid;     /* the child's, which is its main thread's id */
    bool aborted;  /* ended by SIGABRT */
    int exit_code; /* when it exited: 0 once its function returned */
    char out[16384]; /* what it wrote to stdout and stderr */
} outcome;

/* Runs fn(arg) in a forked child whose stdout and stderr (the logger writes to stdout) come back
 * here; the child exits 0 when fn returns. No core file, and a minute at most. */
static void run_child(void (*fn)(void *), void *arg, outcome *o)
{
    memset(o, 0, sizeof *o);
    int p[2];
    assert_int_equal(pipe(p), 0);
    fflush(stdout); /* nothing buffered here may come out of the child too */
    fflush(stderr);
    pid_t pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) {
        close(p[0]);
        struct rlimit none = {0, 0};
        setrlimit(RLIMIT_CORE, &none);
        alarm(60);
        dup2(p[1], STDOUT_FILENO);
        dup2(p[1], STDERR_FILENO);
        close(p[1]);
        fn(arg);
        fflush(stdout);
        _exit(0);
    }
    close(p[1]);
    o->pid = pid;
    size_t got = 0;
    for (;;) {
        ssize_t n = read(p[0], o->out + got, sizeof o->out - 1 - got);
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0)
            break;
        got += (size_t)n;
        if (got == sizeof o->out - 1)
            break;
    }
    o->out[got] = '\0';
    close(p[0]);
    int st;
    pid_t r;
    do
        r = waitpid(pid, &st, 0);
    while (r < 0 && errno == EINTR);
    assert_int_equal(r, pid);
    o->aborted = WIFSIGNALED(st) && WTERMSIG(st) == SIGABRT;
    o->exit_code = WIFEXITED(st) ? WEXITSTATUS(st) : -1;
}

static void assert_has(const outcome *o, const char *want)
{
    if (!strstr(o->out, want))
        fail_msg("child output lacks %s; it was:\n%s", want, o->out);
}

/* The child ended by its check: one ERROR line naming contract (as logfmt quotes it), the file
 * where it was checked, and both threads: the calling one (named other) and the child's main
 * thread, the owner. */
static void assert_contract_abort(const outcome *o, const char *contract, const char *file)
{
    if (!o->aborted)
        fail_msg("the child did not abort (exit %d); it wrote:\n%s", o->exit_code, o->out);
    char want[512];
    assert_has(o, "level=ERROR msg=\"thread contract violated\"");
    snprintf(want, sizeof want, "contract=\"%s\"", contract);
    assert_has(o, want);
    snprintf(want, sizeof want, " at=%s:", file);
    assert_has(o, want);
    assert_has(o, " thread_name=inv-other ");
    snprintf(want, sizeof want, " owner=%d owner_name=test_invarian", (int)o->pid); /* comm: 15 bytes */
    assert_has(o, want);
    assert_true(strstr(o->out, " thread=") != NULL);
}

static void assert_passed(const outcome *o)
{
    if (o->aborted || o->exit_code != 0)
        fail_msg("the child failed (aborted %d, exit %d); it wrote:\n%s", o->aborted, o->exit_code, o->out);
    assert_null(strstr(o->out, "violated"));
}

/* Runs fn(arg) on a new thread named inv-other, and waits for it. */
static void on_other_thread(void *(*fn)(void *), void *arg)
{
    pthread_t t;
    CHILD_CHECK(pthread_create(&t, NULL, fn, arg) == 0);
    CHILD_CHECK(pthread_join(t, NULL) == 0);
}

static void name_other(void)
{
    pthread_setname_np(pthread_self(), "inv-other");
}

/* ---- the mechanism -------------------------------------------------------------------------- */

static cs_owner g_owner;

static void *check_g_owner(void *arg)
{
    (void)arg;
    name_other();
    CS_OWNED(&g_owner, "the test's record: its owner only");
    return NULL;
}

static void *bind_g_owner(void *arg)
{
    (void)arg;
    cs_owner_bind(&g_owner);
    CS_OWNED(&g_owner, "the test's record: its owner only");
    return NULL;
}

static void *owner_is_other(void *arg)
{
    *(bool *)arg = cs_owner_mine(&g_owner);
    return NULL;
}

/* In this process: claim at first use, the owner's checks pass, a bind hands over, a release
 * unbinds; the owner is the only thread cs_owner_mine answers for. */
static void test_owner_claim_bind_release(void **state)
{
    (void)state;
    cs_owner o = CS_OWNER_INIT;
    assert_false(cs_owner_bound(&o));
    assert_false(cs_owner_mine(&o));
    CS_OWNED(&o, "claimed here");
    assert_true(cs_owner_bound(&o));
    assert_true(cs_owner_mine(&o));
    CS_OWNED(&o, "still mine");
    cs_owner_release(&o, "mine to release");
    assert_false(cs_owner_bound(&o));
    cs_owner_release(&o, "an unbound record: nothing to give up");

    memset(&g_owner, 0, sizeof g_owner);
    CS_OWNED(&g_owner, "mine");
    bool mine = true;
    on_other_thread(owner_is_other, &mine);
    assert_false(mine); /* this thread's, not the other's */
    on_other_thread(bind_g_owner, NULL);
    assert_false(cs_owner_mine(&g_owner)); /* the other thread took it */
    cs_owner_bind(&g_owner);
    assert_true(cs_owner_mine(&g_owner));
    CS_CHECK(1 + 1 == 2, "arithmetic");
    CS_DCHECK(1 + 1 == 2, "arithmetic");
}

static void owned_then_checked_elsewhere(void *arg)
{
    (void)arg;
    memset(&g_owner, 0, sizeof g_owner);
    CS_OWNED(&g_owner, "the test's record: its owner only"); /* claimed by the child's main thread */
    on_other_thread(check_g_owner, NULL);
}

static void owned_then_released(void *arg)
{
    (void)arg;
    memset(&g_owner, 0, sizeof g_owner);
    CS_OWNED(&g_owner, "the test's record: its owner only");
    cs_owner_release(&g_owner, "the test's record: its owner only");
    on_other_thread(check_g_owner, NULL); /* claims it */
    CHILD_CHECK(!cs_owner_mine(&g_owner));
}

static void test_wrong_thread_aborts_naming_both(void **state)
{
    (void)state;
    outcome o;
    run_child(owned_then_checked_elsewhere, NULL, &o);
    assert_contract_abort(&o, "the test's record: its owner only", "tests/test_invariant.c");
    run_child(owned_then_released, NULL, &o);
    assert_passed(&o);
}

static void invariant_broken(void *arg)
{
    int mode = *(int *)arg;
    CS_CHECK(mode != 1, "the test's mode is not 1");
}

static void test_check_aborts_naming_the_invariant(void **state)
{
    (void)state;
    outcome o;
    int mode = 1;
    run_child(invariant_broken, &mode, &o);
    assert_true(o.aborted);
    assert_has(&o, "level=ERROR msg=\"invariant violated\" ");
    assert_has(&o, " what=\"the test's mode is not 1\" check=\"mode != 1\" at=tests/test_invariant.c:");
    assert_has(&o, " func=invariant_broken ");
    mode = 2;
    run_child(invariant_broken, &mode, &o);
    assert_passed(&o);
}

/* ---- level control: the source thread's ---------------------------------------------------- */

static cs_level_ctl g_ctl;

static void *pick_level(void *arg)
{
    (void)arg;
    name_other();
    cs_level_load l = {.bytes = 262144, .idle = 1};
    (void)cs_level_ctl_pick(&g_ctl, &l);
    return NULL;
}

static void *observe_level(void *arg)
{
    (void)arg;
    name_other();
    cs_level_ctl_observe(&g_ctl, 1, 262144, 100000);
    return NULL;
}

static void level_ctl_on_two_threads(void *arg)
{
    bool observe = *(bool *)arg;
    cs_level_ctl_init(&g_ctl, 4);
    cs_level_load l = {.bytes = 262144, .idle = 1};
    (void)cs_level_ctl_pick(&g_ctl, &l);
    cs_level_ctl_observe(&g_ctl, 1, 262144, 100000);
    on_other_thread(observe ? observe_level : pick_level, NULL);
}

static void level_ctl_one_thread(void *arg)
{
    (void)arg;
    cs_level_ctl_init(&g_ctl, 4);
    cs_level_load l = {.bytes = 262144, .idle = 1};
    for (int i = 0; i < 100; i++) {
        (void)cs_level_ctl_pick(&g_ctl, &l);
        cs_level_ctl_observe(&g_ctl, g_ctl.level, 262144, 100000);
    }
}

static void test_level_control_is_one_threads(void **state)
{
    (void)state;
    const char *contract = "level control: one thread picks and observes, the source's (levelctl.h)";
    outcome o;
    bool observe = false;
    run_child(level_ctl_on_two_threads, &observe, &o);
    assert_contract_abort(&o, contract, "src/corestreamd/stream/levelctl.c");
    assert_has(&o, " func=cs_level_ctl_pick ");
    observe = true;
    run_child(level_ctl_on_two_threads, &observe, &o);
    assert_contract_abort(&o, contract, "src/corestreamd/stream/levelctl.c");
    assert_has(&o, " func=cs_level_ctl_observe ");
    run_child(level_ctl_one_thread, NULL, &o);
    assert_passed(&o);
}

/* ---- the encoder pool: one submitting thread ------------------------------------------------ */

static cs_chunk_pipeline *g_pipe;

static void drop_chunk(void *ctx, cs_msg *chunk)
{
    (void)ctx;
    cs_msg_release(chunk);
}

static cs_msg *raw_chunk(void)
{
    cs_msg *m = cs_msg_new(CS_WIRE_CHUNK_HEADER_LEN + 64);
    CHILD_CHECK(m != NULL);
    memset(m->data, 'x', CS_WIRE_CHUNK_HEADER_LEN + 64);
    m->len = CS_WIRE_CHUNK_HEADER_LEN + 64;
    return m;
}

static void *submit_one(void *arg)
{
    bool take = *(bool *)arg;
    name_other();
    if (take)
        cs_pipeline_take_submitter(g_pipe);
    cs_pipeline_submit(g_pipe, raw_chunk(), 2, 0);
    cs_pipeline_flush(g_pipe);
    return NULL;
}

static void pipeline_on_two_threads(void *arg)
{
    cs_err err;
    CHILD_CHECK(cs_pipeline_new(&g_pipe, 1, false, 0, 65536, drop_chunk, NULL, &err) == 0);
    cs_pipeline_submit(g_pipe, raw_chunk(), 1, 0);
    on_other_thread(submit_one, arg);
    cs_pipeline_destroy(g_pipe); /* takes the role: the submitter is done */
}

static void test_encoder_pool_has_one_submitter(void **state)
{
    (void)state;
    outcome o;
    bool take = false;
    run_child(pipeline_on_two_threads, &take, &o);
    assert_contract_abort(&o, "encoder pool: one submitting thread, which flushes (compress.h)",
                          "src/corestreamd/stream/compress.c");
    take = true; /* a hand-over: the other thread takes the role, destroy takes it back */
    run_child(pipeline_on_two_threads, &take, &o);
    assert_passed(&o);
}

/* ---- the ledger hasher: one feeder --------------------------------------------------------- */

static cs_hasher *g_hasher;

static void feed_one(void)
{
    cs_msg *m = raw_chunk();
    cs_hasher_add(g_hasher, m, m->data + CS_WIRE_CHUNK_HEADER_LEN, 64);
    cs_msg_release(m);
}

static void *feed_elsewhere(void *arg)
{
    (void)arg;
    name_other();
    feed_one();
    return NULL;
}

static void hasher_fed(void *arg)
{
    bool other = *(bool *)arg;
    cs_err err;
    CHILD_CHECK(cs_hasher_new(&g_hasher, &err) == 0);
    cs_hasher_begin(g_hasher);
    if (other)
        on_other_thread(feed_elsewhere, NULL);
    else
        feed_one();
    uint8_t sha[32];
    CHILD_CHECK(cs_hasher_finish(g_hasher, sha, &err) == 0);
    cs_hasher_free(g_hasher);
}

static void test_ledger_hasher_has_one_feeder(void **state)
{
    (void)state;
    outcome o;
    bool other = false;
    run_child(hasher_fed, &other, &o); /* begin, add, finish and free on one thread */
    assert_passed(&o);
    other = true; /* an add from another thread */
    run_child(hasher_fed, &other, &o);
    assert_contract_abort(&o, "ledger hasher: begin, add, finish and free on the source loop's thread (ledgerhash.h)",
                          "src/corestreamd/stream/ledgerhash.c");
    assert_has(&o, " func=cs_hasher_add ");
}

/* ---- the ring: a single writer -------------------------------------------------------------- */

typedef struct ring_case {
    char dir[PATH_MAX + 16];
    cs_ring *ring;
    bool take;      /* the other thread takes the put thread's role first */
    bool main_again; /* then the main thread puts again, without taking it back */
    bool set_direct; /* the other thread only sets direct (a debug-only check) */
} ring_case;

static void put(cs_ring *r, uint32_t seq)
{
    char data[100];
    memset(data, (int)('a' + seq % 26), sizeof data);
    struct iovec iov = {data, sizeof data};
    cs_ledger_record rec = {.len = sizeof data};
    cs_err err;
    bool reset;
    CHILD_CHECK(cs_ring_put(r, seq, &iov, 1, NULL, 0, &rec, &reset, &err) == 0);
}

static void *ring_other(void *arg)
{
    ring_case *rc = arg;
    name_other();
    if (rc->set_direct) {
        cs_ring_set_direct(rc->ring, false);
        return NULL;
    }
    if (rc->take)
        cs_ring_take_put_thread(rc->ring);
    put(rc->ring, 2);
    return NULL;
}

static void ring_puts(void *arg)
{
    ring_case *rc = arg;
    cs_err err;
    CHILD_CHECK(cs_ring_open(&rc->ring, rc->dir, 10, &err) == 0);
    put(rc->ring, 1);
    on_other_thread(ring_other, rc);
    if (rc->main_again)
        put(rc->ring, 3);
    cs_ring_close(rc->ring);
}

static void test_ring_put_has_a_single_writer(void **state)
{
    (void)state;
    const char *contract = "ring put: single writer, the put thread only (ring.h)";
    cs_tmpdir root;
    assert_int_equal(cs_tmpdir_make(&root, "invariant"), 0);
    outcome o;
    ring_case rc = {0};

    cs_tmpdir_join(&root, "a", rc.dir, sizeof rc.dir);
    run_child(ring_puts, &rc, &o); /* main puts 1, another thread 2 */
    assert_contract_abort(&o, contract, "src/store/ringput.c");
    assert_has(&o, " func=cs_ring_put ");

    cs_tmpdir_join(&root, "b", rc.dir, sizeof rc.dir);
    rc.take = true; /* the other takes the role (a ring writer starting): its put passes */
    run_child(ring_puts, &rc, &o);
    assert_passed(&o);

    cs_tmpdir_join(&root, "c", rc.dir, sizeof rc.dir);
    rc.main_again = true; /* the role was taken from main: main's next put aborts */
    run_child(ring_puts, &rc, &o);
    if (!o.aborted)
        fail_msg("main's put after the hand-over passed:\n%s", o.out);
    assert_has(&o, "contract=\"ring put: single writer, the put thread only (ring.h)\"");
    assert_has(&o, " thread_name=test_invarian"); /* the caller is main now, the owner the other */
    assert_has(&o, " owner_name=?\n"); /* which has exited */

    rc = (ring_case){.set_direct = true};
    cs_tmpdir_join(&root, "d", rc.dir, sizeof rc.dir);
    run_child(ring_puts, &rc, &o); /* set_direct off the put thread: checked in debug builds only */
#ifdef NDEBUG
    assert_passed(&o);
#else
    assert_contract_abort(&o, contract, "src/store/ringput.c");
    assert_has(&o, " func=cs_ring_set_direct ");
#endif
    assert_int_equal(cs_tmpdir_remove(&root), 0);
}

/* ---- the cursor: its subscriber's stream I/O thread ----------------------------------------- */

typedef struct cursor_case {
    cs_broadcaster *bc;
    cs_replay_slots *slots;
    atomic_uint_fast64_t abandons;
    cs_cursor c;
    bool leave; /* main gives the cursor up before the other thread steps it */
} cursor_case;

static void *step_cursor(void *arg)
{
    cursor_case *cc = arg;
    name_other();
    cs_step st;
    cs_cursor_step(&cc->c, 1, &st);
    CHILD_CHECK(st.kind == CS_STEP_WAIT); /* nothing published yet */
    if (cc->leave)
        cs_cursor_destroy(&cc->c); /* taken by its step: this thread's to destroy */
    return NULL;
}

static void cursor_on_two_threads(void *arg)
{
    cursor_case *cc = arg;
    cc->bc = cs_broadcaster_new(NULL, NULL);
    cc->slots = cs_replay_slots_new(0, 0);
    CHILD_CHECK(cc->bc && cc->slots);
    cs_cursor_env env = {.bc = cc->bc, .slots = cc->slots, .live_abandons = &cc->abandons};
    cs_cursor_init(&cc->c, &env, 0, false, 0);
    cs_step st;
    cs_cursor_step(&cc->c, 0, &st);
    CHILD_CHECK(st.kind == CS_STEP_WAIT);
    if (cc->leave)
        cs_cursor_leave_thread(&cc->c); /* a move: the other thread takes it at its first step */
    on_other_thread(step_cursor, cc);
    if (!cc->leave)
        cs_cursor_destroy(&cc->c);
    cs_replay_slots_free(cc->slots);
    cs_broadcaster_free(cc->bc);
}

static void test_cursor_is_its_threads(void **state)
{
    (void)state;
    static cursor_case cc; /* the child's copy is the one used */
    outcome o;
    memset(&cc, 0, sizeof cc);
    run_child(cursor_on_two_threads, &cc, &o);
    assert_contract_abort(&o, "cursor: its subscriber's stream I/O thread only (cursor.h)",
                          "src/corestreamd/stream/cursor.c");
    assert_has(&o, " func=cs_cursor_step ");
    memset(&cc, 0, sizeof cc);
    cc.leave = true;
    run_child(cursor_on_two_threads, &cc, &o);
    assert_passed(&o);
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_owner_claim_bind_release),
        cmocka_unit_test(test_wrong_thread_aborts_naming_both),
        cmocka_unit_test(test_check_aborts_naming_the_invariant),
        cmocka_unit_test(test_level_control_is_one_threads),
        cmocka_unit_test(test_encoder_pool_has_one_submitter),
        cmocka_unit_test(test_ledger_hasher_has_one_feeder),
        cmocka_unit_test(test_ring_put_has_a_single_writer),
        cmocka_unit_test(test_cursor_is_its_threads),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
