import Foundation
import Testing
@testable import DocStore

/// `bytes` with the little-endian `UInt32` at `offset` replaced by `value`.
private func patching(_ bytes: [UInt8], at offset: Int, _ value: UInt32) -> [UInt8] {
    var out = bytes
    withUnsafeBytes(of: value.littleEndian) { for (i, b) in $0.enumerated() { out[offset + i] = b } }
    return out
}

/// The error `body` throws, when it is a ``MalformedDocument``.
private func malformed(_ body: () throws -> Any?) -> MalformedDocument? {
    do { _ = try body() } catch let error as MalformedDocument { return error } catch { return nil }
    return nil
}

/// Whether `body` throws ``DocStoreError`` with code `.corruptDocument`.
private func refusedAsCorrupt(_ body: () throws -> Any) -> Bool {
    do { _ = try body() } catch let error as DocStoreError { return error.code == .corruptDocument } catch { return false }
    return false
}

private struct Inner: Codable { var a: String }
private struct Outer: Codable { var o: Inner; var z: Int }

/// `BinaryReader.value(at:within:)` and `field(at:within:)`, the steps every walk over encoded bytes takes: where
/// a value ends, and the refusals of whatever runs past the bytes that enclose it.
@Suite struct BinaryReaderBoundsTests {
    /// One value of every kind, with the tag it is written with.
    static let samples: [(DocumentValue, UInt8)] = [
        (.null, 0x00), (.bool(false), 0x01), (.bool(true), 0x02), (.int(-5), 0x03), (.int(1_000), 0x04),
        (.int(100_000), 0x05), (.int(1 << 40), 0x06), (.uint(.max), 0x07), (.double(2.5), 0x08),
        (.string("Oslo"), 0x09), (.string(String(repeating: "x", count: 300)), 0x09), (.bytes([1, 2, 3]), 0x0A),
        (.date(Date(timeIntervalSinceReferenceDate: 7)), 0x0B), (.uuid(UUID()), 0x0C), (.array([]), 0x0D),
        (.array([.int(1), .string("a")]), 0x0D), (.object([DocumentValue.Field]()), 0x0E),
        (.object([("a", .int(1)), ("bb", .array([.null]))]), 0x0E),
    ]

    /// The refusal of the sample's value read with the bound at `limit`: where, and whether because nothing
    /// lies before the bound or because what lies there runs past it.
    static func expectedRefusal(_ bytes: [UInt8], within limit: Int) -> (offset: Int, nothingThere: Bool) {
        if limit == 1 { return (1, true) }
        guard bytes[1] == BinaryFormat.Tag.string || bytes[1] == BinaryFormat.Tag.bytes else { return (1, false) }
        // A string's length, read no further than the bound: missing, or its second byte missing.
        if limit == 2 { return (2, true) }
        return bytes[2] >= 0x80 && limit == 3 ? (2, false) : (1, false)
    }

    @Test(arguments: samples.indices)
    func aValueEndsWhereItsTagSaysAndNotPastItsBound(sample: Int) throws {
        let (value, tag) = Self.samples[sample]
        // The version byte, then the value at offset 1 (the checksum after it left off).
        let bytes = Array(value.encoded().dropLast(BinaryFormat.checksumSize))
        func check(_ error: MalformedDocument?, _ limit: Int, _ what: String) {
            let expected = Self.expectedRefusal(bytes, within: limit)
            #expect(error?.offset == expected.offset
                    && error?.reason.hasPrefix(expected.nothingThere ? "nothing here" : "runs past") == true,
                    "\(value) \(what): \(String(describing: error)), expected \(expected)")
        }
        try bytes.withUnsafeBytes { raw in
            let reader = BinaryReader(raw)
            let ref = try reader.value(at: 1, within: bytes.count)
            #expect(ref.tag == tag && ref.start == 2 && ref.end == bytes.count)
            for limit in 1..<bytes.count {
                check(malformed { try reader.value(at: 1, within: limit) }, limit, "within \(limit) of \(bytes.count) bytes")
            }
            // A bound past the buffer is refused, not trusted.
            #expect(malformed { try reader.value(at: 1, within: bytes.count + 1) }?.reason.contains("past the end") == true)
        }
        // The same with the buffer itself cut short, bound and all.
        for length in 1..<bytes.count {
            let cut = Array(bytes.prefix(length))
            check(cut.withUnsafeBytes { raw in malformed { try BinaryReader(raw).value(at: 1, within: length) } }, length,
                  "cut to \(length) bytes")
        }
    }

    /// A container's header is not read past the bound, where the bytes may say anything (here: a count that
    /// would not fit).
    @Test func aHeaderIsReadNoFurtherThanItsBound() {
        for tag in [BinaryFormat.Tag.array, BinaryFormat.Tag.object] {
            let bytes: [UInt8] = [1, tag, 0, 0, 0, 0, 0xFF, 0xFF, 0xFF, 0xFF]
            for limit in 2..<bytes.count {
                let error = bytes.withUnsafeBytes { raw in malformed { try BinaryReader(raw).value(at: 1, within: limit) } }
                #expect(error?.offset == 1 && error?.reason.hasPrefix("runs past") == true, "\(String(describing: error))")
            }
            let whole = bytes.withUnsafeBytes { raw in malformed { try BinaryReader(raw).value(at: 1, within: bytes.count) } }
            #expect(whole?.reason.contains("count") == true)
        }
    }

    @Test func anUnknownTagIsRefusedWithItsOffset() {
        for tag in UInt8(0x0F)...0xFF {
            let error = [1, tag, 0, 0, 0, 0, 0, 0, 0, 0].withUnsafeBytes { raw in malformed { try BinaryReader(raw).value(at: 1, within: 10) } }
            #expect(error?.offset == 1 && error?.reason.contains("unknown value tag") == true, "tag \(tag)")
        }
    }

    /// An element takes at least one byte, a field two (a name length and a tag): a count beyond that is refused
    /// as soon as the container is read, before a reader could size anything by it.
    @Test func aCountThatCannotFitInItsBytesIsRefused() throws {
        let array = DocumentValue.array([.null, .null, .null]).encoded()   // 3 bytes of elements
        let object = DocumentValue.object([("", .null), ("", .null)]).encoded()   // 4 bytes of fields
        for (bytes, fits) in [(array, 3), (object, 2)] {
            for count in [UInt32(fits + 1), 1 << 20, .max] {
                let bad = patching(bytes, at: 6, count)
                let error = bad.withUnsafeBytes { raw in malformed { try BinaryReader(raw).root() } }
                #expect(error?.offset == 1 && error?.reason.contains("count") == true, "count \(count): \(String(describing: error))")
                #expect(refusedAsCorrupt { try DocumentValue(encoded: bad) })
            }
        }
        let huge = patching(DocumentValue.array([.int(1), .int(2)]).encoded(), at: 6, .max)
        #expect(refusedAsCorrupt { try DocumentDecoder().decode([Int].self, from: huge) })
        #expect(refusedAsCorrupt { try DocumentDecoder().decode([Int: Int].self, from: huge) })
        #expect(refusedAsCorrupt { try DocumentDecoder().decode([String].self, from: huge) })
    }

    /// A count that fits in the container's bytes but is not the number of values there: every walk that goes
    /// through the container refuses it, the decoder's too (neither a shorter array nor `valueNotFound`).
    @Test func aCountThatIsNotTheNumberOfValuesIsRefusedByEveryWalk() {
        let bytes = DocumentValue.array([.int(1), .int(2), .int(3)]).encoded()   // six bytes of elements
        for count: UInt32 in [0, 2, 4, 6] {
            let bad = patching(bytes, at: 6, count)
            #expect(refusedAsCorrupt { try DocumentValue(encoded: bad) }, "count \(count)")
            #expect(refusedAsCorrupt { try DocumentDecoder().decode([Int].self, from: bad) }, "count \(count)")
            #expect(refusedAsCorrupt { try DocumentDecoder().decode([Int?].self, from: bad) }, "count \(count)")
            #expect(throws: MalformedDocument.self) {
                try bad.withUnsafeBytes { raw in
                    let reader = BinaryReader(raw)
                    var key = KeyEncoder()
                    try key.append(try reader.root(), in: reader)
                }
            }
        }
        let strings = DocumentValue.array([.string("a"), .string("b")]).encoded()
        for count: UInt32 in [1, 3] {
            #expect(refusedAsCorrupt { try DocumentDecoder().decode([String].self, from: patching(strings, at: 6, count)) })
        }
    }

    /// A field whose value runs past its object, though not past the document, is refused where it starts by
    /// every look-up: the bound is the enclosing object, not the buffer.
    @Test func aValueThatRunsPastItsObjectIsRefusedByEveryLookUp() throws {
        let sound = DocumentValue.object([("o", .object([("a", .string("hello"))])), ("z", .int(1))]).encoded()
        // 01 | 0E len cnt | 01 'o' 0E len cnt | 01 'a' 09 05 "hello" | 01 'z' 03 01: "hello"'s tag is at 23, and
        // the inner object's 9 bytes of fields start at 21.
        #expect(sound.count == 34 + BinaryFormat.checksumSize && sound[23] == BinaryFormat.Tag.string)
        let bad = patching(sound, at: 13, 7)   // the inner object now ends at 28, inside "hello"
        try bad.withUnsafeBytes { raw in
            let reader = BinaryReader(raw)
            let root = try reader.root()
            let walked = malformed { try reader.value(atPath: "o.a", from: root) }
            let compiled = malformed { try CompiledPath("o.a").value(in: reader, from: root) }
            #expect(walked?.offset == 23 && compiled?.offset == 23, "\(String(describing: walked)), \(String(describing: compiled))")
            #expect(malformed { try DocumentValue(reader: reader, ref: root) } != nil)
            #expect(try reader.value(atPath: "o", from: root)?.end == 28)
        }
        #expect(refusedAsCorrupt { try DocumentDecoder().decode(Outer.self, from: bad) })
        #expect(refusedAsCorrupt { try DocumentValue(encoded: bad) })
        #expect(try DocumentDecoder().decode(Outer.self, from: sound).o.a == "hello")
    }

    /// A name whose length runs past its object leaves no room for the value; so does a name length whose varint
    /// goes on past the object's end.
    @Test func aFieldNameThatRunsPastItsObjectIsRefused() throws {
        let sound = DocumentValue.object([("name", .int(1))]).encoded()   // 01 | 0E len cnt | 04 "name" 03 01
        for byte: UInt8 in [6, 0x7F, 0x80, 0xFF] {
            var bad = sound
            bad[10] = byte
            try bad.withUnsafeBytes { raw in
                let reader = BinaryReader(raw)
                let root = try reader.root()
                let error = malformed { try reader.field(at: 10, within: root.end) }
                #expect(error != nil, "name length \(byte)")
                if byte == 6 {   // the name ends where the object does: no value, and no byte read to look for one
                    #expect(error?.offset == 17 && error?.reason.hasPrefix("nothing here") == true, "\(String(describing: error))")
                }
                #expect(malformed { try reader.value(atPath: "name", from: root) } != nil, "name length \(byte)")
                #expect(malformed { try CompiledPath("name").value(in: reader, from: root) } != nil, "name length \(byte)")
            }
            #expect(refusedAsCorrupt { try DocumentValue(encoded: bad) })
        }
        try sound.withUnsafeBytes { raw in
            let field = try BinaryReader(raw).field(at: 10, within: sound.count)
            #expect(field.nameStart == 11 && field.nameCount == 4 && field.value.start - 1 == 15 && field.value.end == 17)
        }
    }

    /// A string's two-byte length whose second byte lies past the bound.
    @Test func aLengthIsReadNoFurtherThanItsBound() throws {
        let bytes = DocumentValue.string(String(repeating: "x", count: 200)).encoded()   // 01 09 C8 01 "xx..."
        try bytes.withUnsafeBytes { raw in
            let reader = BinaryReader(raw)
            let (length, end) = try reader.length(at: 2, within: bytes.count)
            #expect(length == 200 && end == 4)
            #expect(malformed { try reader.length(at: 2, within: 3) } != nil)
            #expect(malformed { try reader.length(at: 2, within: 2) } != nil)
        }
    }

    /// `DocumentValue.check`, which `verify()` runs on each document, refuses exactly what building the value refuses,
    /// with the same error: documents of every kind of value, each byte changed in turn to values that tag, length
    /// or count bytes take.
    @Test func checkingADocumentRefusesWhatBuildingItRefuses() {
        let document = DocumentValue.object([
            .init("s", .string("text")), .init("n", .int(-70_000)), .init("d", .double(2.5)), .init("u", .uuid(UUID())),
            .init("a", .array([.int(1), .string("é"), .array([.null, .bool(true)]), .object([.init("k", .bytes([1, 2]))])])),
            .init("t", .date(Date(timeIntervalSinceReferenceDate: 7))), .init("big", .uint(.max)),
        ])
        let bytes = document.encoded()
        var checked = 0
        for offset in 1..<bytes.count {
            for replacement: UInt8 in [0x00, 0x01, 0x05, 0x0A, 0x0B, 0x0C, 0x7F, 0x80, 0xFF] where replacement != bytes[offset] {
                var changed = bytes
                changed[offset] = replacement
                changed.withUnsafeBytes { raw in
                    let reader = BinaryReader(raw)
                    guard let root = try? reader.root() else { return }
                    let built = malformed { try DocumentValue(reader: reader, ref: root) }
                    let seen = malformed { try DocumentValue.check(reader: reader, ref: root) }
                    #expect(built?.description == seen?.description, "byte \(offset) set to \(replacement)")
                    checked += 1
                }
            }
        }
        #expect(checked > 100)
    }
}
