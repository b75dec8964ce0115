/* Internals shared by every file of the interposer.
 *
 * The interposer replaces cudart, the driver, NVML, cuBLAS(Lt), cuDNN and NCCL
 * inside an unmodified process.  Each API area lives in its own file and talks
 * to the rest only through this header: configuration (config.c), the trace
 * writer (trace.c), virtual device memory (memory.c), kernel identity
 * (registry.c), streams/events/current device (cudart.c) and the record of
 * unsupported and approximated calls (unsupported.c).  Everything is hidden except the symbols
 * marked MAYA_EXPORT, which are the replaced APIs.
 */
#ifndef MAYA_H
#define MAYA_H

#include <stddef.h>
#include <stdint.h>

#define MAYA_EXPORT __attribute__((visibility("default")))
#define MAYA_MAX_DEVICES 16

/* ---------------------------------------------------------------- config */

/* One virtual GPU model, from the catalog (passed in MAYA_GPU_SPEC). */
typedef struct {
    char name[64];            /* catalog name, e.g. H100-SXM-80GB */
    char marketing_name[96];  /* what cudaDeviceProp.name shows */
    int cc_major, cc_minor;
    int sm_count;
    uint64_t memory_bytes;    /* total device memory as the driver reports it */
    uint64_t reserved_bytes;  /* taken by the CUDA context before the user allocates */
    int clock_khz, memory_clock_khz, memory_bus_width;
    int l2_bytes;
    int smem_per_sm, smem_per_block, smem_per_block_optin;
    int regs_per_sm, regs_per_block;
    int max_threads_per_sm, max_blocks_per_sm;
    int pci_device_id;
} maya_gpu;

typedef struct {
    maya_gpu gpu;
    int num_devices;      /* GPUs visible to this process */
    int gpus_per_node;    /* virtual node layout */
    int rank, local_rank, world_size, node;
    char trace_dir[512];  /* where traces go; empty = no trace */
    char run_id[64];      /* names shared-memory objects of one run */
    uint64_t copy_limit;  /* copies/memsets up to this size move real bytes */
    int verbose;
} maya_config;

/* The configuration, read once from the environment on first use. */
const maya_config *maya_cfg(void);
/* Parse a MAYA_GPU_SPEC string; 0 when it names a usable GPU. */
int maya_parse_spec(const char *spec, maya_gpu *g);

/* ----------------------------------------------------------------- trace */

/* Trace record kinds; see emulation-image/TRACE_FORMAT.md. */
enum maya_kind {
    MK_STRING = 1,        /* a0=id, a32=length; text in CONT slots */
    MK_FUNC = 2,          /* a0=func id, a1=mangled str, a2=demangled str */
    MK_KERNEL = 3,
    MK_MEMCPY = 4,
    MK_MEMSET = 5,
    MK_MALLOC = 6,
    MK_FREE = 7,
    MK_STREAM_CREATE = 8,
    MK_STREAM_DESTROY = 9,
    MK_EVENT_CREATE = 10,
    MK_EVENT_DESTROY = 11,
    MK_EVENT_RECORD = 12,
    MK_STREAM_WAIT_EVENT = 13,
    MK_EVENT_QUERY = 14,
    MK_EVENT_SYNC = 15,
    MK_STREAM_SYNC = 16,
    MK_DEVICE_SYNC = 17,
    MK_STREAM_QUERY = 18,
    MK_HOST_FUNC = 19,
    MK_GRAPH_CAPTURE_BEGIN = 20,
    MK_GRAPH_CAPTURE_END = 21,
    MK_GRAPH_INSTANTIATE = 22,
    MK_GRAPH_LAUNCH = 23,
    MK_BLAS = 24,
    MK_DNN = 25,
    MK_COMM_INIT = 26,
    MK_COLL = 27,
    MK_COMM_DESTROY = 28,
    MK_UNSUPPORTED = 29,
    MK_NOTE = 30,
    MK_SET_DEVICE = 31,
    MK_THREAD = 32,       /* a0=thread index, a1=name str, a2=OS thread id: written before the thread's first record */
    MK_DEVICE_TIME = 33,  /* record mode: measured device work of the operation record before it */
    MK_APPROXIMATED = 34, /* a0=name str: a call succeeded with an answer or record a real GPU might not give */
    MK_CONT = 0xFF,       /* continuation slot: bytes 8..63 belong to the record before */
};

/* Record flags (byte 1). */
enum {
    MF_ASYNC = 1 << 0,     /* the call was asynchronous */
    MF_CAPTURED = 1 << 1,  /* recorded while a CUDA graph was being captured: not executed */
    MF_REPLAY = 1 << 2,    /* re-emitted by a graph launch */
    MF_FAILED = 1 << 3,    /* the call returned an error (e.g. out of memory) */
    MF_DATA = 1 << 4,      /* real bytes were moved */
    MF_PINNED = 1 << 5,    /* host side is page-locked */
};

typedef struct {
    uint8_t kind, flags, device, thread;
    uint32_t stream;
    uint64_t t_ns;     /* entry time, ns since the trace started */
    uint32_t dur_ns;   /* time spent inside the interposer for this call */
    uint32_t a32;      /* small per-kind field */
    uint64_t a[5];
} maya_rec;            /* one 64-byte slot */

#define MAYA_TRACE_MAGIC "MAYATRC\0"
#define MAYA_TRACE_VERSION 1
#define MAYA_HEADER_SIZE 128
#define MAYA_SLOT 64
#define MAYA_CONT_BYTES 56

/* Call timing: every exported entry point brackets its work with these so
 * the trace knows the host time spent between intercepted calls. */
uint64_t maya_now_ns(void);
typedef struct { uint64_t t0; } maya_call;
/* Emulation sets this: the trace clock leaves out time off the CPU between calls (trace.c). */
extern int maya_cpu_clock;
maya_call maya_enter(void);
/* The end of a call that writes no record: the thread no longer counts as inside one. */
void maya_leave(void);
/* Python's collector starts (1) or stops (0) a collection: left out of the trace clock (trace.c). */
void maya_gc_pause(int begin);
/* The start-up hook's own host work starts (1) or stops (0): left out too, counted apart. */
void maya_hook_pause(int begin);

/* Fill and append a record; dur_ns is taken from the call.  The device is the
 * current one unless the caller sets it. */
void maya_rec_init(maya_rec *r, uint8_t kind, maya_call c);
void maya_emit(maya_rec *r);
/* Append a record followed by n extra 64-bit words in CONT slots. */
void maya_emit_ext(maya_rec *r, const uint64_t *words, int n);
/* Id of a string in this trace; the first use writes it. 0 for NULL. */
uint64_t maya_str(const char *s);
/* Small per-thread index for records (0 = first thread seen). */
uint8_t maya_thread_index(void);
/* The emulated device clock, in ns: what CUDA events observe.  Each piece of
 * stream work advances it by a nominal microsecond, so elapsed times between
 * events (which programs use to autotune) are the same on every run, however
 * busy the emulating host is.  Libraries may advance it further. */
uint64_t maya_device_clock(void);
void maya_device_clock_advance(uint64_t ns);
/* Flush the buffer to disk (also at exit). */
void maya_trace_flush(void);
/* The same, unless another caller holds the writer (fatal-error paths). */
void maya_trace_flush_nowait(void);

/* Graph capture hooks the trace writer uses (cudart.c). */
struct maya_graph;
/* Non-NULL while `stream_id` is being captured. */
struct maya_graph *maya_capturing(uint32_t stream_id);
void maya_graph_append(struct maya_graph *g, const maya_rec *r, const uint64_t *ext, int n);

/* ---------------------------------------------------------------- memory */

/* Range allocator over one device's virtual address span. */
typedef struct maya_ranges maya_ranges;
maya_ranges *maya_ranges_new(uint64_t base, uint64_t size);
void maya_ranges_free_all(maya_ranges *r);
/* 0 when no free range fits. */
uint64_t maya_ranges_alloc(maya_ranges *r, uint64_t size, uint64_t align);
/* Size of the freed range, 0 if ptr is not the start of an allocation. */
uint64_t maya_ranges_release(maya_ranges *r, uint64_t ptr);
/* Allocation containing addr: its start and size; 0 if none. */
uint64_t maya_ranges_find(const maya_ranges *r, uint64_t addr, uint64_t *size);

/* Device memory: addresses from a reserved span per device, capacity enforced. */
int maya_mem_alloc(int dev, uint64_t size, uint64_t *ptr);   /* 0 ok, -1 out of memory */
int maya_mem_free(int dev_hint, uint64_t ptr, uint64_t *size_out);  /* 0 ok, -1 unknown */
/* Address-space reservation without capacity (expandable segments). */
int maya_va_reserve(int dev, uint64_t size, uint64_t align, uint64_t *ptr);
int maya_va_release(uint64_t ptr);
/* Capacity charged without an address (cuMemCreate); released with uncharge. */
int maya_mem_charge(int dev, uint64_t size);
void maya_mem_uncharge(int dev, uint64_t size);
/* Device owning an address, or -1 for host memory. */
int maya_mem_device_of(uint64_t addr);
/* Base and size of the allocation containing addr (0 if none). */
uint64_t maya_mem_lookup(uint64_t addr, uint64_t *size, int *dev);
void maya_mem_info(int dev, uint64_t *free_bytes, uint64_t *total_bytes);
uint64_t maya_mem_used(int dev);
uint64_t maya_mem_peak(int dev);
int maya_mem_oom_count(void);
/* Move bytes for a copy/memset of n bytes when n <= copy_limit; returns 1 if it did. */
int maya_mem_copy(void *dst, const void *src, uint64_t n);
int maya_mem_set(void *dst, int value, uint64_t n);

/* -------------------------------------------------------------- registry */

/* Kernel identity: host stub (or cudaKernel_t / CUfunction) to name. */
#define MAYA_KERNEL_INTS 6
typedef struct maya_func {
    const void *key;
    const char *name;       /* mangled device name */
    uint64_t func_id;       /* id in the trace, 0 until first launch */
    int max_threads, num_regs, static_smem;
    /* Parameters of plain integer type (from the demangled name, set with func_id):
     * their positions in the parameter list and sizes in bytes. */
    int n_ints;
    uint16_t int_index[MAYA_KERNEL_INTS];
    uint8_t int_size[MAYA_KERNEL_INTS];
    int n_params;           /* parameters in the demangled signature (set with n_ints); -1: it could not be split */
    int strided;            /* PyTorch's strided elementwise kernel: its closure's OffsetCalculator is read */
    int attention;          /* PyTorch's attention kernels: their parameter struct is read (kernel_args.c) */
    /* PyTorch's multi_tensor_apply kernels (foreach ops, fused optimizers): where their by-value tensor
     * list metadata keeps what each block works on (kernel_args.c); depth 0 for other kernels. */
    struct { uint16_t depth, tensors, numel, block_to_tensor, block_to_chunk; } lists;
    /* PyTorch's torch.cat kernels: the inputs their by-value metadata has room for, and the element's bytes
     * (kernel_args.c); batch 0 for other kernels. */
    struct { uint16_t batch; uint8_t bytes; } cat;
    /* What Maya's start-up hook worked out from an Inductor Triton kernel's source (maya_kernel_facts),
     * recorded as the launch's integer arguments: a Triton kernel's signature is no C++ name. */
    int n_facts;
    uint64_t facts[MAYA_KERNEL_INTS];
} maya_func;

void maya_registry_add(const void *key, const char *name);
maya_func *maya_registry_get(const void *key);
/* Emits the FUNC record on first use; returns the trace id. */
uint64_t maya_func_trace_id(maya_func *f);
/* Record one kernel launch; `args` (may be NULL) holds one pointer per kernel parameter. */
void maya_record_launch(maya_call c, maya_func *f, unsigned gx, unsigned gy, unsigned gz,
                        unsigned bx, unsigned by, unsigned bz, uint64_t smem, const void *stream,
                        uint32_t source, void *const *args);
/* Finds the first MAYA_KERNEL_INTS parameters of plain integer type (int, long, their unsigned
 * and long long forms) in a demangled kernel signature and sets n_params; returns how many.  A
 * signature whose brackets do not balance is left unread (n_params -1) and counted approximated. */
int maya_kernel_integer_params(const char *demangled, maya_func *f);
/* Reads those parameters of one launch of `blocks` blocks (`grid_y` in the grid's y) into out
 * (sign-extended); returns how many, 0 without args.  An index at or beyond n_params is never read: the
 * launch records none and counts an approximation. */
int maya_kernel_integer_args(const maya_func *f, void *const *args, uint64_t blocks, uint64_t grid_y, uint64_t *out);
/* Demangled form of a C++ name (malloc'd) or NULL. */
char *maya_demangle(const char *mangled);

/* ---------------------------------------------------- devices and streams */

int maya_current_device(void);
/* Trace id of a stream handle (0 = legacy default of the current device). */
uint32_t maya_stream_id(const void *stream);
/* Device that owns a stream. */
int maya_stream_device(const void *stream);

/* ----------------------------------------------------------- unsupported */

/* Log, count and trace a call that is not emulated.  Returns nothing; the
 * caller returns the API's own error code. */
void maya_unsupported(const char *api);
int maya_unsupported_count(void);
/* Count and trace (an APPROXIMATED record) a call that succeeded with an answer or a record a real
 * GPU might not give: an attribute answered 0, a descriptor accepted unchecked, work recorded
 * without its shape.  `what` names the approximation ("cuFuncGetAttribute: attribute 3 answered
 * 0"); `maya emulate` reports each name with its count. */
void maya_approximated(const char *what);
/* How many times `what` was approximated in this process (every name's total for NULL). */
int maya_approximated_count(const char *what);

void maya_log(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
void maya_die(const char *fmt, ...) __attribute__((format(printf, 1, 2), noreturn));

#endif
