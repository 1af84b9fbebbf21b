/* SPDX-License-Identifier: Apache-2.0 */
#include "common/complevel.h"

#include <string.h>

#include "common/flags.h"
#include "common/goquote.h"

int cs_compress_level_parse(const char *text, int64_t *out, cs_err *err)
{
    if (strcmp(text, "auto") == 0) {
        *out = 0;
        return 0;
    }
    int64_t v;
    if (cs_parse_int64(text, &v) != 0) {
        char q[CS_ERR_MSG_MAX / 2];
        cs_go_quote(q, sizeof q, text);
        return cs_err_set(err, 0, "--compress-level %s is not auto or an integer", q);
    }
    if (v == 0)
        return cs_err_set(err, 0, "--compress-level 0 is not a level: use auto, or a zstd level other than 0");
    *out = v;
    return 0;
}
