/// Computes the index entries of one encoded document, from its bytes and the index's field paths.
///
/// The Swift API and tools without the Swift type both go through here, so they maintain the same entries.
enum IndexKeys {
    /// LMDB's compiled-in limit on key size (`mdb_env_get_maxkeysize`), which also bounds duplicate data.
    static let maximumKeySize = 511

    /// The keys `index` holds for the document whose root is `root`: none, one, or (multi) one per element.
    static func keys(of index: CollectionHandle.Index, reader: BinaryReader, root: ValueRef) throws -> [[UInt8]] {
        let kind = index.definition.kind
        switch kind {
        case .regular, .unique:
            var encoder = KeyEncoder(capacity: 32)
            for path in index.paths {
                if let ref = try path.layout.value(in: reader, from: root), ref.tag != BinaryFormat.Tag.null {
                    try encoder.append(ref, in: reader)
                } else {
                    if kind == .unique { return [] }
                    encoder.append(.null)
                }
            }
            return [encoder.bytes]
        case .multi:
            guard let path = index.paths.first,
                  let ref = try path.layout.value(in: reader, from: root), ref.tag != BinaryFormat.Tag.null else { return [] }
            if ref.tag != BinaryFormat.Tag.array { return [try KeyEncoder.key(ref, in: reader)] }
            // Each element's key once: looked for among those before it while they are few, in a set after that.
            var keys: [[UInt8]] = []
            keys.reserveCapacity(min(reader.count(ref), 16))
            var seen = Set<[UInt8]>()
            try reader.forEachElement(ref) { element in
                let key = try KeyEncoder.key(element, in: reader)
                if keys.count < 16 {
                    if !keys.contains(key) { keys.append(key) }
                    if keys.count == 16 { seen = Set(keys) }
                } else if seen.insert(key).inserted {
                    keys.append(key)
                }
            }
            return keys
        }
    }

    /// The values of an index's fields in a document, as text for messages: `"ann@example.com"`, `("Oslo", 42)`.
    static func describe(_ definition: IndexDefinition, reader: BinaryReader, root: ValueRef) -> String {
        let parts = definition.fields.map { describeValue(at: $0, reader: reader, root: root) }
        return parts.count == 1 ? parts[0] : "(" + parts.joined(separator: ", ") + ")"
    }

    /// The value at `path` as JSON text, for messages.
    static func describeValue(at path: FieldPath, reader: BinaryReader, root: ValueRef) -> String {
        guard let ref = try? reader.value(atPath: path, from: root),
              let value = try? DocumentValue(reader: reader, ref: ref) else { return "null" }
        return value.plainJSON()
    }
}
