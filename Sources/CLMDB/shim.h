#ifndef DOCSTORE_CLMDB_SHIM_H
#define DOCSTORE_CLMDB_SHIM_H
#include <lmdb.h>
#endif
