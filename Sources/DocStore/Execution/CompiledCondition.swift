import Foundation

/// A field path laid out for many look-ups: every name's bytes in one allocation owned by this object, so that
/// finding the field in a document allocates nothing and retains nothing.
final class CompiledPath {
    /// The laid-out names, a plain value: whoever holds it must keep this object alive. Hot loops copy it out so
    /// that each look-up touches no reference count.
    struct Layout {
        fileprivate let names: UnsafeMutableRawPointer
        fileprivate let spans: UnsafeMutableBufferPointer<(offset: Int, count: Int)>

        /// The value at this path from `root`, or `nil` when a step is missing or not an object. The same answer as
        /// ``BinaryReader/value(atPath:from:)``.
        @inline(__always)
        func value(in reader: BinaryReader, from root: ValueRef) throws -> ValueRef? {
            var current = root
            for span in spans {
                let name = UnsafeRawBufferPointer(start: names + span.offset, count: span.count)
                guard let found = try reader.field(current, named: name) else { return nil }
                current = found
            }
            return current
        }
    }

    let layout: Layout
    let path: FieldPath

    init(_ path: FieldPath) {
        self.path = path
        let total = path.utf8Components.reduce(0) { $0 + $1.count }
        let names = UnsafeMutableRawPointer.allocate(byteCount: max(total, 1), alignment: 1)
        let spans = UnsafeMutableBufferPointer<(offset: Int, count: Int)>.allocate(capacity: path.utf8Components.count)
        var offset = 0
        for (i, name) in path.utf8Components.enumerated() {
            name.withUnsafeBytes { bytes in
                if let from = bytes.baseAddress { (names + offset).copyMemory(from: from, byteCount: bytes.count) }
            }
            spans[i] = (offset, name.count)
            offset += name.count
        }
        layout = Layout(names: names, spans: spans)
    }

    deinit {
        layout.names.deallocate()
        layout.spans.deallocate()
    }

    /// The value at this path from `root`, or `nil` when a step is missing or not an object.
    @inline(__always)
    func value(in reader: BinaryReader, from root: ValueRef) throws -> ValueRef? {
        try layout.value(in: reader, from: root)
    }
}

/// A residual condition prepared once for a run over many documents.
///
/// ``ConditionEvaluator`` walks the ``Condition`` enum, copying each case's payload (its path and value) per
/// document; a compiled condition is a tree of objects holding their paths laid out as bytes, so checking a
/// document costs the look-ups and the comparisons alone. The answers are ``ConditionEvaluator``'s: the
/// comparisons are the same functions.
class CompiledCondition {
    /// What a node is given about the document being checked.
    struct Document {
        let reader: BinaryReader
        let root: ValueRef
        /// Decodes the document, for opaque parts (at most once per document; the caller keeps it).
        let decoded: () throws -> Any
    }

    /// Compiles `condition`; `keys` keeps the constants' encoded keys across documents.
    static func make(_ condition: Condition, keys: ComparisonKeys) -> CompiledCondition {
        switch condition {
        case .compare(let path, let op, let value):
            let general = Compare(CompiledPath(path), op, value, keys)
            return NumberCompare(general) ?? general
        case .contains(let path, let value):
            return Contains(CompiledPath(path), value, keys)
        case .oneOf(let path, let values):
            return OneOf(CompiledPath(path), values, keys)
        case .startsWith, .containsText:
            return Fallback(condition, keys)
        case .and(let cs):
            return cs.count == 1 ? make(cs[0], keys: keys) : And(cs.map { make($0, keys: keys) })
        case .or(let cs):
            return cs.count == 1 ? make(cs[0], keys: keys) : Or(cs.map { make($0, keys: keys) })
        case .not(let c):
            return Not(make(c, keys: keys))
        case .constant(let b):
            return Constant(b)
        case .opaque(let o):
            return Opaque(o)
        }
    }

    func check(_ document: Document) throws -> Bool { fatalError("subclasses check documents") }

    private final class Compare: CompiledCondition {
        /// Owns the memory `layout` points to.
        let path: CompiledPath
        /// `path` laid out, read per document with no reference counting.
        let layout: CompiledPath.Layout
        let op: Condition.Comparison
        let value: DocumentValue
        let keys: ComparisonKeys

        init(_ path: CompiledPath, _ op: Condition.Comparison, _ value: DocumentValue, _ keys: ComparisonKeys) {
            self.path = path
            self.layout = path.layout
            self.op = op
            self.value = value
            self.keys = keys
        }

        override func check(_ document: Document) throws -> Bool {
            let ref = try layout.value(in: document.reader, from: document.root)
            return try ConditionEvaluator.compare(ref, in: document.reader, op, value, keys: keys)
        }
    }

    /// A comparison with a number, the commonest residual (`score > 99`): a document's integer or double is
    /// compared in place, with no enum to inspect per document; anything else goes to the general comparison,
    /// so the answers stay ``ConditionEvaluator``'s.
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
            guard let d = general.value.exactDouble else { return nil }
            double = d
            if case .int(let i) = general.value { integer = i } else { integer = nil }
            self.general = general
            self.layout = general.layout
            self.op = general.op
        }

        override func check(_ document: Document) throws -> Bool {
            let reader = document.reader
            guard let ref = try layout.value(in: reader, from: document.root) else {
                return try ConditionEvaluator.compare(nil, in: reader, op, general.value, keys: general.keys)
            }
            let order: Int
            if let j = integer, let i = reader.integer(ref) {
                order = i < j ? -1 : (i == j ? 0 : 1)   // exact, at any size
            } else if let d = reader.exactDouble(ref) {
                order = d < double ? -1 : (d == double ? 0 : 1)
            } else {
                return try ConditionEvaluator.compare(ref, in: reader, op, general.value, keys: general.keys)
            }
            return op.holds(order)
        }
    }

    private final class Contains: CompiledCondition {
        /// Owns the memory `layout` points to.
        let path: CompiledPath
        /// `path` laid out, read per document with no reference counting.
        let layout: CompiledPath.Layout
        let value: DocumentValue
        let keys: ComparisonKeys

        init(_ path: CompiledPath, _ value: DocumentValue, _ keys: ComparisonKeys) {
            self.path = path
            self.layout = path.layout
            self.value = value
            self.keys = keys
        }

        override func check(_ document: Document) throws -> Bool {
            let reader = document.reader
            guard let ref = try layout.value(in: reader, from: document.root) else { return false }
            return try ConditionEvaluator.arrayContains(ref, in: reader, value, keys: keys)
        }
    }

    private final class OneOf: CompiledCondition {
        /// Owns the memory `layout` points to.
        let path: CompiledPath
        /// `path` laid out, read per document with no reference counting.
        let layout: CompiledPath.Layout
        let values: [DocumentValue]
        let keys: ComparisonKeys

        init(_ path: CompiledPath, _ values: [DocumentValue], _ keys: ComparisonKeys) {
            self.path = path
            self.layout = path.layout
            self.values = values
            self.keys = keys
        }

        override func check(_ document: Document) throws -> Bool {
            let ref = try layout.value(in: document.reader, from: document.root)
            for value in values where try ConditionEvaluator.compare(ref, in: document.reader, .equal, value, keys: keys) {
                return true
            }
            return false
        }
    }

    /// Text conditions, which cost a string's characters anyway: checked by ``ConditionEvaluator`` itself.
    private final class Fallback: CompiledCondition {
        let condition: Condition
        let keys: ComparisonKeys

        init(_ condition: Condition, _ keys: ComparisonKeys) {
            self.condition = condition
            self.keys = keys
        }

        override func check(_ document: Document) throws -> Bool {
            try ConditionEvaluator(reader: document.reader, root: document.root, keys: keys, decoded: document.decoded)
                .evaluate(condition)
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
