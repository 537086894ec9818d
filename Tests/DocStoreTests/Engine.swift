import Foundation
import DocStore
import Testing

// The engine the suites of this target run on: a file. The suites that hold for every engine run again on
// PostgreSQL in DocStorePostgresTests, which links these files and has its own `makeStore`.

/// Opens a new store in a fresh temporary directory. Keep the directory alive as long as the store.
func makeStore(options: DocStore.Options = .init()) async throws -> (DocStore, TemporaryDirectory) {
    let dir = TemporaryDirectory()
    return (try await DocStore(path: dir.path("store.db"), options: options), dir)
}

/// Whether this target's stores are kept on a server, where every read is a round trip.
let engineIsServer = false

/// The seeds a random test runs here: all of them on a file; on a server the first alone, so that the suites that
/// run on both engines stay within CI's time (`DOCSTORE_ALL_SEEDS=1` runs them all there too).
func engineSeeds<T>(_ seeds: [T]) -> [T] {
    engineIsServer && ProcessInfo.processInfo.environment["DOCSTORE_ALL_SEEDS"] == nil ? Array(seeds.prefix(1)) : seeds
}

/// Where a test's store called `name` lives beside `dir`: a file here, a schema on the server in
/// DocStorePostgresTests. The same name gives the same store, so that a test can close it and open it again.
func storeLocation(_ dir: TemporaryDirectory, _ name: String) -> String { dir.path(name) }

/// Opens (or creates) the store at a ``storeLocation(_:_:)``, running `migrator` when one is given.
func openStore(_ location: String, options: DocStore.Options = .init(), migrator: Migrator? = nil) async throws
    -> DocStore {
    if let migrator { return try await DocStore(path: location, options: options, migrator: migrator) }
    return try await DocStore(path: location, options: options)
}

/// The ways this target's stores write that a suite runs its tests in: copies of changed pages (the default), and
/// in place, in a file opened exclusively at `.off` (``DocStore/Options/exclusive``), where nested writes are undone
/// by notes of what they changed rather than by LMDB's nested transactions.
let writeModes: [WriteMode] = [.copies, .inPlace]

enum WriteMode: String, Sendable, CustomTestStringConvertible {
    case copies, inPlace
    var testDescription: String { rawValue }
    /// `options` made to write this way.
    func options(_ options: DocStore.Options = .init()) -> DocStore.Options {
        var options = options
        if self == .inPlace { (options.exclusive, options.durability) = (true, .off) }
        return options
    }

    /// Checks that `store` writes this way.
    func check(_ store: DocStore) async {
        let inPlace = await store.writesInPlace()
        #expect(inPlace == (self == .inPlace), "the store does not write \(self)")
    }
}
