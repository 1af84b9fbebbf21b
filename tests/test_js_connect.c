/* SPDX-License-Identifier: Apache-2.0 */
/* The CONNECT corestreamd sends NATS with an nkey seed (--jetstream-nkey-seed) or a .creds file
 * (--jetstream-creds): it always carries the Ed25519 signature of the server's nonce, also when
 * that signature's first byte is 0x00. nats.c 3.4.1 (Debian 12's libnats) sent such a CONNECT
 * without "sig" (its encoder took the binary signature for a C string), and nats-server refused
 * it: one connect in 256 (jetstream/library.c). Here a scripted server on 127.0.0.1 sends an INFO
 * with a nonce chosen so that the key's signature begins with 0x00 (and, to compare, one where it
 * does not), reads the CONNECT the daemon's own options produce (cs_js_options_new), and answers
 * PONG when its signature verifies, else `-ERR 'Authorization Violation'` as nats-server does.
 * Every wait is bounded; nothing sleeps. */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <arpa/inet.h>
#include <errno.h>
#include <limits.h>
#include <nats/nats.h>
#include <netinet/in.h>
#include <openssl/evp.h>
#include <poll.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "corestreamd/jetstream/connect.h"
#include "corestreamd/jetstream/library.h"
#include "corestreamd/jetstream/nkey.h"
#include "support/tmpdir.h"

#define BOUND_MS 10000
#define JWT "eyJ0eXAiOiJKV1QiLCJhbGciOiJlZDI1NTE5LW5rZXkifQ.eyJzdWIiOiJ0ZXN0In0.c2lnbmF0dXJl"

/* The user key of every case: a fixed seed, so the nonces found for it are the same every run. */
static uint8_t g_seed[32], g_pub[32];
static char g_pub_text[CS_NKEY_TEXT_MAX];
static cs_tmpdir g_dir;
static char g_seed_file[PATH_MAX + 16], g_creds_file[PATH_MAX + 16];

static int64_t mono_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static void sign(const char *nonce, uint8_t sig[64])
{
    EVP_PKEY *k = EVP_PKEY_new_raw_private_key(EVP_PKEY_ED25519, NULL, g_seed, 32);
    EVP_MD_CTX *c = EVP_MD_CTX_new();
    size_t len = 64;
    assert_true(k && c && EVP_DigestSignInit(c, NULL, NULL, NULL, k) == 1 &&
                EVP_DigestSign(c, sig, &len, (const uint8_t *)nonce, strlen(nonce)) == 1 && len == 64);
    EVP_MD_CTX_free(c);
    EVP_PKEY_free(k);
}

/* base64, URL alphabet, no padding: what nats-server decodes the "sig" with. */
static void b64url(const uint8_t *p, size_t n, char *out)
{
    static const char map[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_";
    size_t o = 0;
    for (size_t i = 0; i < n; i += 3) {
        uint32_t v = (uint32_t)p[i] << 16 | (i + 1 < n ? (uint32_t)p[i + 1] << 8 : 0) | (i + 2 < n ? p[i + 2] : 0);
        out[o++] = map[v >> 18 & 63];
        out[o++] = map[v >> 12 & 63];
        if (i + 1 < n)
            out[o++] = map[v >> 6 & 63];
        if (i + 2 < n)
            out[o++] = map[v & 63];
    }
    out[o] = '\0';
}

/* The first nonce "nonce-<k>" whose signature by the key begins (zero true) or not with 0x00. */
static void find_nonce(bool zero, char *nonce, size_t len)
{
    for (int k = 0; k < 100000; k++) {
        uint8_t sig[64];
        snprintf(nonce, len, "nonce-%d", k);
        sign(nonce, sig);
        if ((sig[0] == 0) == zero)
            return;
    }
    fail_msg("no nonce found");
}

/* ---- the scripted server ---------------------------------------------------------------------- */

typedef struct fake_nats {
    int listen_fd, port;
    char nonce[64];
    char connect[4096]; /* the CONNECT line the client sent, without its CRLF */
    bool answered_pong;
    pthread_t thread;
} fake_nats;

static bool write_all(int fd, const char *s)
{
    size_t n = strlen(s);
    while (n > 0) {
        ssize_t w = send(fd, s, n, MSG_NOSIGNAL);
        if (w <= 0)
            return false;
        s += w, n -= (size_t)w;
    }
    return true;
}

/* Reads into buf until it holds `want` or the peer closes or the bound passes. */
static size_t read_until(int fd, char *buf, size_t cap, size_t have, const char *want, int64_t deadline)
{
    while (have < cap - 1) {
        buf[have] = '\0';
        if (want && strstr(buf, want))
            break;
        int left = (int)(deadline - mono_ms());
        struct pollfd p = {.fd = fd, .events = POLLIN};
        if (left <= 0 || poll(&p, 1, left) <= 0)
            break;
        ssize_t r = recv(fd, buf + have, cap - 1 - have, 0);
        if (r <= 0)
            break;
        have += (size_t)r;
    }
    buf[have] = '\0';
    return have;
}

/* The "name":"value" string of a flat JSON object, or "" when absent. */
static void json_str(const char *json, const char *name, char *out, size_t len)
{
    char key[64];
    snprintf(key, sizeof key, "\"%s\":\"", name);
    const char *at = strstr(json, key);
    out[0] = '\0';
    if (!at)
        return;
    at += strlen(key);
    size_t n = strcspn(at, "\"");
    snprintf(out, len, "%.*s", (int)(n < len ? n : len - 1), at);
}

static bool signature_verifies(const fake_nats *f)
{
    char nkey[128], sig[128], want[128];
    uint8_t raw[64];
    json_str(f->connect, "nkey", nkey, sizeof nkey);
    json_str(f->connect, "sig", sig, sizeof sig);
    sign(f->nonce, raw);
    b64url(raw, 64, want);
    /* The JWT case carries no nkey: the JWT names the key, and here the key is the test's. */
    return (nkey[0] == '\0' || strcmp(nkey, g_pub_text) == 0) && strcmp(sig, want) == 0;
}

static void *fake_run(void *arg)
{
    fake_nats *f = arg;
    int64_t deadline = mono_ms() + BOUND_MS;
    struct pollfd p = {.fd = f->listen_fd, .events = POLLIN};
    if (poll(&p, 1, BOUND_MS) <= 0)
        return NULL;
    int fd = accept(f->listen_fd, NULL, NULL);
    if (fd < 0)
        return NULL;
    char info[512];
    snprintf(info, sizeof info,
             "INFO {\"server_id\":\"FAKE\",\"server_name\":\"FAKE\",\"version\":\"2.9.10\",\"proto\":1,"
             "\"host\":\"127.0.0.1\",\"port\":%d,\"headers\":true,\"auth_required\":true,\"max_payload\":1048576,"
             "\"client_id\":1,\"nonce\":\"%s\"}\r\n",
             f->port, f->nonce);
    static char buf[8192];
    if (write_all(fd, info)) {
        size_t n = read_until(fd, buf, sizeof buf, 0, "PING\r\n", deadline);
        const char *end = strstr(buf, "\r\n");
        if (strncmp(buf, "CONNECT ", 8) == 0 && end)
            snprintf(f->connect, sizeof f->connect, "%.*s", (int)(end - buf), buf);
        f->answered_pong = f->connect[0] && signature_verifies(f);
        write_all(fd, f->answered_pong ? "PONG\r\n" : "-ERR 'Authorization Violation'\r\n");
        /* Until the client hangs up (its PINGs answered), so the test sees the connection whole. */
        while (n > 0 && f->answered_pong) {
            n = read_until(fd, buf, sizeof buf, 0, "PING\r\n", deadline);
            if (strstr(buf, "PING\r\n"))
                write_all(fd, "PONG\r\n");
        }
    }
    close(fd);
    return NULL;
}

static void fake_start(fake_nats *f, const char *nonce)
{
    memset(f, 0, sizeof *f);
    snprintf(f->nonce, sizeof f->nonce, "%s", nonce);
    f->listen_fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    assert_true(f->listen_fd >= 0);
    struct sockaddr_in a = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    socklen_t len = sizeof a;
    assert_int_equal(bind(f->listen_fd, (struct sockaddr *)&a, sizeof a), 0);
    assert_int_equal(listen(f->listen_fd, 1), 0);
    assert_int_equal(getsockname(f->listen_fd, (struct sockaddr *)&a, &len), 0);
    f->port = ntohs(a.sin_port);
    assert_int_equal(pthread_create(&f->thread, NULL, fake_run, f), 0);
}

static void fake_join(fake_nats *f)
{
    pthread_join(f->thread, NULL);
    close(f->listen_fd);
}

/* ---- the cases -------------------------------------------------------------------------------- */

static int setup(void **state)
{
    (void)state;
    for (int i = 0; i < 32; i++)
        g_seed[i] = (uint8_t)(i * 7 + 1);
    EVP_PKEY *k = EVP_PKEY_new_raw_private_key(EVP_PKEY_ED25519, NULL, g_seed, 32);
    size_t len = 32;
    if (!k || EVP_PKEY_get_raw_public_key(k, g_pub, &len) != 1)
        return -1;
    EVP_PKEY_free(k);
    cs_nkey_user_public(g_pub, g_pub_text);
    char seed[CS_NKEY_TEXT_MAX];
    cs_nkey_user_seed(g_seed, seed);
    if (cs_tmpdir_make(&g_dir, "jsconnect") != 0)
        return -1;
    cs_tmpdir_join(&g_dir, "user.nk", g_seed_file, sizeof g_seed_file);
    cs_tmpdir_join(&g_dir, "user.creds", g_creds_file, sizeof g_creds_file);
    FILE *f = fopen(g_seed_file, "w");
    if (!f)
        return -1;
    fprintf(f, "%s\n", seed);
    fclose(f);
    /* The layout nsc writes. */
    if (!(f = fopen(g_creds_file, "w")))
        return -1;
    fprintf(f,
            "-----BEGIN NATS USER JWT-----\n%s\n------END NATS USER JWT------\n\n"
            "************************* IMPORTANT *************************\n\n"
            "-----BEGIN USER NKEY SEED-----\n%s\n------END USER NKEY SEED------\n",
            JWT, seed);
    fclose(f);
    return cs_js_library_open() == NATS_OK ? 0 : -1;
}

static int teardown(void **state)
{
    (void)state;
    cs_tmpdir_remove(&g_dir);
    return 0;
}

/* Connects with the daemon's options (the given credentials) to a scripted server that sends
 * nonce; returns the CONNECT it read, after checking that the connect succeeded. */
static void connect_with(const cs_js_auth *auth, const char *nonce, fake_nats *f)
{
    fake_start(f, nonce);
    char url[64];
    snprintf(url, sizeof url, "nats://127.0.0.1:%d", f->port);
    cs_js_conn_config cc = {.urls = url, .name = "test", .timeout_ms = BOUND_MS, .auth = auth};
    natsOptions *o = NULL;
    cs_err err;
    assert_int_equal(cs_js_options_new(&o, &cc, &err), 0);
    assert_int_equal(natsOptions_SetMaxReconnect(o, 0), NATS_OK);
    natsConnection *nc = NULL;
    natsStatus s = natsConnection_Connect(&nc, o);
    natsConnection_Destroy(nc);
    natsOptions_Destroy(o);
    fake_join(f);
    if (s != NATS_OK)
        fail_msg("connect with nonce %s: %s; the client sent: %s", nonce, natsStatus_GetText(s), f->connect);
    assert_true(f->answered_pong);
}

static void expect_connect(const fake_nats *f, const char *credential_field)
{
    uint8_t raw[64];
    char sig[128], want[512];
    sign(f->nonce, raw);
    b64url(raw, 64, sig);
    snprintf(want, sizeof want, "CONNECT {\"verbose\":false,\"pedantic\":false,%s\"sig\":\"%s\",", credential_field, sig);
    if (strncmp(f->connect, want, strlen(want)) != 0)
        fail_msg("CONNECT\n  %s\nwanted it to begin\n  %s", f->connect, want);
}

static void test_nkey_signature_beginning_with_zero_is_sent(void **state)
{
    (void)state;
    char nonce[32], field[128];
    uint8_t raw[64];
    find_nonce(true, nonce, sizeof nonce);
    sign(nonce, raw);
    assert_int_equal(raw[0], 0); /* the case nats.c 3.4.1 sent without "sig" */
    cs_js_auth auth = {.nkey_seed = g_seed_file};
    fake_nats f;
    connect_with(&auth, nonce, &f);
    snprintf(field, sizeof field, "\"nkey\":\"%s\",", g_pub_text);
    expect_connect(&f, field);
}

static void test_nkey_signature_beginning_otherwise_is_sent(void **state)
{
    (void)state;
    char nonce[32], field[128];
    find_nonce(false, nonce, sizeof nonce);
    cs_js_auth auth = {.nkey_seed = g_seed_file};
    fake_nats f;
    connect_with(&auth, nonce, &f);
    snprintf(field, sizeof field, "\"nkey\":\"%s\",", g_pub_text);
    expect_connect(&f, field);
}

static void test_creds_signature_beginning_with_zero_is_sent(void **state)
{
    (void)state;
    char nonce[32];
    find_nonce(true, nonce, sizeof nonce);
    cs_js_auth auth = {.creds = g_creds_file};
    fake_nats f;
    connect_with(&auth, nonce, &f);
    expect_connect(&f, "\"jwt\":\"" JWT "\",");
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_nkey_signature_beginning_with_zero_is_sent),
        cmocka_unit_test(test_nkey_signature_beginning_otherwise_is_sent),
        cmocka_unit_test(test_creds_signature_beginning_with_zero_is_sent),
    };
    int rc = cmocka_run_group_tests(tests, setup, teardown);
    nats_Close();
    return rc;
}
