/* SPDX-License-Identifier: Apache-2.0 */
/* libFuzzer target for the client's reading of a /healthz answer (remoteledger/healthz.c), which
 * rl_stream_bounds takes from whatever the server (or something posing as one) sends.
 *
 * Input: the answer bytes. Each is parsed as an exact-size heap copy (ASan sees reads past it),
 * once as "more may come" and once as "the stream has ended". Checked:
 *  - at the end of the stream the answer is never "more";
 *  - a 200 answer that parsed names both "oldest" and "latest" in its bytes;
 *  - the same input gives the same outcome twice;
 *  - an answer that is complete without the end of the stream is also complete with it, with the
 *    same numbers;
 *  - the /healthz target for "/" + the input, taken as a path, starts with '/' and ends in
 *    "healthz".
 *
 * Build and run: tests/fuzz/CMakeLists.txt (clang, -DCS_FUZZ=ON). */
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "remoteledger/healthz.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static void check(bool ok, const char *what)
{
    if (!ok) {
        fprintf(stderr, "fuzz_healthz: property violated: %s\n", what);
        abort();
    }
}

typedef struct outcome {
    rli_hz_status st;
    int status;
    uint32_t oldest, latest;
} outcome;

static outcome parse(const uint8_t *data, size_t size, bool eof)
{
    char *copy = malloc(size ? size : 1);
    check(copy != NULL, "malloc");
    if (size)
        memcpy(copy, data, size);
    outcome o = {0};
    const char *why = NULL;
    o.st = rli_hz_parse(copy, size, eof, &o.status, &o.oldest, &o.latest, &why);
    check(o.st != RLI_HZ_FAILED || why != NULL, "a failure says why");
    free(copy);
    return o;
}

static bool contains(const uint8_t *p, size_t n, const char *s)
{
    size_t k = strlen(s);
    for (size_t i = 0; i + k <= n; i++)
        if (memcmp(p + i, s, k) == 0)
            return true;
    return false;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    outcome more = parse(data, size, false), end = parse(data, size, true);
    check(end.st != RLI_HZ_MORE, "never more at the end of the stream");
    outcome again = parse(data, size, false);
    check(memcmp(&more, &again, sizeof more) == 0, "deterministic");
    if (more.st == RLI_HZ_DONE) {
        check(end.st == RLI_HZ_DONE && end.status == more.status, "complete stays complete at the end");
        if (more.status == 200)
            check(end.oldest == more.oldest && end.latest == more.latest, "the same numbers at the end");
    }
    if ((more.st == RLI_HZ_DONE && more.status == 200) || (end.st == RLI_HZ_DONE && end.status == 200))
        check(contains(data, size, "\"oldest\"") && contains(data, size, "\"latest\""), "numbers come from keys");

    /* a stream URL's path always starts with '/' (endpoint.c makes "" into "/stream") */
    char *path = malloc(size + 2);
    check(path != NULL, "malloc");
    path[0] = '/';
    memcpy(path + 1, data, size);
    path[size + 1] = '\0';
    char *t = rli_hz_target(path);
    check(t != NULL, "target");
    size_t n = strlen(t);
    check(t[0] == '/' && n >= 8 && strcmp(t + n - 7, "healthz") == 0, "the target is a /healthz path");
    free(t);
    free(path);
    return 0;
}
