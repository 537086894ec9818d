import DocStore
import Foundation
import Testing
@testable import repl

/// A small, seeded random generator (SplitMix64), so that a failing input can be found again.
struct ParserFuzzRandom: RandomNumberGenerator {
    private var state: UInt64

    init(seed: UInt64) { state = seed }

    mutating func next() -> UInt64 {
        state &+= 0x9E37_79B9_7F4A_7C15
        var z = state
        z = (z ^ (z >> 30)) &* 0xBF58_476D_1CE4_E5B9
        z = (z ^ (z >> 27)) &* 0x94D0_49BB_1331_11EB
        return z ^ (z >> 31)
    }

    mutating func chance(_ p: Double) -> Bool { Double.random(in: 0..<1, using: &self) < p }

    mutating func pick<T>(_ items: [T]) -> T { items[Int.random(in: 0..<items.count, using: &self)] }

    mutating func int(_ range: ClosedRange<Int>) -> Int { Int.random(in: range, using: &self) }
}

/// Inputs for the parser: symbol soup and damaged statements.
enum ParserFuzzInput {
    /// Pieces of the language, with the ones that matter most repeated so that they come up more often.
    static let fragments: [String] = {
        let words = ["people", "include", "exclude", "sortBy", "reverse", "first", "last", "any", "count", "results",
                     "explain", "delete", "findOrCreate", "insert", "save", "contains", "hasPrefix", "starts", "with",
                     "order", "forward", "in", "true", "false", "nil", "null", "inf", "nan", "date", "age", "name",
                     "tags", "address", "city", "$0", "begin", "commit", "rollback", "x", "_a1", "sum", "average", "min",
                     "max", "distinct", "groupBy", "select", "update", "set", "unset", "inc", "push", "pull", "key",
                     "value"]
        let symbols = [".", ".", ".", ",", "(", "(", ")", ")", "[", "]", "{", "}", ":", "<", ">", "!", "\\", "-", "+",
                       "==", "!=", "<=", ">=", "&&", "||", "..<", "...", "..", "=", "&", "|", "'", "\"", "\"", "\\u",
                       "\\u{", "\\uD83D", "\\uDE00", "\\q", "e", "E", "--", "//", ";", "@", "#", "$", "`", "?"]
        let numbers = ["0", "1", "18", "2.5", "1e3", "1e", "2.", "-7", "99999999999999999999", "9223372036854775807",
                       "12abc", "0x1F"]
        let spaces = [" ", " ", " ", "\n", "\t", "\r\n", "\r", "\u{A0}"]
        let others = ["é", "😀", "\u{301}", "日", "\u{FF10}", "\u{0}", "\u{2028}", "\u{200B}", "\"x\"", "\"2024-05-01\"",
                      "\".help\"", ".mode", ".open", "🇳🇴", "\u{FEFF}"]
        return words + words + symbols + symbols + symbols + numbers + spaces + spaces + others
    }()

    /// Statements that parse (and mostly lower) as written.
    static let valid: [String] = [
        "people",
        "people.count()",
        "people.include(age >= 18).count()",
        "people.include(age >= 18 && name.hasPrefix(\"A\")).sortBy(\\.age, order: .reverse)[0..<10].results()",
        "people.exclude(active || tags.contains(\"x\")).first",
        "people.include(!(age in 18..<30) && address.city in [\"Oslo\", \"Bergen\"])",
        "people.include([\"a\", \"b\"].contains(name)).last()",
        "people.include(name.starts(with: \"Ann\") || email == nil).explain()",
        "people.include($0.age > 3 && $0.address.city != \"x\").delete()",
        "people.include(18 <= age).sortBy(name, .forward).reverse()[...3]",
        "people.insert({\"name\": \"Ann\", \"age\": 41, tags: [\"a\", 1, 2.5e3, true, null], \"n\": {\"k\": -1}})",
        "people.insert([{\"a\": 1}, {\"a\": \"\\u00e9\\ud83d\\ude00\\u{1F600}\\n\"}])",
        "people.include(name == \"Ann\").findOrCreate({name: \"Ann\"})",
        "people.save({\"id\": 1, \"joined\": date(\"2024-05-01T12:30:00+02:00\")})",
        "people.include(joined >= date(\"2024-05-01\") && joined < date(\"2025-01-01T00:00:00Z\")).any",
        "people.include(score in 1.5...2.5 || score == inf || score != -inf)",
        "begin",
        "commit",
        "rollback",
        ".mode json",
        ".save adults \"people.include(age >= 18)\"",
        "people -- everyone\n  .include(age > 3) // adults\n  .count()",
        "people.include(true).exclude(false)",
        "people.include()",
        "people.include(active == true && !deleted)",
        "people.include(age > 3).sum(score)",
        "people.include(city == \"Oslo\").average(age).explain()",
        "people.sortBy(age)[0..<10].max(\\.age)",
        "people.distinct(address.city)",
        "people.groupBy(city, active).count().sortBy(value, .reverse)[0..<3].results()",
        "people.groupBy(city).min(age).sortBy(.key, order: .reverse).first",
        "people.include(age > 90).select(name, address.city).first",
        "people.include(age > 3).update(set: {\"a\": 1, \"b.c\": [1]}, unset: [\"x\", y], inc: {n: 1.5}, "
            + "push: {\"tags\": \"t\"}, pull: {\"tags\": nil})",
    ]

    static func soup(_ random: inout ParserFuzzRandom) -> String {
        let count = random.int(1...30)
        let spaced = random.chance(0.5)
        var out = ""
        for _ in 0..<count {
            out += random.pick(fragments)
            if spaced && random.chance(0.5) { out += " " }
        }
        return out
    }

    static func mutant(_ random: inout ParserFuzzRandom) -> String {
        var characters = Array(random.pick(valid))
        for _ in 0..<random.int(1...3) {
            let position = random.int(0...characters.count)
            switch random.int(0...5) {
            case 0, 1:
                characters.insert(contentsOf: Array(random.pick(fragments)), at: position)
            case 2 where !characters.isEmpty:
                let start = min(position, characters.count - 1)
                characters.removeSubrange(start..<min(characters.count, start + random.int(1...3)))
            case 3 where !characters.isEmpty:
                let at = min(position, characters.count - 1)
                characters.replaceSubrange(at...at, with: Array(random.pick(fragments)))
            case 4 where !characters.isEmpty:
                let start = min(position, characters.count - 1)
                let end = min(characters.count, start + random.int(1...12))
                characters.insert(contentsOf: characters[start..<end], at: random.int(0...characters.count))
            default:
                characters.removeSubrange(position...)
            }
        }
        return String(characters)
    }
}

@Suite struct ParserFuzzTests {
    /// Why a location does not lie within `characters` (the input's Unicode scalars: locations count scalars), or
    /// nil when it does (line and column agree with the offset).
    static func misplaced(_ location: repl.SourceLocation, length: Int, in characters: [Unicode.Scalar]) -> String? {
        guard location.line >= 1, location.column >= 1, location.offset >= 0, length >= 0 else {
            return "location \(location) at offset \(location.offset), length \(length) is out of range"
        }
        guard location.offset <= characters.count else {
            return "offset \(location.offset) is past the end (\(characters.count) scalars)"
        }
        var line = 1, column = 1
        for c in characters[..<location.offset] {
            if c == "\n" { line += 1; column = 1 } else { column += 1 }
        }
        guard line == location.line, column == location.column else {
            return "location \(location) does not match offset \(location.offset), which is at \(line):\(column)"
        }
        return nil
    }

    /// Runs `input` through parsing, saved-query parsing and lowering; returns what went wrong, if anything.
    static func problems(with input: String, stats: FieldStats) -> [String] {
        check(input, stats: stats).problems
    }

    /// Whether `input` parsed as a statement, and what went wrong on the way, if anything.
    static func check(_ input: String, stats: FieldStats) -> (parsed: Bool, problems: [String]) {
        let characters = Array(input.unicodeScalars)
        var found: [String] = []
        func place(_ location: repl.SourceLocation, _ length: Int, _ what: String) {
            if let problem = misplaced(location, length: length, in: characters) { found.append("\(what): \(problem)") }
        }
        func checkError(_ error: ParseError, _ what: String) {
            place(error.location, error.length, "\(what) \(error)")
            let rendered = error.rendered(source: input)
            if !rendered.hasPrefix("error at line \(error.location.line), column \(error.location.column): ") {
                found.append("\(what): rendered as \(rendered.debugDescription)")
            }
        }
        do {
            _ = try Parser.savedQuery(input)
        } catch {
            checkError(error, "saved query error")
        }
        let statement: Statement
        do {
            statement = try Parser.statement(input)
        } catch {
            checkError(error, "parse error")
            return (false, found)
        }
        guard case .query(let query) = statement else { return (true, found) }
        place(query.baseLocation, query.base.count, "base")
        var lowering = Lowering(collection: query.base, stats: stats)
        for step in query.steps {
            switch step {
            case .include(let node), .exclude(let node):
                do {
                    let filter = try lowering.filter(node)
                    _ = filter.description
                    _ = filter.fields
                } catch {
                    checkError(error.parseError, "meaning error")
                }
            case .sortBy(let path, _):
                place(path.location, path.length, "sort path")
                _ = lowering.known(path)
            case .findOrCreate(let literal), .insert(let literal), .save(let literal):
                place(literal.location, literal.length, "literal")
                _ = literal.value.json()
            case .aggregate(let call), .groupBy(_, let call):
                if let path = call.path { place(path.location, path.length, "aggregate path") }
                lowering.aggregated(call)
                if case .groupBy(let paths, _) = step {
                    for path in paths { place(path.location, path.length, "group path") }
                }
            case .distinct(let path):
                place(path.location, path.length, "distinct path")
            case .select(let paths):
                for path in paths { place(path.location, path.length, "selected path") }
            default:
                break
            }
        }
        for warning in lowering.warnings { place(warning.location, warning.length, "warning '\(warning.message)'") }
        return (true, found)
    }

    @Test func randomInputNeverCrashesAndErrorsPointIntoTheInput() {
        var random = ParserFuzzRandom(seed: 0x00D0_C570_12E5)
        let stats = LoweringFixture.people
        var failures: [String] = []
        var parsed = 0
        let rounds = 10_000
        for round in 0..<(2 * rounds) {
            let input = round < rounds ? ParserFuzzInput.soup(&random) : ParserFuzzInput.mutant(&random)
            let outcome = ParserFuzzTests.check(input, stats: stats)
            if outcome.parsed { parsed += 1 }
            for problem in outcome.problems where failures.count < 20 {
                failures.append("\(input.debugDescription): \(problem)")
            }
        }
        #expect(failures.isEmpty, "\(failures.joined(separator: "\n"))")
        // The mutants keep many inputs valid, so lowering is exercised too.
        #expect(parsed > rounds / 10)
    }

    @Test func locationCheckSpotsMisplacedLocations() {
        let characters = Array("ab\ncd".unicodeScalars)
        typealias Place = repl.SourceLocation
        #expect(ParserFuzzTests.misplaced(Place(offset: 4, line: 2, column: 2), length: 1, in: characters) == nil)
        #expect(ParserFuzzTests.misplaced(Place(offset: 5, line: 2, column: 3), length: 1, in: characters) == nil)
        #expect(ParserFuzzTests.misplaced(Place(offset: 4, line: 1, column: 5), length: 1, in: characters) != nil)
        #expect(ParserFuzzTests.misplaced(Place(offset: 6, line: 2, column: 4), length: 1, in: characters) != nil)
        #expect(ParserFuzzTests.misplaced(Place(offset: 0, line: 0, column: 1), length: 1, in: characters) != nil)
        #expect(ParserFuzzTests.misplaced(Place(offset: 0, line: 1, column: 1), length: -1, in: characters) != nil)
    }

    @Test func everyValidSeedStatementParses() throws {
        for text in ParserFuzzInput.valid {
            do {
                _ = try Parser.statement(text)
            } catch {
                Issue.record("\(text.debugDescription) does not parse: \(error)")
            }
            #expect(ParserFuzzTests.problems(with: text, stats: LoweringFixture.people).isEmpty)
        }
    }

    @Test func everyPrefixOfAValidStatementFailsCleanly() {
        // Typing a statement character by character: each prefix parses, or fails with a sound location.
        var failures: [String] = []
        for text in ParserFuzzInput.valid {
            let characters = Array(text)
            for end in 0...characters.count {
                let prefix = String(characters[..<end])
                for problem in ParserFuzzTests.problems(with: prefix, stats: LoweringFixture.people) {
                    failures.append("\(prefix.debugDescription): \(problem)")
                }
            }
        }
        #expect(failures.isEmpty, "\(failures.prefix(20).joined(separator: "\n"))")
    }
}

// MARK: - Round trip

/// Well-formed conditions over the fields of ``LoweringFixture/people``, each of a kind the field holds.
enum PredicateGrammar {
    static func string(_ random: inout ParserFuzzRandom) -> String {
        let pieces = ["a", "b", "Z", " ", "\\\"", "\\\\", "\\n", "\\t", "é", "😀", "\\u00e9", "\\u{1F600}", "\\ud83d\\ude00",
                      "/", "日", "e\u{301}", "--", "//", "(", ")", "&&", "'", "\\r", "\\u0001"]
        var out = "\""
        for _ in 0..<random.int(0...6) { out += random.pick(pieces) }
        return out + "\""
    }

    static func number(_ random: inout ParserFuzzRandom) -> String {
        switch random.int(0...4) {
        case 0: return String(random.int(-100...200))
        case 1: return String(Double(random.int(-4000...4000)) / 8)
        case 2: return "\(random.int(1...9))e\(random.int(-5...25))"
        case 3: return String(random.int(-9_000_000_000_000_000...9_000_000_000_000_000))
        default: return String(random.int(0...120))
        }
    }

    static func date(_ random: inout ParserFuzzRandom) -> String {
        let day = String(format: "%04d-%02d-%02d", random.int(1990...2030), random.int(1...12), random.int(1...28))
        switch random.int(0...2) {
        case 0: return "date(\"\(day)\")"
        case 1: return "date(\"\(day)T\(String(format: "%02d:%02d:%02d", random.int(0...23), random.int(0...59), random.int(0...59)))Z\")"
        default: return "date(\"\(day)T12:30:00\(random.pick(["+02:00", "-05:30", "+00:00"]))\")"
        }
    }

    static func comparison(_ random: inout ParserFuzzRandom) -> String {
        random.pick(["==", "!=", "<", "<=", ">", ">="])
    }

    static func list(_ random: inout ParserFuzzRandom, _ element: (inout ParserFuzzRandom) -> String) -> String {
        "[" + (0..<random.int(0...3)).map { _ in element(&random) }.joined(separator: ", ") + "]"
    }

    static func atom(_ random: inout ParserFuzzRandom) -> String {
        let text = random.pick(["name", "address.city"])
        switch random.int(0...21) {
        case 0: return "age \(comparison(&random)) \(number(&random))"
        case 1: return "\(number(&random)) \(comparison(&random)) age"
        case 2: return "$0.age \(random.pick(["==", "!="])) nil"
        case 3: return "age in \(random.int(-50...50))\(random.pick(["..<", "..."]))\(random.int(50...150))"
        case 4: return "age in \(list(&random, number))"
        case 5: return "\(list(&random, number)).contains(age)"
        case 6: return "score \(comparison(&random)) \(random.chance(0.5) ? number(&random) : string(&random))"
        case 7: return "\(text) \(comparison(&random)) \(string(&random))"
        case 8: return "\(text).contains(\(string(&random)))"
        case 9: return "\(text).hasPrefix(\(string(&random)))"
        case 10: return "\(text).starts(with: \(string(&random)))"
        case 11: return "\(text) in \(list(&random, string))"
        case 12: return "\(text) in \(string(&random))\(random.pick(["..<", "..."]))\(string(&random))"
        case 13: return "tags.contains(\(random.chance(0.8) ? string(&random) : "nil"))"
        case 14: return random.pick(["active", "$0.active", "active == true", "active != false", "false == active"])
        case 15: return "joined \(comparison(&random)) \(date(&random))"
        case 16: return "\(date(&random)) \(comparison(&random)) joined"
        case 17: return "joined in \(date(&random))..<\(date(&random))"
        case 18: return "email \(random.pick(["==", "!="])) \(random.chance(0.5) ? "nil" : string(&random))"
        case 19: return random.pick(["true", "false"])
        case 20: return "address == {\"city\": \(string(&random))}"
        default: return "tags == \(list(&random, string))"
        }
    }

    static func predicate(_ random: inout ParserFuzzRandom, depth: Int) -> String {
        guard depth > 0, random.chance(0.65) else { return atom(&random) }
        let left = predicate(&random, depth: depth - 1)
        switch random.int(0...4) {
        case 0: return "!(\(left))"
        case 1: return "(\(left))"
        case 2: return "\(left) && \(predicate(&random, depth: depth - 1))"
        case 3: return "\(left) || \(predicate(&random, depth: depth - 1))"
        default: return "(\(left)) \(random.pick(["&&", "||"])) (\(predicate(&random, depth: depth - 1)))"
        }
    }
}

extension ParserFuzzTests {
    @Suite struct RoundTrip {
        /// Parses `people.include(<condition>)` and lowers it against the people fixture.
        func lowered(_ condition: String) throws -> Filter {
            let (filter, warnings) = try LoweringFixture.lower(condition)
            if !warnings.isEmpty { throw ParseFixture.NotAQuery(text: "warnings for \(condition)") }
            return filter
        }

        @Test func loweredDescriptionParsesBackToTheSameFilter() {
            var random = ParserFuzzRandom(seed: 20_240_501)
            var failures: [String] = []
            for _ in 0..<3_000 {
                let written = PredicateGrammar.predicate(&random, depth: 4)
                let first: Filter
                do {
                    first = try lowered(written)
                } catch {
                    failures.append("\(written): the generated condition does not lower: \(error)")
                    continue
                }
                let description = first.description
                do {
                    let second = try lowered(description)
                    if second.description != description || second != first {
                        failures.append("\(written): \(description) came back as \(second.description)")
                    }
                } catch {
                    failures.append("\(written): its description \(description) does not parse back: \(error)")
                }
                if failures.count >= 10 { break }
            }
            #expect(failures.isEmpty, "\(failures.joined(separator: "\n"))")
        }

        @Test(arguments: [
            Filter.compare("name", .equal, .string("\"quoted\" \\ back\n\t\r\u{1}")),
            .compare("score", .less, .double(-0.5)),
            .compare("score", .greaterOrEqual, .double(1e300)),
            .compare("score", .equal, .double(.infinity)),
            .compare("score", .notEqual, .double(-.infinity)),
            .compare("age", .greater, .int(.max)),
            .compare("joined", .less, .date(Date(timeIntervalSince1970: 1_714_559_400.5))),
            .not(.or([.compare("age", .less, .int(3)), .contains("tags", .string("x"))])),
            .and([.or([.constant(true), .hasPrefix("name", "A")]), .oneOf("age", [.int(1), .null])]),
            .containsText("name", "日本"),
        ])
        func knownFilterDescriptionParsesBack(filter: Filter) throws {
            #expect(try lowered(filter.description) == filter)
        }

        @Test func textStartingWithACombiningMarkParsesBack() throws {
            // The mark would join the opening quote into one character if text were read by characters.
            let filter = Filter.compare("name", .equal, .string("\u{301}x"))
            #expect(try lowered(filter.description) == filter)
        }
    }
}

// MARK: - Depth

extension ParserFuzzTests {
    /// Inputs that nest deeply or chain many terms. Each runs in a child process, so that a stack overflow fails
    /// the test instead of ending the whole test run.
    @Suite struct Depth {
        @Test func longOrChainParsesAndLowers() async {
            await #expect(processExitsWith: .success) {
                // A list of ids written out by hand (or by a script): the chain is long, not nested.
                let terms = (0..<3_000).map { "id == \($0)" }
                guard case .query(let query) = try Parser.statement("people.include(\(terms.joined(separator: " || ")))"),
                      case .include(let node) = query.steps.first else { exit(2) }
                var lowering = Lowering(collection: "people", stats: FieldStats())
                let filter = try lowering.filter(node)
                if !filter.description.hasSuffix("id == 2999") { exit(3) }
            }
        }

        @Test func longAndChainParsesAndLowers() async {
            await #expect(processExitsWith: .success) {
                let terms = (0..<3_000).map { "tags.contains(\($0))" }
                guard case .query(let query) = try Parser.statement("people.include(\(terms.joined(separator: " && ")))"),
                      case .include(let node) = query.steps.first else { exit(2) }
                var lowering = Lowering(collection: "people", stats: FieldStats())
                _ = try lowering.filter(node).description
            }
        }

        @Test func deeplyNestedParenthesesFailCleanly() async {
            await #expect(processExitsWith: .success) {
                let depth = 100_000
                let text = "people.include(" + String(repeating: "(", count: depth) + "active"
                    + String(repeating: ")", count: depth) + ")"
                // Refusing it as nested too deeply is fine; crashing is not.
                _ = try? Parser.statement(text)
            }
        }

        @Test func longRunOfNotsFailsCleanly() async {
            await #expect(processExitsWith: .success) {
                _ = try? Parser.statement("people.include(" + String(repeating: "!", count: 100_000) + "active)")
            }
        }

        @Test func moderatelyNestedConditionParsesAndLowers() throws {
            let depth = repl.Parser.maximumNesting
            let text = String(repeating: "!(", count: depth) + "age > 3" + String(repeating: ")", count: depth)
            let (filter, _) = try LoweringFixture.lower(text)
            // An even number of negations cancels out.
            #expect(filter.description == "age > 3")
        }
    }
}
