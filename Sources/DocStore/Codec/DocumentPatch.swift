/// An encoded document changed where it lies: a value at a path of objects replaced, without decoding the rest.
///
/// Format 2 keeps no offsets, only the byte length of each array and object, so a replacement moves the bytes after
/// it and adds the difference to the lengths of the objects around it; ``sealed()`` then writes the checksum again.
/// A document of format 3 is patched as it is too: its root's offsets after the changed field move by the
/// difference, while they keep their width (a change that would take the values to another width of offsets
/// lays the document out in format 2 first, for the write to shape again). What an update of a few fields costs is
/// then a walk down their paths and one copy of the document.
struct DocumentPatch {
    private var bytes: [UInt8]

    /// A patch of `document` (of format 2 or 3); `nil` for a document of the version without a checksum (a change writes it again
    /// whole, in the current version), or one whose checksum does not hold (a change must not seal damaged bytes).
    init?(_ document: UnsafeRawBufferPointer) {
        guard (try? BinaryReader(document).checkChecksum()) == true else { return nil }
        switch document.first {
        case BinaryFormat.version, BinaryFormat.shapedVersion: bytes = Array(document)
        default: return nil
        }
    }

    /// Where the value at `path` lies: the offsets of the headers of the objects on its way below the root (and of
    /// the root, in format 2); in a document of format 3, the position of the root's field the path starts with and
    /// the root's layout; and the value. `nil` when a step is missing or not an object, or the bytes on the way are
    /// malformed.
    private func locate(_ path: FieldPath)
        -> (headers: [Int], root: (field: Int, layout: BinaryReader.Shaped)?, value: ValueRef)? {
        bytes.withUnsafeBytes { raw in
            let reader = BinaryReader(raw)
            guard var (current, shaped) = try? reader.rootAndShape() else { return nil }
            var headers: [Int] = [], root: (field: Int, layout: BinaryReader.Shaped)?
            for component in path.utf8Components {
                if let layout = shaped {
                    shaped = nil
                    let index = component.withUnsafeBytes { name in
                        layout.shape._withUnsafeGuaranteedRef { $0.index(of: name) }
                    }
                    guard let index, let value = try? reader.field(index, of: layout) else { return nil }
                    (root, current) = ((index, layout), value)
                    continue
                }
                guard current.tag == BinaryFormat.Tag.object else { return nil }
                headers.append(current.start)
                guard let next = try? component.withUnsafeBytes({ try reader.field(current, named: $0) }) else {
                    return nil
                }
                current = next
            }
            return (headers, root, current)
        }
    }

    /// The value at `path`; `nil` when there is none (see ``replace(at:with:)``).
    func value(at path: FieldPath) -> DocumentValue? {
        guard let (_, _, ref) = locate(path) else { return nil }
        return bytes.withUnsafeBytes { try? DocumentValue(reader: BinaryReader($0), ref: ref) }
    }

    /// Replaces the value at `path` with `value`; `false`, changing nothing, when there is no value there to
    /// replace (a step missing or not an object).
    mutating func replace(at path: FieldPath, with value: DocumentValue) -> Bool {
        guard !path.components.isEmpty, let (headers, root, old) = locate(path) else { return false }
        var writer = BinaryWriter(capacity: 16)
        value.write(to: &writer)
        let delta = writer.bytes.count - (old.end - (old.start - 1))
        var lengths: [UInt32] = []
        for header in headers {
            let length = bytes.withUnsafeBytes { $0.loadUnaligned(fromByteOffset: header, as: UInt32.self) }
            guard let changed = UInt32(exactly: Int(UInt32(littleEndian: length)) + delta) else { return false }
            lengths.append(changed)
        }
        if let root, delta != 0, !moveOffsets(after: root.field, of: root.layout, by: delta) {
            // The values would need offsets of another width: laid out in format 2, the document takes the change.
            guard let unshaped = bytes.withUnsafeBytes({ try? BinaryFormat.unshaped($0) }) else { return false }
            let shaped = bytes
            bytes = unshaped
            if replace(at: path, with: value) { return true }
            bytes = shaped
            return false
        }
        bytes.withUnsafeMutableBytes { raw in
            for (header, length) in zip(headers, lengths) {
                raw.storeBytes(of: length.littleEndian, toByteOffset: header, as: UInt32.self)
            }
        }
        bytes.replaceSubrange((old.start - 1)..<old.end, with: writer.bytes)
        return true
    }

    /// Adds `delta` to the offsets of the root's fields after field `field`, in a document of format 3 whose root
    /// is laid out as `layout`; `false`, changing nothing, when its values would then take offsets of another width
    /// than they have (``BinaryFormat/offsetWidth(_:)``).
    private mutating func moveOffsets(after field: Int, of layout: BinaryReader.Shaped, by delta: Int) -> Bool {
        let length = layout.end - layout.values + delta, width = layout.width
        guard length >= 0, width == BinaryFormat.offsetWidth(length) else { return false }
        // Offset k is where field k + 1 begins. Each is read and checked before any is written.
        let moved = bytes.withUnsafeBytes { raw in
            let reader = BinaryReader(raw)
            return (field..<max(field, layout.count - 1)).map { reader.offset($0, of: layout) + delta }
        }
        guard moved.allSatisfy({ $0 >= 0 && $0 <= length }) else { return false }
        bytes.withUnsafeMutableBytes { raw in
            for (k, value) in zip(field..., moved) {
                let at = layout.offsets + k * width
                switch width {
                case 1: raw[at] = UInt8(value)
                case 2: raw.storeBytes(of: UInt16(value).littleEndian, toByteOffset: at, as: UInt16.self)
                default: raw.storeBytes(of: UInt32(value).littleEndian, toByteOffset: at, as: UInt32.self)
                }
            }
        }
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
