import Foundation
import Testing
@testable import DocStore

/// The bytes of stored keys, pinned: a store written today must read the same tomorrow, so that neither a change here
/// nor one in the standard library (such as how strings are normalized to NFC) can silently reorder or orphan the
/// keys of files already written. A test that fails here means the key format changed: that needs a new format
/// version and a migration, not a new expectation.
@Suite struct KeyGoldenBytesTests {
    static let cases: [(String, DocumentValue)] = [
        ("null", .null),
        ("false", .bool(false)),
        ("true", .bool(true)),
        ("zero", .int(0)),
        ("minus zero", .double(-0.0)),
        ("one", .int(1)),
        ("forty-two", .int(42)),
        ("minus one", .int(-1)),
        ("a half", .double(0.5)),
        ("2^53 + 1", .int(9_007_199_254_740_993)),
        ("Int64.min", .int(.min)),
        ("UInt64.max", .uint(.max)),
        ("NaN", .double(.nan)),
        ("infinity", .double(.infinity)),
        ("a date", .date(Date(timeIntervalSince1970: 1_714_521_600))),
        ("empty string", .string("")),
        ("Oslo", .string("Oslo")),
        ("composed é", .string("\u{E9}")),
        ("decomposed é", .string("e\u{301}")),
        ("Hangul", .string("\u{1100}\u{1161}")),
        ("a NUL inside", .string("a\u{0}b")),
        ("emoji", .string("🦆")),
        ("bytes", .bytes([0, 1, 255])),
        ("uuid", .uuid(UUID(uuidString: "E621E1F8-C36C-495A-93FC-0C247A3E6E5F")!)),
        ("array", .array([.int(1), .string("x")])),
        ("object", .object([("a", .int(1))])),
    ]

    static func hex(_ bytes: [UInt8]) -> String { bytes.map { String(format: "%02x", $0) }.joined() }

    /// The keys as written by DocStore's first file format, in hexadecimal. Composed and decomposed `é` are one key.
    static let golden: [String: String] = [
        "null": "05",
        "false": "10",
        "true": "11",
        "zero": "20800000000000000080",
        "minus zero": "20800000000000000080",
        "one": "20bff000000000000080",
        "minus one": "20400fffffffffffff80",
        "a half": "20bfe000000000000080",
        "2^53 + 1": "20c340000000000000818000000000000001",
        "Int64.min": "203c1fffffffffffff80",
        "UInt64.max": "20c3f00000000000007f7fffffffffffffff",
        "NaN": "1f",
        "infinity": "20fff000000000000080",
        "a date": "30c1c5f0dec0000000",
        "empty string": "400001",
        "Oslo": "404f736c6f0001",
        "composed é": "40c3a90001",
        "decomposed é": "40c3a90001",
        "Hangul": "40eab0800001",
        "a NUL inside": "406100ff620001",
        "emoji": "40f09fa6860001",
        "bytes": "5000ff01ff0001",
        "uuid": "60e621e1f8c36c495a93fc0c247a3e6e5f",
        "array": "7020bff0000000000000804078000100",
        "object": "804061000120bff00000000000008000",
        "forty-two": "20c04500000000000080",
    ]

    @Test func keysAreTheBytesFilesAlreadyHold() {
        let got = Dictionary(uniqueKeysWithValues: Self.cases.map { ($0.0, Self.hex(KeyEncoder.key($0.1))) })
        for (name, expected) in Self.golden {
            #expect(got[name] == expected, "\(name): \(got[name] ?? "none") instead of \(expected)")
        }
        #expect(Set(Self.golden.keys) == Set(got.keys))
    }

    @Test func aCompoundKeyIsItsPartsOneAfterAnother() {
        var key = KeyEncoder()
        key.append(.string("Oslo"))
        key.append(.int(42))
        #expect(Self.hex(key.bytes) == Self.golden["Oslo"]! + Self.golden["forty-two"]!)
    }
}
