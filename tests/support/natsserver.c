#include "support/natsserver.h"

#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#ifndef NATS_SERVER_BIN
#define NATS_SERVER_BIN "/usr/sbin/nats-server"
#endif

static int write_conf(cs_nats_server *s)
{
    char conf[PATH_MAX], store[PATH_MAX];
    cs_tmpdir_join(&s->dir, "nats.conf", conf, sizeof conf);
    cs_tmpdir_join(&s->dir, "store", store, sizeof store);
    FILE *f = fopen(conf, "w");
    if (!f)
        return -1;
    fprintf(f, "host: 127.0.0.1\nport: %d\nhttp_port: 0\njetstream {\n  store_dir: \"%s\"\n  max_file_store: 1G\n  max_memory_store: 64M\n}\n",
            s->port ? s->port : -1, store);
    if (s->max_payload > 0)
        fprintf(f, "max_payload: %lld\n", (long long)s->max_payload);
    return fclose(f) == 0 ? 0 : -1;
}

static int launch(cs_nats_server *s, int timeout_ms)
{
    char conf[PATH_MAX];
    cs_tmpdir_join(&s->dir, "nats.conf", conf, sizeof conf);
    if (write_conf(s) != 0)
        return -1;
    char *argv[] = {NATS_SERVER_BIN, "-c", conf, NULL};
    if (cs_proc_start(&s->proc, argv) != 0)
        return -1;
    s->running = true;
    if (cs_proc_wait_line(&s->proc, "Listening for client connections on", timeout_ms) != 0)
        return -1;
    char line[512];
    cs_proc_line(&s->proc, line, sizeof line);
    const char *colon = strrchr(line, ':');
    int port = colon ? atoi(colon + 1) : 0;
    if (port <= 0 || (s->port && port != s->port))
        return -1;
    s->port = port;
    snprintf(s->url, sizeof s->url, "nats://127.0.0.1:%d", port);
    return cs_proc_wait_line(&s->proc, "Server is ready", timeout_ms);
}

int cs_nats_start(cs_nats_server *s, int64_t max_payload, int timeout_ms)
{
    memset(s, 0, sizeof *s);
    s->proc.pid = -1;
    s->proc.out_fd = -1;
    s->proc.pidfd = -1;
    s->max_payload = max_payload;
    if (cs_tmpdir_make(&s->dir, "nats") != 0)
        return -1;
    return launch(s, timeout_ms);
}

int cs_nats_restart(cs_nats_server *s, int timeout_ms)
{
    if (s->running)
        return -1;
    cs_proc_free(&s->proc);
    return launch(s, timeout_ms);
}

int cs_nats_stop(cs_nats_server *s, int sig, int timeout_ms)
{
    if (!s->running)
        return 0;
    int st = cs_proc_stop(&s->proc, sig, timeout_ms);
    s->running = false;
    return st < 0 ? -1 : 0;
}

void cs_nats_free(cs_nats_server *s)
{
    if (s->running)
        cs_proc_stop(&s->proc, SIGKILL, 5000);
    s->running = false;
    cs_proc_free(&s->proc);
    cs_tmpdir_remove(&s->dir);
}
