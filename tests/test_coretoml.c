/* SPDX-License-Identifier: Apache-2.0 */
/* The captive-core toml reader (coretoml.h): PORTSPEC 88's passphrase peek, the SDK's Strict
 * refusals and checks, the generated stellar-core.conf, and the `stellar-core version` parsing;
 * and the TOML subset reader under it (toml.h) on buffers with no NUL after them. */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "corestreamd/sources/captive/coretoml.h"
#include "corestreamd/sources/captive/toml.h"

#define TESTNET "Test SDF Network ; September 2015"
#define PUBNET "Public Global Stellar Network ; September 2015"
#define VALIDATOR_KEY "GDKXE2OZMJIPOSLNA6N6F2BVCI3O777I2OOC4BV7VOYUEHYX7RTRYA7Y"

/* The prototype's test config (captive_test.go testCoreConfig) after a passphrase line. */
#define QUORUM                                                                                      \
    "[[HOME_DOMAINS]]\n"                                                                          \
    "HOME_DOMAIN=\"testnet.stellar.org\"\n"                                                       \
    "QUALITY=\"HIGH\"\n"                                                                          \
    "\n"                                                                                          \
    "[[VALIDATORS]]\n"                                                                            \
    "NAME=\"sdf_testnet_1\"\n"                                                                    \
    "HOME_DOMAIN=\"testnet.stellar.org\"\n"                                                       \
    "PUBLIC_KEY=\"" VALIDATOR_KEY "\"\n"                                                          \
    "ADDRESS=\"core-testnet1.stellar.org\"\n"
#define GO_TEST_CONFIG "NETWORK_PASSPHRASE=\"" TESTNET "\"\nDATABASE=\"sqlite3://stellar.db\"\n\n" QUORUM

/* ---- PORTSPEC 88: the peek ------------------------------------------------------------------ */

static void test_peek_accepts(void **state)
{
    (void)state;
    static const struct {
        const char *name, *toml, *want;
    } cases[] = {
        {"plain", "NETWORK_PASSPHRASE=\"" TESTNET "\"", TESTNET},
        {"spaces around =", "NETWORK_PASSPHRASE = \"x\"", "x"},
        {"single quotes", "NETWORK_PASSPHRASE='x'", "x"},
        {"trailing comment", "NETWORK_PASSPHRASE=\"x\" # the network", "x"},
        {"indented", "  NETWORK_PASSPHRASE=\"x\"\n", "x"},
        {"other keys first", "HTTP_PORT=11626\nNETWORK_PASSPHRASE=\"x\"\n", "x"},
        {"CRLF", "HTTP_PORT=1\r\nNETWORK_PASSPHRASE=\"x y\"\r\n", "x y"},
        {"escapes are not processed", "NETWORK_PASSPHRASE=\"a\\tb\"", "a\\tb"},
        {"comments and blanks first", "# c\n\n   \nNETWORK_PASSPHRASE='q'\n[[VALIDATORS]]\n", "q"},
        {"first definition wins", "NETWORK_PASSPHRASE='a'\nNETWORK_PASSPHRASE='b'\n", "a"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        char *got = NULL;
        cs_err err = {0};
        int rc = cs_coretoml_peek_passphrase(cases[i].toml, strlen(cases[i].toml), &got, &err);
        if (rc != 0)
            fail_msg("%s: %s", cases[i].name, err.msg);
        if (strcmp(got, cases[i].want) != 0)
            fail_msg("%s: got %s want %s", cases[i].name, got, cases[i].want);
        free(got);
    }
}

static void test_peek_refuses(void **state)
{
    (void)state;
    static const char undefined[] = "NETWORK_PASSPHRASE is not defined; define it or pass --network-passphrase";
    static const char unquoted[] = "NETWORK_PASSPHRASE is not a quoted string; pass --network-passphrase instead";
    static const struct {
        const char *name, *toml, *want;
    } cases[] = {
        {"commented out", "#NETWORK_PASSPHRASE=\"x\"\n", undefined},
        {"absent", "HTTP_PORT=11626\n", undefined},
        {"inside a table", "[[VALIDATORS]]\nNETWORK_PASSPHRASE=\"x\"\n", undefined},
        {"unquoted", "NETWORK_PASSPHRASE=x\n", unquoted},
        {"empty file", "", undefined},
        {"unterminated", "NETWORK_PASSPHRASE=\"x\n", unquoted},
        {"mismatched quotes", "NETWORK_PASSPHRASE=\"x'\n", unquoted},
        {"lone quote", "NETWORK_PASSPHRASE=\"", unquoted},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        char *got = NULL;
        cs_err err = {0};
        if (cs_coretoml_peek_passphrase(cases[i].toml, strlen(cases[i].toml), &got, &err) == 0)
            fail_msg("%s: accepted as %s", cases[i].name, got);
        assert_null(got);
        if (strcmp(err.msg, cases[i].want) != 0)
            fail_msg("%s: %s", cases[i].name, err.msg);
    }
}

/* ---- parsing and the SDK's rules ------------------------------------------------------------ */

static cs_coretoml *parse_ok(const char *toml, const char *pass)
{
    cs_coretoml *t = NULL;
    cs_err err = {0};
    if (cs_coretoml_parse(&t, toml, strlen(toml), pass, &err) != 0)
        fail_msg("parse: %s\n--- toml:\n%s", err.msg, toml);
    return t;
}

static void expect_refusal(const char *toml, const char *pass, const char *want)
{
    cs_coretoml *t = NULL;
    cs_err err = {0};
    if (cs_coretoml_parse(&t, toml, strlen(toml), pass, &err) == 0) {
        cs_coretoml_free(t);
        fail_msg("accepted, want %s\n--- toml:\n%s", want, toml);
    }
    assert_null(t);
    if (strcmp(err.msg, want) != 0)
        fail_msg("got  %s\nwant %s", err.msg, want);
}

static void test_parse_go_test_config(void **state)
{
    (void)state;
    cs_coretoml *t = parse_ok(GO_TEST_CONFIG, TESTNET);
    assert_true(cs_coretoml_has(t, "NETWORK_PASSPHRASE"));
    assert_true(cs_coretoml_has(t, "DATABASE"));
    assert_false(cs_coretoml_has(t, "HTTP_PORT"));
    assert_false(cs_coretoml_has(t, "NAME")); /* a table key is not top level */
    assert_string_equal(cs_coretoml_string(t, "NETWORK_PASSPHRASE"), TESTNET);
    assert_null(cs_coretoml_string(t, "HTTP_PORT"));
    assert_true(cs_coretoml_quorum_configured(t));
    assert_false(cs_coretoml_history_configured(t));
    cs_coretoml_free(t);
}

static void test_parse_syntax_coverage(void **state)
{
    (void)state;
    const char *toml =
        "\xEF\xBB\xBF# a BOM, comments, every value shape captive configs use\n"
        "NETWORK_PASSPHRASE = \"" TESTNET "\" # trailing\n"
        "HTTP_PORT = 0\n"
        "PEER_PORT = 11_625\n"
        "FAILURE_SAFETY = -1\n"
        "PUBLIC_HTTP_PORT = false\n"
        "LOG_FILE_PATH = 'C:\\logs\\core.log'\n"
        "DATABASE = \"\"\"sqlite3://stellar.db\"\"\"\n"
        "NODE_NAMES = [\n"
        "  \"GA... a\",  # first\n"
        "  'GB... b',\n"
        "  \"\"\"GC... c\"\"\",\n"
        "]\n"
        "PREFERRED_PEERS = [ \"a:1\", \"b:2\" ]\n"
        "PREFERRED_PEER_KEYS = []\n"
        "TESTING_MAX_ENTRIES_TO_ARCHIVE = 0x10\n"
        "\n"
        "[QUORUM_SET]\n"
        "THRESHOLD_PERCENT = 66\n"
        "VALIDATORS = [\"$self\", \"$a\"]\n"
        "[QUORUM_SET.inner]\n"
        "THRESHOLD_PERCENT = 51.5e0\n"
        "VALIDATORS = [ [\"nested\"], {x = 1, y = 'z'} ]\n"
        "when = 1979-05-27 07:32:00Z\n"
        "[HISTORY.sdf]\n"
        "get = \"curl -sf http://h/{0} -o {1}\"\n"
        "put = '''\n"
        "multi\n"
        "line'''\n"
        "[ \"HISTORY\" . 'quoted' ]\n"
        "get = \"\\u0063url \\\"x\\\"\"\n";
    cs_coretoml *t = parse_ok(toml, TESTNET);
    assert_string_equal(cs_coretoml_string(t, "LOG_FILE_PATH"), "C:\\logs\\core.log");
    assert_string_equal(cs_coretoml_string(t, "DATABASE"), "sqlite3://stellar.db");
    assert_true(cs_coretoml_history_configured(t));
    assert_true(cs_coretoml_quorum_configured(t));
    cs_coretoml_free(t);
}

static void test_parse_syntax_errors(void **state)
{
    (void)state;
    static const struct {
        const char *toml, *want;
    } cases[] = {
        {"NETWORK_PASSPHRASE = \"x\n", "could not unmarshal captive core toml: line 1: newline in a one-line string"},
        {"HTTP_PORT 11626\n", "could not unmarshal captive core toml: line 1: expected '=' after the key HTTP_PORT"},
        {"HTTP_PORT =\n", "could not unmarshal captive core toml: line 1: expected a value"},
        {"# ok\nNODE_NAMES = [\"a\",\n\"b\"\n", "could not unmarshal captive core toml: line 4: unterminated array"},
        {"HTTP_PORT = 1 2\n", "could not unmarshal captive core toml: line 1: expected the end of the line after a value"},
        {"HTTP_PORT = 012\n", "could not unmarshal captive core toml: line 1: invalid value 012"},
        {"HTTP_PORT = 1\nHTTP_PORT = 2\n",
         "could not unmarshal captive core toml: line 2: key HTTP_PORT is already defined (line 1)"},
        {"[QUORUM_SET]\nTHRESHOLD_PERCENT=1\n[QUORUM_SET]\n",
         "could not unmarshal captive core toml: line 3: table QUORUM_SET is already defined (line 1)"},
        {"[[VALIDATORS]]\nNAME=\"a\"\nNAME=\"b\"\n",
         "could not unmarshal captive core toml: line 3: key NAME is already defined (line 2)"},
        {"[HISTORY.a\n", "could not unmarshal captive core toml: line 1: expected ']' to close a table header"},
        {"[[VALIDATORS]\n", "could not unmarshal captive core toml: line 1: expected ']]' to close a table header"},
        {"X = \"\\q\"\n", "could not unmarshal captive core toml: line 1: invalid escape sequence"},
        {"X = '''abc\n", "could not unmarshal captive core toml: line 2: unterminated string"},
        {"= 1\n", "could not unmarshal captive core toml: line 1: unexpected character '='"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++)
        expect_refusal(cases[i].toml, TESTNET, cases[i].want);
}

static void test_refused_keys(void **state)
{
    (void)state;
    /* Keys captive core must not be given: each is named. */
    static const char *const keys[] = {"METADATA_OUTPUT_STREAM = \"fd:3\"", "NODE_SEED = \"SB...\"",
                                       "NODE_IS_VALIDATOR = true", "CATCHUP_RECENT = 100", "DISABLE_XDR_FSYNC = true"};
    static const char *const names[] = {"METADATA_OUTPUT_STREAM", "NODE_SEED", "NODE_IS_VALIDATOR", "CATCHUP_RECENT",
                                        "DISABLE_XDR_FSYNC"};
    for (size_t i = 0; i < sizeof keys / sizeof keys[0]; i++) {
        char toml[1024], want[256];
        snprintf(toml, sizeof toml, "%s\n%s\n", keys[i], GO_TEST_CONFIG);
        snprintf(want, sizeof want,
                 "could not unmarshal captive core toml: these fields are not supported by captive core: [\"%s\"]",
                 names[i]);
        expect_refusal(toml, TESTNET, want);
    }
    /* All of them at once, in file order, each once; table keys and tables too. */
    expect_refusal("NODE_SEED = \"s\"\nFOO = 1\nNODE_SEED2 = 1\n" QUORUM "FOO = 2\nWEIRD = 3\n[OTHER]\nBAR = 1\n"
                   "[[VALIDATORS]]\nNAME=\"x\"\nWEIRD = 4\n",
                   TESTNET,
                   "could not unmarshal captive core toml: these fields are not supported by captive core: "
                   "[\"NODE_SEED\" \"FOO\" \"NODE_SEED2\" \"VALIDATORS.FOO\" \"VALIDATORS.WEIRD\" \"OTHER\"]");
    expect_refusal("BUCKET_DIR_PATH = \"/data/buckets\"\n" GO_TEST_CONFIG, TESTNET,
                   "could not unmarshal captive core toml: setting BUCKET_DIR_PATH is disallowed for Captive Core, use "
                   "--storage-dir instead");
    expect_refusal("BUCKET_DIR_PATH = \"\"\n" GO_TEST_CONFIG, TESTNET,
                   "could not unmarshal captive core toml: setting BUCKET_DIR_PATH is disallowed for Captive Core, use "
                   "--storage-dir instead");
    expect_refusal("VALIDATORS = [{NAME=\"a\"}]\n", TESTNET,
                   "could not unmarshal captive core toml: line 1: write VALIDATORS as [[VALIDATORS]] tables");
}

static void test_types(void **state)
{
    (void)state;
    expect_refusal("HTTP_PORT = \"11626\"\n" QUORUM, TESTNET,
                   "could not unmarshal captive core toml: line 1: HTTP_PORT must be a non-negative integer");
    expect_refusal("PEER_PORT = -1\n" QUORUM, TESTNET,
                   "could not unmarshal captive core toml: line 1: PEER_PORT must be a non-negative integer");
    expect_refusal("NETWORK_PASSPHRASE = 5\n" QUORUM, TESTNET,
                   "could not unmarshal captive core toml: line 1: NETWORK_PASSPHRASE must be a string");
    expect_refusal("UNSAFE_QUORUM = \"yes\"\n" QUORUM, TESTNET,
                   "could not unmarshal captive core toml: line 1: UNSAFE_QUORUM must be a boolean");
    expect_refusal("PREFERRED_PEERS = [1, 2]\n" QUORUM, TESTNET,
                   "could not unmarshal captive core toml: line 1: PREFERRED_PEERS must be an array of strings");
    expect_refusal(QUORUM "QUALITY2 = 1\n", TESTNET,
                   "could not unmarshal captive core toml: these fields are not supported by captive core: "
                   "[\"VALIDATORS.QUALITY2\"]");
    expect_refusal("[[VALIDATORS]]\nNAME = 7\n", TESTNET,
                   "could not unmarshal captive core toml: line 2: VALIDATORS.NAME must be a string");
}

static void test_passphrase_mismatch(void **state)
{
    (void)state;
    /* PORTSPEC 86: the override disagrees with the file; the error names NETWORK_PASSPHRASE. */
    expect_refusal(GO_TEST_CONFIG, PUBNET,
                   "invalid captive core toml: NETWORK_PASSPHRASE in captive core config file: " TESTNET
                   " does not match passed configuration (" PUBNET ")");
    /* The file's string is compared decoded. */
    cs_coretoml *t = parse_ok("NETWORK_PASSPHRASE = \"a\\u0020b\"\n" QUORUM, "a b");
    cs_coretoml_free(t);
    /* A file without the key takes the passphrase in use. */
    t = parse_ok(QUORUM, PUBNET);
    cs_coretoml_free(t);
}

static void test_quorum_required(void **state)
{
    (void)state;
    expect_refusal("NETWORK_PASSPHRASE=\"" TESTNET "\"\n[[HOME_DOMAINS]]\nHOME_DOMAIN=\"h\"\nQUALITY=\"LOW\"\n", TESTNET,
                   "captive-core config file does not define any quorum set");
    expect_refusal("NETWORK_PASSPHRASE=\"" TESTNET "\"\n[HISTORY.a]\nget=\"x\"\n", TESTNET,
                   "captive-core config file does not define any quorum set");
    cs_coretoml *t = parse_ok("[QUORUM_SET]\nTHRESHOLD_PERCENT=100\nVALIDATORS=[\"$self\"]\n", TESTNET);
    assert_true(cs_coretoml_quorum_configured(t));
    cs_coretoml_free(t);
    t = parse_ok("[QUORUM_SET.sub.x]\nTHRESHOLD_PERCENT=100\n", TESTNET);
    assert_true(cs_coretoml_quorum_configured(t));
    cs_coretoml_free(t);
}

static void test_validator_checks(void **state)
{
    (void)state;
    const char *pre = "invalid captive core toml: ";
    static const struct {
        const char *toml, *want;
    } cases[] = {
        {"[[VALIDATORS]]\nHOME_DOMAIN=\"h\"\nPUBLIC_KEY=\"" VALIDATOR_KEY "\"\nQUALITY=\"HIGH\"\n",
         "found invalid validator entry which is missing a NAME value: "},
        {"[[VALIDATORS]]\nNAME=\"v\"\nPUBLIC_KEY=\"" VALIDATOR_KEY "\"\nQUALITY=\"HIGH\"\n",
         "found invalid validator entry which is missing a HOME_DOMAIN value: v"},
        {"[[VALIDATORS]]\nNAME=\"v\"\nHOME_DOMAIN=\"h\"\nQUALITY=\"HIGH\"\n",
         "found invalid validator entry which is missing a PUBLIC_KEY value: v"},
        {"[[VALIDATORS]]\nNAME=\"v\"\nHOME_DOMAIN=\"h\"\nQUALITY=\"HIGH\"\n"
         "PUBLIC_KEY=\"GDKXE2OZMJIPOSLNA6N6F2BVCI3O777I2OOC4BV7VOYUEHYX7RTRYA7Z\"\n",
         "found invalid validator entry which has an invalid PUBLIC_KEY : v"},
        {"[[VALIDATORS]]\nNAME=\"v\"\nHOME_DOMAIN=\"h\"\nQUALITY=\"HIGH\"\nPUBLIC_KEY=\"not a key\"\n",
         "found invalid validator entry which has an invalid PUBLIC_KEY : v"},
        {"[[VALIDATORS]]\nNAME=\"v\"\nHOME_DOMAIN=\"h\"\nPUBLIC_KEY=\"" VALIDATOR_KEY "\"\n",
         "found invalid validator entry which is missing a QUALITY value: v"},
        {"[[VALIDATORS]]\nNAME=\"v\"\nHOME_DOMAIN=\"h\"\nPUBLIC_KEY=\"" VALIDATOR_KEY "\"\nQUALITY=\"GREAT\"\n",
         "found invalid validator entry which has an invalid QUALITY value: v"},
        {"[[VALIDATORS]]\nNAME=\"v\"\nHOME_DOMAIN=\"h\"\nPUBLIC_KEY=\"" VALIDATOR_KEY "\"\nQUALITY=\"LOW\"\n"
         "[[VALIDATORS]]\nNAME=\"v\"\nHOME_DOMAIN=\"h\"\nPUBLIC_KEY=\"" VALIDATOR_KEY "\"\nQUALITY=\"LOW\"\n",
         "found duplicate validator in captive core configuration: v"},
        {"[[HOME_DOMAINS]]\nHOME_DOMAIN=\"h\"\nQUALITY=\"LOW\"\n[[HOME_DOMAINS]]\nHOME_DOMAIN=\"h\"\nQUALITY=\"LOW\"\n" QUORUM,
         "found duplicate home domain in captive core configuration: h"},
        {"[[HOME_DOMAINS]]\nQUALITY=\"LOW\"\n" QUORUM, "found invalid home domain entry which is missing a HOME_DOMAIN value"},
        {"[[HOME_DOMAINS]]\nHOME_DOMAIN=\"h\"\n" QUORUM, "found invalid home domain entry which is missing a QUALITY value: h"},
        {"[[HOME_DOMAINS]]\nHOME_DOMAIN=\"h\"\nQUALITY=\"MID\"\n" QUORUM,
         "found invalid home domain entry which has an invalid QUALITY value: h"},
        {"DATABASE=\"postgresql://dbname=core\"\n" QUORUM,
         "invalid DATABASE parameter: postgresql://dbname=core, for captive core config, must be valid sqlite3 db url"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        char want[512];
        snprintf(want, sizeof want, "%s%s", pre, cases[i].want);
        expect_refusal(cases[i].toml, TESTNET, want);
    }
    /* A validator's QUALITY may come from its HOME_DOMAINS entry (the Go test config). */
    cs_coretoml *t = parse_ok(GO_TEST_CONFIG, TESTNET);
    cs_coretoml_free(t);
}

/* ---- generation ----------------------------------------------------------------------------- */

static const char *const urls1[] = {"https://history.stellar.org/prd/core-testnet/core_testnet_001/"};

static cs_coretoml_params full_params(void)
{
    return (cs_coretoml_params){
        .network_passphrase = TESTNET,
        .urls = urls1,
        .nurls = 1,
        .core_major = 23,
        .core_minor = 0,
        .core_protocol = 23,
    };
}

static char *generate(const char *toml, const char *pass, const cs_coretoml_params *p)
{
    cs_coretoml *t = parse_ok(toml, pass);
    size_t len = 0;
    char *out = cs_coretoml_generate(t, p, &len);
    assert_non_null(out);
    assert_int_equal(len, strlen(out));
    cs_coretoml_free(t);
    /* What we generate, we can read back, and it still passes every check. */
    cs_coretoml *again = parse_ok(out, pass);
    cs_coretoml_free(again);
    return out;
}

static void test_generate_go_test_config(void **state)
{
    (void)state;
    cs_coretoml_params p = full_params();
    char *out = generate(GO_TEST_CONFIG, TESTNET, &p);
    const char *want =
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
        "\n" QUORUM
        "\n[HISTORY.h0]\n"
        "get = \"curl -sf https://history.stellar.org/prd/core-testnet/core_testnet_001/{0} -o {1}\"\n";
    assert_string_equal(out, want);
    free(out);
}

static void test_generate_defaults_only_where_absent(void **state)
{
    (void)state;
    const char *toml = "HTTP_PORT = 0\n"
                       "LOG_FILE_PATH = \"core.log\"\n"
                       "DATABASE = \"sqlite3://other.db\"\n"
                       "FAILURE_SAFETY = 0\n"
                       "BUCKETLIST_DB_INDEX_PAGE_SIZE_EXPONENT = 14\n"
                       "BUCKETLIST_DB_MEMORY_FOR_CACHING = 100\n"
                       "BACKFILL_RESTORE_META = false\n"
                       "ENABLE_SOROBAN_DIAGNOSTIC_EVENTS = false\n"
                       "ENABLE_DIAGNOSTICS_FOR_TX_SUBMISSION = false\n"
                       "EMIT_SOROBAN_TRANSACTION_META_EXT_V1 = false\n"
                       "EMIT_CLASSIC_EVENTS = false\n"
                       "CATCHUP_COMPLETE = false\n" QUORUM;
    cs_coretoml_params p = full_params();
    p.catchup_complete = true;
    char *out = generate(toml, TESTNET, &p);
    /* Only the passphrase was missing. */
    char want[2048];
    snprintf(want, sizeof want,
             "# Generated file, do not edit\n%.*s"
             "# Defaults added by corestreamd for the keys this file does not set\n"
             "NETWORK_PASSPHRASE = \"" TESTNET "\"\n%s",
             (int)(strstr(toml, "[[HOME") - toml), toml, strstr(toml, "[[HOME"));
    assert_non_null(strstr(out, "[HISTORY.h0]"));
    *strstr(out, "\n[HISTORY.h0]") = 0;
    assert_string_equal(out, want);
    free(out);

    /* And nothing at all when the file sets everything. */
    char full[2048];
    snprintf(full, sizeof full, "NETWORK_PASSPHRASE=\"x\"\n%s[HISTORY.mine]\nget=\"cp /a/{0} {1}\"\n", toml);
    out = generate(full, "x", &p);
    char want2[2100];
    snprintf(want2, sizeof want2, "# Generated file, do not edit\n%s", full);
    assert_string_equal(out, want2);
    free(out);
}

static void test_generate_inserts_before_the_first_table(void **state)
{
    (void)state;
    /* Comments and blank lines that lead into the first table stay with it; multi-line arrays
     * and everything else pass through byte for byte. */
    const char *toml = "# operator header\n"
                       "NETWORK_PASSPHRASE = '" TESTNET "'\r\n"
                       "PREFERRED_PEERS = [\n"
                       "    \"core-testnet1.stellar.org\", # one\n"
                       "\n"
                       "    \"core-testnet2.stellar.org\"\n"
                       "  ]\n"
                       "\n"
                       "# the quorum\n" QUORUM "\n# trailing comment, no newline at the end";
    cs_coretoml_params p = full_params();
    char *out = generate(toml, TESTNET, &p);
    const char *defaults = strstr(out, "# Defaults added");
    const char *table = strstr(out, "[[HOME_DOMAINS]]");
    assert_non_null(defaults);
    assert_non_null(table);
    assert_true(defaults < table);
    /* The head (through the array) precedes the defaults unchanged. */
    const char *head_end = strstr(toml, "  ]\n") + 4;
    size_t head = (size_t)(head_end - toml);
    assert_memory_equal(out + strlen("# Generated file, do not edit\n"), toml, head);
    assert_ptr_equal(defaults, out + strlen("# Generated file, do not edit\n") + head);
    /* The rest follows the defaults unchanged, given its missing newline. */
    const char *rest = strstr(out, "\n# the quorum") - 0;
    assert_non_null(rest);
    assert_non_null(strstr(out, "# trailing comment, no newline at the end\n\n[HISTORY.h0]\n"));
    free(out);

    /* No top-level keys at all: the defaults come first. */
    out = generate(QUORUM, TESTNET, &p);
    assert_int_equal(strncmp(out, "# Generated file, do not edit\n# Defaults added", 46), 0);
    free(out);

    /* No table after the keys: the defaults go after the last key, newline supplied. */
    out = generate("[QUORUM_SET]\nTHRESHOLD_PERCENT=1\n", TESTNET, &p);
    assert_true(strstr(out, "HTTP_PORT = 11626") < strstr(out, "[QUORUM_SET]"));
    free(out);
}

static void test_generate_history_tables(void **state)
{
    (void)state;
    static const char *const urls[] = {"http://a.example/x/", "http://b.example//", "file:///srv/archive"};
    cs_coretoml_params p = full_params();
    p.urls = urls;
    p.nurls = 3;
    char *out = generate(GO_TEST_CONFIG, TESTNET, &p);
    assert_non_null(strstr(out, "\n[HISTORY.h0]\nget = \"curl -sf http://a.example/x/{0} -o {1}\"\n"
                                "\n[HISTORY.h1]\nget = \"curl -sf http://b.example//{0} -o {1}\"\n"
                                "\n[HISTORY.h2]\nget = \"curl -sf file:///srv/archive/{0} -o {1}\"\n"));
    free(out);

    /* A HISTORY table of the operator's, or a validator with HISTORY: none added. */
    out = generate(GO_TEST_CONFIG "[HISTORY.local]\nget = \"cp /arch/{0} {1}\"\n", TESTNET, &p);
    assert_null(strstr(out, "HISTORY.h0"));
    free(out);
    out = generate(GO_TEST_CONFIG "HISTORY = \"curl -sf https://h/{0} -o {1}\"\n", TESTNET, &p);
    assert_null(strstr(out, "HISTORY.h0"));
    free(out);
    /* A validator's empty HISTORY does not count. */
    out = generate(GO_TEST_CONFIG "HISTORY = \"\"\n", TESTNET, &p);
    assert_non_null(strstr(out, "[HISTORY.h0]"));
    free(out);
}

static void test_generate_version_dependent_defaults(void **state)
{
    (void)state;
    cs_coretoml_params p = full_params();
    p.core_major = 22;
    p.core_minor = 1;
    p.core_protocol = 22;
    char *out = generate(GO_TEST_CONFIG, TESTNET, &p);
    assert_null(strstr(out, "BUCKETLIST_DB_MEMORY_FOR_CACHING"));
    assert_null(strstr(out, "BACKFILL_RESTORE_META"));
    assert_null(strstr(out, "EMIT_CLASSIC_EVENTS"));
    assert_non_null(strstr(out, "ENABLE_SOROBAN_DIAGNOSTIC_EVENTS = true\n"));
    assert_null(strstr(out, "CATCHUP_COMPLETE"));
    free(out);

    p.core_minor = 2;
    p.catchup_complete = true;
    out = generate(GO_TEST_CONFIG, TESTNET, &p);
    assert_non_null(strstr(out, "BUCKETLIST_DB_MEMORY_FOR_CACHING = 0\n"));
    assert_non_null(strstr(out, "CATCHUP_COMPLETE = true\n"));
    free(out);

    p.core_major = p.core_minor = 0; /* unknown build: the SDK leaves it out */
    out = generate(GO_TEST_CONFIG, TESTNET, &p);
    assert_null(strstr(out, "BUCKETLIST_DB_MEMORY_FOR_CACHING"));
    free(out);
}

static void test_generate_escapes_the_passphrase(void **state)
{
    (void)state;
    cs_coretoml_params p = full_params();
    p.network_passphrase = "a \"quoted\" \\ pass";
    char *out = generate(QUORUM, p.network_passphrase, &p);
    assert_non_null(strstr(out, "NETWORK_PASSPHRASE = \"a \\\"quoted\\\" \\\\ pass\"\n"));
    free(out);
}

/* ---- `stellar-core version` ----------------------------------------------------------------- */

static void test_build_version(void **state)
{
    (void)state;
    static const struct {
        const char *line;
        int major, minor;
    } cases[] = {
        {"stellar-core 22.1.0 (fake)", 22, 1},
        {"v23.0.1-ea0b1c4", 23, 0},
        {"stellar-core 22.2.0-rc1 (b3e7d2f)", 22, 2},
        {"abc.22.3", 22, 3},
        {"x 7.b", 7, 0},
        {"no version here", 0, 0},
        {"stellar-core 22", 0, 0},
        {"abc.", 0, 0},
        {"", 0, 0},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        int major = -1, minor = -1;
        cs_coretoml_build_version(cases[i].line, &major, &minor);
        if (major != cases[i].major || minor != cases[i].minor)
            fail_msg("%s: got %d.%d want %d.%d", cases[i].line, major, minor, cases[i].major, cases[i].minor);
    }
}

static void test_protocol_version(void **state)
{
    (void)state;
    unsigned proto = 0;
    cs_err err = {0};
    assert_int_equal(cs_coretoml_protocol_version("stellar-core 23.0.1 (x)\n  ledger protocol version: 23\n"
                                                  "rust version: 1.79\n",
                                                  &proto, &err),
                     0);
    assert_int_equal(proto, 23);
    assert_int_equal(cs_coretoml_protocol_version("v\nledger protocol version: 22\r\n", &proto, &err), 0);
    assert_int_equal(proto, 22);
    assert_int_equal(cs_coretoml_protocol_version("stellar-core 22.1.0 (fake)\n", &proto, &err), -1);
    assert_string_equal(err.msg, "error parsing protocol version from stellar-core output");
    assert_int_equal(cs_coretoml_protocol_version("ledger protocol version: x\n", &proto, &err), -1);
    assert_string_equal(err.msg,
                        "error parsing protocol version from stellar-core output: strconv.Atoi: parsing \"\": invalid syntax");
    /* Anchored at the line start (after blanks). */
    assert_int_equal(cs_coretoml_protocol_version("the ledger protocol version: 23\n", &proto, &err), -1);
}

/* fuzz_toml: a key cut off at the end of the input ("d.") named the byte past the buffer in its
 * message. The reader takes any buffer, so it must not look past len. */
static void test_toml_key_at_end_of_input(void **state)
{
    (void)state;
    static const char *const texts[] = {"d.", "[a.", "x = {k.", "[[", "a.b. "};
    for (size_t i = 0; i < sizeof texts / sizeof texts[0]; i++) {
        size_t n = strlen(texts[i]);
        char *exact = malloc(n); /* no NUL after it: ASan flags any read past n */
        assert_non_null(exact);
        memcpy(exact, texts[i], n);
        cs_toml doc;
        cs_err err = {0};
        assert_int_equal(cs_toml_read(&doc, exact, n, &err), -1);
        assert_int_equal(err.kind, CS_TOML_ERR_SYNTAX);
        assert_string_equal(err.msg, "line 1: expected a key");
        assert_int_equal(doc.n, 0);
        free(exact);
    }
}

/* An empty quoted key ("" = 1) is a key named "", although its name buffer never grew (an empty
 * cs_strbuf holds no allocation; taking it must still give ""). */
static void test_toml_empty_quoted_key(void **state)
{
    (void)state;
    static const char text[] = "\"\" = 1\n'' . \"\" = 2\n";
    cs_toml doc;
    cs_err err = {0};
    assert_int_equal(cs_toml_read(&doc, text, sizeof text - 1, &err), 0);
    assert_int_equal(doc.n, 2);
    assert_string_equal(doc.items[0].name, "");
    assert_string_equal(doc.items[1].name, ".");
    assert_int_equal(doc.items[1].v.i, 2);
    cs_toml_free(&doc);
    expect_refusal("\"\" = 1\n", TESTNET,
                   "could not unmarshal captive core toml: these fields are not supported by captive core: [\"\"]");
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_peek_accepts),
        cmocka_unit_test(test_peek_refuses),
        cmocka_unit_test(test_parse_go_test_config),
        cmocka_unit_test(test_parse_syntax_coverage),
        cmocka_unit_test(test_parse_syntax_errors),
        cmocka_unit_test(test_refused_keys),
        cmocka_unit_test(test_types),
        cmocka_unit_test(test_passphrase_mismatch),
        cmocka_unit_test(test_quorum_required),
        cmocka_unit_test(test_validator_checks),
        cmocka_unit_test(test_generate_go_test_config),
        cmocka_unit_test(test_generate_defaults_only_where_absent),
        cmocka_unit_test(test_generate_inserts_before_the_first_table),
        cmocka_unit_test(test_generate_history_tables),
        cmocka_unit_test(test_generate_version_dependent_defaults),
        cmocka_unit_test(test_generate_escapes_the_passphrase),
        cmocka_unit_test(test_build_version),
        cmocka_unit_test(test_protocol_version),
        cmocka_unit_test(test_toml_key_at_end_of_input),
        cmocka_unit_test(test_toml_empty_quoted_key),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
