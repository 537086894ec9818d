// swift-tools-version: 6.0
import PackageDescription

let package = Package(
    name: "DocStore",
    products: [
        .library(name: "DocStore", targets: ["DocStore"]),
    ],
    targets: [
        .systemLibrary(
            name: "CLMDB",
            pkgConfig: "lmdb",
            providers: [.apt(["liblmdb-dev"])]
        ),
        .target(
            name: "DocStore",
            dependencies: ["CLMDB"]
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
    ],
    swiftLanguageModes: [.v6]
)
