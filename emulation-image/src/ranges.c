/* A first-fit range allocator over one span of addresses.
 *
 * Free ranges and allocations are kept in two sorted arrays: the caching
 * allocators above us make few, large requests, so simplicity beats trees. */
#include "maya.h"

#include <stdlib.h>
#include <string.h>

typedef struct { uint64_t start, size; } range;
typedef struct { range *v; size_t n, cap; } range_list;

struct maya_ranges {
    uint64_t base, size;
    range_list free_list, used;
};

static void list_insert(range_list *l, size_t at, range r) {
    if (l->n == l->cap) {
        l->cap = l->cap ? l->cap * 2 : 64;
        l->v = realloc(l->v, l->cap * sizeof *l->v);
    }
    memmove(l->v + at + 1, l->v + at, (l->n - at) * sizeof *l->v);
    l->v[at] = r;
    l->n++;
}

static void list_remove(range_list *l, size_t at) {
    memmove(l->v + at, l->v + at + 1, (l->n - at - 1) * sizeof *l->v);
    l->n--;
}

/* Index of the first range starting after addr. */
static size_t upper_bound(const range_list *l, uint64_t addr) {
    size_t lo = 0, hi = l->n;
    while (lo < hi) {
        size_t mid = (lo + hi) / 2;
        if (l->v[mid].start <= addr) lo = mid + 1;
        else hi = mid;
    }
    return lo;
}

maya_ranges *maya_ranges_new(uint64_t base, uint64_t size) {
    maya_ranges *r = calloc(1, sizeof *r);
    r->base = base;
    r->size = size;
    list_insert(&r->free_list, 0, (range){base, size});
    return r;
}

void maya_ranges_free_all(maya_ranges *r) {
    if (!r) return;
    free(r->free_list.v);
    free(r->used.v);
    free(r);
}

uint64_t maya_ranges_alloc(maya_ranges *r, uint64_t size, uint64_t align) {
    if (size == 0) size = 1;
    if (align == 0) align = 1;
    for (size_t i = 0; i < r->free_list.n; i++) {
        range f = r->free_list.v[i];
        uint64_t start = (f.start + align - 1) / align * align;
        if (start - f.start > f.size || f.size - (start - f.start) < size) continue;
        uint64_t end = start + size, f_end = f.start + f.size;
        list_remove(&r->free_list, i);
        if (end < f_end) list_insert(&r->free_list, i, (range){end, f_end - end});
        if (start > f.start) list_insert(&r->free_list, i, (range){f.start, start - f.start});
        list_insert(&r->used, upper_bound(&r->used, start), (range){start, size});
        return start;
    }
    return 0;
}

uint64_t maya_ranges_release(maya_ranges *r, uint64_t ptr) {
    size_t i = upper_bound(&r->used, ptr);
    if (i == 0 || r->used.v[i - 1].start != ptr) return 0;
    range u = r->used.v[i - 1];
    list_remove(&r->used, i - 1);
    /* Put it back and merge with the neighbours it touches. */
    size_t j = upper_bound(&r->free_list, u.start);
    list_insert(&r->free_list, j, u);
    if (j + 1 < r->free_list.n && u.start + u.size == r->free_list.v[j + 1].start) {
        r->free_list.v[j].size += r->free_list.v[j + 1].size;
        list_remove(&r->free_list, j + 1);
    }
    if (j > 0 && r->free_list.v[j - 1].start + r->free_list.v[j - 1].size == r->free_list.v[j].start) {
        r->free_list.v[j - 1].size += r->free_list.v[j].size;
        list_remove(&r->free_list, j);
    }
    return u.size;
}

uint64_t maya_ranges_find(const maya_ranges *r, uint64_t addr, uint64_t *size) {
    size_t i = upper_bound(&r->used, addr);
    if (i == 0) return 0;
    range u = r->used.v[i - 1];
    if (addr >= u.start + u.size) return 0;
    if (size) *size = u.size;
    return u.start;
}
