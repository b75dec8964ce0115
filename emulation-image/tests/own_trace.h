/* The unit tests' reading of the trace their own process writes (after flushing it). */
#ifndef MAYA_OWN_TRACE_H
#define MAYA_OWN_TRACE_H

#include <stdio.h>

#include "maya.h"

/* This process's records in `dir`, from the first slot after the header (a static buffer of 1 MiB,
 * overwritten by the next call); *nslots is how many were read, 0 when there is no trace. */
static inline const maya_rec *own_trace(const char *dir, size_t *nslots) {
    static unsigned char buf[1 << 20];
    maya_trace_flush();
    char path[600];
    snprintf(path, sizeof path, "%s/rank0.mayatrace", dir);
    *nslots = 0;
    FILE *f = fopen(path, "rb");
    if (!f) return (const maya_rec *)(buf + MAYA_HEADER_SIZE);
    size_t n = fread(buf, 1, sizeof buf, f);
    fclose(f);
    *nslots = n > MAYA_HEADER_SIZE ? (n - MAYA_HEADER_SIZE) / MAYA_SLOT : 0;
    return (const maya_rec *)(buf + MAYA_HEADER_SIZE);
}

#endif
