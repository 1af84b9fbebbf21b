#include "support/logcapture.h"

#include <stdio.h>
#include <string.h>

#include "common/log.h"

static FILE *g_file;

int cs_logcap_start(int min_level)
{
    g_file = tmpfile();
    if (!g_file)
        return -1;
    cs_log_init(g_file, min_level);
    return 0;
}

int cs_logcap_count(const char *needle)
{
    if (!g_file)
        return 0;
    fflush(g_file);
    rewind(g_file);
    char line[16384];
    int n = 0;
    while (fgets(line, sizeof line, g_file))
        if (strstr(line, needle))
            n++;
    fseek(g_file, 0, SEEK_END);
    return n;
}

void cs_logcap_stop(void)
{
    cs_log_init(stdout, CS_LOG_INFO);
    if (g_file)
        fclose(g_file);
    g_file = NULL;
}
