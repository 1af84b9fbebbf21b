/* SPDX-License-Identifier: Apache-2.0 */
/* benchrunner end to end (PORTSPEC 4; catalogue case 17 and the program's exits): the real binary
 * in loopback mode, and in remote mode against a real corestreamd, over 127.0.0.1. Every wait is
 * bounded; children are killed by the harness if a test fails midway.
 *
 * The binaries come from the build: BENCHRUNNER_BIN and CORESTREAMD_BIN are absolute paths. */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <arpa/inet.h>
#include <dirent.h>
#include <errno.h>
#include <netinet/in.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common/synthetic.h"
#include "support/certs.h"
#include "support/metabuild.h"
#include "support/procharness.h"
#include "support/scriptserver.h"
#include "support/tmpdir.h"

#include "support/benchfixture.h"

/* ---- case 17: TestRunLoopback ---------------------------------------------------------------------- */

static void loopback_run(void **state)
{
    fixture *f = *state;
    cs_proc p;
    int st = run_bench(f, &p,
                       ARGS("--mode", "loopback", "--count", "8", "--synthetic-size", "65536", "--synthetic-interval",
                            "10ms", "--emit-window", "5ms", "--verify", "--csv", f->csv));
    if (st != 0)
        fail_msg("exit %d:\n%s", st, p.log);

    /* Banner first, then the summary. */
    assert_true(strncmp(p.log, "loopback server on 127.0.0.1:", 29) == 0);
    assert_has(&p, ": 8 ledgers of 65536 bytes every 10ms, emitted over 5ms, 256KiB chunks\n");
    assert_has(&p, "chunks\n\n=== loopback (remoteledger over 127.0.0.1) ===\n");
    assert_has(&p, "\nledgers      8 (1..8)\n");
    assert_has(&p, "\nbytes        0.50 MiB (mean 64.0 KiB/ledger)\n");
    assert_has(&p, "\nthroughput   ");
    assert_has(&p, "\ninter-arrival p50 ");
    assert_has(&p, "\nfallbacks    ");
    assert_lacks(&p, "raw fallbacks"); /* nothing is compressed */
    /* stderr is not a terminal: no progress line. */
    assert_lacks(&p, "\033[K");
    assert_lacks(&p, "\nbenchrunner: ");
    char want[700];
    snprintf(want, sizeof want, "\ncsv          %s\n", f->csv);
    assert_has(&p, want);

    /* 8 samples, sequences 1..8, 65536 bytes each. A ledger delivered live carries its emit,
     * delivery and pipeline; one the client was too slow for (a stall longer than the rest of an
     * emission abandons the live flow: the server's policy) comes again from the ring, stampless,
     * and the summary counts it. Which of the two a ledger gets depends on the machine's load. */
    csv_row rows[16];
    assert_int_equal(read_csv(f->csv, rows, 16), 8);
    int stampless = 0;
    long discarded = 0;
    for (int i = 0; i < 8; i++) {
        char seq[8];
        snprintf(seq, sizeof seq, "%d", i + 1);
        assert_string_equal(rows[i].field[0], seq);
        assert_string_equal(rows[i].field[1], "65536");
        assert_true(atoi(rows[i].field[2]) >= 1);
        discarded += atol(rows[i].field[8]);
        if (rows[i].field[5][0] == '\0') {
            assert_string_equal(rows[i].field[6], "");
            assert_string_equal(rows[i].field[7], "");
            stampless++;
            continue;
        }
        assert_true(rows[i].field[6][0] != '\0');
        assert_true(rows[i].field[7][0] != '\0');
        assert_string_equal(rows[i].field[8], "0"); /* a redelivery replacing a partial is stampless */
        /* The emit window is paced to 5 ms; pipeline covers it. */
        assert_true(atoll(rows[i].field[5]) >= 4 * 1000000LL);
        assert_true(atoll(rows[i].field[7]) >= atoll(rows[i].field[5]));
    }
    if (stampless == 8) {
        assert_has(&p, "\ndelivery     no emit stamps");
    } else {
        assert_has(&p, "\nt_emit        p50 ");
        assert_has(&p, "\ndelivery      p50 ");
        assert_has(&p, "\npipeline      p50 ");
    }
    if (stampless > 0 && stampless < 8) {
        snprintf(want, sizeof want, "%d ledger(s) excluded: replayed from retention, no emit stamp\n", stampless);
        assert_has(&p, want);
    }
    snprintf(want, sizeof want, "\nfallbacks    %ld partial deliveries discarded (live flow abandoned, ring redelivered)\n",
             discarded);
    assert_has(&p, want);
    cs_proc_free(&p);
    assert_tmpdir_empty(f);
    assert_string_equal(rows[0].field[3], "0");
    assert_string_equal(rows[0].field[4], "0");
}

/* --compress makes the payloads compressible and ships zstd chunks; --verify regenerates that shape.
 * A raw-fallbacks line, when there is one, comes before the summary. */
static void loopback_compressed_verify_at(void **state, const char *level)
{
    fixture *f = *state;
    cs_proc p;
    int st = run_bench(f, &p,
                       ARGS("--count", "6", "--synthetic-size", "300000", "--chunk-size", "65536", "--compress",
                            "--verify", "--synthetic-interval", "20ms", "--emit-window", "2ms", "--compress-level",
                            (char *)level));
    if (st != 0)
        fail_msg("exit %d:\n%s", st, p.log);
    assert_has(&p, ": 6 ledgers of 300000 bytes every 20ms, emitted over 2ms, 64KiB chunks\n");
    assert_has(&p, "\nledgers      6 (1..6)\n");
    assert_has(&p, "\nfallbacks    ");
    const char *raw = strstr(p.log, "raw fallbacks ");
    if (raw) {
        assert_true(raw < strstr(p.log, "=== loopback"));
        assert_non_null(strstr(raw, " chunks shipped uncompressed (every encoder busy)\n"));
    }
    assert_lacks(&p, "csv          ");
    cs_proc_free(&p);
    assert_tmpdir_empty(f);
}

/* auto is the default level; a fixed level still works. --verify fails the run on any payload
 * that does not expand to the regenerated bytes. */
static void loopback_compressed_verify(void **state)
{
    loopback_compressed_verify_at(state, "auto");
}

static void loopback_compressed_verify_level_3(void **state)
{
    loopback_compressed_verify_at(state, "3");
}

/* --start moves the loopback range; a range that wraps past the last sequence is refused by the
 * server, with no summary (the prototype's behaviour). */
static void loopback_start_and_wrap(void **state)
{
    fixture *f = *state;
    cs_proc p;
    int st = run_bench(f, &p, ARGS("--count", "3", "--start", "1000", "--synthetic-size", "4096"));
    if (st != 0)
        fail_msg("exit %d:\n%s", st, p.log);
    assert_has(&p, "\nledgers      3 (1000..1002)\n");
    cs_proc_free(&p);

    st = run_bench(f, &p, ARGS("--count", "5", "--start", "4294967293"));
    assert_int_equal(st, 1);
    assert_has(&p, "benchrunner: server: source range [4294967293,1] ends before it starts\n");
    assert_lacks(&p, "===");
    cs_proc_free(&p);
    assert_tmpdir_empty(f);
}

/* A --csv that cannot be created fails at once, exit 2, naming the path and the system's error:
 * nothing is printed before it and no connection is made (the listener below is never dialled). */
static void csv_bad_path_fails_before_connecting(void **state)
{
    fixture *f = *state;
    int ls = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    struct sockaddr_in sa = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    socklen_t salen = sizeof sa;
    assert_int_equal(bind(ls, (struct sockaddr *)&sa, sizeof sa), 0);
    assert_int_equal(listen(ls, 8), 0);
    assert_int_equal(getsockname(ls, (struct sockaddr *)&sa, &salen), 0);
    char url[64], root[700], missing[700], three[700], want[1600];
    snprintf(url, sizeof url, "ws://127.0.0.1:%d", ntohs(sa.sin_port));
    snprintf(root, sizeof root, "%s", f->root); /* a directory */
    snprintf(missing, sizeof missing, "%s/no-such-dir/out.csv", f->root);
    snprintf(three, sizeof three, "%s/no-such-dir/k.csv", f->root);
    const struct {
        char *args[10];
        const char *fmt; /* of the one line printed */
        const char *path;
    } cases[] = {
        {{"--mode", "remote", "--url", url, "--end", "5", "--csv", missing},
         "benchrunner: --csv %s: No such file or directory\n", missing},
        {{"--mode", "remote", "--url", url, "--csv", root}, "benchrunner: --csv %s: Is a directory\n", root},
        {{"--mode", "remote", "--url", url, "--subscribers", "3", "--csv", three},
         "benchrunner: --csv %s: %s/no-such-dir/k-001.csv: No such file or directory\n", three},
        {{"--count", "2", "--csv", missing}, "benchrunner: --csv %s: No such file or directory\n", missing},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        cs_proc p;
        assert_int_equal(run_bench(f, &p, (char *const *)cases[i].args), 2);
        snprintf(want, sizeof want, cases[i].fmt, cases[i].path, f->root);
        assert_string_equal(p.log, want);
        cs_proc_free(&p);
    }
    assert_int_equal(accept(ls, NULL, NULL), -1); /* nobody dialled */
    assert_int_equal(errno, EAGAIN);
    close(ls);
    assert_tmpdir_empty(f); /* loopback never started */
}

/* ---- remote mode against a real corestreamd ------------------------------------------------------- */

static void remote_bounded(void **state)
{
    fixture *f = *state;
    cs_proc srv;
    char url[128];
    start_corestreamd(f, &srv, false, url, sizeof url);

    cs_proc p;
    int st = run_bench(f, &p, ARGS("--mode", "remote", "--url", url, "--start", "1", "--end", "5", "--verify", "--csv",
                                   f->csv));
    if (st != 0)
        fail_msg("exit %d:\n%s", st, p.log);
    assert_true(strncmp(p.log, "\n=== remote (corestreamd over the network) ===\n", 47) == 0);
    assert_has(&p, "\nledgers      5 (1..5)\n");
    assert_has(&p, "\nbytes        0.98 MiB (mean 200.0 KiB/ledger)\n");
    /* Ledgers already published come from the ring (stampless); the count varies with timing. */
    assert_has(&p, "\nfallbacks    ");
    assert_lacks(&p, "\nbenchrunner: ");
    cs_proc_free(&p);
    csv_row rows[8];
    assert_int_equal(read_csv(f->csv, rows, 8), 5);
    assert_string_equal(rows[4].field[0], "5");
    assert_string_equal(rows[4].field[1], "204800");
    stop_corestreamd(&srv);
}

/* --subscribers 4: four sessions in the one process, on one thread; each gets every ledger of the
 * range, verified, in order, and has a CSV of its own. */
static void remote_four_subscribers_in_one_process(void **state)
{
    fixture *f = *state;
    cs_proc srv;
    char url[128];
    start_corestreamd(f, &srv, false, url, sizeof url);

    cs_proc p;
    int st = run_bench(f, &p, ARGS("--mode", "remote", "--url", url, "--start", "1", "--end", "30", "--verify",
                                   "--subscribers", "4", "--csv", f->csv));
    if (st != 0)
        fail_msg("exit %d:\n%s", st, p.log);
    assert_has(&p, "\n=== remote (corestreamd over the network), 4 subscribers in one process ===\n");
    assert_has(&p, "\nsubscribers  4 on one thread: 4 ended well, 0 failed\n");
    assert_has(&p, "\nledgers      120 in all, per subscriber min 30 max 30\n");
    /* The range starts in the ring: at the hand-over to the live flow a partial may be discarded
     * and redelivered (the count varies with timing); what counts is below, in the CSVs. */
    assert_has(&p, " partial deliveries discarded in all (live flow abandoned, ring redelivered)\n");
    for (int i = 1; i <= 4; i++) {
        char row[64];
        snprintf(row, sizeof row, "\n%-5d %-8d %-23s ", i, 30, "1..30");
        assert_has(&p, row);
    }
    char root[700];
    snprintf(root, sizeof root, "%s/run-001.csv .. %s/run-004.csv (one per subscriber)\n", f->root, f->root);
    assert_has(&p, root);
    assert_lacks(&p, "\nbenchrunner: ");
    assert_lacks(&p, "reconnects");
    cs_proc_free(&p);
    for (int i = 1; i <= 4; i++) {
        char path[700];
        snprintf(path, sizeof path, "%s/run-%03d.csv", f->root, i);
        csv_row rows[40];
        assert_int_equal(read_csv(path, rows, 40), 30);
        for (int r = 0; r < 30; r++) {
            char want[16];
            snprintf(want, sizeof want, "%d", r + 1);
            assert_string_equal(rows[r].field[0], want);
            assert_string_equal(rows[r].field[1], "204800");
        }
    }
    stop_corestreamd(&srv);
}

/* Loopback with --subscribers: the in-process server feeds both sessions; both get every ledger. */
static void loopback_two_subscribers(void **state)
{
    fixture *f = *state;
    cs_proc p;
    int st = run_bench(f, &p, ARGS("--mode", "loopback", "--count", "10", "--subscribers", "2", "--verify"));
    if (st != 0)
        fail_msg("exit %d:\n%s", st, p.log);
    assert_has(&p, "\n=== loopback (remoteledger over 127.0.0.1), 2 subscribers in one process ===\n");
    assert_has(&p, "\nsubscribers  2 on one thread: 2 ended well, 0 failed\n");
    assert_has(&p, "\nledgers      20 in all, per subscriber min 10 max 10\n");
    assert_lacks(&p, "\nbenchrunner: ");
    cs_proc_free(&p);
    assert_tmpdir_empty(f);
}

/* A corestreamd on this port (0: any) on the data dir named by tag, numbering from ledger 1 (or
 * continuing the ring it finds there), 50 small ledgers a second. */
static void start_slow_corestreamd(fixture *f, cs_proc *p, int port, const char *tag)
{
    char data_dir[700], listen[32];
    snprintf(data_dir, sizeof data_dir, "%s/%s", f->root, tag);
    snprintf(listen, sizeof listen, "127.0.0.1:%d", port);
    char *argv[] = {CORESTREAMD_BIN, "--listen", listen, "--source", "synthetic", "--synthetic-interval", "20ms",
                    "--emit-window", "0", "--synthetic-size", "3000", "--data-dir", data_dir, NULL};
    assert_int_equal(cs_proc_start(p, argv), 0);
    if (cs_proc_wait_listening(p, START_MS) != 0)
        fail_msg("corestreamd did not start listening:\n%s", p->log);
}

/* --resume across a server killed and started again on its port and data dir (the same run: it
 * continues its ring, so the range is there to resume; a fresh data dir would be another run,
 * which resume refuses): both subscribers get 1..120 whole and in order, the summary counts the
 * reconnects, and the CSVs carry a reconnects column that says when they happened. */
static void remote_resume_across_restart(void **state)
{
    fixture *f = *state;
    cs_proc srv;
    start_slow_corestreamd(f, &srv, 0, "first");
    int port = srv.port;
    char url[64];
    snprintf(url, sizeof url, "ws://127.0.0.1:%d", port);

    cs_proc p;
    char *argv[] = {BENCHRUNNER_BIN, "--mode", "remote", "--url", url, "--start", "1", "--end", "120",
                    "--verify", "--synthetic-size", "3000", "--subscribers", "2", "--resume",
                    "--resume-retries", "200", "--csv", f->csv, NULL};
    assert_int_equal(cs_proc_start_env(&p, argv, f->envp), 0);
    if (cs_proc_wait_line(&srv, "subscriber connected", START_MS) != 0)
        fail_msg("no subscriber came:\n%s", srv.log);
    /* let some ledgers through (the bench is not meant to finish in this time: 120 take 2.4 s) */
    assert_int_equal(cs_proc_wait_exit(&p, 300), -1);
    assert_int_equal(cs_proc_stop(&srv, SIGKILL, 15000), 128 + SIGKILL);
    cs_proc_free(&srv);
    start_slow_corestreamd(f, &srv, port, "first");

    int st = cs_proc_wait_exit(&p, RUN_MS);
    if (st != 0)
        fail_msg("exit %d:\n%s", st, p.log);
    assert_has(&p, "\nsubscribers  2 on one thread: 2 ended well, 0 failed\n");
    assert_has(&p, "\nledgers      240 in all, per subscriber min 120 max 120\n");
    const char *rc = strstr(p.log, "\nreconnects   ");
    if (!rc || atoi(rc + 14) < 2)
        fail_msg("want at least one reconnect per subscriber:\n%s", p.log);
    assert_lacks(&p, "\nbenchrunner: ");
    cs_proc_free(&p);
    for (int i = 1; i <= 2; i++) {
        char path[700], line[256];
        snprintf(path, sizeof path, "%s/run-%03d.csv", f->root, i);
        FILE *fp = fopen(path, "r");
        assert_non_null(fp);
        assert_non_null(fgets(line, sizeof line, fp));
        assert_string_equal(line, "sequence,bytes,chunks,since_start_ns,inter_arrival_ns,emit_ns,delivery_ns,"
                                  "pipeline_ns,discarded_partials,reconnects\n");
        int n = 0;
        long last_reconnects = 0;
        while (fgets(line, sizeof line, fp)) {
            n++;
            if (atoi(line) != n)
                fail_msg("%s row %d is ledger %d", path, n, atoi(line));
            last_reconnects = atol(strrchr(line, ',') + 1);
        }
        fclose(fp);
        assert_int_equal(n, 120);
        assert_true(last_reconnects >= 1);
    }
    stop_corestreamd(&srv);
}

/* --verify regenerates the shape the flags say: a compressible server needs --remote-compressible.
 * A mismatch fails the run after the sample was recorded; summary and CSV are still written. */
static void remote_verify_shape(void **state)
{
    fixture *f = *state;
    cs_proc srv;
    char url[128];
    start_corestreamd(f, &srv, true, url, sizeof url);

    cs_proc p;
    int st = run_bench(f, &p, ARGS("--mode", "remote", "--url", url, "--start", "1", "--end", "3", "--verify", "--csv",
                                   f->csv));
    assert_int_equal(st, 1);
    assert_has(&p, "\nledgers      1 (1..1)\n");
    assert_has(&p, "benchrunner: ledger 1 payload does not match the synthetic source\n");
    char want[700];
    snprintf(want, sizeof want, "\ncsv          %s\n", f->csv);
    assert_has(&p, want);
    cs_proc_free(&p);
    csv_row rows[4];
    assert_int_equal(read_csv(f->csv, rows, 4), 1);

    st = run_bench(f, &p, ARGS("--mode", "remote", "--url", url, "--start", "1", "--end", "3", "--verify",
                               "--remote-compressible"));
    if (st != 0)
        fail_msg("exit %d:\n%s", st, p.log);
    assert_has(&p, "\nledgers      3 (1..3)\n");
    cs_proc_free(&p);
    stop_corestreamd(&srv);
}

/* Writes ledger-<seq>.xdr in dir: the synthetic payload of seq cut to len bytes. */
static void write_synthetic_ledger(const char *dir, uint32_t seq, size_t len)
{
    char path[800];
    snprintf(path, sizeof path, "%s/ledger-%u.xdr", dir, seq);
    uint8_t *buf = calloc(len ? len : 1, 1);
    assert_non_null(buf);
    cs_synthetic_fill(buf, len, seq, false);
    FILE *fp = fopen(path, "wb");
    assert_non_null(fp);
    assert_int_equal(fwrite(buf, 1, len, fp), len);
    assert_int_equal(fclose(fp), 0);
    free(buf);
}

/* --verify checks each ledger's length before its bytes: a ledger cut short (its bytes are the
 * synthetic prefix, so a byte comparison alone passes) or empty fails the run, naming the ledger
 * and both lengths. The server replays a dump holding such ledgers. */
static void remote_verify_length(void **state)
{
    fixture *f = *state;
    char dump[700], data_dir[700];
    snprintf(dump, sizeof dump, "%s/dump", f->root);
    snprintf(data_dir, sizeof data_dir, "%s/corestreamd-data", f->root);
    assert_int_equal(mkdir(dump, 0755), 0);
    write_synthetic_ledger(dump, 1, 4096);
    write_synthetic_ledger(dump, 2, 1000);
    write_synthetic_ledger(dump, 3, 0);
    write_synthetic_ledger(dump, 4, 4096);
    cs_proc srv;
    char *argv[] = {CORESTREAMD_BIN, "--listen", "127.0.0.1:0", "--source", "file", "--file-dir", dump,
                    "--cadence", "10ms", "--emit-window", "0", "--data-dir", data_dir, NULL};
    assert_int_equal(cs_proc_start(&srv, argv), 0);
    if (cs_proc_wait_listening(&srv, START_MS) != 0)
        fail_msg("corestreamd did not start listening:\n%s", srv.log);
    char url[128];
    snprintf(url, sizeof url, "ws://127.0.0.1:%d", srv.port);

    cs_proc p;
    int st = run_bench(f, &p, ARGS("--mode", "remote", "--url", url, "--start", "1", "--end", "1", "--verify",
                                   "--synthetic-size", "4096"));
    if (st != 0)
        fail_msg("exit %d:\n%s", st, p.log);
    assert_has(&p, "\nledgers      1 (1..1)\n");
    cs_proc_free(&p);

    st = run_bench(f, &p, ARGS("--mode", "remote", "--url", url, "--start", "1", "--end", "4", "--verify",
                               "--synthetic-size", "4096"));
    assert_int_equal(st, 1);
    assert_has(&p, "benchrunner: ledger 2 is 1000 bytes, the synthetic source makes 4096 (--synthetic-size)\n");
    cs_proc_free(&p);

    st = run_bench(f, &p, ARGS("--mode", "remote", "--url", url, "--start", "3", "--end", "4", "--verify",
                               "--synthetic-size", "4096"));
    assert_int_equal(st, 1);
    assert_has(&p, "benchrunner: ledger 3 is 0 bytes, the synthetic source makes 4096 (--synthetic-size)\n");
    cs_proc_free(&p);

    /* Without --synthetic-size the server's default is expected. */
    st = run_bench(f, &p, ARGS("--mode", "remote", "--url", url, "--start", "4", "--end", "4", "--verify"));
    assert_int_equal(st, 1);
    assert_has(&p, "benchrunner: ledger 4 is 4096 bytes, the synthetic source makes 204800 (--synthetic-size)\n");
    cs_proc_free(&p);
    stop_corestreamd(&srv);
}

/* Nothing listening: the summary says so, and the run fails. */
static void remote_dial_failure(void **state)
{
    fixture *f = *state;
    cs_proc p;
    int st = run_bench(f, &p, ARGS("--mode", "remote", "--url", "ws://127.0.0.1:1", "--end", "3"));
    assert_int_equal(st, 1);
    assert_has(&p, "\n=== remote (corestreamd over the network) ===\nno ledgers received\n");
    assert_has(&p, "\nbenchrunner: ");
    cs_proc_free(&p);
}

/* Over wss:// with a client certificate and a token from a file, against the tests' scripted TLS
 * server: the flags reach the library; without the CA or the token the run fails in words. */
static void remote_wss_with_tls_flags(void **state)
{
    fixture *f = *state;
    cs_certs certs;
    assert_int_equal(cs_certs_make(&certs), 0);
    char token_file[700];
    snprintf(token_file, sizeof token_file, "%s/token", f->root);
    FILE *tf = fopen(token_file, "w");
    assert_non_null(tf);
    fputs("s3cret\n", tf);
    fclose(tf);
    ss_tls tls = {.cert_file = certs.server_cert, .key_file = certs.server_key, .client_ca_file = certs.ca,
                  .require_client_cert = true};

    ss_server *ss = ss_start_tls(&tls);
    assert_non_null(ss);
    char url[64];
    snprintf(url, sizeof url, "%s", ss_url(ss)); /* ARGS wants char * */
    ss_require_token(ss, "s3cret");
    for (uint32_t i = 1; i <= 3; i++)
        ss_ledger(ss, i, 1000);
    cs_proc p;
    int st = run_bench(f, &p, ARGS("--mode", "remote", "--url", url, "--start", "1", "--end", "3", "-tls-ca",
                                   certs.ca, "-tls-server-name", "localhost", "-tls-cert", certs.client_cert,
                                   "-tls-key", certs.client_key, "-token-file", token_file));
    if (st != 0)
        fail_msg("exit %d:\n%s", st, p.log);
    assert_has(&p, "\nledgers      3 (1..3)\n");
    cs_proc_free(&p);
    assert_true(ss_wait(ss, 10000));
    assert_string_equal(ss_client_cert(ss, 0), "client");
    ss_stop(ss);

    /* the system's CAs do not know the test CA (which this server sends along: it trusts it for
     * client certificates, and OpenSSL completes the chain from that store) */
    ss = ss_start_tls(&tls);
    assert_non_null(ss);
    snprintf(url, sizeof url, "%s", ss_url(ss));
    st = run_bench(f, &p, ARGS("--mode", "remote", "--url", url, "--end", "3"));
    assert_int_equal(st, 1);
    assert_has(&p, "certificate verify failed: self-signed certificate in certificate chain\n");
    cs_proc_free(&p);
    ss_stop(ss);

    /* no token */
    ss = ss_start_tls(&tls);
    assert_non_null(ss);
    ss_require_token(ss, "s3cret");
    snprintf(url, sizeof url, "%s", ss_url(ss));
    st = run_bench(f, &p, ARGS("--mode", "remote", "--url", url, "--end", "3", "-tls-ca", certs.ca,
                               "-tls-cert", certs.client_cert, "-tls-key", certs.client_key));
    assert_int_equal(st, 1);
    assert_has(&p, ": server requires a token (401)\n");
    cs_proc_free(&p);
    ss_stop(ss);

    /* a token file that is not there */
    st = run_bench(f, &p, ARGS("--mode", "remote", "--url", "wss://127.0.0.1:1", "--end", "3", "-token-file",
                               "/nonexistent/token"));
    assert_int_equal(st, 1);
    assert_has(&p, "benchrunner: read token file \"/nonexistent/token\": open /nonexistent/token: no such file or "
                   "directory\n");
    cs_proc_free(&p);
    cs_certs_remove(&certs);
}

/* ---- command line: exit codes and messages ---------------------------------------------------------- */

/* The local modes report their source's failure after the (empty) summary. */
static void local_modes_report_source_failures(void **state)
{
    fixture *f = *state;
    cs_proc p;
    assert_int_equal(run_bench(f, &p, ARGS("--mode", "local", "--start", "5", "--core-config", "/nonexistent.cfg",
                                           "--history-archive-urls", "u")), 1);
    assert_has(&p, "=== local (captive core in this process) ===\nno ledgers received\n");
    assert_has(&p, "benchrunner: captive: read config \"/nonexistent.cfg\": open /nonexistent.cfg: no such file or directory\n");
    assert_tmpdir_empty(f); /* the temporary storage dir is removed */
    cs_proc_free(&p);
    assert_int_equal(run_bench(f, &p, ARGS("--mode", "localtap", "--pipe-cmd", "exit 3")), 1);
    assert_has(&p, "benchrunner: pipe source: \"exit 3\" exited: exit status 3\n");
    cs_proc_free(&p);
}

/* localtap drains the pipe tap with no network: sizes, read counts and cadence, no delivery. */
static void localtap_drains_the_pipe(void **state)
{
    fixture *f = *state;
    char frames[700], cmd[800];
    snprintf(frames, sizeof frames, "%s/frames", f->root);
    cs_mb_buf b = {0};
    for (uint32_t seq = 101; seq <= 103; seq++) {
        cs_mb_buf m = {0};
        cs_mb_meta meta = cs_mb_go_meta(2, seq, true, 2, false, 300000);
        cs_mb_put_meta(&m, &meta);
        cs_mb_put_record(&b, m.p, m.n);
        cs_mb_free(&m);
    }
    FILE *fp = fopen(frames, "w");
    assert_non_null(fp);
    assert_int_equal(fwrite(b.p, 1, b.n, fp), b.n);
    fclose(fp);
    cs_mb_free(&b);
    snprintf(cmd, sizeof cmd, "cat %s >&3", frames);
    cs_proc p;
    assert_int_equal(run_bench(f, &p, ARGS("--mode", "localtap", "--pipe-cmd", cmd, "--chunk-size", "65536",
                                           "--csv", f->csv)), 0);
    assert_has(&p, "=== local tap (core's pipe, no network) ===\n");
    assert_has(&p, "ledgers      3 (101..103)\n");
    assert_has(&p, "delivery     no emit stamps in this mode (nothing to measure against)\n");
    csv_row rows[8];
    assert_int_equal(read_csv(f->csv, rows, 8), 3);
    cs_proc_free(&p);
}

static void command_line_exits(void **state)
{
    fixture *f = *state;
    cs_proc p;

    assert_int_equal(run_bench(f, &p, ARGS("-h")), 0);
    assert_true(strncmp(p.log, "Usage of benchrunner:\nMeasures how ledgers arrive from a corestreamd: ", 70) == 0);
    assert_has(&p, "\nExample: benchrunner --mode remote --url ws://127.0.0.1:8462 --start 1000 --end 1999 --csv "
                   "run.csv\n");
    assert_has(&p, "\n  -mode string\n");
    assert_lacks(&p, "\nbenchrunner: ");
    cs_proc_free(&p);

    assert_int_equal(run_bench(f, &p, ARGS("--turbo")), 1);
    assert_true(strncmp(p.log, "flag provided but not defined: -turbo\nUsage of benchrunner:\n", 59) == 0);
    assert_has(&p, "\nbenchrunner: flag provided but not defined: -turbo\n");
    cs_proc_free(&p);

    static const struct {
        const char *args[8];
        const char *want;
    } cases[] = {
        {{"--mode", "x"}, "benchrunner: --mode must be loopback, remote, local, localtap or lake, got \"x\"\n"},
        {{"--count", "0"}, "benchrunner: --count must be positive in loopback mode\n"},
        {{"--mode", "remote", "extra"}, "benchrunner: unexpected argument \"extra\"\n"},
        {{"--mode", "local"}, "benchrunner: --start is required in local mode: captive core replays a known range\n"},
        {{"--mode", "localtap"}, "benchrunner: --pipe-cmd is required in localtap mode\n"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        char *args[9] = {0};
        for (size_t k = 0; k < 8 && cases[i].args[k]; k++)
            args[k] = (char *)cases[i].args[k];
        assert_int_equal(run_bench(f, &p, args), 1);
        assert_string_equal(p.log, cases[i].want);
        cs_proc_free(&p);
    }
}

int main(void)
{
    signal(SIGPIPE, SIG_IGN);
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(loopback_run, setup, teardown),
        cmocka_unit_test_setup_teardown(loopback_compressed_verify, setup, teardown),
        cmocka_unit_test_setup_teardown(loopback_compressed_verify_level_3, setup, teardown),
        cmocka_unit_test_setup_teardown(loopback_start_and_wrap, setup, teardown),
        cmocka_unit_test_setup_teardown(csv_bad_path_fails_before_connecting, setup, teardown),
        cmocka_unit_test_setup_teardown(remote_bounded, setup, teardown),
        cmocka_unit_test_setup_teardown(remote_verify_shape, setup, teardown),
        cmocka_unit_test_setup_teardown(remote_four_subscribers_in_one_process, setup, teardown),
        cmocka_unit_test_setup_teardown(loopback_two_subscribers, setup, teardown),
        cmocka_unit_test_setup_teardown(remote_resume_across_restart, setup, teardown),
        cmocka_unit_test_setup_teardown(remote_verify_length, setup, teardown),
        cmocka_unit_test_setup_teardown(remote_dial_failure, setup, teardown),
        cmocka_unit_test_setup_teardown(remote_wss_with_tls_flags, setup, teardown),
        cmocka_unit_test_setup_teardown(localtap_drains_the_pipe, setup, teardown),
        cmocka_unit_test_setup_teardown(local_modes_report_source_failures, setup, teardown),
        cmocka_unit_test_setup_teardown(command_line_exits, setup, teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
