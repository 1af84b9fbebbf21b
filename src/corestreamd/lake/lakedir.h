/* SPDX-License-Identifier: Apache-2.0 */
/* The lake in a directory (--lake-dir, docs/LAKE.md "Export to a directory"): the files a static
 * HTTP server serves at /lake/ to be the same lake as corestreamd's own /lake/:
 *
 *   <dir>/config.json                          SEP-54's config (ledgersPath "/lake/ledgers")
 *   <dir>/ledgers/.config.json                 the Go SDK's manifest, at its datastore's root
 *   <dir>/ledgers/<partition>/<batch>.xdr.zst  each batch's object, at its key (lakekey.h)
 *   <dir>/ledgers/<partition>/<batch>.xdr.zst.sig  a signed batch's signatures, beside it
 *
 * Every file is written to `.<name>.tmp` in its own directory (a name neither the SDK's ledger
 * file pattern nor a listing shows), flushed, then linked into place with renameat2's
 * RENAME_NOREPLACE (link and unlink where the file system has no such rename), and its directory
 * flushed; a directory made is flushed into its parent. So a reader never sees part of a file,
 * a crash leaves at most a temporary file (removed by the next open's settle), and nothing in
 * place is ever replaced: an object (or .sig) already at a key is compared instead (cs_lake_dir_put,
 * cs_lake_dir_put_sig).
 *
 * Threads: open, settle and close on one thread (the daemon's main thread), put on one thread at
 * a time (the exporter's), never concurrently with settle or close. */
#ifndef CS_LAKE_LAKEDIR_H
#define CS_LAKE_LAKEDIR_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "common/err.h"
#include "corestreamd/lake/lakekey.h"
#include "corestreamd/lake/lakestore.h" /* cs_lake_put_outcome */

/* The directory under <dir> that holds the objects: the last part of CS_LAKE_LEDGERS_PATH. */
#define CS_LAKE_DIR_LEDGERS "ledgers"

enum {
    /* `lake: directory "<dir>" …`: the directory cannot be the lake (it overlaps the ring, its
     * config is another lake's), or cannot be made or read. Fails the start. */
    CS_LAKE_DIR_ERR_START = 1,
    /* `lake: write "<path>": <strerror>` (also create, flush, publish, read): a system call failed;
     * nothing in place changed, and a later call may succeed. */
    CS_LAKE_DIR_ERR_IO = 2,
};

typedef struct cs_lake_dir cs_lake_dir;

/* Makes dir (mkdir -p; the only change it makes) and looks at what it holds, without writing:
 * - first, dir must not overlap ring_dir (the ring's directory, which removes files it did not
 *   write): neither inside it nor holding it as <dir>/ledgers or below, compared by real paths
 *   (of dir's nearest existing ancestor while it does not exist), so nothing is made there:
 *   `lake: directory "<dir>" overlaps the ring's "<ring_dir>": give --lake-dir outside
 *   --data-dir's ledgers` (the data directory itself overlaps: its ledgers are the ring);
 * - config.json and ledgers/.config.json, when present, must be this lake's
 *   (cs_lake_config_agrees): `lake: directory "<dir>": "<file>" is another lake's: <difference>;
 *   give another --lake-dir, or the flags it was made with`;
 * - the newest object in place (cs_lake_dir_newest): the partition directories are read newest
 *   first, down to the first that holds an object; names that are not exactly a key of this
 *   layout are ignored (left as they are). Temporary files met on the way are left for settle.
 * A system call that fails is `lake: directory "<dir>": <what>: <strerror>`. All errors are
 * CS_LAKE_DIR_ERR_START. passphrase is copied; l must pass cs_lake_layout_check. */
int cs_lake_dir_open(cs_lake_dir **out, const char *dir, const char *ring_dir, const char *passphrase,
                     const cs_lake_layout *l, cs_err *err);

/* The newest batch the directory held at open (true), or false when it held none. */
bool cs_lake_dir_newest(const cs_lake_dir *d, cs_lake_batch *out);

/* The first writes, once the start has passed every check: ledgers/ made, config.json and
 * .config.json written where absent, the temporary files open found removed (INFO
 * `lake export: removed leftover temporary files` dir files). CS_LAKE_DIR_ERR_IO on failure
 * (`lake: write "<path>": …`); call again to retry. */
int cs_lake_dir_settle(cs_lake_dir *d, cs_err *err);


/* Writes batch b's object (len bytes) at its key, making its partition directory when missing.
 * Never replaces a file in place: when the key is taken, the file there is compared with obj
 * (bytes, then decompressed content) and left as it is, outcome SAME or OTHER (why, a
 * NUL-terminated text of at most why_len bytes: `its content differs from the ring's batch A-B`,
 * `it is not a regular file`, `it is not a zstd object: <zstd error>`). -1 with
 * CS_LAKE_DIR_ERR_IO when a system call failed (`lake: write "<path>": No space left on device`,
 * …, create, flush, publish, read): the temporary file is removed when it can be, nothing in place
 * changed. */
int cs_lake_dir_put(cs_lake_dir *d, cs_lake_batch b, const uint8_t *obj, size_t len, cs_lake_put_outcome *outcome,
                    char *why, size_t why_len, cs_err *err);

/* Writes batch b's signature object (len bytes of cs_lake_sig_build) beside its object, at
 * <key>.sig, as cs_lake_dir_put writes an object (temporary file, flush, no-replace link, flush of
 * the directory; its partition directory made when missing). When <key>.sig is taken, the file
 * there is compared byte for byte and left as it is: SAME for exactly these bytes, else OTHER
 * (why: `its bytes differ from the ring's signatures of batch A-B`, `it is not a regular file`).
 * Errors as cs_lake_dir_put's, the path ending in .sig. */
int cs_lake_dir_put_sig(cs_lake_dir *d, cs_lake_batch b, const uint8_t *sig, size_t len, cs_lake_put_outcome *outcome,
                        char *why, size_t why_len, cs_err *err);

/* Whether batch b's <key>.sig is in place (any kind of file): 1 yes, 0 no (nor its partition
 * directory), -1 with CS_LAKE_DIR_ERR_IO (`lake: look for "<path>.sig": <strerror>`). */
int cs_lake_dir_has_sig(cs_lake_dir *d, cs_lake_batch b, cs_err *err);

/* The path of batch b's object, <dir>/ledgers/<key>, in buf[len] (for log lines). */
void cs_lake_dir_object_path(const cs_lake_dir *d, cs_lake_batch b, char *buf, size_t len);

/* The directory as given. */
const char *cs_lake_dir_path(const cs_lake_dir *d);

/* Closes the directory's descriptors and frees. NULL is a no-op. */
void cs_lake_dir_close(cs_lake_dir *d);

#endif
