/* SPDX-License-Identifier: Apache-2.0 */
/* sig_cost: what signed ledgers cost per ledger, on one thread, at the two named shapes
 * (docs/BENCHMARKS.md, "Signing"; bench/sign-cost.sh measures the same end to end).
 *
 *   sig_cost [small_iters [accept_iters [sig_iters]]]     default 2000 300 5000
 *
 * For each shape ("small": 204800 B every 10 ms over 5 ms; "accept": 15196160 B every 600 ms over
 * 15 ms) it times with CLOCK_MONOTONIC, one ledger per sample:
 *   sha256      EVP SHA-256 of the ledger in one pass
 *   sha256/256K the same in 262144-byte updates, as the source loop and the client hash it
 *   xxh64       XXH64 of the same bytes in 262144-byte updates (paid today, for comparison)
 *   sign        one cs_sig_sign of the ledger's signed input (the source loop at END)
 *   verify      one cs_sig_verify (the client at END)
 * and prints the wall p10/median/p90 in ns per ledger, the median of the thread's CPU time
 * (CLOCK_THREAD_CPUTIME_ID, which leaves out time another process had the CPU), and the wall median
 * as a percentage of the shape's emit window and of its cadence. Then the two sides: server = SHA-256/256K + sign, client =
 * SHA-256/256K + verify. The ledger buffer is hashed again and again, so at "small" it sits in
 * cache; the 15 MB one does not fit, as on the server. Wall time: a shared machine adds to the
 * p90, the median is the figure to read. Keys are made for the run (temporary PEM files). */
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include <openssl/evp.h>
#include <openssl/opensslv.h>
#include <openssl/pem.h>
#include <xxhash.h>

#include "wire/ledgersig.h"

#define CHUNK 262144

typedef struct shape {
    const char *name;
    size_t bytes;
    double window_ns, cadence_ns;
    int iters;
} shape;

static uint64_t now_ns(clockid_t id)
{
    struct timespec ts;
    clock_gettime(id, &ts);
    return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

static int cmp_u64(const void *a, const void *b)
{
    uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
    return (x > y) - (x < y);
}

static void die(const char *what)
{
    fprintf(stderr, "sig_cost: %s\n", what);
    exit(1);
}

/* p10, median, p90 of n samples (sorted in place). */
typedef struct stats {
    uint64_t p10, p50, p90;
} stats;

static stats summarize(uint64_t *v, int n)
{
    qsort(v, (size_t)n, sizeof *v, cmp_u64);
    return (stats){v[n / 10], v[n / 2], v[n * 9 / 10]};
}

static void sha256(const uint8_t *p, size_t n, size_t step, uint8_t out[32])
{
    EVP_MD_CTX *c = EVP_MD_CTX_new();
    unsigned int dn = 0;
    if (!c || EVP_DigestInit_ex(c, EVP_sha256(), NULL) != 1)
        die("EVP SHA-256 init failed");
    for (size_t off = 0; off < n; off += step)
        EVP_DigestUpdate(c, p + off, n - off < step ? n - off : step);
    EVP_DigestFinal_ex(c, out, &dn);
    EVP_MD_CTX_free(c);
}

static uint64_t xxh64(const uint8_t *p, size_t n)
{
    XXH64_state_t *h = XXH64_createState();
    XXH64_reset(h, 0);
    for (size_t off = 0; off < n; off += CHUNK)
        XXH64_update(h, p + off, n - off < CHUNK ? n - off : CHUNK);
    uint64_t r = XXH64_digest(h);
    XXH64_freeState(h);
    return r;
}

/* A fresh Ed25519 key pair in two temporary PEM files, loaded the way corestreamd and the client
 * load theirs. */
static void make_keys(cs_sig_signer **signer, cs_sig_keyset **keys)
{
    char priv[] = "/tmp/sig_cost_key_XXXXXX", pub[] = "/tmp/sig_cost_pub_XXXXXX";
    int fa = mkstemp(priv), fb = mkstemp(pub);
    EVP_PKEY *k = EVP_PKEY_Q_keygen(NULL, NULL, "ED25519");
    FILE *a = fa >= 0 ? fdopen(fa, "w") : NULL, *b = fb >= 0 ? fdopen(fb, "w") : NULL;
    if (!k || !a || !b || PEM_write_PrivateKey(a, k, NULL, NULL, 0, NULL, NULL) != 1 || PEM_write_PUBKEY(b, k) != 1)
        die("cannot make an Ed25519 key pair");
    fclose(a);
    fclose(b);
    EVP_PKEY_free(k);
    cs_err err;
    if (cs_sig_signer_load(priv, signer, &err) || cs_sig_keyset_load(pub, keys, &err))
        die(err.msg);
    unlink(priv);
    unlink(pub);
}

/* One ledger's worth of one operation, for time_it. */
typedef struct job {
    const uint8_t *buf;
    size_t bytes;
    const cs_sig_signer *signer;
    const cs_sig_keyset *keys;
    cs_sig s, last; /* the ledger being signed; the one signed last, with the prev it was signed with */
    uint64_t sum, sink;
    uint8_t digest[32];
} job;

static void op_sha(job *j) { sha256(j->buf, j->bytes, j->bytes, j->digest), j->sink += j->digest[0]; }
static void op_sha_chunked(job *j) { sha256(j->buf, j->bytes, CHUNK, j->digest), j->sink += j->digest[0]; }
static void op_xxh64(job *j) { j->sink += xxh64(j->buf, j->bytes); }

static void op_sign(job *j)
{
    cs_err err;
    j->s.seq++;
    if (cs_sig_sign(j->signer, &j->s, j->bytes, j->sum, &err))
        die(err.msg);
    j->last = j->s;
    memcpy(j->s.prev, j->s.sig, CS_SIG_LEN); /* chained, as the source loop signs */
}

static void op_verify(job *j)
{
    cs_err err;
    if (cs_sig_verify(j->keys, &j->last, j->bytes, j->sum, j->digest, &err))
        die(err.msg);
}

/* n samples of op after n of warm-up: wall (CLOCK_MONOTONIC) and this thread's CPU time
 * (CLOCK_THREAD_CPUTIME_ID: what the operation cost, minus the time another process had the CPU). */
static void time_it(void (*op)(job *), job *j, int n, uint64_t *tw, uint64_t *tc, stats *wall, stats *cpu)
{
    for (int pass = 0; pass < 2; pass++)
        for (int i = 0; i < n; i++) {
            uint64_t w0 = now_ns(CLOCK_MONOTONIC), c0 = now_ns(CLOCK_THREAD_CPUTIME_ID);
            op(j);
            tc[i] = now_ns(CLOCK_THREAD_CPUTIME_ID) - c0;
            tw[i] = now_ns(CLOCK_MONOTONIC) - w0;
        }
    *wall = summarize(tw, n);
    *cpu = summarize(tc, n);
}

static void row(const char *what, stats w, stats c, const shape *sh)
{
    printf("  %-17s %11" PRIu64 " %11" PRIu64 " %11" PRIu64 " %11" PRIu64 "   %7.2f %%  %7.3f %%\n", what, w.p10,
           w.p50, w.p90, c.p50, 100.0 * (double)w.p50 / sh->window_ns, 100.0 * (double)w.p50 / sh->cadence_ns);
}

static stats add(stats a, stats b) { return (stats){a.p10 + b.p10, a.p50 + b.p50, a.p90 + b.p90}; }

static void run_shape(const shape *sh, const cs_sig_signer *signer, const cs_sig_keyset *keys, int sig_iters)
{
    uint8_t *buf = malloc(sh->bytes);
    int n = sh->iters > sig_iters ? sh->iters : sig_iters;
    uint64_t *tw = malloc((size_t)n * sizeof *tw), *tc = malloc((size_t)n * sizeof *tc);
    if (!buf || !tw || !tc)
        die("out of memory");
    uint64_t x = 0x9e3779b97f4a7c15u; /* incompressible bytes: SHA-256 and XXH64 do not care */
    for (size_t i = 0; i < sh->bytes; i++) {
        x ^= x << 13, x ^= x >> 7, x ^= x << 17;
        buf[i] = (uint8_t)x;
    }
    printf("\n%s: %zu B ledgers, emit window %.0f ms, cadence %.0f ms; %d samples (sign/verify %d)\n", sh->name,
           sh->bytes, sh->window_ns / 1e6, sh->cadence_ns / 1e6, sh->iters, sig_iters);
    printf("  %-17s %11s %11s %11s %11s   %9s  %9s\n", "ns/ledger", "wall p10", "wall med", "wall p90", "CPU med",
           "of window", "of cadence");

    job j = {.buf = buf, .bytes = sh->bytes, .signer = signer, .keys = keys, .s = {.run_len = 26}};
    memcpy(j.s.run, "01JEXAMPLERUNTOKEN00000000", 26);
    j.sum = xxh64(buf, sh->bytes);
    stats w[5], c[5];
    time_it(op_sha, &j, sh->iters, tw, tc, &w[0], &c[0]);
    time_it(op_sha_chunked, &j, sh->iters, tw, tc, &w[1], &c[1]);
    time_it(op_xxh64, &j, sh->iters, tw, tc, &w[2], &c[2]);
    memcpy(j.s.sha256, j.digest, sizeof j.digest);
    time_it(op_sign, &j, sig_iters, tw, tc, &w[3], &c[3]);
    time_it(op_verify, &j, sig_iters, tw, tc, &w[4], &c[4]);
    row("sha256", w[0], c[0], sh);
    row("sha256/256K", w[1], c[1], sh);
    row("xxh64/256K", w[2], c[2], sh);
    row("sign", w[3], c[3], sh);
    row("verify", w[4], c[4], sh);
    row("server: sha+sign", add(w[1], w[3]), add(c[1], c[3]), sh);
    row("client: sha+vfy", add(w[1], w[4]), add(c[1], c[4]), sh);
    printf("  SHA-256 %.0f MB/s, XXH64 %.0f MB/s (wall medians, 256K updates)\n",
           (double)sh->bytes * 1e3 / (double)w[1].p50, (double)sh->bytes * 1e3 / (double)w[2].p50);
    if (j.sink == 42)
        putchar(' '); /* keeps the hashes from being optimized away */
    free(tc);
    free(tw);
    free(buf);
}

int main(int argc, char **argv)
{
    int small = argc > 1 ? atoi(argv[1]) : 2000, accept = argc > 2 ? atoi(argv[2]) : 300,
        sig_iters = argc > 3 ? atoi(argv[3]) : 5000;
    if (small < 10 || accept < 10 || sig_iters < 10)
        die("usage: sig_cost [small_iters [accept_iters [sig_iters]]], each at least 10");
    char line[4096];
    int sha_ni = 0;
    FILE *f = fopen("/proc/cpuinfo", "r");
    while (f && !sha_ni && fgets(line, sizeof line, f))
        sha_ni = strncmp(line, "flags", 5) == 0 && strstr(line, " sha_ni") != NULL;
    if (f)
        fclose(f);
    printf("sig_cost: %s; CPU %s SHA-NI (sha_ni in /proc/cpuinfo); XXH64 %u.%u.%u\n", OpenSSL_version(OPENSSL_VERSION),
           sha_ni ? "has" : "lacks", XXH_VERSION_MAJOR, XXH_VERSION_MINOR, XXH_VERSION_RELEASE);

    cs_sig_signer *signer;
    cs_sig_keyset *keys;
    make_keys(&signer, &keys);
    const shape shapes[] = {
        {"small", 204800, 5e6, 10e6, small},
        {"accept", 15196160, 15e6, 600e6, accept},
    };
    for (size_t i = 0; i < sizeof shapes / sizeof shapes[0]; i++)
        run_shape(&shapes[i], signer, keys, sig_iters);
    cs_sig_signer_free(signer);
    cs_sig_keyset_free(keys);
    return 0;
}
