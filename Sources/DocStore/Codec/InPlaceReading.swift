/// Reads an encoded document every way the store reads one where it lies, and says where two ways disagree.
///
/// It serves the fuzzing of optimized builds (`bench --fuzz-codec`, which `scripts/bench-ci` runs): there, a bounds
/// check that was only an assertion is gone, and a corrupt document that slips past one would read outside its
/// bytes. Applications have no use for it.
@_spi(Fuzzing)
public enum InPlaceReading {
    /// What reading a document every way found.
    public struct Outcome: Sendable {
        /// Whether the whole document is well formed (``DocumentValue/init(encoded:)`` accepts it).
        public var wellFormed: Bool
        /// The first disagreement between two ways of reading, or an error no reader should throw; `nil` when
        /// every way agrees.
        public var disagreement: String?
    }

    /// Reads `buffer` whole (as ``DocumentValue`` and as an index key), and at each of `paths` (by the plain walk
    /// and by a scan's compiled look-up), then checks that the ways agree:
    ///
    /// - the whole document is read, as a value and as a key, or refused, by both;
    /// - a path gives the same value, or the same error, by both look-ups;
    /// - in a well-formed document, a path finds what the whole value holds there, the key read in place is the
    ///   key of the value, and the value written again reads back the same.
    ///
    /// Every reader throws nothing but ``MalformedDocument`` on a corrupt document; anything else is a disagreement.
    /// A document of format 3 is read with `shapes`, the names of each shape by its id.
    public static func readEveryWay(_ buffer: UnsafeRawBufferPointer, paths: [FieldPath],
                                    shapes: [UInt64: [String]] = [:]) -> Outcome {
        let set = ShapeSet(shapes.map { ($0.key, DocumentShape($0.value)) })
        return withExtendedLifetime(set) { readEveryWay(BinaryReader(buffer, shapes: set), paths: paths) }
    }

    private static func readEveryWay(_ reader: BinaryReader, paths: [FieldPath]) -> Outcome {
        do {
            let root: ValueRef
            do { root = try reader.root() } catch is MalformedDocument { return Outcome(wellFormed: false) }
            let whole = try refusedIfMalformed { try DocumentValue(reader: reader, ref: root) }
            var inPlace = KeyEncoder()
            let keyed = try refusedIfMalformed { try inPlace.append(root, in: reader) } != nil
            var outcome = Outcome(wellFormed: whole != nil)
            if keyed != (whole != nil) {
                return outcome.found("the document is \(keyed ? "" : "not ")read as a key, but \(whole == nil ? "not " : "")as a value")
            }
            if let whole {
                if inPlace.bytes != KeyEncoder.key(whole) { return outcome.found("the key read in place is not the value's key") }
                if try DocumentValue(encoded: whole.encoded()).encoded() != whole.encoded() {
                    return outcome.found("the value written again reads back differently")
                }
            }
            for path in paths {
                let plain = Result { try reader.value(atPath: path, from: root) }
                let compiled = Result { try CompiledPath(path).value(in: reader, from: root) }
                switch (plain, compiled) {
                case (.success(let a), .success(let b)):
                    if a?.tag != b?.tag || a?.start != b?.start || a?.end != b?.end {
                        return outcome.found("\(path): the walk finds \(describe(a)), the compiled look-up \(describe(b))")
                    }
                case (.failure(let a as MalformedDocument), .failure(let b as MalformedDocument)):
                    if a.offset != b.offset || a.reason != b.reason {
                        return outcome.found("\(path): the walk throws \(a), the compiled look-up \(b)")
                    }
                default:
                    return outcome.found("\(path): the walk gives \(plain), the compiled look-up \(compiled)")
                }
                // A name that is not UTF-8 reads as U+FFFD, and cannot be told from the bytes it replaced.
                guard let whole, !path.components.contains(where: { $0.unicodeScalars.contains("\u{FFFD}") }) else { continue }
                let expected = value(in: whole, at: path)
                let found = try plain.get().map { try DocumentValue(reader: reader, ref: $0) }
                if found?.encoded() != expected?.encoded() {
                    return outcome.found("\(path): the walk finds \(String(describing: found)), the whole value holds "
                                         + String(describing: expected))
                }
            }
            return outcome
        } catch {
            return Outcome(wellFormed: false, disagreement: "a reader threw \(type(of: error)): \(error)")
        }
    }

    /// `document` written again in format 3 under shape `id`, and its shape's names; `nil` when its root is not
    /// an object.
    public static func shaped(_ document: [UInt8], id: UInt64) throws -> (bytes: [UInt8], names: [String])? {
        var names: [String] = []
        let bytes = try document.withUnsafeBytes { raw in
            try BinaryFormat.shaped(raw) { found in
                guard let strings = found.strings else { return nil }
                names = strings
                return id
            }
        }
        return bytes.map { ($0, names) }
    }

    /// `document` written again in format 3 under its shape's own id, the shape made known to this process as a
    /// store's is when its catalog is loaded; `nil` when its root is not an object or a name is not UTF-8.
    public static func shapedAndKnown(_ document: [UInt8]) throws -> [UInt8]? {
        try document.withUnsafeBytes { raw in
            try BinaryFormat.shaped(raw) { names in
                guard let strings = names.strings, ShapeTable.add(names.id, strings)?.names == strings else { return nil }
                return names.id
            }
        }
    }

    /// The value at `path` in `value`, names compared by their UTF-8 bytes as the walks over encoded bytes compare
    /// them (`String`'s `==` would find "\u{212A}" at "K").
    private static func value(in value: DocumentValue, at path: FieldPath) -> DocumentValue? {
        var current = value
        for name in path.utf8Components {
            guard case .object(let fields) = current, let field = fields.first(where: { $0.name.utf8.elementsEqual(name) }) else {
                return nil
            }
            current = field.value
        }
        return current
    }

    /// `body`'s result, or `nil` when it refuses a malformed document.
    private static func refusedIfMalformed<T>(_ body: () throws -> T) throws -> T? {
        do { return try body() } catch is MalformedDocument { return nil }
    }

    private static func describe(_ ref: ValueRef?) -> String {
        ref.map { "tag \($0.tag) at \($0.start - 1)..<\($0.end)" } ?? "nothing"
    }
}

extension InPlaceReading.Outcome {
    init(wellFormed: Bool) { self.init(wellFormed: wellFormed, disagreement: nil) }

    fileprivate mutating func found(_ disagreement: String) -> Self {
        self.disagreement = disagreement
        return self
    }
}
