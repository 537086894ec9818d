import Foundation
import Synchronization

/// The names of a document's fields, in the order a document of format 3 (``BinaryFormat/shapedVersion``) stores
/// their values: what such a document leaves out of its bytes, kept once for every document of the shape.
///
/// The names' bytes lie in one allocation the shape owns, so that a walk over a document's fields hands out each
/// name without copying it, as it hands out a name that lies in the document.
final class DocumentShape: Sendable {
    let names: [String]
    let count: Int
    /// Every name's UTF-8 bytes, one after the other.
    private nonisolated(unsafe) let bytes: UnsafeMutableRawBufferPointer
    /// Where each name's bytes begin in `bytes`; one more entry, the end of the last. (Memory of its own: read
    /// per look-up, an array would be retained.)
    private nonisolated(unsafe) let starts: UnsafeMutablePointer<Int>

    init(_ names: [String]) {
        self.names = names
        var starts = [0]
        for name in names { starts.append(starts.last! + name.utf8.count) }
        let bytes = UnsafeMutableRawBufferPointer.allocate(byteCount: max(starts.last!, 1), alignment: 1)
        for (i, name) in names.enumerated() {
            var name = name
            name.withUTF8 { utf8 in
                UnsafeMutableRawBufferPointer(rebasing: bytes[starts[i]..<starts[i + 1]]).copyMemory(from: UnsafeRawBufferPointer(utf8))
            }
        }
        self.bytes = bytes
        self.starts = .allocate(capacity: starts.count)
        self.starts.initialize(from: starts, count: starts.count)
        count = names.count
    }

    deinit {
        bytes.deallocate()
        starts.deallocate()
    }

    /// The bytes of the name of field `i`, valid while the shape lives.
    @inline(__always)
    func name(_ i: Int) -> UnsafeRawBufferPointer {
        UnsafeRawBufferPointer(rebasing: bytes[starts[i]..<starts[i + 1]])
    }

    /// The position of the field named `name`, compared by its UTF-8 bytes; `nil` when the shape has none.
    @inline(__always)
    func index(of name: UnsafeRawBufferPointer) -> Int? {
        let count = name.count
        var i = 0
        while i < self.count {
            if starts[i + 1] - starts[i] == count, BinaryReader.isName(name, at: bytes.baseAddress! + starts[i]) { return i }
            i += 1
        }
        return nil
    }
}

/// Shapes given to a reader by hand, by the id a document of format 3 names its shape with (the tests' and the
/// fuzzing's; a store's are in ``ShapeTable``).
final class ShapeSet: Sendable {
    private let ids: [UInt64]
    private let shapes: [DocumentShape]

    init(_ shapes: [(id: UInt64, shape: DocumentShape)]) {
        ids = shapes.map(\.id)
        self.shapes = shapes.map(\.shape)
    }

    /// The shape with id `id`, or `nil` when the set has none.
    @inline(__always)
    func shape(_ id: UInt64) -> DocumentShape? {
        // A collection has few shapes: a walk over their ids beats hashing.
        var i = 0
        while i < ids.count {
            if ids[i] == id { return shapes[i] }
            i += 1
        }
        return nil
    }
}

/// Every shape this process has met, by id: a document of format 3 is read with the shape its id names, whatever
/// store it comes from. An id is a hash of the names (``DocumentShape/id(of:)``), so that two stores or
/// collections with the same names share it, and a shape added by a write that then aborts is still right.
///
/// Read without a lock: an open-addressed table of fixed size whose slots are written once, the shape before
/// its id, each with release ordering (and read with acquire). Shapes are never removed. The table is static
/// memory rather than an object, which every reading thread would retain and release, each time, on one count.
enum ShapeTable {
    private static let capacity = 1 << 14
    private static let mask = capacity - 1
    /// A slot's id (0 when empty), and its shape's retained reference.
    private nonisolated(unsafe) static let ids: UnsafeMutablePointer<Atomic<UInt64>> = {
        let ids = UnsafeMutablePointer<Atomic<UInt64>>.allocate(capacity: capacity)
        for i in 0..<capacity { (ids + i).initialize(to: Atomic(0)) }
        return ids
    }()
    private nonisolated(unsafe) static let shapes: UnsafeMutablePointer<Atomic<UInt>> = {
        let shapes = UnsafeMutablePointer<Atomic<UInt>>.allocate(capacity: capacity)
        for i in 0..<capacity { (shapes + i).initialize(to: Atomic(0)) }
        return shapes
    }()
    /// Adds are one at a time; the number of slots taken, and how many of them the encoder took.
    private static let adding = Mutex((taken: 0, byEncoder: 0))

    /// The shape with id `id`, or `nil` when this process has not met it. Unretained: the table keeps every shape
    /// for the life of the process.
    @inline(__always)
    static func shape(_ id: UInt64) -> Unmanaged<DocumentShape>? {
        guard id != 0 else { return nil }
        let (ids, shapes) = (self.ids, self.shapes)
        var i = Int(truncatingIfNeeded: id) & mask
        while true {
            let found = ids[i].load(ordering: .acquiring)
            if found == id {
                let bits = shapes[i].load(ordering: .acquiring)
                return Unmanaged<DocumentShape>.fromOpaque(UnsafeRawPointer(bitPattern: bits)!)
            }
            if found == 0 { return nil }
            i = (i + 1) & mask
        }
    }

    /// The most slots shapes may take: three quarters of the table.
    static let limit = capacity / 4 * 3
    /// The most slots the encoder's shapes may take (``DocumentEncoder/encode(_:shapedWith:last:)``): it adds a
    /// shape before its store records it, and the write may then fail. The rest is left for the shapes stores
    /// record.
    static let encodersShare = capacity / 2

    /// Adds `names` under `id`, and returns the shape the table holds under it: `names`' own, or one added before
    /// (whose names the caller compares); `nil` when the table, or the encoder's share of it (`byEncoder`), is
    /// full (documents of new shapes are then written in format 2).
    static func add(_ id: UInt64, _ names: [String], byEncoder: Bool = false) -> DocumentShape? {
        adding.withLock { count in
            if let known = shape(id) { return known.takeUnretainedValue() }
            guard id != 0, count.taken < limit, !byEncoder || count.byEncoder < encodersShare else { return nil }
            var i = Int(truncatingIfNeeded: id) & mask
            while ids[i].load(ordering: .acquiring) != 0 { i = (i + 1) & mask }
            let shape = DocumentShape(names)
            shapes[i].store(UInt(bitPattern: Unmanaged.passRetained(shape).toOpaque()), ordering: .releasing)
            ids[i].store(id, ordering: .releasing)
            count.taken += 1
            if byEncoder { count.byEncoder += 1 }
            return shape
        }
    }
}

extension DocumentShape {
    /// The id of the shape of these names in a store whose shapes are salted with `salt`, the same in every process
    /// and build: FNV-1a (64 bits) over the salt's eight bytes and the names' UTF-8 bytes, each name followed by
    /// 0xFF (a byte UTF-8 never has); never 0, which marks an empty slot. The salt, random per store, keeps the
    /// shapes of two stores read by one process apart, even where names were chosen to make their ids meet.
    static func id<Names: Sequence>(of names: Names, salt: UInt64) -> UInt64 where Names.Element == UnsafeRawBufferPointer {
        var hash: UInt64 = 0xcbf2_9ce4_8422_2325
        for byte in withUnsafeBytes(of: salt.littleEndian, Array.init) { hash = (hash ^ UInt64(byte)) &* 0x0000_0100_0000_01B3 }
        for name in names {
            for byte in name { hash = (hash ^ UInt64(byte)) &* 0x0000_0100_0000_01B3 }
            hash = (hash ^ 0xFF) &* 0x0000_0100_0000_01B3
        }
        return hash == 0 ? 1 : hash
    }

    static func id(of names: [String], salt: UInt64) -> UInt64 {
        let bytes = names.map { Array($0.utf8) }
        return bytes.withUnsafeBufferPointers { id(of: $0, salt: salt) }
    }

    /// Whether this shape's names are `names`, byte for byte.
    func hasNames<Names: Collection>(_ names: Names) -> Bool where Names.Element == UnsafeRawBufferPointer {
        names.count == count && zip(0..<count, names).allSatisfy { self.name($0).sameBytes(as: $1) }
    }
}

private extension Array where Element == [UInt8] {
    func withUnsafeBufferPointers<R>(_ body: ([UnsafeRawBufferPointer]) -> R) -> R {
        var pointers: [UnsafeRawBufferPointer] = []
        func next(_ i: Int) -> R {
            guard i < count else { return body(pointers) }
            return self[i].withUnsafeBytes { pointers.append($0); return next(i + 1) }
        }
        return next(0)
    }
}

extension BinaryFormat {
    /// The field names of a document's root object as a write meets them: their bytes in the document, and the
    /// id of their shape.
    struct Names {
        let bytes: [UnsafeRawBufferPointer]
        let id: UInt64

        /// The names as strings; `nil` when one is not UTF-8 (it would not come back as its bytes).
        var strings: [String]? {
            var strings: [String] = []
            for name in bytes {
                guard let string = String(validating: name, as: UTF8.self) else { return nil }
                strings.append(string)
            }
            return strings
        }
    }

    /// A document of format 1 or 2 whose root is an object, written again in format 3 under the shape `shapeID`
    /// returns for its field names (it is told them and their id). `nil` when the root is not an object, or when
    /// `shapeID` returns `nil` (the document is then kept as it is).
    ///
    /// - Throws: ``MalformedDocument`` when `document` is not well formed at its root's level.
    static func shaped(_ document: UnsafeRawBufferPointer, salt: UInt64 = 0,
                       shapeID: (Names) throws -> UInt64?) throws -> [UInt8]? {
        let reader = BinaryReader(document)
        let root = try reader.root()
        guard root.tag == Tag.object else { return nil }
        var names: [UnsafeRawBufferPointer] = []
        var values: [Range<Int>] = []
        // (Room for the fields at once: grown a field at a time, each array was made again four or five times.)
        let count = min(reader.count(root), 1_024)
        names.reserveCapacity(count)
        values.reserveCapacity(count)
        try reader.forEachField(root) { name, value in
            names.append(name)
            values.append((value.start - 1)..<value.end)
        }
        guard let id = try shapeID(Names(bytes: names, id: DocumentShape.id(of: names, salt: salt))) else { return nil }
        return shaped(id: id, values: values, of: document)
    }

    /// The width of the offsets of a document of format 3 whose values take `length` bytes: the least that holds
    /// them.
    static func offsetWidth(_ length: Int) -> Int { length <= 0xFF ? 1 : length <= 0xFFFF ? 2 : 4 }

    /// A document of format 3 under the shape `id` whose fields' values are `values` of `document`, in order.
    static func shaped(id: UInt64, values: [Range<Int>], of document: UnsafeRawBufferPointer) -> [UInt8] {
        let length = values.reduce(0) { $0 + $1.count }
        let width = offsetWidth(length)
        var writer = BinaryWriter(capacity: shapedHeaderSize + width * max(0, values.count - 1) + length + checksumSize)
        writer.byte(shapedVersion)
        writer.littleEndian(id)
        writer.byte(UInt8(width))
        writer.varint(values.count)
        var offset = 0
        for value in values.dropLast() {
            offset += value.count
            switch width {
            case 1: writer.byte(UInt8(offset))
            case 2: writer.littleEndian(UInt16(offset))
            default: writer.littleEndian(UInt32(offset))
            }
        }
        for value in values { writer.bytes.append(contentsOf: UnsafeRawBufferPointer(rebasing: document[value])) }
        writer.seal()
        return writer.bytes
    }

    /// A document of format 2 whose root object has the fields `names`, their values `values` of `document`.
    static func named(_ names: [UnsafeRawBufferPointer], values: [Range<Int>], of document: UnsafeRawBufferPointer)
        -> [UInt8] {
        var writer = BinaryWriter(capacity: containerHeaderSize + 8 + names.reduce(0) { $0 + $1.count + 1 }
                                  + values.reduce(0) { $0 + $1.count } + checksumSize)
        writer.byte(version)
        let header = writer.openContainer(tag: Tag.object)
        for (name, value) in zip(names, values) {
            writer.varint(name.count)
            writer.bytes.append(contentsOf: name)
            writer.bytes.append(contentsOf: UnsafeRawBufferPointer(rebasing: document[value]))
        }
        writer.closeContainer(at: header, count: names.count)
        writer.seal()
        return writer.bytes
    }

    /// A document of format 3 written again in format 2, its field names back in place.
    ///
    /// - Throws: ``MalformedDocument`` when its root cannot be read.
    static func unshaped(_ document: UnsafeRawBufferPointer) throws -> [UInt8] {
        let reader = BinaryReader(document)
        let root = try reader.root()
        var writer = BinaryWriter(capacity: document.count * 2)
        writer.byte(version)
        let header = writer.openContainer(tag: Tag.object)
        var count = 0
        try reader.forEachField(root) { name, value in
            writer.varint(name.count)
            writer.bytes.append(contentsOf: name)
            writer.bytes.append(contentsOf: UnsafeRawBufferPointer(rebasing: document[(value.start - 1)..<value.end]))
            count += 1
        }
        writer.closeContainer(at: header, count: count)
        writer.seal()
        return writer.bytes
    }
}
