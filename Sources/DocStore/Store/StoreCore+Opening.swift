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
        var configuration = StoreCore.configuration(options)
        configuration.readOnly = options.readOnly
        configuration.exclusive = options.exclusive
        // A machine that stopped before the last commits reached the disk: their record is applied first, before
        // anything reads the file's pages.
        do { try FileStorage.recover(path: path, configuration: configuration) } catch {
            throw DocStoreError(.cannotOpen, "cannot open a store at \(path)\(options.readOnly ? " read-only" : ""): "
                + "\(error)", underlying: error)
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
            case .openElsewhere:
                throw DocStoreError(.alreadyOpen, "cannot open \(path) exclusively (DocStore.Options.exclusive): "
                    + "another process has it open")
            case .openExclusivelyElsewhere:
                throw DocStoreError(.alreadyOpen, "cannot open \(path): another process has it open exclusively "
                    + "(DocStore.Options.exclusive) until it closes the store")
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
            return try FileStorage.compact(path: path, configuration: configuration(options)) { engine in
                try StoreCore.writeInCurrentFormat(in: engine, path: path)
            }
        } catch let error as StorageError {
            switch error {
            case .alreadyOpenInProcess:
                throw DocStoreError(.alreadyOpen, "cannot compact \(path): it is open in this process; close it first")
            case .openElsewhere:
                throw DocStoreError(.alreadyOpen, "cannot compact \(path): another process has it open; compaction "
                    + "needs the store to itself, and the store is left as it was")
            case .openExclusivelyElsewhere:
                throw DocStoreError(.alreadyOpen, "cannot compact \(path): another process has it open exclusively "
                    + "(DocStore.Options.exclusive); compaction needs the store to itself, and the store is left as "
                    + "it was")
            case .writtenMeanwhile:
                throw DocStoreError(.alreadyOpen, "cannot compact \(path): another process wrote to it while it was "
                    + "compacted; compaction needs the store to itself, and the store is left as it was, with that "
                    + "write")
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

    /// Writes every document of an older format again in format 3, in commits of at most `batch` documents: what a
    /// compaction does first, so that the compacted file holds the documents as writes now leave them. The values
    /// are the same bytes, so the index entries stay as they are. A document that cannot be read, or whose shape
    /// cannot be recorded (a name that is not UTF-8, the store's shapes all taken), is left as it is; so is every
    /// document of a store that records shapes but lost its salt's record. A file that is not a store is left for
    /// the rewrite to refuse.
    static func writeInCurrentFormat(in engine: any StorageEngine, path: String, batch: Int = 10_000) throws {
        // The salt, the format and the collections; the shapes recorded so far.
        let prepared: (salt: UInt64, collections: [String], shapes: [UInt64: [String]])? = try engine.write { txn in
            guard let meta = try txn.openKeySpace(Catalog.spaceName, create: false) else { return nil }
            let catalog = Catalog(space: meta, txn: txn, path: path)
            guard let format = try catalog.format(), format <= formatVersion else { return nil }
            if format < 3 { try catalog.setFormat(3) }
            let recorded = try catalog.shapes().shapes
            // A salt is made only where no shape is recorded, as an opening makes it: a store that lost its salt's
            // record keeps its shapes under the old one, which a new salt would refuse. Such a store writes format 2,
            // and its documents are left as they are.
            let kept = try catalog.shapeSalt()
            guard let salt = kept ?? (recorded.isEmpty ? UInt64.random(in: 1...UInt64.max) : nil) else { return nil }
            if kept == nil { try catalog.setShapeSalt(salt) }
            let shapes = Dictionary(recorded.map { ($0.id, $0.names) }, uniquingKeysWith: { first, _ in first })
            return (salt, try catalog.collections().map(\.name), shapes)
        }
        guard let prepared else { return }
        let salt = prepared.salt
        var shapes = prepared.shapes
        for collection in prepared.collections {
            var after: [UInt8]?
            repeat {
                // (What a transaction records is known once it commits: one run again, after the map grew, records
                // its shapes again.)
                (after, shapes) = try engine.write { txn -> ([UInt8]?, [UInt64: [String]]) in
                    var known = shapes
                    guard let meta = try txn.openKeySpace(Catalog.spaceName, create: false),
                          let documents = try txn.openKeySpace(Catalog.documentsSpace(collection), create: false) else {
                        return (nil, known)
                    }
                    let catalog = Catalog(space: meta, txn: txn, path: path)
                    // A batch's documents of older formats, read first: written back once the walk is over.
                    var older: [(key: [UInt8], value: [UInt8])] = []
                    let last: [UInt8]? = try txn.withCursor(documents) { cursor in
                        var entry = try after.map { try cursor.seek(atLeast: $0) } ?? cursor.first()
                        if let (key, _) = entry, let after, key.sameBytes(as: after) { entry = try cursor.next() }
                        var walked = 0
                        while let (key, value) = entry, walked < batch {
                            if value.first != BinaryFormat.shapedVersion { older.append((Array(key), Array(value))) }
                            walked += 1
                            if walked == batch { return Array(key) }
                            entry = try cursor.next()
                        }
                        return nil
                    }
                    for (key, value) in older {
                        // A document that does not read whole, or whose bytes disagree with its checksum, is left
                        // as it is: shaped, it would be sealed with a checksum of its damage.
                        guard (try? value.withUnsafeBytes({ try BinaryReader($0).checkChecksum() })) != nil,
                              (try? DocumentValue(encoded: value)) != nil else { continue }
                        let shaped = try? value.withUnsafeBytes { raw in
                            try BinaryFormat.shaped(raw, salt: salt) { names -> UInt64? in
                                if let recorded = known[names.id] { return names.strings == recorded ? names.id : nil }
                                guard known.count < shapeLimit, let strings = names.strings else { return nil }
                                try catalog.setShape(names.id, names: strings)
                                known[names.id] = strings
                                return names.id
                            }
                        }
                        if let shaped = shaped ?? nil { try txn.put(documents, key, shaped) }
                    }
                    return (last, known)
                }
            } while after != nil
        }
    }
}
