/* SPDX-License-Identifier: Apache-2.0 */
/* libFuzzer target for the history archive's root HAS reader (cs_archive_parse_has in archive.h)
 * on arbitrary bytes, the body a GET would have returned.
 *
 * Properties checked beyond "no crash, no out-of-bounds read, no leak":
 *  - the result is 0, or -1 with one of the documented messages;
 *  - a published passphrase is a NUL-terminated string that fits its field and, when the input
 *    has no escapes, is found verbatim in the input;
 *  - reading is deterministic (same result, same message, same HAS);
 *  - the passphrase check agrees with the unchecked read: expecting the archive's own passphrase
 *    passes with the same HAS, expecting another one fails with the mismatch message.
 *
 * Build and run: tests/fuzz/CMakeLists.txt (clang, -DCS_FUZZ=ON). */
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "corestreamd/sources/captive/archive.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define URL "https://history.example.org/"

static void check(bool ok, const char *what)
{
    if (!ok) {
        fprintf(stderr, "fuzz_archive: property violated: %s\n", what);
        abort();
    }
}

static bool starts(const char *s, const char *prefix)
{
    return strncmp(s, prefix, strlen(prefix)) == 0;
}

static bool same_has(const cs_archive_has *a, const cs_archive_has *b)
{
    return a->current_ledger == b->current_ledger && strcmp(a->network_passphrase, b->network_passphrase) == 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    const char *s = (const char *)data;
    cs_archive_has has, again;
    cs_err e, e2;
    int rc = cs_archive_parse_has(s, size, URL, NULL, &has, &e);
    int rc2 = cs_archive_parse_has(s, size, URL, NULL, &again, &e2);
    check(rc == 0 || rc == -1, "the result is 0 or -1");
    check(rc == rc2, "reading is deterministic");
    check(memchr(has.network_passphrase, 0, sizeof has.network_passphrase) != NULL,
          "the passphrase is NUL-terminated within its field");
    if (rc != 0) {
        check(e.kind == e2.kind && strcmp(e.msg, e2.msg) == 0, "errors are deterministic");
        check(e.kind == CS_ARCHIVE_ERR_NOT_JSON ? strcmp(e.msg, "history archive state: " URL " is not valid JSON") == 0
                                                 : e.kind == 0,
              "only a non-JSON body has its kind");
        check(strcmp(e.msg, "history archive state: " URL " is not valid JSON") == 0 ||
                  strcmp(e.msg, "history archive state: " URL " does not hold a JSON object") == 0 ||
                  strcmp(e.msg, "history archive state: currentLedger is not a uint32") == 0 ||
                  strcmp(e.msg, "history archive state: networkPassphrase is not a string") == 0,
              "an unchecked read fails only with a documented message");
        return 0;
    }
    check(same_has(&has, &again), "reading is deterministic");
    size_t pn = strlen(has.network_passphrase);
    /* Without escapes a JSON string's text is its value (possibly cut to fit the field). */
    if (pn && !memchr(s, '\\', size))
        check(memmem(s, size, has.network_passphrase, pn) != NULL, "the passphrase is found in the input");

    /* Expecting its own passphrase passes and reads the same. */
    if (pn) {
        check(cs_archive_parse_has(s, size, URL, has.network_passphrase, &again, &e2) == 0 && same_has(&has, &again),
              "the archive's own passphrase matches");
    }
    /* Expecting another one fails with the mismatch when the archive publishes one. */
    static const char other[] = "fuzz passphrase that no input spells \x01";
    int rc3 = cs_archive_parse_has(s, size, URL, other, &again, &e2);
    if (pn && strcmp(has.network_passphrase, other) != 0)
        check(rc3 == -1 && starts(e2.msg, "Network passphrase does not match! expected=") && e2.kind == 0,
              "another passphrase is refused");
    else
        check(rc3 == 0 && same_has(&has, &again), "an archive without a passphrase is not checked");
    return 0;
}
