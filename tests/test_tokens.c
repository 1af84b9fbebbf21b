/* SPDX-License-Identifier: Apache-2.0 */
/* The --auth-tokens file and the bearer lookup (issue 10): what a file may hold, the errors that
 * name its line, constant-time matching by digest, and the Authorization header's form. */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "corestreamd/net/tokens.h"

#define T1 "0123456789abcdefghijklmnopqrstuvwxyz"
#define T2 "ZYXWVUTSRQPONMLKJIHGFEDCBA9876543210-._~+/=="

static cs_tokens *parse_ok(const char *text, size_t want)
{
    cs_tokens *t;
    cs_err err;
    if (cs_tokens_parse(&t, text, strlen(text), &err) != 0)
        fail_msg("%s", err.msg);
    assert_int_equal(cs_tokens_count(t), want);
    return t;
}

static void parse_err(const char *text, const char *want)
{
    cs_tokens *t = (cs_tokens *)1;
    cs_err err;
    assert_int_equal(cs_tokens_parse(&t, text, strlen(text), &err), -1);
    assert_null(t);
    assert_string_equal(err.msg, want);
}

static void test_file_format(void **state)
{
    (void)state;
    cs_tokens *t = parse_ok("# operators\n\n  rpc-a " T1 "\r\n\trpc-b\t\t" T2 "  \n# end", 2);
    uint8_t d[CS_TOKEN_DIGEST_LEN];
    const char *name = cs_tokens_match(t, T1, strlen(T1), d);
    assert_non_null(name);
    assert_string_equal(name, "rpc-a");
    assert_true(cs_tokens_has(t, d));
    assert_string_equal(cs_tokens_match(t, T2, strlen(T2), NULL), "rpc-b");
    assert_null(cs_tokens_match(t, T1, strlen(T1) - 1, NULL)); /* a prefix is not the token */
    assert_null(cs_tokens_match(t, T1 "x", strlen(T1) + 1, NULL));
    cs_tokens_free(t);
    t = parse_ok("solo " T1, 1); /* no newline at the end */
    cs_tokens_free(t);
}

static void test_file_errors(void **state)
{
    (void)state;
    parse_err("", "no tokens");
    parse_err("# only comments\n\n", "no tokens");
    parse_err("rpc-a\n", "line 1: want \"name token\"");
    parse_err("\nrpc-a " T1 " extra\n", "line 2: want \"name token\"");
    parse_err("rpc-a short\n", "line 1: token for \"rpc-a\" is 5 characters; 32 to 512 are required");
    parse_err("rpc-a " T1 "!\n",
              "line 1: token for \"rpc-a\" has a character outside A-Z a-z 0-9 - . _ ~ + / (and trailing =)");
    parse_err("rpc-a =" T1 "\n",
              "line 1: token for \"rpc-a\" has a character outside A-Z a-z 0-9 - . _ ~ + / (and trailing =)");
    parse_err("rpc-a " T1 "\nrpc-a " T2 "\n", "line 2: name \"rpc-a\" appears twice");
    parse_err("rpc-a " T1 "\nrpc-b " T1 "\n", "line 2: the token for \"rpc-b\" is already another name's");
    char longname[160];
    memset(longname, 'n', 65);
    snprintf(longname + 65, sizeof longname - 65, " " T1);
    parse_err(longname, "line 1: a name is 1 to 64 printable ASCII characters");
}

static void test_load_names_the_file(void **state)
{
    (void)state;
    cs_tokens *t;
    cs_err err;
    assert_int_equal(cs_tokens_load(&t, "/nonexistent/tokens", &err), -1);
    assert_string_equal(err.msg, "--auth-tokens /nonexistent/tokens: no such file or directory");
    char path[] = "/tmp/cs-tokens-XXXXXX";
    int fd = mkstemp(path);
    assert_true(fd >= 0);
    FILE *f = fdopen(fd, "w");
    fputs("x 1\n", f);
    fclose(f);
    assert_int_equal(cs_tokens_load(&t, path, &err), -1);
    char want[256];
    snprintf(want, sizeof want, "--auth-tokens %s: line 1: token for \"x\" is 1 characters; 32 to 512 are required",
             path);
    assert_string_equal(err.msg, want);
    remove(path);
}

static void test_bearer_header(void **state)
{
    (void)state;
    const char *tok;
    size_t len;
    assert_true(cs_bearer_token("Bearer abc", &tok, &len));
    assert_int_equal(len, 3);
    assert_memory_equal(tok, "abc", 3);
    assert_true(cs_bearer_token("  bEaReR \t abc  ", &tok, &len));
    assert_int_equal(len, 3);
    assert_false(cs_bearer_token("Bearer", &tok, &len));
    assert_false(cs_bearer_token("Bearer   ", &tok, &len));
    assert_false(cs_bearer_token("Basic abc", &tok, &len));
    assert_false(cs_bearer_token("Bearerabc", &tok, &len));
    assert_false(cs_bearer_token("", &tok, &len));
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_file_format),
        cmocka_unit_test(test_file_errors),
        cmocka_unit_test(test_load_names_the_file),
        cmocka_unit_test(test_bearer_header),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
