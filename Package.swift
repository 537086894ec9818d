// swift-tools-version: 6.0
import PackageDescription

let package = Package(
    name: "DocStore",
    products: [
        .library(name: "DocStore", targets: ["DocStore"]),
        .executable(name: "docstore", targets: ["repl"]),
    ],
    targets: [
        .systemLibrary(
            name: "CLMDB",
            pkgConfig: "lmdb",
            providers: [.apt(["liblmdb-dev"])]
        ),
        .systemLibrary(
            name: "CReadline",
            providers: [.apt(["libreadline-dev"])]
        ),
        .target(
            name: "DocStore",
            dependencies: ["CLMDB"]
        ),
        // The `docstore` shell: the query language as text, commands, rendering, readline.
        .executableTarget(
            name: "repl",
            dependencies: ["DocStore", "CReadline"]
        ),
        // A child process for the crash-safety test: it writes batches and is killed mid-write.
        .executableTarget(
            name: "DocStoreCrashWriter",
            dependencies: ["DocStore"],
            path: "Tests/CrashWriter"
        ),
        .testTarget(
            name: "DocStoreTests",
            dependencies: ["DocStore", "DocStoreCrashWriter"]
        ),
        .testTarget(
            name: "ReplTests",
            dependencies: ["repl", "DocStore"]
        ),
    ],
    swiftLanguageModes: [.v6]
)
