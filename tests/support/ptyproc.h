/* SPDX-License-Identifier: Apache-2.0 */
/* Test support: run a program on a pseudo-terminal, as a person at a terminal would (its stdin,
 * stdout and stderr are the terminal's slave side, it leads its own session with the terminal as
 * its controlling one), and read what it shows. Typing ^C (cs_pty_send "\x03") makes the terminal
 * send SIGINT to it. Every wait is bounded; nothing sleeps. The terminal converts "\n" to "\r\n". */
#ifndef CS_TESTS_SUPPORT_PTYPROC_H
#define CS_TESTS_SUPPORT_PTYPROC_H

#include <stddef.h>
#include <sys/types.h>

typedef struct cs_pty_proc {
    pid_t pid;
    int master;  /* -1 once the output is over */
    char *log;   /* everything shown so far, NUL-terminated */
    size_t loglen, logcap;
    size_t scan; /* cs_pty_wait_for resumes here: just after the previous match */
    int exited;  /* 1 once reaped */
    int status;  /* WEXITSTATUS, or 128+signal */
} cs_pty_proc;

/* Starts argv[0] (an absolute path) with argv and envp (NULL: the current environment) on a new
 * terminal cols columns wide, signal dispositions and mask reset. Returns 0, or -1 (errno set). */
int cs_pty_start(cs_pty_proc *p, char *const argv[], char *const envp[], int cols);

/* Reads until needle appears after the previous match (0; p->scan then points just past it), or
 * the timeout passes or the output ends without it (-1). */
int cs_pty_wait_for(cs_pty_proc *p, const char *needle, int timeout_ms);

/* Types bytes at the terminal. Returns 0, or -1. */
int cs_pty_send(cs_pty_proc *p, const char *bytes, size_t n);

/* Reads to the end of the output and reaps the program: its status (WEXITSTATUS, 128+signal), or
 * -1 when it has not exited within timeout_ms (it is left running). */
int cs_pty_wait_exit(cs_pty_proc *p, int timeout_ms);

/* Kills (SIGKILL) and reaps a program still running, closes the terminal, frees the log.
 * Idempotent. */
void cs_pty_free(cs_pty_proc *p);

#endif
