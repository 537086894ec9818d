import DocStore
import Foundation

/// One statement of the shell, as parsed.
enum Statement: Equatable, Sendable {
    /// A query or a change: `people.include(age >= 18).count()`.
    case query(QueryExpression)
    case begin
    case commit
    case rollback
    /// A dot-command with its arguments as words: `.mode json`.
    case command(name: String, arguments: [String], location: SourceLocation)
    /// Nothing (an empty line, or only a comment).
    case empty
}

/// `name.step().step()...`: a collection or saved filter, refined step by step.
struct QueryExpression: Equatable, Sendable {
    var base: String
    var baseLocation: SourceLocation
    /// How many Unicode scalars the name spans as written (with its backticks, if any).
    var baseLength: Int
    var steps: [Step]
    /// The text it was parsed from, for saving it.
    var text: String
}

/// A path to a field as written, where it was written.
struct PathReference: Equatable, Sendable {
    var path: FieldPath
    var location: SourceLocation
    var length: Int
}

/// A literal value as written.
struct Literal: Equatable, Sendable {
    var value: DocumentValue
    var location: SourceLocation
    var length: Int
}

enum Step: Equatable, Sendable {
    case include(PredicateNode)
    case exclude(PredicateNode)
    case sortBy(PathReference, SortOrder)
    case reverse
    case slice(Range<Int>)
    // Steps that end a query: they run it.
    case first, last, any, count, results, explain, delete
    case findOrCreate(Literal)
    case insert(Literal)
    case save(Literal)
    /// `sum(score)`, `average(age)`, `min(age)`, `max(age)`: one value computed from the matches.
    case aggregate(AggregateCall)
    /// `distinct(city)`: the field's values, each once.
    case distinct(PathReference)
    /// `groupBy(city, active).count()`: the matches grouped by the fields' values, with an aggregate per group.
    case groupBy([PathReference], AggregateCall)
    /// `sortBy(value, .reverse)` after `groupBy(...)`: the groups ordered by their key or their aggregate.
    case sortGroups(GroupOrder, SortOrder)
    /// `select(name, age)`: the results with only these fields.
    case select([PathReference])
    /// `update(set: {...}, unset: [...], inc: {...}, push: {...}, pull: {...})`, in the order the library
    /// applies them: sets, unsets, increments, pushes, pulls, each in the order written.
    case update([FieldChange])

    /// Whether the step does more than refine the documents (which, and in what order): it runs the query, or makes
    /// something else of it (a value, groups, a projection). A saved filter holds no such step.
    var isTerminal: Bool {
        switch self {
        case .include, .exclude, .sortBy, .reverse, .slice: return false
        default: return true
        }
    }
}

/// An aggregate as written: `count()`, `sum(score)`, `average(age)`, `min(age)`, `max(age)`.
struct AggregateCall: Equatable, Sendable {
    enum Function: String, CaseIterable, Sendable {
        case count, sum, average, min, max
    }

    var function: Function
    /// The field it reads; `nil` for `count()`.
    var path: PathReference?

    var aggregate: Aggregate {
        guard let path = path?.path else { return .count }
        switch function {
        case .count: return .count
        case .sum: return .sum(path)
        case .average: return .average(path)
        case .min: return .min(path)
        case .max: return .max(path)
        }
    }

    /// As the language writes it, which names its column: `count()`, `sum(score)`.
    var written: String { "\(function.rawValue)(\(path?.path.written ?? ""))" }
}

/// A condition as written in `include(...)` / `exclude(...)`.
indirect enum PredicateNode: Equatable, Sendable {
    /// All hold: `a && b && c`, one level however long the chain.
    case and([PredicateNode])
    /// One holds: `a || b || c`.
    case or([PredicateNode])
    case not(PredicateNode)
    case constant(Bool)
    /// `path op literal` (a literal on the left is turned around when parsed).
    case compare(PathReference, Filter.Comparison, Literal)
    /// A field alone: `active` is `active == true`.
    case isTrue(PathReference)
    /// `path in a..<b` or `path in a...b`.
    case inRange(PathReference, lower: Literal, upper: Literal, closed: Bool)
    /// `path.contains(literal)`: an array's element, or a string's text.
    case contains(PathReference, Literal)
    /// `[a, b].contains(path)` or `path in [a, b]`.
    case oneOf(PathReference, [Literal])
    /// `path.hasPrefix("x")`, `path.starts(with: "x")`.
    case hasPrefix(PathReference, Literal)
    /// A text test with cases folded: `path.lowercased() == "x"`, `path.lowercased().hasPrefix("x")`,
    /// `path.lowercased().contains("x")` (`lowered`), `path.localizedCaseInsensitiveContains("x")`.
    case ignoringCase(PathReference, CaseTest, Literal, lowered: Bool)
    /// Two values compared where one is computed or both are fields: `depDelay ?? 0 > 10`, `arrDelay > depDelay`.
    case compareValues(ValueNode, Filter.Comparison, ValueNode)
    /// `test ? a : b`.
    case choice(PredicateNode, PredicateNode, PredicateNode)
}

/// What a text test with cases folded asks.
enum CaseTest: Sendable, Equatable {
    case equal, prefix, contains
}

/// A value computed in a condition, as written: `depDelay ?? 0`, `distance * 2`, `tailnum?.count`, `-hour`.
indirect enum ValueNode: Equatable, Sendable {
    case path(PathReference)
    case literal(Literal)
    /// `a op b` for `+ - * / %`, with the operator's token.
    case arithmetic(String, ValueNode, ValueNode, SourceLocation)
    case negate(ValueNode, SourceLocation)
    /// `a ?? b`.
    case coalesce(ValueNode, ValueNode)
    /// `a?.count`.
    case count(ValueNode, SourceLocation)
}

extension FieldPath {
    /// The path as the language writes it: a name that is not a plain word (`Body Mass (g)`, `true`) in backticks.
    var written: String {
        components.map { name in
            let plain = name.first.map { $0.isLetter || $0 == "_" } == true
                && name.allSatisfy { $0.isLetter || $0.isNumber || $0 == "_" }
                && !Parser.literalWords.contains(name)
            return plain ? name : "`" + name + "`"
        }.joined(separator: ".")
    }
}
