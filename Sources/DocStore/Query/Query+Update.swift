import Foundation

/// One change an update makes to a document, without its Swift type.
public enum FieldChange: Sendable, Hashable, CustomStringConvertible {
    /// Sets the field, making the objects on its way where they are missing.
    case set(FieldPath, DocumentValue)
    /// Removes the field (nothing, if it is missing).
    case unset(FieldPath)
    /// Adds a number to the field's number; a missing or `nil` field becomes the number. Numbers add as Swift adds
    /// them: integers exactly, to an `Int64` (a `UInt64` past `Int64.max` when an unsigned number above it was
    /// added; an overflow is an error); with a `Double` on either side, as Doubles.
    case increment(FieldPath, DocumentValue)
    /// Appends a value to the field's array; a missing or `nil` field becomes an array of the value.
    case push(FieldPath, DocumentValue)
    /// Removes every element equal to the value (as index keys compare: `3` equals `3.0`) from the field's array.
    case pull(FieldPath, DocumentValue)

    public var path: FieldPath {
        switch self {
        case .set(let p, _), .unset(let p), .increment(let p, _), .push(let p, _), .pull(let p, _): return p
        }
    }

    public var description: String {
        switch self {
        case .set(let p, let v): return "set \(p) = \(v.plainJSON())"
        case .unset(let p): return "unset \(p)"
        case .increment(let p, let v): return "increment \(p) by \(v.plainJSON())"
        case .push(let p, let v): return "push \(v.plainJSON()) onto \(p)"
        case .pull(let p, let v): return "pull \(v.plainJSON()) from \(p)"
        }
    }

    /// The changes of the dictionary form, in a fixed order: sets, unsets, increments, pushes, pulls, each by path.
    static func list(set: [FieldPath: DocumentValue], unset: [FieldPath], increment: [FieldPath: DocumentValue],
                     push: [FieldPath: DocumentValue], pull: [FieldPath: DocumentValue]) -> [FieldChange] {
        func sorted(_ d: [FieldPath: DocumentValue]) -> [(FieldPath, DocumentValue)] {
            d.sorted { $0.key.description < $1.key.description }.map { ($0.key, $0.value) }
        }
        return sorted(set).map { .set($0, $1) } + unset.map { .unset($0) } + sorted(increment).map { .increment($0, $1) }
            + sorted(push).map { .push($0, $1) } + sorted(pull).map { .pull($0, $1) }
    }
}

extension DocumentValue {
    /// This document with `changes` applied in order; an error names the change that cannot apply and why.
    func applying(_ changes: [FieldChange]) throws(UpdateRefusal) -> DocumentValue {
        var document = self
        for change in changes {
            let path = change.path
            let current = document[path: path] ?? .null
            func refusal(_ reason: String, _ code: DocStoreError.Code = .invalidUpdate) -> UpdateRefusal {
                UpdateRefusal(code: code, change: change, reason: reason)
            }
            // The field's new value; an unset, and a pull from nothing, leave none to set.
            let value: DocumentValue
            switch change {
            case .set(_, let new):
                value = new
            case .unset:
                document = document.removing(at: path)
                continue
            case .increment(_, let amount):
                guard let sum = DocumentValue.incremented(current, by: amount) else {
                    if DocumentValue.isNumber(current) && DocumentValue.isNumber(amount) {
                        throw refusal("the sum does not fit in a 64-bit integer", .overflow)
                    }
                    throw refusal(DocumentValue.isNumber(amount) ? "the field holds \(current.kindName), not a number"
                                                                 : "\(amount.plainJSON()) is not a number")
                }
                value = sum
            case .push(_, let element), .pull(_, let element):
                let elements: [DocumentValue]
                switch current {
                case .null: elements = []
                case .array(let existing): elements = existing
                default: throw refusal("the field holds \(current.kindName), not an array")
                }
                if case .push = change {
                    value = .array(elements + [element])
                } else {
                    guard current != .null else { continue }
                    let key = KeyEncoder.key(element)
                    value = .array(elements.filter { KeyEncoder.key($0) != key })
                }
            }
            document = document.setting(value, at: path)
            guard document[path: path] != nil else { throw refusal("a field on its way is not an object") }
        }
        return document
    }

    /// This object without the field at `path` (unchanged when it is missing).
    func removing(at path: FieldPath) -> DocumentValue {
        removing(at: path.components[...])
    }

    private func removing(at path: ArraySlice<String>) -> DocumentValue {
        guard let name = path.first, case .object(var fields) = self,
              let i = fields.firstIndex(where: { $0.name == name }) else { return self }
        if path.count == 1 {
            fields.remove(at: i)
        } else {
            fields[i].value = fields[i].value.removing(at: path.dropFirst())
        }
        return .object(fields)
    }

    /// What an increment by `amount` makes of `current`: the amount for a field that is `nil`, else the sum;
    /// `nil` when they do not add up (not numbers, or an overflow).
    static func incremented(_ current: DocumentValue, by amount: DocumentValue) -> DocumentValue? {
        switch (current, amount) {
        case (.null, .int), (.null, .uint), (.null, .double): return amount
        default: return adding(current, amount)
        }
    }

    static func isNumber(_ v: DocumentValue) -> Bool {
        switch v {
        case .int, .uint, .double: return true
        default: return false
        }
    }

    /// What kind of value this is, for messages: "a string", "an array".
    var kindName: String {
        switch self {
        case .null: return "nil"
        case .bool: return "a Boolean"
        case .int, .uint, .double: return "a number"
        case .string: return "a string"
        case .bytes: return "bytes"
        case .date: return "a date"
        case .uuid: return "a UUID"
        case .array: return "an array"
        case .object: return "an object"
        }
    }
}

/// Why a change cannot apply to a document, before the document is named.
struct UpdateRefusal: Error {
    var code: DocStoreError.Code
    var change: FieldChange
    var reason: String
}

extension CollectionHandle {
    /// Replaces document `id` with what `change` makes of its bytes (`nil`: leave it as it is), keeping every index
    /// right; `false` when there is no such document. An update may not change or remove the id.
    func update(id: [UInt8], stored: [UInt8]? = nil, in txn: any StorageTransaction,
                _ change: (UnsafeRawBufferPointer) throws -> [UInt8]?) throws -> Bool {
        try rewrite(id: id, stored: stored, in: txn, idChanged: { newID, why in
            let old = CollectionHandle.describeID(id, in: nil, idPath: info.idPath)
            guard let newID else {
                return DocStoreError(.invalidUpdate, "an update may not remove a document's id: document \(old) of "
                    + "collection '\(name)' would have none (\(why))", collection: name)
            }
            return DocStoreError(.invalidUpdate, "an update may not change a document's id: document \(old) of "
                + "collection '\(name)' would get id \(newID)", collection: name)
        }) { raw in try change(raw).map(Rewrite.replace) ?? .keep }
    }

    /// A stored document with `changes` applied, encoded; `nil` when they change nothing.
    fileprivate func changed(_ raw: UnsafeRawBufferPointer, id: [UInt8], _ changes: [FieldChange]) throws -> [UInt8]? {
        if let patched = DocumentPatch.applying(changes, to: raw) {
            return patched.withUnsafeBytes { $0.sameBytes(as: raw) } ? nil : patched
        }
        let old = try DocumentValue(encoded: Array(raw))
        let new: DocumentValue
        do { new = try old.applying(changes) } catch {
            let document = old[path: info.idPath]?.plainJSON() ?? CollectionHandle.hex(id)
            throw DocStoreError(error.code, "cannot \(error.change) in document \(document) of collection '\(name)': "
                + "\(error.reason)", collection: name)
        }
        // Compared as bytes: `==` would call a NaN changed and -0.0 the same as 0.
        let bytes = new.encoded()
        return bytes.withUnsafeBytes { $0.sameBytes(as: raw) } ? nil : bytes
    }
}

extension DocumentPatch {
    /// `changes` made on the stored document where it lies, when each sets or increments a value it holds; `nil`
    /// otherwise (a field to add or remove, an array to change, a change that is refused), for the caller to apply
    /// them to the decoded document, which also says why a change is refused.
    static func applying(_ changes: [FieldChange], to raw: UnsafeRawBufferPointer) -> [UInt8]? {
        guard var patch = DocumentPatch(raw) else { return nil }
        for change in changes {
            switch change {
            case .set(let path, let value):
                guard patch.replace(at: path, with: value) else { return nil }
            case .increment(let path, let amount):
                guard let current = patch.value(at: path), let sum = DocumentValue.incremented(current, by: amount),
                      patch.replace(at: path, with: sum) else { return nil }
            case .unset, .push, .pull:
                return nil
            }
        }
        return patch.sealed()
    }
}

extension Query {
    /// Applies `changes` to every result (within the slice, when sliced), with their index entries, and returns
    /// how many documents matched. A change that cannot apply to one of them (an increment of a string), a unique
    /// conflict, or a change of the id throws, and nothing of the update is written: the transaction is as it was
    /// before the call.
    ///
    /// For example: `try Query<DocumentValue>("people").include(filter).update(in: ctx, [.set("city", .string("Bergen"))])`.
    ///
    /// On a query of a model type, each changed document must still decode as that type: a change that would leave
    /// one that does not (a field set to a value of another kind, a required field unset) throws
    /// ``DocStoreError/Code/invalidUpdate`` naming the document and the field, and nothing is written. (The
    /// documents of a large update are changed and decoded on several threads at once,
    /// ``DocStore/Options/scanThreads``: the type's `init(from:)` must be safe to run so, as a `Decodable` type's
    /// nearly always is.)
    @discardableResult
    public func update(in context: WriteContext, _ changes: [FieldChange]) throws -> Int {
        let typed = Element.self != DocumentValue.self
        return try updateInSlices(in: context, nested: true) { handle, id, raw, _ in
            guard let bytes = try handle.changed(raw, id: id, changes) else { return nil }
            if typed {
                do {
                    _ = try bytes.withUnsafeBytes { new in
                        try kind.decode(new, from: handle) { CollectionHandle.describeID(id, in: bytes, idPath: handle.info.idPath) }
                    }
                } catch let error as DocStoreError {
                    throw DocStoreError(.invalidUpdate, "cannot \(changes.map(\.description).joined(separator: ", ")) "
                        + "on a query of \(kind.typeName()): \(error.message)", collection: handle.name,
                        underlying: error)
                }
            }
            return bytes
        }
    }

    /// Sets, unsets, increments, pushes onto and pulls from fields of every result, in that order; returns how many
    /// documents matched. See ``FieldChange``.
    ///
    /// For example: `try q.update(in: ctx, set: ["city": .string("Bergen")], increment: ["age": .int(1)])`.
    @discardableResult
    public func update(in context: WriteContext, set: [FieldPath: DocumentValue] = [:], unset: [FieldPath] = [],
                       increment: [FieldPath: DocumentValue] = [:], push: [FieldPath: DocumentValue] = [:],
                       pull: [FieldPath: DocumentValue] = [:]) throws -> Int {
        try update(in: context, FieldChange.list(set: set, unset: unset, increment: increment, push: push, pull: pull))
    }

    /// Replaces every result with what `change` makes of its stored bytes (`nil`: leave it as it is); returns how
    /// many matched. The documents are read a slice at a time; `change` makes each slice's new bytes on up to the
    /// store's scan threads at once (``DocStore/Options/scanThreads``), and they are written in the results' order
    /// on this thread. So `change` must share nothing it changes, and touch no transaction. The error is the one the
    /// documents met first in the results' order, `change`'s or the write's (a unique conflict, a changed id);
    /// `nested` as in ``updateEach(in:nested:_:)``.
    func updateInSlices(in context: WriteContext, nested: Bool,
                        _ change: (CollectionHandle, [UInt8], UnsafeRawBufferPointer, LastShape) throws -> [UInt8]?)
        throws -> Int {
        try updating(in: context, nested: nested) { handle, ids, txn in
            let threads = context.scope.core.scan.threads
            var matched = 0
            var start = 0
            while start < ids.count {
                // A slice: at most 8,192 documents and about 8 MiB of them (512 at once on an engine with round
                // trips), copied, for the writes before theirs may move the pages they lie on.
                var slice: [(id: [UInt8], stored: [UInt8])] = []
                var bytes = 0
                let step = txn.prefersBatches ? 512 : 8_192
                if txn.prefersBatches {
                    try txn.prefetch(ids.arrays(start..<min(ids.count, start + step)).map { (handle.documents, $0) })
                }
                while start < ids.count && slice.count < step && bytes < 8 << 20 {
                    let id = ids[start]
                    start += 1
                    guard let stored = try txn.copiedValue(handle.documents, id) else { continue }
                    slice.append((id, stored))
                    bytes += stored.count
                }
                // Each new document with its index keys, where they can be worked out without the transaction,
                // made on helper threads too, and written in order as they come.
                try SlicedWork.run(slice.count, threads: threads, start: LastShape.init, { last, i in
                    let (id, stored) = slice[i]
                    let new = try stored.withUnsafeBytes { try change(handle, id, $0, last) }
                    return (new, new.flatMap { handle.replacement(of: stored, id: id, by: $0) })
                }, consume: { i, made in
                    matched += 1
                    let (new, replacement) = try made.get()
                    if let replacement {
                        try handle.write(replacement, in: txn)
                    } else if let new {
                        _ = try handle.update(id: slice[i].id, stored: slice[i].stored, in: txn) { _ in new }
                    }
                })
            }
            return matched
        }
    }

    /// Runs `change` on every result's id; returns how many matched. With `nested`, in a transaction nested in the
    /// context's (given to `change`), so that the update is all or none on its own: one that throws leaves the
    /// context's transaction as it was before, as a refused insert does, and the caller may catch the error and go
    /// on. Without (a closure of the caller's runs for each document, and may use the context, which a nested
    /// transaction would bar), one that throws after changing some documents leaves a transaction that cannot
    /// commit.
    func updateEach(in context: WriteContext, nested: Bool,
                    _ change: (CollectionHandle, [UInt8], any StorageTransaction) throws -> Bool) throws -> Int {
        try updating(in: context, nested: nested) { handle, ids, txn in
            var matched = 0
            // Each document changed in turn; on an engine with round trips, 512 documents read at once first.
            let step = txn.prefersBatches ? 512 : max(ids.count, 1)
            for start in stride(from: 0, to: ids.count, by: step) {
                let batch = ids.arrays(start..<min(ids.count, start + step))
                if txn.prefersBatches { try txn.prefetch(batch.map { (handle.documents, $0) }) }
                for id in batch where try change(handle, id, txn) { matched += 1 }
            }
            return matched
        }
    }

    /// `body` given the results' ids, their collection and the transaction it changes them in: one nested in the
    /// context's, or the context's own, changed atomically (``updateEach(in:nested:_:)``); what it returns.
    private func updating(in context: WriteContext, nested: Bool,
                          _ body: (CollectionHandle, IDList, any StorageTransaction) throws -> Int) throws -> Int {
        try requireDocuments("update")
        try context.checkWritable("update documents of '\(collection)'", collection: collection)
        guard let executor = try documents.executor(in: context, writing: true) else { return 0 }
        let ids = try executor.resultIDs()
        if nested { return try context.txn.nested { try body(executor.handle, ids, $0) } }
        var result = 0
        try context.txn.changingAtomically { result = try body(executor.handle, ids, context.txn) }
        return result
    }
}

extension Query where Element: Document {
    /// Decodes every result, lets `change` modify it, and saves it with its index entries; returns how many
    /// documents matched. `change` may not change the id. A document that no longer decodes, a unique conflict or
    /// an error `change` throws stops the update, and the transaction cannot commit (`change` may read and write
    /// through the context, which a transaction nested for the update alone would bar).
    ///
    /// For example: `try Person.include(#Predicate { $0.city == "Oslo" }).update(in: ctx) { $0.city = "Bergen" }`.
    @discardableResult
    public func update(in context: WriteContext, _ change: (inout Element) throws -> Void) throws -> Int {
        let last = LastShape()
        return try updateEach(in: context, nested: false) { handle, id, txn in
            try handle.update(id: id, in: txn) { raw in try changed(raw, handle: handle, id: id, last: last, change) }
        }
    }

    /// ``update(in:_:)`` for a `change` that may run on several threads at once: the documents are decoded,
    /// changed and encoded on up to the store's scan threads (``updateInSlices(in:nested:_:)``). What
    /// ``DocStore``'s `update(in:_:)` runs.
    func updateConcurrently(in context: WriteContext, _ change: @Sendable (inout Element) throws -> Void) throws
        -> Int {
        try updateInSlices(in: context, nested: false) { handle, id, raw, last in
            try changed(raw, handle: handle, id: id, last: last, change)
        }
    }

    /// A stored document decoded, changed by `change`, and encoded again.
    private func changed(_ raw: UnsafeRawBufferPointer, handle: CollectionHandle, id: [UInt8], last: LastShape?,
                         _ change: (inout Element) throws -> Void) throws -> [UInt8]? {
        var element = try kind.decode(raw, from: handle) {
            CollectionHandle.describeID(id, in: Array(raw), idPath: handle.info.idPath)
        }
        try change(&element)
        return try handle.encoded(element, last: last)
    }

}

extension WriteContext {
    /// Applies `changes` to the document of `collection` whose id is `id`, with its index entries; `false` when
    /// there is none. What a tool runs on the documents it counted and confirmed.
    @discardableResult
    public func update(_ collection: String, id: DocumentValue, _ changes: [FieldChange]) throws -> Bool {
        try checkWritable("update a document of '\(collection)'", collection: collection)
        guard let handle = try scope.handle(named: collection) else { return false }
        // All or none on its own: every check comes before the first change (CollectionHandle.write).
        let key = KeyEncoder.key(id)
        return try handle.update(id: key, in: txn) { raw in try handle.changed(raw, id: key, changes) }
    }
}
