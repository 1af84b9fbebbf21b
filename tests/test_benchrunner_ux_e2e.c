/* benchrunner as a person meets it (issue 27 item 4): bench/plot.sh drawing two real runs' CSVs on
 * one PNG. Every wait is bounded and waits for what the program shows.
 *
 * BENCHRUNNER_BIN, CORESTREAMD_BIN and PLOT_SH are absolute paths from the build. */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "support/benchfixture.h"
#include "support/wait.h"

#ifndef PLOT_SH
#error "PLOT_SH must name bench/plot.sh"
#endif

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

    char *argv[] = {PLOT_SH, "-o", png, "-t", "two runs", "-l", "64 KiB", a, b, NULL};
    assert_int_equal(cs_proc_start_env(&p, argv, f->envp), 0);
    int st = cs_proc_wait_exit(&p, WAIT_MS);
    if (st != 0)
        fail_msg("plot.sh exit %d:\n%s", st, p.log);
    char want[800];
    snprintf(want, sizeof want, "plot: %s\n", png);
    assert_string_equal(p.log, want);
    cs_proc_free(&p);
    FILE *fp = fopen(png, "rb");
    assert_non_null(fp);
    unsigned char magic[8];
    assert_int_equal(fread(magic, 1, 8, fp), 8);
    fclose(fp);
    assert_memory_equal(magic, "\x89PNG\r\n\x1a\n", 8);

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
        cmocka_unit_test_setup_teardown(plot_two_runs, setup, teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
