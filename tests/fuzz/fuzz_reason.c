/* SPDX-License-Identifier: Apache-2.0 */
/* libFuzzer target for the 4001 close-reason parser a libremoteledger client runs on the reason
 * text the server sends (not NUL-terminated on the wire).
 *
 * Properties checked beyond "no crash, no out-of-bounds read" (the input is an exact-size heap
 * copy with no NUL, so ASan sees a read past len):
 *  - a failed parse leaves the bounds 0/0 (unknown, not wrong);
 *  - a successful parse only of a reason that starts with the fixed prefix, and formatting the
 *    parsed bounds with cs_wire_format_too_far_behind and parsing that gives the same bounds;
 *  - the first 8 input bytes read as two uint32s round-trip through format and parse exactly.
 *
 * Build and run: tests/fuzz/CMakeLists.txt (clang, -DCS_FUZZ=ON). */
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "wire/wire.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define PREFIX "too far behind: oldest="
/* The longest reason: both bounds at ten digits, plus room to see a cut. */
#define REASON_MAX 80

static void check(bool ok, const char *what)
{
    if (!ok) {
        fprintf(stderr, "fuzz_reason: property violated: %s\n", what);
        abort();
    }
}

/* Formats the bounds and parses them back. */
static void round_trip(uint32_t oldest, uint32_t latest)
{
    char text[REASON_MAX];
    cs_wire_format_too_far_behind(text, sizeof text, oldest, latest);
    size_t n = strlen(text);
    check(n + 1 < sizeof text, "a formatted reason is never cut");
    char *exact = malloc(n);
    check(exact != NULL, "malloc");
    memcpy(exact, text, n);
    uint32_t o = 1, l = 1;
    check(cs_wire_parse_too_far_behind(exact, n, &o, &l), "a formatted reason parses");
    check(o == oldest && l == latest, "format then parse keeps the bounds");
    free(exact);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    char *reason = malloc(size ? size : 1);
    check(reason != NULL, "malloc");
    memcpy(reason, data, size);

    uint32_t o = 77, l = 77;
    bool ok = cs_wire_parse_too_far_behind(reason, size, &o, &l);
    if (ok) {
        check(size >= strlen(PREFIX) && memcmp(reason, PREFIX, strlen(PREFIX)) == 0,
              "success only after the fixed prefix");
        round_trip(o, l);
    } else {
        check(o == 0 && l == 0, "a failed parse leaves the bounds unknown");
    }
    uint32_t o2, l2;
    check(cs_wire_parse_too_far_behind(reason, size, &o2, &l2) == ok && o2 == o && l2 == l,
          "deterministic");

    if (size >= 8) {
        uint32_t a, b;
        memcpy(&a, data, 4);
        memcpy(&b, data + 4, 4);
        round_trip(a, b);
    }
    free(reason);
    return 0;
}
