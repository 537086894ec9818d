#ifndef DOCSTORE_CLMDB_SHIM_H
#define DOCSTORE_CLMDB_SHIM_H
#include <lmdb.h>
#include <stddef.h>
#include <stdint.h>

/* Asks the processor to bring the `count` bytes at `bytes` into its caches, without waiting for them: a scan calls
   it for the documents ahead of the one it reads, so that their cache lines arrive meanwhile. */
static inline void docstore_prefetch(const void *bytes, size_t count) {
    /* A large document's first kilobyte only: its whole would push out the documents read before it. */
    size_t end = count < 1024 ? count : 1024;
    for (size_t offset = 0; offset < end; offset += 64) __builtin_prefetch((const char *)bytes + offset);
}

/* The whole page of `pageSize` bytes (a power of two) that `inside` points into: the nodes of a walk's next entries.
   LMDB places a leaf's nodes from the end of its page down, so a walk forward moves down the page, where the
   prefetch of a document's bytes, forward from them, does not reach. */
static inline void docstore_prefetch_page(const void *inside, size_t pageSize) {
    const char *page = (const char *)((uintptr_t)inside & ~(uintptr_t)(pageSize - 1));
    for (size_t offset = 0; offset < pageSize; offset += 64) __builtin_prefetch(page + offset);
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
