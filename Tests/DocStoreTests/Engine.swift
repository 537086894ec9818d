import DocStore

// The engine the suites of this target run on: a file. The suites that hold for every engine run again on
// PostgreSQL in DocStorePostgresTests, which links these files and has its own `makeStore`.

/// Opens a new store in a fresh temporary directory. Keep the directory alive as long as the store.
func makeStore(options: DocStore.Options = .init()) async throws -> (DocStore, TemporaryDirectory) {
    let dir = TemporaryDirectory()
    return (try await DocStore(path: dir.path("store.db"), options: options), dir)
}
