/* SPDX-License-Identifier: Apache-2.0 */
/* s3rver, the npm S3-compatible server scripts/setup.sh installs under .cache/s3rver, run for a
 * test: on 127.0.0.1 at an ephemeral port, keeping its objects as files under a directory of the
 * test's (<dir>/<bucket>/<key>._S3rver_object), with one bucket, and the AWS_* environment set so
 * that lakes3.h's client (the test's, and a daemon the test starts) finds it with s3rver's own
 * account. (s3rver checks the access key and the requests' form, not the V4 signature's bytes.) */
#ifndef CS_TEST_S3RVER_H
#define CS_TEST_S3RVER_H

#include <stddef.h>

#include "support/procharness.h"

/* Starts prog (CS_S3RVER) in p with its data in dir and bucket configured, waits for it to listen
 * (WAIT_MS), writes its endpoint (http://127.0.0.1:<port>) into endpoint[len] and sets
 * AWS_ENDPOINT_URL, AWS_ACCESS_KEY_ID, AWS_SECRET_ACCESS_KEY and AWS_REGION (AWS_SESSION_TOKEN and
 * AWS_ENDPOINT_URL_S3 unset). 0, or -1 saying why on stderr (prog missing: run scripts/setup.sh;
 * s3rver's log when it did not start); p is then for the caller to stop and free as well. */
int cs_s3rver_start(cs_proc *p, const char *prog, const char *dir, const char *bucket, char *endpoint, size_t len);

#endif
