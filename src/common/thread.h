/* Thread roles: a name that `top -H`, `ps -L` and /proc/<pid>/task/<tid>/comm show, and a nice
 * value that says who yields when the cores are busy. corestreamd runs beside stellar-core, so
 * work that can wait (the ring writer, ring replays) runs at the lowest priority and takes only
 * what the live path and core leave; when the box is idle it runs at full speed all the same. */
#ifndef CS_COMMON_THREAD_H
#define CS_COMMON_THREAD_H

/* The calling thread's nice value for work that may always wait. */
#define CS_NICE_BACKGROUND 19

/* Names the calling thread (truncated to the kernel's 15 characters) and, when nice > 0, lowers
 * its priority to that nice value. Lowering one's own priority needs no privilege; raising it
 * back would, so a thread never calls this with a smaller value than it has. Failures are
 * ignored: a name or a priority is a hint, never a reason to stop. Call from the thread itself. */
void cs_thread_role(const char *name, int nice);

#endif
