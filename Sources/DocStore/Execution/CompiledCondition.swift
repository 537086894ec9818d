import Foundation

/// A residual condition prepared once for a run over many documents: a tree of objects holding their paths laid
/// out as bytes and their constants ready, so that checking a document costs the look-ups and the comparisons
/// alone. The comparisons are ``ValueComparison``'s.
class CompiledCondition {
    /// What a node is given about the document being checked.
    struct Document {
        let reader: BinaryReader
        let root: ValueRef
        /// The layout of `root` when it is a document's root in format 3, read once for every path's look-up.
        var shaped: BinaryReader.Shaped? = nil
        /// Decodes the document, for opaque parts (at most once per document; the caller keeps it).
        let decoded: () throws -> Any

        /// The value at `layout`'s path, or `nil` when it is missing.
        @inline(__always)
        func value(at layout: CompiledPath.Layout) throws -> ValueRef? {
            try layout.value(in: reader, from: root, shaped: shaped)
        }
    }

    /// Compiles `condition`; `keys` keeps the constants' encoded keys across documents.
    static func make(_ condition: Condition, keys: ComparisonKeys) -> CompiledCondition {
        switch condition {
        case .compare(let path, let op, let value):
            let general = Compare(path, keys, op, value)
            if value == .null { return NullCompare(general) }
            return NumberCompare(general) ?? general
        case .contains(let path, let value):
            return Contains(path, keys, value)
        case .oneOf(let path, let values):
            return OneOf(path, keys, values)
        case .startsWith(let path, let prefix):
            return StartsWith(path, keys, prefix)
        case .containsText(let path, let text):
            return ContainsText(path, keys, text)
        case .textIgnoringCase(let path, let test, let folded):
            return TextIgnoringCase(path, keys, folded, test: test)
        case .anyElement(let path, let c):
            return Elements(CompiledPath(path), make(c, keys: keys), every: false)
        case .everyElement(let path, let c):
            return Elements(CompiledPath(path), make(c, keys: keys), every: true)
        case .test(let a, let op, let b):
            return Test(CompiledExpression.make(a, keys: keys), op, CompiledExpression.make(b, keys: keys), keys)
        case .and(let cs):
            return cs.count == 1 ? make(cs[0], keys: keys) : And(cs.map { make($0, keys: keys) })
        case .or(let cs):
            return cs.count == 1 ? make(cs[0], keys: keys) : Or(cs.map { make($0, keys: keys) })
        case .not(let c):
            return Not(make(c, keys: keys))
        case .constant(let b):
            return b ? Constant.alwaysTrue : Constant.alwaysFalse
        case .opaque(let o):
            return Opaque(o)
        case .falseOnStop(let c):
            return FalseOnStop(make(c, keys: keys))
        }
    }

    func check(_ document: Document) throws -> Bool { fatalError("subclasses check documents") }

    private final class FalseOnStop: CompiledCondition {
        let part: CompiledCondition
        init(_ part: CompiledCondition) { self.part = part }

        override func check(_ document: Document) throws -> Bool {
            do { return try part.check(document) } catch is NoMatch { return false }
        }
    }

    /// A test of the value at one path, for subclasses to finish with their constant.
    private class AtPath<Operand>: CompiledCondition {
        /// Owns the memory `layout` points to.
        let path: CompiledPath
        /// `path` laid out, read per document with no reference counting.
        let layout: CompiledPath.Layout
        let keys: ComparisonKeys
        let constant: Operand

        init(_ path: FieldPath, _ keys: ComparisonKeys, _ constant: Operand) {
            self.path = CompiledPath(path)
            self.layout = self.path.layout
            self.keys = keys
            self.constant = constant
        }

        /// The value at the path in `document`, or `nil` when it is missing.
        @inline(__always)
        func value(in document: Document) throws -> ValueRef? {
            try document.value(at: layout)
        }
    }

    private final class Compare: AtPath<DocumentValue> {
        let op: Condition.Comparison

        init(_ path: FieldPath, _ keys: ComparisonKeys, _ op: Condition.Comparison, _ value: DocumentValue) {
            self.op = op
            super.init(path, keys, value)
        }

        override func check(_ document: Document) throws -> Bool {
            try ValueComparison.compare(try value(in: document), in: document.reader, op, constant, keys: keys)
        }
    }

    /// A comparison with a number, the commonest residual (`score > 99`): a document's integer or double is
    /// compared in place, with no enum to inspect per document; anything else goes to the general comparison,
    /// so the answers stay the same.
    private final class NumberCompare: CompiledCondition {
        let general: Compare
        /// `general`'s path laid out (`general` keeps it alive), read per document with no reference counting.
        let layout: CompiledPath.Layout
        let op: Condition.Comparison
        /// The constant as an integer, when it is one.
        let integer: Int64?
        /// The constant as a double, when that is exact.
        let double: Double

        init?(_ general: Compare) {
            guard let d = general.constant.exactDouble else { return nil }
            double = d
            if case .int(let i) = general.constant { integer = i } else { integer = nil }
            self.general = general
            self.layout = general.layout
            self.op = general.op
        }

        override func check(_ document: Document) throws -> Bool {
            let reader = document.reader
            guard let ref = try document.value(at: layout) else { return try general.check(document) }
            let order: Int
            if let j = integer, let i = reader.integer(ref) {
                order = i < j ? -1 : (i == j ? 0 : 1)   // exact, at any size
            } else if let d = reader.exactDouble(ref) {
                order = d < double ? -1 : (d == double ? 0 : 1)
            } else {
                return try ValueComparison.compare(ref, in: reader, op, general.constant, keys: general.keys)
            }
            return op.holds(order)
        }
    }

    /// A comparison with `nil` (`$0.bonus == nil`): a missing or null value is `nil`, anything else is not, as the
    /// general comparison has it (`nil` orders against nothing), without working out both sides' kinds per document.
    private final class NullCompare: CompiledCondition {
        /// Owns the memory `layout` points to.
        let general: Compare
        let layout: CompiledPath.Layout
        let op: Condition.Comparison

        init(_ general: Compare) {
            self.general = general
            layout = general.layout
            op = general.op
        }

        override func check(_ document: Document) throws -> Bool {
            let isNull = try document.value(at: layout).map { $0.tag == BinaryFormat.Tag.null } ?? true
            return isNull ? op == .equal : op == .notEqual
        }
    }

    private final class Contains: AtPath<DocumentValue> {
        override func check(_ document: Document) throws -> Bool {
            guard let ref = try value(in: document) else { return false }
            return try ValueComparison.arrayContains(ref, in: document.reader, constant, keys: keys)
        }
    }

    private final class OneOf: AtPath<[DocumentValue]> {
        override func check(_ document: Document) throws -> Bool {
            let ref = try value(in: document)
            for value in constant where try ValueComparison.compare(ref, in: document.reader, .equal, value, keys: keys) {
                return true
            }
            return false
        }
    }

    private final class StartsWith: AtPath<String> {
        override func check(_ document: Document) throws -> Bool {
            guard let bytes = try ValueComparison.string(try value(in: document), in: document.reader) else { return false }
            if constant.utf8.allSatisfy({ $0 < 0x80 }) && bytes.allSatisfy({ $0 < 0x80 }) {
                guard bytes.starts(with: constant.utf8) else { return false }
                // "\r\n" is one character: a prefix ending in "\r" does not begin "\r\n...".
                let n = constant.utf8.count
                return !(constant.utf8.last == 0x0D && bytes.count > n && bytes[n] == 0x0A)
            }
            return String(decoding: bytes, as: UTF8.self).starts(with: constant)
        }
    }

    private final class ContainsText: AtPath<String> {
        /// The text is ASCII with no line-break byte.
        private lazy var plainASCII = constant.utf8.allSatisfy { $0 < 0x80 && $0 != 0x0A && $0 != 0x0D }

        override func check(_ document: Document) throws -> Bool {
            guard let bytes = try ValueComparison.string(try value(in: document), in: document.reader) else { return false }
            // Every string contains the empty one, as a collection contains an empty subsequence.
            if constant.isEmpty { return true }
            // ASCII text without line breaks in ASCII bytes: a byte match is a match of whole characters ("\r\n",
            // the one ASCII character of two bytes, cannot be cut by text that has neither byte).
            if plainASCII, bytes.allSatisfy({ $0 < 0x80 }) {
                var text = constant
                return text.withUTF8 { ValueComparison.occurs(UnsafeRawBufferPointer($0), in: bytes) }
            }
            return ValueComparison.containsCharacters(String(decoding: bytes, as: UTF8.self), constant)
        }
    }

    /// A string equal to, starting with or containing a text, cases folded (``TextTest``).
    private final class TextIgnoringCase: AtPath<String> {
        let test: TextTest
        init(_ path: FieldPath, _ keys: ComparisonKeys, _ folded: String, test: TextTest) {
            self.test = test
            super.init(path, keys, folded)
        }

        override func check(_ document: Document) throws -> Bool {
            guard let bytes = try ValueComparison.string(try value(in: document), in: document.reader) else { return false }
            return test.holds(String(decoding: bytes, as: UTF8.self), constant)
        }
    }

    /// Some (or every) element of an array satisfies a condition checked with the element as its root.
    private final class Elements: CompiledCondition {
        /// Owns the memory `layout` points to.
        let path: CompiledPath
        let layout: CompiledPath.Layout
        let part: CompiledCondition
        /// `allSatisfy` rather than `contains(where:)`.
        let every: Bool

        init(_ path: CompiledPath, _ part: CompiledCondition, every: Bool) {
            self.path = path
            self.layout = path.layout
            self.part = part
            self.every = every
        }

        override func check(_ document: Document) throws -> Bool {
            let reader = document.reader
            guard let array = try document.value(at: layout), array.tag == BinaryFormat.Tag.array else {
                return every   // no elements
            }
            var answer = every
            try reader.forEachElement(array) { element in
                // Decided at the first element that differs: the rest is not checked, as Swift stops there.
                guard answer == every else { return }
                let inner = Document(reader: reader, root: element, decoded: document.decoded)
                if try part.check(inner) != every { answer = !every }
            }
            return answer
        }
    }

    /// Two computed values compared.
    private final class Test: CompiledCondition {
        let a: CompiledExpression
        let op: Condition.Comparison
        let b: CompiledExpression
        let keys: ComparisonKeys

        init(_ a: CompiledExpression, _ op: Condition.Comparison, _ b: CompiledExpression, _ keys: ComparisonKeys) {
            self.a = a
            self.op = op
            self.b = b
            self.keys = keys
        }

        override func check(_ document: Document) throws -> Bool {
            let reader = document.reader
            switch (try a.value(document), try b.value(document)) {
            case (.stored(let x), .computed(let v)): return try ValueComparison.compare(x, in: reader, op, v, keys: keys)
            case (.computed(let v), .stored(let x)):
                return try ValueComparison.compare(x, in: reader, op.swapped, v, keys: keys)
            case (.stored(let x), .stored(let y)):
                return try ValueComparison.compare(x, in: reader, op, try DocumentValue(reader: reader, ref: y), keys: keys)
            case (.computed(let u), .computed(let v)): return ValueComparison.compare(values: u, op, v)
            }
        }
    }

    private final class And: CompiledCondition {
        let parts: [CompiledCondition]
        init(_ parts: [CompiledCondition]) { self.parts = parts }

        override func check(_ document: Document) throws -> Bool {
            for part in parts where try !part.check(document) { return false }
            return true
        }
    }

    private final class Or: CompiledCondition {
        let parts: [CompiledCondition]
        init(_ parts: [CompiledCondition]) { self.parts = parts }

        override func check(_ document: Document) throws -> Bool {
            for part in parts where try part.check(document) { return true }
            return false
        }
    }

    private final class Not: CompiledCondition {
        let part: CompiledCondition
        init(_ part: CompiledCondition) { self.part = part }
        override func check(_ document: Document) throws -> Bool { try !part.check(document) }
    }

    private final class Constant: CompiledCondition {
        /// Shared by every run: a query without a condition left makes nothing to check its candidates.
        nonisolated(unsafe) static let alwaysTrue = Constant(true), alwaysFalse = Constant(false)
        let value: Bool
        init(_ value: Bool) { self.value = value }
        override func check(_ document: Document) throws -> Bool { value }
    }

    private final class Opaque: CompiledCondition {
        let condition: OpaqueCondition
        init(_ condition: OpaqueCondition) { self.condition = condition }
        override func check(_ document: Document) throws -> Bool { try condition.evaluate(try document.decoded()) }
    }
}
