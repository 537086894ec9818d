import Foundation
import Glibc

/// What a dump held, or what a restore made.
public struct DumpSummary: Sendable, Equatable, CustomStringConvertible {
    public var collections = 0
    public var documents = 0
    public var indexes = 0
    public var savedFilters = 0
    public var migrations = 0

    public var description: String {
        "\(collections) collection\(collections == 1 ? "" : "s"), \(documents) document\(documents == 1 ? "" : "s"), "
            + "\(indexes) index\(indexes == 1 ? "" : "es"), \(savedFilters) saved filter\(savedFilters == 1 ? "" : "s"), "
            + "\(migrations) migration record\(migrations == 1 ? "" : "s")"
    }
}

extension DocStore {
    /// Whether the file at `path` is the lock file of a store this process has open: one the process must not open
    /// to read, even to say what it is. Closing any descriptor of a file lets go of every `fcntl` lock the process
    /// holds on it, and a store's locks on its lock file are how other processes know which of its reads are alive.
    package static func isLockFileOfOpenStore(_ path: String) -> Bool { FileStorage.isOpenLockFile(path) }
}

/// Dump and restore: the whole store as text, which any later version of DocStore reads back into an equal store.
///
/// A dump is NDJSON, one JSON object per line: a header, then the catalog (each collection with its id path and
/// indexes, each saved filter, each applied migration), then every document, then an end line with the counts, by
/// which a dump cut short is refused. Values are written so that each reads back as the kind it was (``ExtendedJSON``;
/// the Transactions article describes the format): a restore gives documents equal to the dumped ones, field order
/// included.
extension DocStore {
    static let dumpFormat: Int64 = 1

    /// Writes the store, as of one commit, to the file at `path` as a dump (replacing it only once it is whole).
    @discardableResult
    @concurrent public nonisolated func dump(to path: String) async throws -> DumpSummary {
        try refuseWritingOverItself(path, "dump")
        let partial = path + ".incomplete"
        // The dump holds what the store holds: it may be read by whom the store may be. (A file left there by a dump
        // cut short is made anew: opened as it is, it would keep its own permissions.)
        unlink(partial)
        let fd: Int32
        do { fd = try FileStorage.createFile(partial, mode: storeFileMode()) } catch {
            throw DocStoreError(.cannotOpen, "cannot write a dump to \(path): \(error)", underlying: error)
        }
        do {
            let summary: DumpSummary
            do { summary = try await dump(toDescriptor: fd) } catch {
                Glibc.close(fd)
                throw error
            }
            guard Glibc.close(fd) == 0 else { throw DocStoreError.system(.storage, "cannot write a dump to \(path)") }
            try mapErrors { try DurableFile.replace(path, with: partial) }
            return summary
        } catch {
            unlink(partial)
            throw error
        }
    }

    /// Writes the store, as of one commit, to an open file descriptor as a dump. The descriptor stays open.
    ///
    /// The dump runs in one read transaction, as a ``read(_:)`` does: writers in other processes go on meanwhile,
    /// and this process's writes wait until it ends. To dump a store a server is writing, dump a backup of it
    /// (``backup(to:compact:)``, which no writer waits for) instead.
    @discardableResult
    @concurrent public nonisolated func dump(toDescriptor fd: Int32) async throws -> DumpSummary {
        let origin = path
        return try await read { ctx in
            var out = DumpWriter(fd: fd)
            var summary = DumpSummary()
            let infos = try ctx.collections()
            let header: DocumentValue = .object([
                ("docstore", .string("dump")), ("format", .int(DocStore.dumpFormat)), ("from", .string(origin)),
                ("at", .date(Date())),
            ])
            try out.line(header)
            for info in infos {
                let count = try Query<DocumentValue>(info.name).count(in: ctx)
                try out.line(.object([
                    ("collection", .string(info.name)), ("idPath", info.idPath.dumped),
                    ("indexes", .array(info.indexes.map(DocStore.dumped))), ("documents", .int(Int64(count))),
                ]))
                summary.collections += 1
                summary.indexes += info.indexes.count
            }
            for filter in try ctx.savedFilters() {
                guard case .object(let fields) = try filter.stored else { continue }
                try out.line(.object([DocumentValue.Field("filter", .string(filter.name))] + fields.dropFirst()))
                summary.savedFilters += 1
            }
            for record in try ctx.appliedMigrations() {
                try out.line(.object([("migration", .string(record.name)), ("position", .int(Int64(record.position))),
                                      ("appliedAt", .date(record.appliedAt)),
                                      ("steps", .array(record.steps.map { .string($0) }))]))
                summary.migrations += 1
            }
            if let known = try ctx.scope.catalog.knownMigrations() {
                try out.line(.object([("knownMigrations", .array(known.map { .string($0) }))]))
            }
            for info in infos {
                guard let handle = try ctx.scope.handle(named: info.name) else { continue }
                var prefix: [UInt8] = []
                ExtendedJSON.write(.object([("in", .string(info.name)), ("document", .null)]), to: &prefix)
                prefix.removeLast("null}".utf8.count)
                try ctx.txn.forEachEntry(in: handle.documents) { key, raw in
                    try out.line(prefix: prefix, document: raw, checksum: handle.checksChecksums) {
                        // A document that cannot be written is reported as a read of it would report it.
                        _ = try ElementKind<DocumentValue>.documentValue.decode(raw, from: handle) {
                            CollectionHandle.describeID(Array(key), in: Array(raw), idPath: info.idPath)
                        }
                    }
                    summary.documents += 1
                }
            }
            try out.line(.object([("end", .string("dump")), ("documents", .int(Int64(summary.documents)))]))
            try out.flush()
            return summary
        }
    }

    /// Builds this store from the dump in the file at `path`. The store must be empty (no collection, saved
    /// filter or migration record); everything is restored in one write transaction, so a dump that is cut short
    /// or damaged, or a document it cannot take, leaves the store empty, with an error naming the line.
    @discardableResult
    public func restore(from path: String) throws -> DumpSummary {
        guard !FileStorage.isOpenLockFile(path) else {
            throw DocStoreError(.cannotOpen, "cannot read a dump from \(path): it is the lock file of a store this "
                + "process has open, which reading would let go of its locks")
        }
        let fd = Glibc.open(path, O_RDONLY | O_CLOEXEC)
        guard fd >= 0 else { throw DocStoreError.system(.cannotOpen, "cannot read a dump from \(path)") }
        defer { Glibc.close(fd) }
        return try restore(fromDescriptor: fd, origin: path)
    }

    /// Builds this store from a dump read from an open descriptor (standard input, say), to its end. See
    /// ``restore(from:)``.
    @discardableResult
    public func restore(fromDescriptor fd: Int32) throws -> DumpSummary {
        try restore(fromDescriptor: fd, origin: "the input")
    }

    /// ``restore(fromDescriptor:)``, whose errors name the dump as `origin`; `alreadyRead` is the dump's beginning
    /// when the caller has read it from the descriptor already (the shell looks at a first line).
    @discardableResult
    package func restore(fromDescriptor fd: Int32, origin: String, alreadyRead: String = "") throws
        -> DumpSummary {
        // A write that outgrows the map runs again with a larger one, from the dump's first line: a dump that cannot
        // be read again from its start (a pipe, or one partly read) is first copied into a temporary file, unlinked
        // at once.
        var source = fd
        var copy: Int32 = -1
        defer { if copy >= 0 { Glibc.close(copy) } }
        var start = lseek(fd, 0, SEEK_CUR)
        if start < 0 || !alreadyRead.isEmpty {
            copy = try DocStore.spooled(fd, after: alreadyRead, origin: origin)
            source = copy
            start = 0
        }
        return try restore(origin: origin) {
            guard lseek(source, start, SEEK_SET) == start else {
                throw DocStoreError.system(.storage, "cannot read \(origin) again")
            }
            return DumpLines(fd: source)
        }
    }

    /// A temporary file, already unlinked, holding `prefix` and then what `fd` reads to its end; positioned at its
    /// start.
    private static func spooled(_ fd: Int32, after prefix: String, origin: String) throws -> Int32 {
        var template = Array((FileManager.default.temporaryDirectory.path + "/docstore-restore-XXXXXX").utf8CString)
        let copy = template.withUnsafeMutableBufferPointer { mkstemp($0.baseAddress!) }
        guard copy >= 0 else { throw DocStoreError.system(.storage, "cannot make a temporary copy of \(origin)") }
        template.withUnsafeBufferPointer { _ = unlink($0.baseAddress!) }
        var lines = DumpLines(fd: fd)
        do {
            try DumpWriter.writeAll(Array(prefix.utf8)[...], to: copy)
            while let bytes = try lines.chunk() { try DumpWriter.writeAll(bytes[...], to: copy) }
        } catch {
            Glibc.close(copy)
            throw error
        }
        lseek(copy, 0, SEEK_SET)
        return copy
    }

    private func restore(origin: String, lines makeLines: () throws -> DumpLines) throws -> DumpSummary {
        try checkWritable("restore a dump")
        return try withWrite { ctx in
            if let info = try ctx.collections().first {
                throw DocStoreError(.alreadyExists, "cannot restore \(origin) into \(path): the store is not empty (it "
                    + "has collection '\(info.name)'); restore into a new store", collection: info.name)
            }
            if try !ctx.savedFilters().isEmpty || !ctx.appliedMigrations().isEmpty {
                throw DocStoreError(.alreadyExists, "cannot restore \(origin) into \(path): the store is not empty (it "
                    + "has saved filters or migration records); restore into a new store")
            }
            var restore = Restore(ctx: ctx, origin: origin)
            var lines = try makeLines()
            while let (number, line) = try lines.next() {
                restore.line = number
                try restore.take(line)
            }
            return try restore.finish()
        }
    }

    fileprivate static func dumped(_ index: IndexDefinition) -> DocumentValue {
        .object([("name", .string(index.name)), ("kind", .string(index.kind.rawValue)),
                 ("fields", .array(index.fields.map(\.dumped)))])
    }
}

/// One restore's state, line by line.
private struct Restore {
    let ctx: WriteContext
    let origin: String
    var line = 0
    var sawHeader = false
    var ended = false
    var builder = StoreBuilder()
    var expected: [String: Int] = [:]
    var counts: [String: Int] = [:]
    var known: [String]?
    var summary = DumpSummary()
    /// On an engine with round trips, documents of one collection wait here, up to 512, so that what their checks
    /// read is asked for in one round trip rather than one each (``flush()``).
    var waiting: [(line: Int, document: DocumentValue)] = []
    var waitingIn: String?

    func failure(_ what: String) -> DocStoreError {
        DocStoreError(.corruptDocument, "cannot restore \(origin): line \(line): \(what); nothing was restored")
    }

    func text(_ value: DocumentValue?, _ field: String) throws -> String {
        guard case .string(let s)? = value else { throw failure("'\(field)' is missing or not text") }
        return s
    }

    func path(_ value: DocumentValue?, _ field: String) throws -> FieldPath {
        guard let value, let path = FieldPath(dumped: value) else {
            throw failure("'\(field)' is missing or not a field's path")
        }
        return path
    }

    mutating func take(_ text: Substring) throws {
        if text.allSatisfy(\.isWhitespace) { return }
        let value: DocumentValue
        do { value = try ExtendedJSON.read(text) } catch { throw failure("\(error)") }
        guard !ended else { throw failure("text after the end of the dump") }
        guard sawHeader else {
            guard value[field: "docstore"] == .string("dump") else {
                throw failure("this is not a DocStore dump (it does not begin with a dump's header line)")
            }
            guard case .int(let format)? = value[field: "format"], format <= DocStore.dumpFormat else {
                throw failure("the dump's format is \(value[field: "format"]?.json() ?? "missing"); this build reads "
                    + "format \(DocStore.dumpFormat) and older")
            }
            sawHeader = true
            return
        }
        if let document = value[field: "document"] {
            let name = try self.text(value[field: "in"], "in")
            guard expected[name] != nil else { throw failure("a document of '\(name)', which the catalog lacks") }
            if ctx.txn.prefersBatches {
                if waitingIn != name { try flush() }
                waitingIn = name
                waiting.append((line, document))
                if waiting.count == 512 { try flush() }
            } else {
                try add(document, to: name)
            }
            counts[name, default: 0] += 1
            summary.documents += 1
            return
        }
        try flush()
        if let name = value[field: "collection"], value[field: "filter"] == nil {
            let name = try self.text(name, "collection")
            try Catalog.validateName(name, what: "collection")
            guard expected[name] == nil else { throw failure("collection '\(name)' is described twice") }
            var indexes: [IndexDefinition] = []
            if case .array(let list)? = value[field: "indexes"] {
                for entry in list {
                    guard let kind = IndexKind(rawValue: try self.text(entry[field: "kind"], "kind")),
                          case .array(let fields)? = entry[field: "fields"] else {
                        throw failure("an index of '\(name)' has no kind or fields")
                    }
                    indexes.append(IndexDefinition(name: try self.text(entry[field: "name"], "name"), kind: kind,
                                                   fields: try fields.map { try self.path($0, "fields") }))
                }
            }
            let info = CollectionInfo(name: name, idPath: try self.path(value[field: "idPath"], "idPath"),
                                      indexes: indexes)
            guard case .int(let expected)? = value[field: "documents"] else {
                throw failure("collection '\(name)' has no count of documents")
            }
            try builder.begin(info, in: ctx)
            self.expected[name] = Int(expected)
            summary.collections += 1
        } else if let name = value[field: "filter"] {
            let name = try self.text(name, "filter"), filter: SavedFilter
            do {
                filter = try SavedFilter(stored: value.setting(.string(name), at: "name"))
            } catch let error as DocStoreError {
                throw failure("the saved filter '\(name)' is damaged: \(error.message)")
            }
            try ctx.saveFilter(filter)
            summary.savedFilters += 1
        } else if let name = value[field: "migration"] {
            guard case .int(let position)? = value[field: "position"], case .date(let at)? = value[field: "appliedAt"],
                  case .array(let steps)? = value[field: "steps"] else {
                throw failure("the migration record is incomplete")
            }
            let record = AppliedMigration(name: try self.text(name, "migration"), position: Int(position),
                                          appliedAt: at, steps: try steps.map { try self.text($0, "steps") })
            try ctx.scope.catalog.setMigration(record)
            summary.migrations += 1
        } else if case .array(let names)? = value[field: "knownMigrations"] {
            known = try names.map { try self.text($0, "knownMigrations") }
        } else if value[field: "end"] == .string("dump") {
            guard case .int(let total)? = value[field: "documents"], Int(total) == summary.documents else {
                throw failure("the end line counts \(value[field: "documents"]?.json() ?? "no") documents, and the "
                    + "dump held \(summary.documents)")
            }
            ended = true
        } else {
            throw failure("a line of no kind a dump writes: \(value.json().prefix(80))")
        }
    }

    /// Writes the documents waiting, what their checks read asked for at once; a refusal names its document's line.
    mutating func flush() throws {
        guard let name = waitingIn, !waiting.isEmpty else { return }
        let batch = waiting
        (waiting, waitingIn) = ([], nil)
        let reached = line
        let encoded = try builder.readAhead(batch.map(\.document), to: name, in: ctx)
        for ((number, document), bytes) in zip(batch, encoded) {
            line = number
            try add(document, to: name, encoded: bytes)
        }
        line = reached
    }

    func add(_ document: DocumentValue, to collection: String, encoded: [UInt8]? = nil) throws {
        do {
            try builder.add(document, to: collection, replacing: false, in: ctx, encoded: encoded)
        } catch let error as DocStoreError {
            throw failure(error.message)
        }
    }

    mutating func finish() throws -> DumpSummary {
        try flush()
        guard sawHeader else { throw failure("the input is empty: there is no dump in it") }
        guard ended else {
            throw failure("the dump ends without its end line: it was cut short")
        }
        for info in builder.collections {
            let expected = self.expected[info.name, default: 0]
            guard counts[info.name, default: 0] == expected else {
                throw failure("collection '\(info.name)' should have \(expected) documents, and the dump held "
                    + "\(counts[info.name, default: 0])")
            }
            for index in info.indexes {
                do {
                    try ctx.createIndex(index, in: info.name)
                } catch let error as DocStoreError {
                    throw failure(error.message)
                }
                summary.indexes += 1
            }
        }
        if let known { try ctx.scope.catalog.setKnownMigrations(known) }
        return summary
    }
}

extension DocStoreError {
    /// The error for a system call that failed: `what`, then the reason `errno` gives.
    static func system(_ code: Code, _ what: String) -> DocStoreError {
        DocStoreError(code, "\(what): \(String(cString: strerror(errno)))")
    }
}

/// Buffered writes of dump lines to a descriptor.
private struct DumpWriter {
    let fd: Int32
    var buffer: [UInt8] = []

    mutating func line(_ value: DocumentValue) throws {
        ExtendedJSON.write(value, to: &buffer)
        buffer.append(0x0A)
        if buffer.count >= 1 << 16 { try flush() }
    }

    /// A document's line: `prefix`, the stored document's text, and the closing brace. When the document cannot
    /// be written (damaged bytes, a checksum that does not match), `failed` throws the error to report.
    mutating func line(prefix: [UInt8], document raw: UnsafeRawBufferPointer, checksum: Bool,
                       failed: () throws -> Void) throws {
        let mark = buffer.count
        do {
            let reader = BinaryReader(raw)
            if checksum { try reader.checkChecksum() }
            buffer.append(contentsOf: prefix)
            try ExtendedJSON.write(reader: reader, ref: try reader.root(), to: &buffer)
        } catch {
            buffer.removeSubrange(mark...)
            try failed()
            throw error
        }
        buffer.append(contentsOf: "}\n".utf8)
        if buffer.count >= 1 << 16 { try flush() }
    }

    mutating func flush() throws {
        try DumpWriter.writeAll(buffer[...], to: fd)
        buffer.removeAll(keepingCapacity: true)
    }

    static func writeAll(_ bytes: ArraySlice<UInt8>, to fd: Int32) throws {
        var bytes = bytes
        while !bytes.isEmpty {
            let n = bytes.withUnsafeBytes { Foundation.write(fd, $0.baseAddress, $0.count) }
            if n < 0 {
                if errno == EINTR { continue }
                throw DocStoreError.system(.storage, "cannot write the dump")
            }
            bytes = bytes.dropFirst(n)
        }
    }
}

/// The lines of a dump read from a descriptor, numbered from 1.
private struct DumpLines {
    let fd: Int32
    var pending: [UInt8] = []
    var start = 0
    /// Where the search for the next newline goes on: the bytes before it hold none.
    var scanned = 0
    var number = 0
    var atEnd = false

    mutating func next() throws -> (Int, Substring)? {
        while true {
            // A line ends at a newline, or, the last one, at the end of the input.
            let newline = pending[max(start, scanned)...].firstIndex(of: 0x0A)
            if newline != nil || (atEnd && start < pending.count) {
                let end = newline ?? pending.count
                let line = String(decoding: pending[start..<end], as: UTF8.self)
                start = min(end + 1, pending.count)
                scanned = start
                number += 1
                return (number, line[...])
            }
            if atEnd { return nil }
            scanned = pending.count
            try fill()
        }
    }

    /// The next bytes read, as they come (for a copy), or `nil` at the end.
    mutating func chunk() throws -> [UInt8]? {
        pending.removeAll(keepingCapacity: true)
        start = 0
        scanned = 0
        while pending.isEmpty && !atEnd { try fill() }
        return pending.isEmpty ? nil : pending
    }

    private mutating func fill() throws {
        if start > 0 {
            pending.removeFirst(start)
            scanned -= start
            start = 0
        }
        var chunk = [UInt8](repeating: 0, count: 1 << 16)
        while true {
            let n = chunk.withUnsafeMutableBytes { Foundation.read(fd, $0.baseAddress, $0.count) }
            if n < 0 {
                if errno == EINTR { continue }
                throw DocStoreError.system(.storage, "cannot read the dump")
            }
            if n == 0 { atEnd = true } else { pending.append(contentsOf: chunk[..<n]) }
            return
        }
    }
}
