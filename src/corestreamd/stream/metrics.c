/* SPDX-License-Identifier: Apache-2.0 */
#include "corestreamd/stream/metrics.h"

#include <dirent.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <unistd.h>
#include <zstd.h>

/* Upper bounds in nanoseconds; the exposition prints them in seconds. */
static const int64_t k_bounds_ns[CS_M_BUCKETS] = {
    100000,   250000,   500000,   1000000,   2500000,   5000000,   7500000,
    10000000, 15000000, 25000000, 50000000, 100000000, 250000000, 1000000000,
};

static const int k_close_codes[CS_M_CLOSE_CODES - 1] = {1000, 1001, 1008, 1009, 1011, 4001};

static const char *const k_state_names[CS_SRC_STATES] = {
    "starting", "catching_up", "streaming", "ended", "stopped", "failed", "ring_failed", "reconnecting", "waiting",
};

const char *cs_source_state_name(cs_source_state s)
{
    return (unsigned)s < CS_SRC_STATES ? k_state_names[s] : "unknown";
}

cs_metrics *cs_metrics_new(void)
{
    cs_metrics *m = calloc(1, sizeof *m); /* all-zero atomics are valid zero values */
    if (m)
        cs_m_set_state(m, CS_SRC_STARTING);
    return m;
}

void cs_metrics_free(cs_metrics *m)
{
    free(m);
}

void cs_m_observe_ns(cs_m_histogram *h, int64_t ns)
{
    if (ns < 0)
        ns = 0;
    size_t i = 0;
    while (i < CS_M_BUCKETS && ns > k_bounds_ns[i])
        i++;
    cs_m_add(&h->buckets[i], 1);
    cs_m_add(&h->sum_ns, (uint64_t)ns);
}

void cs_m_count_close(cs_metrics *m, int code)
{
    size_t i = 0;
    while (i < CS_M_CLOSE_CODES - 1 && k_close_codes[i] != code)
        i++;
    cs_m_add(&m->closes[i], 1);
}

/* ---- exposition ---- */

static void family(cs_strbuf *b, const char *name, const char *type, const char *help)
{
    cs_strbuf_printf(b, "# HELP %s %s\n# TYPE %s %s\n", name, help, name, type);
}

static void sample_u(cs_strbuf *b, const char *name, const char *labels, uint64_t v)
{
    cs_strbuf_printf(b, "%s%s %" PRIu64 "\n", name, labels ? labels : "", v);
}

static void metric_u(cs_strbuf *b, const char *name, const char *type, const char *help, uint64_t v)
{
    family(b, name, type, help);
    sample_u(b, name, NULL, v);
}

/* Buckets are cumulative in the exposition; +Inf and _count are the same sum, so a scrape that
 * races an observation still sees a consistent histogram. */
static void histogram(cs_strbuf *b, const char *name, const char *help, const cs_m_histogram *h)
{
    family(b, name, "histogram", help);
    uint64_t cum = 0;
    for (size_t i = 0; i <= CS_M_BUCKETS; i++) {
        cum += cs_m_get(&h->buckets[i]);
        if (i < CS_M_BUCKETS)
            cs_strbuf_printf(b, "%s_bucket{le=\"%.9g\"} %" PRIu64 "\n", name, (double)k_bounds_ns[i] / 1e9, cum);
        else
            cs_strbuf_printf(b, "%s_bucket{le=\"+Inf\"} %" PRIu64 "\n", name, cum);
    }
    uint64_t sum = cs_m_get(&h->sum_ns); /* seconds to the nanosecond, no rounding */
    cs_strbuf_printf(b, "%s_sum %" PRIu64 ".%09" PRIu64 "\n%s_count %" PRIu64 "\n", name, sum / 1000000000,
                     sum % 1000000000, name, cum);
}

/* /proc/self/stat fields 14, 15 (utime, stime) and 22 (starttime), in clock ticks. The command
 * name (field 2) may hold spaces and parentheses, so parsing starts after its last ')'. */
static int proc_stat(double *cpu_s, double *start_ticks)
{
    FILE *f = fopen("/proc/self/stat", "re");
    if (!f)
        return -1;
    char line[1024];
    char *ok = fgets(line, sizeof line, f);
    fclose(f);
    char *p = ok ? strrchr(line, ')') : NULL;
    if (!p)
        return -1;
    unsigned long long utime, stime, start;
    /* After ')': state(3) ppid pgrp session tty tpgid flags minflt cminflt majflt cmajflt
     * utime(14) stime(15) cutime cstime priority nice threads itrealvalue starttime(22). */
    if (sscanf(p + 1, " %*c %*d %*d %*d %*d %*d %*u %*u %*u %*u %*u %llu %llu %*d %*d %*d %*d %*d %*d %llu",
               &utime, &stime, &start) != 3)
        return -1;
    long hz = sysconf(_SC_CLK_TCK);
    if (hz <= 0)
        return -1;
    *cpu_s = (double)(utime + stime) / (double)hz;
    *start_ticks = (double)start / (double)hz;
    return 0;
}

static int boot_time(double *btime)
{
    FILE *f = fopen("/proc/stat", "re");
    if (!f)
        return -1;
    char line[256];
    int rc = -1;
    unsigned long long v;
    while (fgets(line, sizeof line, f))
        if (sscanf(line, "btime %llu", &v) == 1) {
            *btime = (double)v;
            rc = 0;
            break;
        }
    fclose(f);
    return rc;
}

static int rss_bytes(uint64_t *out)
{
    FILE *f = fopen("/proc/self/statm", "re");
    if (!f)
        return -1;
    unsigned long long size, resident;
    int n = fscanf(f, "%llu %llu", &size, &resident);
    fclose(f);
    if (n != 2)
        return -1;
    *out = (uint64_t)resident * (uint64_t)sysconf(_SC_PAGESIZE);
    return 0;
}

static int open_fds(uint64_t *out)
{
    DIR *d = opendir("/proc/self/fd");
    if (!d)
        return -1;
    uint64_t n = 0;
    struct dirent *e;
    while ((e = readdir(d)))
        if (e->d_name[0] != '.')
            n++;
    closedir(d);
    *out = n > 0 ? n - 1 : 0; /* the directory's own descriptor */
    return 0;
}

static void process_metrics(cs_strbuf *b)
{
    double cpu, start, btime;
    if (proc_stat(&cpu, &start) == 0) {
        family(b, "process_cpu_seconds_total", "counter", "User and system CPU time spent, in seconds.");
        cs_strbuf_printf(b, "process_cpu_seconds_total %.9g\n", cpu);
        if (boot_time(&btime) == 0) {
            family(b, "process_start_time_seconds", "gauge", "Start time of the process since the Unix epoch, in seconds.");
            cs_strbuf_printf(b, "process_start_time_seconds %.3f\n", btime + start);
        }
    }
    uint64_t v;
    if (rss_bytes(&v) == 0)
        metric_u(b, "process_resident_memory_bytes", "gauge", "Resident memory size, in bytes.", v);
    if (open_fds(&v) == 0)
        metric_u(b, "process_open_fds", "gauge", "Open file descriptors.", v);
    struct rlimit rl;
    if (getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur != RLIM_INFINITY)
        metric_u(b, "process_max_fds", "gauge", "The soft limit on open file descriptors.", (uint64_t)rl.rlim_cur);
}

/* The publisher's families (the prototype had none: they are corestream_, not corestreamd_, as the
 * issue names them, so one dashboard covers a core's publishing and nothing else). */
static void jetstream_metrics(cs_strbuf *b, const cs_metrics_jetstream *j)
{
    metric_u(b, "corestreamd_jetstream_published_total", "counter",
             "Wire messages (BEGIN, CHUNK, END) handed to NATS for the JetStream stream.", j->published);
    metric_u(b, "corestreamd_jetstream_acked_total", "counter",
             "Published messages the stream acknowledged, duplicates included.", j->acked);
    metric_u(b, "corestreamd_jetstream_duplicates_total", "counter",
             "Acknowledgements that named a duplicate (a republish the server deduplicated by Nats-Msg-Id).",
             j->duplicates);
    metric_u(b, "corestreamd_jetstream_foreign_duplicates_total", "counter",
             "Duplicate acknowledgements for a message this process had never sent: another publisher used the "
             "core's subjects and message ids, and the stream dropped the core's message.",
             j->foreign_duplicates);
    metric_u(b, "corestreamd_jetstream_republishes_total", "counter",
             "Ledgers published again under fresh message ids after the stream dropped one of their messages as "
             "another publisher's duplicate.",
             j->republishes);
    metric_u(b, "corestreamd_jetstream_ack_failures_total", "counter",
             "Publishes whose acknowledgement failed or timed out (the position is then re-read from the stream).",
             j->ack_failures);
    metric_u(b, "corestreamd_jetstream_stalls_total", "counter",
             "Publishes that found the window of messages in flight full (--jetstream-max-pending).", j->stalls);
    metric_u(b, "corestreamd_jetstream_ledgers_total", "counter", "Ledgers whose END was published.", j->ledgers);
    metric_u(b, "corestreamd_jetstream_ring_ledgers_total", "counter",
             "Of the published ledgers, those read back from the ring because the live flow had moved on.",
             j->ring_ledgers);
    metric_u(b, "corestreamd_jetstream_gaps_total", "counter",
             "Times the ring no longer held a ledger the stream needed (`jetstream stream gap`).", j->gaps);
    metric_u(b, "corestreamd_jetstream_behind_episodes_total", "counter",
             "Transitions into behind (`jetstream publisher behind`).", j->behind_episodes);
    metric_u(b, "corestreamd_jetstream_resyncs_total", "counter",
             "Times the publishing position was re-read from the stream (start, reconnect, failed ack).", j->resyncs);
    metric_u(b, "corestreamd_jetstream_behind", "gauge",
             "1 while the publisher is behind the live flow or cannot reach NATS, else 0.", j->behind ? 1 : 0);
    metric_u(b, "corestreamd_jetstream_connected", "gauge", "1 while the publisher's NATS connection is up, else 0.",
             j->connected ? 1 : 0);
}

static void edge_metrics(cs_strbuf *b, const cs_metrics_edge *e)
{
    family(b, "corestreamd_edge_messages_skipped_total", "counter",
           "Messages of the followed run the edge did not serve, by reason: malformed (not a wire message), "
           "subject (another ledger than its subject's), out_of_place (does not continue the flow: a gap, a "
           "duplicate, a chunk out of order), corrupt (a copy of a ledger that does not verify).");
    for (size_t i = 0; i < e->nreasons && i < CS_M_EDGE_REASONS_MAX; i++) {
        char label[64];
        snprintf(label, sizeof label, "{reason=\"%s\"}", e->names[i]);
        sample_u(b, "corestreamd_edge_messages_skipped_total", label, e->skipped[i]);
    }
    metric_u(b, "corestreamd_edge_waiting_for_ledger", "gauge",
             "The ledger the edge waits for past a skipped message (not ready meanwhile); 0 when it does not wait.",
             e->waiting_for);
    metric_u(b, "corestreamd_edge_gaps_total", "counter",
             "Times the stream went on without ledgers the edge waited for (a later ledger verified, "
             "--jetstream-gap-wait passed) and the edge served on from the later one (`jetstream source gap`).",
             e->gaps);
    metric_u(b, "corestreamd_edge_gap_ledgers_total", "counter",
             "Ledgers in those gaps: never served by this edge.", e->gap_ledgers);
    family(b, "corestreamd_edge_ledgers_total", "counter",
           "Ledgers the edge verified, by the way they came: live (the run's messages as the NATS server "
           "received them) or stream (read from the JetStream stream).");
    sample_u(b, "corestreamd_edge_ledgers_total", "{path=\"live\"}", e->ledgers_live);
    sample_u(b, "corestreamd_edge_ledgers_total", "{path=\"stream\"}", e->ledgers_stream);
    metric_u(b, "corestreamd_edge_stream_moves_total", "counter",
             "Times the edge left the live messages for the stream (INFO `jetstream source reading the stream`): "
             "a lost connection, a message dropped or out of order, a copy that did not verify.",
             e->stream_moves);
}

static void lake_metrics(cs_strbuf *b, const cs_metrics_lake *l)
{
    metric_u(b, "corestreamd_lake_objects_total", "counter", "Lake objects served (200 to GET and HEAD).", l->objects);
    metric_u(b, "corestreamd_lake_object_bytes_total", "counter", "Bytes of lake objects sent (GET).", l->bytes);
    metric_u(b, "corestreamd_lake_not_found_total", "counter",
             "Lake object requests for batches the ring does not hold whole (404).", l->not_found);
    metric_u(b, "corestreamd_lake_busy_total", "counter",
             "Lake object requests refused for want of a place: every reader busy, the queue full (503).", l->busy);
    metric_u(b, "corestreamd_lake_failed_total", "counter",
             "Lake objects that could not be made for a passing reason, an I/O error say (503).", l->failed);
    metric_u(b, "corestreamd_lake_requests_in_progress", "gauge",
             "Lake object requests admitted now: waiting for a reader or being made.", l->in_progress);
}

static void lake_export_metrics(cs_strbuf *b, const cs_metrics_lake_export *l)
{
    metric_u(b, "corestreamd_lake_export_objects_total", "counter",
             "Lake objects the export wrote (objects found in place already are not counted).", l->objects);
    metric_u(b, "corestreamd_lake_export_signatures_total", "counter",
             "Signature objects (<key>.sig, signed batches only) the export wrote beside objects.", l->signatures);
    metric_u(b, "corestreamd_lake_export_bytes_total", "counter",
             "Bytes of the lake objects and signature objects the export wrote.", l->bytes);
    metric_u(b, "corestreamd_lake_export_lag_ledgers", "gauge",
             "The ring's latest ledger less the last ledger the export has passed (written, found in place, or "
             "lost); 0 when caught up.",
             l->lag);
    family(b, "corestreamd_lake_export_errors_total", "counter",
           "Export failures, by kind: io (a system call failed; retried with back-off), conflict (a key held an "
           "object or a .sig with other content; kept, not written).");
    sample_u(b, "corestreamd_lake_export_errors_total", "{kind=\"io\"}", l->io_errors);
    sample_u(b, "corestreamd_lake_export_errors_total", "{kind=\"conflict\"}", l->conflicts);
    metric_u(b, "corestreamd_lake_export_lost_total", "counter",
             "Ledgers lost to the lake: the ring pruned them before the export reached them, or held them in a "
             "hole.",
             l->lost);
}

/* Long because it is the exposition itself: one family after another, in the order a scrape
 * shows them. */
void cs_metrics_render(cs_strbuf *b, const cs_metrics *m, const cs_metrics_view *v)
{
    family(b, "corestreamd_build_info", "gauge",
           "Always 1; the labels carry the version and the codec settings in force.");
    char level[16];
    if (v->compress_auto)
        snprintf(level, sizeof level, "auto");
    else
        snprintf(level, sizeof level, "%d", v->compress_level);
    cs_strbuf_printf(b,
                     "corestreamd_build_info{version=\"%s\",commit=\"%s\",compress=\"%s\",compress_level=\"%s\","
                     "compress_workers=\"%d\",zstd_version=\"%s\"} 1\n",
                     v->version ? v->version : "", v->commit ? v->commit : "", v->compress ? "true" : "false", level,
                     v->compress_workers, ZSTD_versionString());
    family(b, "corestreamd_compress_level", "gauge",
           "The zstd level given to the last live chunk: the fixed --compress-level, or what auto picked "
           "(0 with --compress=false).");
    cs_strbuf_printf(b, "corestreamd_compress_level %d\n", v->compress ? v->compress_level_now : 0);

    family(b, "corestreamd_source_state", "gauge", "1 for the state the source is in, 0 for the others.");
    cs_source_state st = cs_m_state(m);
    for (int s = 0; s < CS_SRC_STATES; s++)
        cs_strbuf_printf(b, "corestreamd_source_state{state=\"%s\"} %d\n", k_state_names[s], s == (int)st);
    metric_u(b, "corestreamd_ready", "gauge",
             "1 while /readyz answers 200 (the source streams and the ring is written), else 0.", v->ready ? 1 : 0);
    metric_u(b, "corestreamd_latest_ledger", "gauge", "The last ledger emitted completely (its END sent); 0 before the first.",
             cs_m_get(&m->latest_emitted));
    family(b, "corestreamd_latest_ledger_timestamp_seconds", "gauge",
           "When the last ledger was emitted completely (its END), in Unix seconds; 0 before the first.");
    cs_strbuf_printf(b, "corestreamd_latest_ledger_timestamp_seconds %.3f\n",
                     (double)cs_m_get(&m->latest_emitted_at) / 1e9);
    metric_u(b, "corestreamd_ledgers_emitted_total", "counter", "Ledgers emitted by the source.",
             cs_m_get(&m->ledgers_emitted));
    family(b, "corestreamd_emitted_bytes_total", "counter",
           "Bytes of the ledgers emitted: form=raw is the ledger payload, form=wire the messages built "
           "for it (BEGIN, compressed or raw chunks, END), once, whatever the number of subscribers.");
    sample_u(b, "corestreamd_emitted_bytes_total", "{form=\"raw\"}", cs_m_get(&m->bytes_raw));
    sample_u(b, "corestreamd_emitted_bytes_total", "{form=\"wire\"}",
             cs_m_get(&m->bytes_framing) + cs_m_get(&m->bytes_chunks_wire));
    histogram(b, "corestreamd_emit_duration_seconds",
              "T_emit: from a ledger's BEGIN (before its first byte was read) to its END (after its last).",
              &m->t_emit);
    histogram(b, "corestreamd_publish_to_write_seconds",
              "From a live message's publish to its write to one subscriber's socket, per subscriber.",
              &m->publish_to_write);
    family(b, "corestreamd_chunks_total", "counter",
           "Live chunks published, by codec: zstd when compressing made it smaller, raw otherwise.");
    sample_u(b, "corestreamd_chunks_total", "{codec=\"zstd\"}", cs_m_get(&m->chunks_zstd));
    sample_u(b, "corestreamd_chunks_total", "{codec=\"raw\"}", cs_m_get(&m->chunks_raw));
    metric_u(b, "corestreamd_chunk_raw_fallbacks_total", "counter",
             "Live chunks sent raw because every live encoder was busy (part of codec=raw).", v->raw_fallbacks);

    metric_u(b, "corestreamd_ring_oldest_ledger", "gauge", "The oldest ledger in the ring; 0 when it is empty.",
             v->ring_oldest);
    metric_u(b, "corestreamd_ring_latest_ledger", "gauge", "The latest ledger in the ring; 0 when it is empty.",
             v->ring_latest);
    metric_u(b, "corestreamd_ring_retention_ledgers", "gauge", "Ledgers the ring keeps (--retention).",
             v->retention > 0 ? (uint64_t)v->retention : 0);
    metric_u(b, "corestreamd_ring_size_bytes", "gauge", "Bytes of the ledger files in the ring.", v->ring_bytes);
    metric_u(b, "corestreamd_ring_frames_size_bytes", "gauge",
             "Bytes of the stored wire frames of the ledgers in the ring (in frames-<base>.seg).",
             v->ring_frames_bytes);
    metric_u(b, "corestreamd_ring_write_failures_total", "counter",
             "Ledgers the ring failed to store (the live flow carries on; each is a hole in the ring).",
             v->ring_write_failures);
    metric_u(b, "corestreamd_ring_quarantined_total", "counter",
             "Ledgers the ring lost since start: proven bad and moved to <data-dir>/quarantine, or found missing.",
             v->ring_dropped);
    metric_u(b, "corestreamd_ring_holes_ledgers", "gauge",
             "Ledgers inside the ring's bounds that it does not hold (quarantined, missing or not written).",
             v->ring_holes);
    metric_u(b, "corestreamd_ring_io_errors_total", "counter",
             "Ring reads and checks that met an I/O error (EMFILE, EIO, ...): the request failed, nothing was dropped.",
             v->ring_io_errors);
    metric_u(b, "corestreamd_ring_degraded", "gauge",
             "1 while ring writes fail (the ring is frozen and catch-up cannot pass its latest), else 0.",
             v->ring_degraded ? 1 : 0);
    metric_u(b, "corestreamd_replays_running", "gauge", "Subscribers catching up from the ring under a replay slot.",
             v->replays_running);
    metric_u(b, "corestreamd_replays_waiting", "gauge", "Subscribers waiting for a replay slot.", v->replays_waiting);
    family(b, "corestreamd_sent_bytes_total", "counter",
           "Message bytes written to subscribers' sockets, by flow: live or replay (from the ring).");
    sample_u(b, "corestreamd_sent_bytes_total", "{flow=\"live\"}", cs_m_get(&m->sent_bytes_live));
    sample_u(b, "corestreamd_sent_bytes_total", "{flow=\"replay\"}", cs_m_get(&m->sent_bytes_replay));
    family(b, "corestreamd_replay_chunk_bytes_total", "counter",
           "Replay CHUNK message bytes written to subscribers, by source: stored (the ring's stored frames, "
           "sent as published) or encoded (compressed again at replay: a ledger without stored frames).");
    sample_u(b, "corestreamd_replay_chunk_bytes_total", "{source=\"stored\"}", cs_m_get(&m->replay_bytes_stored));
    sample_u(b, "corestreamd_replay_chunk_bytes_total", "{source=\"encoded\"}", cs_m_get(&m->replay_bytes_encoded));

    metric_u(b, "corestreamd_subscribers", "gauge", "WebSocket subscribers connected now.",
             v->subscribers > 0 ? (uint64_t)v->subscribers : 0);
    metric_u(b, "corestreamd_connections", "gauge", "Connections held now on the data listener.",
             v->connections > 0 ? (uint64_t)v->connections : 0);
    metric_u(b, "corestreamd_max_connections", "gauge", "The connection cap in force (0: none).", v->max_connections);
    family(b, "corestreamd_connections_accepted_total", "counter", "Connections accepted and held, by listener.");
    sample_u(b, "corestreamd_connections_accepted_total", "{listener=\"data\"}", cs_m_get(&m->connections_accepted));
    sample_u(b, "corestreamd_connections_accepted_total", "{listener=\"admin\"}",
             cs_m_get(&m->admin_connections_accepted));
    family(b, "corestreamd_connections_refused_total", "counter",
           "Connections closed at accept, by reason: connection_cap (--max-connections, the descriptor "
           "limit, or no memory) or per_address_cap (--max-connections-per-ip).");
    sample_u(b, "corestreamd_connections_refused_total", "{reason=\"connection_cap\"}", v->refused_total);
    sample_u(b, "corestreamd_connections_refused_total", "{reason=\"per_address_cap\"}", v->refused_per_ip);
    metric_u(b, "corestreamd_accept_pauses_total", "counter", "Times accept ran out of descriptors and rested.",
             v->accept_pauses);
    metric_u(b, "corestreamd_live_abandons_total", "counter",
             "Live flows abandoned for a subscriber still inside the previous ledger (redelivered from the ring).",
             v->live_abandons);
    metric_u(b, "corestreamd_write_deadline_drops_total", "counter",
             "Subscribers dropped because their socket took nothing for 10 s while a message waited.",
             cs_m_get(&m->write_deadline_drops));
    family(b, "corestreamd_closes_sent_total", "counter", "Close frames sent to subscribers, by close code.");
    for (size_t i = 0; i < CS_M_CLOSE_CODES; i++) {
        char label[32];
        if (i < CS_M_CLOSE_CODES - 1)
            snprintf(label, sizeof label, "{code=\"%d\"}", k_close_codes[i]);
        else
            snprintf(label, sizeof label, "{code=\"other\"}");
        sample_u(b, "corestreamd_closes_sent_total", label, cs_m_get(&m->closes[i]));
    }
    if (v->tls_not_after > 0)
        metric_u(b, "corestreamd_tls_certificate_not_after_timestamp_seconds", "gauge",
                 "When the certificate served on --listen stops being valid (its notAfter), in Unix seconds; "
                 "follows SIGHUP reloads.",
                 (uint64_t)v->tls_not_after);
    if (v->jetstream)
        jetstream_metrics(b, v->jetstream);
    if (v->edge)
        edge_metrics(b, v->edge);
    if (v->lake)
        lake_metrics(b, v->lake);
    if (v->lake_export)
        lake_export_metrics(b, v->lake_export);
    process_metrics(b);
}
