import DocStore
import Foundation
import Testing
@testable import repl

/// The steps that compute from a query's matches (aggregates, distinct values, groups, projections) and `update`:
/// how they parse, what may follow them, and the errors for what is written wrong.
@Suite struct ParserAggregateTests {
    /// The error `text` gives; records an issue (and fails the `#require`) when it parses.
    private func failure(_ text: String, sourceLocation: Testing.SourceLocation = #_sourceLocation) throws -> ParseError {
        try #require(ParseFixture.failure(text), "expected \(text.debugDescription) to fail", sourceLocation: sourceLocation)
    }

    /// The changes of the update `text` ends in.
    private func changes(_ text: String, sourceLocation: Testing.SourceLocation = #_sourceLocation) throws
        -> [FieldChange] {
        let steps = try ParseFixture.steps(text)
        guard case .update(let changes)? = steps.last else {
            Issue.record("not an update: \(steps)", sourceLocation: sourceLocation)
            return []
        }
        return changes
    }

    // MARK: Aggregates of the matches

    @Test(arguments: [("sum", AggregateCall.Function.sum), ("average", .average), ("min", .min), ("max", .max)])
    func anAggregateTakesOneFieldAndRemembersWhereItIs(word: String, function: AggregateCall.Function) throws {
        let text = #"people.include(city == "Oslo").\#(word)(address.zip)"#
        let steps = try ParseFixture.steps(text)
        #expect(steps.count == 2)
        guard case .aggregate(let call) = steps[1] else {
            Issue.record("expected an aggregate, got \(steps[1])")
            return
        }
        #expect(call.function == function)
        #expect(call.path?.path == FieldPath("address.zip"))
        #expect(call.path?.location.column == ParseFixture.column(of: "address", in: text))
        #expect(call.path?.length == "address.zip".count)
        #expect(call.written == "\(word)(address.zip)")
        #expect(steps[1].isTerminal)
    }

    @Test func anAggregateNamesItsColumnAsTheLanguageWritesIt() throws {
        guard case .aggregate(let call)? = try ParseFixture.steps("penguins.sum(`Body Mass (g)`)").first else {
            Issue.record("expected an aggregate")
            return
        }
        #expect(call.written == "sum(`Body Mass (g)`)")
        #expect(call.aggregate == .sum(FieldPath(components: ["Body Mass (g)"])))
        #expect(AggregateCall(function: .count).written == "count()")
        #expect(AggregateCall(function: .count).aggregate == .count)
    }

    @Test func aKeyPathIsAFieldToo() throws {
        let text = #"people.max(\.age)"#
        guard case .aggregate(let call)? = try ParseFixture.steps(text).first else {
            Issue.record("expected an aggregate")
            return
        }
        #expect(call.path?.path == FieldPath("age"))
        #expect(call.path?.location.column == ParseFixture.column(of: "age", in: text))
    }

    @Test func distinctTakesOneField() throws {
        let steps = try ParseFixture.steps("people.sortBy(age)[0..<10].distinct(city)")
        #expect(steps.count == 3)
        guard case .distinct(let path) = steps[2] else {
            Issue.record("expected distinct, got \(steps[2])")
            return
        }
        #expect(path.path == FieldPath("city"))
        #expect(path.location.column == 37)
    }

    @Test(arguments: ["people.sum(score).explain()", "people.average(age).explain()", "people.min(age).explain()",
                      "people.max(age).explain()", "people.count().explain()"])
    func explainMayFollowAnAggregate(text: String) throws {
        let steps = try ParseFixture.steps(text)
        #expect(steps.count == 2 && steps[1] == .explain, "\(steps)")
    }

    // MARK: Groups

    @Test func groupByTakesFieldsAndItsAggregate() throws {
        let text = "people.groupBy(city, address.zip).average(age)"
        let steps = try ParseFixture.steps(text)
        guard steps.count == 1, case .groupBy(let paths, let call) = steps[0] else {
            Issue.record("expected one groupBy, got \(steps)")
            return
        }
        #expect(paths.map(\.path) == [FieldPath("city"), FieldPath("address.zip")])
        #expect(paths[1].location.column == ParseFixture.column(of: "address", in: text))
        #expect(call.function == .average && call.path?.path == FieldPath("age"))
        #expect(Parser.name(of: steps[0]) == "groupBy(city, address.zip).average(age)")
    }

    @Test(arguments: [("count()", AggregateCall.Function.count), ("count", .count), ("sum(score)", .sum),
                      ("average(score)", .average), ("min(score)", .min), ("max(score)", .max)])
    func everyAggregateFollowsGroupBy(written: String, function: AggregateCall.Function) throws {
        let steps = try ParseFixture.steps("people.groupBy(city).\(written)")
        guard case .groupBy(_, let call)? = steps.first else {
            Issue.record("expected groupBy, got \(steps)")
            return
        }
        #expect(call.function == function)
        #expect((call.path == nil) == (function == .count))
    }

    @Test func groupsAreSortedByKeyOrValueSlicedAndEnded() throws {
        let steps = try ParseFixture.steps("people.groupBy(city).count().sortBy(value, .reverse)[0..<10]")
        #expect(Array(steps.dropFirst()) == [.sortGroups(.value, .reverse), .slice(0..<10)])
        #expect(try ParseFixture.steps("people.groupBy(city).count().sortBy(.key, order: .reverse)").last
            == .sortGroups(.key, .reverse))
        #expect(try ParseFixture.steps("people.groupBy(city).count().sortBy(value)").last == .sortGroups(.value, .forward))
        for (end, step) in [("results()", Step.results), ("first", .first), ("count()", .count), ("explain()", .explain)] {
            #expect(try ParseFixture.steps("people.groupBy(city).sum(score)[0..<3].\(end)").last == step, "\(end)")
        }
    }

    @Test func theStepsBeforeGroupByRefineTheDocuments() throws {
        let steps = try ParseFixture.steps("people.include(age > 3).sortBy(age)[0..<100].groupBy(city).count()[1..<2]")
        #expect(steps.count == 5)
        #expect(steps[2] == .slice(0..<100))
        #expect(steps[4] == .slice(1..<2))
    }

    // MARK: Projections

    @Test func selectTakesFieldsAndMayEndInResultsOrFirst() throws {
        let steps = try ParseFixture.steps("people.include(age > 90).sortBy(age).select(name, address.city)")
        guard case .select(let paths)? = steps.last else {
            Issue.record("expected select, got \(steps)")
            return
        }
        #expect(paths.map(\.path) == [FieldPath("name"), FieldPath("address.city")])
        #expect(try ParseFixture.steps("people.select(name).results()").last == .results)
        #expect(try ParseFixture.steps("people.select(name).first").last == .first)
    }

    // MARK: Updates

    @Test func updateTakesItsLabelsInAnyOrderAndKeepsTheLibrarysOrder() throws {
        let changes = try changes(#"people.include(city == "Oslo").update(pull: {"tags": "y"}, "#
            + #"set: {"city": "Bergen", "n": nil}, inc: {"age": 1, "score": -0.5}, unset: ["email"], push: {"tags": "x"})"#)
        #expect(changes == [
            .set("city", .string("Bergen")), .set("n", .null), .unset("email"),
            .increment("age", .int(1)), .increment("score", .double(-0.5)),
            .push("tags", .string("x")), .pull("tags", .string("y")),
        ])
    }

    @Test func incrementIsIncAsTheLibraryNamesIt() throws {
        #expect(try changes(#"people.update(increment: {"age": 2})"#) == [.increment("age", .int(2))])
    }

    @Test func fieldsAreNamedByStringsOrWrittenAsPaths() throws {
        let changes = try changes(#"people.update(set: {"address.city": "Oslo", "`U.S. price`": 3, zip: "0150"}, "#
            + #"unset: [email, "a.b", address.street])"#)
        #expect(changes == [
            .set(FieldPath(components: ["address", "city"]), .string("Oslo")),
            .set(FieldPath(components: ["U.S. price"]), .int(3)),
            .set("zip", .string("0150")),
            .unset("email"), .unset(FieldPath(components: ["a", "b"])), .unset(FieldPath("address.street")),
        ])
    }

    @Test func valuesAreTheLanguagesLiterals() throws {
        let changes = try changes(#"people.update(push: {"log": {"at": date("2024-05-01"), "n": [1, true]}}, "#
            + #"pull: {"tags": nil})"#)
        #expect(changes.count == 2)
        guard case .push(_, let value) = changes[0] else {
            Issue.record("expected a push, got \(changes)")
            return
        }
        #expect(value == .object([("at", .date(Parser.date("2024-05-01")!)), ("n", .array([.int(1), .bool(true)]))]))
        #expect(changes[1] == .pull("tags", .null))
    }

    @Test func updateEndsTheQueryAndIsAChange() throws {
        let steps = try ParseFixture.steps(#"people.update(set: {"a": 1},)"#)
        #expect(steps.last?.isChange == true && steps.last?.isTerminal == true)
        #expect(steps.last?.refusal(on: "people") == "update documents of 'people'")
        #expect(try failure(#"people.update(set: {"a": 1}).count()"#).message
            == "nothing can follow update(...), which runs the query")
    }

    // MARK: Errors

    @Test func groupByWithoutItsAggregateSaysWhatFollowsIt() throws {
        let text = "people.groupBy(city)"
        let alone = try failure(text)
        #expect(alone.message.hasPrefix("groupBy(...) is followed by the aggregate of each group: count(), sum(FIELD)"))
        #expect(alone.location.offset == text.count && !alone.isIncomplete)
        let misspelled = try failure("people.groupBy(city).cout()")
        #expect(misspelled.suggestion == "'count'")
        #expect(misspelled.location.column == 22 && misspelled.length == 4)
        let other = try failure("people.groupBy(city).include(age > 3)")
        #expect(other.message.hasSuffix("found 'include'"), "\(other.message)")
        #expect(try failure("people.groupBy().count()").message == "groupBy takes one field or more, as in groupBy(city)")
        #expect(try failure("people.groupBy(city age).count()").message
            == "expected ')' or ',' and another field in groupBy(, found 'age'")
    }

    @Test func aStepThatRefinesTheDocumentsComesBeforeGroupBy() throws {
        let text = "people.groupBy(city).count().include(age > 3)"
        let error = try failure(text)
        #expect(error.message.hasPrefix("include(...) refines the documents, so it comes before groupBy(...)"))
        #expect(error.location.column == ParseFixture.column(of: "include", in: text))
        let reverse = try failure("people.groupBy(city).count().reverse()")
        #expect(reverse.message.contains("sortBy(key, .reverse) puts the groups last first"), "\(reverse.message)")
        let unknown = try failure("people.groupBy(city).count().resuls()")
        #expect(unknown.message.hasPrefix("groups go on with sortBy(value[, .reverse]) or sortBy(key[, .reverse])"))
        #expect(unknown.suggestion == "'results'")
        let last = try failure("people.groupBy(city).count().last")
        #expect(last.message.hasSuffix("not 'last'"), "\(last.message)")
    }

    @Test func groupsAreSortedByKeyOrValueOnly() throws {
        let text = "people.groupBy(city).count().sortBy(values, .reverse)"
        let error = try failure(text)
        #expect(error.message.hasPrefix("groups are sorted by key (the values grouped by) or value (the aggregate)"))
        #expect(error.suggestion == "'value'")
        #expect(error.location.column == ParseFixture.column(of: "values", in: text))
        #expect(try failure("people.groupBy(city).count().sortBy(value, .backwards)").suggestion == nil)
    }

    @Test func onlyResultsOrFirstFollowSelect() throws {
        let sorted = try failure("people.select(name).sortBy(age)")
        #expect(sorted.message.hasPrefix("sortBy(...) refines the documents, so it comes before select(...)"))
        #expect(sorted.location.column == 21)
        let sliced = try failure("people.select(name)[0..<3]")
        #expect(sliced.message.hasPrefix("a slice refines the documents, so it comes before select(...)"))
        #expect(sliced.location.column == 20)
        let counted = try failure("people.select(name).count()")
        #expect(counted.message.hasPrefix("only results() or first can follow select(...)"))
        #expect(try failure("people.select(name).fist").suggestion == "'first'")
        #expect(try failure("people.select()").message == "select takes one field or more, as in select(city)")
    }

    @Test func nothingButExplainFollowsAnAggregate() throws {
        let error = try failure("people.sum(score).first")
        #expect(error.message == "nothing but explain() can follow sum(score), which runs the query")
        #expect(error.location.column == 18)
        #expect(try failure("people.count().sortBy(x)").message
            == "nothing but explain() can follow count(), which runs the query")
        #expect(try failure("people.max(age).explain().first").message
            == "nothing can follow explain(), which runs the query")
    }

    @Test func distinctIsCountedOrExplainedAndNothingElseFollowsIt() throws {
        #expect(try failure("people.distinct(city).first").message
            == "only count() (how many values) or explain() can follow distinct(city), which runs the query")
        #expect(try ParseFixture.steps("people.distinct(city).count()").last == .count)
        #expect(try ParseFixture.steps("people.distinct(city).explain()").last == .explain)
        #expect(try failure("people.distinct(city).count().first").message
            == "nothing can follow count(), which runs the query")
    }

    @Test func anAggregateNeedsExactlyOneField() throws {
        let none = try failure("people.sum()")
        #expect(none.message == "sum takes the field it reads, as in sum(age)")
        #expect(none.location.column == 12)
        let two = try failure("people.average(age, score)")
        #expect(two.message == "expected ')' to close average(: it takes one field, found ','")
        #expect(try failure("people.min").message.hasPrefix("expected '(' after min, as in min(age)"))
        #expect(try failure("people.distinct(1)").message == "expected a field name, found 1")
    }

    @Test(arguments: [("grupBy", "'groupBy'"), ("selct", "'select'"), ("distnct", "'distinct'"), ("updte", "'update'"),
                      ("avrage", "'average'"), ("summ", "'sum'")])
    func misspelledNewStepSuggestsItsWord(written: String, suggestion: String) throws {
        let error = try failure("people.\(written)(x)")
        #expect(error.message.hasPrefix("unknown step '\(written)'"))
        #expect(error.message.contains("groupBy, select, update"))
        #expect(error.suggestion == suggestion)
    }

    @Test func unknownLabelOfUpdateSuggestsTheClosest() throws {
        let text = #"people.update(sett: {"a": 1})"#
        let error = try failure(text)
        #expect(error.message
            == "unknown label 'sett:' of update; it takes set:, unset:, inc: (or increment:), push: and pull:")
        #expect(error.suggestion == "'set:'")
        #expect(error.location.column == 15 && error.length == 4)
        #expect(try failure(#"people.update(incr: {"a": 1})"#).suggestion == "'inc:'")
        #expect(try failure(#"people.update(remove: ["a"])"#).suggestion == nil)
    }

    @Test func incTakesNumbersAndPointsAtTheOneThatIsNot() throws {
        let text = #"people.update(inc: {"age": 1, "score": "2"})"#
        let error = try failure(text)
        #expect(error.message == #"inc: adds numbers to fields, and "2" is not a number"#)
        #expect(error.location.column == ParseFixture.column(of: #""2""#, in: text))
        #expect(error.length == 3)
        #expect(try failure(#"people.update(increment: {"age": nil})"#).message
            == "increment: adds numbers to fields, and nil is not a number")
    }

    @Test func unsetTakesAListOfFieldNames() throws {
        let text = #"people.update(unset: "email")"#
        let error = try failure(text)
        #expect(error.message == #"unset: takes a list of field names, as in unset: ["email"]; found "email""#)
        #expect(error.location.column == ParseFixture.column(of: #""email""#, in: text))
        let number = try failure(#"people.update(unset: ["email", 3])"#)
        #expect(number.message.hasPrefix("expected the name of a field in unset: [...]"))
        #expect(number.message.hasSuffix("found 3"))
        #expect(number.location.column == 32)
    }

    @Test func setPushAndPullTakeAnObject() throws {
        let error = try failure(#"people.update(set: ["city", "Oslo"])"#)
        #expect(error.message.hasPrefix(#"set: takes an object of fields and values, as in set: {"score": 1}; found '['"#))
        #expect(error.location.column == 20)
        #expect(try failure(#"people.update(push: 3)"#).message.hasPrefix("push: takes an object of fields and values"))
    }

    @Test func aLabelOrAFieldGivenTwiceIsAnError() throws {
        let text = #"people.update(set: {"a": 1}, inc: {"b": 1}, set: {"c": 2})"#
        let twice = try failure(text)
        #expect(twice.message == "set: is given twice in this update; put all its fields in one {...}")
        #expect(twice.location.column == 45)
        #expect(try failure(#"people.update(inc: {"a": 1}, increment: {"b": 1})"#).message
            .hasPrefix("increment: is given twice"))
        let field = try failure(#"people.update(set: {"a": 1, "a": 2})"#)
        #expect(field.message == #"the field "a" appears twice in set:"#)
        #expect(field.location.column == 29)
    }

    @Test func updateNeedsLabelledChanges() throws {
        #expect(try failure("people.update()").message.hasPrefix("update takes the changes to make, as in update(set:"))
        let positional = try failure(#"people.update({"city": "Oslo"})"#)
        #expect(positional.message.hasPrefix("update takes labelled changes (set:, unset:, inc:, push:, pull:)"))
        #expect(positional.location.column == 15)
        let empty = try failure(#"people.update(set: {}, unset: [])"#)
        #expect(empty.message == "this update changes nothing: its lists of changes are empty")
        #expect(empty.location.column == 8 && empty.length == 6)
        let unclosed = try failure(#"people.update(set: {"a": 1} inc: {"b": 1})"#)
        #expect(unclosed.message == "expected ')' or ',' and another label to close update(, found 'inc'")
    }

    @Test(arguments: [#"people.update(set: {"a": 1}"#, #"people.update(set: {"a": "#, "people.groupBy(city, ",
                      "people.select(name", "people.sum("])
    func anOpenBracketAtTheEndIsIncomplete(text: String) throws {
        let error = try failure(text)
        #expect(error.isIncomplete, "\(error)")
    }

    @Test(arguments: ["people.sum(score)", "people.distinct(city)", "people.groupBy(city).count()",
                      "people.select(name)", #"people.update(set: {"a": 1})"#])
    func aSavedFilterHoldsNoneOfThem(text: String) throws {
        #expect(throws: ParseError.self) { try Parser.savedQuery(text) }
        do {
            _ = try Parser.savedQuery(text)
        } catch {
            #expect(error.message.hasPrefix("a saved filter cannot end in"), "\(error)")
        }
    }
}
