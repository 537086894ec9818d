#ifndef DOCSTORE_CLIBPQ_SHIM_H
#define DOCSTORE_CLIBPQ_SHIM_H
#include <libpq-fe.h>
#endif
