#include "corestreamd/server/message.h"

#include <stdlib.h>

cs_msg *cs_msg_new(size_t cap)
{
    cs_msg *m = malloc(sizeof *m + CS_MSG_HEADROOM + cap);
    if (!m)
        return NULL;
    atomic_init(&m->refs, 1);
    m->len = 0;
    m->cap = cap;
    m->published_ns = 0;
    m->data = m->buf + CS_MSG_HEADROOM;
    return m;
}

cs_msg *cs_msg_retain(cs_msg *m)
{
    atomic_fetch_add_explicit(&m->refs, 1, memory_order_relaxed);
    return m;
}

void cs_msg_release(cs_msg *m)
{
    if (m && atomic_fetch_sub_explicit(&m->refs, 1, memory_order_acq_rel) == 1)
        free(m);
}
