#ifndef DOCSTORE_CLMDB_SHIM_H
#define DOCSTORE_CLMDB_SHIM_H
#include <lmdb.h>
#include <stddef.h>
#include <stdint.h>

/* Asks the processor to bring the `count` bytes at `bytes` into its caches, without waiting for them: a walk by ids
   calls it for the documents ahead of the one it reads, so that their cache lines arrive meanwhile. */
static inline void docstore_prefetch(const void *bytes, size_t count) {
    /* A large document's first kilobyte only: its whole would push out the documents read before it. */
    size_t end = count < 1024 ? count : 1024;
    for (size_t offset = 0; offset < end; offset += 64) __builtin_prefetch((const char *)bytes + offset);
}

/* Every cache line of the `count` bytes at `bytes`, however many: a walk of LMDB's pages asks for the next leaf's
   lines a few at a time (a whole page asked for at once lost most of its lines, which the processor drops when it
   has no room for them). */
static inline void docstore_prefetch_lines(const void *bytes, size_t count) {
    for (size_t offset = 0; offset < count; offset += 64) __builtin_prefetch((const char *)bytes + offset);
}

/* The 8 bytes at `bytes` (8-byte aligned), read from memory now, by a file check while another process may write
   them: no read after this one is made before it. */
static inline uint64_t docstore_load_acquire64(const void *bytes) {
    return __atomic_load_n((const uint64_t *)bytes, __ATOMIC_ACQUIRE);
}

/* The same, made after every read before it. */
static inline uint64_t docstore_load_after64(const void *bytes) {
    __atomic_thread_fence(__ATOMIC_ACQUIRE);
    return __atomic_load_n((const uint64_t *)bytes, __ATOMIC_RELAXED);
}

#endif
