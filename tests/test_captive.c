/* SPDX-License-Identifier: Apache-2.0 */
/* `--source captive` end to end against a stub stellar-core (a shell script this test writes) and
 * a history archive served on 127.0.0.1 by this test: PORTSPEC 85-87 adapted, the SDK's start
 * sequence for a fresh and a reused storage dir, the refusals, the stream's rules, the archive
 * pool, and supervision (exit statuses, SIGINT, SIGKILL after the grace, the working dir policy). */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "common/clock.h"
#include "common/log.h"
#include "corestreamd/sources/captive/archive.h"
#include "common/cancel.h"
#include "corestreamd/sources/captive/captive.h"
#include "support/metabuild.h"
#include "support/tmpdir.h"

#define TESTNET "Test SDF Network ; September 2015"
#define PUBNET "Public Global Stellar Network ; September 2015"

/* captive_test.go's testCoreConfig, with the passphrase line. */
#define GO_TEST_CONFIG                                                                              \
    "NETWORK_PASSPHRASE=\"" TESTNET "\"\n"                                                         \
    "DATABASE=\"sqlite3://stellar.db\"\n"                                                          \
    "\n"                                                                                           \
    "[[HOME_DOMAINS]]\n"                                                                           \
    "HOME_DOMAIN=\"testnet.stellar.org\"\n"                                                        \
    "QUALITY=\"HIGH\"\n"                                                                           \
    "\n"                                                                                           \
    "[[VALIDATORS]]\n"                                                                             \
    "NAME=\"sdf_testnet_1\"\n"                                                                     \
    "HOME_DOMAIN=\"testnet.stellar.org\"\n"                                                        \
    "PUBLIC_KEY=\"GDKXE2OZMJIPOSLNA6N6F2BVCI3O777I2OOC4BV7VOYUEHYX7RTRYA7Y\"\n"                    \
    "ADDRESS=\"core-testnet1.stellar.org\"\n"

/* The stub core. It records "<cwd>|<argv…>" for every call and a copy of the conf each command
 * got (conf.<command>) next to itself; its answers come from control files there. `run` installs
 * its SIGINT disposition before it writes any frame, so a test that has read the frames knows the
 * trap is in place; the idle trap kills the background sleep through $!, which the shell sets as
 * it forks, so no SIGINT can slip in between the fork and the trap knowing the pid. */
static const char stub_script[] =
    "#!/bin/sh\n"
    "D=$(cd \"$(dirname \"$0\")\" && pwd)\n"
    "echo \"$(pwd)|$*\" >> \"$D/calls.log\"\n"
    "if [ \"$1\" = version ]; then\n"
    "  echo \"stellar-core 23.0.1 (stub)\"\n"
    "  echo \"ledger protocol version: $(cat \"$D/proto\")\"\n"
    "  exit 0\n"
    "fi\n"
    "conf=$2\n"
    "shift 2\n"
    "[ \"$1\" = --console ] && shift\n"
    "cmd=$1\n"
    "cp \"$conf\" \"$D/conf.$cmd\"\n"
    "case $cmd in\n"
    "offline-info)\n"
    "  if [ -f \"$D/lcl\" ]; then\n"
    "    echo \"{\\\"info\\\": {\\\"ledger\\\": {\\\"num\\\": $(cat \"$D/lcl\"), \\\"hash\\\": \\\"ab\\\"}, "
    "\\\"state\\\": \\\"Booting\\\"}}\"\n"
    "    exit 0\n"
    "  fi\n"
    "  echo \"2026-08-22T10:00:00.000 GABC [Database ERROR] no database\" >&2\n"
    "  exit 1 ;;\n"
    "new-db)\n"
    "  echo \"2026-08-22T10:00:00.123 GABC [Database INFO] * Applying DB schema\"\n"
    "  echo \"2026-08-22T10:00:00.124 GABC [Ledger WARNING] a warning\" >&2\n"
    "  echo \"plain line from core\"\n"
    "  exit 0 ;;\n"
    "catchup)\n"
    "  echo \"[History INFO] catching up to $2\"\n"
    "  exit \"$(cat \"$D/catchup_rc\" 2>/dev/null || echo 0)\" ;;\n"
    "run)\n"
    "  echo \"stdin=$(readlink /proc/$$/fd/0)\" >> \"$D/calls.log\"\n"
    "  mode=$(cat \"$D/run_mode\")\n"
    "  case $mode in\n"
    "  idle) trap 'echo INT >> \"$D/calls.log\"; [ -n \"$!\" ] && kill \"$!\"; exit 0' INT ;;\n"
    "  ignore) trap '' INT ;;\n"
    "  esac\n"
    "  cat \"$D/frames.bin\" >&3\n"
    "  case $mode in\n"
    "  exit*) exit \"${mode#exit }\" ;;\n"
    "  ignore) exec sleep 1000 ;;\n"
    "  esac\n"
    "  sleep 1000 &\n"
    "  wait \"$!\"\n"
    "  exit 0 ;;\n"
    "esac\n"
    "exit 2\n";

/* ---- a history archive on 127.0.0.1 --------------------------------------------------------- */

typedef struct has_server {
    int lfd, stop_efd;
    uint16_t port;
    pthread_t th;
    pthread_mutex_t mu;
    pthread_cond_t cv;
    int requests;
    int fail_first; /* answer 500 to this many requests first */
    uint32_t current;
    char passphrase[128];
    char ua[128];
    char path[256];
    const char *body_override; /* answered instead of the HAS when set */
    size_t big;                /* > 0: a HAS padded to this many bytes */
} has_server;

static void serve_one(has_server *s, int fd)
{
    char req[4096];
    size_t n = 0;
    while (n < sizeof req - 1) {
        struct pollfd p = {.fd = fd, .events = POLLIN};
        if (poll(&p, 1, 5000) <= 0)
            break;
        ssize_t k = read(fd, req + n, sizeof req - 1 - n);
        if (k <= 0)
            break;
        n += (size_t)k;
        req[n] = 0;
        if (strstr(req, "\r\n\r\n"))
            break;
    }
    req[n] = 0;
    char path[256] = {0}, ua[128] = {0};
    sscanf(req, "GET %255s", path);
    const char *u = strcasestr(req, "\r\nUser-Agent: ");
    if (u)
        sscanf(u + 14, "%127[^\r\n]", ua);
    char body[512];
    char *big = NULL;
    size_t body_len;
    pthread_mutex_lock(&s->mu);
    s->requests++;
    bool fail = s->requests <= s->fail_first;
    snprintf(s->ua, sizeof s->ua, "%s", ua);
    snprintf(s->path, sizeof s->path, "%s", path);
    if (s->passphrase[0])
        snprintf(body, sizeof body, "{\"version\": 1, \"server\": \"stub\", \"currentLedger\": %u, \"networkPassphrase\": \"%s\"}",
                 s->current, s->passphrase);
    else
        snprintf(body, sizeof body, "{\"version\": 1, \"server\": \"stub\", \"currentLedger\": %u}", s->current);
    const char *payload = body;
    if (s->body_override) {
        payload = s->body_override;
    } else if (s->big) {
        big = malloc(s->big + 1);
        assert_non_null(big);
        int k = snprintf(big, s->big + 1, "{\"currentLedger\": %u, \"pad\": \"", s->current);
        memset(big + k, 'a', s->big - (size_t)k - 2);
        memcpy(big + s->big - 2, "\"}", 3);
        payload = big;
    }
    body_len = strlen(payload);
    pthread_cond_broadcast(&s->cv);
    pthread_mutex_unlock(&s->mu);
    const char *status = fail ? "500 Internal Server Error"
                         : strcmp(path, "/.well-known/stellar-history.json") != 0 ? "404 Not Found"
                                                                                   : "200 OK";
    char resp[1024];
    int len = snprintf(resp, sizeof resp,
                       "HTTP/1.1 %s\r\nContent-Type: application/json\r\nContent-Length: %zu\r\nConnection: close\r\n\r\n",
                       status, body_len);
    ssize_t w = send(fd, resp, (size_t)len, MSG_NOSIGNAL);
    for (size_t off = 0; w >= 0 && off < body_len; off += (size_t)w)
        w = send(fd, payload + off, body_len - off, MSG_NOSIGNAL);
    free(big);
    close(fd);
}

static void *server_main(void *arg)
{
    has_server *s = arg;
    for (;;) {
        struct pollfd p[2] = {{.fd = s->lfd, .events = POLLIN}, {.fd = s->stop_efd, .events = POLLIN}};
        if (poll(p, 2, -1) < 0 && errno != EINTR)
            break;
        if (p[1].revents)
            break;
        if (p[0].revents) {
            int fd = accept4(s->lfd, NULL, NULL, SOCK_CLOEXEC);
            if (fd >= 0)
                serve_one(s, fd);
        }
    }
    return NULL;
}

static void server_start(has_server *s)
{
    memset(s, 0, sizeof *s);
    pthread_mutex_init(&s->mu, NULL);
    pthread_cond_init(&s->cv, NULL);
    s->current = 127;
    snprintf(s->passphrase, sizeof s->passphrase, "%s", TESTNET);
    s->lfd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    assert_true(s->lfd >= 0);
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    assert_int_equal(bind(s->lfd, (struct sockaddr *)&a, sizeof a), 0);
    assert_int_equal(listen(s->lfd, 16), 0);
    socklen_t al = sizeof a;
    getsockname(s->lfd, (struct sockaddr *)&a, &al);
    s->port = ntohs(a.sin_port);
    s->stop_efd = eventfd(0, EFD_CLOEXEC);
    assert_int_equal(pthread_create(&s->th, NULL, server_main, s), 0);
}

static void server_stop(has_server *s)
{
    uint64_t one = 1;
    ssize_t w = write(s->stop_efd, &one, sizeof one);
    (void)w;
    pthread_join(s->th, NULL);
    close(s->lfd);
    close(s->stop_efd);
    pthread_cond_destroy(&s->cv);
    pthread_mutex_destroy(&s->mu);
}

static int server_requests(has_server *s)
{
    pthread_mutex_lock(&s->mu);
    int n = s->requests;
    pthread_mutex_unlock(&s->mu);
    return n;
}

/* ---- fixture -------------------------------------------------------------------------------- */

typedef struct fx {
    cs_cancel cancel;
    cs_tmpdir dir;
    const char *root; /* dir.path */
    char bin_dir[600], bin[700], storage[600], cfg[600], logpath[600];
    char url[128];
    const char *urls[2];
    has_server srv;
    FILE *log;
    cs_source *src;
} fx;

static void write_file(const char *path, const char *data, size_t n, mode_t mode)
{
    int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, mode);
    if (fd < 0)
        fail_msg("open %s: %s", path, strerror(errno));
    assert_int_equal(write(fd, data, n), (ssize_t)n);
    assert_int_equal(fchmod(fd, mode), 0);
    close(fd);
}

static char *slurp(const char *path)
{
    FILE *f = fopen(path, "rb");
    if (!f)
        return NULL;
    char *buf = NULL;
    size_t cap = 0, n = 0;
    for (;;) {
        if (n + 4097 > cap) {
            cap = cap ? cap * 2 : 8192;
            buf = realloc(buf, cap);
            assert_non_null(buf);
        }
        size_t k = fread(buf + n, 1, cap - n - 1, f);
        if (k == 0)
            break;
        n += k;
    }
    fclose(f);
    buf[n] = 0;
    return buf;
}

static void ctl(fx *f, const char *name, const char *value)
{
    char p[800];
    snprintf(p, sizeof p, "%s/%s", f->bin_dir, name);
    write_file(p, value, strlen(value), 0644);
}

static char *ctl_read(fx *f, const char *name)
{
    char p[800];
    snprintf(p, sizeof p, "%s/%s", f->bin_dir, name);
    return slurp(p);
}

static bool exists(const char *path)
{
    struct stat st;
    return stat(path, &st) == 0;
}

static int setup(void **state)
{
    fx *f = calloc(1, sizeof *f);
    if (!f)
        return -1;
    if (cs_cancel_init(&f->cancel) != 0 || cs_tmpdir_make(&f->dir, "captive") != 0)
        return -1;
    f->root = f->dir.path; /* canonical: the source resolves the paths it is given */
    snprintf(f->bin_dir, sizeof f->bin_dir, "%s/bin", f->root);
    snprintf(f->bin, sizeof f->bin, "%s/stellar-core", f->bin_dir);
    snprintf(f->storage, sizeof f->storage, "%s/storage", f->root);
    snprintf(f->cfg, sizeof f->cfg, "%s/captive-core.cfg", f->root);
    snprintf(f->logpath, sizeof f->logpath, "%s/log.txt", f->root);
    if (mkdir(f->bin_dir, 0755) != 0)
        return -1;
    write_file(f->bin, stub_script, strlen(stub_script), 0755);
    ctl(f, "proto", "23");
    ctl(f, "run_mode", "idle");
    ctl(f, "frames.bin", "");
    write_file(f->cfg, GO_TEST_CONFIG, strlen(GO_TEST_CONFIG), 0644);
    server_start(&f->srv);
    snprintf(f->url, sizeof f->url, "http://127.0.0.1:%u/", f->srv.port);
    f->urls[0] = f->url;
    f->log = fopen(f->logpath, "w");
    if (!f->log)
        return -1;
    cs_log_init(f->log, CS_LOG_DEBUG);
    *state = f;
    return 0;
}

static int teardown(void **state)
{
    fx *f = *state;
    if (f->src)
        f->src->ops->destroy(f->src);
    server_stop(&f->srv);
    cs_log_init(stdout, CS_LOG_INFO);
    fclose(f->log);
    cs_cancel_destroy(&f->cancel);
    int rc = cs_tmpdir_remove(&f->dir);
    free(f);
    return rc;
}

static cs_captive_config cfg_for(fx *f, uint32_t start)
{
    return (cs_captive_config){
        .core_binary = f->bin,
        .core_config = f->cfg,
        .storage_dir = f->storage,
        .urls = f->urls,
        .nurls = 1,
        .start = start,
        .stop_grace_ns = 2 * 1000000000LL,
    };
}

static void open_source(fx *f, const cs_captive_config *c)
{
    cs_err err = {0};
    if (cs_captive_source_new(&f->src, c, &f->cancel, &err) != 0)
        fail_msg("cs_captive_source_new: %s", err.msg);
}

static void destroy_source(fx *f)
{
    f->src->ops->destroy(f->src);
    f->src = NULL;
}

/* ---- frames --------------------------------------------------------------------------------- */

typedef struct frames {
    cs_mb_buf b;
    size_t n;
    uint32_t seq[128];
    size_t off[128], len[128];
} frames;

static void hash_for(uint32_t seq, uint8_t out[32])
{
    for (int i = 0; i < 32; i++)
        out[i] = (uint8_t)(seq * 7 + (uint32_t)i * 13 + 1);
}

/* A LedgerCloseMeta v1 (ext v0, so LedgerHeaderHistoryEntry.hash at 8 and previousLedgerHash at
 * 44) whose hashes chain: hash(seq), prev = hash(seq-1). */
static void frames_add(frames *fr, uint32_t seq, size_t tail)
{
    cs_mb_meta m = cs_mb_go_meta(1, seq, false, 0, false, tail);
    size_t body = cs_mb_put_frame(&fr->b, &m);
    uint8_t h[32], p[32];
    hash_for(seq, h);
    hash_for(seq - 1, p);
    memcpy(fr->b.p + body + 8, h, 32);
    memcpy(fr->b.p + body + 44, p, 32);
    fr->seq[fr->n] = seq;
    fr->off[fr->n] = body;
    fr->len[fr->n] = fr->b.n - body;
    fr->n++;
}

static void frames_range(frames *fr, uint32_t first, uint32_t last, size_t tail)
{
    for (uint32_t s = first; s <= last; s++)
        frames_add(fr, s, tail);
}

static void frames_install(fx *f, const frames *fr, size_t n_bytes)
{
    char p[800];
    snprintf(p, sizeof p, "%s/frames.bin", f->bin_dir);
    write_file(p, (const char *)fr->b.p, n_bytes, 0644);
}

static size_t frame_index(const frames *fr, uint32_t seq)
{
    for (size_t i = 0; i < fr->n; i++)
        if (fr->seq[i] == seq)
            return i;
    fail_msg("no frame for %u", seq);
    return 0;
}

/* The next emission must be ledger seq with exactly the frame's body. */
static void expect_ledger(fx *f, const frames *fr, uint32_t seq)
{
    cs_emission em = {0};
    cs_err err = {0};
    int r = f->src->ops->next(f->src, &em, &err);
    if (r != 1)
        fail_msg("next for %u: %d %s", seq, r, err.msg);
    size_t i = frame_index(fr, seq);
    assert_int_equal(em.seq, seq);
    assert_int_equal(em.declared_size, fr->len[i]);
    uint8_t *body = malloc(fr->len[i] + 1);
    size_t got = 0;
    for (;;) {
        ssize_t k = f->src->ops->read(f->src, body + got, fr->len[i] + 1 - got, &err);
        if (k < 0)
            fail_msg("read %u: %s", seq, err.msg);
        if (k == 0)
            break;
        got += (size_t)k;
    }
    assert_int_equal(got, fr->len[i]);
    assert_memory_equal(body, fr->b.p + fr->off[i], got);
    free(body);
}

static void expect_next_error(fx *f, uint32_t want_seq, const char *want)
{
    cs_emission em = {0};
    cs_err err = {0};
    int r = f->src->ops->next(f->src, &em, &err);
    if (r != -1)
        fail_msg("next returned %d (seq %u), want the error %s", r, em.seq, want);
    assert_int_not_equal(err.kind, CS_ERR_CANCELLED);
    if (strcmp(err.msg, want) != 0)
        fail_msg("got  %s\nwant %s", err.msg, want);
    assert_int_equal(em.seq, want_seq);
}

/* calls.log must be exactly these lines; "$WD" stands for the working dir, "$CWD" for ours. */
static void expect_calls(fx *f, const char *const *lines, size_t n)
{
    char *log = ctl_read(f, "calls.log");
    assert_non_null(log);
    const char *wd = cs_captive_source_workdir(f->src);
    char cwd[512];
    assert_non_null(getcwd(cwd, sizeof cwd));
    char want[8192] = {0};
    for (size_t i = 0; i < n; i++) {
        char line[1024];
        const char *l = lines[i];
        size_t o = 0;
        while (*l && o < sizeof line - 600) {
            if (strncmp(l, "$WD", 3) == 0) {
                o += (size_t)snprintf(line + o, sizeof line - o, "%s", wd);
                l += 3;
            } else if (strncmp(l, "$CWD", 4) == 0) {
                o += (size_t)snprintf(line + o, sizeof line - o, "%s", cwd);
                l += 4;
            } else {
                line[o++] = *l++;
            }
        }
        line[o] = 0;
        strncat(want, line, sizeof want - strlen(want) - 2);
        strcat(want, "\n");
    }
    if (strcmp(log, want) != 0)
        fail_msg("calls.log:\n%s\nwant:\n%s", log, want);
    free(log);
}

static bool log_has(fx *f, const char *needle)
{
    fflush(f->log);
    char *log = slurp(f->logpath);
    bool has = log && strstr(log, needle);
    free(log);
    return has;
}

/* ---- PORTSPEC 85-87 ------------------------------------------------------------------------- */

static void test_validation(void **state)
{
    fx *f = *state;
    char q[800], want[2000];
    cs_err err;
    cs_source *s = NULL;
    static const struct {
        const char *what, *want;
    } plain[] = {
        {"config", "captive: config path is required"},
        {"storage", "captive: storage path is required"},
        {"archives", "captive: at least one history archive URL is required"},
    };
    for (size_t i = 0; i < 3; i++) {
        cs_captive_config c = cfg_for(f, 100);
        if (i == 0)
            c.core_config = "";
        if (i == 1)
            c.storage_dir = NULL;
        if (i == 2)
            c.nurls = 0;
        assert_int_equal(cs_captive_source_new(&s, &c, &f->cancel, &err), -1);
        assert_null(s);
        assert_string_equal(err.msg, plain[i].want);
    }

    /* A missing config file. */
    cs_captive_config c = cfg_for(f, 100);
    char absent[700];
    snprintf(absent, sizeof absent, "%s/absent.cfg", f->root);
    c.core_config = absent;
    assert_int_equal(cs_captive_source_new(&s, &c, &f->cancel, &err), -1);
    snprintf(want, sizeof want, "captive: read config \"%s\": open %s: no such file or directory", absent, absent);
    assert_string_equal(err.msg, want);

    /* No passphrase in the file and none given. */
    char nopass[700];
    snprintf(nopass, sizeof nopass, "%s/nopass.cfg", f->root);
    const char *body = "# no passphrase here\nDATABASE=\"sqlite3://stellar.db\"\n";
    write_file(nopass, body, strlen(body), 0644);
    c = cfg_for(f, 100);
    c.core_config = nopass;
    assert_int_equal(cs_captive_source_new(&s, &c, &f->cancel, &err), -1);
    snprintf(q, sizeof q, "\"%s\"", nopass);
    snprintf(want, sizeof want, "captive: config %s: NETWORK_PASSPHRASE is not defined; define it or pass --network-passphrase", q);
    assert_string_equal(err.msg, want);

    /* The storage path cannot be created. */
    c = cfg_for(f, 100);
    char bad[700];
    snprintf(bad, sizeof bad, "%s/storage", f->cfg); /* under a regular file */
    c.storage_dir = bad;
    assert_int_equal(cs_captive_source_new(&s, &c, &f->cancel, &err), -1);
    assert_non_null(strstr(err.msg, "captive: create storage path \""));

    /* Nothing ran. */
    char *calls = ctl_read(f, "calls.log");
    assert_null(calls);
}

static void test_builds_stream(void **state)
{
    fx *f = *state;
    /* PORTSPEC 85: a stream is built and the storage dir created; core is not started. Like the
     * Go test, a protocol-22 core still builds (it is refused on the first pull). */
    ctl(f, "proto", "22");
    cs_captive_config c = cfg_for(f, 100);
    char rel[700];
    snprintf(rel, sizeof rel, "%s/a/../deep/./storage", f->root);
    c.storage_dir = rel;
    open_source(f, &c);
    char want[800];
    snprintf(want, sizeof want, "%s/deep/storage/captive-core", f->root);
    assert_string_equal(cs_captive_source_workdir(f->src), want);
    snprintf(want, sizeof want, "%s/deep/storage", f->root);
    assert_true(exists(want));
    assert_false(exists(cs_captive_source_workdir(f->src)));
    assert_int_equal(cs_captive_source_core_pid(f->src), -1);
    static const char *const calls[] = {"$CWD|version"};
    expect_calls(f, calls, 1);
    assert_int_equal(server_requests(&f->srv), 0);
    destroy_source(f);
}

static void test_passphrase_mismatch(void **state)
{
    fx *f = *state;
    /* PORTSPEC 86. */
    cs_captive_config c = cfg_for(f, 100);
    c.network_passphrase = PUBNET;
    cs_source *s = NULL;
    cs_err err;
    assert_int_equal(cs_captive_source_new(&s, &c, &f->cancel, &err), -1);
    assert_non_null(strstr(err.msg, "NETWORK_PASSPHRASE"));
    char want[1500];
    snprintf(want, sizeof want,
             "captive: invalid config \"%s\": invalid captive core toml: NETWORK_PASSPHRASE in captive core config "
             "file: " TESTNET " does not match passed configuration (" PUBNET ")",
             f->cfg);
    assert_string_equal(err.msg, want);

    /* The same passphrase given explicitly is fine. */
    c.network_passphrase = TESTNET;
    open_source(f, &c);
}

static void test_config_refusals(void **state)
{
    fx *f = *state;
    static const struct {
        const char *prefix, *want;
    } cases[] = {
        {"NODE_SEED=\"SDQVDISRYN2JXBS7ICL7QJAEKB3HWBJFP2QECXG7GZICAHBK4UNJCWK2\"\n",
         "could not unmarshal captive core toml: these fields are not supported by captive core: [\"NODE_SEED\"]"},
        {"NODE_IS_VALIDATOR=true\n",
         "could not unmarshal captive core toml: these fields are not supported by captive core: [\"NODE_IS_VALIDATOR\"]"},
        {"METADATA_OUTPUT_STREAM=\"fd:3\"\n",
         "could not unmarshal captive core toml: these fields are not supported by captive core: "
         "[\"METADATA_OUTPUT_STREAM\"]"},
        {"BUCKET_DIR_PATH=\"b\"\n",
         "could not unmarshal captive core toml: setting BUCKET_DIR_PATH is disallowed for Captive Core, use "
         "--storage-dir instead"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        char toml[2048], want[1500];
        snprintf(toml, sizeof toml, "%s%s", cases[i].prefix, GO_TEST_CONFIG);
        write_file(f->cfg, toml, strlen(toml), 0644);
        cs_captive_config c = cfg_for(f, 100);
        cs_source *s = NULL;
        cs_err err;
        assert_int_equal(cs_captive_source_new(&s, &c, &f->cancel, &err), -1);
        snprintf(want, sizeof want, "captive: invalid config \"%s\": %s", f->cfg, cases[i].want);
        assert_string_equal(err.msg, want);
    }
    const char *noq = "NETWORK_PASSPHRASE=\"" TESTNET "\"\n";
    write_file(f->cfg, noq, strlen(noq), 0644);
    cs_captive_config c = cfg_for(f, 100);
    cs_source *s = NULL;
    cs_err err;
    assert_int_equal(cs_captive_source_new(&s, &c, &f->cancel, &err), -1);
    assert_non_null(strstr(err.msg, "captive-core config file does not define any quorum set"));
}

static void test_binary_lookup(void **state)
{
    fx *f = *state;
    char *old = strdup(getenv("PATH") ? getenv("PATH") : "/usr/bin:/bin");
    char empty[700], path[2048];
    snprintf(empty, sizeof empty, "%s/empty", f->root);
    assert_int_equal(mkdir(empty, 0755), 0);
    cs_captive_config c = cfg_for(f, 100);
    c.core_binary = NULL;
    cs_source *s = NULL;
    cs_err err;
    setenv("PATH", empty, 1);
    int rc = cs_captive_source_new(&s, &c, &f->cancel, &err);
    setenv("PATH", old, 1);
    assert_int_equal(rc, -1);
    assert_string_equal(err.msg, "captive: no --core-binary given and stellar-core is not on PATH: exec: "
                                 "\"stellar-core\": executable file not found in $PATH");

    /* Found on PATH: the looked-up path is what runs. */
    snprintf(path, sizeof path, "%s:%s:%s", empty, f->bin_dir, old);
    setenv("PATH", path, 1);
    c.core_binary = "";
    rc = cs_captive_source_new(&f->src, &c, &f->cancel, &err);
    setenv("PATH", old, 1);
    free(old);
    if (rc != 0)
        fail_msg("%s", err.msg);
    ctl(f, "lcl", "99");
    frames fr = {0};
    frames_range(&fr, 100, 100, 10);
    frames_install(f, &fr, fr.b.n);
    expect_ledger(f, &fr, 100);
    char *calls = ctl_read(f, "calls.log");
    char want[1024];
    snprintf(want, sizeof want, "|--conf %s/stellar-core.conf --console run", cs_captive_source_workdir(f->src));
    assert_non_null(strstr(calls, want));
    free(calls);
    cs_mb_free(&fr.b);
}

static void test_relative_binary(void **state)
{
    fx *f = *state;
    /* A relative --core-binary is resolved against our cwd, though core runs in the working dir. */
    char cwd[512];
    assert_non_null(getcwd(cwd, sizeof cwd));
    assert_int_equal(chdir(f->root), 0);
    cs_captive_config c = cfg_for(f, 100);
    c.core_binary = "./bin/stellar-core";
    cs_err err;
    int rc = cs_captive_source_new(&f->src, &c, &f->cancel, &err);
    assert_int_equal(chdir(cwd), 0);
    if (rc != 0)
        fail_msg("%s", err.msg);
    ctl(f, "lcl", "99");
    frames fr = {0};
    frames_range(&fr, 100, 100, 10);
    frames_install(f, &fr, fr.b.n);
    expect_ledger(f, &fr, 100);
    cs_mb_free(&fr.b);
}

/* ---- the start sequence --------------------------------------------------------------------- */

static void test_fresh_start(void **state)
{
    fx *f = *state;
    frames fr = {0};
    frames_range(&fr, 100, 104, 300);
    frames_install(f, &fr, fr.b.n);
    cs_captive_config c = cfg_for(f, 100);
    open_source(f, &c);
    const char *wd = cs_captive_source_workdir(f->src);
    for (uint32_t s = 100; s <= 104; s++)
        expect_ledger(f, &fr, s);

    static const char *const calls[] = {
        "$CWD|version",
        "$CWD|version",
        "$WD|--conf $WD/stellar-core.conf offline-info",
        "$WD|--conf $WD/stellar-core.conf --console new-db",
        "$WD|--conf $WD/stellar-core.conf --console catchup 99/0",
        "$WD|--conf $WD/stellar-core.conf --console run --metadata-output-stream fd:3",
        "stdin=/dev/null",
    };
    expect_calls(f, calls, sizeof calls / sizeof calls[0]);
    assert_int_equal(server_requests(&f->srv), 1);
    pthread_mutex_lock(&f->srv.mu);
    assert_string_equal(f->srv.ua, "corestream");
    assert_string_equal(f->srv.path, "/.well-known/stellar-history.json");
    pthread_mutex_unlock(&f->srv.mu);

    /* The generated conf: the operator's file, the defaults, one HISTORY table per archive. */
    char *conf = ctl_read(f, "conf.run");
    char want[4096];
    snprintf(want, sizeof want,
             "# Generated file, do not edit\n"
             "NETWORK_PASSPHRASE=\"" TESTNET "\"\n"
             "DATABASE=\"sqlite3://stellar.db\"\n"
             "# Defaults added by corestreamd for the keys this file does not set\n"
             "HTTP_PORT = 11626\n"
             "LOG_FILE_PATH = \"\"\n"
             "FAILURE_SAFETY = -1\n"
             "BUCKETLIST_DB_INDEX_PAGE_SIZE_EXPONENT = 12\n"
             "BUCKETLIST_DB_MEMORY_FOR_CACHING = 0\n"
             "BACKFILL_RESTORE_META = true\n"
             "ENABLE_SOROBAN_DIAGNOSTIC_EVENTS = true\n"
             "ENABLE_DIAGNOSTICS_FOR_TX_SUBMISSION = true\n"
             "EMIT_SOROBAN_TRANSACTION_META_EXT_V1 = true\n"
             "EMIT_CLASSIC_EVENTS = true\n"
             "%s"
             "\n[HISTORY.h0]\n"
             "get = \"curl -sf http://127.0.0.1:%u/{0} -o {1}\"\n",
             strstr(GO_TEST_CONFIG, "\n[[HOME_DOMAINS]]"), f->srv.port);
    assert_string_equal(conf, want);
    /* Every command got the same conf, and it is the file in the working dir, mode 0644. */
    static const char *const cmds[] = {"conf.offline-info", "conf.new-db", "conf.catchup"};
    for (size_t i = 0; i < 3; i++) {
        char *other = ctl_read(f, cmds[i]);
        assert_string_equal(other, conf);
        free(other);
    }
    char path[800];
    snprintf(path, sizeof path, "%s/stellar-core.conf", wd);
    char *real = slurp(path);
    assert_string_equal(real, conf);
    struct stat st;
    assert_int_equal(stat(path, &st), 0);
    assert_int_equal(st.st_mode & 0777, 0644);
    free(real);
    free(conf);

    /* Core's output went to our log, parsed; offline-info's stderr too. */
    static const char *const core_lines[] = {
        "level=INFO msg=\"Database: * Applying DB schema\" pid=%ld subservice=stellar-core",
        "level=WARN msg=\"Ledger: a warning\" pid=%ld subservice=stellar-core",
        "level=INFO msg=\"plain line from core\" pid=%ld subservice=stellar-core",
        "level=INFO msg=\"History: catching up to 99/0\" pid=%ld subservice=stellar-core",
        "level=ERROR msg=\"Database: no database\" pid=%ld subservice=stellar-core",
    };
    for (size_t i = 0; i < sizeof core_lines / sizeof core_lines[0]; i++) {
        char line[160];
        snprintf(line, sizeof line, core_lines[i], (long)getpid());
        assert_true(log_has(f, line));
    }
    assert_true(log_has(f, "Error running offline-info: error executing offline-info cmd: exit status 1, removing "
                           "existing storage-dir contents"));

    /* Teardown: SIGINT reaches core, which exits 0, so the working dir is kept. */
    int pid = cs_captive_source_core_pid(f->src);
    assert_true(pid > 0);
    destroy_source(f);
    assert_int_equal(kill(pid, 0), -1);
    assert_int_equal(errno, ESRCH);
    char *log = ctl_read(f, "calls.log");
    assert_non_null(strstr(log, "stdin=/dev/null\nINT\n"));
    free(log);
    snprintf(path, sizeof path, "%s/storage/captive-core/stellar-core.conf", f->root);
    assert_true(exists(path));
    cs_mb_free(&fr.b);
}

static void test_reused_start(void **state)
{
    fx *f = *state;
    ctl(f, "lcl", "99");
    frames fr = {0};
    frames_range(&fr, 100, 102, 50);
    frames_install(f, &fr, fr.b.n);
    cs_captive_config c = cfg_for(f, 100);
    open_source(f, &c);
    for (uint32_t s = 100; s <= 102; s++)
        expect_ledger(f, &fr, s);
    static const char *const calls[] = {
        "$CWD|version",
        "$CWD|version",
        "$WD|--conf $WD/stellar-core.conf offline-info",
        "$WD|--conf $WD/stellar-core.conf --console run --metadata-output-stream fd:3",
        "stdin=/dev/null",
    };
    expect_calls(f, calls, sizeof calls / sizeof calls[0]);
    cs_mb_free(&fr.b);
}

static void test_lcl_out_of_range_rebuilds(void **state)
{
    fx *f = *state;
    /* An LCL past from-1 (or <= 2) cannot be reused: a new DB and a catchup. A file left in the
     * working dir by the old DB is gone. */
    ctl(f, "lcl", "150");
    frames fr = {0};
    frames_range(&fr, 100, 100, 10);
    frames_install(f, &fr, fr.b.n);
    char stale[800];
    snprintf(stale, sizeof stale, "%s/captive-core", f->storage);
    assert_int_equal(mkdir(f->storage, 0755), 0);
    assert_int_equal(mkdir(stale, 0755), 0);
    strcat(stale, "/stellar.db");
    write_file(stale, "old", 3, 0644);
    cs_captive_config c = cfg_for(f, 100);
    open_source(f, &c);
    expect_ledger(f, &fr, 100);
    assert_false(exists(stale));
    assert_true(log_has(f, "Unexpected LCL in Stellar-Core DB: 150 (want: 99), removing existing storage-dir contents"));
    static const char *const calls[] = {
        "$CWD|version",
        "$CWD|version",
        "$WD|--conf $WD/stellar-core.conf offline-info",
        "$WD|--conf $WD/stellar-core.conf --console new-db",
        "$WD|--conf $WD/stellar-core.conf --console catchup 99/0",
        "$WD|--conf $WD/stellar-core.conf --console run --metadata-output-stream fd:3",
        "stdin=/dev/null",
    };
    expect_calls(f, calls, sizeof calls / sizeof calls[0]);
    cs_mb_free(&fr.b);
}

static void test_frames_before_from_are_skipped(void **state)
{
    fx *f = *state;
    /* Core replays from its LCL+1 (96); 96..99 are checked and dropped. */
    ctl(f, "lcl", "95");
    frames fr = {0};
    frames_range(&fr, 96, 103, 5000); /* bodies past the 4096-byte prefix */
    frames_install(f, &fr, fr.b.n);
    cs_captive_config c = cfg_for(f, 100);
    open_source(f, &c);
    for (uint32_t s = 100; s <= 103; s++)
        expect_ledger(f, &fr, s);
    cs_mb_free(&fr.b);
}

/* With emit_from, the replayed frames from there on are emitted (the caller compares them with
 * its ring); those before it are still checked and dropped. */
static void test_frames_from_emit_from_are_emitted(void **state)
{
    fx *f = *state;
    ctl(f, "lcl", "95");
    frames fr = {0};
    frames_range(&fr, 96, 101, 5000);
    frames_install(f, &fr, fr.b.n);
    cs_captive_config c = cfg_for(f, 100);
    c.emit_from = 98;
    open_source(f, &c);
    for (uint32_t s = 98; s <= 101; s++)
        expect_ledger(f, &fr, s);
    cs_mb_free(&fr.b);
}

static void test_early_start_uses_catchup_complete(void **state)
{
    fx *f = *state;
    /* from <= 63: core is started as for 3, so from-1 = 2 < 3: new-db, no catchup,
     * CATCHUP_COMPLETE=true, and core streams from ledger 2. */
    pthread_mutex_lock(&f->srv.mu);
    f->srv.current = 63;
    pthread_mutex_unlock(&f->srv.mu);
    frames fr = {0};
    frames_range(&fr, 2, 52, 20);
    frames_install(f, &fr, fr.b.n);
    cs_captive_config c = cfg_for(f, 50);
    open_source(f, &c);
    expect_ledger(f, &fr, 50);
    expect_ledger(f, &fr, 51);
    static const char *const calls[] = {
        "$CWD|version",
        "$CWD|version",
        "$WD|--conf $WD/stellar-core.conf offline-info",
        "$WD|--conf $WD/stellar-core.conf --console new-db",
        "$WD|--conf $WD/stellar-core.conf --console run --metadata-output-stream fd:3",
        "stdin=/dev/null",
    };
    expect_calls(f, calls, sizeof calls / sizeof calls[0]);
    char *newdb = ctl_read(f, "conf.new-db"), *run = ctl_read(f, "conf.run");
    assert_null(strstr(newdb, "CATCHUP_COMPLETE"));
    assert_non_null(strstr(run, "\nCATCHUP_COMPLETE = true\n"));
    assert_true(strstr(run, "CATCHUP_COMPLETE") < strstr(run, "[[HOME_DOMAINS]]"));
    free(newdb);
    free(run);
    cs_mb_free(&fr.b);
}

/* ---- refusals at start ---------------------------------------------------------------------- */

static void test_protocol_22_refused(void **state)
{
    fx *f = *state;
    ctl(f, "proto", "22");
    cs_captive_config c = cfg_for(f, 100);
    open_source(f, &c);
    expect_next_error(f, 100,
                      "captive: stellar-core version not supported. Installed stellar-core version is at protocol 22, "
                      "but minimum required version is 23. Please upgrade stellar-core to a version that supports "
                      "protocol version 23 or higher");
    /* It stays failed, and nothing else ran. */
    expect_next_error(f, 100,
                      "captive: stellar-core version not supported. Installed stellar-core version is at protocol 22, "
                      "but minimum required version is 23. Please upgrade stellar-core to a version that supports "
                      "protocol version 23 or higher");
    static const char *const calls[] = {"$CWD|version", "$CWD|version"};
    expect_calls(f, calls, 2);
    assert_int_equal(server_requests(&f->srv), 0);

    /* A binary that prints no protocol at all. */
    destroy_source(f);
    ctl(f, "proto", "");
    open_source(f, &c);
    expect_next_error(f, 100,
                      "captive: error determining stellar-core protocol version: error parsing protocol version from "
                      "stellar-core output: strconv.Atoi: parsing \"\": invalid syntax");
}

static void test_missing_binary_refused_at_start(void **state)
{
    fx *f = *state;
    cs_captive_config c = cfg_for(f, 100);
    char bin[700];
    snprintf(bin, sizeof bin, "%s/nope/stellar-core", f->root);
    c.core_binary = bin;
    open_source(f, &c); /* like the SDK: the toml only loses its version-dependent defaults */
    char want[2000];
    snprintf(want, sizeof want,
             "captive: error determining stellar-core protocol version: error executing stellar-core version command "
             "(%s): fork/exec %s: no such file or directory",
             bin, bin);
    expect_next_error(f, 100, want);
}

static void test_archive_passphrase_mismatch(void **state)
{
    fx *f = *state;
    pthread_mutex_lock(&f->srv.mu);
    snprintf(f->srv.passphrase, sizeof f->srv.passphrase, "%s", PUBNET);
    pthread_mutex_unlock(&f->srv.mu);
    cs_captive_config c = cfg_for(f, 100);
    open_source(f, &c);
    expect_next_error(f, 100,
                      "captive: error getting latest checkpoint sequence: error getting root HAS: Network passphrase "
                      "does not match! expected=" TESTNET " actual=" PUBNET);
    assert_int_equal(server_requests(&f->srv), 4); /* 3 retries */
    assert_true(log_has(f, "msg=\"Encountered an error with archive\""));
}

static void test_from_1_refused(void **state)
{
    fx *f = *state;
    cs_captive_config c = cfg_for(f, 1);
    open_source(f, &c);
    expect_next_error(f, 1, "captive: CaptiveCore is unable to start from ledger 1, start from ledger 2");
    assert_int_equal(server_requests(&f->srv), 0);
}

static void test_too_far_ahead_refused(void **state)
{
    fx *f = *state;
    cs_captive_config c = cfg_for(f, 256); /* latest checkpoint 127: at most 255 */
    open_source(f, &c);
    expect_next_error(f, 256,
                      "captive: trying to start online mode too far (latest checkpoint=127), only two checkpoints in the "
                      "future allowed");
    destroy_source(f);

    ctl(f, "lcl", "254");
    frames fr = {0};
    frames_range(&fr, 255, 255, 10);
    frames_install(f, &fr, fr.b.n);
    c = cfg_for(f, 255);
    open_source(f, &c);
    expect_ledger(f, &fr, 255);
    cs_mb_free(&fr.b);
}

static void test_catchup_failure(void **state)
{
    fx *f = *state;
    ctl(f, "catchup_rc", "5");
    cs_captive_config c = cfg_for(f, 100);
    open_source(f, &c);
    expect_next_error(f, 100, "captive: error running stellar-core catchup: exit status 5");
    /* The database this start created is removed. */
    assert_false(exists(cs_captive_source_workdir(f->src)));
}

/* ---- the history archive pool --------------------------------------------------------------- */

static void test_archive_retries_and_pool(void **state)
{
    fx *f = *state;
    cs_archive_opts o = {.urls = f->urls, .nurls = 1, .network_passphrase = TESTNET, .cancel = &f->cancel};
    cs_archive_has has;
    cs_err err;
    pthread_mutex_lock(&f->srv.mu);
    f->srv.fail_first = 2;
    pthread_mutex_unlock(&f->srv.mu);
    assert_int_equal(cs_archive_root_has(&o, &has, &err), 0);
    assert_int_equal(has.current_ledger, 127);
    assert_string_equal(has.network_passphrase, TESTNET);
    assert_int_equal(server_requests(&f->srv), 3);

    /* All four tries fail: the last error, naming the status and the URL. */
    pthread_mutex_lock(&f->srv.mu);
    f->srv.fail_first = 100;
    pthread_mutex_unlock(&f->srv.mu);
    assert_int_equal(cs_archive_root_has(&o, &has, &err), -1);
    char want[512];
    snprintf(want, sizeof want,
             "Bad HTTP response '500 Internal Server Error' for GET 'http://127.0.0.1:%u/.well-known/stellar-history.json'",
             f->srv.port);
    assert_string_equal(err.msg, want);
    assert_int_equal(server_requests(&f->srv), 7);

    /* A dead archive in the pool is tried round-robin past; which one goes first is random. */
    pthread_mutex_lock(&f->srv.mu);
    f->srv.fail_first = 0;
    pthread_mutex_unlock(&f->srv.mu);
    int dead = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    assert_int_equal(bind(dead, (struct sockaddr *)&a, sizeof a), 0);
    socklen_t al = sizeof a;
    getsockname(dead, (struct sockaddr *)&a, &al);
    char dead_url[64];
    snprintf(dead_url, sizeof dead_url, "http://127.0.0.1:%u", ntohs(a.sin_port));
    close(dead); /* nothing listens there now: connection refused */
    const char *urls[] = {dead_url, f->url};
    o.urls = urls;
    o.nurls = 2;
    for (int i = 0; i < 4; i++)
        assert_int_equal(cs_archive_root_has(&o, &has, &err), 0);

    /* No passphrase check when the archive does not publish one. */
    pthread_mutex_lock(&f->srv.mu);
    f->srv.passphrase[0] = 0;
    pthread_mutex_unlock(&f->srv.mu);
    o.network_passphrase = PUBNET;
    assert_int_equal(cs_archive_root_has(&o, &has, &err), 0);
    assert_string_equal(has.network_passphrase, "");

    /* A URL nothing answers on. */
    o.urls = urls;
    o.nurls = 1;
    o.tries = 1;
    assert_int_equal(cs_archive_root_has(&o, &has, &err), -1);
    assert_non_null(strstr(err.msg, "Get \"http://127.0.0.1:"));
}

static void test_archive_bodies(void **state)
{
    fx *f = *state;
    cs_archive_opts o = {.urls = f->urls, .nurls = 1, .network_passphrase = TESTNET, .cancel = &f->cancel, .tries = 1};
    cs_archive_has has;
    cs_err err;
    static const struct {
        const char *body, *want;
    } cases[] = {
        {"not json", "history archive state: %s is not valid JSON"},
        {"[1, 2]", "history archive state: %s does not hold a JSON object"},
        {"{\"currentLedger\": \"127\"}", "history archive state: currentLedger is not a uint32"},
        {"{\"currentLedger\": -1}", "history archive state: currentLedger is not a uint32"},
        {"{\"currentLedger\": 4294967296}", "history archive state: currentLedger is not a uint32"},
        {"{\"currentLedger\": 1.5}", "history archive state: currentLedger is not a uint32"},
        {"{\"currentLedger\": 1, \"networkPassphrase\": 7}", "history archive state: networkPassphrase is not a string"},
    };
    char url[256];
    snprintf(url, sizeof url, "http://127.0.0.1:%u/.well-known/stellar-history.json", f->srv.port);
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        pthread_mutex_lock(&f->srv.mu);
        f->srv.body_override = cases[i].body;
        pthread_mutex_unlock(&f->srv.mu);
        assert_int_equal(cs_archive_root_has(&o, &has, &err), -1);
        char want[512];
        snprintf(want, sizeof want, cases[i].want, url);
        assert_string_equal(err.msg, want);
    }
    /* Field names match case-insensitively, as encoding/json matches them; extra fields are fine;
     * an absent currentLedger is 0. */
    pthread_mutex_lock(&f->srv.mu);
    f->srv.body_override = "{\"CURRENTLEDGER\": 191, \"currentBuckets\": []}";
    pthread_mutex_unlock(&f->srv.mu);
    assert_int_equal(cs_archive_root_has(&o, &has, &err), 0);
    assert_int_equal(has.current_ledger, 191);
    pthread_mutex_lock(&f->srv.mu);
    f->srv.body_override = "{}";
    pthread_mutex_unlock(&f->srv.mu);
    assert_int_equal(cs_archive_root_has(&o, &has, &err), 0);
    assert_int_equal(has.current_ledger, 0);

    /* The 10 MB cap, as Go's LimitedReader{N: max+1} applies it: a HAS that ends within max+1
     * bytes is read; a longer one is refused. */
    pthread_mutex_lock(&f->srv.mu);
    f->srv.body_override = NULL;
    f->srv.big = CS_ARCHIVE_MAX_HAS;
    pthread_mutex_unlock(&f->srv.mu);
    assert_int_equal(cs_archive_root_has(&o, &has, &err), 0);
    assert_int_equal(has.current_ledger, 127);
    pthread_mutex_lock(&f->srv.mu);
    f->srv.big = CS_ARCHIVE_MAX_HAS + 1;
    pthread_mutex_unlock(&f->srv.mu);
    assert_int_equal(cs_archive_root_has(&o, &has, &err), 0);
    pthread_mutex_lock(&f->srv.mu);
    f->srv.big = CS_ARCHIVE_MAX_HAS + 2;
    pthread_mutex_unlock(&f->srv.mu);
    assert_int_equal(cs_archive_root_has(&o, &has, &err), -1);
    assert_string_equal(err.msg, "history archive state response exceeds 10485760 bytes limit");

    /* A file:// archive. */
    char dir[800], path[900], furl[900];
    snprintf(dir, sizeof dir, "%s/arch", f->root);
    assert_int_equal(mkdir(dir, 0755), 0);
    snprintf(path, sizeof path, "%s/.well-known", dir);
    assert_int_equal(mkdir(path, 0755), 0);
    strcat(path, "/stellar-history.json");
    const char *has_json = "{\"currentLedger\": 63, \"networkPassphrase\": \"" TESTNET "\"}";
    write_file(path, has_json, strlen(has_json), 0644);
    snprintf(furl, sizeof furl, "file://%s/", dir);
    const char *furls[] = {furl};
    o.urls = furls;
    assert_int_equal(cs_archive_root_has(&o, &has, &err), 0);
    assert_int_equal(has.current_ledger, 63);
}

typedef struct canceller {
    fx *f;
    int after;
} canceller;

static void *cancel_after_requests(void *arg)
{
    canceller *c = arg;
    has_server *s = &c->f->srv;
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    ts.tv_sec += 10;
    pthread_mutex_lock(&s->mu);
    while (s->requests < c->after)
        if (pthread_cond_timedwait(&s->cv, &s->mu, &ts) != 0)
            break;
    pthread_mutex_unlock(&s->mu);
    cs_cancel_fire(&c->f->cancel);
    return NULL;
}

static void test_archive_cancel(void **state)
{
    fx *f = *state;
    /* The archive keeps failing; the cancel ends the retry pause at once. */
    pthread_mutex_lock(&f->srv.mu);
    f->srv.fail_first = 100;
    pthread_mutex_unlock(&f->srv.mu);
    cs_captive_config c = cfg_for(f, 100);
    open_source(f, &c);
    canceller cc = {.f = f, .after = 1};
    pthread_t th;
    assert_int_equal(pthread_create(&th, NULL, cancel_after_requests, &cc), 0);
    cs_emission em;
    cs_err err;
    assert_int_equal(f->src->ops->next(f->src, &em, &err), -1);
    pthread_join(th, NULL);
    assert_int_equal(err.kind, CS_ERR_CANCELLED);
    assert_string_equal(err.msg, "context canceled");
    assert_true(server_requests(&f->srv) <= 2);
}

/* ---- the stream ----------------------------------------------------------------------------- */

static void test_core_dies_mid_stream(void **state)
{
    fx *f = *state;
    ctl(f, "lcl", "99");
    ctl(f, "run_mode", "exit 7");
    frames fr = {0};
    frames_range(&fr, 100, 102, 100);
    frames_install(f, &fr, fr.b.n);
    cs_captive_config c = cfg_for(f, 100);
    open_source(f, &c);
    for (uint32_t s = 100; s <= 102; s++)
        expect_ledger(f, &fr, s);
    expect_next_error(f, 103, "captive: stellar-core exited unexpectedly: exit status 7");
    /* Never restarted: the error stays, and no second run. */
    expect_next_error(f, 103, "captive: stellar-core exited unexpectedly: exit status 7");
    char *calls = ctl_read(f, "calls.log");
    assert_non_null(strstr(calls, "run --metadata"));
    assert_null(strstr(strstr(calls, "run --metadata") + 1, "run --metadata"));
    free(calls);
    /* A failed core's working dir is wiped. */
    assert_false(exists(cs_captive_source_workdir(f->src)));
    cs_mb_free(&fr.b);
}

static void test_core_dies_mid_frame(void **state)
{
    fx *f = *state;
    ctl(f, "lcl", "99");
    ctl(f, "run_mode", "exit 3");
    frames fr = {0};
    frames_range(&fr, 100, 101, 6000);
    frames_install(f, &fr, fr.b.n - 1000); /* 101's body stops 1000 bytes short */
    cs_captive_config c = cfg_for(f, 100);
    open_source(f, &c);
    expect_ledger(f, &fr, 100);
    cs_emission em;
    cs_err err;
    assert_int_equal(f->src->ops->next(f->src, &em, &err), 1);
    assert_int_equal(em.seq, 101);
    uint8_t buf[65536];
    ssize_t k;
    while ((k = f->src->ops->read(f->src, buf, sizeof buf, &err)) > 0)
        ;
    assert_int_equal(k, -1);
    assert_string_equal(err.msg, "captive: stellar-core exited unexpectedly: exit status 3");
    assert_false(exists(cs_captive_source_workdir(f->src)));
    cs_mb_free(&fr.b);
}

static void test_core_exits_cleanly(void **state)
{
    fx *f = *state;
    ctl(f, "lcl", "99");
    ctl(f, "run_mode", "exit 0");
    frames fr = {0};
    frames_range(&fr, 100, 100, 10);
    frames_install(f, &fr, fr.b.n);
    cs_captive_config c = cfg_for(f, 100);
    open_source(f, &c);
    expect_ledger(f, &fr, 100);
    expect_next_error(f, 101, "captive: stellar-core exited unexpectedly");
    /* Exit status 0: the database is kept. */
    assert_true(exists(cs_captive_source_workdir(f->src)));
    cs_mb_free(&fr.b);
}

static void test_first_frame_after_from(void **state)
{
    fx *f = *state;
    ctl(f, "lcl", "99");
    frames fr = {0};
    frames_range(&fr, 101, 102, 10);
    frames_install(f, &fr, fr.b.n);
    cs_captive_config c = cfg_for(f, 100);
    open_source(f, &c);
    expect_next_error(f, 100, "captive: unexpected ledger sequence (expected=<=100 actual=101)");
    /* Core was stopped with SIGINT and exited 0: its database is kept. */
    char *calls = ctl_read(f, "calls.log");
    assert_non_null(strstr(calls, "\nINT\n"));
    free(calls);
    assert_true(exists(cs_captive_source_workdir(f->src)));
    assert_int_equal(cs_captive_source_core_pid(f->src), -1);
    cs_mb_free(&fr.b);
}

static void test_gap_refused(void **state)
{
    fx *f = *state;
    ctl(f, "lcl", "99");
    frames fr = {0};
    frames_add(&fr, 100, 10);
    frames_add(&fr, 102, 10);
    frames_install(f, &fr, fr.b.n);
    cs_captive_config c = cfg_for(f, 100);
    open_source(f, &c);
    expect_ledger(f, &fr, 100);
    expect_next_error(f, 101, "captive: unexpected ledger sequence (expected=101 actual=102)");
    cs_mb_free(&fr.b);
}

static void test_broken_hash_chain_refused(void **state)
{
    fx *f = *state;
    ctl(f, "lcl", "97");
    frames fr = {0};
    frames_range(&fr, 98, 102, 10);
    /* 101 claims a different predecessor. */
    size_t i = frame_index(&fr, 101);
    fr.b.p[fr.off[i] + 44] ^= 0xff;
    frames_install(f, &fr, fr.b.n);
    cs_captive_config c = cfg_for(f, 100);
    open_source(f, &c);
    expect_ledger(f, &fr, 100);
    uint8_t h[32];
    hash_for(100, h);
    char want[65], got[65];
    for (int k = 0; k < 32; k++) {
        sprintf(want + 2 * k, "%02x", h[k]);
        sprintf(got + 2 * k, "%02x", k == 0 ? h[k] ^ 0xff : h[k]);
    }
    char msg[512];
    snprintf(msg, sizeof msg, "captive: unexpected previous ledger hash for ledger 101 (expected=%s actual=%s)", want, got);
    expect_next_error(f, 101, msg);

    /* The chain is checked on the frames before `from` as well. */
    destroy_source(f);
    frames fr2 = {0};
    frames_range(&fr2, 98, 100, 10);
    fr2.b.p[fr2.off[frame_index(&fr2, 99)] + 50] ^= 1;
    frames_install(f, &fr2, fr2.b.n);
    open_source(f, &c);
    cs_emission em;
    cs_err err;
    assert_int_equal(f->src->ops->next(f->src, &em, &err), -1);
    assert_non_null(strstr(err.msg, "captive: unexpected previous ledger hash for ledger 99 "));
    cs_mb_free(&fr.b);
    cs_mb_free(&fr2.b);
}

static void test_malformed_frame_refused(void **state)
{
    fx *f = *state;
    ctl(f, "lcl", "99");
    frames fr = {0};
    frames_range(&fr, 100, 100, 10);
    cs_mb_meta bad = cs_mb_go_meta(7, 101, false, 0, false, 10); /* an unknown LedgerCloseMeta arm */
    cs_mb_put_frame(&fr.b, &bad);
    frames_install(f, &fr, fr.b.n);
    cs_captive_config c = cfg_for(f, 100);
    open_source(f, &c);
    expect_ledger(f, &fr, 100);
    cs_emission em;
    cs_err err;
    assert_int_equal(f->src->ops->next(f->src, &em, &err), -1);
    assert_int_equal(strncmp(err.msg, "captive: read ledger seq: xdr: ", 31), 0);
    cs_mb_free(&fr.b);
}

/* ---- supervision ---------------------------------------------------------------------------- */

static void test_cancel_while_streaming(void **state)
{
    fx *f = *state;
    ctl(f, "lcl", "99");
    frames fr = {0};
    frames_range(&fr, 100, 101, 10);
    frames_install(f, &fr, fr.b.n);
    cs_captive_config c = cfg_for(f, 100);
    open_source(f, &c);
    expect_ledger(f, &fr, 100);
    cs_cancel_fire(&f->cancel);
    cs_emission em;
    cs_err err;
    assert_int_equal(f->src->ops->next(f->src, &em, &err), -1);
    assert_int_equal(err.kind, CS_ERR_CANCELLED);
    int pid = cs_captive_source_core_pid(f->src);
    assert_true(pid > 0);
    destroy_source(f);
    assert_int_equal(kill(pid, 0), -1);
    char *calls = ctl_read(f, "calls.log");
    assert_non_null(strstr(calls, "\nINT\n"));
    free(calls);
    char wd[800];
    snprintf(wd, sizeof wd, "%s/captive-core", f->storage);
    assert_true(exists(wd));
    cs_mb_free(&fr.b);
}

static void test_sigkill_after_grace(void **state)
{
    fx *f = *state;
    /* A core that ignores SIGINT is killed once the grace is over, and its dir is wiped. */
    ctl(f, "lcl", "99");
    ctl(f, "run_mode", "ignore");
    frames fr = {0};
    frames_range(&fr, 100, 100, 10);
    frames_install(f, &fr, fr.b.n);
    cs_captive_config c = cfg_for(f, 100);
    c.stop_grace_ns = 300 * 1000000LL;
    open_source(f, &c);
    expect_ledger(f, &fr, 100);
    int pid = cs_captive_source_core_pid(f->src);
    assert_true(pid > 0);
    int64_t t0 = cs_mono_ns();
    destroy_source(f);
    int64_t took = cs_mono_ns() - t0;
    assert_true(took >= 300 * 1000000LL); /* not before the grace is over; the WARN below says why it ended */
    assert_int_equal(kill(pid, 0), -1);
    assert_int_equal(errno, ESRCH);
    assert_true(log_has(f, "msg=\"captive: stellar-core did not stop after SIGINT; killing it\""));
    char wd[800];
    snprintf(wd, sizeof wd, "%s/captive-core", f->storage);
    assert_false(exists(wd));
    cs_mb_free(&fr.b);
}

int main(void)
{
    /* The test process must not die of a SIGPIPE from a closed HTTP client. */
    signal(SIGPIPE, SIG_IGN);
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(test_validation, setup, teardown),
        cmocka_unit_test_setup_teardown(test_builds_stream, setup, teardown),
        cmocka_unit_test_setup_teardown(test_passphrase_mismatch, setup, teardown),
        cmocka_unit_test_setup_teardown(test_config_refusals, setup, teardown),
        cmocka_unit_test_setup_teardown(test_binary_lookup, setup, teardown),
        cmocka_unit_test_setup_teardown(test_relative_binary, setup, teardown),
        cmocka_unit_test_setup_teardown(test_fresh_start, setup, teardown),
        cmocka_unit_test_setup_teardown(test_reused_start, setup, teardown),
        cmocka_unit_test_setup_teardown(test_lcl_out_of_range_rebuilds, setup, teardown),
        cmocka_unit_test_setup_teardown(test_frames_from_emit_from_are_emitted, setup, teardown),
        cmocka_unit_test_setup_teardown(test_frames_before_from_are_skipped, setup, teardown),
        cmocka_unit_test_setup_teardown(test_early_start_uses_catchup_complete, setup, teardown),
        cmocka_unit_test_setup_teardown(test_protocol_22_refused, setup, teardown),
        cmocka_unit_test_setup_teardown(test_missing_binary_refused_at_start, setup, teardown),
        cmocka_unit_test_setup_teardown(test_archive_passphrase_mismatch, setup, teardown),
        cmocka_unit_test_setup_teardown(test_from_1_refused, setup, teardown),
        cmocka_unit_test_setup_teardown(test_too_far_ahead_refused, setup, teardown),
        cmocka_unit_test_setup_teardown(test_catchup_failure, setup, teardown),
        cmocka_unit_test_setup_teardown(test_archive_retries_and_pool, setup, teardown),
        cmocka_unit_test_setup_teardown(test_archive_bodies, setup, teardown),
        cmocka_unit_test_setup_teardown(test_archive_cancel, setup, teardown),
        cmocka_unit_test_setup_teardown(test_core_dies_mid_stream, setup, teardown),
        cmocka_unit_test_setup_teardown(test_core_dies_mid_frame, setup, teardown),
        cmocka_unit_test_setup_teardown(test_core_exits_cleanly, setup, teardown),
        cmocka_unit_test_setup_teardown(test_first_frame_after_from, setup, teardown),
        cmocka_unit_test_setup_teardown(test_gap_refused, setup, teardown),
        cmocka_unit_test_setup_teardown(test_broken_hash_chain_refused, setup, teardown),
        cmocka_unit_test_setup_teardown(test_malformed_frame_refused, setup, teardown),
        cmocka_unit_test_setup_teardown(test_cancel_while_streaming, setup, teardown),
        cmocka_unit_test_setup_teardown(test_sigkill_after_grace, setup, teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
