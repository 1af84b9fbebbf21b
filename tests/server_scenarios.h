/* SPDX-License-Identifier: Apache-2.0 */
/* The server's end-to-end scenarios, written once and run against both clients: the raw WebSocket
 * test client (test_server_e2e.c, cases "<name>/ws") and libremoteledger's rl_stream_raw_ledgers
 * (test_server_client_e2e.c, cases "<name>/rl").
 *
 * A scenario says how the in-process server is set up, what a subscriber asks for, and what it
 * gets: the ledgers (byte-exact synthetic payloads), their stamps, and how the stream ends, both as
 * the server's close frame (what the test client sees) and as the library's result code and
 * message (what a library user sees). Each client's driver runs the request its own way, records
 * every ledger in a `seen`, asserts the ending in its own terms, and leaves the rest to
 * scenario_check. To add a scenario, add a row to the table in server_scenarios.c; a case that
 * makes sense for one client only goes into that client's file.
 *
 * Include after <cmocka.h>. */
#ifndef CS_TESTS_SERVER_SCENARIOS_H
#define CS_TESTS_SERVER_SCENARIOS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "corestream/remoteledger.h"
#include "support/serverharness.h"

/* The bound on a stall: until the ring holds the last ledger, which a busy machine's nice-19 ring
 * writer can stretch well past WAIT_MS. */
#define SCENARIO_STALL_NS (240 * T_SEC)
#define SCENARIO_MAX_SUBSCRIBERS 8

typedef enum scenario_stamps {
    STAMPS_UNCHECKED,     /* no rule beyond the redelivery one (a redelivery is stampless) */
    STAMPS_NONE,          /* every ledger stampless: all of it was served from the ring */
    STAMPS_LIVE,          /* every ledger stamped, its emit window in [emit_min_ms, emit_max_ms], but a
                             first one already complete at connect time */
    STAMPS_SOME_LIVE,     /* at least one ledger, over all the subscribers, carries stamps */
    STAMPS_SOME_REPLAYED, /* the stalled subscriber got at least one ledger stampless from the ring */
} scenario_stamps;

typedef struct scenario {
    const char *name;

    /* ---- the server ---- */
    harness_opts opts;
    uint32_t retained;          /* before subscribing, wait until the ring holds this (0: don't) */
    uint32_t unlink;            /* then delete this ledger's file from the ring (0: none) */
    void (*before)(harness *h); /* then this server-side step (may assert) */

    /* ---- the request ---- */
    bool tip;                /* no start: from the server's tip */
    uint32_t from, to;       /* start and end; to 0: unbounded */
    int subscribers;         /* that many alike at once (0: one) */
    bool stall;              /* two subscribers: the first stops reading at its first ledger until
                                the ring holds opts.count, the second reads as ledgers come */
    uint32_t take;           /* the client stops after this many (0: it reads until the server ends) */
    uint32_t act_after;      /* once the (only) subscriber has this many ledgers ... */
    void (*act)(harness *h); /* ... this server-side step; it must not assert (it may run inside
                                the library's callback) */

    /* ---- what every subscriber gets ---- */
    uint32_t first, last; /* ledgers first..last, in order, byte-exact; last 0: none */
    uint32_t above;       /* with tip: `take` consecutive ledgers from one above this */
    uint32_t chunks;      /* each in this many CHUNK messages (0: unchecked) */
    bool zstd;            /* every chunk zstd-compressed (the test client sees codecs; the library does not) */
    scenario_stamps stamps;
    int64_t emit_min_ms, emit_max_ms; /* STAMPS_LIVE */
    bool redelivers; /* the stalled one got ledgers again from the ring, stampless */

    /* ---- how it ends, as each client sees it ---- */
    int close_code; /* the server's close frame (0: the client left first, at `take`) */
    const char *close_reason;
    rl_result rl;         /* what rl_stream_raw_ledgers returns ... */
    const char *rl_error; /* ... and what rl_stream_error says then, exactly */
    uint32_t tfb_requested, tfb_oldest, tfb_latest; /* RL_ERR_TOO_FAR_BEHIND: rl_stream_too_far_behind */
    void (*after)(harness *h); /* a server-side check once the clients are done (may assert) */
} scenario;

/* ---- what one subscriber saw, in either client's terms ---- */

typedef struct seen_ledger {
    uint32_t seq;
    size_t len;
    bool exact; /* set by seen_add: the synthetic payload of seq, byte for byte */
    int64_t emit_start, emit_end, received;
    uint32_t chunks;
    unsigned discarded; /* partial assemblies dropped for a redelivery of this ledger */
} seen_ledger;

typedef struct seen {
    const scenario *sc;
    seen_ledger *l;
    uint32_t n, cap;
    uint8_t *want;
} seen;

void seen_init(seen *s, const scenario *sc);
/* Records one ledger and compares data with its synthetic payload. Never asserts (it runs inside
 * the library's callback and on reader threads); aborts when out of memory. */
void seen_add(seen *s, const uint8_t *data, seen_ledger l);
/* The client should stop reading: it took what the scenario takes, or one ledger more than it
 * should get (which scenario_check then reports). */
bool seen_done(const seen *s);
/* Ledgers first, first+1, ... in order, each byte-exact (for cases with no fixed count). */
void seen_expect_run(const seen *s, uint32_t first);
void seen_free(seen *s);

/* ---- running one ---- */

extern const scenario scenarios[];
extern const size_t n_scenarios;

/* Subscribers the request is made by (2 for a stall). */
int scenario_subscribers(const scenario *sc);
/* The synthetic payload's size. */
size_t scenario_size(const scenario *sc);
/* Starts the server and does the scenario's server-side set-up. */
void scenario_begin(harness *h, const scenario *sc);
/* For a stall: waits until the ring holds the last ledger. */
bool scenario_await_stall_end(harness *h, const scenario *sc);
/* What every subscriber got: the ledgers, their stamps, redelivery. The n seen records are
 * `stride` bytes apart from subs (a driver's subscribers, each starting with its seen); the first
 * is the stalled one. */
void scenario_check(harness *h, const scenario *sc, const seen *subs, int n, size_t stride);
/* The scenario's last server-side check, then the server stopped and removed. */
void scenario_finish(harness *h, const scenario *sc);

/* A client driver: how one client subscribes and what its user sees at the end. */
typedef struct scenario_client {
    const char *name;  /* the cases' suffix: "<scenario>/<name>" */
    size_t sub_size;   /* one subscriber's record, which starts with its seen */
    /* Subscribes with n zeroed records and reads until each is over (the stalled subs[0] as the
     * scenario says), recording what came in each seen (seen_init'ed by the driver). */
    void (*run)(harness *h, const scenario *sc, void *subs, int n);
    void (*expect_end)(const void *sub); /* asserts how the stream ended, as this client sees it */
    void (*release)(void *sub);          /* frees what the record holds but its seen */
} scenario_client;

/* One scenario against one client: set-up, the client's run, its checks and the shared ones. */
void scenario_run(const scenario *sc, const scenario_client *client);

/* Runs every scenario through client->run's test (named "<name>/<client>") and then the client's
 * own cases. run is the cmocka test that calls scenario_run(*state, client). Set CS_TEST_FILTER
 * (a cmocka pattern, e.g. "too_far_behind*") to run only some. */
int scenario_run_group(const char *group, const scenario_client *client, void (*run)(void **state),
                       const struct CMUnitTest *own, size_t n_own);

#endif
