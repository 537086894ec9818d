import Foundation

// Opening a store's file: the options of a ``DocStore`` as the file engine's configuration, and the errors of
// opening in the store's words.

extension StoreCore {
    convenience init(path: String, options: DocStore.Options) throws {
        let file = try StoreCore.openEnvironment(path: path, options: options)
        try self.init(path: path, engine: file, file: file, isReadOnly: options.readOnly,
                      checksChecksums: options.checkChecksums,
                      scan: ScanSettings(threads: max(1, options.scanThreads),
                                         documentsPerThread: options.documentsPerScanThread))
    }

    private static func openEnvironment(path: String, options: DocStore.Options) throws -> any FileStorageEngine {
        var isDirectory: ObjCBool = false
        if FileManager.default.fileExists(atPath: path, isDirectory: &isDirectory), isDirectory.boolValue {
            throw DocStoreError(.cannotOpen, "cannot open a store at \(path): it is a directory; give the path of a file")
        }
        let lockPath = path + "-lock"
        let lockExisted = FileManager.default.fileExists(atPath: lockPath)
        if options.readOnly {
            // LMDB would make a new environment of a missing or empty file, which it cannot write.
            guard let size = (try? FileManager.default.attributesOfItem(atPath: path))?[.size] as? Int else {
                throw DocStoreError(.cannotOpen, "cannot open a store at \(path) read-only: there is no such file "
                    + "(a store opened read-only is never created)")
            }
            if size == 0 {
                throw DocStoreError(.cannotOpen, "cannot open a store at \(path) read-only: the file is empty, so "
                    + "there is no store in it to read (a store opened read-only is never created)")
            }
        }
        if options.checkFile, let size = (try? FileManager.default.attributesOfItem(atPath: path))?[.size] as? Int,
           size > 0 {
            // Before LMDB reads a page: a damaged file is refused here rather than crashing the process later.
            let damage = FileStorage.check(path: path).damage
            if let first = damage.first {
                throw DocStoreError(.damagedFile, "\(path) is damaged: " + Catalog.describe(first)
                    + (damage.count > 1 ? " (and \(damage.count - 1) more problems)" : "")
                    + "; the structural check (DocStore.Options.checkFile) refused to open it")
            }
        }
        var configuration = StoreCore.configuration(options)
        configuration.readOnly = options.readOnly
        // What a commit syncs, and how often the file is synced in the background.
        switch options.durability {
        case .full: configuration.sync = .full
        case .normal: configuration.sync = .dataOnly
        case .off: configuration.sync = .none
        case .periodic(let ms): (configuration.sync, configuration.flushInterval) = (.none, .milliseconds(max(1, ms)))
        }
        do {
            return try FileStorage.open(path: path, configuration: configuration)
        } catch let error as StorageError {
            switch error {
            case .notAStore(let why):
                // The data file is not the engine's, so no process can be using the lock file just made beside it.
                if !lockExisted { try? FileManager.default.removeItem(atPath: lockPath) }
                throw DocStoreError(.notAStore, "\(path) is not a DocStore store: \(why)", underlying: error)
            case .lockFileUnavailable(let why):
                throw DocStoreError(.cannotOpen, "cannot open a store at \(path) read-only: its lock file \(lockPath) "
                    + "cannot be opened for writing (\(why)), and another process has the store open; "
                    + "reading it without the lock file is safe only while no process writes it", underlying: error)
            case .alreadyOpenInProcess:
                throw DocStoreError(.alreadyOpen, "\(path) is already open in this process; share that DocStore "
                    + "instead of opening it twice (LMDB allows one environment per file and process)")
            default:
                let how = options.readOnly ? " read-only" : ""
                var denied = false
                if case .permissionDenied = error, !options.readOnly { denied = true }
                throw DocStoreError(.cannotOpen, "cannot open a store at \(path)\(how): \(error)"
                    + (denied ? "; to read it without changing it, open it read-only (DocStore.Options.readOnly)" : ""),
                    underlying: error)
            }
        }
    }

    /// ``DocStore/compact(path:options:)``: the one other place that opens the storage, with no store around it.
    static func compact(path: String, options: DocStore.Options) throws -> (before: Int, after: Int) {
        guard let size = (try? FileManager.default.attributesOfItem(atPath: path))?[.size] as? Int, size > 0 else {
            throw DocStoreError(.cannotOpen, "cannot compact \(path): there is no store there")
        }
        do {
            return try FileStorage.compact(path: path, configuration: configuration(options))
        } catch let error as StorageError {
            switch error {
            case .alreadyOpenInProcess:
                throw DocStoreError(.alreadyOpen, "cannot compact \(path): it is open in this process; close it first")
            case .openElsewhere:
                throw DocStoreError(.alreadyOpen, "cannot compact \(path): another process has it open; compaction "
                    + "needs the store to itself, and the store is left as it was")
            case .notAStore(let why):
                throw DocStoreError(.notAStore, "\(path) is not a DocStore store: \(why)", underlying: error)
            case .damaged(let why):
                throw StoreCore.damagedFile(path, why)
            default:
                throw DocStoreError(.storage, "cannot compact \(path): \(error); the store is left as it was",
                                    underlying: error)
            }
        }
    }

    /// The engine's sizes as `options` give them: what opening and compacting share.
    private static func configuration(_ options: DocStore.Options) -> FileStorage.Configuration {
        .init(initialMapSize: options.initialMapSize,
              maximumMapSize: max(options.maximumMapSize, options.initialMapSize),
              maxDatabases: options.maxDatabases, maxReaders: options.maxReaders)
    }
}
