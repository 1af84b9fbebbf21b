#include "corestreamd/jetstream/library.h"

#include <pthread.h>

static pthread_once_t once = PTHREAD_ONCE_INIT;
static natsStatus opened = NATS_OK;

static void open_once(void)
{
    opened = nats_Open(0);
}

natsStatus cs_js_library_open(void)
{
    pthread_once(&once, open_once);
    return opened;
}
