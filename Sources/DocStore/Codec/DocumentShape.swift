import Foundation

/// The names of a document's fields, in the order a document of format 3 (``BinaryFormat/shapedVersion``) stores
/// their values: what such a document leaves out of its bytes, kept once for every document of the shape.
///
/// The names' bytes lie in one allocation the shape owns, so that a walk over a document's fields hands out each
/// name without copying it, as it hands out a name that lies in the document.
final class DocumentShape: Sendable {
    let names: [String]
    /// Every name's UTF-8 bytes, one after the other.
    private nonisolated(unsafe) let bytes: UnsafeMutableRawBufferPointer
    /// Where each name's bytes begin in `bytes`; one more entry, the end of the last.
    private let starts: [Int]

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
        self.starts = starts
    }

    deinit { bytes.deallocate() }

    var count: Int { names.count }

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
        while i < names.count {
            if starts[i + 1] - starts[i] == count, self.name(i).sameBytes(as: name) { return i }
            i += 1
        }
        return nil
    }
}

/// The shapes a reader may meet, by the id a document of format 3 names its shape with: those of one collection.
final class ShapeSet: Sendable {
    private let ids: [UInt32]
    private let shapes: [DocumentShape]

    init(_ shapes: [(id: UInt32, shape: DocumentShape)]) {
        ids = shapes.map(\.id)
        self.shapes = shapes.map(\.shape)
    }

    /// The shape with id `id`, or `nil` when the set has none.
    @inline(__always)
    func shape(_ id: UInt32) -> DocumentShape? {
        // A collection has few shapes: a walk over their ids beats hashing.
        var i = 0
        while i < ids.count {
            if ids[i] == id { return shapes[i] }
            i += 1
        }
        return nil
    }
}

extension BinaryFormat {
    /// A document of format 1 or 2 whose root is an object, written again in format 3: its values under the shape
    /// `shapeID` returns for its field names, in their order. `nil` when the root is not an object, or when
    /// `shapeID` returns `nil` (the document is then kept as it is).
    ///
    /// - Throws: ``MalformedDocument`` when `document` is not well formed at its root's level.
    static func shaped(_ document: UnsafeRawBufferPointer, shapeID: ([String]) throws -> UInt32?) throws -> [UInt8]? {
        let reader = BinaryReader(document)
        let root = try reader.root()
        guard root.tag == Tag.object else { return nil }
        var names: [String] = []
        var values: [Range<Int>] = []
        try reader.forEachField(root) { name, value in
            names.append(String(decoding: name, as: UTF8.self))
            values.append((value.start - 1)..<value.end)
        }
        // A name that is not UTF-8 would not come back as its bytes.
        guard !names.contains(where: { $0.contains("\u{FFFD}") }), let id = try shapeID(names) else { return nil }
        let length = values.reduce(0) { $0 + $1.count }
        let width = length <= 0xFF ? 1 : length <= 0xFFFF ? 2 : 4
        var writer = BinaryWriter(capacity: 6 + width * max(0, values.count - 1) + length + checksumSize)
        writer.byte(shapedVersion)
        writer.littleEndian(id)
        writer.byte(UInt8(width))
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
}
