/* SPDX-License-Identifier: Apache-2.0 */
#include "corestreamd/stream/levelctl.h"

#include <math.h>

/* Wall ns per byte of one uncontended core on ledger-shaped data, -7..-1 then 1..3: only the
 * ratios between levels matter, since measurements rescale the table (cost = table x scale). */
static const double k_table[CS_AUTO_NLEVELS] = {0.40, 0.43, 0.46, 0.50, 0.55, 0.62, 0.75, 1.20, 1.80, 2.60};

static int slot(int level)
{
    return level < 0 ? level - CS_AUTO_LEVEL_MIN : level - CS_AUTO_LEVEL_MIN - 1;
}

static bool in_range(int level)
{
    return level >= CS_AUTO_LEVEL_MIN && level <= CS_AUTO_LEVEL_MAX && level != 0;
}

static int step_down(int level)
{
    return level == 1 ? -1 : level - 1;
}

static int step_up(int level)
{
    return level == -1 ? 1 : level + 1;
}

#define LEVELCTL_THREAD "level control: one thread picks and observes, the source's (levelctl.h)"

void cs_level_ctl_init(cs_level_ctl *c, int workers)
{
    *c = (cs_level_ctl){.workers = workers < 1 ? 1 : workers, .level = CS_AUTO_LEVEL_START, .scale = 1.0};
}

double cs_level_ctl_cost(const cs_level_ctl *c, int level)
{
    int i = slot(level);
    return c->cost[i] > 0 ? c->cost[i] : k_table[i] * c->scale;
}

void cs_level_ctl_observe(cs_level_ctl *c, int level, size_t bytes, int64_t ns)
{
    CS_OWNED(&c->owner, LEVELCTL_THREAD);
    if (!in_range(level) || bytes == 0 || ns <= 0)
        return;
    int i = slot(level);
    double x = (double)ns / (double)bytes;
    c->cost[i] = c->cost[i] > 0 ? c->cost[i] + (x - c->cost[i]) / 4 : x;
    c->scale += (x / k_table[i] - c->scale) / 8;
}

static double budget(const cs_level_ctl *c, size_t bytes)
{
    double cap = bytes ? CS_AUTO_CHUNK_NS / (double)bytes : INFINITY;
    if (c->arrival <= 0)
        return cap;
    double b = c->arrival * c->workers * CS_AUTO_UTILISATION;
    return b < cap ? b : cap;
}

int cs_level_ctl_pick(cs_level_ctl *c, const cs_level_load *l)
{
    CS_OWNED(&c->owner, LEVELCTL_THREAD);
    if (l->arrival_ns > 0 && l->bytes > 0) {
        double x = (double)l->arrival_ns / (double)l->bytes;
        c->arrival = c->arrival > 0 ? c->arrival + (x - c->arrival) / 8 : x;
    }
    if (c->hold_up > 0)
        c->hold_up--;
    if (c->hold_down > 0)
        c->hold_down--;
    double b = budget(c, l->bytes);
    bool pressured = l->all_full || l->backlogged >= c->workers;
    if (pressured) {
        if (c->hold_down == 0 && c->level > CS_AUTO_LEVEL_MIN) {
            c->level = step_down(c->level);
            c->steps_down++;
            c->hold_down = c->workers;
        }
        c->hold_up = CS_AUTO_UP_COOLDOWN;
    } else if (c->level > CS_AUTO_LEVEL_MIN && cs_level_ctl_cost(c, c->level) > b) {
        c->level = step_down(c->level);
        c->steps_down++;
    } else if (c->hold_up == 0 && l->idle > 0 && c->level < CS_AUTO_LEVEL_MAX &&
               cs_level_ctl_cost(c, step_up(c->level)) <= b * CS_AUTO_UP_MARGIN) {
        c->level = step_up(c->level);
        c->steps_up++;
        c->hold_up = CS_AUTO_UP_SPACING;
    }
    return c->level;
}
