/// An encoded document changed where it lies: a value at a path of objects replaced, without decoding the rest.
///
/// A replacement moves the bytes after it: it adds the difference to the lengths of the objects around it, and to
/// the entries of their field tables that lie after it; ``sealed()`` then writes the checksum again. What an update of a few fields costs is then a walk down their paths and one copy of the document.
struct DocumentPatch {
    private var bytes: [UInt8]

    /// A patch of `document`; `nil` for a document of an earlier version (a change writes it again whole, in the
    /// current version), or one whose checksum does not hold (a change must not seal damaged bytes).
    init?(_ document: UnsafeRawBufferPointer) {
        guard document.first == BinaryFormat.version, (try? BinaryReader(document).checkChecksum()) == true else {
            return nil
        }
        bytes = Array(document)
    }

    /// Where the value at `path` lies: the objects on its way (the root first), and the value. `nil` when a step
    /// is missing or not an object, or the bytes on the way are malformed.
    private func locate(_ path: FieldPath) -> (objects: [ValueRef], value: ValueRef)? {
        bytes.withUnsafeBytes { raw in
            let reader = BinaryReader(raw)
            guard var current = try? reader.root() else { return nil }
            var objects: [ValueRef] = []
            for component in path.utf8Components {
                guard current.tag == BinaryFormat.Tag.object else { return nil }
                objects.append(current)
                guard let next = try? component.withUnsafeBytes({ try reader.field(current, named: $0) }) else {
                    return nil
                }
                current = next
            }
            return (objects, current)
        }
    }

    /// The value at `path`; `nil` when there is none (see ``replace(at:with:)``).
    func value(at path: FieldPath) -> DocumentValue? {
        guard let (_, ref) = locate(path) else { return nil }
        return bytes.withUnsafeBytes { try? DocumentValue(reader: BinaryReader($0), ref: ref) }
    }

    /// Replaces the value at `path` with `value`; `false`, changing nothing, when there is no value there to
    /// replace (a step missing or not an object), or when an object around it would get another field table than
    /// it has (the caller then writes the document again whole, as the encoder lays it out).
    mutating func replace(at path: FieldPath, with value: DocumentValue) -> Bool {
        guard !path.components.isEmpty, let (objects, old) = locate(path) else { return false }
        var writer = BinaryWriter(capacity: 16)
        value.write(to: &writer)
        let at = old.start - 1
        let delta = writer.bytes.count - (old.end - at)
        // Every change worked out first, so that a change that does not fit leaves the bytes as they were.
        var changes: [(offset: Int, value: Int, width: Int)] = []
        let fits = bytes.withUnsafeBytes { raw -> Bool in
            let reader = BinaryReader(raw)
            for object in objects {
                let length = Int(reader.load(UInt32.self, at: object.start)) + delta
                guard length >= 0, length <= Int(UInt32.max) else { return false }
                changes.append((object.start, length, 4))
                // The table the encoder would give the changed object, so that a patch writes the same bytes.
                let count = reader.count(object)
                let fieldBytes = length - count * Int(object.table)
                guard BinaryFormat.tableWidth(count: count, fieldBytes: fieldBytes) == Int(object.table) else { return false }
                guard object.table != 0 else { continue }
                let width = Int(object.table)
                let table = object.start + BinaryFormat.containerHeaderSize
                let first = reader.contentStart(object)
                for i in 0..<reader.count(object) {
                    let entry = table + i * width
                    let offset = width == 1 ? Int(raw[entry]) : Int(reader.load(UInt16.self, at: entry))
                    guard first + offset > at else { continue }
                    let moved = offset + delta
                    guard moved >= 0, moved < 1 << (8 * width) else { return false }
                    changes.append((entry, moved, width))
                }
            }
            return true
        }
        guard fits else { return false }
        bytes.withUnsafeMutableBytes { raw in
            for change in changes {
                switch change.width {
                case 1: raw[change.offset] = UInt8(change.value)
                case 2: raw.storeBytes(of: UInt16(change.value).littleEndian, toByteOffset: change.offset, as: UInt16.self)
                default: raw.storeBytes(of: UInt32(change.value).littleEndian, toByteOffset: change.offset, as: UInt32.self)
                }
            }
        }
        bytes.replaceSubrange(at..<old.end, with: writer.bytes)
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
