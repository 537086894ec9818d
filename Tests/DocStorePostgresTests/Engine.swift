import Foundation
import DocStore
import DocStorePostgres
import Testing
import TestSupport

// The engine the suites of this target run on: PostgreSQL, on the tests' own cluster. The files beside this one
// that are links run the file engine's suites (DocStoreTests) unchanged on it.

/// Opens a new, empty store in a schema of its own on the tests' cluster. The directory is for what a test
/// writes beside the store (dumps, say).
func makeStore(options: DocStore.Options = .init()) async throws -> (DocStore, TemporaryDirectory) {
    if !PostgresCluster.isAvailable { try Test.cancel(Comment(rawValue: PostgresCluster.skipReason)) }
    let cluster = try PostgresCluster.shared()
    return (try await DocStore(postgres: cluster.freshURL(), options: options), TemporaryDirectory())
}

/// Whether this target's stores are kept on a server, where every read is a round trip.
let engineIsServer = true

/// The seeds a random test runs here: all of them on a file; on a server the first alone, so that the suites that
/// run on both engines stay within CI's time (`DOCSTORE_ALL_SEEDS=1` runs them all there too).
func engineSeeds<T>(_ seeds: [T]) -> [T] {
    engineIsServer && ProcessInfo.processInfo.environment["DOCSTORE_ALL_SEEDS"] == nil ? Array(seeds.prefix(1)) : seeds
}

/// Where a test's store called `name` lives beside `dir`: a schema of its own on the tests' cluster, named after
/// both. The same name gives the same store, so that a test can close it and open it again.
func storeLocation(_ dir: TemporaryDirectory, _ name: String) -> String {
    guard PostgresCluster.isAvailable, let cluster = try? PostgresCluster.shared() else { return "postgres://unavailable" }
    var hash: UInt64 = 0xCBF2_9CE4_8422_2325   // FNV-1a of the folder and the name
    for byte in (dir.path(name)).utf8 { hash = (hash ^ UInt64(byte)) &* 0x100_0000_01B3 }
    return cluster.url(schema: "t_" + String(hash, radix: 16))
}

/// Opens (or creates) the store at a ``storeLocation(_:_:)``, running `migrator` when one is given.
func openStore(_ location: String, options: DocStore.Options = .init(), migrator: Migrator? = nil) async throws
    -> DocStore {
    if !PostgresCluster.isAvailable { try Test.cancel(Comment(rawValue: PostgresCluster.skipReason)) }
    if let migrator { return try await DocStore(postgres: location, options: options, migrator: migrator) }
    return try await DocStore(postgres: location, options: options)
}

/// The ways this target's stores write that a suite runs its tests in: a server has one.
let writeModes: [WriteMode] = [.copies]

enum WriteMode: String, Sendable, CustomTestStringConvertible {
    case copies
    var testDescription: String { rawValue }
    func options(_ options: DocStore.Options = .init()) -> DocStore.Options { options }
    func check(_ store: DocStore) async {}
}
