/* SPDX-License-Identifier: Apache-2.0 */
/* Test support: the daemon's log captured in a temporary file for the length of a test group, so
 * cases can count the lines they caused. Not thread-safe against a concurrent stop; counting
 * while the server logs is fine (lines are written whole). */
#ifndef CS_TESTS_SUPPORT_LOGCAPTURE_H
#define CS_TESTS_SUPPORT_LOGCAPTURE_H

/* Sends the log to a fresh temporary file at min_level (CS_LOG_DEBUG, ...). 0, or -1. */
int cs_logcap_start(int min_level);
/* How many lines logged since cs_logcap_start contain needle. */
int cs_logcap_count(const char *needle);
/* The log back to stdout at INFO; the file is removed. */
void cs_logcap_stop(void);

#endif
