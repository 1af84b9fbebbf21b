/* SPDX-License-Identifier: Apache-2.0 */
/* An S3-compatible bucket as a lake's store (corestreamd/lake/lakes3.h) against a real
 * S3-compatible server on 127.0.0.1: s3rver (an npm package scripts/setup.sh installs under
 * .cache/s3rver), started here on an ephemeral port with a bucket of its own. Objects are put,
 * fetched and looked for under a prefix, every request signed by libcurl (AWS SigV4, the payload's
 * SHA-256 in x-amz-content-sha256, which the server requires); an unknown access key, a bad URL
 * and missing credentials are refused with their causes. (s3rver checks the access key and the
 * request's form, not the V4 signature's bytes.) */
#include <stdarg.h>
#include <setjmp.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "corestreamd/lake/lakes3.h"
#include "support/procharness.h"
#include "support/s3rver.h"
#include "support/tmpdir.h"
#include "support/wait.h"

#ifndef CS_S3RVER
#error "CS_S3RVER must name the s3rver program"
#endif

typedef struct fixture {
    cs_tmpdir dir;
    cs_proc s3;
    char endpoint[64];
} fixture;

static int teardown(void **state)
{
    fixture *f = *state;
    cs_proc_stop(&f->s3, SIGTERM, 10000);
    cs_proc_free(&f->s3);
    int rc = cs_tmpdir_remove(&f->dir);
    free(f);
    return rc;
}

static int setup(void **state)
{
    fixture *f = calloc(1, sizeof *f);
    if (!f || cs_tmpdir_make(&f->dir, "lakes3") != 0) {
        free(f);
        return -1;
    }
    *state = f;
    char data[PATH_MAX];
    if ((size_t)snprintf(data, sizeof data, "%s/s3", f->dir.path) >= sizeof data ||
        cs_s3rver_start(&f->s3, CS_S3RVER, data, "lake", f->endpoint, sizeof f->endpoint) != 0) {
        teardown(state);
        return -1;
    }
    return 0;
}

static cs_s3 *open_ok(const char *url)
{
    cs_s3 *s = NULL;
    cs_err err = {0};
    if (cs_s3_open(&s, url, &err) != 0)
        fail_msg("open %s: %s", url, err.msg);
    return s;
}

static void objects_put_fetched_and_looked_for(void **state)
{
    fixture *f = *state;
    cs_s3 *s = open_ok("s3://lake/pubnet/");
    char name[200];
    snprintf(name, sizeof name, "s3://lake/pubnet at %s", f->endpoint);
    assert_string_equal(cs_s3_name(s), name);
    const char *key = "ledgers/FCD285FF--53312000-53375999/FCD285FF--53312000.xdr.zst";
    uint8_t obj[3000];
    for (size_t i = 0; i < sizeof obj; i++)
        obj[i] = (uint8_t)(i * 7);
    cs_err err = {0};
    assert_int_equal(cs_s3_exists(s, key, &err), 1);
    if (cs_s3_put(s, key, obj, sizeof obj, "application/zstd", &err) != 0)
        fail_msg("put: %s", err.msg);
    assert_int_equal(cs_s3_exists(s, key, &err), 0);
    uint8_t *got = NULL;
    size_t n = 0;
    assert_int_equal(cs_s3_get(s, key, 1 << 20, &got, &n, &err), 0);
    assert_int_equal(n, sizeof obj);
    assert_memory_equal(got, obj, n);
    free(got);
    assert_int_equal(cs_s3_get(s, "ledgers/none.xdr.zst", 1 << 20, &got, &n, &err), 1);
    /* The prefix is part of the key the bucket holds. */
    cs_s3 *root = open_ok("s3://lake");
    assert_int_equal(cs_s3_exists(root, "pubnet/ledgers/FCD285FF--53312000-53375999/FCD285FF--53312000.xdr.zst", &err),
                     0);
    assert_int_equal(cs_s3_put(root, ".config.json", "{}", 2, "application/json", &err), 0);
    assert_int_equal(cs_s3_get(root, ".config.json", 1 << 20, &got, &n, &err), 0);
    assert_int_equal(n, 2);
    free(got);
    cs_s3_free(root);
    cs_s3_free(s);
}

static void refusals_name_their_cause(void **state)
{
    (void)state;
    cs_s3 *s = NULL;
    cs_err err = {0};
    assert_int_equal(cs_s3_open(&s, "https://lake/x", &err), -1);
    assert_int_equal(err.kind, CS_S3_ERR_CONFIG);
    assert_string_equal(err.msg, "--lake-url https://lake/x: not s3://bucket[/prefix]");
    setenv("AWS_ACCESS_KEY_ID", "NOBODY", 1);
    s = open_ok("s3://lake");
    assert_int_equal(cs_s3_put(s, "a", "x", 1, NULL, &err), -1);
    assert_int_equal(err.kind, CS_S3_ERR_DENIED);
    assert_string_equal(err.msg, "s3: PUT a: HTTP 403: InvalidAccessKeyId");
    cs_s3_free(s);
    unsetenv("AWS_ACCESS_KEY_ID");
    unsetenv("AWS_SECRET_ACCESS_KEY");
    setenv("AWS_SHARED_CREDENTIALS_FILE", "/nonexistent/credentials", 1);
    assert_int_equal(cs_s3_open(&s, "s3://lake", &err), -1);
    assert_int_equal(err.kind, CS_S3_ERR_CONFIG);
    assert_string_equal(err.msg, "--lake-url: no AWS credentials: set AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY, or "
                                 "a [default] profile in /nonexistent/credentials");
    unsetenv("AWS_SHARED_CREDENTIALS_FILE");
}

/* A credentials file's profile, as the AWS tools read it. */
static void credentials_from_a_profile(void **state)
{
    fixture *f = *state;
    unsetenv("AWS_ACCESS_KEY_ID");
    unsetenv("AWS_SECRET_ACCESS_KEY");
    char path[PATH_MAX];
    assert_true((size_t)snprintf(path, sizeof path, "%s/credentials", f->dir.path) < sizeof path);
    FILE *fp = fopen(path, "w");
    assert_non_null(fp);
    fputs("[default]\naws_access_key_id = NOBODY\naws_secret_access_key = x\n\n[lake]\n"
          "aws_access_key_id = S3RVER\naws_secret_access_key = S3RVER\n",
          fp);
    fclose(fp);
    setenv("AWS_SHARED_CREDENTIALS_FILE", path, 1);
    setenv("AWS_PROFILE", "lake", 1);
    cs_s3 *s = open_ok("s3://lake");
    cs_err err = {0};
    if (cs_s3_put(s, "profile", "y", 1, NULL, &err) != 0)
        fail_msg("put with the lake profile: %s", err.msg);
    cs_s3_free(s);
    unsetenv("AWS_PROFILE");
    unsetenv("AWS_SHARED_CREDENTIALS_FILE");
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test_setup_teardown(objects_put_fetched_and_looked_for, setup, teardown),
        cmocka_unit_test_setup_teardown(refusals_name_their_cause, setup, teardown),
        cmocka_unit_test_setup_teardown(credentials_from_a_profile, setup, teardown),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
