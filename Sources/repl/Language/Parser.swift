import DocStore
import Foundation

/// Parses the shell's text: the query language (the Swift DSL's words, with predicates as in a `#Predicate` body
/// minus the `$0.`), `begin`/`commit`/`rollback`, and dot-commands.
struct Parser {
    /// The words that may follow a query's name, for messages, suggestions and completion.
    static let stepWords = ["include", "exclude", "sortBy", "reverse", "first", "last", "any", "count", "results",
                            "explain", "delete", "findOrCreate", "insert", "save", "sum", "average", "min", "max",
                            "distinct", "groupBy", "select", "update"]
    /// The labels of `update(...)`; `increment:` is `inc:` as the library spells it.
    static let updateLabels = ["set", "unset", "inc", "increment", "push", "pull"]
    static let statementWords = ["begin", "commit", "rollback"]

    private var text: String
    private var tokens: [Token]
    private var position = 0

    init(_ text: String) throws(ParseError) {
        self.text = text
        self.tokens = try Lexer.tokens(text)
    }

    /// Parses one statement: a line, or lines joined when a statement spans several.
    static func statement(_ text: String) throws(ParseError) -> Statement {
        let trimmed = text.trimmingCharacters(in: .whitespacesAndNewlines)
        if trimmed.hasPrefix(".") { return try command(text) }
        var parser = try Parser(text)
        // A `;` may end a statement, as sqlite3 and mongosh users type it (a dot-command's words are taken as
        // they are, as sqlite3 takes them).
        if parser.tokens.count >= 2, parser.tokens[parser.tokens.count - 2].symbol == ";" {
            let semicolon = parser.tokens.remove(at: parser.tokens.count - 2)
            parser.text = String(String.UnicodeScalarView(text.unicodeScalars.prefix(semicolon.location.offset)))
        }
        return try parser.parseStatement()
    }

    /// A query kept by `.save`: a name and refinements, without a step that runs it.
    static func savedQuery(_ text: String) throws(ParseError) -> QueryExpression {
        var parser = try Parser(text)
        let query = try parser.parseQuery()
        guard parser.current.kind == .end else {
            throw parser.error("unexpected \(parser.current.shown) after the query")
        }
        if let step = query.steps.first(where: \.isTerminal) {
            throw ParseError(message: "a saved filter cannot end in \(Parser.name(of: step)): it keeps which documents "
                + "and in what order, and runs when used", location: query.baseLocation, length: text.count)
        }
        return query
    }

    /// A dot-command: its name and its arguments, split at spaces, with double quotes keeping spaces together (and
    /// backticks, which stay in the argument as part of a field's name).
    private static func command(_ text: String) throws(ParseError) -> Statement {
        let leading = text.prefix { $0.isWhitespace }
        let lines = leading.filter { $0 == "\n" }.count
        let column = leading.split(separator: "\n", omittingEmptySubsequences: false).last.map { $0.count } ?? 0
        let location = SourceLocation(offset: leading.count, line: lines + 1, column: column + 1)
        var words: [String] = []
        var current = ""
        var quoted = false
        var backticked = false   // a name in backticks keeps its spaces and its backticks: `Body Mass (g)`
        var hasWord = false
        var index = leading.count
        for c in text.dropFirst(leading.count) {
            index += 1
            if c == "\"" && !backticked { quoted.toggle(); hasWord = true; continue }
            if c == "`" && !quoted { backticked.toggle() }
            if c.isWhitespace && !quoted && !backticked {
                if hasWord { words.append(current); current = ""; hasWord = false }
                continue
            }
            current.append(c)
            hasWord = true
        }
        if quoted {
            throw ParseError(message: "this argument has no closing quote", location: location, isIncomplete: false)
        }
        if hasWord { words.append(current) }
        guard let first = words.first, first.count > 1 else {
            throw ParseError(message: "a dot-command needs a name, such as .help", location: location)
        }
        return .command(name: String(first.dropFirst()), arguments: Array(words.dropFirst()), location: location)
    }

    // MARK: Statements

    private var current: Token { tokens[position] }

    private mutating func advance() -> Token {
        let token = tokens[position]
        if position < tokens.count - 1 { position += 1 }
        return token
    }

    private func error(_ message: String, at token: Token? = nil, suggestion: String? = nil) -> ParseError {
        let token = token ?? current
        return ParseError(message: message, location: token.location, length: token.length, suggestion: suggestion,
                          isIncomplete: token.kind == .end && !balanced)
    }

    /// Whether every bracket opened so far is closed (else the statement may go on on the next line).
    private var balanced: Bool {
        var depth = 0
        for token in tokens {
            switch token.symbol {
            case "(", "[", "{": depth += 1
            case ")", "]", "}": depth -= 1
            default: break
            }
        }
        return depth <= 0
    }

    private mutating func expect(_ symbol: String, _ what: String) throws(ParseError) -> Token {
        guard current.symbol == symbol else {
            throw error("expected '\(symbol)' \(what), found \(current.shown)")
        }
        return advance()
    }

    mutating func parseStatement() throws(ParseError) -> Statement {
        if current.kind == .end { return .empty }
        guard let word = current.identifier else {
            throw error("a statement starts with a collection's name, a saved filter's name, begin, commit, "
                + "rollback, or a dot-command such as .help; found \(current.shown)")
        }
        if current.word.map(Parser.statementWords.contains) == true, tokens[position + 1].kind == .end {
            _ = advance()
            switch word {
            case "begin": return .begin
            case "commit": return .commit
            default: return .rollback
            }
        }
        let query = try parseQuery()
        guard current.kind == .end else {
            throw error("unexpected \(current.shown) after the query; one statement per line")
        }
        return .query(query)
    }

    /// `name(.step)*`.
    mutating func parseQuery() throws(ParseError) -> QueryExpression {
        let start = current
        guard let base = current.identifier else { throw error("expected a collection's name, found \(current.shown)") }
        _ = advance()
        var steps: [Step] = []
        // `people.query()`, as the library's `Person.query()`: all the documents, refined by the steps after it.
        if current.symbol == ".", tokens[position + 1].word == "query", tokens[position + 2].symbol == "(" {
            _ = advance(); _ = advance(); _ = advance()
            _ = try expect(")", "after 'query(': it takes nothing")
        }
        var stage = Stage.documents
        while current.kind != .end && current.symbol != ";" {
            if let last = steps.last, stage != .documents { try checkFollows(last, in: stage) }
            if current.symbol == "[" {
                steps.append(try parseSlice())
                continue
            }
            guard current.symbol == "." else { break }
            _ = advance()
            let step = try parseStep(in: stage)
            steps.append(step)
            stage = stage.after(step)
        }
        let scalars = Array(text.unicodeScalars)
        let endOffset = current.kind == .end ? scalars.count : current.location.offset
        let written = String(String.UnicodeScalarView(scalars[start.location.offset..<endOffset]))
            .trimmingCharacters(in: .whitespacesAndNewlines)
        return QueryExpression(base: base, baseLocation: start.location, baseLength: start.length, steps: steps,
                               text: written)
    }

    static func name(of step: Step) -> String {
        switch step {
        case .first: return "first"
        case .last: return "last"
        case .any: return "any"
        case .count: return "count()"
        case .results: return "results()"
        case .explain: return "explain()"
        case .delete: return "delete()"
        case .findOrCreate: return "findOrCreate(...)"
        case .insert: return "insert(...)"
        case .save: return "save(...)"
        case .aggregate(let call): return call.written
        case .distinct(let path): return "distinct(\(path.path.written))"
        case .groupBy(let paths, let call):
            return "groupBy(\(paths.map(\.path.written).joined(separator: ", "))).\(call.written)"
        case .select: return "select(...)"
        case .update: return "update(...)"
        default: return "this step"
        }
    }

    /// What the steps so far make of the documents, which decides the steps that may follow.
    private enum Stage: Equatable {
        /// The documents, refined: any step may follow.
        case documents
        /// Groups with their aggregate: sortBy(key|value), [a..<b], then results(), first, count() or explain().
        case groups
        /// Some fields of each result: results() or first.
        case projection
        /// One value computed from the matches: explain() alone may follow.
        case value
        /// A field's distinct values: count() (how many) or explain().
        case distinct
        /// The query has run: nothing follows.
        case done

        /// The words of the steps that may follow.
        var next: [String] {
            switch self {
            case .documents: return Parser.stepWords
            case .groups: return ["sortBy", "results", "first", "count", "explain"]
            case .projection: return ["results", "first"]
            case .value: return ["explain"]
            case .distinct: return ["count", "explain"]
            case .done: return []
            }
        }

        func after(_ step: Step) -> Stage {
            switch (self, step) {
            case (.documents, _) where !step.isTerminal: return .documents
            case (.documents, .count), (.documents, .aggregate): return .value
            case (.documents, .distinct): return .distinct
            case (.documents, .groupBy): return .groups
            case (.documents, .select): return .projection
            case (.groups, .sortGroups), (.groups, .slice): return .groups
            default: return .done
            }
        }
    }

    /// Refuses what cannot follow `last` (a step that made groups, a projection or a value, or ran the query).
    private func checkFollows(_ last: Step, in stage: Stage) throws(ParseError) {
        let next = current.symbol == "." ? tokens[position + 1] : current
        if current.symbol == "[" && stage == .groups { return }
        if current.symbol == ".", let word = next.word, stage.next.contains(word) { return }
        let name = Parser.name(of: last)
        let word = current.symbol == "." ? next.word ?? "" : ""
        let suggestion = Suggest.closest(word, in: stage.next).map { "'\($0)'" }
        // A step that refines the documents goes before what is made of them.
        let maker = stage == .projection ? "select(...)" : "groupBy(...)"
        let refining = current.symbol == "[" ? "a slice"
            : ["include", "exclude", "sortBy", "reverse"].contains(word) ? "\(word)(...)" : nil
        switch stage {
        case .groups:
            let goOn = "groups go on with sortBy(value[, .reverse]) or sortBy(key[, .reverse]), [a..<b], then "
                + "results(), first, count() or explain()"
            if word == "reverse" {
                throw error("\(goOn): sortBy(key, .reverse) puts the groups last first", at: next)
            }
            if let refining {
                throw error("\(refining) refines the documents, so it comes before \(maker); \(goOn)", at: next)
            }
            throw error("\(goOn), not \(next.shown)", at: next, suggestion: suggestion)
        case .projection:
            let only = "only results() or first can follow select(...), which keeps some fields of each result"
            if let refining {
                throw error("\(refining) refines the documents, so it comes before \(maker); \(only)", at: next)
            }
            throw error("\(only); not \(next.shown)", at: next, suggestion: suggestion)
        case .value:
            throw error("nothing but explain() can follow \(name), which runs the query")
        case .distinct:
            throw error("only count() (how many values) or explain() can follow \(name), which runs the query",
                        at: next, suggestion: suggestion)
        default:
            throw error("nothing can follow \(name), which runs the query")
        }
    }

    private mutating func parseSlice() throws(ParseError) -> Step {
        _ = try expect("[", "to start a slice")
        let lowerToken = current
        let lower: Int
        if current.symbol == "..<" || current.symbol == "..." {
            lower = 0
        } else {
            guard case .integer(let l) = current.kind, let li = Int(exactly: l) else {
                throw error("a slice's bounds are whole numbers, as in [0..<10]; found \(current.shown)")
            }
            lower = li
            _ = advance()
        }
        guard let op = current.symbol, op == "..<" || op == "..." else {
            throw error("expected '..<' or '...' in the slice, as in [0..<10]; found \(current.shown)")
        }
        _ = advance()
        guard case .integer(let u) = current.kind, let upper = Int(exactly: u) else {
            throw error("a slice's bounds are whole numbers, as in [0..<10]; found \(current.shown)")
        }
        _ = advance()
        _ = try expect("]", "to end the slice")
        guard lower <= upper, op == "..<" || upper < Int.max else {
            throw error(lower > upper ? "the slice [\(lower)\(op)\(upper)] ends before it starts"
                : "the slice's upper bound is too large", at: lowerToken)
        }
        let end = op == "..." ? upper + 1 : upper
        return .slice(lower..<end)
    }

    private mutating func parseStep(in stage: Stage) throws(ParseError) -> Step {
        let token = current
        if token.word == "query" {
            throw error("query() starts a query: it comes right after the collection's name, as in people.query()"
                + ".include(...)")
        }
        guard let word = token.word else {
            throw error("expected a step such as include, sortBy or count after '.', found \(current.shown)")
        }
        _ = advance()
        func emptyCall() throws(ParseError) {
            if current.symbol == "(" {
                _ = advance()
                _ = try expect(")", "after '\(word)(': it takes nothing")
            }
        }
        switch word {
        case "include", "exclude":
            _ = try expect("(", "after \(word)")
            let node = current.symbol == ")" ? .constant(true) : try parseOr()
            _ = try expect(")", "to close \(word)(")
            return word == "include" ? .include(node) : .exclude(node)
        case "sortBy" where stage == .groups:
            _ = try expect("(", "after sortBy")
            if current.symbol == "." { _ = advance() }   // `.value`, as the library writes it
            let by: GroupOrder
            switch current.word {
            case "key": by = .key
            case "value": by = .value
            default:
                throw error("groups are sorted by key (the values grouped by) or value (the aggregate), as in "
                    + "sortBy(value, .reverse); not \(current.shown)",
                    suggestion: Suggest.closest(current.identifier ?? "", in: ["key", "value"]).map { "'\($0)'" })
            }
            _ = advance()
            let order = try parseSortOrder()
            _ = try expect(")", "to close sortBy(")
            return .sortGroups(by, order)
        case "sortBy":
            _ = try expect("(", "after sortBy")
            let path = try parsePath(allowKeyPath: true)
            let order = try parseSortOrder()
            _ = try expect(")", "to close sortBy(")
            return .sortBy(path, order)
        case "reverse": try emptyCall(); return .reverse
        case "first": try emptyCall(); return .first
        case "last": try emptyCall(); return .last
        case "any": try emptyCall(); return .any
        case "count": try emptyCall(); return .count
        case "results": try emptyCall(); return .results
        case "explain": try emptyCall(); return .explain
        case "delete": try emptyCall(); return .delete
        case "findOrCreate", "insert", "save":
            _ = try expect("(", "after \(word)")
            let value = try parseLiteral()
            _ = try expect(")", "to close \(word)(")
            switch word {
            case "findOrCreate": return .findOrCreate(value)
            case "insert": return .insert(value)
            default: return .save(value)
            }
        case "sum", "average", "min", "max":
            return .aggregate(try parseAggregate(AggregateCall.Function(rawValue: word)!))
        case "distinct":
            return .distinct(try parseField(of: word))
        case "groupBy":
            let paths = try parseFields(of: word)
            let functions = AggregateCall.Function.allCases.map(\.rawValue)
            guard current.symbol == ".", let name = tokens[position + 1].word,
                  let function = AggregateCall.Function(rawValue: name) else {
                let at = current.symbol == "." ? tokens[position + 1] : current
                throw error("groupBy(...) is followed by the aggregate of each group: count(), sum(FIELD), "
                    + "average(FIELD), min(FIELD) or max(FIELD); found \(at.shown)", at: at,
                    suggestion: Suggest.closest(at.identifier ?? "", in: functions).map { "'\($0)'" })
            }
            _ = advance(); _ = advance()
            return .groupBy(paths, try parseAggregate(function))
        case "select":
            return .select(try parseFields(of: word))
        case "update":
            return try parseUpdate(at: token)
        default:
            throw error("unknown step '\(word)'; a query goes on with \(Parser.stepWords.joined(separator: ", "))",
                        at: token, suggestion: Suggest.closest(word, in: Parser.stepWords).map { "'\($0)'" })
        }
    }

    /// `, .reverse` or `, order: .forward` after what a sortBy orders by; `.forward` when there is none.
    private mutating func parseSortOrder() throws(ParseError) -> SortOrder {
        guard current.symbol == "," else { return .forward }
        _ = advance()
        if current.word == "order" && tokens[position + 1].symbol == ":" { _ = advance(); _ = advance() }
        _ = try expect(".", "before the order (.forward or .reverse)")
        let order: SortOrder
        switch current.word {
        case "reverse": order = .reverse
        case "forward": order = .forward
        default:
            throw error("the order is .forward or .reverse, not \(current.shown)",
                        suggestion: Suggest.closest(current.identifier ?? "", in: ["forward", "reverse"])
                            .map { "'.\($0)'" })
        }
        _ = advance()
        return order
    }

    /// `(field)` after an aggregate's name; `count` takes nothing (its parentheses optional, as for the step).
    private mutating func parseAggregate(_ function: AggregateCall.Function) throws(ParseError) -> AggregateCall {
        guard function != .count else {
            if current.symbol == "(" {
                _ = advance()
                _ = try expect(")", "after 'count(': it takes nothing")
            }
            return AggregateCall(function: .count)
        }
        return AggregateCall(function: function, path: try parseField(of: function.rawValue))
    }

    /// `(field)` after `sum`, `distinct`...: the one field it reads.
    private mutating func parseField(of name: String) throws(ParseError) -> PathReference {
        _ = try expect("(", "after \(name), as in \(name)(age)")
        if current.symbol == ")" { throw error("\(name) takes the field it reads, as in \(name)(age)") }
        let path = try parsePath(allowKeyPath: true)
        _ = try expect(")", "to close \(name)(: it takes one field")
        return path
    }

    /// `(a, b.c, ...)`: the fields of groupBy or select, one at least.
    private mutating func parseFields(of name: String) throws(ParseError) -> [PathReference] {
        _ = try expect("(", "after \(name), as in \(name)(city)")
        if current.symbol == ")" { throw error("\(name) takes one field or more, as in \(name)(city)") }
        var paths = [try parsePath(allowKeyPath: true)]
        while current.symbol == "," {
            _ = advance()
            paths.append(try parsePath(allowKeyPath: true))
        }
        _ = try expect(")", "or ',' and another field in \(name)(")
        return paths
    }

    /// `update(set: {...}, unset: [...], inc: {...}, push: {...}, pull: {...})`: the labels in any order, each
    /// once; the changes in the library's order (sets, unsets, increments, pushes, pulls), each in the order written.
    private mutating func parseUpdate(at word: Token) throws(ParseError) -> Step {
        let example = #"update(set: {"city": "Bergen"}, inc: {"age": 1})"#
        _ = try expect("(", "after update, as in \(example)")
        if current.symbol == ")" { throw error("update takes the changes to make, as in \(example)") }
        var changes: [String: [FieldChange]] = [:]
        while true {
            let labelToken = current
            guard let label = current.word, tokens[position + 1].symbol == ":" else {
                throw error("update takes labelled changes (set:, unset:, inc:, push:, pull:), as in \(example); "
                    + "found \(current.shown)")
            }
            guard Parser.updateLabels.contains(label) else {
                throw error("unknown label '\(label):' of update; it takes set:, unset:, inc: (or increment:), push: "
                    + "and pull:", at: labelToken,
                    suggestion: Suggest.closest(label, in: Parser.updateLabels).map { "'\($0):'" })
            }
            let kind = label == "increment" ? "inc" : label
            guard changes[kind] == nil else {
                throw error("\(label): is given twice in this update; put all its fields in one "
                    + (kind == "unset" ? "[...]" : "{...}"), at: labelToken)
            }
            _ = advance(); _ = advance()
            if kind == "unset" {
                changes[kind] = try parseFieldList(label).map { .unset($0) }
            } else {
                var list: [FieldChange] = []
                for (path, literal) in try parseFieldValues(label) {
                    switch kind {
                    case "set": list.append(.set(path, literal.value))
                    case "inc":
                        switch literal.value {
                        case .int, .uint, .double: list.append(.increment(path, literal.value))
                        default:
                            throw ParseError(message: "\(label): adds numbers to fields, and \(literal.value.literalText) "
                                + "is not a number", location: literal.location, length: literal.length)
                        }
                    case "push": list.append(.push(path, literal.value))
                    default: list.append(.pull(path, literal.value))
                    }
                }
                changes[kind] = list
            }
            guard current.symbol == "," else { break }
            _ = advance()
            if current.symbol == ")" { break }
        }
        _ = try expect(")", "or ',' and another label to close update(")
        let all = ["set", "unset", "inc", "push", "pull"].flatMap { changes[$0] ?? [] }
        guard !all.isEmpty else { throw error("this update changes nothing: its lists of changes are empty", at: word) }
        return .update(all)
    }

    /// `{"field": value, ...}` after a label of update: each field once, named by a string or written as a path.
    private mutating func parseFieldValues(_ label: String) throws(ParseError) -> [(FieldPath, Literal)] {
        guard current.symbol == "{" else {
            throw error("\(label): takes an object of fields and values, as in \(label): {\"score\": 1}; found "
                + current.shown)
        }
        _ = advance()
        var entries: [(FieldPath, Literal)] = []
        while current.symbol != "}" {
            let keyToken = current
            let path = try parseFieldName(in: "\(label): {...}")
            if entries.contains(where: { $0.0 == path }) {
                throw error("the field \"\(path.written)\" appears twice in \(label):", at: keyToken)
            }
            _ = try expect(":", "after the field name")
            entries.append((path, try parseLiteral()))
            guard current.symbol == "," else { break }
            _ = advance()
        }
        _ = try expect("}", "or ',' in the object of \(label):")
        return entries
    }

    /// `["field", ...]` after `unset:`: the fields to remove, named by strings or written as paths.
    private mutating func parseFieldList(_ label: String) throws(ParseError) -> [FieldPath] {
        guard current.symbol == "[" else {
            throw error("\(label): takes a list of field names, as in \(label): [\"email\"]; found \(current.shown)")
        }
        _ = advance()
        var paths: [FieldPath] = []
        while current.symbol != "]" {
            paths.append(try parseFieldName(in: "\(label): [...]"))
            guard current.symbol == "," else { break }
            _ = advance()
        }
        _ = try expect("]", "or ',' in the list of \(label):")
        return paths
    }

    /// A field named in a change: a string (dots nest, a name in backticks is one name) or a path as in a condition.
    private mutating func parseFieldName(in what: String) throws(ParseError) -> FieldPath {
        if case .string(let name) = current.kind {
            _ = advance()
            return Parser.path(named: name)
        }
        guard current.identifier != nil, !startsLiteral else {
            throw error("expected the name of a field in \(what), as a string (\"email\") or a name (email); found "
                + current.shown)
        }
        return try parsePath().path
    }

    /// The field a name stands for, as a column's name or a key of update: dots nest (`address.city`), a name in
    /// backticks is one name (`` `U.S. price` ``), anything else is a name as it is (`Body Mass (g)`).
    static func path(named name: String) -> FieldPath {
        guard name.contains("`"), let paths = try? Parser.fieldPaths(name), paths.count == 1 else { return FieldPath(name) }
        return paths[0]
    }

    // MARK: Predicates

    /// How deeply parentheses may nest in a condition.
    static let maximumNesting = 128

    mutating func parseOr(depth: Int = 0) throws(ParseError) -> PredicateNode {
        var items = [try parseAnd(depth: depth)]
        while current.symbol == "||" {
            _ = advance()
            items.append(try parseAnd(depth: depth))
        }
        let node = items.count == 1 ? items[0] : .or(items)
        // `test ? a : b`, below `||` as in Swift.
        guard current.symbol == "?" else { return node }
        guard depth < Parser.maximumNesting else {
            throw error("the condition nests '?' more than \(Parser.maximumNesting) deep")
        }
        _ = advance()
        let a = try parseOr(depth: depth + 1)
        _ = try expect(":", "between the two branches of '?'")
        return .choice(node, a, try parseOr(depth: depth + 1))
    }

    private mutating func parseAnd(depth: Int) throws(ParseError) -> PredicateNode {
        var items = [try parseUnary(depth: depth)]
        while current.symbol == "&&" {
            _ = advance()
            items.append(try parseUnary(depth: depth))
        }
        return items.count == 1 ? items[0] : .and(items)
    }

    private mutating func parseUnary(depth: Int) throws(ParseError) -> PredicateNode {
        // Negations are counted, not recursed into: `!!!!active` of any length is cheap.
        var negations = 0
        while current.symbol == "!" {
            negations += 1
            _ = advance()
        }
        var node: PredicateNode
        let start = position
        // `(depDelay ?? 0) > 10` opens with a value: read as a comparison first, else again as a condition.
        if current.symbol == "(" {
            do throws(ParseError) {
                node = try parseComparison(depth: depth)
            } catch let asValue {
                position = start
                do throws(ParseError) {
                    guard depth < Parser.maximumNesting else {
                        throw error("the condition nests parentheses more than \(Parser.maximumNesting) deep")
                    }
                    _ = advance()
                    node = try parseOr(depth: depth + 1)
                    _ = try expect(")", "to close '('")
                } catch let asCondition {
                    // The reading that went further names the mistake (and whether more lines may finish it).
                    throw asValue.location.offset > asCondition.location.offset ? asValue : asCondition
                }
            }
        } else {
            node = try parseComparison(depth: depth)
        }
        if negations > 0 { node = .not(node) }
        if negations > 1 && negations % 2 == 0 { node = .not(node) }
        return node
    }

    private static let comparisons: [String: Filter.Comparison] = [
        "==": .equal, "!=": .notEqual, "<": .less, "<=": .lessOrEqual, ">": .greater, ">=": .greaterOrEqual]

    private mutating func parseComparison(depth: Int) throws(ParseError) -> PredicateNode {
        // `[a, b].contains(path)`
        if current.symbol == "[" {
            let list = try parseLiteral()
            guard case .array = list.value else { throw error("expected a list") }
            _ = try expect(".", "after the list: [...].contains(field)")
            guard current.word == "contains" else {
                throw error("a list in a condition is followed by .contains(field), not \(current.shown)")
            }
            _ = advance()
            _ = try expect("(", "after contains")
            let path = try parsePath()
            _ = try expect(")", "to close contains(")
            return .oneOf(path, Parser.elements(of: list))
        }
        if case .identifier(let word) = current.kind, word == "true" || word == "false" {
            // A constant alone, unless it is compared with a field: `true == active`.
            if Parser.comparisons[tokens[position + 1].symbol ?? ""] == nil {
                _ = advance()
                return .constant(word == "true")
            }
        }
        // Values nest on their own count: a comparison deep in a condition may still hold `(a + b) * c`.
        let left = try parseValueExpression(depth: 0)
        // A literal on the left: `18 <= age` is `age >= 18`.
        if case .literal(let value) = left {
            guard let symbol = current.symbol, let op = Parser.comparisons[symbol] else {
                throw error("expected a comparison after \(value.value.json()), found \(current.shown)")
            }
            _ = advance()
            let right = try parseRightValue()
            if case .path(let path) = right { return .compare(path, Parser.swapped(op), value) }
            return .compareValues(left, op, right)
        }
        guard case .path(let path) = left else {
            guard let symbol = current.symbol, let op = Parser.comparisons[symbol] else {
                throw error("expected a comparison (==, !=, <, <=, >, >=) after the value, found \(current.shown)")
            }
            _ = advance()
            return .compareValues(left, op, try parseRightValue())
        }
        // `tailnum?.hasPrefix("N")` and `tailnum!.contains("5")`, as Swift writes a method on an optional field:
        // the same condition as without them (a document without the field does not match).
        if current.symbol == "!" && tokens[position + 1].symbol == "." { _ = advance() }
        if current.symbol == "." || current.symbol == "?." {
            // A method on the field.
            _ = advance()
            return optionalTest(of: try parseMethod(on: path), on: path)
        }
        if current.word == "in" {
            _ = advance()
            if current.symbol == "[" {
                let list = try parseLiteral()
                return .oneOf(path, Parser.elements(of: list))
            }
            let lower = try parseLiteral()
            guard let op = current.symbol, op == "..<" || op == "..." else {
                throw error("expected '..<' or '...' in the range, as in age in 18..<30; found \(current.shown)")
            }
            _ = advance()
            let upper = try parseLiteral()
            return .inRange(path, lower: lower, upper: upper, closed: op == "...")
        }
        guard let symbol = current.symbol, let op = Parser.comparisons[symbol] else {
            if current.kind == .end || [")", "&&", "||", "?", ":"].contains(current.symbol ?? "") {
                return .isTrue(path)
            }
            throw error("expected a comparison (==, !=, <, <=, >, >=), in, or a method after \(path.path), found "
                + current.shown)
        }
        _ = advance()
        let right = try parseRightValue()
        if case .literal(let value) = right { return .compare(path, op, value) }
        return .compareValues(left, op, right)
    }

    /// A method on the field `path`, after its `.`: `contains(...)`, `hasPrefix(...)`, `starts(with: ...)`.
    private mutating func parseMethod(on path: PathReference) throws(ParseError) -> PredicateNode {
        let methodToken = current
        guard let method = current.word else { throw error("expected a method name after '.'") }
        _ = advance()
        _ = try expect("(", "after \(method)")
        switch method {
        case "contains":
            let value = try parseLiteral()
            _ = try expect(")", "to close contains(")
            return .contains(path, value)
        case "hasPrefix", "starts":
            if method == "starts" {
                guard current.word == "with", tokens[position + 1].symbol == ":" else {
                    throw error("starts is written starts(with: \"...\")")
                }
                _ = advance(); _ = advance()
            }
            let value = try parseLiteral()
            guard case .string = value.value else {
                throw ParseError(message: "\(method) takes a string", location: value.location, length: value.length)
            }
            _ = try expect(")", "to close \(method)(")
            return .hasPrefix(path, value)
        case "lowercased":
            _ = try expect(")", "to close lowercased(")
            if current.symbol == "." {
                _ = advance()
                switch try parseMethod(on: path) {
                case .contains(let p, let value): return .ignoringCase(p, .contains, value, lowered: true)
                case .hasPrefix(let p, let value): return .ignoringCase(p, .prefix, value, lowered: true)
                default: throw error("after lowercased(), a condition uses contains, hasPrefix or starts(with:)")
                }
            }
            guard let symbol = current.symbol, symbol == "==" || symbol == "!=" else {
                throw error("lowercased() is compared with == or != a string, or followed by .contains(...), "
                    + ".hasPrefix(...) or .starts(with: ...); found \(current.shown)")
            }
            _ = advance()
            let node = PredicateNode.ignoringCase(path, .equal, try parseLiteral(), lowered: true)
            return symbol == "==" ? node : .not(node)
        case "localizedCaseInsensitiveContains", "localizedStandardContains":
            let value = try parseLiteral()
            _ = try expect(")", "to close \(method)(")
            return .ignoringCase(path, .contains, value, lowered: false)
        default:
            throw error("unknown method '\(method)' on a field; a condition may use contains, hasPrefix, "
                + "starts(with:), lowercased() or localizedCaseInsensitiveContains", at: methodToken,
                suggestion: Suggest.closest(method, in: ["contains", "hasPrefix", "starts", "lowercased",
                                                         "localizedCaseInsensitiveContains"]).map { "'\($0)'" })
        }
    }

    /// After `field?.method(...)`, the test Swift asks for to make its optional result a condition, read as Swift
    /// reads it for a document without the field (the result is nil there): `== true` and `?? false` are the method
    /// alone (such a document does not match); `!= true` its negation (it does); `!= false` and `?? true` the method
    /// or no field; `== false` the negation among the documents that have the field. Nothing after it is the method
    /// alone.
    private mutating func optionalTest(of method: PredicateNode, on path: PathReference) -> PredicateNode {
        let test = (current.symbol ?? "") + " " + (tokens[min(position + 1, tokens.count - 1)].word ?? "")
        let result: PredicateNode
        let none = Literal(value: .null, location: path.location, length: path.length)
        switch test {
        case "== true", "?? false": result = method
        case "!= true": result = .not(method)
        case "!= false", "?? true": result = .or([.compare(path, .equal, none), method])
        case "== false": result = .and([.compare(path, .notEqual, none), .not(method)])
        default: return method
        }
        _ = advance()
        _ = advance()
        return result
    }

    // MARK: Values

    /// The value after a comparison; where none starts, the error says a value was expected.
    private mutating func parseRightValue() throws(ParseError) -> ValueNode {
        if current.identifier == nil && !startsLiteral { _ = try parseLiteral() }
        return try parseValueExpression(depth: 0)
    }

    /// A value: `a ?? b` (right to left, below arithmetic, as in Swift), `+ -`, `* / %`, `-a`, `a?.count`, a
    /// field, a literal, `(value)`.
    private mutating func parseValueExpression(depth: Int) throws(ParseError) -> ValueNode {
        guard depth < Parser.maximumNesting else {
            throw error("the value nests more than \(Parser.maximumNesting) deep")
        }
        let left = try parseArithmetic(depth: depth)
        guard current.symbol == "??" else { return left }
        _ = advance()
        return .coalesce(left, try parseValueExpression(depth: depth + 1))
    }

    /// The arithmetic operators by precedence, lowest first: `+ -`, then `* / %`.
    private static let arithmeticLevels: [Set<String>] = [["+", "-"], ["*", "/", "%"]]

    /// Operands joined by the operators of `level` and above, left to right.
    private mutating func parseArithmetic(level: Int = 0, depth: Int) throws(ParseError) -> ValueNode {
        guard level < Parser.arithmeticLevels.count else { return try parseValueOperand(depth: depth) }
        var node = try parseArithmetic(level: level + 1, depth: depth)
        var terms = 0   // each operator nests the tree one deeper: counted as nesting is
        while let op = current.symbol, Parser.arithmeticLevels[level].contains(op) {
            terms += 1
            try checkNesting(depth + terms)
            let token = advance()
            node = .arithmetic(op, node, try parseArithmetic(level: level + 1, depth: depth), token.location)
        }
        return node
    }

    private mutating func parseValueOperand(depth: Int) throws(ParseError) -> ValueNode {
        var node: ValueNode
        let next = tokens[min(position + 1, tokens.count - 1)]
        if current.symbol == "-", next.identifier != nil || next.symbol == "(", !Parser.isNumberWord(next.kind) {
            // `-hour`; `-5` is a literal.
            let token = advance()
            try checkNesting(depth)
            return .negate(try parseValueOperand(depth: depth + 1), token.location)
        }
        if current.symbol == "(" {
            _ = advance()
            node = try parseValueExpression(depth: depth + 1)
            _ = try expect(")", "to close '('")
        } else if startsLiteral {
            node = .literal(try parseLiteral())
        } else {
            node = .path(try parsePath())
        }
        var counts = 0
        while current.symbol == "?.", tokens[position + 1].word == "count" {
            counts += 1
            try checkNesting(depth + counts)
            let token = advance()
            _ = advance()
            node = .count(node, token.location)
        }
        return node
    }

    /// Refuses a value nested deeper than conditions may be: each operator of a chain nests its tree one level.
    private func checkNesting(_ depth: Int) throws(ParseError) {
        guard depth < Parser.maximumNesting else {
            throw error("the value nests more than \(Parser.maximumNesting) deep")
        }
    }

    private static func isNumberWord(_ kind: Token.Kind) -> Bool {
        switch kind {
        case .integer, .largeInteger, .number, .identifier("inf"): return true
        default: return false
        }
    }

    private static func swapped(_ op: Filter.Comparison) -> Filter.Comparison {
        switch op {
        case .less: return .greater
        case .lessOrEqual: return .greaterOrEqual
        case .greater: return .less
        case .greaterOrEqual: return .lessOrEqual
        default: return op
        }
    }

    private static func elements(of list: Literal) -> [Literal] {
        guard case .array(let values) = list.value else { return [list] }
        return values.map { Literal(value: $0, location: list.location, length: list.length) }
    }

    /// A dotted path: `age`, `address.city`; `$0.` in front is allowed (and `\.` where a key path is expected).
    private mutating func parsePath(allowKeyPath: Bool = false) throws(ParseError) -> PathReference {
        if allowKeyPath && current.symbol == "\\" {
            _ = advance()
            _ = try expect(".", "after '\\' in a key path")
        }
        if current.word == "$0" && tokens[position + 1].symbol == "." { _ = advance(); _ = advance() }
        let start = current
        guard let first = current.identifier, !startsLiteral else {
            throw error("expected a field name, found \(current.shown)")
        }
        _ = advance()
        var components = [first]
        var end = start.location.offset + start.length
        // `.name` continues the path unless a call follows: `tags.contains(...)`.
        while current.symbol == ".", let next = tokens[position + 1].identifier, tokens[position + 2].symbol != "(" {
            _ = advance()
            let token = advance()
            components.append(next)
            end = token.location.offset + token.length
        }
        return PathReference(path: FieldPath(components: components), location: start.location,
                             length: end - start.location.offset)
    }

    /// Field paths separated by commas, as `.createIndex` and `.import --dates` take them: `city,age`,
    /// `address.zip`, `` `Body Mass (g)` ``.
    static func fieldPaths(_ text: String) throws(ParseError) -> [FieldPath] {
        var parser = try Parser(text)
        var paths = [try parser.parsePath().path]
        while parser.current.symbol == "," {
            _ = parser.advance()
            paths.append(try parser.parsePath().path)
        }
        guard parser.current.kind == .end else {
            throw parser.error("expected a field name, or a comma and another, found \(parser.current.shown)")
        }
        return paths
    }

    // MARK: Literals

    static let literalWords: Set<String> = ["true", "false", "null", "nil", "inf", "nan"]

    /// Whether the current token starts a value rather than a field name. `date` is a field unless a call follows.
    private var startsLiteral: Bool {
        if case .escapedIdentifier = current.kind { return false }
        guard let word = current.identifier else { return current.kind != .end && current.symbol != ")" }
        return Parser.literalWords.contains(word) || (word == "date" && tokens[position + 1].symbol == "(")
    }

    /// A JSON value, `nil`, or `date("2024-05-01")`.
    mutating func parseLiteral() throws(ParseError) -> Literal {
        let start = current
        let value = try parseValue(depth: 0)
        let last = tokens[max(0, position - 1)]
        return Literal(value: value, location: start.location,
                       length: max(1, last.location.offset + last.length - start.location.offset))
    }

    /// An integer literal past 64 bits.
    private func tooLarge(_ text: String) -> ParseError {
        error("the integer \(text) does not fit in 64 bits; write \(text).0 for the nearest floating-point number")
    }

    private mutating func parseValue(depth: Int) throws(ParseError) -> DocumentValue {
        guard depth < 200 else { throw error("values are nested too deeply") }
        let token = advance()
        switch token.kind {
        case .integer(let i): return .int(i)
        case .number(let d): return .double(d)
        case .largeInteger(let text):
            // (Rounded to a double, it would compare equal to another integer: Swift refuses such a literal too.)
            guard let u = UInt64(text) else { throw tooLarge(text) }
            return .uint(u)
        case .string(let s): return .string(s)
        case .symbol("-"):
            switch current.kind {
            case .integer(let i): _ = advance(); return .int(-i)
            case .largeInteger(let text):
                _ = advance()
                guard text == "9223372036854775808" else { throw tooLarge("-" + text) }
                return .int(.min)
            case .number(let d): _ = advance(); return .double(-d)
            case .identifier("inf"): _ = advance(); return .double(-.infinity)
            default: throw error("expected a number after '-'")
            }
        case .symbol("["):
            var elements: [DocumentValue] = []
            if current.symbol == "]" { _ = advance(); return .array([]) }
            while true {
                elements.append(try parseValue(depth: depth + 1))
                if current.symbol == "," {
                    _ = advance()
                    if current.symbol == "]" { _ = advance(); break }
                    continue
                }
                _ = try expect("]", "or ',' in the list")
                break
            }
            return .array(elements)
        case .symbol("{"):
            var fields: [DocumentValue.Field] = []
            if current.symbol == "}" { _ = advance(); return .object([DocumentValue.Field]()) }
            while true {
                let keyToken = current
                let key: String
                switch keyToken.kind {
                case .string(let s): key = s
                case .identifier(let s): key = s   // `{name: "Ann"}` is allowed too
                default: throw error("expected a field name in the object, found \(current.shown)")
                }
                _ = advance()
                if fields.contains(where: { $0.name == key }) {
                    throw error("the field \"\(key)\" appears twice in this object", at: keyToken)
                }
                _ = try expect(":", "after the field name")
                fields.append(.init(key, try parseValue(depth: depth + 1)))
                if current.symbol == "," {
                    _ = advance()
                    if current.symbol == "}" { _ = advance(); break }
                    continue
                }
                _ = try expect("}", "or ',' in the object")
                break
            }
            return .object(fields)
        case .identifier("true"): return .bool(true)
        case .identifier("false"): return .bool(false)
        case .identifier("null"), .identifier("nil"): return .null
        case .identifier("inf"): return .double(.infinity)
        case .identifier("nan"): return .double(.nan)
        case .identifier("date"):
            _ = try expect("(", "after date: date(\"2024-05-01\")")
            let text = current
            guard case .string(let s) = text.kind else { throw error("date takes a string: date(\"2024-05-01\")") }
            _ = advance()
            _ = try expect(")", "to close date(")
            guard let date = Parser.date(s) else {
                throw error("'\(s)' is not a date; write 2024-05-01, 2024-05-01T12:30:00Z or with a time zone offset",
                            at: text)
            }
            return .date(date)
        case .end:
            throw ParseError(message: "expected a value, but the input ended", location: token.location,
                             isIncomplete: !balanced)
        default:
            throw ParseError(message: "expected a value (a number, a string in double quotes, true, false, nil, "
                + "a list, an object or date(\"...\")), found \(token.shown)", location: token.location,
                length: token.length)
        }
    }

    /// An ISO 8601 date (`2024-05-01`, midnight UTC) or date and time.
    static func date(_ text: String) -> Date? { DateTextFormat.iso8601(text) }
}

/// "Did you mean": the closest word by edit distance, when it is close enough.
enum Suggest {
    static func closest(_ word: String, in candidates: [String]) -> String? {
        let lower = word.lowercased()
        var best: (String, Int)?
        for candidate in candidates {
            let d = distance(lower, candidate.lowercased())
            if d <= max(1, min(3, candidate.count / 3)), d < (best?.1 ?? Int.max) { best = (candidate, d) }
        }
        return best?.0
    }

    static func distance(_ a: String, _ b: String) -> Int {
        let a = Array(a), b = Array(b)
        if a.isEmpty { return b.count }
        if b.isEmpty { return a.count }
        var previous = Array(0...b.count)
        for i in 1...a.count {
            var row = [i] + Array(repeating: 0, count: b.count)
            for j in 1...b.count {
                row[j] = min(previous[j] + 1, row[j - 1] + 1, previous[j - 1] + (a[i - 1] == b[j - 1] ? 0 : 1))
            }
            previous = row
        }
        return previous[b.count]
    }
}
