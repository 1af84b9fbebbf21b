/* SPDX-License-Identifier: Apache-2.0 */
/* Counting by client address: how many connections corestreamd's accept loop holds, in total and
 * per client address, decided before any HTTP or TLS state exists for a socket; and, with caps
 * of its own, how many ring replays run (replayslots.h). An IPv4 peer is one address; an IPv6
 * peer is counted per /64 (one customer's allocation, which a single host can rotate through);
 * an IPv4-mapped IPv6 peer counts as its IPv4 address.
 *
 * Not thread-safe: each table has one owner (the accept loop; the replay slot table's mutex). */
#ifndef CS_COMMON_ADMISSION_H
#define CS_COMMON_ADMISSION_H

#include <stddef.h>
#include <stdint.h>
#include <sys/socket.h>

/* A client address as counted: 4 bytes of IPv4 or the 8-byte IPv6 /64 prefix. */
typedef struct cs_addr_key {
    uint8_t family; /* AF_INET, AF_INET6, or 0 for an address of another family (one bucket) */
    uint8_t bytes[8];
} cs_addr_key;

cs_addr_key cs_addr_key_of(const struct sockaddr *sa);

/* "192.0.2.7" or "2001:db8:1:2::/64", as logged. */
void cs_addr_key_format(const cs_addr_key *k, char *buf, size_t len);

typedef enum cs_admit {
    CS_ADMIT_OK = 0,
    CS_ADMIT_TOTAL = 1,    /* the total cap is reached */
    CS_ADMIT_PER_ADDR = 2, /* this address's cap is reached */
} cs_admit;

typedef struct cs_admission cs_admission;

/* Caps of 0 mean unlimited. NULL when out of memory. */
cs_admission *cs_admission_new(uint32_t max_total, uint32_t max_per_addr);
void cs_admission_free(cs_admission *a);

/* Counts one more holder for k, or says which cap refuses it (nothing is counted then). Also
 * refuses (CS_ADMIT_TOTAL) when the table cannot grow for lack of memory. */
cs_admit cs_admission_enter(cs_admission *a, const cs_addr_key *k);

/* Releases what a successful cs_admission_enter counted for k. */
void cs_admission_leave(cs_admission *a, const cs_addr_key *k);

uint32_t cs_admission_total(const cs_admission *a);
uint32_t cs_admission_count(const cs_admission *a, const cs_addr_key *k);

#endif
