import DocStore
import Foundation
import Testing
@testable import repl

/// A collection of people as FieldStats sees it, and a way to lower a condition written against it.
enum LoweringFixture {
    static let joined = Date(timeIntervalSince1970: 1_700_000_000)

    static var people: FieldStats {
        var stats = FieldStats()
        stats.add(.object([
            ("name", .string("Ann")), ("age", .int(41)), ("active", .bool(true)),
            ("tags", .array([.string("swift"), .string("lmdb")])), ("joined", .date(joined)),
            ("address", .object([("city", .string("Oslo"))])), ("email", .null), ("score", .double(2.5)),
            ("nick", .null),
        ]))
        stats.add(.object([
            ("name", .string("Bo")), ("age", .int(17)), ("active", .bool(false)), ("tags", .array([])),
            ("address", .object([("city", .string("Bergen")), ("zip", .string("5003"))])),
            ("email", .string("bo@example.com")), ("score", .string("n/a")),
        ]))
        stats.total = 2
        return stats
    }

    /// The lowering of `people.include(<condition>)`, with the warnings it gave.
    static func lower(_ condition: String, stats: FieldStats = people) throws -> (filter: Filter, warnings: [Warning]) {
        let node = try ParseFixture.condition(condition)
        var lowering = Lowering(collection: "people", stats: stats)
        let filter = try lowering.filter(node)
        return (filter, lowering.warnings)
    }

    /// The description of the lowered condition; records an issue when it gives a warning.
    static func described(_ condition: String, sourceLocation: Testing.SourceLocation = #_sourceLocation) throws
        -> String {
        let (filter, warnings) = try lower(condition)
        #expect(warnings.isEmpty, "unexpected warnings: \(warnings.map(\.message))", sourceLocation: sourceLocation)
        return filter.description
    }

    /// The meaning error a condition gives, or nil when it lowers.
    static func meaningError(_ condition: String, stats: FieldStats = people) throws -> MeaningError? {
        do {
            _ = try lower(condition, stats: stats)
            return nil
        } catch let error as MeaningError {
            return error
        }
    }
}

@Suite struct LoweringTests {
    private func refusal(_ condition: String, stats: FieldStats = LoweringFixture.people,
                         sourceLocation: Testing.SourceLocation = #_sourceLocation) throws -> MeaningError {
        try #require(try LoweringFixture.meaningError(condition, stats: stats),
                     "expected \(condition.debugDescription) to be refused", sourceLocation: sourceLocation)
    }

    /// `?.` and `!` before a method lower exactly as the method alone.
    @Test func optionalChainingBeforeAMethodLowersAsTheMethod() throws {
        for method in [#"contains("n")"#, #"hasPrefix("A")"#, #"starts(with: "A")"#] {
            let plain = try LoweringFixture.described("name.\(method)")
            for written in ["name?.\(method)", "name?.\(method) == true", "name!.\(method)"] {
                #expect(try LoweringFixture.described(written) == plain, "\(written)")
            }
        }
        #expect(try LoweringFixture.described(#"tags?.contains("swift") ?? false"#)
                == LoweringFixture.described(#"tags.contains("swift")"#))
    }

    // MARK: Type checks

    @Test func orderingATrueFalseFieldIsAnError() throws {
        let error = try refusal("active < true")
        #expect(error.message.hasPrefix("'active' holds true/false values, which have no order"))
        #expect(error.location.column == 16)
        #expect(error.length == 6)
        #expect(try refusal("active >= false").message.contains("no order"))
        #expect(try refusal("true > active").message.contains("'active'"))
    }

    @Test func orderingAnyFieldAgainstTrueOrFalseIsAnError() throws {
        let error = try refusal("age < true")
        #expect(error.message.contains("no order"))
        // 'age' holds numbers: the message must not say it holds true/false values.
        #expect(!error.message.contains("'age' holds true/false values"), "\(error.message)")
    }

    @Test func stringComparedWithNumberFieldNamesTheFieldAndSuggestsTheNumber() throws {
        let error = try refusal("age == \"18\"")
        #expect(error.message == "'age' holds numbers, never strings, so this comparison could not match; write 18")
        #expect(error.location.column == 23)
        #expect(error.length == 4)
        let parseError = error.parseError
        #expect(parseError.location == error.location)
        #expect(parseError.length == 4)
        #expect(parseError.message == error.message)
        #expect(!parseError.isIncomplete)
    }

    @Test func nonNumericStringComparedWithNumberFieldHasNoHint() throws {
        let error = try refusal("age != \"old\"")
        #expect(error.message == "'age' holds numbers, never strings, so this comparison could not match")
    }

    @Test func stringComparedWithDateFieldSuggestsDateCall() throws {
        let error = try refusal("joined > \"2024-01-01\"")
        #expect(error.message.hasSuffix("; write date(\"2024-01-01\")"))
        #expect(error.message.hasPrefix("'joined' holds dates, never strings"))
    }

    @Test func nestedFieldIsNamedByItsWholePath() throws {
        let error = try refusal("address.city == 3")
        #expect(error.message.hasPrefix("'address.city' holds strings, never numbers"))
    }

    @Test func nilComparesOnlyForEquality() throws {
        #expect(try LoweringFixture.described("age == nil") == "age == null")
        #expect(try LoweringFixture.described("email != null") == "email != null")
        let error = try refusal("age < nil")
        #expect(error.message.hasPrefix("nil has no order"))
        #expect(error.location.column == 22)
        #expect(error.length == 3)
    }

    @Test func listsAndObjectsHaveNoOrder() throws {
        #expect(try refusal("tags > [\"a\"]").message.hasPrefix("lists and objects have no order"))
        #expect(try refusal("address <= {\"city\": \"Oslo\"}").message.hasPrefix("lists and objects have no order"))
        #expect(try LoweringFixture.described("address == {\"city\": \"Oslo\"}") == "address == {\"city\":\"Oslo\"}")
        #expect(try LoweringFixture.described("tags == [\"a\", 1]") == "tags == [\"a\",1]")
    }

    @Test func fieldHoldingSeveralKindsAcceptsEach() throws {
        #expect(try LoweringFixture.described("score == \"n/a\" || score < 3") == "score == \"n/a\" || score < 3")
        #expect(try refusal("score == true").message.hasPrefix("'score' holds numbers and strings, never true/false"))
    }

    @Test func nilIsLeftOutOfAFieldsKinds() throws {
        #expect(try LoweringFixture.described("email == \"x\"") == "email == \"x\"")
        #expect(try refusal("email == 3").message.hasPrefix("'email' holds strings, never numbers"))
        // A field that is only ever nil is known but has no kind to check against.
        #expect(try LoweringFixture.described("nick == 3 && nick.contains(\"x\")") == "nick == 3 && nick.contains(\"x\")")
    }

    @Test func integerAndFloatingPointAreBothNumbers() throws {
        #expect(try LoweringFixture.described("age > 17.5") == "age > 17.5")
        #expect(try LoweringFixture.described("score >= 2") == "score >= 2")
        #expect(try LoweringFixture.described("age < 2.0") == "age < 2.0")
        #expect(try LoweringFixture.described("age < 1e20") == "age < 1e+20")
    }

    // MARK: contains, hasPrefix, truth tests

    @Test func containsOnStringFieldIsATextSearch() throws {
        let (filter, warnings) = try LoweringFixture.lower("name.contains(\"x\")")
        #expect(warnings.isEmpty)
        #expect(filter == .containsText("name", "x"))
        #expect(filter != .contains("name", .string("x")))
        #expect(filter.description == "name.contains(\"x\")")
    }

    @Test func containsOnArrayFieldLooksForAnElement() throws {
        let (filter, warnings) = try LoweringFixture.lower("tags.contains(\"swift\")")
        #expect(warnings.isEmpty)
        #expect(filter == .contains("tags", .string("swift")))
        #expect(filter != .containsText("tags", "swift"))
        #expect(filter.description == "tags.contains(\"swift\")")
        #expect(try LoweringFixture.described("tags.contains(nil)") == "tags.contains(null)")
    }

    @Test func containsOnUnknownFieldLooksForAnElement() throws {
        let (filter, warnings) = try LoweringFixture.lower("labels.contains(\"x\")")
        #expect(filter == .contains("labels", .string("x")))
        #expect(warnings.count == 1)
    }

    @Test func arrayElementsOfOneKindNeverContainAnother() throws {
        let text = "people.include(tags.contains(3))"
        let error = try refusal("tags.contains(3)")
        #expect(error.message == "the arrays in 'tags' hold strings, so they never contain numbers")
        #expect(error.location.column == ParseFixture.column(of: "3", in: text))
    }

    @Test func containsOnStringFieldTakesAString() throws {
        let error = try refusal("name.contains(3)")
        #expect(error.message.hasPrefix("'name' holds strings: contains looks for text"))
        #expect(error.location.column == 30)
    }

    @Test func containsOnNumberFieldIsAnError() throws {
        let error = try refusal("age.contains(3)")
        #expect(error.message.hasPrefix("'age' holds numbers, not arrays or strings"))
        #expect(error.location.column == 16)
        #expect(error.length == 3)
    }

    @Test func hasPrefixLowersToStartsWith() throws {
        let (filter, _) = try LoweringFixture.lower("name.hasPrefix(\"A\")")
        #expect(filter == .hasPrefix("name", "A"))
        #expect(filter.description == "name.starts(with: \"A\")")
        #expect(try LoweringFixture.described("address.city.starts(with: \"O\")") == "address.city.starts(with: \"O\")")
        #expect(try refusal("age.hasPrefix(\"1\")").message.hasPrefix("'age' holds numbers, not strings"))
    }

    @Test func fieldAloneIsComparedWithTrue() throws {
        let (filter, _) = try LoweringFixture.lower("active")
        #expect(filter == .compare("active", .equal, .bool(true)))
        #expect(filter.description == "active == true")
        let error = try refusal("name")
        #expect(error.message.hasPrefix("'name' holds strings, not true/false values"))
        #expect(error.location.column == 16)
    }

    // MARK: Unknown fields

    @Test func unknownFieldWarnsWithASuggestion() throws {
        let (filter, warnings) = try LoweringFixture.lower("agee > 3")
        #expect(filter.description == "agee > 3")
        let warning = try #require(warnings.first)
        #expect(warnings.count == 1)
        #expect(warning.message == "no document of 'people' has a field 'agee'; it is nil everywhere")
        #expect(warning.suggestion == "'age'")
        #expect(warning.location.column == 16)
        #expect(warning.length == 4)
    }

    @Test func unknownNestedFieldSuggestsTheWholePath() throws {
        let (_, warnings) = try LoweringFixture.lower("addres.city == \"Oslo\"")
        #expect(warnings.first?.suggestion == "'address.city'")
        #expect(warnings.first?.length == "addres.city".count)
    }

    @Test func unknownFieldFarFromEveryNameHasNoSuggestion() throws {
        let (_, warnings) = try LoweringFixture.lower("zzzzzz == 1 || qqqqqq")
        #expect(warnings.count == 2)
        #expect(warnings.allSatisfy { $0.suggestion == nil })
    }

    @Test func unknownFieldInASampleSaysHowManyDocumentsWereRead() throws {
        var stats = LoweringFixture.people
        stats.total = 50_000
        let (_, warnings) = try LoweringFixture.lower("agee > 3", stats: stats)
        #expect(warnings.first?.message.contains("(in the 2 documents looked at)") == true)
    }

    @Test func emptyCollectionGivesNoWarningAndNoCheck() throws {
        let (filter, warnings) = try LoweringFixture.lower("age == \"18\" && name.contains(3)", stats: FieldStats())
        #expect(warnings.isEmpty)
        #expect(filter.description == "age == \"18\" && name.contains(3)")
    }

    // MARK: Aggregates

    /// The warnings `people.<aggregate>` gives.
    private func aggregateWarnings(_ written: String, stats: FieldStats = LoweringFixture.people) throws -> [Warning] {
        guard case .aggregate(let call)? = try ParseFixture.steps("people.\(written)").first else {
            Issue.record("not an aggregate: \(written)")
            return []
        }
        var lowering = Lowering(collection: "people", stats: stats)
        lowering.aggregated(call)
        return lowering.warnings
    }

    @Test func anAggregateOfAFieldNoDocumentHasIsAWarningNotAnError() throws {
        let warnings = try aggregateWarnings("sum(scor)")
        #expect(warnings.map(\.message) == ["no document of 'people' has a field 'scor'; it is nil everywhere"])
        #expect(warnings.first?.suggestion == "'score'")
        #expect(warnings.first?.location.column == 12)
    }

    @Test func aSumOrAverageOfAFieldWithoutNumbersWarns() throws {
        #expect(try aggregateWarnings("sum(name)").map(\.message)
            == ["'name' holds strings, not numbers: sum reads numbers and skips every other value"])
        #expect(try aggregateWarnings("average(active)").first?.message.hasPrefix("'active' holds true/false values") == true)
        var sampled = LoweringFixture.people
        sampled.total = 50_000
        #expect(try aggregateWarnings("sum(name)", stats: sampled).first?.message.contains("(in the 2 documents looked at)")
            == true)
        // Numbers among other values, min and max of anything: no warning.
        #expect(try aggregateWarnings("sum(score)").isEmpty)
        #expect(try aggregateWarnings("average(age)").isEmpty)
        #expect(try aggregateWarnings("min(name)").isEmpty)
        #expect(try aggregateWarnings("max(tags)").isEmpty)
    }

    @Test func knownReportsTheKindsWithoutNil() throws {
        var lowering = Lowering(collection: "people", stats: LoweringFixture.people)
        let email = PathReference(path: "email", location: .init(offset: 0, line: 1, column: 1), length: 5)
        let missing = PathReference(path: "mail", location: .init(offset: 0, line: 1, column: 1), length: 4)
        #expect(lowering.known(email) == [.string])
        #expect(lowering.known(missing).isEmpty)
        #expect(lowering.warnings.count == 1)
        #expect(lowering.warnings.first?.suggestion == "'email'")
    }

    // MARK: Ranges and lists

    @Test func halfOpenRangeLowersToGreaterOrEqualAndLess() throws {
        let (filter, _) = try LoweringFixture.lower("age in 18..<30")
        #expect(filter == .and([.compare("age", .greaterOrEqual, .int(18)), .compare("age", .less, .int(30))]))
        #expect(filter.description == "age >= 18 && age < 30")
    }

    @Test func closedRangeLowersToGreaterOrEqualAndLessOrEqual() throws {
        #expect(try LoweringFixture.described("age in 18...30") == "age >= 18 && age <= 30")
        #expect(try LoweringFixture.described("name in \"A\"..<\"M\"") == "name >= \"A\" && name < \"M\"")
        #expect(try LoweringFixture.described("joined in date(\"2023-01-01\")..<date(\"2024-01-01\")")
            == "joined >= date(\"2023-01-01T00:00:00.000Z\") && joined < date(\"2024-01-01T00:00:00.000Z\")")
    }

    @Test func rangeBoundsAreCheckedAgainstTheField() throws {
        let error = try refusal("age in \"a\"..<\"b\"")
        #expect(error.message.hasPrefix("'age' holds numbers, never strings"))
        #expect(error.location.column == 23)
        let bool = try refusal("age in true...false")
        #expect(bool.message == "a range's bounds are numbers, strings or dates")
        #expect(try refusal("age in 1...nil").message == "a range's bounds are numbers, strings or dates")
    }

    @Test func listMembershipLowersToOneOf() throws {
        let (filter, _) = try LoweringFixture.lower("address.city in [\"Oslo\", \"Bergen\"]")
        #expect(filter == .oneOf("address.city", [.string("Oslo"), .string("Bergen")]))
        #expect(filter.description == "[\"Oslo\", \"Bergen\"].contains(address.city)")
        #expect(try LoweringFixture.described("[1, 2, nil].contains(age)") == "[1, 2, null].contains(age)")
        #expect(try refusal("age in [1, \"x\"]").message.hasPrefix("'age' holds numbers, never strings"))
    }

    // MARK: Combinations

    @Test func combinationsKeepTheirGrouping() throws {
        #expect(try LoweringFixture.described("age >= 18 && (name == \"Ann\" || !active)")
            == "age >= 18 && (name == \"Ann\" || !(active == true))")
        #expect(try LoweringFixture.described("age > 3 || name == \"x\" && active")
            == "age > 3 || (name == \"x\" && active == true)")
        #expect(try LoweringFixture.described("!(age > 3 || tags.contains(\"x\"))")
            == "!(age > 3 || tags.contains(\"x\"))")
        #expect(try LoweringFixture.described("!tags.contains(\"x\")") == "!tags.contains(\"x\")")
    }

    @Test func constantsFoldAway() throws {
        #expect(try LoweringFixture.described("true && age > 3") == "age > 3")
        #expect(try LoweringFixture.described("false || active") == "active == true")
        #expect(try LoweringFixture.described("!(true)") == "false")
        #expect(try LoweringFixture.described("!!active") == "active == true")
        #expect(try LoweringFixture.described("age > 3 || true") == "true")
        #expect(try LoweringFixture.described("") == "true")
    }

    @Test func firstTypeErrorInAConjunctionIsReported() throws {
        let error = try refusal("age > 3 && name == 4 && active < true")
        #expect(error.message.hasPrefix("'name' holds strings"))
    }
}

/// The shell reads the computed forms a `#Predicate` can hold, with Swift's precedence, and refuses those that make
/// no sense for the values the fields hold.
@Suite struct ComputedConditionTests {
    @Test func computedFormsParseWithSwiftsPrecedence() throws {
        #expect(try ParseFixture.sketch("age ?? 0 > 10") == "(age ?? 0) > 10")
        #expect(try ParseFixture.sketch("age * 2 + 1 > score") == "((age * 2) + 1) > score")
        #expect(try ParseFixture.sketch("age - 1 - 2 >= 3") == "((age - 1) - 2) >= 3")
        #expect(try ParseFixture.sketch("nick ?? name ?? \"x\" == \"Bo\"") == "(nick ?? (name ?? \"x\")) == \"Bo\"")
        #expect(try ParseFixture.sketch("(age ?? 0) > 10 && active") == "((age ?? 0) > 10 && active?)")
        #expect(try ParseFixture.sketch("(age > 3 || active)") == "(age > 3 || active?)")
        #expect(try ParseFixture.sketch("-age < -3") == "-age < -3")
        #expect(try ParseFixture.sketch("nick?.count ?? 0 > 2") == "(nick?.count ?? 0) > 2")
        #expect(try ParseFixture.sketch("age > score") == "age > score")
        #expect(try ParseFixture.sketch("age > 3 ? active : age < 2") == "(age > 3 ? active? : age < 2)")
        // The simple forms keep their nodes.
        #expect(try ParseFixture.sketch("18 <= age") == "age >= 18")
        #expect(try ParseFixture.sketch("age > -5") == "age > -5")
    }

    /// A mistake after a parenthesised value is placed where the value reading stopped, not at the value's start,
    /// and an open parenthesis at the end of a line asks for the next one.
    @Test func aMistakeAfterAParenthesisedValueIsPlacedWhereItIs() throws {
        let text = "people.include((depDelay ?? 0) > )"
        let error = try #require(ParseFixture.failure(text))
        #expect(error.location.column == text.count, "\(error)")
        #expect(!error.isIncomplete)
        let unfinished = try #require(ParseFixture.failure("people.include((depDelay ?? 0) >"))
        #expect(unfinished.isIncomplete, "\(unfinished)")
        // A parenthesised condition still reads as one, and its own mistakes are placed in it.
        let condition = "people.include((age > 3 || active) && name ==)"
        let inCondition = try #require(ParseFixture.failure(condition))
        #expect(inCondition.location.column == condition.count, "\(inCondition)")
    }

    @Test func computedFormsLowerToTheLibrarysFilters() throws {
        #expect(try LoweringFixture.described("age ?? 0 > 10") == "age > 10")
        #expect(try LoweringFixture.described("age ?? 20 > 10") == "age == null || age > 10")
        #expect(try LoweringFixture.described("age ?? 0 != 10") == "age == null || age != 10")
        #expect(try LoweringFixture.described("age ?? 10 != 10") == "age != null && age != 10")
        #expect(try LoweringFixture.described("age * 2 > 10") == "(age * 2) > 10")
        #expect(try LoweringFixture.described("age > 2 * 5") == "age > 10")
        #expect(try LoweringFixture.described("tags.count > 1") == "tags.count > 1")
        #expect(try LoweringFixture.described("age > 3 ? active : age < 2")
            == "(age > 3 && active == true) || (!(age > 3) && age < 2)")
    }

    @Test func longChainsOfOperatorsAreRefusedNotCrashed() throws {
        let sum = "people.include(" + String(repeating: "age + ", count: 3_000) + "age > 5).count()"
        #expect(ParseFixture.failure(sum)?.message.contains("nests more than") == true)
        let counts = "people.include(name" + String(repeating: "?.count", count: 5_000) + " > 5).count()"
        #expect(ParseFixture.failure(counts)?.message.contains("nests more than") == true)
    }

    @Test func computedFormsThatMakeNoSenseAreRefused() throws {
        #expect(try LoweringFixture.meaningError("name * 2 > 3")?.message.contains("not numbers") == true)
        #expect(try LoweringFixture.meaningError("age + \"x\" > 3")?.message.contains("works on numbers") == true)
        #expect(try LoweringFixture.meaningError("age?.count > 3")?.message.contains("not strings or arrays") == true)
        #expect(try LoweringFixture.meaningError("age ?? nil > 3") == nil)
        #expect(try LoweringFixture.meaningError("age + 1 > nil")?.message.contains("no order") == true)
    }
}
