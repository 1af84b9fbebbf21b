/* The lake's config.json: see lakeconfig.h. */
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

char *cs_lake_config_json(const char *passphrase, const cs_lake_layout *l, cs_err *err)
{
    cs_strbuf b = CS_STRBUF_INIT;
    cs_strbuf_puts(&b, "{\"networkPassphrase\":");
    put_json_string(&b, passphrase);
    cs_strbuf_printf(&b,
                     ",\"ledgersPath\":\"" CS_LAKE_LEDGERS_PATH "\",\"compression\":\"zstd\""
                     ",\"ledgersPerBatch\":%" PRIu32 ",\"batchesPerPartition\":%" PRIu32 "}",
                     l->ledgers_per_batch, l->batches_per_partition);
    char *text = cs_strbuf_take(&b, NULL);
    if (!text)
        cs_err_set(err, 0, "lake: config.json: out of memory");
    return text;
}

char *cs_lake_manifest_json(const char *passphrase, const cs_lake_layout *l, cs_err *err)
{
    cs_strbuf b = CS_STRBUF_INIT;
    cs_strbuf_puts(&b, "{\"networkPassphrase\":");
    put_json_string(&b, passphrase);
    cs_strbuf_printf(&b,
                     ",\"version\":\"" CS_LAKE_MANIFEST_VERSION "\",\"compression\":\"zstd\""
                     ",\"ledgersPerBatch\":%" PRIu32 ",\"batchesPerPartition\":%" PRIu32 "}",
                     l->ledgers_per_batch, l->batches_per_partition);
    char *text = cs_strbuf_take(&b, NULL);
    if (!text)
        cs_err_set(err, 0, "lake: .config.json: out of memory");
    return text;
}
