/* SPDX-License-Identifier: Apache-2.0 */
/* The lake's config.json and the SDK's .config.json, as text: see lakeconfig.h. */
#include "corestreamd/lake/lakeconfig.h"

#include <inttypes.h>

#include "common/strbuf.h"

/* s as a JSON string, quotes included. */
static void put_json_string(cs_strbuf *b, const char *s)
{
    cs_strbuf_putc(b, '"');
    for (; *s; s++) {
        unsigned char c = (unsigned char)*s;
        if (c == '"' || c == '\\') {
            cs_strbuf_putc(b, '\\');
            cs_strbuf_putc(b, (char)c);
        } else if (c < 0x20) {
            cs_strbuf_printf(b, "\\u%04x", c);
        } else {
            cs_strbuf_putc(b, (char)c);
        }
    }
    cs_strbuf_putc(b, '"');
}

/* Either file: the passphrase, the member of the file's own (second, as each writer orders it:
 * `"name":"value"`), then compression and the layout. name is the file's, for the message. */
static char *config_text(const char *passphrase, const char *own, const cs_lake_layout *l, const char *name,
                         cs_err *err)
{
    cs_strbuf b = CS_STRBUF_INIT;
    cs_strbuf_puts(&b, "{\"networkPassphrase\":");
    put_json_string(&b, passphrase);
    cs_strbuf_printf(&b,
                     ",%s,\"compression\":\"zstd\",\"ledgersPerBatch\":%" PRIu32 ",\"batchesPerPartition\":%" PRIu32
                     "}",
                     own, l->ledgers_per_batch, l->batches_per_partition);
    char *text = cs_strbuf_take(&b, NULL);
    if (!text)
        cs_err_set(err, 0, "lake: %s: out of memory", name);
    return text;
}

char *cs_lake_config_json(const char *passphrase, const cs_lake_layout *l, cs_err *err)
{
    return config_text(passphrase, "\"ledgersPath\":\"" CS_LAKE_LEDGERS_PATH "\"", l, CS_LAKE_CONFIG_NAME, err);
}

char *cs_lake_manifest_json(const char *passphrase, const cs_lake_layout *l, cs_err *err)
{
    return config_text(passphrase, "\"version\":\"" CS_LAKE_MANIFEST_VERSION "\"", l, CS_LAKE_MANIFEST_NAME, err);
}
