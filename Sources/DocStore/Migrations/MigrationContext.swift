import Foundation

/// What a migration changes a store with: steps over the documents of a collection, without their Swift type, and
/// over the catalog. Every step keeps the collection's indexes up to date, and is recorded, in words, with the
/// migration.
///
/// Steps over fields take dotted paths into nested objects (`address.city`). A document without the field a step
/// names is left as it is. The id field of a collection cannot be renamed, removed or changed. For anything the
/// steps do not cover, ``transformDocuments(in:_:)`` runs a closure over each document, and ``context`` reads and
/// writes as in any write transaction.
public final class MigrationContext {
    /// The migration's write transaction, for queries and for writes of single documents.
    public let context: WriteContext
    let migration: String
    private(set) var steps: [String] = []

    init(context: WriteContext, migration: String) {
        self.context = context
        self.migration = migration
    }

    private var txn: any StorageTransaction { context.txn }
    private var scope: TransactionScope { context.scope }

    // MARK: Fields

    /// Renames a field in every document that has it; indexes on the field (or inside it) follow it.
    ///
    /// - Throws: ``DocStoreError/Code/migrationFailed`` when a document already has a field at `newPath`.
    public func renameField(_ path: FieldPath, to newPath: FieldPath, in collection: String) throws {
        let step = "rename field \(collection).\(path) to \(newPath)"
        steps.append(step)
        guard path != newPath else { return }
        try refuseIDChange(of: [path, newPath], in: collection, step: step)
        // The indexes that read the field are rebuilt on its new path once every document has it there. (A step
        // that fails halfway leaves the migration unable to commit, even if its body catches the error.)
        let moved = try indexes(of: collection).filter { $0.fields.contains { $0.isWithin(path) } }
        try txn.changingAtomically {
            for index in moved { try context.dropIndex(index.name, from: collection) }
            try rewrite(collection, step: step) { document in
                guard let value = document[path: path] else { return document }
                if document[path: newPath] != nil {
                    throw StepFailure("it already has a field '\(newPath)'")
                }
                return try placing(value, at: newPath, in: document.removing(at: path))
            }
            for index in moved {
                let fields = index.fields.map { $0.isWithin(path) ? $0.moved(from: path, to: newPath) : $0 }
                try context.createIndex(IndexDefinition(name: index.name, kind: index.kind, fields: fields),
                                        in: collection)
            }
        }
    }

    /// Gives every document without the field (or with a `null` there) the value `value`.
    public func addField(_ path: FieldPath, in collection: String, value: DocumentValue) throws {
        try addField(path, in: collection, step: "add field \(collection).\(path) = \(value.plainJSON())") { _ in value }
    }

    /// Gives every document without the field (or with a `null` there) the value `compute` makes from the
    /// document; where it returns `nil`, the document is left without the field.
    public func addField(_ path: FieldPath, in collection: String,
                         computed compute: (DocumentValue) throws -> DocumentValue?) throws {
        try addField(path, in: collection, step: "add field \(collection).\(path) computed", compute)
    }

    private func addField(_ path: FieldPath, in collection: String, step: String,
                          _ compute: (DocumentValue) throws -> DocumentValue?) throws {
        try apply(step, to: collection, touching: [path]) { document in
            if let present = document[path: path], present != .null { return document }
            guard let value = try compute(document) else { return document }
            return try placing(value, at: path, in: document)
        }
    }

    /// Removes a field from every document.
    ///
    /// - Throws: ``DocStoreError/Code/migrationFailed`` when an index reads the field: drop the index first.
    public func removeField(_ path: FieldPath, in collection: String) throws {
        try apply("remove field \(collection).\(path)", to: collection, touching: [path], removing: [path]) {
            $0.removing(at: path)
        }
    }

    /// Changes the kind of a field's value in every document: text to a number, a number to text, and so on
    /// (see ``FieldConversion``). `null` stays `null`.
    ///
    /// - Throws: ``DocStoreError/Code/migrationFailed`` naming the document and its value when a value cannot be
    ///   converted (`"12b"` to an integer, say); nothing of the migration is written.
    public func convertField(_ path: FieldPath, in collection: String, to kind: FieldConversion) throws {
        try convertField(path, in: collection, step: "convert field \(collection).\(path) to \(kind.rawValue)") {
            try kind.convert($0)
        }
    }

    /// Changes a field's text to dates written as `format` says, a pattern of Unicode's date fields read in the
    /// POSIX locale and in UTC unless it has a zone (see ``DateTextFormat``):
    /// `try m.convertField("day", in: "flights", to: .date, format: "MMM d yyyy")`. Dates stay as they are; `null`
    /// stays `null`.
    ///
    /// - Throws: ``DocStoreError/Code/migrationFailed`` when `kind` is not ``FieldConversion/date``, when the
    ///   pattern does not read a whole date, or, naming the document and its value, when a value is not text
    ///   written in that format; nothing of the migration is written.
    public func convertField(_ path: FieldPath, in collection: String, to kind: FieldConversion, format: String)
        throws {
        let step = "convert field \(collection).\(path) to \(kind.rawValue) written as \(format)"
        guard kind == .date else {
            throw DocStoreError(.migrationFailed, "\(step): only a date has a format; convert to \(kind.rawValue) "
                + "without one")
        }
        let dates: DateTextFormat
        do { dates = try DateTextFormat(format) } catch {
            throw DocStoreError(.migrationFailed, "\(step): \(error)")
        }
        try convertField(path, in: collection, step: step) { try kind.convert($0, format: dates) }
    }

    /// Replaces a field's value in every document that has it with what `convert` makes of it.
    public func convertField(_ path: FieldPath, in collection: String,
                             _ convert: (DocumentValue) throws -> DocumentValue) throws {
        try convertField(path, in: collection, step: "convert field \(collection).\(path) computed", convert)
    }

    private func convertField(_ path: FieldPath, in collection: String, step: String,
                              _ convert: (DocumentValue) throws -> DocumentValue) throws {
        try apply(step, to: collection, touching: [path]) { document in
            guard let value = document[path: path], value != .null else { return document }
            return document.setting(try convert(value), at: path)
        }
    }

    /// Splits a field in two or more: in every document that has it, `split` makes one value per path of `paths`
    /// (`nil` for none), and the field is removed unless it is one of `paths`.
    ///
    /// For example, `name: "Ann Lee"` into `first` and `last`:
    /// ```swift
    /// try m.splitField("name", into: ["first", "last"], in: "people") { name in
    ///     guard case .string(let s) = name else { return [nil, nil] }
    ///     let parts = s.split(separator: " ", maxSplits: 1).map { DocumentValue.string(String($0)) }
    ///     return [parts.first, parts.count > 1 ? parts[1] : nil]
    /// }
    /// ```
    /// - Throws: ``DocStoreError/Code/migrationFailed`` when `split` returns a number of values other than
    ///   `paths.count`, or when an index reads the field that is removed.
    public func splitField(_ path: FieldPath, into paths: [FieldPath], in collection: String,
                           _ split: (DocumentValue) throws -> [DocumentValue?]) throws {
        let step = "split field \(collection).\(path) into \(paths.map(\.description).joined(separator: ", "))"
        let removed = paths.contains(path) ? [] : [path]
        try apply(step, to: collection, touching: [path] + paths, removing: removed) { document in
            guard let value = document[path: path] else { return document }
            let parts = try split(value)
            guard parts.count == paths.count else {
                throw StepFailure("the split made \(parts.count) values for \(paths.count) fields")
            }
            var out = paths.contains(path) ? document : document.removing(at: path)
            for (target, part) in zip(paths, parts) {
                if let part { out = try placing(part, at: target, in: out) } else { out = out.removing(at: target) }
            }
            return out
        }
    }

    /// Merges fields into one: in every document that has at least one of `paths`, `merge` makes the new field's
    /// value from theirs (`nil` where one is missing), and the fields of `paths` other than `path` are removed.
    /// Where `merge` returns `nil`, the document is left without `path`.
    ///
    /// - Throws: ``DocStoreError/Code/migrationFailed`` when an index reads one of the fields that are removed.
    public func mergeFields(_ paths: [FieldPath], into path: FieldPath, in collection: String,
                            _ merge: ([DocumentValue?]) throws -> DocumentValue?) throws {
        let step = "merge fields \(paths.map { "\(collection).\($0)" }.joined(separator: ", ")) into \(path)"
        let removed = paths.filter { $0 != path }
        try apply(step, to: collection, touching: paths + [path], removing: removed) { document in
            let values = paths.map { document[path: $0] }
            guard values.contains(where: { $0 != nil }) else { return document }
            var out = removed.reduce(document) { $0.removing(at: $1) }
            if let merged = try merge(values) { out = try placing(merged, at: path, in: out) } else { out = out.removing(at: path) }
            return out
        }
    }

    /// Runs `transform` over every document of the collection: the document it returns replaces the stored one,
    /// and `nil` deletes it. The id must stay as it is.
    public func transformDocuments(in collection: String,
                                   _ transform: (DocumentValue) throws -> DocumentValue?) throws {
        try apply("transform documents of \(collection)", to: collection, touching: [], transform)
    }

    // MARK: Indexes and collections

    /// Adds an index and builds it from the documents (see ``WriteContext/createIndex(_:in:)``).
    public func createIndex(_ definition: IndexDefinition, in collection: String) throws {
        try context.createIndex(definition, in: collection)
        steps.append("create \(definition) on \(collection)")   // (once made: a refusal caught by the body made none)
    }

    /// Deletes an index and its entries, if the collection has it.
    public func dropIndex(_ name: String, from collection: String) throws {
        steps.append("drop index \(collection).\(name)")
        try context.dropIndex(name, from: collection)
    }

    /// Renames a collection, with its documents, its indexes and the saved filters that read it. Nothing happens
    /// when there is no collection `name`.
    ///
    /// - Throws: ``DocStoreError/Code/alreadyExists`` when a collection or a saved filter is named `newName` (the
    ///   migration then fails with ``DocStoreError/Code/migrationFailed``, this error its ``DocStoreError/underlying``,
    ///   as every error a step throws).
    public func renameCollection(_ name: String, to newName: String) throws {
        steps.append("rename collection \(name) to \(newName)")
        try context.checkWritable("rename collection '\(name)'", collection: name)
        try scope.renameCollection(name, to: newName)
    }

    /// Deletes a collection with its documents and indexes, if there is one.
    public func dropCollection(_ name: String) throws {
        steps.append("drop collection \(name)")
        try context.dropCollection(name)
    }

    // MARK: The walk

    /// Records `step`, refuses it when it would change the id (at one of `paths`) or remove a field an index reads
    /// (one of `removing`), then rewrites each document of `collection` with `change`.
    private func apply(_ step: String, to collection: String, touching paths: [FieldPath], removing: [FieldPath] = [],
                       _ change: (DocumentValue) throws -> DocumentValue?) throws {
        steps.append(step)
        try refuseIDChange(of: paths, in: collection, step: step)
        try refuseIndexed(removing, in: collection, step: step)
        // (A step that fails on one document after others were rewritten leaves the migration unable to commit,
        // even if its body catches the error: no step is committed half done.)
        try txn.changingAtomically { try rewrite(collection, step: step, change) }
    }

    /// The failure of a step on one document, named with it by ``rewrite(_:step:_:)``.
    private struct StepFailure: Error, CustomStringConvertible {
        let description: String
        init(_ description: String) { self.description = description }
    }

    /// `document` with `value` at `path`; refused when a field on the way holds something other than an object,
    /// which would leave the value nowhere (as an update refuses it).
    private func placing(_ value: DocumentValue, at path: FieldPath, in document: DocumentValue) throws -> DocumentValue {
        let placed = document.setting(value, at: path)
        guard placed[path: path] != nil else {
            throw StepFailure("'\(path)' cannot be set: a field on its way is not an object")
        }
        return placed
    }

    private func indexes(of collection: String) throws -> [IndexDefinition] {
        try scope.core.readInfo(collection, in: txn)?.indexes ?? []
    }

    private func refuseIDChange(of paths: [FieldPath], in collection: String, step: String) throws {
        guard let info = try scope.core.readInfo(collection, in: txn) else { return }
        if let path = paths.first(where: { info.idPath.isWithin($0) || $0.isWithin(info.idPath) }) {
            throw DocStoreError(.migrationFailed, "cannot \(step): '\(path)' is the id field of '\(collection)' (or "
                + "holds it), and a migration cannot change a document's id", collection: collection)
        }
    }

    private func refuseIndexed(_ paths: [FieldPath], in collection: String, step: String) throws {
        for index in try indexes(of: collection) {
            if let path = paths.first(where: { path in index.fields.contains { $0.isWithin(path) } }) {
                throw DocStoreError(.migrationFailed, "cannot \(step): index '\(index.name)' of '\(collection)' reads "
                    + "'\(path)', which this removes; drop the index first (in the same migration)",
                    collection: collection, index: index.name)
            }
        }
    }

    /// Replaces each document of `collection` with what `change` returns (deleting it on `nil`), through the
    /// collection's handle, so its index entries follow. Documents left equal are not written.
    private func rewrite(_ collection: String, step: String,
                         _ change: (DocumentValue) throws -> DocumentValue?) throws {
        try context.checkWritable("\(step)", collection: collection)
        guard let handle = try scope.handle(named: collection) else { return }
        // A batch of documents at a time, each batch after the last id of the one before: a collection of any size
        // is walked in bounded memory, and the writes never move a cursor that is walking.
        var after: [UInt8]?
        while true {
            let batch: [(id: [UInt8], stored: [UInt8])] = try txn.withPassingCursor(handle.documents) { cursor in
                cursor.expect(about: 513)   // (on a server, the batch in one window)
                var entry = try after.map { try cursor.seek(atLeast: $0) } ?? cursor.first()
                if let after, let (key, _) = entry, key.elementsEqual(after) { entry = try cursor.next() }
                var batch: [(id: [UInt8], stored: [UInt8])] = []
                while let (key, value) = entry, batch.count < 512 {
                    batch.append((Array(key), Array(value)))
                    entry = try cursor.next()
                }
                return batch
            }
            guard let last = batch.last else { return }
            after = last.id
            // Once a step wrote through the context, a document read with the batch may have changed or gone:
            // each after it is read again, so that its step is given it as it is.
            var wrote = false
            for (id, stored) in batch {
                try rewrite(id: id, stored: wrote ? nil : stored, of: handle, step: step) { document in
                    let changes = txn.changes
                    defer { if txn.changes != changes { wrote = true } }
                    return try change(document)
                }
            }
        }
    }

    /// One document of ``rewrite(_:step:_:)``, through the collection's one rewrite (bytes compared, the id kept).
    private func rewrite(id: [UInt8], stored: [UInt8]?, of handle: CollectionHandle, step: String,
                         _ change: (DocumentValue) throws -> DocumentValue?) throws {
        let collection = handle.name
        let name = { CollectionHandle.describeID(id, in: stored, idPath: handle.info.idPath) }
        try handle.rewrite(id: id, stored: stored, in: txn, idChanged: { _, _ in
            DocStoreError(.migrationFailed, "cannot \(step): document \(name()) of '\(collection)' would change its "
                + "id, which a migration cannot do", collection: collection)
        }) { raw in
            let document = try ElementKind<DocumentValue>.documentValue.decode(raw, from: handle, id: name)
            do {
                return try change(document).map { .replace($0.encoded()) } ?? .delete
            } catch let error as DocStoreError {
                throw error
            } catch let error as CollectionHandle.IDWidthChange {
                throw error   // (for the write to make the collection keep ids of any length, and run again)
            } catch {
                throw DocStoreError(.migrationFailed, "cannot \(step): document \(name()) of '\(collection)': "
                    + "\(error)", collection: collection, underlying: error)
            }
        }
    }
}

/// The kinds ``MigrationContext/convertField(_:in:to:)`` converts a value to.
public enum FieldConversion: String, Sendable, CaseIterable {
    /// Text: numbers as Swift prints them, `true`/`false`, dates in ISO 8601, UUIDs as text.
    case string
    /// A 64-bit integer: from text holding one (spaces around it allowed), a number with no fraction, a Bool (0, 1).
    case int
    /// A Double: from text holding a number, an integer, a Bool (0, 1).
    case double
    /// A Bool: from `true`/`false`/`yes`/`no`/`1`/`0` in text (any case), or the integers 0 and 1.
    case bool
    /// A date: from text in ISO 8601 (`2024-05-01`, `2024-05-01T10:30:00Z`, with a zone's offset or fractional
    /// seconds), or in the format given to ``MigrationContext/convertField(_:in:to:format:)``.
    case date

    /// `value` as this kind; throws, naming the value, when it has no such form. `format` says how text is written
    /// when converting it to a date (ISO 8601 without it).
    public func convert(_ value: DocumentValue, format: DateTextFormat? = nil) throws -> DocumentValue {
        if self == .date, case .string(let text) = value {
            let date = format.map { $0.date(from: text) } ?? DateTextFormat.iso8601(text)
            if let date { return .date(date) }
            throw ConversionFailure(value: value, kind: self, format: format?.pattern)
        }
        if let converted = converted(value) { return converted }
        throw ConversionFailure(value: value, kind: self)
    }

    private func converted(_ value: DocumentValue) -> DocumentValue? {
        switch (self, value) {
        case (_, .null): return .null
        case (.date, .date): return value
        case (.string, .string): return value
        case (.string, .int(let i)): return .string(String(i))
        case (.string, .uint(let u)): return .string(String(u))
        case (.string, .double(let d)): return .string(String(d))
        case (.string, .bool(let b)): return .string(b ? "true" : "false")
        case (.string, .date(let d)):
            // (With its fraction when it has one: the plain form drops it, and the text would name another date.)
            let whole = d.timeIntervalSinceReferenceDate.rounded(.down) == d.timeIntervalSinceReferenceDate
            return .string(whole ? d.formatted(.iso8601) : d.formatted(Date.ISO8601FormatStyle(includingFractionalSeconds: true)))
        case (.string, .uuid(let u)): return .string(u.uuidString)
        case (.int, .int), (.double, .double), (.bool, .bool): return value
        case (.int, .uint(let u)): return Int64(exactly: u).map { .int($0) }
        case (.int, .double(let d)): return Int64(exactly: d).map { .int($0) }
        case (.int, .bool(let b)): return .int(b ? 1 : 0)
        case (.int, .string(let s)):
            let text = s.trimmingCharacters(in: .whitespaces)
            if let i = Int64(text) { return .int(i) }
            return Double(text).flatMap { Int64(exactly: $0) }.map { .int($0) }
        case (.double, .int(let i)): return Double(exactly: i).map { .double($0) }   // (past 2^53 only if exact)
        case (.double, .uint(let u)): return Double(exactly: u).map { .double($0) }
        case (.double, .bool(let b)): return .double(b ? 1 : 0)
        case (.double, .string(let s)):
            return Double(s.trimmingCharacters(in: .whitespaces)).flatMap { $0.isFinite ? .double($0) : nil }
        case (.bool, .int(let i)) where i == 0 || i == 1: return .bool(i == 1)
        case (.bool, .uint(let u)) where u == 0 || u == 1: return .bool(u == 1)
        case (.bool, .string(let s)):
            switch s.trimmingCharacters(in: .whitespaces).lowercased() {
            case "true", "yes", "1": return .bool(true)
            case "false", "no", "0": return .bool(false)
            default: return nil
            }
        default: return nil
        }
    }
}

/// A value ``FieldConversion`` cannot convert.
public struct ConversionFailure: Error, Sendable, CustomStringConvertible {
    public let value: DocumentValue
    public let kind: FieldConversion
    /// The pattern dates were to be written in, for a conversion to a date with one.
    public var format: String?

    public init(value: DocumentValue, kind: FieldConversion, format: String? = nil) {
        self.value = value
        self.kind = kind
        self.format = format
    }

    public var description: String {
        if kind == .date {
            return "\(value.plainJSON()) is not a date " + (format.map { "written as \($0)" } ?? "in ISO 8601")
        }
        return "\(value.plainJSON()) has no \(kind.rawValue) form"
    }
}

extension FieldPath {
    /// Whether this path is `other` or inside it: `address.city` is within `address`.
    func isWithin(_ other: FieldPath) -> Bool { components.starts(with: other.components) }

    /// This path, within `old`, moved to within `new`.
    func moved(from old: FieldPath, to new: FieldPath) -> FieldPath {
        FieldPath(components: new.components + components.dropFirst(old.components.count))
    }
}
