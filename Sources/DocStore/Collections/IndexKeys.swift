/// Computes the index entries of one encoded document, from its bytes and the index's field paths.
///
/// The Swift API and tools without the Swift type both go through here, so they maintain the same entries.
enum IndexKeys {
    /// LMDB's compiled-in limit on key size (`mdb_env_get_maxkeysize`), which also bounds duplicate data.
    static let maximumKeySize = 511

    /// The keys `index` holds for the document whose root is `root`: none, one, or (multi) one per element.
    static func keys(of index: CollectionHandle.Index, reader: BinaryReader, root: ValueRef) throws -> [[UInt8]] {
        try keys(kind: index.definition.kind, paths: index.paths, reader: reader, root: root)
    }

    /// ``keys(of:reader:root:)``, each handed to `body` in turn: an index of one key per document makes its key in
    /// `encoder` (emptied first), with nothing allocated once the encoder has room.
    static func forEachKey(kind: IndexKind, paths: [CompiledPath], reader: BinaryReader, root: ValueRef,
                           encoder: inout KeyEncoder, _ body: (UnsafeRawBufferPointer) throws -> Void) throws {
        guard kind != .multi else {
            for key in try keys(kind: kind, paths: paths, reader: reader, root: root) { try key.withUnsafeBytes(body) }
            return
        }
        encoder.removeAll()
        if try encodeKey(kind: kind, paths: paths, reader: reader, root: root, into: &encoder) {
            try encoder.bytes.withUnsafeBytes(body)
        }
    }

    /// Appends the one key of a regular or unique index to `encoder`; false when a unique index has none (a field
    /// missing or null).
    @inline(__always)
    private static func encodeKey(kind: IndexKind, paths: [CompiledPath], reader: BinaryReader, root: ValueRef,
                                  into encoder: inout KeyEncoder) throws -> Bool {
        for path in paths {
            if let ref = try path.layout.value(in: reader, from: root), ref.tag != BinaryFormat.Tag.null {
                try encoder.append(ref, in: reader)
            } else {
                if kind == .unique { return false }
                encoder.append(.null)
            }
        }
        return true
    }

    static func keys(kind: IndexKind, paths: [CompiledPath], reader: BinaryReader, root: ValueRef) throws -> [[UInt8]] {
        switch kind {
        case .regular, .unique:
            var encoder = KeyEncoder(capacity: 32)
            return try encodeKey(kind: kind, paths: paths, reader: reader, root: root, into: &encoder) ? [encoder.bytes] : []
        case .multi:
            guard let path = paths.first,
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
