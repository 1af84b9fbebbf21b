/* SPDX-License-Identifier: Apache-2.0 */
#include "common/admission.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Open addressing with linear probing and backward-shift deletion: no tombstones, so a table
 * that sees millions of connects and disconnects never degrades. */
typedef struct slot {
    cs_addr_key key;
    uint32_t count; /* 0: empty */
} slot;

struct cs_admission {
    uint32_t max_total, max_per_addr;
    uint32_t total;
    size_t used, cap; /* cap is a power of two */
    slot *slots;
};

cs_addr_key cs_addr_key_of(const struct sockaddr *sa)
{
    cs_addr_key k;
    memset(&k, 0, sizeof k);
    if (sa->sa_family == AF_INET) {
        k.family = AF_INET;
        memcpy(k.bytes, &((const struct sockaddr_in *)sa)->sin_addr, 4);
    } else if (sa->sa_family == AF_INET6) {
        const struct in6_addr *a = &((const struct sockaddr_in6 *)sa)->sin6_addr;
        if (IN6_IS_ADDR_V4MAPPED(a)) {
            k.family = AF_INET;
            memcpy(k.bytes, a->s6_addr + 12, 4);
        } else {
            k.family = AF_INET6;
            memcpy(k.bytes, a->s6_addr, 8);
        }
    }
    return k;
}

void cs_addr_key_format(const cs_addr_key *k, char *buf, size_t len)
{
    char host[INET6_ADDRSTRLEN] = "?";
    if (k->family == AF_INET) {
        inet_ntop(AF_INET, k->bytes, host, sizeof host);
        snprintf(buf, len, "%s", host);
    } else if (k->family == AF_INET6) {
        uint8_t full[16] = {0};
        memcpy(full, k->bytes, 8);
        inet_ntop(AF_INET6, full, host, sizeof host);
        snprintf(buf, len, "%s/64", host);
    } else {
        snprintf(buf, len, "unknown");
    }
}

static bool key_eq(const cs_addr_key *a, const cs_addr_key *b)
{
    return a->family == b->family && memcmp(a->bytes, b->bytes, sizeof a->bytes) == 0;
}

static size_t key_hash(const cs_addr_key *k)
{
    /* FNV-1a: the keys are few bytes and chosen by peers, but the caps bound how many there are,
     * so a degenerate probe sequence costs at most the caps' worth of comparisons. */
    uint64_t h = 1469598103934665603ULL ^ k->family;
    for (size_t i = 0; i < sizeof k->bytes; i++)
        h = (h ^ k->bytes[i]) * 1099511628211ULL;
    return (size_t)(h ^ (h >> 29));
}

cs_admission *cs_admission_new(uint32_t max_total, uint32_t max_per_addr)
{
    cs_admission *a = calloc(1, sizeof *a);
    if (!a)
        return NULL;
    a->max_total = max_total;
    a->max_per_addr = max_per_addr;
    a->cap = 64;
    a->slots = calloc(a->cap, sizeof *a->slots);
    if (!a->slots) {
        free(a);
        return NULL;
    }
    return a;
}

void cs_admission_free(cs_admission *a)
{
    if (a) {
        free(a->slots);
        free(a);
    }
}

static slot *find(const cs_admission *a, const cs_addr_key *k)
{
    size_t mask = a->cap - 1;
    for (size_t i = key_hash(k) & mask;; i = (i + 1) & mask) {
        slot *s = &a->slots[i];
        if (s->count == 0 || key_eq(&s->key, k))
            return s;
    }
}

static int grow(cs_admission *a)
{
    size_t ncap = a->cap * 2;
    slot *old = a->slots, *ns = calloc(ncap, sizeof *ns);
    if (!ns)
        return -1;
    size_t ocap = a->cap;
    a->slots = ns;
    a->cap = ncap;
    for (size_t i = 0; i < ocap; i++)
        if (old[i].count)
            *find(a, &old[i].key) = old[i];
    free(old);
    return 0;
}

cs_admit cs_admission_enter(cs_admission *a, const cs_addr_key *k)
{
    if (a->max_total && a->total >= a->max_total)
        return CS_ADMIT_TOTAL;
    slot *s = find(a, k);
    if (s->count == 0) {
        if ((a->used + 1) * 2 > a->cap) { /* keep the load at or under one half */
            if (grow(a) != 0)
                return CS_ADMIT_TOTAL;
            s = find(a, k);
        }
        s->key = *k;
        a->used++;
    } else if (a->max_per_addr && s->count >= a->max_per_addr) {
        return CS_ADMIT_PER_ADDR;
    }
    s->count++;
    a->total++;
    return CS_ADMIT_OK;
}

void cs_admission_leave(cs_admission *a, const cs_addr_key *k)
{
    slot *s = find(a, k);
    if (s->count == 0)
        return; /* never admitted: nothing to release */
    a->total--;
    if (--s->count > 0)
        return;
    /* Backward shift: pull later members of the probe run into the hole. */
    size_t mask = a->cap - 1, hole = (size_t)(s - a->slots);
    for (size_t j = (hole + 1) & mask; a->slots[j].count; j = (j + 1) & mask) {
        size_t home = key_hash(&a->slots[j].key) & mask;
        /* j's entry may move to the hole unless its home lies cyclically in (hole, j]. */
        bool stays = hole <= j ? (home > hole && home <= j) : (home > hole || home <= j);
        if (!stays) {
            a->slots[hole] = a->slots[j];
            a->slots[j].count = 0;
            hole = j;
        }
    }
    a->slots[hole].count = 0;
    a->used--;
}

uint32_t cs_admission_total(const cs_admission *a)
{
    return a->total;
}

uint32_t cs_admission_count(const cs_admission *a, const cs_addr_key *k)
{
    return find(a, k)->count;
}
