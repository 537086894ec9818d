import DocStore
import Foundation

/// Parses the shell's text: the query language (the Swift DSL's words, with predicates as in a `#Predicate` body
/// minus the `$0.`), `begin`/`commit`/`rollback`, and dot-commands.
struct Parser {
    /// The words that may follow a query's name, for messages, suggestions and completion.
    static let stepWords = ["include", "exclude", "sortBy", "reverse", "first", "last", "any", "count", "results",
                            "explain", "delete", "findOrCreate", "insert", "save"]
    static let statementWords = ["begin", "commit", "rollback"]

    private let text: String
    private let tokens: [Token]
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
        return try parser.parseStatement()
    }

    /// One value filling the whole text (a file's JSON): anything after it is an error.
    static func wholeLiteral(_ text: String) throws(ParseError) -> DocumentValue {
        var parser = try Parser(text)
        let value = try parser.parseLiteral()
        guard parser.current.kind == .end else {
            throw parser.error("unexpected \(parser.current.shown) after the value; a file holds one value")
        }
        return value.value
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
        while current.kind != .end {
            if let last = steps.last, last.isTerminal {
                throw error("nothing can follow \(Parser.name(of: last)), which runs the query")
            }
            if current.symbol == "[" {
                steps.append(try parseSlice())
                continue
            }
            guard current.symbol == "." else { break }
            _ = advance()
            steps.append(try parseStep())
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
        default: return "this step"
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

    private mutating func parseStep() throws(ParseError) -> Step {
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
        case "sortBy":
            _ = try expect("(", "after sortBy")
            let path = try parsePath(allowKeyPath: true)
            var order = SortOrder.forward
            if current.symbol == "," {
                _ = advance()
                if current.word == "order" && tokens[position + 1].symbol == ":" { _ = advance(); _ = advance() }
                _ = try expect(".", "before the order (.forward or .reverse)")
                switch current.word {
                case "reverse": order = .reverse
                case "forward": order = .forward
                default:
                    throw error("the order is .forward or .reverse, not \(current.shown)",
                                suggestion: Suggest.closest(current.identifier ?? "", in: ["forward", "reverse"])
                                    .map { "'.\($0)'" })
                }
                _ = advance()
            }
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
        default:
            throw error("unknown step '\(word)'; a query goes on with \(Parser.stepWords.joined(separator: ", "))",
                        at: token, suggestion: Suggest.closest(word, in: Parser.stepWords).map { "'\($0)'" })
        }
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
        if current.symbol == "." {
            // A method on the field.
            _ = advance()
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
            default:
                throw error("unknown method '\(method)' on a field; a condition may use contains, hasPrefix or "
                    + "starts(with:)", at: methodToken,
                    suggestion: Suggest.closest(method, in: ["contains", "hasPrefix", "starts"]).map { "'\($0)'" })
            }
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

    private mutating func parseValue(depth: Int) throws(ParseError) -> DocumentValue {
        guard depth < 200 else { throw error("values are nested too deeply") }
        let token = advance()
        switch token.kind {
        case .integer(let i): return .int(i)
        case .number(let d): return .double(d)
        case .largeInteger(let text): return UInt64(text).map { .uint($0) } ?? .double(Double(text) ?? .infinity)
        case .string(let s): return .string(s)
        case .symbol("-"):
            switch current.kind {
            case .integer(let i): _ = advance(); return .int(-i)
            case .largeInteger(let text):
                _ = advance()
                return text == "9223372036854775808" ? .int(.min) : .double(-(Double(text) ?? .infinity))
            case .number(let d): _ = advance(); return .double(-d)
            case .identifier("inf"): _ = advance(); return .double(-.infinity)
            default: throw error("expected a number after '-'")
            }
        case .symbol("["):
            var elements: [DocumentValue] = []
            if current.symbol == "]" { _ = advance(); return .array([]) }
            while true {
                elements.append(try parseValue(depth: depth + 1))
                if current.symbol == "," { _ = advance(); if current.symbol == "]" { _ = advance(); break }; continue }
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
                if current.symbol == "," { _ = advance(); if current.symbol == "}" { _ = advance(); break }; continue }
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
    static func date(_ text: String) -> Date? {
        if let d = try? Date(text, strategy: Date.ISO8601FormatStyle(includingFractionalSeconds: true)) { return d }
        if let d = try? Date(text, strategy: Date.ISO8601FormatStyle()) { return d }
        let dayOnly = Date.ISO8601FormatStyle().year().month().day()
        if text.count == 10, let d = try? Date(text, strategy: dayOnly) { return d }
        return nil
    }
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
