@_spi(Fuzzing) import DocStore
import Foundation

/// `bench --fuzz-codec COUNT [SEED]`: corrupts encoded documents at random and reads each one every way DocStore
/// reads a document where it lies, in this optimized build, whose bounds checks are only those the code makes
/// itself (the standard library's assertions on buffer indices are gone).
///
/// Each document is copied so that its last byte ends a readable page and the next page may not be read: a reader
/// that strays past the document's end stops the process with a fault (every other document starts a readable
/// page after one that may not be read, for a stray before its start). A reader that throws anything but a
/// documented error, or two readers that disagree (``InPlaceReading``), fail the run. Prints the seed, which
/// replays the run; `scripts/bench-ci` runs it with a new seed each time.
enum CodecFuzz {
    /// Runs the fuzz; returns whether every document was read as it should be.
    static func run(count: Int, seed: UInt64) throws -> Bool {
        let started = Meter.now()
        var random = SeededGenerator(seed: seed)
        let sources = try makeSources(&random)
        let pages = GuardedPages(capacity: sources.map(\.bytes.count).max()! + 64)
        var wellFormed = 0, lookUps = 0
        var failures: [String] = []
        for i in 0..<count {
            let source = sources[Int.random(in: 0..<sources.count, using: &random)]
            let bytes = corrupt(source.bytes, &random)
            lookUps += source.paths.count
            let failure = pages.withCopy(of: bytes, touchingTheEnd: i % 2 == 0) { buffer -> String? in
                let outcome = InPlaceReading.readEveryWay(buffer, paths: source.paths)
                if outcome.wellFormed { wellFormed += 1 }
                if let disagreement = outcome.disagreement { return disagreement }
                return decodeEveryType(buffer, wellFormed: outcome.wellFormed)
            }
            if let failure {
                failures.append("\(failure)\n  document: \(bytes.map { String(format: "%02x", $0) }.joined())")
                if failures.count == 10 { break }
            }
        }
        let seconds = Double(Meter.now() - started) / 1e9
        print("codec fuzz, seed \(seed): \(count) corrupt documents (\(wellFormed) of them well formed), \(lookUps) look-ups "
              + "by path, " + String(format: "%.1f s", seconds))
        for f in failures { print("codec fuzz: \(f)") }
        if !failures.isEmpty { print("codec fuzz: replay with: bench --fuzz-codec \(count) \(seed)") }
        return failures.isEmpty
    }

    // MARK: Documents

    struct Source {
        var bytes: [UInt8]
        /// Every path to a field of an object in the document, and two it does not have.
        var paths: [FieldPath]
    }

    static func makeSources(_ random: inout SeededGenerator) throws -> [Source] {
        var documents: [[UInt8]] = []
        let encoder = DocumentEncoder()
        for person in People.make(20, seed: random.next()) { documents.append(try encoder.encode(person)) }
        for _ in 0..<40 { documents.append(try encoder.encode(Sample.random(&random, depth: 3))) }
        for _ in 0..<60 { documents.append(randomValue(&random, depth: 4).encoded()) }
        // Nested to the format's limit (the leaf's value 256 levels down), and one level past it.
        for depth in [255, 256] {
            documents.append((0..<depth).reduce(DocumentValue.object([("leaf", .int(1))])) { inner, _ in .array([inner]) }.encoded())
        }
        // Each object also in format 3, its shape known to the process as a store's are.
        documents += try documents.compactMap { try InPlaceReading.shapedAndKnown($0) }
        return documents.map { bytes in
            let paths = (try? DocumentValue(encoded: bytes)).map { fieldPaths($0, []) } ?? []
            return Source(bytes: bytes, paths: (paths + [["\u{1}missing"], [String(repeating: "n", count: 200)]]).map(FieldPath.init(components:)))
        }
    }

    static func fieldPaths(_ value: DocumentValue, _ prefix: [String]) -> [[String]] {
        guard case .object(let fields) = value else { return [] }
        return fields.flatMap { [prefix + [$0.name]] + fieldPaths($0.value, prefix + [$0.name]) }
    }

    static func randomValue(_ random: inout SeededGenerator, depth: Int) -> DocumentValue {
        switch Int.random(in: 0..<(depth > 0 ? 12 : 9), using: &random) {
        case 0: return .null
        case 1: return .bool(Bool.random(using: &random))
        case 2: return .int(Int64.random(in: -300...300, using: &random))
        case 3: return .int(Int64.random(in: .min ... .max, using: &random))
        case 4: return .double(Double(bitPattern: random.next()))
        case 5: return .string(randomName(&random, maxLength: Bool.random(using: &random) ? 8 : 200))
        case 6: return .bytes((0..<Int.random(in: 0..<20, using: &random)).map { _ in UInt8.random(in: 0...255, using: &random) })
        case 7: return .date(Date(timeIntervalSinceReferenceDate: Double(Int32.random(in: .min ... .max, using: &random))))
        case 8: return .uuid(randomUUID(&random))
        case 9: return .array((0..<Int.random(in: 0..<5, using: &random)).map { _ in randomValue(&random, depth: depth - 1) })
        default:
            return .object((0..<Int.random(in: 0..<5, using: &random)).map { _ in
                (randomName(&random, maxLength: 6), randomValue(&random, depth: depth - 1))
            })
        }
    }

    /// A UUID from the seeded generator, so that a seed replays the same documents.
    static func randomUUID(_ random: inout SeededGenerator) -> UUID {
        let (a, b) = (random.next(), random.next())
        var bytes: uuid_t = (0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0)
        withUnsafeMutableBytes(of: &bytes) { raw in
            raw.storeBytes(of: a, toByteOffset: 0, as: UInt64.self)
            raw.storeBytes(of: b, toByteOffset: 8, as: UInt64.self)
        }
        return UUID(uuid: bytes)
    }

    static func randomName(_ random: inout SeededGenerator, maxLength: Int) -> String {
        let letters = Array("abcxyz_019 é名\u{1F600}")
        return String((0..<Int.random(in: 0...maxLength, using: &random)).map { _ in letters.randomElement(using: &random)! })
    }

    /// `bytes` with one to four bytes changed, inserted or removed, now and then cut short.
    static func corrupt(_ source: [UInt8], _ random: inout SeededGenerator) -> [UInt8] {
        var bytes = source
        for _ in 0..<Int.random(in: 1...4, using: &random) where !bytes.isEmpty {
            let at = Int.random(in: 0..<bytes.count, using: &random)
            switch Int.random(in: 0..<6, using: &random) {
            case 0: bytes[at] = UInt8.random(in: 0...255, using: &random)
            case 1: bytes[at] ^= 1 << UInt8.random(in: 0..<8, using: &random)
            case 2: bytes[at] = [0x00, 0xFF, 0x7F, 0x80, 0x0D, 0x0E].randomElement(using: &random)!
            case 3: bytes.insert(UInt8.random(in: 0...255, using: &random), at: at)
            case 4: bytes.remove(at: at)
            default:
                // A length or count in a container's header, made small, large, or off by a little.
                let word: UInt32 = [0, 1, 0xFFFF_FFFF, 0x7FFF_FFFF, UInt32(bytes.count),
                                    UInt32.random(in: 0...64, using: &random)].randomElement(using: &random)!
                for (k, b) in withUnsafeBytes(of: word.littleEndian, Array.init).enumerated() where at + k < bytes.count {
                    bytes[at + k] = b
                }
            }
        }
        if Int.random(in: 0..<4, using: &random) == 0 { bytes.removeLast(Int.random(in: 0...min(bytes.count, 6), using: &random)) }
        return bytes
    }

    // MARK: Decoding

    /// Decodes `buffer` as several types through `DocumentDecoder`; a description of what went wrong, if anything did.
    static func decodeEveryType(_ buffer: UnsafeRawBufferPointer, wellFormed: Bool) -> String? {
        func attempt<T: Decodable>(_ type: T.Type) -> String? {
            do {
                _ = try DocumentDecoder().decode(type, from: buffer)
            } catch is DecodingError {
            } catch let error as DocStoreError where error.code == .corruptDocument {
                if wellFormed { return "decoding \(type) calls a well-formed document corrupt: \(error)" }
            } catch {
                return "decoding \(type) threw \(Swift.type(of: error)): \(error)"
            }
            return nil
        }
        return attempt(BenchPerson.self) ?? attempt(Sample.self) ?? attempt([String: Int].self)
            ?? attempt([Sample.Shape].self) ?? attempt([[String]].self) ?? attempt(Double.self)
    }

    /// A model that takes the decoder's every path: nested and recursive types, keyed, unkeyed and single-value
    /// containers, enums with associated values, optionals, dictionaries, data, dates and UUIDs.
    struct Sample: Codable {
        enum Shape: Codable {
            case circle(radius: Double)
            case rect(width: Int, height: Int)
            case label(String, Int?)
            case point
        }

        var id: UUID
        var title: String
        var tags: [String]
        var counts: [String: Int]
        var matrix: [[Int8]]
        var shapes: [Shape]
        var blob: Data
        var when: Date
        var flags: [Bool?]
        var small: UInt16?
        var children: [Sample]

        static func random(_ random: inout SeededGenerator, depth: Int) -> Sample {
            func name() -> String { CodecFuzz.randomName(&random, maxLength: 6) }
            func count(_ n: Int) -> Int { Int.random(in: 0...n, using: &random) }
            var counts: [String: Int] = [:]
            for _ in 0..<count(3) { counts[name()] = Int.random(in: -1000...1000, using: &random) }
            let shapes: [Shape] = (0..<count(3)).map { _ in
                switch count(3) {
                case 0: return .circle(radius: Double(count(100)) / 7)
                case 1: return .rect(width: count(50), height: count(50))
                case 2: return .label(name(), Bool.random(using: &random) ? nil : count(9))
                default: return .point
                }
            }
            return Sample(
                id: CodecFuzz.randomUUID(&random), title: name(), tags: (0..<count(4)).map { _ in name() }, counts: counts,
                matrix: (0..<count(3)).map { _ in (0..<count(3)).map { _ in Int8.random(in: -100...100, using: &random) } },
                shapes: shapes, blob: Data((0..<count(8)).map { _ in UInt8.random(in: 0...255, using: &random) }),
                when: Date(timeIntervalSinceReferenceDate: Double(count(1_000_000))),
                flags: (0..<count(3)).map { _ in Bool.random(using: &random) ? nil : Bool.random(using: &random) },
                small: Bool.random(using: &random) ? nil : UInt16(count(60_000)),
                children: depth > 0 ? (0..<count(2)).map { _ in Sample.random(&random, depth: depth - 1) } : [])
        }
    }
}

/// Memory for one document at a time, between two pages that may not be read, so that reading outside the
/// document faults at once rather than reading whatever lies next to it.
final class GuardedPages {
    private let page = Int(sysconf(Int32(_SC_PAGESIZE)))
    private let base: UnsafeMutableRawPointer
    private let mapped: Int
    /// The readable pages, after the first guard page.
    private let usable: Int

    /// Room for documents of up to `capacity` bytes.
    init(capacity: Int) {
        usable = (capacity + page - 1) / page * page
        mapped = usable + 2 * page
        guard let p = mmap(nil, mapped, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0),
              p != UnsafeMutableRawPointer(bitPattern: -1),
              mprotect(p, page, PROT_NONE) == 0, mprotect(p + page + usable, page, PROT_NONE) == 0 else {
            BenchCommand.fail("codec fuzz: cannot map guard pages: \(String(cString: strerror(errno)))")
        }
        base = p
    }

    deinit { munmap(base, mapped) }

    /// Calls `body` with a copy of `bytes` that ends where the second guard page starts (`touchingTheEnd`) or
    /// starts where the first one ends.
    func withCopy<R>(of bytes: [UInt8], touchingTheEnd: Bool, _ body: (UnsafeRawBufferPointer) -> R) -> R {
        precondition(bytes.count <= usable, "a document larger than the guarded pages")
        let start = base + page + (touchingTheEnd ? usable - bytes.count : 0)
        bytes.withUnsafeBytes { if let from = $0.baseAddress { start.copyMemory(from: from, byteCount: $0.count) } }
        return body(UnsafeRawBufferPointer(start: start, count: bytes.count))
    }
}
