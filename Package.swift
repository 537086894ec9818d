// swift-tools-version: 6.1
import Foundation
import PackageDescription

let package = Package(
    name: "DocStore",
    products: [
        .library(name: "DocStore", targets: ["DocStore"]),
        // The same store on a PostgreSQL server, through libpq: a product of its own, so that users of the file
        // engine link nothing more.
        .library(name: "DocStorePostgres", targets: ["DocStorePostgres"]),
        .executable(name: "docstore", targets: ["repl"]),
        .executable(name: "bench", targets: ["bench"]),
    ],
    traits: [
        // The bench's GRDB peer (`swift build -c release --traits GRDB --product bench`): off by default, so that a
        // package depending on DocStore neither resolves nor builds GRDB.
        .trait(name: "GRDB", description: "Builds the bench's GRDB peer"),
    ],
    dependencies: [
        // For the bench's GRDB peer only, behind the GRDB trait.
        .package(url: "https://github.com/groue/GRDB.swift", from: "7.10.0"),
    ],
    targets: [
        .systemLibrary(
            name: "CLMDB",
            pkgConfig: "lmdb",
            providers: [.apt(["liblmdb-dev"])]
        ),
        .systemLibrary(
            name: "CLibPQ",
            pkgConfig: "libpq",
            providers: [.apt(["libpq-dev"])]
        ),
        .systemLibrary(
            name: "CReadline",
            providers: [.apt(["libreadline-dev"])]
        ),
        .systemLibrary(
            name: "CSQLite",
            providers: [.apt(["libsqlite3-dev"])]
        ),
        .target(
            name: "DocStore",
            dependencies: ["CLMDB"],
            // The library's `async` functions run on their caller's executor (`nonisolated(nonsending)`): a query
            // from the main actor reads there, with no hop to the pool and back.
            swiftSettings: [.enableUpcomingFeature("NonisolatedNonsendingByDefault")]
        ),
        .target(
            name: "DocStorePostgres",
            dependencies: ["DocStore", "CLibPQ"]
        ),
        // Filter and sort throughput beside GRDB, SQLite's C API, raw LMDB, and PostgreSQL (DocStore on it, and
        // `jsonb` documents queried directly) on a throwaway cluster made as the tests make theirs.
        .executableTarget(
            name: "bench",
            dependencies: ["DocStore", "DocStorePostgres", "CLMDB", "CSQLite", "CLibPQ", "TestSupport",
                           .product(name: "GRDB", package: "GRDB.swift", condition: .when(traits: ["GRDB"]))]
        ),
        // The `docstore` shell: the query language as text, commands, rendering, readline.
        .executableTarget(
            name: "repl",
            dependencies: ["DocStore", "DocStorePostgres", "CReadline"]
        ),
        // A child process for the crash-safety test: it writes batches and is killed mid-write.
        .executableTarget(
            name: "DocStoreCrashWriter",
            dependencies: ["DocStore", "DocStorePostgres"],
            path: "Tests/CrashWriter"
        ),
        // What both test targets share: a trait for tests that block their thread.
        .target(
            name: "TestSupport",
            path: "Tests/Support"
        ),
        .testTarget(
            name: "DocStoreTests",
            dependencies: ["DocStore", "DocStoreCrashWriter", "TestSupport"]
        ),
        // The suites that hold for every engine (links to DocStoreTests' files), run on PostgreSQL.
        .testTarget(
            name: "DocStorePostgresTests",
            dependencies: ["DocStore", "DocStorePostgres", "DocStoreCrashWriter", "TestSupport"]
        ),
        // The Swift blocks of the README and the DocC articles, compiled.
        .testTarget(
            name: "DocumentationTests",
            dependencies: ["DocStore", "DocStorePostgres"]
        ),
        .testTarget(
            name: "ReplTests",
            dependencies: ["repl", "DocStore", "TestSupport"]
        ),
    ],
    swiftLanguageModes: [.v6]
)

// The DocC plugin, only to build the documentation (`DOCSTORE_DOCS=1 swift package generate-documentation
// --target DocStore`): a package that depends on DocStore, and the tests, resolve nothing more.
if ProcessInfo.processInfo.environment["DOCSTORE_DOCS"] != nil {
    package.dependencies.append(.package(url: "https://github.com/swiftlang/swift-docc-plugin", from: "1.5.0"))
}
