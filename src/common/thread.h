/* SPDX-License-Identifier: Apache-2.0 */
/* Thread roles: a name that `top -H`, `ps -L` and /proc/<pid>/task/<tid>/comm show, and a nice
 * value that says who yields when the cores are busy. corestreamd runs beside stellar-core, so
 * work that can wait (the ring writer, ring replays) runs at the lowest priority and takes only
 * what the live path and core leave; when the box is idle it runs at full speed all the same.
 * Which thread may call what is checked in code with owner records (common/invariant.h), whose
 * reports name threads by these names. */
#ifndef CS_COMMON_THREAD_H
#define CS_COMMON_THREAD_H

/* Who yields when the cores are busy, first to last: the background threads (ring writes, ring
 * replays, stored-frame fills, catch-up sends: cs_thread_background_nice), then what strangers
 * start (CS_NICE_ADMISSION), then the live encoders, the stream I/O threads and the accept loop
 * (CS_NICE_LIVE steps below the daemon), then the source loop at the daemon's own priority. The
 * source loop is stellar-core's meta pipe in production: nothing may slow it. The live threads sit
 * just below it so that waking one (every chunk wakes an encoder and, once published, a stream I/O
 * thread) does not preempt the source; they still get a large share of a busy core (nice 2 weighs
 * about 2/3 of nice 0), which the auto level (levelctl.h) sees as compression time and adapts to.
 * The source waits for ledger N's ring write before ledger N+1 begins: on a host saturated at the
 * daemon's priority the stream then moves at the pace the background share allows. */
#define CS_NICE_LIVE 2
/* Steps for what strangers start: request heads and TLS handshakes (cs-heads). A storm of
 * connects then takes what the live path leaves (nice 5 weighs about a third of nice 0) instead of
 * competing with the threads that write to subscribers; a lone connect is still served at once. */
#define CS_NICE_ADMISSION 5
/* Steps for work that may always wait: by default the lowest priority there is (nice 19). */
#define CS_NICE_BACKGROUND_DEFAULT 19

/* The steps the background threads (cs-ring, cs-replay, cs-frames, cs-ws-bulk) take: 19 unless
 * cs_thread_set_background_nice said otherwise (corestreamd --background-nice). */
int cs_thread_background_nice(void);

/* Sets those steps, clamped to [0, 19]. Call before the threads start (they read it once, as they
 * take their role); any thread may call it, but a thread already started keeps what it took. */
void cs_thread_set_background_nice(int steps);

/* Names the calling thread (truncated to the kernel's 15 characters) and, when steps > 0, lowers
 * its priority by that many nice steps from what it has (a thread starts with its creator's),
 * capped at nice 19. Lowering one's own priority needs no privilege; raising it back would, so a
 * thread is never raised. Failures are ignored: a name or a priority is a hint, never a reason to
 * stop. Call from the thread itself. */
void cs_thread_role(const char *name, int steps);

/* The priority half of cs_thread_role, for a thread that keeps its name (the main thread, which
 * becomes the accept loop). */
void cs_thread_nice(int steps);

#endif
