#ifndef DOCSTORE_CLMDB_SHIM_H
#define DOCSTORE_CLMDB_SHIM_H
#include <lmdb.h>
#include <stddef.h>

/* Asks the processor to bring the `count` bytes at `bytes` into its caches, without waiting for them: a scan calls
   it for the document after the one it reads, so that the next one's cache lines arrive meanwhile. */
static inline void docstore_prefetch(const void *bytes, size_t count) {
    for (size_t offset = 0; offset < count; offset += 64) __builtin_prefetch((const char *)bytes + offset);
}
#endif
