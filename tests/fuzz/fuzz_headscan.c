/* libFuzzer target for the request-head scanner (corestreamd/net/headscan.h), which sees a
 * stranger's bytes before anything else does.
 *
 * Input: byte 0 picks the limits' scale, the rest is what a peer sends. Checked: the verdict and
 * head length are the same fed whole as fed in the pieces byte 0 also picks; a complete head is
 * within the input and head_max and ends in an empty line (LF LF or LF CR LF), with no earlier
 * empty line; more than head_max bytes are never CS_HEAD_MORE.
 *
 * Build and run: tests/fuzz/CMakeLists.txt (clang, -DCS_FUZZ=ON). */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "corestreamd/net/headscan.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 1)
        return 0;
    unsigned sel = data[0];
    const char *buf = (const char *)data + 1;
    size_t len = size - 1;
    cs_head_limits lim = {.uri_max = 8 + (sel & 7) * 64,
                          .head_max = 16 + ((sel >> 3) & 3) * 512,
                          .fields_max = 1 + ((sel >> 5) & 7) * 4,
                          .pairs_max = 1 + (sel & 3) * 8};
    size_t step = 1 + (sel % 5);

    cs_head_scan a = CS_HEAD_SCAN_INIT, b = CS_HEAD_SCAN_INIT;
    size_t whole_len = 0, piece_len = 0;
    cs_head_verdict whole = cs_head_scan_feed(&a, buf, len, &lim, &whole_len);
    cs_head_verdict piece = CS_HEAD_MORE;
    for (size_t i = 0; i < len && piece == CS_HEAD_MORE;) {
        i = i + step > len ? len : i + step;
        piece = cs_head_scan_feed(&b, buf, i, &lim, &piece_len);
    }
    if (len == 0)
        piece = cs_head_scan_feed(&b, buf, 0, &lim, &piece_len);
    if (whole != piece || whole_len != piece_len)
        abort();
    if (whole == CS_HEAD_DONE) {
        if (whole_len > len || whole_len > lim.head_max || whole_len < 2 || buf[whole_len - 1] != '\n')
            abort();
        if (buf[whole_len - 2] != '\n' && !(whole_len >= 3 && buf[whole_len - 2] == '\r' && buf[whole_len - 3] == '\n'))
            abort();
        /* No empty line ends the head earlier (after the request line). */
        const char *first = memchr(buf, '\n', whole_len);
        for (const char *p = first; p && p < buf + whole_len - 1;) {
            const char *q = memchr(p + 1, '\n', (size_t)(buf + whole_len - (p + 1)));
            if (!q)
                break;
            size_t n = (size_t)(q - p - 1);
            if (q != buf + whole_len - 1 && (n == 0 || (n == 1 && p[1] == '\r')))
                abort();
            p = q;
        }
    }
    if (whole == CS_HEAD_MORE && len > lim.head_max)
        abort();
    return 0;
}
