import DocStore
import Foundation
import Testing
@testable import repl

/// Small helpers shared by the language's tests: parse a statement or a condition, and show an AST without locations.
enum ParseFixture {
    struct NotAQuery: Error, CustomStringConvertible {
        var text: String
        var description: String { "not a query: \(text)" }
    }

    /// The query a statement parses to.
    static func query(_ text: String) throws -> QueryExpression {
        guard case .query(let query) = try Parser.statement(text) else { throw NotAQuery(text: text) }
        return query
    }

    /// The steps of a query.
    static func steps(_ text: String) throws -> [Step] {
        try query(text).steps
    }

    /// The condition of `people.include(<condition>)`.
    static func condition(_ condition: String) throws -> PredicateNode {
        let steps = try steps("people.include(\(condition))")
        guard steps.count == 1, case .include(let node) = steps[0] else { throw NotAQuery(text: condition) }
        return node
    }

    /// The literal of `people.insert(<literal>)`.
    static func literal(_ literal: String) throws -> DocumentValue {
        let steps = try steps("people.insert(\(literal))")
        guard steps.count == 1, case .insert(let value) = steps[0] else { throw NotAQuery(text: literal) }
        return value.value
    }

    /// The error a statement gives, or nil when it parses.
    static func failure(_ text: String) -> ParseError? {
        do {
            _ = try Parser.statement(text)
            return nil
        } catch {
            return error
        }
    }

    /// The 1-based column of the first `needle` in a one-line `text`, counted in characters.
    static func column(of needle: String, in text: String) -> Int {
        guard let range = text.range(of: needle) else { return -1 }
        return text.distance(from: text.startIndex, to: range.lowerBound) + 1
    }

    /// A condition written compactly, without locations: `(age > 3 || (name? && tags.contains("x")))`.
    static func sketch(_ node: PredicateNode) -> String {
        switch node {
        case .and(let items): return "(" + items.map(sketch).joined(separator: " && ") + ")"
        case .or(let items): return "(" + items.map(sketch).joined(separator: " || ") + ")"
        case .not(let a): return "!\(sketch(a))"
        case .constant(let b): return b ? "true" : "false"
        case .compare(let path, let op, let literal): return "\(path.path) \(op.rawValue) \(literal.value.sketched)"
        case .isTrue(let path): return "\(path.path)?"
        case .inRange(let path, let lower, let upper, let closed):
            return "\(path.path) in \(lower.value.sketched)\(closed ? "..." : "..<")\(upper.value.sketched)"
        case .contains(let path, let literal): return "\(path.path).contains(\(literal.value.sketched))"
        case .oneOf(let path, let literals):
            return "\(path.path) in [\(literals.map { $0.value.sketched }.joined(separator: ", "))]"
        case .hasPrefix(let path, let literal): return "\(path.path).hasPrefix(\(literal.value.sketched))"
        case .ignoringCase(let path, let test, let literal, let lowered):
            return "\(path.path) \(test)\(lowered ? "" : " (localized)") \(literal.value.sketched) ignoring case"
        case .compareValues(let a, let op, let b): return "\(sketch(a)) \(op.rawValue) \(sketch(b))"
        case .choice(let test, let a, let b): return "(\(sketch(test)) ? \(sketch(a)) : \(sketch(b)))"
        }
    }

    static func sketch(_ value: ValueNode) -> String {
        switch value {
        case .path(let path): return path.path.description
        case .literal(let literal): return literal.value.sketched
        case .arithmetic(let op, let a, let b, _): return "(\(sketch(a)) \(op) \(sketch(b)))"
        case .negate(let a, _): return "-\(sketch(a))"
        case .coalesce(let a, let b): return "(\(sketch(a)) ?? \(sketch(b)))"
        case .count(let a, _): return "\(sketch(a))?.count"
        }
    }

    static func sketch(_ condition: String) throws -> String {
        sketch(try self.condition(condition))
    }
}

// MARK: - Statements and steps

@Suite struct ParserTests {
    @Test func emptyInputAndCommentOnlyLinesAreEmptyStatements() throws {
        for text in ["", "   ", "\n\t\n", "-- a note", "// a note", "  -- a note\n// another"] {
            #expect(try Parser.statement(text) == .empty, "\(text.debugDescription)")
        }
    }

    @Test func transactionWordsAloneAreTransactionStatements() throws {
        #expect(try Parser.statement("begin") == .begin)
        #expect(try Parser.statement("commit") == .commit)
        #expect(try Parser.statement("rollback") == .rollback)
        #expect(try Parser.statement("  begin   -- start a transaction") == .begin)
        #expect(try Parser.statement("\ncommit\n") == .commit)
    }

    /// A `;` may end a statement, as sqlite3 and mongosh users type it; a dot-command's words stay as written.
    @Test func aSemicolonMayEndAStatement() throws {
        #expect(try Parser.statement("people.include(age > 3).count();") == Parser.statement("people.include(age > 3).count()"))
        #expect(try Parser.statement("people ; -- all of them") == Parser.statement("people"))
        #expect(try Parser.statement("begin;") == .begin)
        #expect(try Parser.statement("commit ;") == .commit)
        #expect(try Parser.statement("rollback;\n") == .rollback)
        #expect(try Parser.statement(";") == .empty)
        #expect(try ParseFixture.literal(#"{"note": "a;b"}"#) == .object([("note", .string("a;b"))]))
        #expect(ParseFixture.failure("people.count();;") != nil)
        #expect(ParseFixture.failure("people.count(); people.count()")?.message.contains("one statement per line") == true)
        guard case .command(let name, let arguments, _) = try Parser.statement(".mode json;") else {
            Issue.record("not a command")
            return
        }
        #expect(name == "mode" && arguments == ["json;"])
    }

    @Test func transactionWordFollowedByStepsIsACollectionName() throws {
        let query = try ParseFixture.query("begin.count()")
        #expect(query.base == "begin")
        #expect(query.steps == [.count])
    }

    @Test func bareNameIsAQueryWithNoSteps() throws {
        let query = try ParseFixture.query("  people  ")
        #expect(query.base == "people")
        #expect(query.steps.isEmpty)
        #expect(query.text == "people")
        #expect(query.baseLocation == repl.SourceLocation(offset: 2, line: 1, column: 3))
    }

    @Test func queryKeepsItsOwnTextTrimmed() throws {
        let query = try ParseFixture.query("\n  people.include(age >= 18).sortBy(name)  \n")
        #expect(query.text == "people.include(age >= 18).sortBy(name)")
        #expect(query.baseLocation.line == 2)
        #expect(query.baseLocation.column == 3)
    }

    @Test func includeAndExcludeCarryTheirConditions() throws {
        let steps = try ParseFixture.steps("people.include(age >= 18).exclude(name == \"Bo\")")
        #expect(steps.count == 2)
        guard case .include(let kept) = steps[0], case .exclude(let dropped) = steps[1] else {
            Issue.record("expected include then exclude, got \(steps)")
            return
        }
        #expect(ParseFixture.sketch(kept) == "age >= 18")
        #expect(ParseFixture.sketch(dropped) == "name == \"Bo\"")
    }

    @Test func emptyIncludeMatchesEverything() throws {
        #expect(try ParseFixture.steps("people.include()") == [.include(.constant(true))])
        #expect(try ParseFixture.steps("people.exclude( )") == [.exclude(.constant(true))])
    }

    @Test(arguments: [
        ("people.sortBy(age)", "age", SortOrder.forward),
        ("people.sortBy(\\.age)", "age", .forward),
        ("people.sortBy(age, .reverse)", "age", .reverse),
        ("people.sortBy(age, order: .reverse)", "age", .reverse),
        ("people.sortBy(\\.age, order: .reverse)", "age", .reverse),
        ("people.sortBy(\\.address.city, .forward)", "address.city", .forward),
        ("people.sortBy(address.city, order: .forward)", "address.city", .forward),
        ("people.sortBy($0.age, .reverse)", "age", .reverse),
    ])
    func sortByAcceptsPathsKeyPathsAndBothOrderSpellings(text: String, path: String, order: SortOrder) throws {
        let steps = try ParseFixture.steps(text)
        guard steps.count == 1, case .sortBy(let reference, let parsedOrder) = steps[0] else {
            Issue.record("expected one sortBy step, got \(steps)")
            return
        }
        #expect(reference.path == FieldPath(path))
        #expect(parsedOrder == order)
    }

    @Test func sortByPathRemembersWhereTheFieldWasWritten() throws {
        let text = "people.sortBy(\\.address.city, .reverse)"
        guard case .sortBy(let reference, _) = try ParseFixture.steps(text).first else {
            Issue.record("no sortBy step")
            return
        }
        #expect(reference.location.column == ParseFixture.column(of: "address", in: text))
        #expect(reference.length == "address.city".count)
    }

    @Test func reverseWithAndWithoutParentheses() throws {
        #expect(try ParseFixture.steps("people.reverse()") == [.reverse])
        #expect(try ParseFixture.steps("people.reverse") == [.reverse])
        #expect(try ParseFixture.steps("people.reverse().reverse") == [.reverse, .reverse])
    }

    @Test(arguments: [
        ("people[2..<5]", 2..<5),
        ("people[2...5]", 2..<6),
        ("people[..<3]", 0..<3),
        ("people[...3]", 0..<4),
        ("people[0..<0]", 0..<0),
        ("people[ 10 ..< 20 ]", 10..<20),
    ])
    func slicesBecomeHalfOpenRanges(text: String, range: Range<Int>) throws {
        #expect(try ParseFixture.steps(text) == [.slice(range)])
    }

    @Test func slicesCombineWithOtherSteps() throws {
        let steps = try ParseFixture.steps("people.sortBy(age)[0..<10].reverse()[1...2].count()")
        #expect(steps.count == 5)
        #expect(Array(steps.dropFirst()) == [.slice(0..<10), .reverse, .slice(1..<3), .count])
    }

    @Test(arguments: [
        ("people.first", Step.first), ("people.first()", .first), ("people.last", .last), ("people.last()", .last),
        ("people.any", .any), ("people.any()", .any), ("people.count()", .count), ("people.count", .count),
        ("people.results()", .results), ("people.explain()", .explain), ("people.delete()", .delete),
    ])
    func terminalStepsParseWithOrWithoutParentheses(text: String, step: Step) throws {
        #expect(try ParseFixture.steps(text) == [step])
        #expect(step.isTerminal)
    }

    @Test func refiningStepsAreNotTerminal() throws {
        let steps = try ParseFixture.steps("people.include(a).exclude(b).sortBy(c).reverse()[0..<1]")
        #expect(steps.count == 5)
        #expect(steps.allSatisfy { !$0.isTerminal })
    }

    @Test func findOrCreateTakesAnObject() throws {
        let steps = try ParseFixture.steps("people.include(name == \"Ann\").findOrCreate({\"name\": \"Ann\", age: 41})")
        #expect(steps.count == 2)
        guard case .findOrCreate(let literal) = steps[1] else {
            Issue.record("expected findOrCreate, got \(steps[1])")
            return
        }
        #expect(literal.value == .object([("name", .string("Ann")), ("age", .int(41))]))
        #expect(steps[1].isTerminal)
    }

    @Test func insertTakesAnObjectOrAListOfThem() throws {
        #expect(try ParseFixture.literal("{\"name\": \"Ann\"}") == .object([("name", .string("Ann"))]))
        #expect(try ParseFixture.literal("[{\"name\": \"Ann\"}, {name: \"Bo\", tags: []}]") == .array([
            .object([("name", .string("Ann"))]),
            .object([("name", .string("Bo")), ("tags", .array([]))]),
        ]))
    }

    @Test func saveTakesAnObjectAndRemembersItsSpan() throws {
        let text = "people.save({\"id\": 7, \"name\": \"Cy\"})"
        guard case .save(let literal) = try ParseFixture.steps(text).first else {
            Issue.record("expected a save step")
            return
        }
        #expect(literal.value == .object([("id", .int(7)), ("name", .string("Cy"))]))
        #expect(literal.location.column == ParseFixture.column(of: "{", in: text))
        #expect(literal.length == "{\"id\": 7, \"name\": \"Cy\"}".count)
    }

    @Test func stepsMaySpanSeveralLinesWithCommentsBetween() throws {
        let text = """
            people            -- everyone
              .include(age >= 18)   // adults
              // only those in Oslo
              .include(address.city == "Oslo")
              .count()
            """
        let query = try ParseFixture.query(text)
        #expect(query.steps.count == 3)
        #expect(query.steps.last == .count)
        guard case .include(let second) = query.steps[1], case .compare(let path, _, _) = second else {
            Issue.record("expected a comparison in the second step")
            return
        }
        #expect(path.location.line == 4)
        #expect(path.location.column == 12)
    }

    // MARK: Dot-commands

    @Test func dotCommandSplitsItsArgumentsAtSpaces() throws {
        guard case .command(let name, let arguments, let location) = try Parser.statement(".mode json") else {
            Issue.record("expected a command")
            return
        }
        #expect(name == "mode")
        #expect(arguments == ["json"])
        #expect(location == repl.SourceLocation(offset: 0, line: 1, column: 1))
    }

    @Test func dotCommandKeepsQuotedArgumentsTogether() throws {
        let statement = try Parser.statement(".save adults \"people.include(age >= 18 && name != \"\")\"  \"my file.json\"")
        guard case .command(let name, let arguments, _) = statement else {
            Issue.record("expected a command")
            return
        }
        #expect(name == "save")
        // A quote toggles quoting: the empty quotes inside the first argument end and restart it.
        #expect(arguments == ["adults", "people.include(age >= 18 && name != )", "my file.json"])
    }

    @Test func dotCommandWithEmptyQuotedArgumentKeepsIt() throws {
        guard case .command(let name, let arguments, _) = try Parser.statement(".import \"\" people") else {
            Issue.record("expected a command")
            return
        }
        #expect(name == "import")
        #expect(arguments == ["", "people"])
    }

    @Test func dotCommandAfterLeadingBlankLinesIsLocatedWhereItStarts() throws {
        guard case .command(let name, let arguments, let location) = try Parser.statement("\n\n   .help   ") else {
            Issue.record("expected a command")
            return
        }
        #expect(name == "help")
        #expect(arguments.isEmpty)
        #expect(location == repl.SourceLocation(offset: 5, line: 3, column: 4))
    }

    @Test func dotAloneIsNotACommand() throws {
        let error = try #require(ParseFixture.failure("  .  "))
        #expect(error.message.contains("needs a name"))
        #expect(error.location.column == 3)
    }

    @Test func dotCommandWithUnclosedQuoteIsAnError() throws {
        let error = try #require(ParseFixture.failure(".open \"my store"))
        #expect(error.message.contains("no closing quote"))
        #expect(!error.isIncomplete)
    }

    // MARK: Saved queries

    @Test func savedQueryKeepsRefiningSteps() throws {
        let query = try Parser.savedQuery("people.include(age >= 18).sortBy(name, .reverse)[0..<5]")
        #expect(query.base == "people")
        #expect(query.steps.count == 3)
        #expect(query.steps.last == .slice(0..<5))
    }

    @Test(arguments: ["people.count()", "people.include(age >= 18).first", "people.insert({\"a\": 1})",
                      "people.delete()", "people.sortBy(age).explain()"])
    func savedQueryRefusesATerminalStep(text: String) throws {
        do {
            let query = try Parser.savedQuery(text)
            Issue.record("expected an error, got \(query)")
        } catch {
            #expect(error.message.contains("a saved filter cannot end in"))
            #expect(error.location == repl.SourceLocation(offset: 0, line: 1, column: 1))
        }
    }

    @Test func savedQueryRefusesTrailingText() throws {
        do {
            _ = try Parser.savedQuery("people.include(a) b")
            Issue.record("expected an error")
        } catch {
            #expect(error.message.contains("unexpected 'b'"))
            #expect(error.location.column == 19)
        }
    }
}

// MARK: - Conditions

extension ParserTests {
    @Suite struct Conditions {
        @Test func orBindsLooserThanAnd() throws {
            #expect(try ParseFixture.sketch("a || b && c") == "(a? || (b? && c?))")
            #expect(try ParseFixture.sketch("a && b || c") == "((a? && b?) || c?)")
            #expect(try ParseFixture.sketch("a || b || c") == "(a? || b? || c?)")
            #expect(try ParseFixture.sketch("a && b && c || d && e") == "((a? && b? && c?) || (d? && e?))")
        }

        @Test func parenthesesOverridePrecedence() throws {
            #expect(try ParseFixture.sketch("(a || b) && c") == "((a? || b?) && c?)")
            #expect(try ParseFixture.sketch("a && (b || (c))") == "(a? && (b? || c?))")
            #expect(try ParseFixture.sketch("((age > 3))") == "age > 3")
        }

        @Test func notAppliesToTheNearestTerm() throws {
            #expect(try ParseFixture.sketch("!a && b") == "(!a? && b?)")
            #expect(try ParseFixture.sketch("!(a && b)") == "!(a? && b?)")
            #expect(try ParseFixture.sketch("!!a") == "!!a?")
            #expect(try ParseFixture.sketch("!(age > 3) || !tags.contains(\"x\")") == "(!age > 3 || !tags.contains(\"x\"))")
        }

        @Test(arguments: [("==", Filter.Comparison.equal), ("!=", .notEqual), ("<", .less), ("<=", .lessOrEqual),
                          (">", .greater), (">=", .greaterOrEqual)])
        func everyComparisonOperatorParses(symbol: String, comparison: Filter.Comparison) throws {
            let text = "people.include(age \(symbol) 18)"
            guard case .include(let node) = try ParseFixture.steps(text).first,
                  case .compare(let path, let op, let literal) = node else {
                Issue.record("expected a comparison")
                return
            }
            #expect(path.path == "age")
            #expect(path.location.column == 16)
            #expect(path.length == 3)
            #expect(op == comparison)
            #expect(literal.value == .int(18))
            #expect(literal.location.column == 16 + 3 + 1 + symbol.count + 1)
        }

        @Test(arguments: [
            ("18 <= age", "age >= 18"), ("18 < age", "age > 18"), ("30 > age", "age < 30"), ("30 >= age", "age <= 30"),
            ("\"Oslo\" == city", "city == \"Oslo\""), ("nil != email", "email != null"), ("true == active", "active == true"),
            ("false != active", "active != false"), ("-5 < balance", "balance > -5"),
            ("date(\"2024-05-01\") <= joined", "joined >= \"2024-05-01T00:00:00.000Z\""),
        ])
        func literalOnTheLeftIsTurnedAround(written: String, expected: String) throws {
            #expect(try ParseFixture.sketch(written) == expected)
        }

        @Test func turnedAroundComparisonPointsAtTheFieldAndTheValue() throws {
            let text = "people.include(18 <= age)"
            guard case .include(let node) = try ParseFixture.steps(text).first,
                  case .compare(let path, _, let literal) = node else {
                Issue.record("expected a comparison")
                return
            }
            #expect(path.location.column == 22)
            #expect(literal.location.column == 16)
            #expect(literal.length == 2)
        }

        @Test func inWithRanges() throws {
            #expect(try ParseFixture.sketch("age in 18..<30") == "age in 18..<30")
            #expect(try ParseFixture.sketch("age in 18...30") == "age in 18...30")
            #expect(try ParseFixture.sketch("score in 1.5...2.5") == "score in 1.5...2.5")
            #expect(try ParseFixture.sketch("balance in -10..<-1") == "balance in -10..<-1")
            #expect(try ParseFixture.sketch("name in \"a\"..<\"m\"") == "name in \"a\"..<\"m\"")
            guard case .inRange(_, let lower, let upper, let closed) = try ParseFixture.condition("age in 18...30") else {
                Issue.record("expected a range")
                return
            }
            #expect(lower.value == .int(18))
            #expect(upper.value == .int(30))
            #expect(closed)
        }

        @Test func listMembershipBothWays() throws {
            #expect(try ParseFixture.sketch("city in [\"a\", \"b\"]") == "city in [\"a\", \"b\"]")
            #expect(try ParseFixture.sketch("[\"a\",\"b\"].contains(city)") == "city in [\"a\", \"b\"]")
            #expect(try ParseFixture.sketch("[].contains(city)") == "city in []")
            #expect(try ParseFixture.sketch("[1, 2.5, nil].contains($0.age)") == "age in [1, 2.5, null]")
            #expect(try ParseFixture.sketch("!city in [\"a\"] && active") == "(!city in [\"a\"] && active?)")
        }

        @Test func fieldMethods() throws {
            #expect(try ParseFixture.sketch("tags.contains(\"x\")") == "tags.contains(\"x\")")
            #expect(try ParseFixture.sketch("name.hasPrefix(\"A\")") == "name.hasPrefix(\"A\")")
            #expect(try ParseFixture.sketch("name.starts(with: \"A\")") == "name.hasPrefix(\"A\")")
            #expect(try ParseFixture.sketch("address.city.hasPrefix(\"O\")") == "address.city.hasPrefix(\"O\")")
            #expect(try ParseFixture.sketch("$0.tags.contains(3)") == "tags.contains(3)")
            #expect(try ParseFixture.sketch("scores.contains({\"a\": [1]})") == "scores.contains({\"a\":[1]})")
        }

        /// `?.` and `!` before a method, as `#Predicate` takes them on an optional field: the same condition as
        /// without them; the test that makes `?.`'s optional result a condition as Swift reads it.
        @Test func optionalFieldMethods() throws {
            for method in [#"contains("5")"#, #"hasPrefix("N5")"#, #"starts(with: "N5")"#] {
                let plain = try ParseFixture.sketch("tailnum.\(method)")
                for written in ["tailnum?.\(method)", "tailnum?.\(method) == true", "tailnum?.\(method) ?? false",
                                "tailnum!.\(method)", "tailnum.\(method) == true"] {
                    #expect(try ParseFixture.sketch(written) == plain, "\(written)")
                }
                #expect(try ParseFixture.sketch("tailnum?.\(method) != true") == "!" + plain)
                // nil != false, and nil ?? true is true: a document without the field matches.
                for written in ["tailnum?.\(method) != false", "tailnum?.\(method) ?? true"] {
                    #expect(try ParseFixture.sketch(written) == "(tailnum == null || \(plain))", "\(written)")
                }
                #expect(try ParseFixture.sketch("tailnum?.\(method) == false") == "(tailnum != null && !\(plain))")
            }
            #expect(try ParseFixture.sketch(#"tailnum?.hasPrefix("N5") == true && !tags!.contains("x")"#)
                    == #"(tailnum.hasPrefix("N5") && !tags.contains("x"))"#)
        }

        @Test func nilAndNullAreTheSameValue() throws {
            #expect(try ParseFixture.sketch("email == nil") == "email == null")
            #expect(try ParseFixture.sketch("email == null") == "email == null")
            #expect(try ParseFixture.sketch("email != nil") == "email != null")
        }

        @Test func dottedPathsAndTheDollarZeroPrefix() throws {
            guard case .compare(let path, _, _) = try ParseFixture.condition("address.city == \"Oslo\"") else {
                Issue.record("expected a comparison")
                return
            }
            #expect(path.path.components == ["address", "city"])
            #expect(path.length == "address.city".count)
            #expect(try ParseFixture.sketch("$0.age > 3") == "age > 3")
            #expect(try ParseFixture.sketch("$0.address.city == \"Oslo\" && $0.active") == "(address.city == \"Oslo\" && active?)")
            guard case .compare(let prefixed, _, _) = try ParseFixture.condition("$0.address.zip == 1") else {
                Issue.record("expected a comparison")
                return
            }
            // The path starts after `$0.`.
            #expect(prefixed.location.column == 19)
            #expect(prefixed.length == "address.zip".count)
        }

        @Test func bareFieldIsATruthTest() throws {
            #expect(try ParseFixture.sketch("active") == "active?")
            #expect(try ParseFixture.sketch("active && !deleted") == "(active? && !deleted?)")
            #expect(try ParseFixture.sketch("(settings.enabled)") == "settings.enabled?")
            #expect(try ParseFixture.sketch("$0.active || age > 3") == "(active? || age > 3)")
        }

        @Test func trueAndFalseAloneAreConstants() throws {
            #expect(try ParseFixture.condition("true") == .constant(true))
            #expect(try ParseFixture.condition("false") == .constant(false))
            #expect(try ParseFixture.sketch("false || active") == "(false || active?)")
            #expect(try ParseFixture.sketch("!true") == "!true")
        }

        @Test func fieldNamedDateIsAFieldUnlessCalled() throws {
            #expect(try ParseFixture.sketch("date == 3") == "date == 3")
            #expect(try ParseFixture.sketch("date > date(\"2024-05-01\")") == "date > \"2024-05-01T00:00:00.000Z\"")
        }

        // MARK: Literals

        @Test func nestedObjectsAndArraysKeepTheirOrder() throws {
            let value = try ParseFixture.literal("""
                {"b": {"z": [1, 2.5, "x", true, false, null, nil, []], "a": {}}, a: [[1], [{"k": -2}]], "": 0,}
                """)
            #expect(value == .object([
                ("b", .object([
                    ("z", .array([.int(1), .double(2.5), .string("x"), .bool(true), .bool(false), .null, .null, .array([])])),
                    ("a", .object([DocumentValue.Field]())),
                ])),
                ("a", .array([.array([.int(1)]), .array([.object([("k", .int(-2))])])])),
                ("", .int(0)),
            ]))
        }

        @Test func trailingCommaInAListIsAllowed() throws {
            #expect(try ParseFixture.literal("[1, 2,]") == .array([.int(1), .int(2)]))
        }

        @Test(arguments: [
            (#""\u00e9t\u00E9""#, "été"),
            (#""\ud83d\ude00""#, "😀"),
            (#""\uD83D\uDE00!""#, "😀!"),
            (#""\u{1F600}""#, "😀"),
            (#""\u{41}\u{e9}""#, "Aé"),
            (#""\"\\\/\n\t\r\b\f\0""#, "\"\\/\n\t\r\u{8}\u{C}\0"),
            (#""tab\there""#, "tab\there"),
            (#""ünïcödé 日本 😀""#, "ünïcödé 日本 😀"),
            (#""""#, ""),
        ])
        func stringEscapes(written: String, expected: String) throws {
            #expect(try ParseFixture.literal(written) == .string(expected))
        }

        @Test(arguments: [
            ("0", DocumentValue.int(0)),
            ("-5", .int(-5)),
            ("- 5", .int(-5)),
            ("2.5", .double(2.5)),
            ("-2.5", .double(-2.5)),
            ("1e3", .double(1000)),
            ("2.5E-2", .double(0.025)),
            ("1e+2", .double(100)),
            ("9223372036854775807", .int(.max)),
            ("9223372036854775808", .uint(9_223_372_036_854_775_808)),
            ("-9223372036854775807", .int(-Int64.max)),
            ("inf", .double(.infinity)),
            ("-inf", .double(-.infinity)),
        ])
        func numbers(written: String, expected: DocumentValue) throws {
            #expect(try ParseFixture.literal(written) == expected)
        }

        /// An integer past 64 bits is refused, as Swift refuses the literal: rounded to a double it would equal
        /// another integer (`-9223372036854775809` would match `Int64.min`).
        @Test(arguments: ["18446744073709551616", "-9223372036854775809", "99999999999999999999999"])
        func integersPast64BitsAreRefused(written: String) throws {
            do {
                let value = try ParseFixture.literal(written)
                Issue.record("\(written) parsed as \(value)")
            } catch {
                #expect("\(error)".contains("does not fit in 64 bits"), "\(error)")
            }
        }

        @Test func smallestInt64IsAnIntegerNotADouble() throws {
            // Int64.min is written with 19 digits after the minus, one more than Int64.max holds.
            #expect(try ParseFixture.literal("-9223372036854775808") == .int(.min))
        }

        @Test func nanLiteralIsANotANumberDouble() throws {
            guard case .double(let d) = try ParseFixture.literal("nan") else {
                Issue.record("expected a double")
                return
            }
            #expect(d.isNaN)
        }

        @Test func dayOnlyDateIsMidnightUTC() throws {
            #expect(try ParseFixture.literal("date(\"2024-05-01\")") == .date(Date(timeIntervalSince1970: 1_714_521_600)))
        }

        @Test func dateTimeWithZoneOffsetIsConvertedToUTC() throws {
            let expected = Date(timeIntervalSince1970: 1_714_521_600 + 10 * 3600 + 30 * 60)
            #expect(try ParseFixture.literal("date(\"2024-05-01T12:30:00+02:00\")") == .date(expected))
            #expect(try ParseFixture.literal("date(\"2024-05-01T10:30:00Z\")") == .date(expected))
        }

        @Test func dateTimeWithFractionalSeconds() throws {
            guard case .date(let date) = try ParseFixture.literal("date(\"2024-05-01T00:00:00.250Z\")") else {
                Issue.record("expected a date")
                return
            }
            #expect(abs(date.timeIntervalSince1970 - 1_714_521_600.25) < 0.001)
        }

        @Test func objectKeysMayBeWordsOrStrings() throws {
            #expect(try ParseFixture.literal("{name: \"Ann\", \"the age\": 41, true: 1}")
                == .object([("name", .string("Ann")), ("the age", .int(41)), ("true", .int(1))]))
        }

        // MARK: Locations

        @Test func tokensKnowTheirLineAndColumn() throws {
            let tokens = try Lexer.tokens("a\n  bb == \"x\"\n\t1.5")
            let places = tokens.map { "\($0.location.line):\($0.location.column)/\($0.location.offset)+\($0.length)" }
            #expect(places == ["1:1/0+1", "2:3/4+2", "2:6/7+2", "2:9/10+3", "3:2/15+3", "3:5/18+1"])
            #expect(tokens.last?.kind == .end)
        }

        @Test func rangeAfterIntegerIsNotAFraction() throws {
            let kinds = try Lexer.tokens("1..<5 1...5 1.5").map(\.kind)
            #expect(kinds == [.integer(1), .symbol("..<"), .integer(5), .integer(1), .symbol("..."), .integer(5),
                              .number(1.5), .end])
        }

        @Test func commentsRunToTheEndOfTheirLineOnly() throws {
            let kinds = try Lexer.tokens("a -- b\nc // d\n-1").map(\.kind)
            #expect(kinds == [.identifier("a"), .identifier("c"), .symbol("-"), .integer(1), .end])
        }
    }
}

// MARK: - Errors

extension ParserTests {
    @Suite struct Errors {
        /// The error `text` gives; records an issue (and fails the `#require`) when it parses.
        private func failure(_ text: String, sourceLocation: Testing.SourceLocation = #_sourceLocation) throws
            -> ParseError {
            try #require(ParseFixture.failure(text), "expected \(text.debugDescription) to fail",
                         sourceLocation: sourceLocation)
        }

        @Test func unknownStepSuggestsClosestWord() throws {
            let error = try failure("people.sortby(age)")
            #expect(error.message.hasPrefix("unknown step 'sortby'"))
            #expect(error.message.contains("include, exclude, sortBy"))
            #expect(error.suggestion == "'sortBy'")
            #expect(error.location == repl.SourceLocation(offset: 7, line: 1, column: 8))
            #expect(error.length == 6)
            #expect(!error.isIncomplete)
            #expect(error.description == "1:8: " + error.message + " (did you mean 'sortBy'?)")
        }

        @Test(arguments: [("includ", "'include'"), ("exlude", "'exclude'"), ("cout", "'count'"),
                          ("reslts", "'results'"), ("explian", "'explain'"), ("fndOrCreate", "'findOrCreate'")])
        func misspelledStepSuggestsItsWord(written: String, suggestion: String) throws {
            let error = try failure("people.\(written)()")
            #expect(error.suggestion == suggestion)
            #expect(error.location.column == 8)
        }

        @Test func unknownStepFarFromEveryWordHasNoSuggestion() throws {
            let error = try failure("people.frobnicate()")
            #expect(error.message.hasPrefix("unknown step 'frobnicate'"))
            #expect(error.suggestion == nil)
        }

        @Test func unknownMethodOnFieldSuggestsClosest() throws {
            let text = "people.include(name.hasSufix(\"x\"))"
            let error = try failure(text)
            #expect(error.message.hasPrefix("unknown method 'hasSufix' on a field"))
            #expect(error.suggestion == "'hasPrefix'")
            #expect(error.location.column == ParseFixture.column(of: "hasSufix", in: text))
            #expect(error.length == 8)
            #expect(try failure("people.include(tags.containz(1))").suggestion == "'contains'")
            #expect(try failure("people.include(tags.count(1))").suggestion == nil)
        }

        @Test func singleEqualsSuggestsDoubleEquals() throws {
            let error = try failure("people.include(age = 18)")
            #expect(error.message.contains("'=' alone is not a comparison"))
            #expect(error.suggestion == "'=='")
            #expect(error.location == repl.SourceLocation(offset: 19, line: 1, column: 20))
        }

        @Test func loneAmpersandOrBarSuggestsTheDoubledOperator() throws {
            let and = try failure("people.include(a & b)")
            #expect(and.message.contains("'&' alone"))
            #expect(and.suggestion == "'&&'")
            #expect(and.location.column == 18)
            let or = try failure("people.include(a | b)")
            #expect(or.message.contains("'|' alone"))
            #expect(or.suggestion == "'||'")
            #expect(or.location.column == 18)
        }

        @Test func singleQuotedStringAsksForDoubleQuotes() throws {
            let error = try failure("people.include(name == 'Ann')")
            #expect(error.message == "strings are written in double quotes")
            #expect(error.location.column == 24)
            #expect(!error.isIncomplete)
        }

        @Test func unterminatedStringIsIncompleteAndPointsAtItsQuote() throws {
            let error = try failure("people.include(name == \"Ann")
            #expect(error.message.contains("no closing quote"))
            #expect(error.isIncomplete)
            #expect(error.location.column == 24)
            let escaped = try failure("people.include(name == \"Ann\\")
            #expect(escaped.isIncomplete)
            #expect(escaped.location.column == 24)
        }

        @Test func stringBrokenByANewlineIsNotIncomplete() throws {
            let error = try failure("people.include(name == \"Ann\n\")")
            #expect(error.message.contains("no closing quote on its line"))
            #expect(!error.isIncomplete)
            #expect(error.location == repl.SourceLocation(offset: 23, line: 1, column: 24))
        }

        @Test(arguments: ["people.include(age > 3", "people.include((age > 3)", "people.insert({\"a\": [1, 2",
                          "people.include(", "people.sortBy(age,", "people.include(age >", "people.insert({",
                          "people.include(a &&", "people.insert([1,", "people.include(age in 1..<",
                          "people.findOrCreate({name: \"Ann\"}"])
        func openBracketAtTheEndIsIncomplete(text: String) throws {
            let error = try failure(text)
            #expect(error.isIncomplete, "\(error)")
            #expect(error.location.offset == text.count)
            #expect(error.location.line == 1)
            #expect(error.location.column == text.count + 1)
        }

        @Test func extraClosingParenthesisIsNotIncomplete() throws {
            let error = try failure("people.include(age > 3))")
            #expect(error.message.hasPrefix("unexpected ')' after the query"))
            #expect(error.location.column == 24)
            #expect(!error.isIncomplete)
        }

        @Test(arguments: ["people.", "people.include", "people.include(a).include", "people[", "people.sortBy"])
        func endWithBalancedBracketsIsNotIncomplete(text: String) throws {
            let error = try failure(text)
            #expect(error.location.offset == text.count)
            // "people[" has an open bracket: more lines could finish it.
            #expect(error.isIncomplete == text.hasSuffix("["))
        }

        @Test func stepAfterTerminalStepIsRefused() throws {
            let error = try failure("people.count().sortBy(x)")
            #expect(error.message == "nothing but explain() can follow count(), which runs the query")
            #expect(error.location.column == 15)
            let slice = try failure("people.first[0..<2]")
            #expect(slice.message == "nothing can follow first, which runs the query")
            #expect(slice.location.column == 13)
            let insert = try failure("people.insert({\"a\": 1}).count()")
            #expect(insert.message.hasPrefix("nothing can follow insert(...)"))
        }

        @Test func sliceWithReversedBoundsIsRefused() throws {
            let error = try failure("people[5..<2]")
            #expect(error.message.contains("ends before it starts"))
            #expect(error.location.column == 8)
        }

        @Test func closedSliceWithReversedBoundsIsRefused() throws {
            // `3...2` is not a range in Swift: it must not quietly become the empty slice 3..<3.
            let error = try failure("people[3...2]")
            #expect(error.message.contains("ends before it starts"))
            #expect(error.location.column == 8)
        }

        @Test(arguments: [("people[1.5..<3]", 8), ("people[0..<2.5]", 12), ("people[0..<]", 12),
                          ("people[-1..<2]", 8), ("people[\"a\"..<\"b\"]", 8), ("people[0..<99999999999999999999]", 12)])
        func sliceBoundsAreWholeNumbers(text: String, column: Int) throws {
            let error = try failure(text)
            #expect(error.message.contains("whole numbers"))
            #expect(error.location.column == column)
        }

        @Test func sliceNeedsARangeOperator() throws {
            let error = try failure("people[0..3]")
            #expect(error.message.contains("expected '..<' or '...'"))
            #expect(error.location.column == 9)
            #expect(try failure("people[0..<3").message.contains("expected ']'"))
        }

        @Test func missingValueAfterComparison() throws {
            let error = try failure("people.include(age > )")
            #expect(error.message.hasPrefix("expected a value"))
            #expect(error.message.hasSuffix("found ')'"))
            #expect(error.location.column == 22)
            #expect(!error.isIncomplete)
            let beforeAnd = try failure("people.include(age >= && b)")
            #expect(beforeAnd.message.hasSuffix("found '&&'"))
            #expect(beforeAnd.location.column == 23)
            #expect(try failure("people.include(age > -)").message == "expected a number after '-'")
        }

        @Test func twoFieldsCompareAsValues() throws {
            #expect(try ParseFixture.sketch("age > height") == "age > height")
        }

        @Test func comparisonOperatorIsRequiredAfterAField() throws {
            let error = try failure("people.include(age 3)")
            #expect(error.message.hasPrefix("expected a comparison (==, !=, <, <=, >, >=), in, or a method after age"))
            #expect(error.location.column == 20)
            #expect(try failure("people.include(18 age)").message.hasPrefix("expected a comparison after 18"))
        }

        @Test func rangeNeedsARangeOperator() throws {
            let error = try failure("people.include(age in 1, 2)")
            #expect(error.message.contains("expected '..<' or '...' in the range"))
            #expect(error.location.column == 24)
            #expect(try failure("people.include(age in 1..<)").message.hasSuffix("found ')'"))
        }

        @Test func duplicateKeyInAnObjectPointsAtTheSecond() throws {
            let error = try failure("people.insert({\"a\": 1, a: 2})")
            #expect(error.message == "the field \"a\" appears twice in this object")
            #expect(error.location.column == 24)
            let nested = try failure("people.insert({\"a\": {\"b\": 1, \"b\": 2}})")
            #expect(nested.message.contains("\"b\" appears twice"))
        }

        @Test func objectKeyMustBeANameOrString() throws {
            let error = try failure("people.insert({1: 2})")
            #expect(error.message.contains("expected a field name in the object"))
            #expect(error.location.column == 16)
            #expect(try failure("people.insert({a 2})").message.contains("expected ':'"))
        }

        @Test func unknownEscapePointsAtTheBackslash() throws {
            let error = try failure("people.include(name == \"a\\qb\")")
            #expect(error.message == "unknown escape '\\q' in a string")
            #expect(error.location.column == 26)
            #expect(error.length == 2)
        }

        @Test(arguments: [(#""\u12""#, "needs 4 hexadecimal digits"), (#""\u{110000}""#, "not a Unicode scalar"),
                          (#""\uD800""#, "not a Unicode scalar"), (#""\uDE00x""#, "not a Unicode scalar"),
                          (#""\u{}""#, "closing brace"), (#""\u{41""#, "closing brace"),
                          (#""\u{123456789}""#, "closing brace"), (#""\uD83D\u0041""#, "not a Unicode scalar"),
                          (#""\uD83D\uZZ""#, "needs 4 hexadecimal digits")])
        func badUnicodeEscapeIsAnError(written: String, message: String) throws {
            let error = try failure("people.include(name == \(written))")
            #expect(error.message.contains(message), "\(error)")
            #expect(error.location.column == 25)
        }

        @Test func unicodeEscapeTakesOnlyASCIIHexDigits() throws {
            // Fullwidth digits look like hex digits but are not: `\u` needs four ASCII ones.
            let error = try failure("people.include(name == \"\\u\u{FF10}\u{FF10}\u{FF14}\u{FF11}\")")
            #expect(error.message.contains("hexadecimal digits"))
        }

        @Test func badDateIsAnErrorAtTheString() throws {
            let text = "people.include(joined > date(\"2024-13-45\"))"
            let error = try failure(text)
            #expect(error.message.hasPrefix("'2024-13-45' is not a date"))
            #expect(error.location.column == ParseFixture.column(of: "\"2024", in: text))
            #expect(error.length == 12)
            #expect(try failure("people.include(joined > date(\"yesterday\"))").message.contains("is not a date"))
            #expect(try failure("people.include(joined > date(2024))").message.hasPrefix("date takes a string"))
            #expect(try failure("people.insert({\"d\": date \"2024-05-01\"})").message.contains("expected '(' after date"))
        }

        @Test func numberRunningIntoAWordIsAnError() throws {
            let error = try failure("people.include(age > 12abc)")
            #expect(error.message == "a number cannot run into a word ('12a')")
            #expect(error.location.column == 22)
            #expect(error.length == 3)
            #expect(try failure("people[1e..<2]").message.contains("('1e')"))
        }

        @Test func statementMustStartWithAName() throws {
            let error = try failure("42")
            #expect(error.message.hasPrefix("a statement starts with a collection's name"))
            #expect(error.location.column == 1)
            #expect(try failure("  (a)").location.column == 3)
        }

        @Test func oneStatementPerLine() throws {
            let error = try failure("people include(x)")
            #expect(error.message == "unexpected 'include' after the query; one statement per line")
            #expect(error.location.column == 8)
            #expect(try failure("people.count() people.count()").location.column == 16)
        }

        @Test func sortOrderIsForwardOrReverse() throws {
            let error = try failure("people.sortBy(age, .revers)")
            #expect(error.message.contains("the order is .forward or .reverse"))
            #expect(error.suggestion == "'.reverse'")
            #expect(error.location.column == 21)
            let noDot = try failure("people.sortBy(age, reverse)")
            #expect(noDot.message.contains("expected '.'"))
            #expect(noDot.location.column == 20)
        }

        @Test func startsNeedsItsWithLabel() throws {
            let error = try failure("people.include(name.starts(\"A\"))")
            #expect(error.message.contains("starts(with: \"...\")"))
            #expect(error.location.column == 28)
        }

        @Test func hasPrefixTakesAString() throws {
            let error = try failure("people.include(name.hasPrefix(3))")
            #expect(error.message == "hasPrefix takes a string")
            #expect(error.location.column == 31)
            #expect(try failure("people.include(name.starts(with: [\"a\"]))").message == "starts takes a string")
        }

        @Test func listInAConditionIsFollowedByContains() throws {
            let error = try failure("people.include([1, 2].count(x))")
            #expect(error.message.contains("followed by .contains(field)"))
            #expect(error.location.column == 23)
        }

        @Test func unexpectedCharacterIsNamed() throws {
            let error = try failure("people.include(age > 3 @ x)")
            #expect(error.message == "unexpected character '@'")
            #expect(error.location.column == 24)
            // `;` ends a statement, and nothing else.
            let semicolon = try failure("people.include(age > 3 ; x)")
            #expect(semicolon.message == "expected ')' to close include(, found ';'")
            #expect(semicolon.location.column == 24)
        }

        @Test func notNeedsSomethingToNegate() throws {
            let error = try failure("people.include(!)")
            #expect(error.message.contains("expected a field name, found ')'"))
            #expect(error.location.column == 17)
        }

        @Test func deeplyNestedValueIsAnErrorNotACrash() throws {
            let text = "people.insert(" + String(repeating: "[", count: 300) + String(repeating: "]", count: 300) + ")"
            let error = try failure(text)
            #expect(error.message.contains("nested too deeply"))
        }

        @Test func errorOnTheSecondLineIsRenderedWithThatLine() throws {
            let source = "people\n  .include(age >= 18 && name = \"x\")"
            let error = try failure(source)
            #expect(error.location == repl.SourceLocation(offset: 36, line: 2, column: 30))
            #expect(error.rendered(source: source) == """
                error at line 2, column 30: '=' alone is not a comparison
                    .include(age >= 18 && name = "x")
                                               ^
                  did you mean '=='?

                """)
        }

        @Test func renderedCaretSpansTheTokenAndKeepsTabs() throws {
            let text = "people -- sorted\n\t.sortby(age)"
            let error = try failure(text)
            #expect(error.location.line == 2)
            #expect(error.location.column == 3)
            #expect(error.rendered(source: text, origin: "setup.ds") == """
                error in setup.ds at line 2, column 3: \(error.message)
                  \t.sortby(age)
                  \t ^~~~~~
                  did you mean 'sortBy'?

                """)
        }

        @Test func errorOnTheThirdLineAfterBlankAndCommentLines() throws {
            let text = "people\n\n  // adults only\n  .include(age >= 18 && )"
            let error = try failure(text)
            #expect(error.location.line == 4)
            #expect(error.location.column == 25)
            let rendered = error.rendered(source: text)
            let lines = rendered.split(separator: "\n", omittingEmptySubsequences: false)
            #expect(lines[1] == "    .include(age >= 18 && )")
            #expect(lines[2] == "  " + String(repeating: " ", count: 24) + "^")
        }

        @Test func windowsLineEndingsStillCountLines() throws {
            let error = try failure("people\r\n  .include(age = 1)")
            #expect(error.location.line == 2)
            #expect(error.location.column == 16)
        }
    }
}

extension DocumentValue {
    /// The value as JSON, a date as its text in quotes.
    fileprivate var sketched: String {
        if case .date(let d) = self { return DocumentValue.string(DocumentValue.iso8601(d)).json() }
        return json()
    }
}
