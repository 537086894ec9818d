// The system SQLite, for the bench's C-API peer.
#include <sqlite3.h>

// SQLITE_TRANSIENT is a cast of -1 to a function pointer, which Swift cannot import.
static inline sqlite3_destructor_type docstore_sqlite_transient(void) { return SQLITE_TRANSIENT; }
