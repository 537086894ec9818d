/// A stored document that does not decode as a Swift type, as ``DocStore/check(_:limit:)`` finds it.
public struct UndecodableDocument: Sendable, Equatable, CustomStringConvertible {
    public var collection: String
    /// The document's id, as its key shows it (JSON for a string or a number).
    public var id: String
    /// The dotted path of the field (`address.zip`, `tags.2`), or `(document)` for the whole document.
    public var field: String
    public var reason: String

    public var description: String { "collection '\(collection)', document \(id): field '\(field)': \(reason)" }
}

/// What ``DocStore/check(_:limit:)`` found: how many documents it decoded, and those that failed.
public struct DecodingCheck: Sendable, CustomStringConvertible {
    public var collection: String
    /// The Swift type the documents were decoded as.
    public var type: String
    public var documentsChecked: Int
    /// The failures, in id order, up to the check's limit.
    public var failures: [UndecodableDocument]
    /// Every failure, listed or not.
    public var failureCount: Int
    /// Stored fields the type never reads, with how many documents hold each: a field renamed in the store but
    /// not in the type (or the other way), whose values the type then never sees.
    public var unreadFields: [String: Int] = [:]
    /// Fields the type reads that no stored document holds: with an optional field, every document decodes with
    /// `nil` there.
    public var absentFields: [String] = []
    /// Whether every document decodes.
    public var isClean: Bool { failureCount == 0 }
    /// Whether the type reads every field the documents hold, and the documents hold every field the type reads
    /// (a field just added to the type, optional, is one no document holds yet).
    public var fieldsMatch: Bool { unreadFields.isEmpty && absentFields.isEmpty }

    public var description: String {
        var text = "checked \(documentsChecked) documents of '\(collection)' as \(type): "
            + (failureCount == 0 ? "every one decodes" : "\(failureCount) do not decode")
        for failure in failures { text += "\n  document \(failure.id): field '\(failure.field)': \(failure.reason)" }
        if failureCount > failures.count { text += "\n  (and \(failureCount - failures.count) more)" }
        for (field, count) in unreadFields.sorted(by: { $0.key < $1.key }) {
            text += "\n  field '\(field)' (in \(count) document\(count == 1 ? "" : "s")) is never read by \(type)"
        }
        for field in absentFields { text += "\n  no document holds \(type)'s field '\(field)'" }
        return text
    }
}

extension DocStore {
    /// Decodes every stored document of `T`'s collection with `T` as it is now, and lists those that fail, with
    /// their id, the field and the reason: run it against a copy of the production store before deploying a
    /// changed model, and write the migration its failures call for. Nothing is written; a collection that does not
    /// exist checks clean.
    ///
    /// For example:
    /// ```swift
    /// let check = try await store.check(Person.self)
    /// if !check.isClean { print(check) }      // document 42: field 'email': missing
    /// ```
    public func check<T: Document>(_ type: T.Type, limit: Int = 100) throws -> DecodingCheck {
        let schema = try TypeRegistry.schema(type)
        var check = DecodingCheck(collection: schema.collection, type: schema.typeName, documentsChecked: 0,
                                  failures: [], failureCount: 0)
        // The fields the type reads, to compare with those the documents hold.
        let read = try? FieldPathProbe<T>().fieldsRead()
        var tally = FieldTally()
        try withRead { context in
            guard let handle = try context.scope.handle(named: schema.collection) else { return }
            try context.txn.forEachEntry(in: handle.documents) { key, value in
                check.documentsChecked += 1
                if read != nil, let document = try? DocumentValue(encoded: Array(value)) {
                    tally.add(document)
                }
                do {
                    _ = try DocumentDecoder().decode(T.self, from: value)
                } catch {
                    check.failureCount += 1
                    guard check.failures.count < limit else { return }
                    let (field, reason) = (error as? DecodingError).map(DecodingFailure.describe)
                        ?? ("(document)", "\(error)")
                    check.failures.append(UndecodableDocument(
                        collection: schema.collection,
                        id: CollectionHandle.describeID(Array(key), in: Array(value), idPath: handle.info.idPath),
                        field: field, reason: reason))
                }
            }
        }
        if let read, check.documentsChecked > 0 {
            // How many documents hold each field, whatever its kinds.
            let stored = tally.dotted.mapValues { $0.values.reduce(0, +) }
            let holders = read.fields.union(read.anyKeys)
            func isRead(_ field: String) -> Bool {
                // The field, a field inside it, or a field holding it (an object or dictionary read whole).
                read.fields.contains(field) || read.fields.contains { $0.hasPrefix(field + ".") }
                    || holders.contains { field.hasPrefix($0 + ".") }
            }
            // Only the outermost field of an unread object is named.
            let unread = stored.filter { !isRead($0.key) }
            check.unreadFields = unread.filter { field in
                !unread.keys.contains { field.key.hasPrefix($0 + ".") }
            }
            check.absentFields = read.fields.filter { field in
                stored[field] == nil && !read.fields.contains { $0.hasPrefix(field + ".") }
                    && !read.anyKeys.contains { field.hasPrefix($0 + ".") }
            }.sorted()
        }
        return check
    }
}

/// The kinds of value each field of a collection holds, across its documents: what a tool without the Swift type
/// shows to find the fields a model would fail to decode (``DocStore/fieldKinds(of:)``).
public struct FieldKinds: Sendable, CustomStringConvertible {
    public var collection: String
    public var documents: Int
    /// Per field (dotted paths into nested objects; an array's elements are not looked into), how many documents
    /// hold each kind of value: `string`, `int`, `double`, `bool`, `null`, `date`, `uuid`, `bytes`, `array`,
    /// `object`, or `missing`.
    public var fields: [String: [String: Int]]

    /// The fields whose documents do not all hold one kind of value (a field some documents lack counts).
    public var mixed: [String] { fields.filter { $0.value.count > 1 }.keys.sorted() }

    public var description: String {
        var text = "collection '\(collection)': \(documents) documents, \(fields.count) fields, "
            + (mixed.isEmpty ? "each of one kind" : "\(mixed.count) of mixed kinds")
        for field in mixed {
            let kinds = fields[field, default: [:]].sorted { ($1.value, $0.key) < ($0.value, $1.key) }
            text += "\n  \(field): " + kinds.map { "\($0.key) \($0.value)" }.joined(separator: ", ")
        }
        return text
    }
}

extension DocStore {
    /// The kinds of value each field of `collection` holds across its documents, and so the fields of mixed kinds:
    /// those a Swift model declaring one type (and not optional) fails to decode somewhere.
    public func fieldKinds(of collection: String) throws -> FieldKinds {
        var result = FieldKinds(collection: collection, documents: 0, fields: [:])
        try withRead { context in
            guard let handle = try context.scope.handle(named: collection) else { return }
            var tally = FieldTally()
            try context.txn.forEachEntry(in: handle.documents) { _, value in
                tally.add(try DocumentValue(encoded: Array(value)))
            }
            result.documents = tally.documents
            var seen = tally.dotted
            // A field is missing from the documents that do not count it.
            for (field, kinds) in seen {
                let present = kinds.values.reduce(0, +)
                if present < result.documents { seen[field, default: [:]]["missing"] = result.documents - present }
            }
            result.fields = seen
        }
        return result
    }
}
