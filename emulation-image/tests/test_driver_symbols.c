/* The driver symbols of src/driver_symbols.h against the library that ships
 * them (run from emulation-image/, after build/libmaya.so is linked):
 * - every listed name is matched by a `global:` pattern of src/exports.map;
 * - the built library exports exactly the listed driver names: every
 *   `cu[A-Z]*` function it defines is listed, save the cuFile API (libcufile's,
 *   stubbed in unsupported.c), and every listed name is defined;
 * - cuGetProcAddress's table answers every listed name, and the unversioned
 *   name of a versioned one (`cuMemAlloc` for `cuMemAlloc_v2`) with the same
 *   function. */
#include <fnmatch.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check.h"
#include "driver_symbols.h"
#include "rt.h"

#define NAME(n) #n,
static const char *const listed[] = {MAYA_DRIVER_EMULATED(NAME) MAYA_DRIVER_UNSUPPORTED(NAME)};
#undef NAME
#define NLISTED (sizeof listed / sizeof *listed)

static int is_listed(const char *name) {
    for (size_t i = 0; i < NLISTED; i++)
        if (!strcmp(listed[i], name)) return 1;
    return 0;
}

/* The `global:` patterns of a version script (up to `local:`). */
static int global_patterns(const char *path, char pats[][64], int max) {
    FILE *f = fopen(path, "r");
    if (!f) return -1;
    static char text[8192];
    size_t n = fread(text, 1, sizeof text - 1, f);
    fclose(f);
    text[n] = 0;
    for (char *c = strstr(text, "/*"); c; c = strstr(c, "/*")) {  /* drop comments */
        char *end = strstr(c, "*/");
        if (!end) break;
        memset(c, ' ', (size_t)(end + 2 - c));
    }
    char *g = strstr(text, "global:"), *l = strstr(text, "local:");
    if (!g || !l || l < g) return -1;
    *l = 0;
    int np = 0;
    for (char *tok = strtok(g + strlen("global:"), " \t\n;"); tok && np < max; tok = strtok(NULL, " \t\n;"))
        snprintf(pats[np++], 64, "%s", tok);
    return np;
}

static void test_export_map(void) {
    char pats[64][64];
    int np = global_patterns("src/exports.map", pats, 64);
    CHECK(np > 0);
    for (size_t i = 0; i < NLISTED; i++) {
        int matched = 0;
        for (int p = 0; p < np; p++) matched |= fnmatch(pats[p], listed[i], 0) == 0;
        if (!matched) fprintf(stderr, "%s is listed but src/exports.map keeps it local\n", listed[i]);
        CHECK(matched);
    }
}

static void test_library_exports(void) {
    FILE *p = popen("nm -D --defined-only build/libmaya.so", "r");
    CHECK(p != NULL);
    if (!p) return;
    char line[512], addr[64], type[8], name[256];
    int exported = 0, found[NLISTED] = {0};
    while (fgets(line, sizeof line, p)) {
        if (sscanf(line, "%63s %7s %255s", addr, type, name) != 3) continue;
        char *at = strchr(name, '@');  /* a symbol version, if any */
        if (at) *at = 0;
        if (fnmatch("cu[A-Z]*", name, 0) != 0 || !strncmp(name, "cuFile", 6)) continue;
        exported++;
        int known = 0;
        for (size_t i = 0; i < NLISTED; i++)
            if (!strcmp(listed[i], name)) found[i] = known = 1;
        if (!known) fprintf(stderr, "build/libmaya.so exports %s, which src/driver_symbols.h does not list\n", name);
        CHECK(known);
    }
    CHECK(pclose(p) == 0);
    CHECK(exported > 0);
    for (size_t i = 0; i < NLISTED; i++) {
        if (!found[i]) fprintf(stderr, "%s is listed but build/libmaya.so does not export it\n", listed[i]);
        CHECK(found[i]);
    }
}

static void test_lookup_table(void) {
    for (size_t i = 0; i < NLISTED; i++) {
        void *fn = maya_driver_lookup(listed[i]);
        CHECK(fn != NULL);
        char base[128];
        snprintf(base, sizeof base, "%s", listed[i]);
        char *v = strstr(base, "_v");
        if (v && v[2] >= '0' && v[2] <= '9' && !is_listed(base)) {
            *v = 0;
            CHECK(maya_driver_lookup(base) == fn);
        }
    }
    CHECK(maya_driver_lookup("cuNoSuchEntryPoint") == NULL);
    CHECK(maya_approximated_count(NULL) == 0);
}

int main(void) {
    setenv("MAYA_GPU_SPEC", TEST_SPEC, 1);
    setenv("MAYA_NUM_GPUS", "1", 1);
    test_export_map();
    test_library_exports();
    test_lookup_table();
    return CHECK_SUMMARY("test_driver_symbols");
}
