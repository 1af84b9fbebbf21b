/* SPDX-License-Identifier: Apache-2.0 */
/* The pipe tap end to end through cs_pipe_source_new (PORTSPEC 1.4e; catalogue 90-94), and the
 * frame reader's own edges: framing errors, the cap, early body delivery, cancellation, teardown
 * of the command's process group and the child's inherited state. */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "corestream/wire.h"
#include "common/cancel.h"
#include "common/clock.h"
#include "corestreamd/sources/pipe/framereader.h"
#include "corestreamd/sources/pipe/pipe.h"
#include "common/log.h"
#include "support/logcapture.h"
#include "support/metabuild.h"
#include "support/procharness.h"
#include "support/tmpdir.h"
#include "support/wait.h"

/* ---- fixture ------------------------------------------------------------------------------ */

typedef cs_dir_fixture fixture;

/* The source's log is captured per test: teardown's WARN says when a command outlived its grace. */
static int setup(void **state)
{
    if (cs_logcap_start(CS_LOG_INFO) != 0)
        return -1;
    return cs_dir_fixture_setup(state, "pipesource");
}

static int teardown(void **state)
{
    cs_logcap_stop();
    return cs_dir_fixture_teardown(state);
}

#define KILLED_AFTER_GRACE "pipe source: command did not stop after SIGTERM; killing it"

/* Teardown ended the command with the group's SIGTERM (or the closed pipe), not with the SIGKILL
 * that follows the grace: an order of events, where a duration would only say the machine was
 * quick. */
static void assert_stopped_without_the_grace(void)
{
    assert_int_equal(cs_logcap_count(KILLED_AFTER_GRACE), 0);
}

static void path_in(const fixture *f, const char *name, char *out, size_t len)
{
    snprintf(out, len, "%s/%s", f->root, name);
}

static void write_file(const char *path, const void *data, size_t len)
{
    FILE *fp = fopen(path, "wb");
    assert_non_null(fp);
    assert_int_equal(fwrite(data, 1, len, fp), len);
    assert_int_equal(fclose(fp), 0);
}

/* ---- metas and frames --------------------------------------------------------------------- */

/* The Go fixture's LedgerCloseMeta (support/metabuild.h): optional ext v1, `upgrades` upgrades of
 * 5+i bytes, an optional signed StellarValue with a 7-byte signature, then `tail` bytes of varied
 * filler standing in for the tx set and the rest of the meta. */
static void meta(cs_mb_buf *b, uint32_t version, uint32_t seq, bool signed_scp, uint32_t upgrades,
                 bool ext_v1, size_t tail)
{
    cs_mb_meta m = cs_mb_go_meta(version, seq, signed_scp, upgrades, ext_v1, tail);
    cs_mb_put_meta(b, &m);
}

/* Reads the body of the current emission in pieces of `piece` bytes into out. Returns the bytes
 * read, or -1 with *err set at the failure (out then holds what was read before it). */
static ssize_t read_body(cs_source *src, cs_mb_buf *out, size_t piece, cs_err *err)
{
    uint8_t *tmp = malloc(piece);
    assert_non_null(tmp);
    for (;;) {
        ssize_t k = src->ops->read(src, tmp, piece, err);
        if (k < 0) {
            free(tmp);
            return -1;
        }
        if (k == 0)
            break;
        assert_true((size_t)k <= piece);
        cs_mb_put(out, tmp, (size_t)k);
    }
    free(tmp);
    return (ssize_t)out->n;
}

static cs_source *start(fixture *f, const char *cmd)
{
    cs_source *src = NULL;
    cs_err err = {0};
    if (cs_pipe_source_new(&src, cmd, 0, &f->cancel, &err) != 0)
        fail_msg("cs_pipe_source_new: %s", err.msg);
    return src;
}

/* Runs `cat <file> >&3` over a stream file and expects next() to fail with want. */
static void expect_next_error(fixture *f, const cs_mb_buf *stream, const char *want)
{
    char path[600], cmd[700];
    path_in(f, "stream.bin", path, sizeof path);
    write_file(path, stream->p, stream->n);
    snprintf(cmd, sizeof cmd, "cat '%s' >&3", path);
    cs_source *src = start(f, cmd);
    cs_emission em = {.seq = 99};
    cs_err err = {0};
    assert_int_equal(src->ops->next(src, &em, &err), -1);
    assert_int_not_equal(err.kind, CS_ERR_CANCELLED);
    assert_string_equal(err.msg, want);
    assert_int_equal(em.seq, 0);
    src->ops->destroy(src);
}

/* ---- catalogue 90-94 ---------------------------------------------------------------------- */

/* 90: three framed metas through `cat frames >&3`: seqs 101..103, sizes, exact bodies, clean end. */
static void test_streams_framed_metas(void **state)
{
    fixture *f = *state;
    cs_mb_buf stream = {0};
    cs_mb_buf want[3] = {{0}};
    size_t tails[3] = {0, 10000, 3 << 20}; /* under the prefix, past it, and past the 1 MiB buffer */
    for (uint32_t i = 0; i < 3; i++) {
        meta(&want[i], 1, 101 + i, i % 2 == 0, i, true, tails[i]);
        cs_mb_put_record(&stream, want[i].p, want[i].n);
    }
    char path[600], cmd[700];
    path_in(f, "frames.bin", path, sizeof path);
    write_file(path, stream.p, stream.n);
    snprintf(cmd, sizeof cmd, "cat '%s' >&3", path);

    cs_source *src = start(f, cmd);
    size_t pieces[3] = {1, 4095, 262144};
    for (uint32_t i = 0; i < 3; i++) {
        cs_emission em;
        cs_err err = {0};
        assert_int_equal(src->ops->next(src, &em, &err), 1);
        assert_int_equal(em.seq, 101 + i);
        assert_int_equal(em.declared_size, want[i].n);
        cs_mb_buf got = {0};
        if (read_body(src, &got, pieces[i], &err) < 0)
            fail_msg("frame %u: %s", i, err.msg);
        assert_int_equal(got.n, want[i].n);
        assert_memory_equal(got.p, want[i].p, want[i].n);
        /* The end of the body stays the end. */
        uint8_t x;
        assert_int_equal(src->ops->read(src, &x, 1, &err), 0);
        cs_mb_free(&got);
        cs_mb_free(&want[i]);
    }
    cs_emission em;
    cs_err err = {0};
    assert_int_equal(src->ops->next(src, &em, &err), 0);
    assert_int_equal(src->ops->next(src, &em, &err), 0);
    src->ops->destroy(src);
    cs_mb_free(&stream);
}

/* 91: a command that fails before writing anything surfaces its exit status, no emission. */
static void test_child_failure_surfaces(void **state)
{
    fixture *f = *state;
    cs_source *src = start(f, "exit 7");
    cs_emission em;
    cs_err err = {0};
    assert_int_equal(src->ops->next(src, &em, &err), -1);
    assert_int_not_equal(err.kind, CS_ERR_CANCELLED);
    assert_string_equal(err.msg, "pipe source: \"exit 7\" exited: exit status 7");
    src->ops->destroy(src);

    /* Death by signal reads like Go's ExitError. */
    src = start(f, "kill -KILL $$");
    assert_int_equal(src->ops->next(src, &em, &err), -1);
    assert_string_equal(err.msg, "pipe source: \"kill -KILL $$\" exited: signal: killed");
    src->ops->destroy(src);

    /* A command quoted Go-style in the message. */
    src = start(f, "echo \"x\"\t>/dev/null; exit 3");
    assert_int_equal(src->ops->next(src, &em, &err), -1);
    assert_string_equal(err.msg, "pipe source: \"echo \\\"x\\\"\\t>/dev/null; exit 3\" exited: exit status 3");
    src->ops->destroy(src);
}

/* 92: a frame whose marker declares 4096 bytes more than the command writes. */
static void test_truncated_frame_surfaces(void **state)
{
    fixture *f = *state;
    cs_mb_buf m = {0}, stream = {0};
    meta(&m, 1, 55, false, 0, false, 0);
    cs_mb_put_fill(&m, 0, 4096); /* past the prefix, so the shortfall lands in the body tail */
    cs_mb_put_marker(&stream, (uint32_t)(m.n + 4096));
    cs_mb_put(&stream, m.p, m.n);
    char path[600], cmd[700];
    path_in(f, "truncated.bin", path, sizeof path);
    write_file(path, stream.p, stream.n);
    snprintf(cmd, sizeof cmd, "cat '%s' >&3", path);

    cs_source *src = start(f, cmd);
    cs_emission em;
    cs_err err = {0};
    assert_int_equal(src->ops->next(src, &em, &err), 1);
    assert_int_equal(em.seq, 55);
    assert_int_equal(em.declared_size, m.n + 4096);
    cs_mb_buf got = {0};
    assert_int_equal(read_body(src, &got, 65536, &err), -1);
    assert_int_not_equal(err.kind, CS_ERR_CANCELLED);
    assert_string_equal(err.msg, "pipe source: frame truncated 4096 bytes short: unexpected EOF");
    assert_int_equal(got.n, m.n);
    assert_memory_equal(got.p, m.p, m.n);
    src->ops->destroy(src);
    cs_mb_free(&got);
    cs_mb_free(&m);
    cs_mb_free(&stream);
}

typedef struct drain_arg {
    cs_source *src;
    int done_fd; /* written once next() has returned something other than 1 */
    int rc;
    cs_err err;
    int emissions;
} drain_arg;

static void *drain(void *p)
{
    drain_arg *a = p;
    for (;;) {
        cs_emission em;
        a->rc = a->src->ops->next(a->src, &em, &a->err);
        if (a->rc != 1)
            break;
        a->emissions++;
        uint8_t tmp[4096];
        ssize_t k;
        while ((k = a->src->ops->read(a->src, tmp, sizeof tmp, &a->err)) > 0)
            ;
        if (k < 0) {
            a->rc = -2;
            break;
        }
    }
    char one = 1;
    assert_int_equal(write(a->done_fd, &one, 1), 1);
    return NULL;
}

static bool readable_within(int fd, int ms)
{
    struct pollfd pfd = {.fd = fd, .events = POLLIN};
    int r;
    while ((r = poll(&pfd, 1, ms)) < 0 && errno == EINTR)
        ;
    return r > 0;
}

/* Whether pid is a live process (not gone, not a zombie): the escaped writer, as setsid or as the
 * sleep it became. */
static bool still_running(pid_t pid)
{
    char path[64], stat[256];
    snprintf(path, sizeof path, "/proc/%d/stat", (int)pid);
    FILE *fp = fopen(path, "r");
    if (!fp)
        return false;
    bool ok = fgets(stat, sizeof stat, fp) != NULL;
    fclose(fp);
    const char *st = ok ? strrchr(stat, ')') : NULL; /* "pid (comm) S ..." */
    return st && st[1] == ' ' && st[2] != 'Z' && st[2] != 'X';
}

/* 93: a grandchild that escaped the group (setsid) holds fd 3 open, so the pipe never EOFs; the
 * iteration is still running at 200 ms, and a cancel from another thread ends it while the escaped
 * writer still runs (it would hold the pipe open for 60 s). */
static void test_cancel_unblocks_an_escaped_writer(void **state)
{
    fixture *f = *state;
    char pidfile[600], cmd[800];
    path_in(f, "sleeper.pid", pidfile, sizeof pidfile);
    snprintf(cmd, sizeof cmd, "setsid sleep 60 & echo $! > '%s'; exit 0", pidfile);
    cs_source *src = start(f, cmd);
    pid_t shell = cs_pipe_source_pid(src);
    assert_true(shell > 0);

    int done[2];
    assert_int_equal(pipe2(done, O_CLOEXEC), 0);
    drain_arg a = {.src = src, .done_fd = done[1]};
    pthread_t th;
    assert_int_equal(pthread_create(&th, NULL, drain, &a), 0);

    assert_false(readable_within(done[0], 200)); /* still blocked on the pipe */
    assert_int_equal(cs_pid_wait_gone(shell, WAIT_MS), 0); /* the command exited, its writer did not */
    pid_t sleeper = cs_mb_read_pid(pidfile); /* written before the command exited */
    assert_true(sleeper > 0);
    cs_cancel_fire(&f->cancel);
    assert_true(readable_within(done[0], WAIT_MS));
    pthread_join(th, NULL);
    assert_int_equal(a.rc, -1);
    assert_int_equal(a.err.kind, CS_ERR_CANCELLED);
    assert_string_equal(a.err.msg, "context canceled");
    assert_int_equal(a.emissions, 0);

    /* Teardown does not wait on the escaped writer either: both return while it still runs. */
    src->ops->destroy(src);
    assert_true(still_running(sleeper));
    assert_stopped_without_the_grace();
    close(done[0]);
    close(done[1]);
    kill(sleeper, SIGKILL); /* out of the group by design: clean up after the fixture */
}

/* 94: F_SETPIPE_SZ grows a pipe; skipped when the kernel refuses. */
static void test_set_pipe_size(void **state)
{
    (void)state;
    int p[2];
    assert_int_equal(pipe2(p, O_CLOEXEC), 0);
    int before = 0, got = 0;
    assert_int_equal(cs_pipe_set_size(p[0], 0, &before), 0); /* query only */
    assert_true(before > 0);
    int rc = cs_pipe_set_size(p[0], 1 << 20, &got);
    if (rc != 0)
        rc = cs_pipe_set_size(p[0], 256 << 10, &got);
    close(p[0]);
    close(p[1]);
    if (rc != 0) {
        print_message("kernel refused F_SETPIPE_SZ (%s); skipping\n", strerror(errno));
        skip();
    }
    assert_true(got >= 256 << 10);
    assert_true(got > before);
}

/* ---- framing errors ----------------------------------------------------------------------- */

static void test_marker_without_last_fragment_bit(void **state)
{
    cs_mb_buf m = {0}, stream = {0};
    meta(&m, 1, 9, false, 0, false, 0);
    cs_mb_put_u32(&stream, (uint32_t)m.n); /* high bit clear */
    cs_mb_put(&stream, m.p, m.n);
    expect_next_error(*state, &stream, "pipe source: read frame marker: malformed XDR frame header");
    cs_mb_free(&m);
    cs_mb_free(&stream);
}

static void test_frame_over_the_cap(void **state)
{
    cs_mb_buf stream = {0};
    cs_mb_put_marker(&stream, CS_MAX_PAYLOAD_SIZE + 1);
    cs_mb_put_fill(&stream, 0, 64);
    expect_next_error(*state, &stream,
                      "pipe source: read frame marker: frame is 268435457 bytes, over the 268435456-byte cap");
    stream.n = 0;
    cs_mb_put_u32(&stream, 0xffffffffu);
    expect_next_error(*state, &stream,
                      "pipe source: read frame marker: frame is 2147483647 bytes, over the 268435456-byte cap");
    cs_mb_free(&stream);
}

/* Exactly the cap is allowed: the emission starts, and the missing body is a truncation. */
static void test_frame_at_the_cap(void **state)
{
    fixture *f = *state;
    cs_mb_buf m = {0}, stream = {0};
    meta(&m, 2, 31, true, 6, true, 5000); /* longer than the prefix */
    cs_mb_put_marker(&stream, CS_MAX_PAYLOAD_SIZE);
    cs_mb_put(&stream, m.p, m.n);
    char path[600], cmd[700];
    path_in(f, "cap.bin", path, sizeof path);
    write_file(path, stream.p, stream.n);
    snprintf(cmd, sizeof cmd, "cat '%s' >&3", path);
    cs_source *src = start(f, cmd);
    cs_emission em;
    cs_err err = {0};
    assert_int_equal(src->ops->next(src, &em, &err), 1);
    assert_int_equal(em.seq, 31);
    assert_int_equal(em.declared_size, CS_MAX_PAYLOAD_SIZE);
    cs_mb_buf got = {0};
    assert_int_equal(read_body(src, &got, 1 << 20, &err), -1);
    char want[128];
    snprintf(want, sizeof want, "pipe source: frame truncated %zu bytes short: unexpected EOF",
             (size_t)CS_MAX_PAYLOAD_SIZE - m.n);
    assert_string_equal(err.msg, want);
    src->ops->destroy(src);
    cs_mb_free(&got);
    cs_mb_free(&m);
    cs_mb_free(&stream);
}

static void test_short_marker_and_prefix(void **state)
{
    cs_mb_buf stream = {0};
    cs_mb_put_fill(&stream, 0x80, 2); /* two bytes of a marker, then EOF */
    expect_next_error(*state, &stream, "pipe source: read frame marker: unexpected EOF");

    stream.n = 0;
    cs_mb_put_marker(&stream, 300);
    expect_next_error(*state, &stream, "pipe source: read frame prefix: EOF");

    stream.n = 0;
    cs_mb_put_marker(&stream, 300);
    cs_mb_put_fill(&stream, 0, 100);
    expect_next_error(*state, &stream, "pipe source: read frame prefix: unexpected EOF");

    /* A whole frame shorter than the walk needs: the prefix is the frame. */
    stream.n = 0;
    cs_mb_put_marker(&stream, 100);
    cs_mb_put_fill(&stream, 0, 100);
    expect_next_error(*state, &stream,
                      "pipe source: read ledger seq: xdr: prefix ends at byte 100 before ledgerSeq");

    stream.n = 0;
    cs_mb_put_marker(&stream, 0);
    expect_next_error(*state, &stream, "pipe source: read ledger seq: xdr: prefix ends at byte 0 before ledgerSeq");
    cs_mb_free(&stream);
}

static void test_bad_meta_in_frame(void **state)
{
    cs_mb_buf m = {0}, stream = {0};
    meta(&m, 7, 9, false, 0, false, 5000);
    cs_mb_put_record(&stream, m.p, m.n);
    expect_next_error(*state, &stream,
                      "pipe source: read ledger seq: xdr: LedgerCloseMeta version 7 is not 0, 1 or 2");
    cs_mb_free(&m);
    cs_mb_free(&stream);
}

/* ---- streaming, cancellation and teardown ------------------------------------------------- */

/* The first 64 KiB of an 8 MiB frame is readable while the writer is still parked before writing
 * the rest: the writer blocks reading a FIFO that the test opens only afterwards. */
static void test_first_piece_before_the_writer_finishes(void **state)
{
    fixture *f = *state;
    cs_mb_buf m = {0};
    meta(&m, 2, 4242, true, 2, true, (8u << 20) - 400);
    const size_t head_body = 64 << 10;
    cs_mb_buf head = {0};
    cs_mb_put_marker(&head, (uint32_t)m.n);
    cs_mb_put(&head, m.p, head_body);
    char head_path[600], tail_path[600], gate[600], cmd[2200];
    path_in(f, "head.bin", head_path, sizeof head_path);
    path_in(f, "tail.bin", tail_path, sizeof tail_path);
    path_in(f, "gate", gate, sizeof gate);
    write_file(head_path, head.p, head.n);
    write_file(tail_path, m.p + head_body, m.n - head_body);
    assert_int_equal(mkfifo(gate, 0600), 0);
    snprintf(cmd, sizeof cmd, "cat '%s' >&3 && read go < '%s' && cat '%s' >&3", head_path, gate, tail_path);

    cs_source *src = start(f, cmd);
    cs_emission em;
    cs_err err = {0};
    assert_int_equal(src->ops->next(src, &em, &err), 1);
    assert_int_equal(em.seq, 4242);
    assert_int_equal(em.declared_size, m.n);
    cs_mb_buf got = {0};
    uint8_t *tmp = malloc(1 << 20);
    assert_non_null(tmp);
    while (got.n < head_body) {
        ssize_t k = src->ops->read(src, tmp, head_body - got.n, &err);
        if (k <= 0)
            fail_msg("read %zu of the first %zu bytes: %s", got.n, head_body, k < 0 ? err.msg : "end");
        cs_mb_put(&got, tmp, (size_t)k);
    }
    assert_memory_equal(got.p, m.p, head_body);
    /* The writer cannot have finished: it is still waiting for the gate. */
    assert_int_not_equal(cs_pipe_source_pid(src), -1);
    assert_int_equal(kill(cs_pipe_source_pid(src), 0), 0);

    int g = open(gate, O_WRONLY | O_CLOEXEC); /* meets the command's read of the FIFO */
    assert_true(g >= 0);
    assert_int_equal(write(g, "go\n", 3), 3);
    close(g);
    for (;;) {
        ssize_t k = src->ops->read(src, tmp, 1 << 20, &err);
        if (k < 0)
            fail_msg("body: %s", err.msg);
        if (k == 0)
            break;
        cs_mb_put(&got, tmp, (size_t)k);
    }
    assert_int_equal(got.n, m.n);
    assert_memory_equal(got.p, m.p, m.n);
    assert_int_equal(src->ops->next(src, &em, &err), 0);
    src->ops->destroy(src);
    free(tmp);
    cs_mb_free(&got);
    cs_mb_free(&head);
    cs_mb_free(&m);
}

typedef struct body_arg {
    cs_source *src;
    int done_fd;
    ssize_t total;
    cs_err err;
} body_arg;

/* Reads the current body until it ends or fails, then signals done_fd. */
static void *read_body_thread(void *p)
{
    body_arg *b = p;
    uint8_t tmp[8192];
    b->total = 0;
    for (;;) {
        ssize_t k = b->src->ops->read(b->src, tmp, sizeof tmp, &b->err);
        if (k <= 0)
            break;
        b->total += k;
    }
    char one = 1;
    if (write(b->done_fd, &one, 1) != 1)
        abort();
    return NULL;
}

/* A cancel during a body read parked on a live writer reports the cancellation, and teardown's
 * group SIGTERM ends that writer promptly. */
static void test_cancel_during_body_read(void **state)
{
    fixture *f = *state;
    cs_mb_buf m = {0}, head = {0};
    meta(&m, 1, 77, false, 0, false, 20000);
    cs_mb_put_marker(&head, (uint32_t)(m.n + 1000000));
    cs_mb_put(&head, m.p, m.n);
    char path[600], cmd[800];
    path_in(f, "head.bin", path, sizeof path);
    write_file(path, head.p, head.n);
    snprintf(cmd, sizeof cmd, "cat '%s' >&3; exec sleep 60", path);
    cs_source *src = start(f, cmd);
    cs_emission em;
    cs_err err = {0};
    assert_int_equal(src->ops->next(src, &em, &err), 1);
    assert_int_equal(em.seq, 77);

    int done[2];
    assert_int_equal(pipe2(done, O_CLOEXEC), 0);
    body_arg b = {.src = src, .done_fd = done[1]};
    pthread_t th;
    assert_int_equal(pthread_create(&th, NULL, read_body_thread, &b), 0);
    assert_false(readable_within(done[0], 200));
    cs_cancel_fire(&f->cancel);
    assert_true(readable_within(done[0], WAIT_MS));
    pthread_join(th, NULL);
    assert_int_equal(b.total, (ssize_t)m.n);
    assert_int_equal(b.err.kind, CS_ERR_CANCELLED);
    assert_string_equal(b.err.msg, "context canceled");
    /* Later calls keep saying so. */
    assert_int_equal(src->ops->next(src, &em, &err), -1);
    assert_int_equal(err.kind, CS_ERR_CANCELLED);

    src->ops->destroy(src); /* the group SIGTERM reaches the exec'd sleep */
    assert_stopped_without_the_grace();
    close(done[0]);
    close(done[1]);
    cs_mb_free(&m);
    cs_mb_free(&head);
}

/* A command that outlives EOF (it closed fd 3 but keeps running) is waited for, and the wait ends
 * on the cancel too. */
static void test_cancel_while_waiting_for_the_command(void **state)
{
    fixture *f = *state;
    cs_source *src = start(f, "exec 3>&-; exec sleep 60");
    int done[2];
    assert_int_equal(pipe2(done, O_CLOEXEC), 0);
    drain_arg a = {.src = src, .done_fd = done[1]};
    pthread_t th;
    assert_int_equal(pthread_create(&th, NULL, drain, &a), 0);
    assert_false(readable_within(done[0], 200));
    cs_cancel_fire(&f->cancel);
    assert_true(readable_within(done[0], WAIT_MS));
    pthread_join(th, NULL);
    assert_int_equal(a.rc, -1);
    assert_int_equal(a.err.kind, CS_ERR_CANCELLED);
    src->ops->destroy(src);
    assert_stopped_without_the_grace();
    close(done[0]);
    close(done[1]);
}

/* Opens a FIFO for reading and waits for the command's line on it. */
static void await_fifo(const char *path)
{
    int r = open(path, O_RDONLY | O_CLOEXEC);
    assert_true(r >= 0);
    char line[16] = {0};
    assert_true(read(r, line, sizeof line) > 0);
    close(r);
}

/* A command that ignores SIGTERM gets the grace period, then SIGKILL. */
static void test_teardown_kills_after_the_grace(void **state)
{
    fixture *f = *state;
    char ready[600], cmd[1000];
    path_in(f, "ready", ready, sizeof ready);
    assert_int_equal(mkfifo(ready, 0600), 0);
    snprintf(cmd, sizeof cmd, "trap '' TERM; echo ok > '%s'; exec sleep 60", ready);
    cs_source *src = start(f, cmd);
    pid_t pid = cs_pipe_source_pid(src);
    assert_true(pid > 0);
    await_fifo(ready); /* the trap is in place */
    int64_t t0 = cs_mono_ns();
    src->ops->destroy(src);
    int64_t took = cs_mono_ns() - t0;
    assert_true(took >= CS_PIPE_KILL_GRACE_NS - 100000000LL); /* not before the grace is over */
    assert_int_equal(cs_logcap_count(KILLED_AFTER_GRACE), 1);
    assert_int_equal(kill(pid, 0), -1); /* killed and reaped */
    assert_int_equal(errno, ESRCH);
}

/* Teardown sweeps the whole group: a grandchild that ignores SIGTERM is SIGKILLed. */
static void test_teardown_sweeps_grandchildren(void **state)
{
    fixture *f = *state;
    char pidfile[600], ready[600], cmd[1600];
    path_in(f, "grandchild.pid", pidfile, sizeof pidfile);
    path_in(f, "ready", ready, sizeof ready);
    assert_int_equal(mkfifo(ready, 0600), 0);
    /* The grandchild ignores TERM, keeps fd 3, and reports its pid once the trap is set. */
    snprintf(cmd, sizeof cmd,
             "sh -c \"trap '' TERM; echo \\$\\$ > '%s'; echo ok > '%s'; exec sleep 60\" & exit 0", pidfile,
             ready);
    cs_source *src = start(f, cmd);
    await_fifo(ready);
    pid_t gc = cs_mb_read_pid(pidfile);
    assert_true(gc > 0);
    assert_true(cs_mb_pid_runs(gc, "sh") || cs_mb_pid_runs(gc, "sleep"));
    assert_int_equal(getpgid(gc), cs_pipe_source_pid(src)); /* same group as the command */

    src->ops->destroy(src);
    assert_stopped_without_the_grace(); /* the shell itself had exited */
    bool dead = cs_pid_wait_gone(gc, WAIT_MS) == 0; /* the exit is an event: a pidfd says so */
    if (!dead && cs_mb_pid_runs(gc, "sleep"))
        kill(gc, SIGKILL);
    assert_true(dead);
}

/* Stopping early with the writer blocked on a full pipe: closing the read end ends it. */
static void test_early_stop_with_a_blocked_writer(void **state)
{
    fixture *f = *state;
    cs_source *src = start(f, "trap '' TERM; printf '\\377\\377\\377\\377' >&3; exec cat /dev/zero >&3");
    cs_emission em;
    cs_err err = {0};
    /* A frame of 0x7fffffff is over the cap: refuse it with the writer still writing. */
    assert_int_equal(src->ops->next(src, &em, &err), -1);
    assert_string_equal(err.msg, "pipe source: read frame marker: frame is 2147483647 bytes, over the 268435456-byte cap");
    src->ops->destroy(src); /* TERM is ignored; SIGPIPE (restored to default) ends cat */
    assert_stopped_without_the_grace();
}

/* The command runs with SIGINT/SIGTERM/SIGPIPE unblocked and at their defaults even when the
 * parent blocks and ignores them (as the daemon does), in its own process group, with fd 3 and
 * without the parent's other descriptors. */
static void test_child_process_state(void **state)
{
    fixture *f = *state;
    sigset_t block, old;
    sigemptyset(&block);
    sigaddset(&block, SIGINT);
    sigaddset(&block, SIGTERM);
    assert_int_equal(pthread_sigmask(SIG_BLOCK, &block, &old), 0);
    struct sigaction ign = {.sa_handler = SIG_IGN}, oldpipe;
    sigemptyset(&ign.sa_mask);
    assert_int_equal(sigaction(SIGPIPE, &ign, &oldpipe), 0);
    int leak = open("/dev/null", O_RDONLY); /* no O_CLOEXEC: must still not reach the child */
    assert_true(leak > 3);

    char out[600], cmd[1600];
    path_in(f, "state.txt", out, sizeof out);
    /* The checks run in the shell itself (builtins), then awk replaces it in the same process, so
     * what it reads of /proc/self is what the shell had (a forked helper would see the mask dash
     * holds around its own vfork). */
    snprintf(cmd, sizeof cmd,
             "[ -e /proc/$$/fd/3 ] || exit 11; [ -e /proc/$$/fd/%d ] && exit 12; "
             "exec awk '/^(SigBlk|SigIgn):/ {print $2} FILENAME ~ /stat$/ {print $5, $1}' "
             "/proc/self/status /proc/self/stat > '%s'",
             leak, out);
    cs_source *src = start(f, cmd);
    cs_emission em;
    cs_err err = {0};
    int rc = src->ops->next(src, &em, &err);
    src->ops->destroy(src);
    close(leak);
    assert_int_equal(sigaction(SIGPIPE, &oldpipe, NULL), 0);
    assert_int_equal(pthread_sigmask(SIG_SETMASK, &old, NULL), 0);
    if (rc != 0)
        fail_msg("command failed: %s", err.msg);

    FILE *fp = fopen(out, "r");
    assert_non_null(fp);
    unsigned long long blk = 1, ign_mask = 1;
    int pgrp = 0, pid = -1;
    assert_int_equal(fscanf(fp, "%llx %llx %d %d", &blk, &ign_mask, &pgrp, &pid), 4);
    fclose(fp);
    assert_int_equal(blk, 0);
    unsigned long long must_be_default = 1ull << (SIGINT - 1) | 1ull << (SIGTERM - 1) | 1ull << (SIGPIPE - 1);
    assert_int_equal(ign_mask & must_be_default, 0);
    assert_int_equal(pgrp, pid);
}

static void test_start_failure(void **state)
{
    fixture *f = *state;
    const char *path = getenv("PATH");
    char *saved = path ? strdup(path) : NULL;
    assert_int_equal(setenv("PATH", "/nonexistent-dir", 1), 0);
    cs_source *src = (cs_source *)1;
    cs_err err = {0};
    int rc = cs_pipe_source_new(&src, "true", 0, &f->cancel, &err);
    if (saved) {
        setenv("PATH", saved, 1);
        free(saved);
    } else {
        unsetenv("PATH");
    }
    assert_int_equal(rc, -1);
    assert_null(src);
    assert_string_equal(err.msg, "pipe source: start \"true\": exec: \"sh\": executable file not found in $PATH");
}

/* pipe-size: negative leaves the pipe alone, huge requests are clamped and ignored when refused. */
static void test_pipe_size_requests_never_fail(void **state)
{
    fixture *f = *state;
    int64_t sizes[] = {-1, 0, 4096, INT64_MAX};
    for (size_t i = 0; i < sizeof sizes / sizeof sizes[0]; i++) {
        cs_source *src = NULL;
        cs_err err = {0};
        assert_int_equal(cs_pipe_source_new(&src, "exit 0", sizes[i], &f->cancel, &err), 0);
        cs_emission em;
        assert_int_equal(src->ops->next(src, &em, &err), 0);
        src->ops->destroy(src);
    }
}

/* ---- the frame reader on its own ---------------------------------------------------------- */

/* Tiny read-ahead buffers and one-byte body reads across several frames, from a pipe written by
 * a thread in uneven pieces. */
typedef struct writer_arg {
    int fd;
    const uint8_t *p;
    size_t n;
} writer_arg;

static void *writer(void *p)
{
    writer_arg *w = p;
    size_t off = 0, step = 1;
    while (off < w->n) {
        size_t t = w->n - off < step ? w->n - off : step;
        ssize_t k = write(w->fd, w->p + off, t);
        if (k <= 0)
            break;
        off += (size_t)k;
        step = step * 3 % 1021 + 1;
    }
    close(w->fd);
    return NULL;
}

static void test_frame_reader_small_buffers(void **state)
{
    fixture *f = *state;
    cs_mb_buf stream = {0}, metas[4] = {{0}};
    size_t tails[4] = {0, 1, 5000, 70000};
    for (int i = 0; i < 4; i++) {
        meta(&metas[i], (uint32_t)(i % 3), 500 + (uint32_t)i, i & 1, (uint32_t)i, i & 2, tails[i]);
        cs_mb_put_record(&stream, metas[i].p, metas[i].n);
    }
    size_t bufsizes[] = {1, 3, 4, 7, 4096, 65536};
    for (size_t bi = 0; bi < sizeof bufsizes / sizeof bufsizes[0]; bi++) {
        int p[2];
        assert_int_equal(pipe2(p, O_CLOEXEC), 0);
        cs_frame_reader *r;
        cs_err err = {0};
        assert_int_equal(cs_frame_reader_new(&r, p[0], &f->cancel, bufsizes[bi], 0, &err), 0);
        writer_arg w = {.fd = p[1], .p = stream.p, .n = stream.n};
        pthread_t th;
        assert_int_equal(pthread_create(&th, NULL, writer, &w), 0);
        for (int i = 0; i < 4; i++) {
            uint32_t len;
            assert_int_equal(cs_frame_reader_next(r, &len, &err), 1);
            assert_int_equal(len, metas[i].n);
            const uint8_t *pre;
            size_t n;
            assert_int_equal(cs_frame_reader_prefix(r, &pre, &n, &err), 0);
            assert_int_equal(n, len < CS_FRAME_PREFIX_MAX ? len : CS_FRAME_PREFIX_MAX);
            assert_memory_equal(pre, metas[i].p, n);
            if (i == 2)
                continue; /* left unread: next() must skip it */
            cs_mb_buf got = {0};
            size_t piece = i == 3 ? 1 : 777;
            uint8_t tmp[777];
            ssize_t k;
            while ((k = cs_frame_reader_read(r, tmp, piece, &err)) > 0)
                cs_mb_put(&got, tmp, (size_t)k);
            assert_int_equal(k, 0);
            assert_int_equal(cs_frame_reader_remaining(r), 0);
            assert_int_equal(got.n, metas[i].n);
            assert_memory_equal(got.p, metas[i].p, got.n);
            cs_mb_free(&got);
        }
        uint32_t len;
        assert_int_equal(cs_frame_reader_next(r, &len, &err), 0);
        pthread_join(th, NULL);
        cs_frame_reader_free(r);
        close(p[0]);
    }
    for (int i = 0; i < 4; i++)
        cs_mb_free(&metas[i]);
    cs_mb_free(&stream);
}

int main(void)
{
    alarm(240); /* a hung pipe must fail the run, not stall it */
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_streams_framed_metas, setup, teardown),
        cmocka_unit_test_setup_teardown(test_child_failure_surfaces, setup, teardown),
        cmocka_unit_test_setup_teardown(test_truncated_frame_surfaces, setup, teardown),
        cmocka_unit_test_setup_teardown(test_cancel_unblocks_an_escaped_writer, setup, teardown),
        cmocka_unit_test_setup_teardown(test_set_pipe_size, setup, teardown),
        cmocka_unit_test_setup_teardown(test_marker_without_last_fragment_bit, setup, teardown),
        cmocka_unit_test_setup_teardown(test_frame_over_the_cap, setup, teardown),
        cmocka_unit_test_setup_teardown(test_frame_at_the_cap, setup, teardown),
        cmocka_unit_test_setup_teardown(test_short_marker_and_prefix, setup, teardown),
        cmocka_unit_test_setup_teardown(test_bad_meta_in_frame, setup, teardown),
        cmocka_unit_test_setup_teardown(test_first_piece_before_the_writer_finishes, setup, teardown),
        cmocka_unit_test_setup_teardown(test_cancel_during_body_read, setup, teardown),
        cmocka_unit_test_setup_teardown(test_cancel_while_waiting_for_the_command, setup, teardown),
        cmocka_unit_test_setup_teardown(test_teardown_kills_after_the_grace, setup, teardown),
        cmocka_unit_test_setup_teardown(test_teardown_sweeps_grandchildren, setup, teardown),
        cmocka_unit_test_setup_teardown(test_early_stop_with_a_blocked_writer, setup, teardown),
        cmocka_unit_test_setup_teardown(test_child_process_state, setup, teardown),
        cmocka_unit_test_setup_teardown(test_start_failure, setup, teardown),
        cmocka_unit_test_setup_teardown(test_pipe_size_requests_never_fail, setup, teardown),
        cmocka_unit_test_setup_teardown(test_frame_reader_small_buffers, setup, teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
