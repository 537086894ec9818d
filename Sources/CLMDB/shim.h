#ifndef DOCSTORE_CLMDB_SHIM_H
#define DOCSTORE_CLMDB_SHIM_H
#include <lmdb.h>
#include <stddef.h>
#include <stdint.h>

/* Asks the processor to bring the `count` bytes at `bytes` into its caches, without waiting for them: a scan calls
   it for the documents ahead of the one it reads, so that their cache lines arrive meanwhile. */
static inline void docstore_prefetch(const void *bytes, size_t count) {
    for (size_t offset = 0; offset < count; offset += 64) __builtin_prefetch((const char *)bytes + offset);
}

/* The 8 bytes at `bytes` (8-byte aligned), read from memory each time it is called, never from an earlier read:
   a file check reads a meta page's commit id before and after its other fields, while another process may write it. */
static inline uint64_t docstore_load_fresh64(const void *bytes) {
    return *(const volatile uint64_t *)bytes;
}
#endif
