import Foundation

/// A value met while evaluating an expression on a document: a part of the stored bytes, or a value computed from
/// them (`.computed(.null)` for nil or a missing field).
enum Operand {
    case stored(ValueRef)
    case computed(DocumentValue)

    var isNull: Bool {
        switch self {
        case .stored(let ref): return ref.tag == BinaryFormat.Tag.null
        case .computed(let value): return value == .null
        }
    }
}

/// A ``ValueExpression`` prepared once for a run over many documents, as ``CompiledCondition`` prepares conditions.
class CompiledExpression {
    func value(_ document: CompiledCondition.Document) throws -> Operand { fatalError("subclasses compute values") }

    static func make(_ expression: ValueExpression, keys: ComparisonKeys) -> CompiledExpression {
        switch expression {
        case .field(let path): return Field(CompiledPath(path))
        case .constant(let value): return Constant(value)
        case .arithmetic(let op, let a, let b): return Arithmetic(op, make(a, keys: keys), make(b, keys: keys))
        case .negate(let a): return Negate(make(a, keys: keys))
        case .coalesce(let a, let b): return Coalesce(make(a, keys: keys), make(b, keys: keys))
        case .count(let a): return Count(make(a, keys: keys))
        case .countWhere(let path, let c): return CountWhere(CompiledPath(path), CompiledCondition.make(c, keys: keys))
        case .choice(let c, let a, let b):
            return Choice(CompiledCondition.make(c, keys: keys), make(a, keys: keys), make(b, keys: keys))
        case .truth(let c): return Truth(CompiledCondition.make(c, keys: keys))
        case .unwrap(let a): return Unwrap(make(a, keys: keys))
        case .asDouble(let a): return AsDouble(make(a, keys: keys))
        }
    }

    /// An expression computed from one other.
    private class Unary: CompiledExpression {
        let a: CompiledExpression
        init(_ a: CompiledExpression) { self.a = a }
    }

    private final class Field: CompiledExpression {
        /// Owns the memory `layout` points to.
        let path: CompiledPath
        let layout: CompiledPath.Layout
        init(_ path: CompiledPath) { self.path = path; layout = path.layout }

        override func value(_ document: CompiledCondition.Document) throws -> Operand {
            try document.value(at: layout).map(Operand.stored) ?? .computed(.null)
        }
    }

    private final class Constant: CompiledExpression {
        let constant: Operand
        init(_ value: DocumentValue) { constant = .computed(value) }
        override func value(_ document: CompiledCondition.Document) throws -> Operand { constant }
    }

    private static func number(_ operand: Operand, in reader: BinaryReader) -> ValueExpression.Number? {
        switch operand {
        case .stored(let ref):
            if let i = reader.integer(ref) { return .int(i) }
            if let u = reader.unsigned(ref) { return ValueExpression.Number(.uint(u)) }
            return reader.double(ref).map(ValueExpression.Number.double)
        case .computed(let value): return ValueExpression.Number(value)
        }
    }

    private final class Arithmetic: CompiledExpression {
        let op: ValueExpression.Operator
        let a: CompiledExpression
        let b: CompiledExpression

        init(_ op: ValueExpression.Operator, _ a: CompiledExpression, _ b: CompiledExpression) {
            self.op = op
            self.a = a
            self.b = b
        }

        override func value(_ document: CompiledCondition.Document) throws -> Operand {
            let reader = document.reader
            guard let x = CompiledExpression.number(try a.value(document), in: reader),
                  let y = CompiledExpression.number(try b.value(document), in: reader) else { return .computed(.null) }
            guard let result = x.applying(op, y) else { throw NoMatch() }
            return .computed(result.value)
        }
    }

    private final class Negate: Unary {
        override func value(_ document: CompiledCondition.Document) throws -> Operand {
            guard let x = CompiledExpression.number(try a.value(document), in: document.reader) else { return .computed(.null) }
            guard let result = x.negated else { throw NoMatch() }
            return .computed(result.value)
        }
    }

    private final class Coalesce: CompiledExpression {
        let a: CompiledExpression
        let b: CompiledExpression
        init(_ a: CompiledExpression, _ b: CompiledExpression) { self.a = a; self.b = b }

        override func value(_ document: CompiledCondition.Document) throws -> Operand {
            let value = try a.value(document)
            return value.isNull ? try b.value(document) : value
        }
    }

    private final class Count: Unary {
        override func value(_ document: CompiledCondition.Document) throws -> Operand {
            switch try a.value(document) {
            case .stored(let ref) where ref.tag == BinaryFormat.Tag.array:
                return .computed(.int(Int64(document.reader.count(ref))))
            case .stored(let ref) where ref.tag == BinaryFormat.Tag.string:
                return .computed(.int(Int64(ValueComparison.characterCount(try document.reader.payloadBytes(ref)))))
            case .computed(.string(let s)): return .computed(.int(Int64(s.count)))
            case .computed(.array(let elements)): return .computed(.int(Int64(elements.count)))
            default: return .computed(.null)
            }
        }
    }

    /// The elements of an array that meet a condition, counted; nil where the path holds no array.
    private final class CountWhere: CompiledExpression {
        /// Owns the memory `layout` points to.
        let path: CompiledPath
        let layout: CompiledPath.Layout
        let part: CompiledCondition
        init(_ path: CompiledPath, _ part: CompiledCondition) { self.path = path; layout = path.layout; self.part = part }

        override func value(_ document: CompiledCondition.Document) throws -> Operand {
            let reader = document.reader
            guard let array = try document.value(at: layout), array.tag == BinaryFormat.Tag.array else {
                return .computed(.null)
            }
            var count: Int64 = 0
            try reader.forEachElement(array) { element in
                if try part.check(CompiledCondition.Document(reader: reader, root: element, decoded: document.decoded)) {
                    count += 1
                }
            }
            return .computed(.int(count))
        }
    }

    private final class Choice: CompiledExpression {
        let test: CompiledCondition
        let a: CompiledExpression
        let b: CompiledExpression
        init(_ test: CompiledCondition, _ a: CompiledExpression, _ b: CompiledExpression) {
            self.test = test
            self.a = a
            self.b = b
        }

        override func value(_ document: CompiledCondition.Document) throws -> Operand {
            try test.check(document) ? try a.value(document) : try b.value(document)
        }
    }

    private final class Truth: CompiledExpression {
        let condition: CompiledCondition
        init(_ condition: CompiledCondition) { self.condition = condition }

        override func value(_ document: CompiledCondition.Document) throws -> Operand {
            .computed(.bool(try condition.check(document)))
        }
    }

    private final class Unwrap: Unary {
        override func value(_ document: CompiledCondition.Document) throws -> Operand {
            let value = try a.value(document)
            if value.isNull { throw NoMatch() }
            return value
        }
    }

    private final class AsDouble: Unary {
        override func value(_ document: CompiledCondition.Document) throws -> Operand {
            guard let x = CompiledExpression.number(try a.value(document), in: document.reader) else { return .computed(.null) }
            return .computed(.double(x.double))
        }
    }
}
