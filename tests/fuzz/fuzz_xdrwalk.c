/* SPDX-License-Identifier: Apache-2.0 */
/* libFuzzer target for the pipe tap's parsing: the LedgerCloseMeta prefix walk on arbitrary
 * bytes, and the record-marked frame reader fed the same bytes through a real pipe.
 *
 * Input: the walk gets all of it. The reader takes byte 0 as knobs (read-ahead buffer size, a
 * small frame cap, a pre-fired cancel) and byte 1 as the body piece size; the rest is what the
 * pipe carries, and each frame's prefix is walked as the tap does. Properties checked beyond "no crash, no out-of-bounds read":
 *  - the walk's answer never depends on bytes past CS_XDR_SEQ_PREFIX_WORST, and a walk that
 *    succeeds on n bytes succeeds with the same seq on any longer buffer;
 *  - the reader returns each frame's bytes exactly, in order, prefix included, never more than
 *    the marker declared and never a short body without an error.
 *
 * Build and run: tests/fuzz/CMakeLists.txt (clang, -DCS_FUZZ=ON), which builds this file twice:
 * fuzz_xdrwalk with -DCS_FUZZ_ONLY=1 (the walk alone) and fuzz_framereader with -DCS_FUZZ_ONLY=2
 * (the reader, each frame's prefix walked too). Without the define one target does both. */
#include <fcntl.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common/cancel.h"
#include "corestreamd/sources/pipe/framereader.h"
#include "corestreamd/sources/source.h"
#include "corestreamd/sources/pipe/xdrwalk.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/* The pipe holds the whole input before the reader starts, so it never blocks. */
#define MAX_PIPE_INPUT 65536

static cs_cancel live, fired;
static bool ready;

static void check(bool ok, const char *what)
{
    if (!ok) {
        fprintf(stderr, "fuzz_xdrwalk: property violated: %s\n", what);
        abort();
    }
}

__attribute__((unused)) static void fuzz_walk(const uint8_t *data, size_t size)
{
    /* An exact-size heap copy, so ASan sees a read one past the end. */
    uint8_t *copy = malloc(size ? size : 1);
    check(copy != NULL, "malloc");
    memcpy(copy, data, size);
    uint32_t seq = 0;
    cs_err err;
    int rc = cs_xdr_ledger_seq(copy, size, &seq, &err);
    check(rc == 0 || rc == -1, "walk returns 0 or -1");
    if (rc != 0)
        check(strncmp(err.msg, "xdr: ", 5) == 0, "walk errors start with \"xdr: \"");
    if (size > CS_XDR_SEQ_PREFIX_WORST) {
        uint32_t seq2 = 0;
        int rc2 = cs_xdr_ledger_seq(copy, CS_XDR_SEQ_PREFIX_WORST, &seq2, &err);
        check(rc2 == rc, "the verdict is decided within the worst-case prefix");
        if (rc == 0)
            check(seq2 == seq, "the seq is decided within the worst-case prefix");
    }
    free(copy);
}

__attribute__((unused)) static void fuzz_reader(const uint8_t *data, size_t size)
{
    if (size < 2)
        return;
    uint8_t knobs = data[0], piece_knob = data[1];
    data += 2;
    size -= 2;
    if (size > MAX_PIPE_INPUT)
        size = MAX_PIPE_INPUT;
    static const size_t bufsizes[] = {1, 2, 3, 4, 5, 7, 64, 4096, 65536};
    size_t bufsize = bufsizes[(knobs & 0x0f) % (sizeof bufsizes / sizeof bufsizes[0])];
    uint32_t max_frame = (knobs & 0x10) ? 5000 : 0;
    cs_cancel *cancel = (knobs & 0x20) ? &fired : &live;
    size_t piece = (size_t)piece_knob * 37 + 1;

    int p[2];
    check(pipe2(p, O_CLOEXEC) == 0, "pipe2");
    (void)fcntl(p[1], F_SETPIPE_SZ, MAX_PIPE_INPUT);
    size_t off = 0;
    while (off < size) {
        ssize_t k = write(p[1], data + off, size - off);
        check(k > 0, "pipe write");
        off += (size_t)k;
    }
    close(p[1]);

    cs_frame_reader *r;
    cs_err err;
    check(cs_frame_reader_new(&r, p[0], cancel, bufsize, max_frame, &err) == 0, "reader");
    uint8_t *body = malloc(piece);
    check(body != NULL, "malloc");
    size_t at = 0; /* where the current frame starts in data */
    for (;;) {
        uint32_t len;
        int rc = cs_frame_reader_next(r, &len, &err);
        if (rc == 0) {
            check(at == size, "a clean end only at a frame boundary");
            break;
        }
        if (rc < 0)
            break;
        check(at + 4 <= size, "a marker needs four bytes");
        at += 4;
        const uint8_t *prefix;
        size_t n;
        if (cs_frame_reader_prefix(r, &prefix, &n, &err) != 0) {
            check(err.kind == CS_FRAME_ERR_SHORT || err.kind == CS_ERR_CANCELLED, "prefix error kind");
            break;
        }
        check(n == (len < CS_FRAME_PREFIX_MAX ? len : CS_FRAME_PREFIX_MAX), "prefix length");
        check(memcmp(prefix, data + at, n) == 0, "prefix bytes");
        uint32_t seq;
        (void)cs_xdr_ledger_seq(prefix, n, &seq, &err);
        /* Serve the body, except that every third frame is left for next() to skip. */
        if ((piece_knob % 3) == 2 && len % 3 == 0) {
            at += len;
            continue;
        }
        uint64_t got = 0;
        bool failed = false;
        for (;;) {
            ssize_t k = cs_frame_reader_read(r, body, piece, &err);
            if (k < 0) {
                check(err.kind == CS_FRAME_ERR_SHORT || err.kind == CS_ERR_CANCELLED, "body error kind");
                failed = true;
                break;
            }
            if (k == 0)
                break;
            check((size_t)k <= piece, "a read fits the caller's buffer");
            check(at + got + (size_t)k <= size, "a read stays inside the input");
            check(memcmp(body, data + at + got, (size_t)k) == 0, "body bytes");
            got += (uint64_t)k;
            check(got <= len, "never more than the marker declared");
        }
        if (failed) {
            check(at + len > size || cancel == &fired, "truncation only when the input is short");
            break;
        }
        check(got == len, "a body that ends cleanly is whole");
        check(cs_frame_reader_remaining(r) == 0, "nothing remains after the body");
        at += len;
    }
    free(body);
    cs_frame_reader_free(r);
    close(p[0]);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (!ready) {
        if (cs_cancel_init(&live) != 0 || cs_cancel_init(&fired) != 0)
            abort();
        cs_cancel_fire(&fired);
        ready = true;
    }
#if !defined(CS_FUZZ_ONLY) || CS_FUZZ_ONLY == 1
    fuzz_walk(data, size);
#endif
#if !defined(CS_FUZZ_ONLY) || CS_FUZZ_ONLY == 2
    fuzz_reader(data, size);
#endif
    return 0;
}
