/* SPDX-License-Identifier: Apache-2.0 */
/* benchrunner as a person meets it (issue 27 item 4), end to end against a real corestreamd: the
 * progress line on a terminal (a pseudo-terminal here) and never on a pipe or with --quiet, Ctrl-C
 * and SIGTERM keeping what was received (summary and CSV), and bench/plot.sh drawing two real
 * runs' CSVs on one PNG. Every wait is bounded and waits for what the program shows.
 *
 * BENCHRUNNER_BIN, CORESTREAMD_BIN and PLOT_SH are absolute paths from the build. */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "support/benchfixture.h"
#include "support/ptyproc.h"
#include "support/wait.h"

#ifndef PLOT_SH
#error "PLOT_SH must name bench/plot.sh"
#endif

#define PROGRESS "\r\033[K" /* how each progress line starts */

/* Starts benchrunner with args (NULL-terminated, argv[0] excluded) on a terminal 200 columns wide. */
static void start_on_terminal(fixture *f, cs_pty_proc *t, char *const *args)
{
    char *argv[32] = {BENCHRUNNER_BIN};
    for (size_t n = 1; args[n - 1] && n < 31; n++)
        argv[n] = args[n - 1];
    assert_int_equal(cs_pty_start(t, argv, f->envp, 200), 0);
}

/* Waits for a progress line showing at least min ledgers; returns the count it shows. */
static unsigned long wait_progress(cs_pty_proc *t, unsigned long min)
{
    for (int lines = 0; lines < 100; lines++) {
        if (cs_pty_wait_for(t, PROGRESS, WAIT_MS) != 0)
            fail_msg("no progress line on the terminal within %d ms:\n%s", WAIT_MS, t->log);
        char *end;
        unsigned long n = strtoul(t->log + t->scan, &end, 10);
        if (end != t->log + t->scan && *end == ' ' && n >= min)
            return n;
    }
    fail_msg("no progress line showed %lu ledgers in 100 lines:\n%s", min, t->log);
    return 0;
}

/* The text of the progress line that starts at t->scan (up to the next control character). */
static void progress_text(const cs_pty_proc *t, char *buf, size_t len)
{
    const char *s = t->log + t->scan;
    size_t n = 0;
    while (s[n] && s[n] != '\r' && s[n] != '\033' && n + 1 < len)
        n++;
    memcpy(buf, s, n);
    buf[n] = '\0';
}

/* The data rows of a CSV. */
static unsigned long csv_rows(const char *path)
{
    FILE *fp = fopen(path, "r");
    if (!fp)
        fail_msg("no CSV at %s", path);
    unsigned long lines = 0;
    for (int c; (c = fgetc(fp)) != EOF;)
        lines += c == '\n';
    fclose(fp);
    assert_true(lines >= 1);
    return lines - 1;
}

/* The count of the summary's "ledgers      N (" line, or 0 when it says "no ledgers received". */
static unsigned long summary_ledgers(const char *log)
{
    const char *l = strstr(log, "\nledgers      ");
    if (!l && strstr(log, "\nno ledgers received\n"))
        return 0;
    if (!l)
        fail_msg("no ledgers line in the summary:\n%s", log);
    return strtoul(l + 14, NULL, 10);
}

/* ---- the progress line ---------------------------------------------------------------------------- */

/* Three unbounded runs against one corestreamd: on a pipe, on a terminal with --quiet, on a
 * terminal. The third shows a progress line each second (received, rate, delivery p50/p99,
 * reconnects, abandons), redrawn in place; the other two, started before it, show none. Each
 * stops cleanly (exit 0, unbounded) on its signal: SIGTERM, SIGINT, and ^C typed at the terminal,
 * with the summary and a CSV of every ledger received. How many ledgers the first two have by
 * then, if any, and whether any ledger has come in the live flow (delivery is measured only on
 * those; "delivery -" until one has) is the machine's doing, so the checks take either. */
static void progress_only_on_a_terminal(void **state)
{
    fixture *f = *state;
    cs_proc srv;
    char url[128], csv[3][700];
    start_corestreamd(f, &srv, false, url, sizeof url);
    for (int i = 0; i < 3; i++)
        snprintf(csv[i], sizeof csv[i], "%s/run-%d.csv", f->root, i);

    cs_proc piped;
    char *argv[] = {BENCHRUNNER_BIN, "--mode", "remote", "--url", url, "--csv", csv[0], NULL};
    assert_int_equal(cs_proc_start_env(&piped, argv, f->envp), 0);
    cs_pty_proc quiet, tty;
    start_on_terminal(f, &quiet, ARGS("--mode", "remote", "--url", url, "--csv", csv[1], "--quiet"));
    start_on_terminal(f, &tty, ARGS("--mode", "remote", "--url", url, "--csv", csv[2]));
    wait_progress(&tty, 1);
    char line[256];
    progress_text(&tty, line, sizeof line);
    wait_progress(&tty, 1); /* a second line, so the first was a whole one */
    assert_non_null(strstr(line, " ledgers  "));
    const char *delivery = strstr(line, "/s  delivery ");
    assert_non_null(delivery);
    delivery += strlen("/s  delivery ");
    if (strncmp(delivery, "- ", 2) != 0) { /* a ledger met live: its percentiles */
        assert_true(strncmp(delivery, "p50 ", 4) == 0);
        assert_non_null(strstr(delivery, " p99 "));
    }
    assert_non_null(strstr(line, "  reconnects 0  abandons "));
    assert_null(strstr(line, " of ")); /* unbounded: nothing expected */

    assert_int_equal(cs_proc_stop(&piped, SIGTERM, WAIT_MS), 0);
    assert_int_equal(kill(quiet.pid, SIGINT), 0);
    assert_int_equal(cs_pty_wait_exit(&quiet, WAIT_MS), 0);
    assert_int_equal(cs_pty_send(&tty, "\x03", 1), 0); /* ^C */
    assert_int_equal(cs_pty_wait_exit(&tty, WAIT_MS), 0);

    const char *logs[3] = {piped.log, quiet.log, tty.log};
    for (int i = 0; i < 3; i++) {
        if (!strstr(logs[i], "=== remote (corestreamd over the network) ===") || strstr(logs[i], "benchrunner: "))
            fail_msg("run %d did not end cleanly with its summary:\n%s", i, logs[i]);
        assert_int_equal(csv_rows(csv[i]), summary_ledgers(logs[i]));
    }
    assert_true(csv_rows(csv[2]) >= 1); /* its progress line showed one */
    assert_null(strstr(piped.log, "\033[K"));
    assert_null(strstr(quiet.log, "\033[K"));
    /* The line is cleared before the summary, which starts on a line of its own. */
    assert_non_null(strstr(tty.log, PROGRESS "\r\n=== remote"));
    cs_proc_free(&piped);
    cs_pty_free(&quiet);
    cs_pty_free(&tty);
    stop_corestreamd(&srv);
}

/* ---- signals cutting a bounded run short ------------------------------------------------------------ */

/* A bounded range cut short: ^C keeps what was received (the summary and every row in the CSV),
 * says so, and exits 130 (128 + SIGINT); SIGTERM the same with 143. The line shows "N of M". */
static void signal_cuts_a_bounded_run(void **state)
{
    fixture *f = *state;
    cs_proc srv;
    char url[128];
    start_corestreamd(f, &srv, false, url, sizeof url);
    static const struct {
        int sig;
        int status;
        const char *name;
    } cases[] = {{SIGINT, 130, "SIGINT"}, {SIGTERM, 143, "SIGTERM"}};
    for (size_t i = 0; i < 2; i++) {
        cs_pty_proc t;
        unlink(f->csv);
        start_on_terminal(f, &t, ARGS("--mode", "remote", "--url", url, "--end", "4000000000", "--csv", f->csv));
        unsigned long shown = wait_progress(&t, 1);
        char line[256];
        progress_text(&t, line, sizeof line);
        assert_non_null(strstr(line, " of ")); /* received of expected: from the tip to --end */
        if (cases[i].sig == SIGINT)
            assert_int_equal(cs_pty_send(&t, "\x03", 1), 0);
        else
            assert_int_equal(kill(t.pid, SIGTERM), 0);
        assert_int_equal(cs_pty_wait_exit(&t, WAIT_MS), cases[i].status);
        assert_non_null(strstr(t.log, "\r\n=== remote (corestreamd over the network) ===\r\n"));
        char want[300];
        snprintf(want, sizeof want,
                 "\r\nbenchrunner: interrupted by %s before the end of the range: the summary and the CSV hold what "
                 "was received\r\n",
                 cases[i].name);
        if (!strstr(t.log, want))
            fail_msg("missing \"%s\":\n%s", want, t.log);
        unsigned long rows = csv_rows(f->csv);
        assert_int_equal(rows, summary_ledgers(t.log));
        assert_true(rows >= shown);
        cs_pty_free(&t);
    }
    stop_corestreamd(&srv);
}

/* ---- bench/plot.sh ---------------------------------------------------------------------------------- */

static bool have_gnuplot(void)
{
    cs_proc p;
    char *argv[] = {"/bin/sh", "-c", "command -v gnuplot", NULL};
    assert_int_equal(cs_proc_start(&p, argv), 0);
    int st = cs_proc_wait_exit(&p, WAIT_MS);
    cs_proc_free(&p);
    return st == 0;
}

/* Two real runs' CSVs on one CDF: a PNG (its magic bytes) at the path given, one legend entry per
 * run with its label (-l) or file name; a CSV that is not there fails naming it. */
/* The file at path starts as a PNG does. */
static void assert_png(const char *path)
{
    FILE *fp = fopen(path, "rb");
    assert_non_null(fp);
    unsigned char magic[8];
    assert_int_equal(fread(magic, 1, 8, fp), 8);
    fclose(fp);
    assert_memory_equal(magic, "\x89PNG\r\n\x1a\n", 8);
}

/* Whether a run's CSV has a row with a delivery_ns value above 0 (a ledger met live). */
static bool has_delivery(const char *csv)
{
    static csv_row rows[64];
    size_t n = read_csv(csv, rows, 64);
    assert_int_equal(n, 30);
    for (size_t i = 0; i < n; i++)
        if (atoll(rows[i].field[6]) > 0)
            return true;
    return false;
}

static void plot_two_runs(void **state)
{
    fixture *f = *state;
    if (!have_gnuplot()) {
        print_message("plot_two_runs: SKIPPED: gnuplot is not installed (scripts/setup.sh installs gnuplot-nox)\n");
        skip();
    }
    char a[700], b[700], png[700], missing[700];
    snprintf(a, sizeof a, "%s/a.csv", f->root);
    snprintf(b, sizeof b, "%s/b.csv", f->root);
    snprintf(png, sizeof png, "%s/cdf.png", f->root);
    snprintf(missing, sizeof missing, "%s/missing.csv", f->root);
    cs_proc p;
    assert_int_equal(run_bench(f, &p, ARGS("--count", "30", "--synthetic-size", "65536", "--csv", a)), 0);
    cs_proc_free(&p);
    assert_int_equal(run_bench(f, &p, ARGS("--count", "30", "--synthetic-size", "1048576", "--csv", b)), 0);
    cs_proc_free(&p);

    /* What every run guarantees: 30 rows, each a ledger arriving after the one before it, so every
     * row but the first has an inter-arrival above 0. Those CDFs are drawn, both runs on one PNG. */
    char *argv[] = {PLOT_SH, "-o", png, "-t", "two runs", "-c", "inter_arrival_ns", "-l", "64 KiB", a, b, NULL};
    assert_int_equal(cs_proc_start_env(&p, argv, f->envp), 0);
    int st = cs_proc_wait_exit(&p, WAIT_MS);
    if (st != 0)
        fail_msg("plot.sh exit %d:\n%s", st, p.log);
    char want[2400];
    snprintf(want, sizeof want, "plot: %s\n", png);
    assert_string_equal(p.log, want);
    cs_proc_free(&p);
    assert_png(png);

    /* The default column, delivery: only ledgers the client met in the live flow carry the emit
     * stamp it is measured from. Which ones did is the machine's doing (a client that falls behind
     * a 1 MiB ledger every 10 ms gets the ledgers it missed from the ring, stampless), so what
     * plot.sh must say follows from the CSVs: a run with a delivery value is drawn, one without is
     * named and left out, and with neither drawn there is no picture. */
    char *dflt[] = {PLOT_SH, "-o", png, "-t", "two runs", "-l", "64 KiB", a, b, NULL};
    assert_int_equal(cs_proc_start_env(&p, dflt, f->envp), 0);
    st = cs_proc_wait_exit(&p, WAIT_MS);
    const char *runs[2] = {a, b};
    size_t drawn = 0, at = 0;
    want[0] = '\0';
    for (int i = 0; i < 2; i++) {
        if (has_delivery(runs[i]))
            drawn++;
        else
            at += (size_t)snprintf(want + at, sizeof want - at,
                                   "plot: %s: no delivery_ns value above 0 (stampless rows: ring replays, local "
                                   "modes), left out\n", runs[i]);
    }
    if (drawn)
        snprintf(want + at, sizeof want - at, "plot: %s\n", png);
    else
        snprintf(want + at, sizeof want - at, "plot: nothing to plot: no CSV given has a delivery_ns value above 0\n");
    if (st != (drawn ? 0 : 1))
        fail_msg("plot.sh exit %d:\n%s", st, p.log);
    assert_string_equal(p.log, want);
    cs_proc_free(&p);
    if (drawn)
        assert_png(png);

    char *bad[] = {PLOT_SH, "-o", png, a, missing, NULL};
    assert_int_equal(cs_proc_start_env(&p, bad, f->envp), 0);
    assert_int_equal(cs_proc_wait_exit(&p, WAIT_MS), 1);
    snprintf(want, sizeof want, "plot: %s: no such file\n", missing);
    assert_string_equal(p.log, want);
    cs_proc_free(&p);
}

int main(void)
{
    signal(SIGPIPE, SIG_IGN);
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(progress_only_on_a_terminal, setup, teardown),
        cmocka_unit_test_setup_teardown(signal_cuts_a_bounded_run, setup, teardown),
        cmocka_unit_test_setup_teardown(plot_two_runs, setup, teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
