/* SPDX-License-Identifier: Apache-2.0 */
/* JetStream naming: stream names, run tokens, subjects, message ids (derived from the secret, and
 * the secret's file) and the resume position. */
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <setjmp.h>
#include <cmocka.h>

#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "corestreamd/jetstream/idkey.h"
#include "corestreamd/jetstream/naming.h"
#include "corestreamd/jetstream/stream.h"
#include "support/tmpdir.h"
#include "wire/ledgersig.h"
#include "wire/wire.h"

static void test_stream_names(void **state)
{
    (void)state;
    cs_err e;
    assert_int_equal(cs_js_validate_stream_name("CORESTREAM", &e), 0);
    assert_int_equal(cs_js_validate_stream_name("core_stream-2", &e), 0);
    const char *bad[] = {"", "a.b", "a*", "a>", "a b", "a/b", "012345678901234567890123456789012"};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++)
        assert_int_equal(cs_js_validate_stream_name(bad[i], &e), -1);
    assert_string_equal(e.msg, "--jetstream-stream \"012345678901234567890123456789012\" must be 1 to 32 characters "
                               "of A-Z a-z 0-9 _ -");
}

static void test_names_and_ids(void **state)
{
    (void)state;
    char run[CS_JS_NAME_MAX], other[CS_JS_NAME_MAX], buf[CS_JS_SUBJECT_MAX];
    cs_js_run_id(run, sizeof run, "synthetic", "synthetic size=204800 compressible=false chunk_size=262144");
    cs_js_run_id(other, sizeof other, "synthetic", "synthetic size=204800 compressible=true chunk_size=262144");
    assert_int_equal(strlen(run), strlen("synthetic-") + 16);
    assert_memory_equal(run, "synthetic-", 10);
    assert_string_not_equal(run, other);
    cs_js_run_id(other, sizeof other, "synthetic", "synthetic size=204800 compressible=false chunk_size=262144");
    assert_string_equal(run, other); /* the same definition is the same run */

    cs_js_subject(buf, sizeof buf, "CORESTREAM", "file-00ff", 4294967294u);
    assert_string_equal(buf, "CORESTREAM.file-00ff.4294967294");
    cs_js_run_filter(buf, sizeof buf, "CORESTREAM", "file-00ff");
    assert_string_equal(buf, "CORESTREAM.file-00ff.*");
    cs_js_stream_subjects(buf, sizeof buf, "S");
    assert_string_equal(buf, "S.>");
}

/* The id keeps its position readable and adds the HMAC-SHA256 tag: a known answer (Python's
 * hmac.new(bytes(range(32)), b"file-00ff:7:3:0", "sha256").hexdigest()[:32]); another key,
 * generation or position gives another tag; the same inputs the same id. */
static void test_msg_ids(void **state)
{
    (void)state;
    uint8_t key[CS_JS_ID_KEY_LEN], other[CS_JS_ID_KEY_LEN];
    for (int i = 0; i < CS_JS_ID_KEY_LEN; i++)
        key[i] = (uint8_t)i, other[i] = (uint8_t)i;
    other[31] ^= 1;
    char id[CS_JS_SUBJECT_MAX], again[CS_JS_SUBJECT_MAX];
    assert_int_equal(cs_js_msg_id(id, sizeof id, "file-00ff", 7, 3, key, 0), 0);
    assert_string_equal(id, "file-00ff:7:3:46a3271c2889cabc970eb8ccbf5dd61b");
    assert_int_equal(cs_js_msg_id(again, sizeof again, "file-00ff", 7, 3, key, 5), 0);
    assert_string_equal(again, "file-00ff:7:3:6e6808421a3d7352dddc46b109d62833");
    const struct {
        const char *run;
        uint32_t seq, item;
        const uint8_t *key;
    } apart[] = {{"file-00ff", 7, 3, other}, {"file-00ff", 7, 4, key}, {"file-00ff", 8, 3, key}, {"file-00fe", 7, 3, key}};
    for (size_t i = 0; i < sizeof apart / sizeof apart[0]; i++) {
        assert_int_equal(cs_js_msg_id(again, sizeof again, apart[i].run, apart[i].seq, apart[i].item, apart[i].key, 0),
                         0);
        assert_string_not_equal(strrchr(again, ':'), strrchr(id, ':'));
    }
    assert_int_equal(cs_js_msg_id(again, sizeof again, "file-00ff", 7, 3, key, 0), 0);
    assert_string_equal(again, id);

    /* The longest id fits the header room the max_payload check counts ("NATS/1.0\r\n",
     * "Nats-Msg-Id: ", the id, "\r\n\r\n"). */
    char run[CS_JS_NAME_MAX];
    cs_js_run_id(run, sizeof run, "abcdefghijklmnopqrstuvwxyz", "x");
    assert_int_equal(cs_js_msg_id(id, sizeof id, run, UINT32_MAX, UINT32_MAX, key, UINT64_MAX), 0);
    assert_int_equal(strlen(id), CS_JS_MSG_ID_MAX);
    assert_true(10 + 13 + CS_JS_MSG_ID_MAX + 4 <= CS_JS_HEADER_ROOM);
}

static void write_file(const char *path, const char *text, mode_t mode)
{
    FILE *f = fopen(path, "w");
    assert_non_null(f);
    fputs(text, f);
    assert_int_equal(fclose(f), 0);
    assert_int_equal(chmod(path, mode), 0);
}

/* The secret's file: drawn when there is none (and not written until saved), saved with mode 0600,
 * read back the same after; a file others may read, one that is not the secret's text or not a
 * file, and a directory that does not exist each fail naming the file and the cause. */
static void test_id_key_file(void **state)
{
    (void)state;
    cs_tmpdir d;
    assert_int_equal(cs_tmpdir_make(&d, "jsidkey"), 0);
    char path[4096];
    cs_tmpdir_join(&d, CS_JS_ID_KEY_FILE, path, sizeof path);
    uint8_t key[CS_JS_ID_KEY_LEN], again[CS_JS_ID_KEY_LEN];
    bool created = false;
    cs_err e;
    assert_int_equal(cs_js_id_key_load(d.path, key, &created, &e), 0);
    assert_true(created);
    struct stat st;
    assert_int_equal(stat(path, &st), -1); /* drawn, not yet written: a failing start leaves nothing */
    assert_int_equal(cs_js_id_key_save(d.path, key, &e), 0);
    assert_int_equal(stat(path, &st), 0);
    assert_int_equal(st.st_mode & 0777, 0600);
    assert_int_equal(st.st_size, 2 * CS_JS_ID_KEY_LEN + 1);
    assert_int_equal(cs_js_id_key_load(d.path, again, &created, &e), 0);
    assert_false(created);
    assert_memory_equal(key, again, sizeof key);

    char want[8192];
    assert_int_equal(chmod(path, 0644), 0);
    assert_int_equal(cs_js_id_key_load(d.path, again, &created, &e), -1);
    snprintf(want, sizeof want, "jetstream: the message id secret \"%s\" has mode 0644: others may read it (chmod 600 it)",
             path);
    assert_string_equal(e.msg, want);
    write_file(path, "00112233\n", 0600);
    assert_int_equal(cs_js_id_key_load(d.path, again, &created, &e), -1);
    snprintf(want, sizeof want, "jetstream: the message id secret \"%s\" is not 64 hex digits and a newline; move it "
                                "aside to draw a new one",
             path);
    assert_string_equal(e.msg, want);
    assert_int_equal(unlink(path), 0);
    assert_int_equal(mkdir(path, 0700), 0);
    assert_int_equal(cs_js_id_key_load(d.path, again, &created, &e), -1);
    assert_non_null(strstr(e.msg, "is not a regular file"));
    assert_int_equal(rmdir(path), 0);

    char missing[4096 + 16];
    snprintf(missing, sizeof missing, "%s/none", d.path);
    assert_int_equal(cs_js_id_key_load(missing, again, &created, &e), 0);
    assert_true(created);
    assert_int_equal(cs_js_id_key_save(missing, again, &e), -1);
    snprintf(want, sizeof want, "jetstream: write the message id secret \"%s/%s.tmp\": No such file or directory",
             missing, CS_JS_ID_KEY_FILE);
    assert_string_equal(e.msg, want);
    cs_tmpdir_remove(&d);
}

static void test_position_after(void **state)
{
    (void)state;
    uint8_t m[64];
    cs_js_pos p;
    cs_err e;
    size_t n = cs_wire_put_begin(m, 9, 123);
    assert_int_equal(cs_js_pos_after(m, n, &p, &e), 0);
    assert_int_equal(p.seq, 9);
    assert_int_equal(p.item, 1);
    n = cs_wire_append_chunk(m, 9, 4, 0, (const uint8_t *)"abc", 3);
    assert_int_equal(cs_js_pos_after(m, n, &p, &e), 0);
    assert_int_equal(p.seq, 9);
    assert_int_equal(p.item, 6);
    uint8_t sig[CS_WIRE_SIG_MAX_LEN];
    cs_sig s = {.seq = 9, .alg = CS_SIG_ALG_ED25519, .run_len = 1, .run = "r"};
    n = cs_sig_encode(&s, sig);
    assert_int_equal(cs_js_pos_after(sig, n, &p, &e), 0); /* a SIG: only its END is left */
    assert_int_equal(p.seq, 9);
    assert_int_equal(p.item, CS_JS_ITEM_END);
    n = cs_wire_put_end(m, 9, 5, 100, 0, 42);
    assert_int_equal(cs_js_pos_after(m, n, &p, &e), 0);
    assert_int_equal(p.seq, 10);
    assert_int_equal(p.item, 0);
    n = cs_wire_put_end(m, 4294967295u, 5, 100, 0, 42);
    assert_int_equal(cs_js_pos_after(m, n, &p, &e), -1);
    assert_int_equal(cs_js_pos_after((const uint8_t *)"xx", 2, &p, &e), -1);
    assert_non_null(strstr(e.msg, "jetstream: last message of the run is not a wire message: wire: "));
}

static void test_payload_check(void **state)
{
    (void)state;
    cs_err e;
    assert_int_equal(cs_js_check_payload(1048576, 262144, "nats://x:1", &e), 0);
    assert_int_equal(cs_js_check_payload(1048576, 1048437, "nats://x:1", &e), 0);
    assert_int_equal(cs_js_check_payload(1048576, 1048438, "nats://x:1", &e), -1);
    assert_string_equal(e.msg, "--chunk-size 1048438 makes JetStream messages of up to 1048577 bytes (chunk, header "
                               "and Nats-Msg-Id), over the max_payload of 1048576 bytes that nats://x:1 announces; "
                               "use --chunk-size 1048437 or less, or raise max_payload on the server");
}

int main(void)
{
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_stream_names),
        cmocka_unit_test(test_names_and_ids),
        cmocka_unit_test(test_msg_ids),
        cmocka_unit_test(test_id_key_file),
        cmocka_unit_test(test_position_after),
        cmocka_unit_test(test_payload_check),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
