/// An encoded document changed where it lies: a value at a path of objects replaced, without decoding the rest.
///
/// The format keeps no offsets, only the byte length of each array and object, so a replacement moves the bytes
/// after it and adds the difference to the lengths of the objects around it; ``sealed()`` then writes the checksum
/// again. What an update of a few fields costs is then a walk down their paths and one copy of the document.
struct DocumentPatch {
    private var bytes: [UInt8]

    /// A patch of `document` (of format 2 or 3); `nil` for a document of the version without a checksum (a change writes it again
    /// whole, in the current version), or one whose checksum does not hold (a change must not seal damaged bytes).
    init?(_ document: UnsafeRawBufferPointer) {
        guard (try? BinaryReader(document).checkChecksum()) == true else { return nil }
        switch document.first {
        case BinaryFormat.version: bytes = Array(document)
        case BinaryFormat.shapedVersion:
            // Its names put back in place: a patch works on fields laid out as format 2 lays them (the write
            // stores the result in format 3 again).
            guard let unshaped = try? BinaryFormat.unshaped(document) else { return nil }
            bytes = unshaped
        default: return nil
        }
    }

    /// Where the value at `path` lies: the offsets of the headers of the objects on its way (the root first), and
    /// the value. `nil` when a step is missing or not an object, or the bytes on the way are malformed.
    private func locate(_ path: FieldPath) -> (headers: [Int], value: ValueRef)? {
        bytes.withUnsafeBytes { raw in
            let reader = BinaryReader(raw)
            guard var current = try? reader.root() else { return nil }
            var headers: [Int] = []
            for component in path.utf8Components {
                guard current.tag == BinaryFormat.Tag.object else { return nil }
                headers.append(current.start)
                guard let next = try? component.withUnsafeBytes({ try reader.field(current, named: $0) }) else {
                    return nil
                }
                current = next
            }
            return (headers, current)
        }
    }

    /// The value at `path`; `nil` when there is none (see ``replace(at:with:)``).
    func value(at path: FieldPath) -> DocumentValue? {
        guard let (_, ref) = locate(path) else { return nil }
        return bytes.withUnsafeBytes { try? DocumentValue(reader: BinaryReader($0), ref: ref) }
    }

    /// Replaces the value at `path` with `value`; `false`, changing nothing, when there is no value there to
    /// replace (a step missing or not an object).
    mutating func replace(at path: FieldPath, with value: DocumentValue) -> Bool {
        guard !path.components.isEmpty, let (headers, old) = locate(path) else { return false }
        var writer = BinaryWriter(capacity: 16)
        value.write(to: &writer)
        let delta = writer.bytes.count - (old.end - (old.start - 1))
        var lengths: [UInt32] = []
        for header in headers {
            let length = bytes.withUnsafeBytes { $0.loadUnaligned(fromByteOffset: header, as: UInt32.self) }
            guard let changed = UInt32(exactly: Int(UInt32(littleEndian: length)) + delta) else { return false }
            lengths.append(changed)
        }
        bytes.withUnsafeMutableBytes { raw in
            for (header, length) in zip(headers, lengths) {
                raw.storeBytes(of: length.littleEndian, toByteOffset: header, as: UInt32.self)
            }
        }
        bytes.replaceSubrange((old.start - 1)..<old.end, with: writer.bytes)
        return true
    }

    /// The changed document, with the checksum of its new bytes.
    func sealed() -> [UInt8] {
        var writer = BinaryWriter(capacity: 0)
        writer.bytes = bytes
        writer.bytes.removeLast(BinaryFormat.checksumSize)
        writer.seal()
        return writer.bytes
    }
}
