/* SPDX-License-Identifier: Apache-2.0 */
/* Every way corestreamd can fail to start on bad input, as its operator sees it: one table of
 * command lines, each with the exact error the real binary reports (the flag error on stderr, or
 * the `corestreamd failed` log line on stdout) and its exit status. "@/" in an argument or a
 * message stands for this test's scratch directory; @CERT and @KEY for a valid server pair. And
 * the failure as journald would receive it. */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <limits.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "support/certs.h"
#include "support/procharness.h"
#include "support/tmpdir.h"
#include "support/wait.h"

#ifndef CORESTREAMD_BIN
#error "CORESTREAMD_BIN must name the binary under test"
#endif

typedef struct start_case {
    const char *args[12]; /* after --data-dir @/data and --listen 127.0.0.1:0 */
    const char *message;  /* exactly as on the output, logfmt quoting included */
    int exit_code;
    bool needs_non_root; /* file permissions do not stop root */
} start_case;

static const start_case k_cases[] = {
    /* the flags themselves */
    {{"--turbo"}, "flag provided but not defined: -turbo\nUsage of corestreamd:", 1, false},
    {{"--chunk-size", "x"}, "invalid value \\\"x\\\" for flag -chunk-size: parse error", 1, false},
    {{"--source", "telepathy"}, "error=\"--source must be captive, file, synthetic, pipe or jetstream, got \\\"telepathy\\\"\"", 1,
     false},
    /* addresses: the port is checked before the resolver sees it */
    {{"--listen", "127.0.0.1:99999"}, "error=\"listen on 127.0.0.1:99999: port 99999 is outside 0-65535\"", 1, false},
    {{"--listen", "127.0.0.1:abc"}, "error=\"listen on 127.0.0.1:abc: port \\\"abc\\\" is not a number\"", 1, false},
    {{"--listen", ":-1"}, "error=\"listen on :-1: port \\\"-1\\\" is not a number\"", 1, false},
    {{"--listen", "127.0.0.1"}, "error=\"listen on 127.0.0.1: address 127.0.0.1: missing port in address\"", 1, false},
    /* refused among the flags, before the source starts (the command would leave @/started) */
    {{"--listen", "127.0.0.1:70000", "--source", "pipe", "--pipe-cmd", "touch @/started"},
     "error=\"listen on 127.0.0.1:70000: port 70000 is outside 0-65535\"", 1, false},
    {{"--admin-listen", "127.0.0.1:65536"},
     "error=\"--admin-listen: listen on 127.0.0.1:65536: port 65536 is outside 0-65535\"", 1, false},
    /* TLS files: the system's cause for a file that cannot be read, "no PEM …" for one that does not parse */
    {{"--tls-cert", "@/missing.pem", "--tls-key", "@KEY"},
     "error=\"--tls-cert @/missing.pem: No such file or directory\"", 1, false},
    {{"--tls-cert", "@/dir", "--tls-key", "@KEY"}, "error=\"--tls-cert @/dir: Is a directory\"", 1, false},
    {{"--tls-cert", "@/closed.pem", "--tls-key", "@KEY"}, "error=\"--tls-cert @/closed.pem: Permission denied\"", 1,
     true},
    {{"--tls-cert", "@/junk.pem", "--tls-key", "@KEY"}, "error=\"--tls-cert @/junk.pem: no PEM certificate in it (no start line)\"", 1,
     false},
    {{"--tls-cert", "@CERT", "--tls-key", "@/missing.pem"},
     "error=\"--tls-key @/missing.pem: No such file or directory\"", 1, false},
    {{"--tls-cert", "@CERT", "--tls-key", "@/junk.pem"}, "error=\"--tls-key @/junk.pem: no PEM private key in it (unsupported)\"",
     1, false},
    /* the two swapped */
    {{"--tls-cert", "@KEY", "--tls-key", "@CERT"}, "error=\"--tls-cert @KEY: no PEM certificate in it (no start line)\"",
     1, false},
    {{"--tls-cert", "@CERT", "--tls-key", "@CERT"}, "error=\"--tls-key @CERT: no PEM private key in it (unsupported)\"",
     1, false},
    {{"--tls-cert", "@CERT", "--tls-key", "@OTHERKEY"}, "error=\"--tls-key @OTHERKEY does not match --tls-cert @CERT\"", 1,
     false},
    {{"--tls-cert", "@CERT", "--tls-key", "@KEY", "--tls-client-ca", "@/missing.pem"},
     "error=\"--tls-client-ca @/missing.pem: No such file or directory\"", 1, false},
    {{"--tls-cert", "@CERT"}, "error=\"--tls-key is required with --tls-cert\"", 1, false},
    /* the other files a flag names */
    {{"--auth-tokens", "@/missing"}, "error=\"--auth-tokens @/missing: no such file or directory\"", 1, false},
    {{"--log-level-file", "@/missing"}, "error=\"--log-level-file @/missing: No such file or directory\"", 1, false},
    {{"--source", "file", "--file-dir", "@/missing"},
     "error=\"file source: scan \\\"@/missing\\\": No such file or directory\"", 1, false},
    {{"--source", "pipe", "--pipe-path", "@/missing/fifo"},
     "error=\"pipe source: create FIFO \\\"@/missing/fifo\\\": No such file or directory\"", 1, false},
    {{"--data-dir", "@/plain-file"}, "error=\"data directory \\\"@/plain-file\\\": create: Not a directory\"", 1, false},
    {{"--source", "captive", "--start-ledger", "5", "--core-config", "@/missing.cfg", "--history-archive-urls",
      "http://127.0.0.1:1"},
     "error=\"captive: read config \\\"@/missing.cfg\\\": open @/missing.cfg: no such file or directory\"", 1, false},
    /* NATS credentials and TLS: combinations, then each file (before any connection) */
    {{"--jetstream-user", "core"},
     "error=\"--jetstream-user needs --jetstream-url (publishing) or --source jetstream (an edge)\"", 1, false},
    {{"--jetstream-url", "nats://127.0.0.1:1", "--jetstream-user", "core"},
     "error=\"--jetstream-password-file is required with --jetstream-user\"", 1, false},
    {{"--jetstream-url", "nats://127.0.0.1:1", "--jetstream-password-file", "@/junk.pem"},
     "error=\"--jetstream-user is required with --jetstream-password-file\"", 1, false},
    {{"--jetstream-url", "nats://127.0.0.1:1", "--jetstream-creds", "@/junk.pem", "--jetstream-nkey-seed", "@/junk.pem"},
     "error=\"--jetstream-creds and --jetstream-nkey-seed cannot be used together: give one NATS credential (a .creds "
     "file, an nkey seed, or a user with a password file)\"",
     1, false},
    {{"--jetstream-url", "nats://127.0.0.1:1", "--jetstream-tls-cert", "@CERT"},
     "error=\"--jetstream-tls-key is required with --jetstream-tls-cert\"", 1, false},
    {{"--jetstream-url", "nats://127.0.0.1:1", "--jetstream-tls-ca", "@/missing.pem"},
     "error=\"--jetstream-tls-ca @/missing.pem: No such file or directory\"", 1, false},
    {{"--source", "jetstream", "--jetstream-source-url", "nats://127.0.0.1:1", "--jetstream-tls-cert", "@CERT",
      "--jetstream-tls-key", "@/dir"},
     "error=\"--jetstream-tls-key @/dir: Is a directory\"", 1, false},
    {{"--jetstream-url", "nats://127.0.0.1:1", "--jetstream-user", "core", "--jetstream-password-file", "@/plain-file"},
     "error=\"--jetstream-password-file @/plain-file: the file is empty\"", 1, false},
    {{"--jetstream-url", "nats://127.0.0.1:1", "--jetstream-user", "core", "--jetstream-password-file", "@/closed.pem"},
     "error=\"--jetstream-password-file @/closed.pem: Permission denied\"", 1, true},
    {{"--jetstream-url", "nats://127.0.0.1:1", "--jetstream-nkey-seed", "@/junk.pem"},
     "error=\"--jetstream-nkey-seed @/junk.pem: not an nkey seed (58 characters of A-Z and 2-7, starting with SU)\"", 1,
     false},
    {{"--jetstream-url", "nats://127.0.0.1:1", "--jetstream-tls-ca", "@/junk.pem"},
     "error=\"--jetstream-tls-ca @/junk.pem: Error loading trusted certificates '@/junk.pem': no certificate or crl "
     "found\"", 1, false},
    /* the lake directory: its network named, outside the ring (not made there), not another lake's */
    {{"--lake-dir", "@/lake"}, "error=\"--lake-dir needs --network-passphrase: the lake's config names its network\"", 1,
     false},
    {{"--network-passphrase", "Test SDF Network ; September 2015", "--lake-dir", "@/data/ledgers/lake"},
     "error=\"lake: directory \\\"@/data/ledgers/lake\\\" overlaps the ring's \\\"@/data/ledgers\\\": give --lake-dir "
     "outside --data-dir's ledgers\"",
     1, false},
    {{"--network-passphrase", "Test SDF Network ; September 2015", "--lake-dir", "@/otherlake"},
     "error=\"lake: directory \\\"@/otherlake\\\": \\\"@/otherlake/config.json\\\" is another lake's: its "
     "networkPassphrase is \\\"Public Global Stellar Network ; September 2015\\\", this lake's is \\\"Test SDF "
     "Network ; September 2015\\\" (--network-passphrase); give another --lake-dir, or the flags it was made with\"",
     1, false},
};

static cs_tmpdir g_tmp;
static cs_certs g_certs;

/* in with "@/" replaced by the scratch dir and @CERT, @KEY, @OTHERKEY by the pair's paths. */
static void expand(const char *in, char *out, size_t len)
{
    static const struct {
        const char *tag;
        const char *path;
    } subs[] = {{"@CERT", g_certs.server_cert}, {"@KEY", g_certs.server_key},
                {"@OTHERKEY", g_certs.other_key}, {"@/", g_tmp.path}};
    size_t o = 0;
    while (*in && o + 1 < len) {
        size_t i = 0;
        for (; i < sizeof subs / sizeof subs[0] && strncmp(in, subs[i].tag, strlen(subs[i].tag)) != 0; i++)
            ;
        if (i == sizeof subs / sizeof subs[0]) {
            out[o++] = *in++;
            continue;
        }
        o += (size_t)snprintf(out + o, len - o, "%s%s", subs[i].path, strcmp(subs[i].tag, "@/") == 0 ? "/" : "");
        in += strlen(subs[i].tag);
        if (o >= len)
            o = len - 1;
    }
    out[o] = '\0';
}

static int setup(void **state)
{
    (void)state;
    if (cs_tmpdir_make(&g_tmp, "starterr") != 0 || cs_certs_make(&g_certs) != 0)
        return -1;
    char p[PATH_MAX + 32];
    FILE *f = fopen(cs_tmpdir_join(&g_tmp, "junk.pem", p, sizeof p), "w");
    if (!f)
        return -1;
    fputs("not a certificate\n", f);
    fclose(f);
    f = fopen(cs_tmpdir_join(&g_tmp, "plain-file", p, sizeof p), "w");
    if (!f)
        return -1;
    fclose(f);
    if (mkdir(cs_tmpdir_join(&g_tmp, "dir", p, sizeof p), 0700) != 0)
        return -1;
    /* a lake directory made for another network */
    if (mkdir(cs_tmpdir_join(&g_tmp, "otherlake", p, sizeof p), 0755) != 0 ||
        !(f = fopen(cs_tmpdir_join(&g_tmp, "otherlake/config.json", p, sizeof p), "w")))
        return -1;
    fputs("{\"networkPassphrase\":\"Public Global Stellar Network ; September 2015\",\"ledgersPath\":\"/lake/ledgers\","
          "\"compression\":\"zstd\",\"ledgersPerBatch\":1,\"batchesPerPartition\":64000}",
          f);
    fclose(f);
    /* a readable copy of the certificate made unreadable */
    char cmd[4 * PATH_MAX];
    snprintf(cmd, sizeof cmd, "cp '%s' '%s/closed.pem' && chmod 000 '%s/closed.pem'", g_certs.server_cert,
             g_tmp.path, g_tmp.path);
    return system(cmd) == 0 ? 0 : -1;
}

static int teardown(void **state)
{
    (void)state;
    cs_certs_remove(&g_certs);
    cs_tmpdir_remove(&g_tmp);
    return 0;
}

static void run_case(const start_case *c)
{
    char store[16][PATH_MAX + 64];
    char *argv[20];
    int n = 0;
    argv[n++] = CORESTREAMD_BIN;
    const char *fixed[] = {"--data-dir", "@/data", "--listen", "127.0.0.1:0"};
    for (size_t i = 0; i < 4; i++, n++) {
        expand(fixed[i], store[n], sizeof store[n]);
        argv[n] = store[n];
    }
    for (size_t i = 0; c->args[i] && n < 15; i++, n++) {
        expand(c->args[i], store[n], sizeof store[n]);
        argv[n] = store[n];
    }
    argv[n] = NULL;
    char want[2 * PATH_MAX + 512];
    expand(c->message, want, sizeof want);
    cs_proc p;
    assert_int_equal(cs_proc_start(&p, argv), 0);
    int status = cs_proc_wait_exit(&p, WAIT_MS);
    if (status != c->exit_code || !strstr(p.log, want)) {
        fprintf(stderr, "%s %s: exit %d (want %d); want\n  %s\nin:\n%s\n", c->args[0], c->args[1] ? c->args[1] : "",
                status, c->exit_code, want, p.log);
        cs_proc_free(&p);
        fail();
    }
    cs_proc_free(&p);
}

static void test_start_errors_name_their_cause(void **state)
{
    (void)state;
    for (size_t i = 0; i < sizeof k_cases / sizeof k_cases[0]; i++)
        if (!k_cases[i].needs_non_root || geteuid() != 0)
            run_case(&k_cases[i]);
    char started[PATH_MAX + 32];
    assert_int_equal(access(cs_tmpdir_join(&g_tmp, "started", started, sizeof started), F_OK), -1);
    assert_int_equal(access(cs_tmpdir_join(&g_tmp, "data/ledgers/lake", started, sizeof started), F_OK), -1);
}

/* Runs corestreamd with stdout and stderr on one file that JOURNAL_STREAM names, as systemd
 * connects a unit's streams to the journal, with extra arguments; returns how many lines start
 * with want (a failure) after checking that every line starts with a priority. */
static int journal_run(const char *extra, const char *want)
{
    char out[PATH_MAX + 32], cmd[5 * PATH_MAX];
    cs_tmpdir_join(&g_tmp, "journal.out", out, sizeof out);
    snprintf(cmd, sizeof cmd,
             "exec >'%s' 2>&1; JOURNAL_STREAM=$(stat -L -c %%d:%%i '%s') exec %s --data-dir '%s/data' "
             "--listen 127.0.0.1:0 %s",
             out, out, CORESTREAMD_BIN, g_tmp.path, extra);
    int rc = system(cmd);
    assert_true(WIFEXITED(rc));
    assert_int_equal(WEXITSTATUS(rc), 1);
    FILE *f = fopen(out, "r");
    assert_non_null(f);
    char line[1024];
    int found = 0;
    while (fgets(line, sizeof line, f)) {
        assert_int_equal(line[0], '<');
        if (strncmp(line, want, strlen(want)) == 0 && strstr(line, "corestreamd failed"))
            found++;
    }
    fclose(f);
    return found;
}

/* Under systemd with stdout on the journal (JOURNAL_STREAM names that stream), every line starts
 * with its syslog priority: a failure with <3>, so `journalctl -p err` shows it, whether the
 * logger had started (a TLS file missing) or not yet (a flag refused). */
static void test_failure_reaches_the_journal_as_an_error(void **state)
{
    (void)state;
    char extra[3 * PATH_MAX];
    snprintf(extra, sizeof extra, "--tls-cert '%s/missing.pem' --tls-key '%s/missing.pem'", g_tmp.path, g_tmp.path);
    assert_int_equal(journal_run(extra, "<3>time="), 1);
    assert_int_equal(journal_run("--admin-listen 127.0.0.1:99999", "<3>20"), 1); /* <3>YYYY/MM/DD … ERROR */
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_start_errors_name_their_cause, setup, teardown),
        cmocka_unit_test_setup_teardown(test_failure_reaches_the_journal_as_an_error, setup, teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
