/* SPDX-License-Identifier: Apache-2.0 */
/* Test support: the fixture of benchrunner's end-to-end tests (test_benchrunner_e2e,
 * test_benchrunner_ux_e2e): a scratch directory per test with its own TMPDIR for benchrunner, runs
 * of the real binary to completion, output and CSV checks, and a synthetic corestreamd on
 * 127.0.0.1. Header-only (static inline), included after cmocka.h by a test that defines
 * BENCHRUNNER_BIN and CORESTREAMD_BIN (absolute paths). Every wait is bounded. */
#ifndef CS_TESTS_SUPPORT_BENCHFIXTURE_H
#define CS_TESTS_SUPPORT_BENCHFIXTURE_H

#include <dirent.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "support/procharness.h"
#include "support/tmpdir.h"

#ifndef BENCHRUNNER_BIN
#error "BENCHRUNNER_BIN must name the benchrunner binary"
#endif
#ifndef CORESTREAMD_BIN
#error "CORESTREAMD_BIN must name the corestreamd binary"
#endif

#define RUN_MS 60000   /* bound for a whole benchrunner run */
#define START_MS 15000 /* bound for corestreamd to start listening */

extern char **environ;

typedef struct fixture {
    cs_tmpdir dir;    /* this test's scratch directory */
    const char *root; /* dir.path */
    char tmpdir[600]; /* TMPDIR given to benchrunner */
    char csv[600];
    char env_tmpdir[640];
    char **envp; /* environ with TMPDIR replaced */
} fixture;

static inline int setup(void **state)
{
    fixture *f = calloc(1, sizeof *f);
    if (!f)
        return -1;
    if (cs_tmpdir_make(&f->dir, "benche2e") != 0) {
        free(f);
        return -1;
    }
    f->root = f->dir.path;
    snprintf(f->tmpdir, sizeof f->tmpdir, "%s/tmp", f->root);
    snprintf(f->csv, sizeof f->csv, "%s/run.csv", f->root);
    mkdir(f->tmpdir, 0700);
    snprintf(f->env_tmpdir, sizeof f->env_tmpdir, "TMPDIR=%s", f->tmpdir);
    size_t n = 0;
    while (environ[n])
        n++;
    f->envp = calloc(n + 2, sizeof *f->envp);
    if (!f->envp)
        return -1;
    size_t k = 0;
    for (size_t i = 0; i < n; i++)
        if (strncmp(environ[i], "TMPDIR=", 7) != 0)
            f->envp[k++] = environ[i];
    f->envp[k++] = f->env_tmpdir;
    f->envp[k] = NULL;
    *state = f;
    return 0;
}

static inline int teardown(void **state)
{
    fixture *f = *state;
    cs_tmpdir_remove(&f->dir);
    free(f->envp);
    free(f);
    return 0;
}

/* ---- helpers ------------------------------------------------------------------------------------ */

/* Runs benchrunner with args (NULL-terminated, argv[0] excluded) to completion. Returns its exit
 * status; *p keeps the output (free with cs_proc_free). */
static inline int run_bench(fixture *f, cs_proc *p, char *const *args)
{
    char *argv[64] = {BENCHRUNNER_BIN};
    size_t n = 1;
    for (; args[n - 1] && n < 63; n++)
        argv[n] = args[n - 1];
    argv[n] = NULL;
    assert_int_equal(cs_proc_start_env(p, argv, f->envp), 0);
    int st = cs_proc_wait_exit(p, RUN_MS);
    if (st < 0)
        fail_msg("benchrunner did not finish within %d ms:\n%s", RUN_MS, p->log);
    return st;
}

#define ARGS(...) ((char *const[]){__VA_ARGS__, NULL})

static inline void assert_has(const cs_proc *p, const char *needle)
{
    if (!strstr(p->log, needle))
        fail_msg("output is missing \"%s\":\n%s", needle, p->log);
}

static inline void assert_lacks(const cs_proc *p, const char *needle)
{
    if (strstr(p->log, needle))
        fail_msg("output unexpectedly has \"%s\":\n%s", needle, p->log);
}

/* The TMPDIR benchrunner ran with is empty again: the loopback ring directory was removed. */
static inline void assert_tmpdir_empty(const fixture *f)
{
    DIR *d = opendir(f->tmpdir);
    assert_non_null(d);
    struct dirent *e;
    while ((e = readdir(d)))
        if (strcmp(e->d_name, ".") && strcmp(e->d_name, ".."))
            fail_msg("benchrunner left %s/%s behind", f->tmpdir, e->d_name);
    closedir(d);
}

typedef struct csv_row {
    char field[9][32];
} csv_row;

/* Reads the CSV (header checked) into rows; returns the row count. */
static inline size_t read_csv(const char *path, csv_row *rows, size_t max)
{
    FILE *fp = fopen(path, "r");
    if (!fp)
        fail_msg("no CSV at %s", path);
    char line[1024];
    assert_non_null(fgets(line, sizeof line, fp));
    assert_string_equal(line, "sequence,bytes,chunks,since_start_ns,inter_arrival_ns,emit_ns,delivery_ns,pipeline_ns,"
                              "discarded_partials\n");
    size_t n = 0;
    while (fgets(line, sizeof line, fp) && n < max) {
        line[strcspn(line, "\n")] = '\0';
        csv_row *r = &rows[n++];
        memset(r, 0, sizeof *r);
        const char *s = line;
        for (int i = 0; i < 9; i++) {
            const char *comma = strchr(s, ',');
            size_t len = comma ? (size_t)(comma - s) : strlen(s);
            assert_true(len < sizeof r->field[i]);
            memcpy(r->field[i], s, len);
            if (i < 8) {
                if (!comma)
                    fail_msg("short CSV row: %s", line);
                s = comma + 1;
            } else if (comma) {
                fail_msg("long CSV row: %s", line);
            }
        }
    }
    fclose(fp);
    return n;
}

/* A corestreamd on 127.0.0.1 with the synthetic source (100 ledgers a second, 200 KiB each);
 * url receives its ws:// address. */
static inline void start_corestreamd(fixture *f, cs_proc *p, bool compressible, char *url, size_t urllen)
{
    char data_dir[700];
    snprintf(data_dir, sizeof data_dir, "%s/corestreamd-data", f->root);
    char *argv[] = {CORESTREAMD_BIN, "--listen", "127.0.0.1:0", "--source", "synthetic", "--synthetic-interval",
                    "10ms", "--emit-window", "5ms", "--data-dir", data_dir,
                    compressible ? "--synthetic-compressible" : "--compress", NULL};
    assert_int_equal(cs_proc_start(p, argv), 0);
    if (cs_proc_wait_listening(p, START_MS) != 0)
        fail_msg("corestreamd did not start listening:\n%s", p->log);
    snprintf(url, urllen, "ws://127.0.0.1:%d", p->port);
}

static inline void stop_corestreamd(cs_proc *p)
{
    cs_proc_stop(p, SIGTERM, 15000);
    cs_proc_free(p);
}

#endif
