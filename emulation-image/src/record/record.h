/* Record mode: the interposer's second build, libmaya_record.so, for machines
 * with a real GPU.  Nothing is emulated: every call reaches the real CUDA
 * libraries.  CUPTI (callbacks on the runtime and driver APIs, activity
 * records for kernels, copies and memsets) says what ran and for how long on
 * the device; thin wrappers around the cuBLAS(Lt), cuDNN and NCCL compute
 * calls describe those calls exactly as emulation does (blas_op.c), and the
 * kernels each call launched are attributed to it through CUPTI correlation
 * ids.  Operations are kept in host order and written at exit, each followed
 * by the DEVICE_TIME records of the device work it caused (TRACE_FORMAT.md).
 */
#ifndef MAYA_RECORD_H
#define MAYA_RECORD_H

#include "../maya.h"

/* A library call in progress on this thread: kernels launched until
 * record_lib_end are attributed to it. */
typedef struct { int op; maya_call call; } record_lib_call;

record_lib_call record_lib_begin(void);
/* Keep the finished call's record (head and continuation words, copied). */
void record_lib_end(record_lib_call c, const maya_rec *head, const uint64_t *ext, int n);
/* Attribute what is launched from now on this thread to an earlier call (NCCL
 * runs grouped collectives at ncclGroupEnd); -1 ends that. */
void record_attribute_to(int op);

/* The real function behind a wrapped symbol (the next definition after ours). */
void *record_real(const char *symbol);
#define REAL(fn) ((__typeof__(&fn))record_real(#fn))

#endif
