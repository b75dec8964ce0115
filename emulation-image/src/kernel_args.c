/* Integer arguments of a kernel launch.
 *
 * A KERNEL record's grid says how big the work is only for kernels that give
 * each element its own thread.  Grid-stride kernels (random fills, batch and
 * layer norm, embedding bags, softmax backward...) launch a grid that does not
 * grow with the data; their sizes are in their integer arguments (numel, rows,
 * columns, channels).  The demangled name lists the parameter types, and a
 * launch's `args` holds one pointer per parameter whatever its size, so the
 * parameters whose type is a plain integer can be read without knowing the
 * layout of the others. */
#include "maya.h"

#include <string.h>

/* Size of a by-value integer parameter named `t` (length n), 0 when it is not one. */
static int integer_size(const char *t, size_t n) {
    static const struct { const char *name; int size; } types[] = {
        {"int", 4}, {"unsigned int", 4}, {"long", 8}, {"unsigned long", 8},
        {"long long", 8}, {"unsigned long long", 8},
    };
    for (size_t i = 0; i < sizeof types / sizeof *types; i++)
        if (strlen(types[i].name) == n && memcmp(types[i].name, t, n) == 0) return types[i].size;
    return 0;
}

int maya_kernel_integer_params(const char *demangled, maya_func *f) {
    f->n_ints = 0;
    size_t len = demangled ? strlen(demangled) : 0;
    if (len < 2 || demangled[len - 1] != ')') return 0;
    /* The parameter list is the parenthesised group that ends the name. */
    size_t open = len - 1;
    int depth = 0;
    for (;;) {
        char ch = demangled[open];
        if (ch == ')') depth++;
        else if (ch == '(' && --depth == 0) break;
        if (open == 0) return 0;
        open--;
    }
    int index = 0;
    depth = 0;
    size_t start = open + 1;
    for (size_t i = open + 1; i < len; i++) {
        char ch = demangled[i];
        if (ch == '<' || ch == '(' || ch == '[' || ch == '{') depth++;
        else if (ch == '>' || ch == ']' || ch == '}' || (ch == ')' && i != len - 1)) depth--;
        if (depth == 0 && (ch == ',' || i == len - 1)) {
            while (start < i && demangled[start] == ' ') start++;
            int size = integer_size(demangled + start, i - start);
            if (size && f->n_ints < MAYA_KERNEL_INTS && index < 256) {
                f->int_index[f->n_ints] = (uint8_t)index;
                f->int_size[f->n_ints] = (uint8_t)size;
                f->n_ints++;
            }
            index++;
            start = i + 1;
        }
    }
    return f->n_ints;
}

int maya_kernel_integer_args(const maya_func *f, void *const *args, uint64_t *out) {
    if (!args) return 0;
    for (int i = 0; i < f->n_ints; i++) {
        const void *p = args[f->int_index[i]];
        if (!p) return 0;
        if (f->int_size[i] == 4) {
            int32_t v;
            memcpy(&v, p, 4);
            out[i] = (uint64_t)(int64_t)v;
        } else {
            memcpy(&out[i], p, 8);
        }
    }
    return f->n_ints;
}
