/* SPDX-License-Identifier: Apache-2.0 */
/* `--source pipe --pipe-path`: corestreamd reads a named FIFO that a core running on its own
 * writes, and stays up while that core restarts. Writers here are `cat`/`head -c` runs of
 * hand-built frames: one that stops inside ledger 4, one that re-sends 3-6 and stops between
 * ledgers, one that re-sends 5-8. A live subscriber connected before the first ledger gets 1-8 once
 * each, byte-exact (ledger 4's flow pauses and ends whole); a catch-up subscriber gets the same
 * from the ring; readiness says `source reconnecting` while no writer is there. A writer whose
 * re-sent ledger differs from the ring's stops the run and leaves the ring as it was. */
#include <stdarg.h>
#include <setjmp.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <fcntl.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "support/metabuild.h"
#include "support/ringfixture.h"
#include "support/wsclient.h"
#include "support/wait.h"

#define STOP_MS 20000
#define TAIL 9000 /* bodies past the 4096-byte prefix, so a cut lands inside one */

typedef cs_ringfx fixture;

static int setup(void **state)
{
    return cs_ringfx_setup(state, "fifo");
}

static int teardown(void **state)
{
    return cs_ringfx_teardown(state);
}

static void meta_of(uint32_t seq, uint32_t odd, cs_mb_buf *b)
{
    cs_mb_meta m = cs_mb_go_meta(1, seq, false, 0, false, seq == odd ? TAIL + 1 : TAIL);
    cs_mb_put_meta(b, &m);
}

/* Frames of from..to (ledger odd, if any, longer) into <scratch>/name; *cut receives the offset
 * of the middle of the last frame's body. */
static void write_frames(fixture *f, const char *name, uint32_t from, uint32_t to, uint32_t odd, char *path,
                         size_t plen, size_t *cut)
{
    cs_mb_buf b = {0};
    for (uint32_t s = from; s <= to; s++) {
        cs_mb_meta m = cs_mb_go_meta(1, s, false, 0, false, s == odd ? TAIL + 1 : TAIL);
        size_t off = cs_mb_put_frame(&b, &m);
        if (cut)
            *cut = off + (b.n - off) / 2;
    }
    assert_true((size_t)snprintf(path, plen, "%s/%s", f->dir.path, name) < plen);
    FILE *fp = fopen(path, "wb");
    assert_non_null(fp);
    assert_int_equal(fwrite(b.p, 1, b.n, fp), b.n);
    assert_int_equal(fclose(fp), 0);
    cs_mb_free(&b);
}

/* Runs a writer to its end: sh -c cmd, which opens the FIFO, writes and exits. */
static void run_writer(const char *cmd)
{
    int st = system(cmd);
    if (st == -1 || !WIFEXITED(st) || WEXITSTATUS(st) != 0)
        fail_msg("writer \"%s\": status %d", cmd, st);
}

static void wait_line(fixture *f, const char *needle)
{
    if (cs_proc_wait_line(&f->proc, needle, WAIT_MS) != 0) {
        fprintf(stderr, "%s", f->proc.log); /* whole: cmocka cuts a long message */
        fail_msg("no \"%s\" in the log above", needle);
    }
}

static void expect_readyz(fixture *f, unsigned code, const char *body_has)
{
    char body[512];
    int got = cs_http_get("127.0.0.1", f->proc.port, "/readyz", WAIT_MS, body, sizeof body, NULL, 0);
    if (got != (int)code || !strstr(body, body_has))
        fail_msg("/readyz: %d %s (wanted %u with %s)", got, body, code, body_has);
}

static void read_ledgers(fixture *f, cs_ws *ws, uint32_t from, uint32_t to)
{
    for (uint32_t want = from; want <= to; want++) {
        cs_ledger l;
        char err[256];
        if (cs_ws_read_ledger(ws, &l, WAIT_MS, err, sizeof err) != 1)
            fail_msg("ledger %u: %s\n%s", want, err, f->proc.log);
        assert_int_equal(l.seq, want);
        cs_mb_buf b = {0};
        meta_of(want, 0, &b);
        assert_int_equal(l.len, b.n);
        assert_memory_equal(l.data, b.p, b.n);
        cs_mb_free(&b);
        cs_ledger_free(&l);
    }
}

static void writer_restarts_inside_and_between_ledgers(void **state)
{
    fixture *f = *state;
    char fifo[PATH_MAX];
    assert_true((size_t)snprintf(fifo, sizeof fifo, "%s/meta.fifo", f->dir.path) < sizeof fifo);
    const char *const args[] = {"--source", "pipe", "--pipe-path", fifo, "--chunk-size", "4096", NULL};
    cs_ringfx_start(f, NULL, CORESTREAMD_BIN, args);
    if (cs_proc_wait_listening(&f->proc, WAIT_MS) != 0)
        fail_msg("not listening:\n%s", f->proc.log);
    struct stat st;
    assert_int_equal(stat(fifo, &st), 0);
    assert_true(S_ISFIFO(st.st_mode));
    assert_int_equal(st.st_mode & 07777, 0620);
    wait_line(f, "msg=\"source loop starting\"");
    expect_readyz(f, 503, "\"reason\":\"catching up\"");

    cs_ws *live = cs_ws_connect("127.0.0.1", f->proc.port, "/stream", WAIT_MS, NULL, NULL, 0);
    assert_non_null(live);
    wait_line(f, "subscriber connected");

    char path[PATH_MAX], cmd[3 * PATH_MAX];
    size_t cut;
    write_frames(f, "one.bin", 1, 4, 0, path, sizeof path, &cut);
    snprintf(cmd, sizeof cmd, "head -c %zu '%s' > '%s'", cut, path, fifo);
    run_writer(cmd);
    wait_line(f, "msg=\"pipe source: the FIFO's writer went away inside a ledger; waiting for the next one\"");
    expect_readyz(f, 503, "\"state\":\"reconnecting\",\"reason\":\"source reconnecting\"");

    write_frames(f, "two.bin", 3, 6, 0, path, sizeof path, NULL);
    snprintf(cmd, sizeof cmd, "cat '%s' > '%s'", path, fifo);
    run_writer(cmd);
    wait_line(f, "msg=\"pipe source: the FIFO's writer went away; waiting for the next one\"");
    char line[2048];
    cs_proc_line(&f->proc, line, sizeof line);
    if (!strstr(line, " after_ledger=6"))
        fail_msg("line: %s", line);
    expect_readyz(f, 503, "\"reason\":\"source reconnecting\"");

    write_frames(f, "three.bin", 5, 8, 0, path, sizeof path, NULL);
    snprintf(cmd, sizeof cmd, "cat '%s' > '%s'", path, fifo);
    run_writer(cmd);
    wait_line(f, "msg=\"source re-emitted ledgers the ring holds; skipped them\"");
    cs_proc_line(&f->proc, line, sizeof line);
    if (!strstr(line, " first=5 last=6 ledgers=2"))
        fail_msg("line: %s", line);
    wait_line(f, "msg=\"pipe source: the FIFO's writer went away; waiting for the next one\"");
    cs_proc_line(&f->proc, line, sizeof line);
    if (!strstr(line, " after_ledger=8"))
        fail_msg("line: %s", line);
    read_ledgers(f, live, 1, 8);
    cs_ws_close(live);
    expect_readyz(f, 503, "\"reason\":\"source reconnecting\"");
    assert_int_equal(cs_proc_log_count(&f->proc, "msg=\"pipe source: a writer reopened the FIFO\""), 2);

    cs_ws *catchup = cs_ws_connect("127.0.0.1", f->proc.port, "/stream?start=1&end=8", WAIT_MS, NULL, NULL, 0);
    assert_non_null(catchup);
    read_ledgers(f, catchup, 1, 8);
    cs_ws_close(catchup);

    /* A writer whose ledger 8 is not the ring's: the run stops, the ring stays as it was. */
    uint64_t before = cs_ringfx_dir_digest(f->ring);
    write_frames(f, "four.bin", 8, 9, 8, path, sizeof path, NULL);
    snprintf(cmd, sizeof cmd, "cat '%s' > '%s'", path, fifo);
    run_writer(cmd);
    assert_int_equal(cs_proc_wait_exit(&f->proc, WAIT_MS), 1);
    cs_proc_drain(&f->proc);
    if (!strstr(f->proc.log, "error=\"source failed at ledger 8: ledger 8 differs from the ring's: the source sent "))
        fail_msg("log:\n%s", f->proc.log);
    assert_true(cs_ringfx_dir_digest(f->ring) == before);
    assert_int_equal(cs_proc_log_count(&f->proc, "level=WARN msg=\"ring reset"), 0);
    assert_int_equal(cs_proc_log_count(&f->proc, "retention reset"), 0);
}

/* A path that exists and is not a FIFO is refused at start, naming it. */
static void path_that_is_not_a_fifo_is_refused(void **state)
{
    fixture *f = *state;
    char path[PATH_MAX];
    assert_true((size_t)snprintf(path, sizeof path, "%s/plain", f->dir.path) < sizeof path);
    FILE *fp = fopen(path, "w");
    assert_non_null(fp);
    fclose(fp);
    const char *const args[] = {"--source", "pipe", "--pipe-path", path, NULL};
    cs_ringfx_start(f, NULL, CORESTREAMD_BIN, args);
    assert_int_equal(cs_proc_wait_exit(&f->proc, WAIT_MS), 1);
    cs_proc_drain(&f->proc);
    char want[PATH_MAX + 128];
    snprintf(want, sizeof want, "error=\"pipe source: \\\"%s\\\" is not a FIFO\"", path);
    if (!strstr(f->proc.log, want))
        fail_msg("no %s in:\n%s", want, f->proc.log);
}

int main(void)
{
    signal(SIGPIPE, SIG_IGN);
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(writer_restarts_inside_and_between_ledgers, setup, teardown),
        cmocka_unit_test_setup_teardown(path_that_is_not_a_fifo_is_refused, setup, teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
