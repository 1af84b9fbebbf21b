/* SPDX-License-Identifier: Apache-2.0 */
/* Test support: run a real program (corestreamd, ...) as a child process and follow its output.
 * Every wait is bounded by a timeout in milliseconds; nothing sleeps. The child runs in its own
 * process group; once it has exited (or is killed) the whole group is SIGKILLed to sweep any
 * grandchildren left behind, so no test leaves processes running.
 *
 * Set CS_PROC_ECHO=1 in the environment to copy the child's output to stderr as it is read. */
#ifndef CS_TESTS_SUPPORT_PROCHARNESS_H
#define CS_TESTS_SUPPORT_PROCHARNESS_H

#include <stddef.h>
#include <sys/types.h>

typedef struct cs_proc {
    pid_t pid;
    int out_fd;   /* read side of the child's stdout+stderr (non-blocking), -1 after EOF */
    char *log;    /* everything read so far, NUL-terminated (never NULL after a successful start) */
    size_t loglen;
    int port;     /* set by cs_proc_wait_listening */
    char addr[96];       /* addr=... value of the listening line, e.g. "[::]:8462" */
    /* internal */
    size_t logcap;
    size_t scan;         /* wait_line resumes here: the start of the line after the last match */
    size_t line_off, line_len; /* the line matched by the last successful wait_line */
    int pidfd;           /* -1 when pidfd_open is unavailable */
    int exited;          /* 1 once reaped */
    int status;          /* exit status once reaped: WEXITSTATUS or 128+signal */
} cs_proc;

/* Starts argv[0] (an absolute path) with argv (NULL-terminated) and the current environment;
 * stdout and stderr go to one pipe, stdin is /dev/null. Signal dispositions and the mask are reset
 * to defaults in the child. Does not wait. Returns 0, or -1 (errno set; p is left freed). */
int cs_proc_start(cs_proc *p, char *const argv[]);
/* Same with an explicit environment (NULL = the current one). */
int cs_proc_start_env(cs_proc *p, char *const argv[], char *const envp[]);

/* Reads output until a complete line containing `needle` appears (0), or the timeout passes
 * (-1), or the child exits and its output ends without one (-1). Matching resumes after the line
 * of the previous match, so successive calls find successive occurrences. The matched line is
 * available through cs_proc_line. All output is kept in p->log. */
int cs_proc_wait_line(cs_proc *p, const char *needle, int timeout_ms);
/* The line of the last successful wait_line, NUL-terminated, without its newline. */
void cs_proc_line(const cs_proc *p, char *buf, size_t len);

/* Waits for the line containing "corestreamd listening", then parses addr=HOST:PORT (IPv4
 * `127.0.0.1:41234` or `[::]:8462` forms, optionally quoted) into p->addr and p->port.
 * Returns 0, or -1 (timeout, child exit, or no parseable addr). */
int cs_proc_wait_listening(cs_proc *p, int timeout_ms);

/* Waits for the `admin endpoints listening` line and returns the port of its addr=127.0.0.1:PORT,
 * or -1 (timeout, child exit, or no such address). */
int cs_proc_wait_admin_port(cs_proc *p, int timeout_ms);

/* Reads whatever output is available now, without waiting. */
void cs_proc_drain(cs_proc *p);
/* Number of lines of p->log (read so far) containing needle. */
int cs_proc_log_count(const cs_proc *p, const char *needle);

/* Sends sig to the child, then waits up to timeout_ms for it to exit, draining output meanwhile.
 * Returns the exit status (WEXITSTATUS, or 128+signal), or -1 on timeout (the child's group is
 * then SIGKILLed and reaped). An already exited child just returns its status. */
int cs_proc_stop(cs_proc *p, int sig, int timeout_ms);
/* Waits up to timeout_ms for the child to exit on its own: its status, or -1 on timeout (the
 * child is left running). */
int cs_proc_wait_exit(cs_proc *p, int timeout_ms);
/* Waits up to timeout_ms for a process that need not be our child (a grandchild a test spawned
 * through a shell) to exit: 0 once it has (a zombie counts), -1 on timeout. Blocks on a pidfd;
 * without pidfd_open it looks every FALLBACK_SLICE_MS. */
int cs_pid_wait_gone(pid_t pid, int timeout_ms);
/* Kills (SIGKILL) and reaps a child still running, closes fds, frees the log. Idempotent. */
void cs_proc_free(cs_proc *p);

#endif
