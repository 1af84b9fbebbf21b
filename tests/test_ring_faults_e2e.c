/* SPDX-License-Identifier: Apache-2.0 */
/* The retention ring under disk faults, end to end: the real corestreamd over 127.0.0.1, its log
 * read line by line, subscribers reading verified ledgers. A data dir that cannot be written is
 * refused before listening; a ring write that fails mid-run (a directory in the next ledger's
 * place, a full file system) costs the ring, never the live flow.
 *
 * Read-only and full file systems are tmpfs mounts made in a private mount namespace
 * (`unshare -rm`, which needs no privilege where user namespaces are enabled); where that is not
 * possible the case is skipped with a message. CORESTREAMD_BIN is the daemon's absolute path. */
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
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <xxhash.h>

#include "support/procharness.h"
#include "support/ringfiles.h"
#include "support/ringfixture.h"
#include "support/tmpdir.h"
#include "support/wsclient.h"
#include "support/wait.h"
#include "wire/wire.h"

#ifndef CORESTREAMD_BIN
#error "CORESTREAMD_BIN must name the corestreamd binary"
#endif

#define STOP_MS 10000

typedef cs_ringfx fixture;

static int setup(void **state)
{
    return cs_ringfx_setup(state, "ringfaults");
}

static int teardown(void **state)
{
    return cs_ringfx_teardown(state);
}

/* Whether `unshare -rm` can make a private mount namespace with tmpfs mounts here. */
static bool can_mount_tmpfs(void)
{
    static int known = -1;
    if (known < 0) {
        int st = system("unshare -rm sh -c 'mount -t tmpfs tmpfs /mnt' >/dev/null 2>&1");
        known = st != -1 && WIFEXITED(st) && WEXITSTATUS(st) == 0;
    }
    return known == 1;
}

/* Starts corestreamd with args after the common ones, under mount_script when set
 * (cs_ringfx_start). */
static void start_daemon(fixture *f, const char *mount_script, const char *const *args)
{
    cs_ringfx_start(f, mount_script, CORESTREAMD_BIN, args);
}

static const char *with_pid(const fixture *f, const char *needle)
{
    return cs_ringfx_with_pid(f, needle);
}

static void wait_line(fixture *f, const char *needle)
{
    cs_ringfx_wait_line(f, needle, WAIT_MS);
}

static void healthz(fixture *f, char *body, size_t len)
{
    assert_int_equal(cs_http_get("127.0.0.1", f->proc.port, "/healthz", WAIT_MS, body, len, NULL, 0), 200);
}

/* Reads ledgers from ws until seq `last`, asserting that each is the one after the previous (the
 * first may be anything); returns the first. */
static uint32_t read_through(cs_ws *ws, uint32_t last)
{
    uint32_t first = 0, prev = 0;
    for (int i = 0; i < 100000; i++) {
        cs_ledger l;
        char err[256];
        int rc = cs_ws_read_ledger(ws, &l, WAIT_MS, err, sizeof err);
        if (rc != 1)
            fail_msg("reading ledgers after %u: %d %s", prev, rc, err);
        if (prev && l.seq != prev + 1)
            fail_msg("ledger %u after %u", l.seq, prev);
        if (!first)
            first = l.seq;
        prev = l.seq;
        cs_ledger_free(&l);
        if (prev >= last)
            return first;
    }
    fail_msg("ledger %u never came", last);
    return 0;
}

/* Reads the live flow from ws through ledger `last`, each ledger the one after the previous, past
 * ledger `bad`, whose ring write failed. A subscriber the machine runs late falls behind the live
 * flow and is sent what it missed from the ring; when that reaches `bad` it is told the ledger is
 * missing (4002 naming it), as any subscriber asking the ring for it is, and one that starts after
 * it goes on. */
static void read_past_the_hole(fixture *f, cs_ws **ws, uint32_t bad, uint32_t last)
{
    uint32_t prev = 0;
    for (int i = 0; i < 100000; i++) {
        cs_ledger l;
        char err[256];
        int rc = cs_ws_read_ledger(*ws, &l, WAIT_MS, err, sizeof err);
        if (rc == 0 && prev && prev + 1 == bad) {
            int code = 0;
            char reason[128], want[96], q[64];
            assert_int_equal(cs_ws_last_close(*ws, &code, reason, sizeof reason), 1);
            snprintf(want, sizeof want, "missing from the ring: first=%u last=%u", bad, bad);
            if (code != 4002 || strcmp(reason, want) != 0)
                fail_msg("closed after ledger %u with %d \"%s\", not 4002 \"%s\"", prev, code, reason, want);
            cs_ws_close(*ws);
            snprintf(q, sizeof q, "/stream?start=%u", bad + 1);
            *ws = cs_ws_connect("127.0.0.1", f->proc.port, q, WAIT_MS, NULL, NULL, 0);
            assert_non_null(*ws);
            prev = bad;
            continue;
        }
        if (rc != 1)
            fail_msg("reading ledgers after %u: %d %s", prev, rc, err);
        if (prev && l.seq != prev + 1)
            fail_msg("ledger %u after %u", l.seq, prev);
        prev = l.seq;
        cs_ledger_free(&l);
        if (prev >= last)
            return;
    }
    fail_msg("ledger %u never came", last);
}

static const char *const k_synthetic[] = {"--source", "synthetic", "--synthetic-size", "65536",
                                          "--synthetic-interval", "50ms", "--emit-window", "0", NULL};

/* A data dir on a read-only file system is refused before listening, naming it. */
static void readonly_dir_refused_at_start(void **state)
{
    fixture *f = *state;
    char script[4096];
    if (can_mount_tmpfs()) {
        assert_int_equal(mkdir(f->data, 0755), 0);
        snprintf(script, sizeof script,
                 "mount -t tmpfs tmpfs '%s' && mkdir '%s' && mount -o remount,ro '%s'", f->data, f->ring, f->data);
        start_daemon(f, script, k_synthetic);
    } else if (geteuid() != 0) {
        /* Without mounts, permission bits do as well for anyone but root. */
        assert_int_equal(mkdir(f->data, 0755), 0);
        assert_int_equal(mkdir(f->ring, 0555), 0);
        start_daemon(f, NULL, k_synthetic);
    } else {
        print_message("skipped: cannot mount a read-only tmpfs here, and root ignores permission bits\n");
        skip();
    }
    int st = cs_proc_wait_exit(&f->proc, WAIT_MS);
    cs_proc_drain(&f->proc);
    if (st != 1)
        fail_msg("exit %d; log:\n%s", st, f->proc.log);
    char want[4096];
    if (can_mount_tmpfs()) /* the data directory's lock file is the first thing written */
        snprintf(want, sizeof want,
                 "level=ERROR msg=\"corestreamd failed\" error=\"data directory \\\"%s\\\": lock corestreamd.lock: "
                 "Read-only file system\"",
                 f->data);
    else
        snprintf(want, sizeof want,
                 "level=ERROR msg=\"corestreamd failed\" error=\"store: \\\"%s\\\" cannot be written: create "
                 "write-probe.tmp: Permission denied\"",
                 f->ring);
    if (!strstr(f->proc.log, with_pid(f, want)))
        fail_msg("wanted %s in:\n%s", with_pid(f, want), f->proc.log);
    assert_null(strstr(f->proc.log, "corestreamd listening"));
}

/* A directory where the next ledger goes fails that one ring write: logged once at ERROR with the
 * cause, counted in /healthz; the live subscriber gets every ledger; the next write works, the
 * failed ledger is a hole and the ledgers before it stay (docs/RING.md, failure table: "a ring
 * write fails"). */
static void directory_in_place_degrades_then_recovers(void **state)
{
    fixture *f = *state;
    start_daemon(f, NULL, k_synthetic);
    if (cs_proc_wait_listening(&f->proc, WAIT_MS) != 0)
        fail_msg("not listening:\n%s", f->proc.log);
    cs_ws *ws = cs_ws_connect("127.0.0.1", f->proc.port, "/stream", WAIT_MS, NULL, NULL, 0);
    assert_non_null(ws);
    cs_ledger l;
    char err[256];
    assert_int_equal(cs_ws_read_ledger(ws, &l, WAIT_MS, err, sizeof err), 1);
    uint32_t s0 = l.seq, bad = s0 + 6;
    cs_ledger_free(&l);
    /* A non-empty directory where ledger `bad` is to be published cannot be renamed over. mkdir
     * succeeds only while the ring has not published that ledger, so its write fails however late
     * the test gets here: a ledger already published (EEXIST) is passed over for the next. */
    char p[PATH_MAX + 64];
    for (;; bad++) {
        snprintf(p, sizeof p, "%s/ledger-%u.xdr", f->ring, bad);
        if (mkdir(p, 0755) == 0)
            break;
        assert_int_equal(errno, EEXIST);
        assert_true(bad < s0 + 1000);
    }
    snprintf(p, sizeof p, "%s/ledger-%u.xdr/keep", f->ring, bad);
    FILE *fp = fopen(p, "w");
    assert_non_null(fp);
    fclose(fp);

    read_past_the_hole(f, &ws, bad, bad + 4);
    char want[512];
    snprintf(want, sizeof want,
             "level=ERROR msg=\"ring write failed; live streaming continues, the ring keeps its range until a "
             "write works\" ledger=%u error=\"retain ledger %u: store: publish ledger %u: Is a directory\"",
             bad, bad, bad);
    wait_line(f, want);
    snprintf(want, sizeof want,
             "level=WARN msg=\"ring: ledgers whose writes failed are a hole; the ledgers before them stay\" first=%u "
             "last=%u ledger=%u",
             bad, bad, bad + 1);
    wait_line(f, want);
    snprintf(want, sizeof want, "level=INFO msg=\"ring write recovered\" ledger=%u ledgers_not_retained=1", bad + 1);
    wait_line(f, want);
    assert_int_equal(cs_proc_log_count(&f->proc, "ring write failed"), 1);

    char body[512];
    healthz(f, body, sizeof body);
    if (strncmp(body, "{\"oldest\":1,", 11) != 0 || strstr(body, "retention reset") ||
        !strstr(body, ",\"ring_write_failures\":1,\"ring_degraded\":false,\"ring_dropped\":0,"
                      "\"ring_holes\":1,\"ring_io_errors\":0,\"start\":\"default\",\"start_ledger\":1,\"run\":\"synthetic-"))
        fail_msg("healthz: %s", body);
    /* A subscriber asking for the failed ledger is told where the hole is. */
    char q[64];
    snprintf(q, sizeof q, "/stream?start=%u", bad);
    cs_ws *old = cs_ws_connect("127.0.0.1", f->proc.port, q, WAIT_MS, NULL, NULL, 0);
    assert_non_null(old);
    assert_int_equal(cs_ws_read_ledger(old, &l, WAIT_MS, err, sizeof err), 0);
    int code = 0;
    char reason[128];
    assert_int_equal(cs_ws_last_close(old, &code, reason, sizeof reason), 1);
    assert_int_equal(code, 4002);
    snprintf(want, sizeof want, "missing from the ring: first=%u last=%u", bad, bad);
    assert_string_equal(reason, want);
    cs_ws_close(old);
    cs_ws_close(ws);
    assert_int_equal(cs_proc_stop(&f->proc, SIGTERM, STOP_MS), 0);
}

/* A full file system fails every ring write from some ledger on: one ERROR, the failures counted,
 * the ring degraded and frozen at what it holds, and the live subscriber unaffected. */
static void full_disk_degrades_live_carries_on(void **state)
{
    fixture *f = *state;
    if (!can_mount_tmpfs()) {
        print_message("skipped: cannot mount a small tmpfs here (unshare -rm failed)\n");
        skip();
    }
    assert_int_equal(mkdir(f->data, 0755), 0);
    char script[4096];
    /* 256 KiB hold three 64 KiB ledgers and part of a fourth. */
    snprintf(script, sizeof script, "mount -t tmpfs -o size=256k tmpfs '%s'", f->data);
    start_daemon(f, script, k_synthetic);
    if (cs_proc_wait_listening(&f->proc, WAIT_MS) != 0)
        fail_msg("not listening:\n%s", f->proc.log);
    cs_ws *ws = cs_ws_connect("127.0.0.1", f->proc.port, "/stream", WAIT_MS, NULL, NULL, 0);
    assert_non_null(ws);
    wait_line(f, "level=ERROR msg=\"ring write failed; live streaming continues");
    char line[1024];
    cs_proc_line(&f->proc, line, sizeof line);
    assert_non_null(strstr(line, ": No space left on device\""));
    uint32_t first = read_through(ws, 0);
    read_through(ws, first + 8);
    cs_proc_drain(&f->proc);
    assert_int_equal(cs_proc_log_count(&f->proc, "ring write failed"), 1);
    assert_int_equal(cs_proc_log_count(&f->proc, "ring write recovered"), 0);
    char body[512];
    healthz(f, body, sizeof body);
    if (!strstr(body, ",\"ring_degraded\":true,") || strstr(body, "\"ring_write_failures\":0,"))
        fail_msg("healthz: %s", body);
    cs_ws_close(ws);
    assert_int_equal(cs_proc_stop(&f->proc, SIGTERM, STOP_MS), 0);
}

/* ---- integrity: every kind of corruption, before start and while replayed ---------------------- */

#define BIG (16u << 20) /* ledger bytes: far more than the socket buffers, so a replay is mid-file */
#define BIG_STR "16777216"

static const char *const k_fill[] = {"--source", "synthetic", "--synthetic-size", BIG_STR, "--compress=false",
                                     "--synthetic-interval=-1ns", "--emit-window", "0", "--synthetic-count", "3",
                                     NULL};
/* Continues the filled ring at ledger 4, then waits an hour: the ring is [1,4] (or less). */
static const char *const k_serve[] = {"--source", "synthetic", "--synthetic-size", BIG_STR, "--compress=false",
                                      "--synthetic-interval", "1h", "--emit-window", "0", "--start-ledger", "4",
                                      NULL};

/* Writes ledgers 1..3 with their records through a real run. */
static void fill_ring(fixture *f)
{
    start_daemon(f, NULL, k_fill);
    int st = cs_proc_wait_exit(&f->proc, 60000);
    cs_proc_drain(&f->proc);
    if (st != 0)
        fail_msg("fill exit %d:\n%s", st, f->proc.log);
    cs_proc_free(&f->proc);
    f->started = false;
}

static void serve(fixture *f)
{
    start_daemon(f, NULL, k_serve);
    if (cs_proc_wait_listening(&f->proc, WAIT_MS) != 0)
        fail_msg("not listening:\n%s", f->proc.log);
    wait_line(f, "level=INFO msg=\"source loop starting\"");
    /* Ledger 4 goes out at once; wait for it to be retained. */
    char body[512];
    for (int i = 0; i < 2000; i++) {
        healthz(f, body, sizeof body);
        if (strstr(body, "\"latest\":4,"))
            return;
        usleep(5000);
    }
    fail_msg("ledger 4 never retained: %s", body);
}

static void ledger_path(const fixture *f, const char *name, char *buf, size_t len)
{
    snprintf(buf, len, "%s/%s", f->ring, name);
}

typedef enum corruption {
    C_TRUNCATE, C_EXTEND, C_FLIP, C_EMPTY, C_SYMLINK, C_DIRECTORY, C_NO_RECORD, C_OTHER_RECORD, C_REMOVE,
    C_RECORD_DIGIT, /* one hex digit of the record's xxh64= changed */
    C_FLIP_UNMARKED /* a byte flipped, and ring-format removed (as for a ring from before records) */
} corruption;

/* Ledger 2's record line in records-0.log, into line (its newline included). */
static void record_of_2(const fixture *f, char *line, size_t len)
{
    if (!cs_ringfiles_record(f->ring, 2, line, len, NULL))
        fail_msg("ledger 2 has no record line in %s", f->ring);
}

/* Ledger 2's record line replaced in place by text of the same length (the daemon may run). */
static void replace_2_in_place(const fixture *f, const char *text)
{
    char line[1100];
    record_of_2(f, line, sizeof line);
    assert_int_equal(strlen(text), strlen(line));
    assert_true(cs_ringfiles_replace_record(f->ring, 2, text));
}

/* One hex digit of xxh64= in ledger 2's record line changed to another, in place. */
static void change_record_digit(const fixture *f)
{
    char text[1100];
    record_of_2(f, text, sizeof text);
    char *d = strstr(text, " xxh64=");
    assert_non_null(d);
    d += 7;
    *d = *d == '0' ? '1' : '0';
    replace_2_in_place(f, text);
}

/* Ledger 2's record taken out in place: its line overwritten by the line the ring writes to take a
 * ledger out (`corestream-ring-gone seq=2 `), padded with spaces to the same length. An open finds
 * no record for 2; a daemon that loaded the line's place reads there what is no record of it. */
static void remove_record(const fixture *f)
{
    char text[1100];
    record_of_2(f, text, sizeof text);
    size_t n = strlen(text);
    static const char gone[] = "corestream-ring-gone seq=2 ";
    assert_true(n > sizeof gone);
    memset(text, ' ', n - 1);
    memcpy(text, gone, strlen(gone));
    replace_2_in_place(f, text);
}

/* Another ledger's record where ledger 2's was. A running daemon (running) reads the line where it
 * loaded ledger 2's: there goes a valid record of ledger 1 of the same length (ledger 2's fields,
 * seq=1, its self= made again), in place. A stopped one reads the logs afresh, where a line is its
 * ledger's by the seq it names: ledger 1's line copied over ledger 2's leaves 2 with none. */
static void other_record(const fixture *f, bool running)
{
    char text[1100];
    if (!running) {
        assert_true(cs_ringfiles_record(f->ring, 1, text, sizeof text, NULL));
        assert_true(cs_ringfiles_replace_record(f->ring, 2, text));
        return;
    }
    record_of_2(f, text, sizeof text);
    char *q = strstr(text, " seq=2 "), *self = strstr(text, " self=");
    assert_non_null(q);
    assert_non_null(self);
    q[5] = '1';
    char hex[17];
    snprintf(hex, sizeof hex, "%016llx", (unsigned long long)XXH64(text, (size_t)(self - text), 0));
    assert_int_equal(strlen(self + 6), 17); /* 16 digits and the newline */
    memcpy(self + 6, hex, 16);
    replace_2_in_place(f, text);
}

static void corrupt(const fixture *f, corruption c, bool running)
{
    char p[1024], q[1024];
    ledger_path(f, "ledger-2.xdr", p, sizeof p);
    switch (c) {
    case C_TRUNCATE:
        assert_int_equal(truncate(p, 1000), 0);
        break;
    case C_EMPTY:
        assert_int_equal(truncate(p, 0), 0);
        break;
    case C_EXTEND: {
        FILE *fp = fopen(p, "a");
        assert_non_null(fp);
        fputs("extra", fp);
        assert_int_equal(fclose(fp), 0);
        break;
    }
    case C_RECORD_DIGIT:
        change_record_digit(f);
        break;
    case C_FLIP_UNMARKED:
        ledger_path(f, "ring-format", q, sizeof q);
        assert_int_equal(unlink(q), 0);
        /* fall through */
    case C_FLIP: {
        /* The last byte: read last, so a replay under way has not read it yet. */
        int fd = open(p, O_RDWR);
        assert_true(fd >= 0);
        uint8_t b;
        assert_int_equal(pread(fd, &b, 1, BIG - 1), 1);
        b ^= 0x40;
        assert_int_equal(pwrite(fd, &b, 1, BIG - 1), 1);
        close(fd);
        break;
    }
    case C_SYMLINK:
        assert_int_equal(unlink(p), 0);
        assert_int_equal(symlink("/etc/hostname", p), 0);
        break;
    case C_DIRECTORY:
        assert_int_equal(unlink(p), 0);
        assert_int_equal(mkdir(p, 0755), 0);
        break;
    case C_REMOVE:
        assert_int_equal(unlink(p), 0);
        break;
    case C_NO_RECORD:
        remove_record(f);
        break;
    case C_OTHER_RECORD:
        other_record(f, running);
        break;
    }
}

/* What the open-time check says about each kind (NULL: only a replay can tell). */
static const char *open_problem(corruption c)
{
    switch (c) {
    case C_TRUNCATE:
        return "problem=\"is 1000 bytes, its record says " BIG_STR "\"";
    case C_EXTEND:
        return "problem=\"is 16777221 bytes, its record says " BIG_STR "\"";
    case C_EMPTY:
        return "problem=\"is 0 bytes, its record says " BIG_STR "\"";
    case C_SYMLINK:
        return "problem=\"is a symbolic link\"";
    case C_DIRECTORY:
        return "problem=\"is a directory\"";
    case C_NO_RECORD:
        return "problem=\"integrity record is missing\"";
    case C_OTHER_RECORD: /* a line is its ledger's by the seq it names: 2 has none left */
        return "problem=\"integrity record is missing\"";
    case C_REMOVE:
        return "problem=\"is missing (its record is there)\"";
    case C_RECORD_DIGIT:
        return "problem=\"integrity record fails its own checksum\"";
    default:
        return NULL;
    }
}

static void expect_close(cs_ws *ws, int want_code, const char *want_reason)
{
    for (int i = 0; i < 1000; i++) {
        cs_ws_msg m;
        int k = cs_ws_read(ws, &m, WAIT_MS);
        if (k == CS_WS_BINARY)
            continue;
        if (k != CS_WS_CLOSE)
            fail_msg("wanted close %d, got kind %d (%s)", want_code, k, m.reason);
        assert_int_equal(m.close_code, want_code);
        if (!strstr(m.reason, want_reason))
            fail_msg("close reason \"%s\" lacks \"%s\"", m.reason, want_reason);
        return;
    }
    fail_msg("no close");
}

/* The ring after ledger 2 was quarantined: 1 served, then close 4002 naming the hole; 3 and 4
 * served whole; the bounds unchanged. */
static void expect_hole_at_2(fixture *f)
{
    cs_ws *ws = cs_ws_connect("127.0.0.1", f->proc.port, "/stream?start=1&end=4", WAIT_MS, NULL, NULL, 0);
    assert_non_null(ws);
    cs_ledger l;
    char err[256];
    assert_int_equal(cs_ws_read_ledger(ws, &l, WAIT_MS, err, sizeof err), 1);
    assert_int_equal(l.seq, 1);
    cs_ledger_free(&l);
    expect_close(ws, 4002, "missing from the ring: first=2 last=2");
    cs_ws_close(ws);
    ws = cs_ws_connect("127.0.0.1", f->proc.port, "/stream?start=3&end=4", WAIT_MS, NULL, NULL, 0);
    assert_non_null(ws);
    assert_int_equal(read_through(ws, 4), 3);
    cs_ws_close(ws);
    char body[512];
    healthz(f, body, sizeof body);
    if (strncmp(body, "{\"oldest\":1,\"latest\":4,", 23) != 0 || !strstr(body, "\"ring_dropped\":1,"))
        fail_msg("healthz: %s", body);
}

/* Ledger 2's quarantine directory holds what was in its place and a reason. */
static void expect_quarantined_2(const fixture *f)
{
    char q[PATH_MAX + 64];
    snprintf(q, sizeof q, "%s/quarantine", f->data);
    DIR *d = opendir(q);
    if (!d)
        fail_msg("no %s", q);
    int found = 0;
    for (struct dirent *de; (de = readdir(d));)
        if (strncmp(de->d_name, "ledger-2-", 9) == 0) {
            char reason[PATH_MAX + 400];
            snprintf(reason, sizeof reason, "%s/%s/reason", q, de->d_name);
            struct stat st;
            found += stat(reason, &st) == 0 && st.st_size > 0;
        }
    closedir(d);
    assert_int_equal(found, 1);
}

static void corrupt_before_start(fixture *f, corruption c)
{
    fill_ring(f);
    corrupt(f, c, false);
    serve(f);
    char want[1200];
    snprintf(want, sizeof want, "level=ERROR msg=\"ring ledger is bad; quarantined, the ledgers around it stay\" file=%s/ledger-2.xdr ",
             f->ring);
    if (c == C_FLIP || c == C_FLIP_UNMARKED) {
        /* Same length: found by the replay's hash, ring-format or not (a record that exists is
         * never made again from the bytes on disk). Ledger 1 is whole; ledger 2 never ends. */
        cs_ws *ws = cs_ws_connect("127.0.0.1", f->proc.port, "/stream?start=1&end=4", WAIT_MS, NULL, NULL, 0);
        assert_non_null(ws);
        cs_ledger l;
        char err[256];
        assert_int_equal(cs_ws_read_ledger(ws, &l, WAIT_MS, err, sizeof err), 1);
        assert_int_equal(l.seq, 1);
        cs_ledger_free(&l);
        assert_int_equal(cs_ws_read_ledger(ws, &l, WAIT_MS, err, sizeof err), 0);
        int code;
        char reason[128];
        assert_int_equal(cs_ws_last_close(ws, &code, reason, sizeof reason), 1);
        assert_int_equal(code, 1011);
        assert_string_equal(reason, "ring ledger 2 failed its integrity check");
        cs_ws_close(ws);
        wait_line(f, want);
        char line[2048];
        cs_proc_line(&f->proc, line, sizeof line);
        if (!strstr(line, "problem=\"its bytes hash to ") || !strstr(line, "found_by=\"ledger-2.xdr changed on disk: "))
            fail_msg("line: %s", line);
    } else {
        /* Logged at open, before the listening line the harness already read past. */
        const char *at = strstr(f->proc.log, with_pid(f, want));
        if (!at)
            fail_msg("no %s in:\n%s", want, f->proc.log);
        char line[2048];
        snprintf(line, sizeof line, "%.*s", (int)strcspn(at, "\n"), at);
        if (!strstr(line, open_problem(c)) || !strstr(line, "found_by=open oldest=1 latest=3"))
            fail_msg("wanted %s; line: %s", open_problem(c), line);
    }
    expect_hole_at_2(f);
    expect_quarantined_2(f);
    assert_int_equal(cs_proc_log_count(&f->proc, "ring ledger is bad"), 1);
    assert_int_equal(cs_proc_stop(&f->proc, SIGTERM, STOP_MS), 0);
}

#define BEFORE_START(kind, fn)                                                                       \
    static void fn(void **state)                                                                   \
    {                                                                                              \
        corrupt_before_start(*state, kind);                                                        \
    }
BEFORE_START(C_TRUNCATE, truncated_before_start)
BEFORE_START(C_EXTEND, extended_before_start)
BEFORE_START(C_FLIP, flipped_before_start)
BEFORE_START(C_EMPTY, emptied_before_start)
BEFORE_START(C_SYMLINK, symlink_before_start)
BEFORE_START(C_DIRECTORY, directory_before_start)
BEFORE_START(C_NO_RECORD, missing_record_before_start)
BEFORE_START(C_OTHER_RECORD, other_record_before_start)
BEFORE_START(C_REMOVE, removed_before_start)
BEFORE_START(C_RECORD_DIGIT, record_digit_before_start)
BEFORE_START(C_FLIP_UNMARKED, flipped_without_ring_format_before_start)

/* Reads ledger 2's flow raw (uncompressed chunks) after its BEGIN: 1 and the END's checksum
 * checked against the bytes when it ends whole, 0 and the close when it does not. */
static int read_rest_of_2(cs_ws *ws, int *code, char *reason, size_t rlen)
{
    XXH64_state_t *st = XXH64_createState();
    XXH64_reset(st, 0);
    uint64_t total = 0;
    for (int i = 0; i < 100000; i++) {
        cs_ws_msg m;
        int k = cs_ws_read(ws, &m, WAIT_MS);
        if (k == CS_WS_CLOSE) {
            *code = m.close_code;
            snprintf(reason, rlen, "%s", m.reason);
            XXH64_freeState(st);
            return 0;
        }
        assert_int_equal(k, CS_WS_BINARY);
        cs_wire_msg w;
        assert_int_equal(cs_wire_decode(m.data, m.len, &w, NULL), 0);
        assert_int_equal(w.seq, 2);
        if (w.type == CS_WIRE_TYPE_CHUNK) {
            assert_int_equal(w.codec, 0);
            XXH64_update(st, w.payload, w.payload_len);
            total += w.payload_len;
            continue;
        }
        assert_int_equal(w.type, CS_WIRE_TYPE_END);
        assert_int_equal(w.total_len, BIG);
        assert_int_equal(total, BIG);
        assert_true(w.checksum == XXH64_digest(st));
        XXH64_freeState(st);
        return 1;
    }
    fail_msg("ledger 2 never ended");
    return -1;
}

/* Corrupted after the replay opened ledger 2 (its BEGIN arrived; the subscriber reads slowly):
 * truncation and changed bytes end in 1011 naming the ledger, with no END, and the ring drops it;
 * a removed, replaced or extended file is still read whole from the descriptor the replay holds,
 * so the ledger arrives valid, and the next subscriber's open check drops it. So does a record
 * removed, replaced or changed under the replay: the record it loaded still vouches for the bytes
 * it reads.
 * Another subscriber meanwhile is unaffected. */
static void corrupt_while_replaying(fixture *f, corruption c)
{
    fill_ring(f);
    serve(f);
    cs_ws_opts o = {.rcvbuf = 4096};
    cs_ws *ws = cs_ws_connect_opts("127.0.0.1", f->proc.port, "/stream?start=2&end=4", &o, WAIT_MS, NULL, NULL, 0);
    assert_non_null(ws);
    cs_ws_msg m;
    assert_int_equal(cs_ws_read(ws, &m, WAIT_MS), CS_WS_BINARY);
    cs_wire_msg w;
    assert_int_equal(cs_wire_decode(m.data, m.len, &w, NULL), 0);
    assert_int_equal(w.type, CS_WIRE_TYPE_BEGIN);
    corrupt(f, c, true);
    int code = 0;
    char reason[128] = "";
    int whole = read_rest_of_2(ws, &code, reason, sizeof reason);
    char want[1200];
    snprintf(want, sizeof want, "level=ERROR msg=\"ring ledger is bad; quarantined, the ledgers around it stay\" file=%s/ledger-2.xdr ",
             f->ring);
    if (c == C_TRUNCATE || c == C_EMPTY || c == C_FLIP) {
        assert_int_equal(whole, 0);
        assert_int_equal(code, 1011);
        assert_string_equal(reason, "ring ledger 2 failed its integrity check");
        wait_line(f, want);
        char line[2048];
        cs_proc_line(&f->proc, line, sizeof line);
        /* Found by the read that came short, or by the next chunk's read on the other replay
         * worker, which opens the file again once the short read let it go: whichever asks the
         * ring for its verdict first names what it saw. */
        const char *problem = c == C_FLIP ? "found_by=\"ledger-2.xdr changed on disk: "
                                          : "found_by=\"ledger-2.xdr is shorter than its record: ends before byte ";
        if (!strstr(line, problem) && (c == C_FLIP || !strstr(line, "found_by=\"store: ledger 2 failed its integrity "
                                                                    "check: is ")))
            fail_msg("wanted %s; line: %s", problem, line);
        expect_hole_at_2(f);
    } else {
        /* The bytes read are the recorded ones: a valid ledger, then 3 and 4. */
        if (whole != 1)
            fail_msg("ledger 2 cut short: %d %s", code, reason);
        assert_int_equal(read_through(ws, 4), 3);
        /* The next reader's check finds the file changed; proven bad, it is quarantined and that
         * reader is told where the hole is. */
        cs_ws *next = cs_ws_connect("127.0.0.1", f->proc.port, "/stream?start=2&end=4", WAIT_MS, NULL, NULL, 0);
        assert_non_null(next);
        expect_close(next, 4002, "missing from the ring: first=2 last=2");
        cs_ws_close(next);
        if (c == C_REMOVE)
            snprintf(want, sizeof want, "level=ERROR msg=\"ring ledger is bad; quarantined, the ledgers around it stay\" file=%s/ledger-2.xdr ",
                     f->ring);
        wait_line(f, want);
        expect_quarantined_2(f);
    }
    cs_ws_close(ws);
    assert_int_equal(cs_proc_stop(&f->proc, SIGTERM, STOP_MS), 0);
}

#define WHILE_REPLAYING(kind, fn)                                                                    \
    static void fn(void **state)                                                                   \
    {                                                                                              \
        corrupt_while_replaying(*state, kind);                                                     \
    }
WHILE_REPLAYING(C_TRUNCATE, truncated_while_replaying)
WHILE_REPLAYING(C_EMPTY, emptied_while_replaying)
WHILE_REPLAYING(C_FLIP, flipped_while_replaying)
WHILE_REPLAYING(C_EXTEND, extended_while_replaying)
WHILE_REPLAYING(C_REMOVE, removed_while_replaying)
WHILE_REPLAYING(C_SYMLINK, symlink_while_replaying)
WHILE_REPLAYING(C_DIRECTORY, directory_while_replaying)
WHILE_REPLAYING(C_NO_RECORD, missing_record_while_replaying)
WHILE_REPLAYING(C_OTHER_RECORD, other_record_while_replaying)
WHILE_REPLAYING(C_RECORD_DIGIT, record_digit_while_replaying)

/* A ring written before records (raw files only, no ring-format marker) opens: records are made
 * by hashing, logged at INFO, and its ledgers are served. */
static void old_format_ring_opens(void **state)
{
    fixture *f = *state;
    fill_ring(f);
    /* Raw files only: the segment's records log and frames file go with ring-format. */
    char p[1024];
    cs_ringfiles_log_path(p, sizeof p, f->ring, 1);
    assert_int_equal(unlink(p), 0);
    cs_ringfiles_seg_path(p, sizeof p, f->ring, 1);
    assert_int_equal(unlink(p), 0);
    ledger_path(f, "ring-format", p, sizeof p);
    assert_int_equal(unlink(p), 0);
    serve(f);
    char want[1200];
    snprintf(want, sizeof want,
             "level=INFO msg=\"ring: integrity records made from the ledgers on disk (a ring written before "
             "records)\" dir=%s ledgers=3",
             f->ring);
    if (!strstr(f->proc.log, with_pid(f, want))) /* logged at open, before listening */
        fail_msg("no %s in:\n%s", want, f->proc.log);
    cs_ws *ws = cs_ws_connect("127.0.0.1", f->proc.port, "/stream?start=1&end=4", WAIT_MS, NULL, NULL, 0);
    assert_non_null(ws);
    assert_int_equal(read_through(ws, 4), 1);
    cs_ws_close(ws);
    assert_int_equal(cs_proc_log_count(&f->proc, "level=ERROR"), 0);
    assert_int_equal(cs_proc_stop(&f->proc, SIGTERM, STOP_MS), 0);
}

/* ---- run identity -------------------------------------------------------------------------------- */

static void run_to_exit(fixture *f, const char *const *args)
{
    cs_ringfx_run_to_exit(f, CORESTREAMD_BIN, args, 60000);
}

static void free_proc(fixture *f)
{
    cs_ringfx_free_proc(f);
}

/* A restart over the data dir of another run (another synthetic size) resets the ring before
 * listening, even when its numbering continues: a subscriber connecting at once gets only the new
 * run. The same run continuing contiguously keeps the ring; the same run starting over resets it. */
static void stale_run_is_reset_before_listening(void **state)
{
    fixture *f = *state;
    static const char *const first[] = {"--source", "synthetic", "--synthetic-size", "4096",
                                        "--synthetic-interval=-1ns", "--emit-window", "0", "--synthetic-count",
                                        "5", NULL};
    run_to_exit(f, first);
    assert_null(strstr(f->proc.log, "ring reset at start"));
    free_proc(f);

    static const char *const other[] = {"--source", "synthetic", "--synthetic-size", "8192",
                                        "--synthetic-interval", "1h", "--emit-window", "0", "--start-ledger",
                                        "6", NULL};
    start_daemon(f, NULL, other);
    if (cs_proc_wait_listening(&f->proc, WAIT_MS) != 0)
        fail_msg("not listening:\n%s", f->proc.log);
    const char *warn = strstr(f->proc.log, with_pid(f, "level=WARN msg=\"ring reset at start: its ledgers are not this run's\" "
                                           "reason=\"written by another run\" ring_identity=\"source=synthetic "
                                           "size=4096 compressible=false\" identity=\"source=synthetic size=8192 "
                                           "compressible=false\" oldest=1 latest=5\n"));
    if (!warn || warn > strstr(f->proc.log, "corestreamd listening"))
        fail_msg("no reset before listening:\n%s", f->proc.log);
    /* Connected during start-up: the old run's ledgers are gone, the new run's first arrives. */
    cs_ws *ws = cs_ws_connect("127.0.0.1", f->proc.port, "/stream?start=1", WAIT_MS, NULL, NULL, 0);
    assert_non_null(ws);
    cs_ledger l;
    char err[256];
    /* It waits (the ring is empty until ledger 6 is retained; it wants 1): nothing is sent. */
    int rc = cs_ws_read_ledger(ws, &l, 1000, err, sizeof err);
    if (rc == 1)
        fail_msg("served ledger %u (%zu bytes) of a reset ring", l.seq, l.len);
    cs_ws_close(ws);
    char body[512];
    for (int i = 0; i < 2000 && (healthz(f, body, sizeof body), !strstr(body, "\"latest\":6,")); i++)
        usleep(5000);
    ws = cs_ws_connect("127.0.0.1", f->proc.port, "/stream?start=1", WAIT_MS, NULL, NULL, 0);
    assert_non_null(ws);
    assert_int_equal(cs_ws_read_ledger(ws, &l, WAIT_MS, err, sizeof err), 0);
    int code;
    char reason[128];
    assert_int_equal(cs_ws_last_close(ws, &code, reason, sizeof reason), 1);
    assert_int_equal(code, 4001);
    assert_string_equal(reason, "too far behind: oldest=6 latest=6");
    cs_ws_close(ws);
    ws = cs_ws_connect("127.0.0.1", f->proc.port, "/stream?start=6&end=6", WAIT_MS, NULL, NULL, 0);
    assert_non_null(ws);
    assert_int_equal(cs_ws_read_ledger(ws, &l, WAIT_MS, err, sizeof err), 1);
    assert_int_equal(l.seq, 6);
    assert_int_equal(l.len, 8192);
    cs_ledger_free(&l);
    cs_ws_close(ws);
    assert_int_equal(cs_proc_stop(&f->proc, SIGTERM, STOP_MS), 0);
    free_proc(f);

    /* The same run, continuing at 7: kept. */
    static const char *const cont[] = {"--source", "synthetic", "--synthetic-size", "8192",
                                       "--synthetic-interval=-1ns", "--emit-window", "0", "--start-ledger", "7",
                                       "--synthetic-count", "1", NULL};
    run_to_exit(f, cont);
    assert_null(strstr(f->proc.log, "ring reset"));
    free_proc(f);

    /* The same run told to start over at 1: reset, with the reason. */
    static const char *const again[] = {"--source", "synthetic", "--synthetic-size", "8192",
                                        "--synthetic-interval=-1ns", "--emit-window", "0", "--start-ledger", "1",
                                        "--synthetic-count", "1", NULL};
    run_to_exit(f, again);
    if (!strstr(f->proc.log, "reason=\"this run starts at ledger 1, not at 8\"") ||
        !strstr(f->proc.log, "oldest=6 latest=7\n"))
        fail_msg("log:\n%s", f->proc.log);
    assert_null(strstr(f->proc.log, "retention reset"));
}

int main(void)
{
    signal(SIGPIPE, SIG_IGN);
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(readonly_dir_refused_at_start, setup, teardown),
        cmocka_unit_test_setup_teardown(directory_in_place_degrades_then_recovers, setup, teardown),
        cmocka_unit_test_setup_teardown(full_disk_degrades_live_carries_on, setup, teardown),
        cmocka_unit_test_setup_teardown(truncated_before_start, setup, teardown),
        cmocka_unit_test_setup_teardown(extended_before_start, setup, teardown),
        cmocka_unit_test_setup_teardown(flipped_before_start, setup, teardown),
        cmocka_unit_test_setup_teardown(emptied_before_start, setup, teardown),
        cmocka_unit_test_setup_teardown(symlink_before_start, setup, teardown),
        cmocka_unit_test_setup_teardown(directory_before_start, setup, teardown),
        cmocka_unit_test_setup_teardown(missing_record_before_start, setup, teardown),
        cmocka_unit_test_setup_teardown(other_record_before_start, setup, teardown),
        cmocka_unit_test_setup_teardown(removed_before_start, setup, teardown),
        cmocka_unit_test_setup_teardown(record_digit_before_start, setup, teardown),
        cmocka_unit_test_setup_teardown(flipped_without_ring_format_before_start, setup, teardown),
        cmocka_unit_test_setup_teardown(truncated_while_replaying, setup, teardown),
        cmocka_unit_test_setup_teardown(emptied_while_replaying, setup, teardown),
        cmocka_unit_test_setup_teardown(flipped_while_replaying, setup, teardown),
        cmocka_unit_test_setup_teardown(extended_while_replaying, setup, teardown),
        cmocka_unit_test_setup_teardown(removed_while_replaying, setup, teardown),
        cmocka_unit_test_setup_teardown(symlink_while_replaying, setup, teardown),
        cmocka_unit_test_setup_teardown(directory_while_replaying, setup, teardown),
        cmocka_unit_test_setup_teardown(missing_record_while_replaying, setup, teardown),
        cmocka_unit_test_setup_teardown(other_record_while_replaying, setup, teardown),
        cmocka_unit_test_setup_teardown(record_digit_while_replaying, setup, teardown),
        cmocka_unit_test_setup_teardown(old_format_ring_opens, setup, teardown),
        cmocka_unit_test_setup_teardown(stale_run_is_reset_before_listening, setup, teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
