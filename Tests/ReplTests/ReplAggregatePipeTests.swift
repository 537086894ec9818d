// Aggregates, distinct values, groups, projections and updates through the real shell and a real store: each word
// in more than one output mode, its answer compared with what the documents inserted give when computed here.

import DocStore
import Foundation
import Testing
@testable import repl

/// People whose fields make every kind of answer: uneven cities (and some without one), scores with and without a
/// fraction (and some missing), a true/false field, a list.
private struct Person {
    var id: Int
    var name: String
    var age: Int
    var city: String?
    var score: Double?
    var active: Bool
    var tags: [String]

    static let all: [Person] = (1...24).map { i in
        Person(id: i, name: "P\(i)", age: 10 + (i * 37) % 70,
               city: ["Oslo", "Bergen", "Oslo", "Tromsø", nil, "Oslo", "Bergen"][i % 7],
               score: i % 5 == 0 ? nil : Double(i) * 1.5, active: i % 3 == 0, tags: ["t\(i % 3)"])
    }

    /// The document as the shell inserts it: a missing city or score is left out.
    var document: DocumentValue {
        var fields: [(String, DocumentValue)] = [("id", .int(Int64(id))), ("name", .string(name)), ("age", .int(Int64(age)))]
        if let city { fields.append(("city", .string(city))) }
        if let score { fields.append(("score", .double(score))) }
        fields.append(("active", .bool(active)))
        fields.append(("tags", .array(tags.map { .string($0) })))
        return .object(fields)
    }

    static var insert: String { "people.insert([" + all.map { $0.document.json() }.joined(separator: ", ") + "])" }
}

/// What the library's sum gives for some numbers: an integer while they are all whole, else a `Double`.
private func sum(_ numbers: [Double]) -> DocumentValue {
    let total = numbers.reduce(0, +)
    return numbers.allSatisfy { $0.rounded() == $0 } ? .int(Int64(total)) : .double(total)
}

private func average(_ numbers: [Int]) -> DocumentValue {
    numbers.isEmpty ? .null : .double(Double(numbers.reduce(0, +)) / Double(numbers.count))
}

/// A city as a group's key orders: nil first, then by name.
private func cityOrder(_ a: String?, _ b: String?) -> Bool {
    switch (a, b) {
    case (nil, nil): return false
    case (nil, _): return true
    case (_, nil): return false
    case let (a?, b?): return a < b
    }
}

private func value(_ city: String?) -> DocumentValue { city.map { .string($0) } ?? .null }

/// The JSON value the shell prints for `value`, parsed, for comparing with what it printed.
private func parsed(_ value: DocumentValue) throws -> NSObject {
    try JSONSerialization.jsonObject(with: Data(value.json().utf8), options: .fragmentsAllowed) as! NSObject
}

extension ShellSessions {
@Suite struct ReplAggregatePipeTests {
    /// A store of ``Person/all``.
    private func store() throws -> ShellSandbox {
        let sandbox = try ShellSandbox()
        try sandbox.prepare([Person.insert])
        return sandbox
    }

    /// What `statement` prints in `mode`; requires it to succeed without a word on stderr.
    private func output(_ sandbox: ShellSandbox, _ mode: String, _ statement: String,
                        sourceLocation: Testing.SourceLocation = #_sourceLocation) throws -> String {
        let result = try sandbox.run([sandbox.storePath, ".mode \(mode)", statement])
        try #require(result.status == 0 && result.stderr.isEmpty, "\(statement): \(result)", sourceLocation: sourceLocation)
        return result.stdout
    }

    /// The rows `statement` prints in JSON mode, parsed.
    private func rows(_ sandbox: ShellSandbox, _ statement: String,
                      sourceLocation: Testing.SourceLocation = #_sourceLocation) throws -> [NSDictionary] {
        let text = try output(sandbox, "json", statement, sourceLocation: sourceLocation)
        return try #require(try JSONSerialization.jsonObject(with: Data(text.utf8)) as? [NSDictionary],
                            "not a list of rows: \(text)", sourceLocation: sourceLocation)
    }

    /// Checks what `statement` prints in JSON and in a table against `expected` rows (as the shell lays rows out).
    private func check(_ sandbox: ShellSandbox, _ statement: String, _ expected: [DocumentValue], counting noun: String,
                       sourceLocation: Testing.SourceLocation = #_sourceLocation) throws {
        let json = try rows(sandbox, statement, sourceLocation: sourceLocation)
        #expect(json == (try expected.map { try parsed($0) as! NSDictionary }), "\(statement)", sourceLocation: sourceLocation)
        let table = try output(sandbox, "table", statement, sourceLocation: sourceLocation)
        #expect(table == (try Renderer(mode: .table).render(expected, counting: noun)), "\(statement)",
                sourceLocation: sourceLocation)
    }

    /// Checks what a single aggregate prints in every mode against `expected`.
    private func checkValue(_ sandbox: ShellSandbox, _ statement: String, column: String, _ expected: DocumentValue,
                            sourceLocation: Testing.SourceLocation = #_sourceLocation) throws {
        let json = try output(sandbox, "json", statement, sourceLocation: sourceLocation)
        let object = try JSONSerialization.jsonObject(with: Data(json.utf8)) as? NSDictionary
        #expect(object == [column: try parsed(expected)], "\(statement): \(json)", sourceLocation: sourceLocation)
        let cell = Renderer.cell(expected)
        let line = String(repeating: "-", count: max(column.count, cell.count) + 2)
        func padded(_ s: String) -> String { s + String(repeating: " ", count: max(column.count, cell.count) - s.count) }
        #expect(try output(sandbox, "table", statement, sourceLocation: sourceLocation)
                == "+\(line)+\n| \(padded(column)) |\n+\(line)+\n| \(padded(cell)) |\n+\(line)+\n",
                "\(statement)", sourceLocation: sourceLocation)
        #expect(try output(sandbox, "line", statement, sourceLocation: sourceLocation) == "\(column) = \(cell)\n",
                sourceLocation: sourceLocation)
        let csv = expected == .null ? "" : (expected.doubleValue.map { CSV.plain($0) } ?? cell)
        #expect(try output(sandbox, "csv", statement, sourceLocation: sourceLocation) == "\(column)\r\n\(csv)\r\n",
                sourceLocation: sourceLocation)
    }

    // MARK: One value

    @Test func sumAverageMinAndMaxAreOneValueInEveryMode() throws {
        let sandbox = try store()
        let people = Person.all
        let oslo = people.filter { $0.city == "Oslo" }
        try checkValue(sandbox, "people.sum(score)", column: "sum(score)", sum(people.compactMap(\.score)))
        try checkValue(sandbox, #"people.include(city == "Oslo").average(age)"#, column: "average(age)",
                       average(oslo.map(\.age)))
        try checkValue(sandbox, "people.min(age)", column: "min(age)", .int(Int64(people.map(\.age).min()!)))
        try checkValue(sandbox, "people.max(age)", column: "max(age)", .int(Int64(people.map(\.age).max()!)))
        // Over a slice: the first ten by age.
        let youngest = people.sorted { ($0.age, $0.id) < ($1.age, $1.id) }.prefix(10)
        try checkValue(sandbox, "people.sortBy(age)[0..<10].sum(score)", column: "sum(score)",
                       sum(youngest.compactMap(\.score)))
        // Over nothing: 0 and nil; a field no document has is skipped, with a warning.
        try checkValue(sandbox, "people.include(age > 1000).sum(score)", column: "sum(score)", .int(0))
        try checkValue(sandbox, "people.include(age > 1000).average(age)", column: "average(age)", .null)
        let missing = try sandbox.run([sandbox.storePath, ".mode line", "people.max(height)"])
        #expect(missing.status == 0 && missing.stdout == "max(height) = nil\n", "\(missing)")
        #expect(missing.stderr.contains("warning at line 1, column 12: no document of 'people' has a field 'height'"),
                "\(missing)")
    }

    @Test func distinctIsOneColumnARowPerValue() throws {
        let sandbox = try store()
        let cities = Set(Person.all.compactMap(\.city)).sorted()
        try check(sandbox, "people.distinct(city)", cities.map { .object([("city", .string($0))]) }, counting: "value")
        let young = Set(Person.all.filter { $0.age < 30 }.compactMap(\.city)).sorted()
        try check(sandbox, "people.include(age < 30).distinct(city)", young.map { .object([("city", .string($0))]) },
                  counting: "value")
        try check(sandbox, "people.include(age > 1000).distinct(city)", [], counting: "value")
        #expect(try output(sandbox, "table", "people.include(age > 1000).distinct(city)") == "(no values)\n")
    }

    // MARK: Groups

    /// The people grouped by city, in key order.
    private var byCity: [(city: String?, people: [Person])] {
        Dictionary(grouping: Person.all, by: \.city).map { ($0.key, $0.value) }.sorted { cityOrder($0.city, $1.city) }
    }

    @Test func groupsAreRowsWithAColumnPerFieldAndOneForTheAggregate() throws {
        let sandbox = try store()
        let groups = byCity
        try check(sandbox, "people.groupBy(city).count()", groups.map {
            .object([("city", value($0.city)), ("count()", .int(Int64($0.people.count)))])
        }, counting: "group")
        try check(sandbox, "people.groupBy(city).sum(score)", groups.map {
            .object([("city", value($0.city)), ("sum(score)", sum($0.people.compactMap(\.score)))])
        }, counting: "group")
        try check(sandbox, "people.groupBy(city).average(age)", groups.map {
            .object([("city", value($0.city)), ("average(age)", average($0.people.map(\.age)))])
        }, counting: "group")
        try check(sandbox, "people.groupBy(city).min(age)", groups.map {
            .object([("city", value($0.city)), ("min(age)", .int(Int64($0.people.map(\.age).min()!)))])
        }, counting: "group")
        try check(sandbox, "people.include(active).groupBy(city).max(age)", byCity.compactMap { group in
            let active = group.people.filter(\.active)
            guard let oldest = active.map(\.age).max() else { return nil }
            return .object([("city", value(group.city)), ("max(age)", .int(Int64(oldest)))])
        }, counting: "group")
    }

    @Test func groupsPrintAsSqlite3PrintsRows() throws {
        let sandbox = try store()
        let counts = byCity.map { ($0.city ?? "nil", $0.people.count) }
        #expect(counts.map(\.0) == ["nil", "Bergen", "Oslo", "Tromsø"])
        var table = "+--------+---------+\n| city   | count() |\n+--------+---------+\n"
        for (city, n) in counts {
            table += "| \(city)" + String(repeating: " ", count: 7 - city.count) + "| \(n)"
                + String(repeating: " ", count: 8 - String(n).count) + "|\n"
        }
        table += "+--------+---------+\n4 groups\n"
        #expect(try output(sandbox, "table", "people.groupBy(city).count()") == table)
        #expect(try output(sandbox, "csv", "people.groupBy(city).count()")
                == "city,count()\r\n" + counts.map { "\($0.0 == "nil" ? "" : $0.0),\($0.1)\r\n" }.joined())
        #expect(try output(sandbox, "line", "people.groupBy(city).count().first") == "   city = nil\ncount() = \(counts[0].1)\n")
        #expect(try output(sandbox, "table", "people.groupBy(city).count().count()") == "4\n")
    }

    @Test func groupsAreSortedByTheirAggregateAndSliced() throws {
        let sandbox = try store()
        // By count, largest first; ties by key.
        let sorted = byCity.map { ($0.city, $0.people.count) }.sorted { a, b in
            a.1 != b.1 ? a.1 > b.1 : cityOrder(a.0, b.0)
        }
        try check(sandbox, "people.groupBy(city).count().sortBy(value, .reverse)[0..<2]", sorted.prefix(2).map {
            .object([("city", value($0.0)), ("count()", .int(Int64($0.1)))])
        }, counting: "group")
        try check(sandbox, "people.groupBy(city).count().sortBy(key, .reverse)", byCity.reversed().map {
            .object([("city", value($0.city)), ("count()", .int(Int64($0.people.count)))])
        }, counting: "group")
        let first = try rows(sandbox, "people.groupBy(city).count().sortBy(value)[1..<3]")
        #expect(first.map { $0["count()"] as? Int } == byCity.map(\.people.count).sorted()[1..<3].map { $0 })
    }

    @Test func groupByTwoFieldsHasAColumnForEach() throws {
        let sandbox = try store()
        struct Key: Hashable { var city: String?; var active: Bool }
        let groups = Dictionary(grouping: Person.all) { Key(city: $0.city, active: $0.active) }
            .sorted { a, b in a.key.city != b.key.city ? cityOrder(a.key.city, b.key.city) : !a.key.active && b.key.active }
        try check(sandbox, "people.groupBy(city, active).average(age)", groups.map {
            .object([("city", value($0.key.city)), ("active", .bool($0.key.active)),
                     ("average(age)", average($0.value.map(\.age)))])
        }, counting: "group")
    }

    // MARK: Projections and saved filters

    @Test func selectPrintsOnlyTheSelectedFields() throws {
        let sandbox = try store()
        let old = Person.all.filter { $0.age > 60 }
        try check(sandbox, "people.include(age > 60).select(name, age)", old.map {
            .object([("name", .string($0.name)), ("age", .int(Int64($0.age)))])
        }, counting: "document")
        // A missing field is left out of its row; first is one row.
        try check(sandbox, "people.include(age > 60).select(city, name)", old.map { p in
            .object((p.city.map { [("city", DocumentValue.string($0))] } ?? []) + [("name", .string(p.name))])
        }, counting: "document")
        let oldest = Person.all.max { ($0.age, -$0.id) < ($1.age, -$1.id) }!
        #expect(try output(sandbox, "line", "people.sortBy(age, .reverse).select(name, age).first")
                == "name = \(oldest.name)\n age = \(oldest.age)\n")
    }

    @Test func aSavedFilterIsABaseForEveryNewWord() throws {
        let sandbox = try store()
        try sandbox.prepare([".save adults people.include(age >= 18)"])
        let adults = Person.all.filter { $0.age >= 18 }
        try checkValue(sandbox, "adults.sum(score)", column: "sum(score)", sum(adults.compactMap(\.score)))
        let groups = Dictionary(grouping: adults, by: \.city).sorted { cityOrder($0.key, $1.key) }
        try check(sandbox, "adults.groupBy(city).count()", groups.map {
            .object([("city", value($0.key)), ("count()", .int(Int64($0.value.count)))])
        }, counting: "group")
        try check(sandbox, "adults.distinct(city)", Set(adults.compactMap(\.city)).sorted().map {
            .object([("city", .string($0))])
        }, counting: "value")
    }

    // MARK: Explain

    @Test func explainAfterAnAggregateOrGroupsSaysHowTheyAreComputed() throws {
        let sandbox = try store()
        try sandbox.prepare([".createIndex by_city people city"])
        let max = try output(sandbox, "table", "people.max(age).explain()")
        #expect(max.containsInOrder(["query on people (24 documents)", "aggregate: over the matches, reading age",
                                     "ran:      24 entries scanned, 24 documents read, 0 decoded, 1 returned"]), "\(max)")
        let groups = try output(sandbox, "table", "people.groupBy(city).count().explain()")
        #expect(groups.containsInOrder(["access:   the keys of index by_city", "aggregate: from the keys of index by_city",
                                        "\(byCity.count) returned"]), "\(groups)")
        // The distinct values: the same walk, the documents without the field left out of what is returned.
        let distinct = try output(sandbox, "table", "people.distinct(city).explain()")
        #expect(distinct.containsInOrder(["access:   the keys of index by_city", "aggregate: from the keys of index by_city",
                                          "\(Set(Person.all.compactMap(\.city)).count) returned"]), "\(distinct)")
        let count = try output(sandbox, "table", "people.include(age > 60).count().explain()")
        #expect(count.contains("\(Person.all.filter { $0.age > 60 }.count) returned"), "\(count)")
        // .explain on: the plan before the answer, which is printed as usual.
        let each = try sandbox.run([sandbox.storePath, ".explain on", ".mode line", "people.min(age)"])
        #expect(each.status == 0 && each.stdout.containsInOrder(["aggregate:", "min(age) = \(Person.all.map(\.age).min()!)"])
                && !each.stdout.contains("ran:"), "\(each)")
    }

    // MARK: Updates

    /// The documents of the store, by id, as the shell prints them in JSON.
    private func documents(_ sandbox: ShellSandbox) throws -> [Int: NSDictionary] {
        Dictionary(uniqueKeysWithValues: try sandbox.documents("people").map { ($0["id"] as! Int, $0) })
    }

    private let move = #"people.include(city == "Oslo").update(set: {"city": "Bergen"}, inc: {"age": 1}, "#
        + #"unset: ["score"], push: {"tags": "moved"}, pull: {"tags": "t0"})"#

    @Test func updateWithoutATerminalIsRefusedUnlessConfirmedWithYes() throws {
        let sandbox = try store()
        let before = try documents(sandbox)
        let oslo = Person.all.filter { $0.city == "Oslo" }

        let refused = try sandbox.run([sandbox.storePath], input: move + "\n")
        #expect(refused.status == 1, "\(refused)")
        #expect(refused.stderr.contains("refusing to update \(oslo.count) documents of people without a confirmation"),
                "\(refused)")
        #expect(!refused.stdout.contains("Updated"), "\(refused)")
        #expect(try documents(sandbox) == before, "a refused update changed documents")

        let confirmed = try sandbox.run(["--yes", sandbox.storePath], input: move + "\n")
        #expect(confirmed.status == 0 && confirmed.stderr.isEmpty, "\(confirmed)")
        #expect(confirmed.stdout == "Update \(oslo.count) documents of people (set city = \"Bergen\", unset score, "
                + "increment age by 1, push \"moved\" onto tags, pull \"t0\" from tags)? [y/N] y (--yes)\n"
                + "Updated \(oslo.count) documents.\n", "\(confirmed)")
        let after = try documents(sandbox)
        for person in Person.all {
            let document = try #require(after[person.id])
            guard person.city == "Oslo" else {
                #expect(document == before[person.id], "\(person.id) changed")
                continue
            }
            #expect(document["city"] as? String == "Bergen")
            #expect(document["age"] as? Int == person.age + 1)
            #expect(document["score"] == nil)
            #expect(document["tags"] as? [String] == person.tags.filter { $0 != "t0" } + ["moved"])
            #expect(document["name"] as? String == person.name && document["active"] as? Bool == person.active)
        }
        let none = try sandbox.run([sandbox.storePath], input: move + "\n")
        #expect(none.status == 0 && none.stdout == "No document matches; nothing to update.\n", "\(none)")
    }

    @Test func updateInATransactionIsPendingUntilCommit() throws {
        let sandbox = try store()
        let oslo = Person.all.filter { $0.city == "Oslo" }.count
        let bergen = Person.all.filter { $0.city == "Bergen" }.count
        let countBergen = #"people.include(city == "Bergen").count()"#
        let rolledBack = try sandbox.run(["--yes", sandbox.storePath], input: """
            begin
            \(move)
            \(countBergen)
            rollback
            \(countBergen)

            """)
        #expect(rolledBack.status == 0, "\(rolledBack)")
        #expect(rolledBack.stdout.containsInOrder(["Pending: update \(oslo) documents of people.", "\(oslo + bergen)\n",
                                                   "Rolled back 1 pending change.", "\(bergen)\n"]), "\(rolledBack)")
        #expect(try sandbox.count(countBergen) == bergen)

        let committed = try sandbox.run(["--yes", sandbox.storePath], input: "begin\n\(move)\n.status\ncommit\n")
        #expect(committed.status == 0, "\(committed)")
        #expect(committed.stdout.containsInOrder(["Pending: update \(oslo) documents of people.",
                                                  "1. update \(oslo) documents of people (",
                                                  "): set city = \"Bergen\", unset score, increment age by 1",
                                                  "Committed 1 change."]), "\(committed)")
        #expect(try sandbox.count(countBergen) == oslo + bergen)
    }

    @Test func anUpdateThatCannotApplyToOneDocumentChangesNone() throws {
        let sandbox = try store()
        let before = try documents(sandbox)
        let result = try sandbox.run(["--yes", sandbox.storePath], input: #"people.update(inc: {"age": 1, "name": 1})"# + "\n")
        #expect(result.status == 1, "\(result)")
        #expect(result.stderr.contains("cannot increment name by 1 in document 1 of collection 'people': the field "
                                       + "holds a string, not a number"), "\(result)")
        #expect(!result.stdout.contains("Updated"), "\(result)")
        #expect(try documents(sandbox) == before, "a failed update changed documents")
    }

    /// `.watch` follows what a query prints (the terminal tests watch groups and projections redrawn); a change or
    /// explain() prints no rows to follow.
    @Test func watchRefusesChangesAndExplain() throws {
        let sandbox = try store()
        let result = try sandbox.run([sandbox.storePath, ".watch people.include(age > 200).delete()",
                                      ".watch people.count().explain()"])
        #expect(result.status == 1, "\(result)")
        #expect(result.stderr.containsInOrder([
            ".watch follows what a query prints; it cannot run people.include(age > 200).delete(): delete() gives no rows",
            ".watch follows what a query prints; it cannot run people.count().explain(): explain() gives no rows",
        ]), "\(result)")
    }

    /// `.export` writes the rows a query prints: fields of each result, groups, a value, distinct values and their
    /// count; a change is refused, saying why.
    @Test func exportWritesTheRowsAComputingQueryPrints() throws {
        let sandbox = try store()
        let script = """
            .export people.include(city == "Oslo").sortBy(name).select(name) names.ndjson
            .export people.groupBy(city).count() groups.csv
            .export people.sum(age) sum.ndjson
            .export people.distinct(city).count() cities.ndjson
            .export people.include(age > 200).delete() gone.json
            people.distinct(city).count()

            """
        let result = try sandbox.run([sandbox.storePath], input: script)
        #expect(result.status == 1, "\(result)")
        #expect(result.stdout.containsInOrder(["Exported", "documents to names.ndjson", "groups to groups.csv",
                                               "Exported 1 row to sum.ndjson", "Exported 1 row to cities.ndjson"]),
                "\(result)")
        #expect(result.stderr.contains("cannot export people.include(age > 200).delete(): delete() gives no rows"),
                "\(result)")
        #expect(!result.stderr.contains("saved filter"), "\(result)")
        #expect(!FileManager.default.fileExists(atPath: sandbox.path("gone.json")))
        let names = try sandbox.read("names.ndjson").split(separator: "\n")
        #expect(!names.isEmpty && names.allSatisfy { $0.hasPrefix("{\"name\":") && !$0.contains(",") }, "\(names)")
        let groups = try sandbox.read("groups.csv")
        #expect(groups.hasPrefix("city,count()\r\n"), "\(groups)")
        #expect(try sandbox.read("sum.ndjson").hasPrefix("{\"sum(age)\":"))
        let distinct = Set(try documents(sandbox).values.compactMap { $0["city"] as? String }).count
        #expect(try sandbox.read("cities.ndjson") == "{\"count\":\(distinct)}\n")
        #expect(result.stdout.hasSuffix("\n\(distinct)\n"), "\(result)")
    }

    @Test func aReadOnlyStoreRefusesAnUpdateBeforeAskingAnything() throws {
        let sandbox = try store()
        let result = try sandbox.run(["--readonly", sandbox.storePath], input: move + "\n")
        #expect(result.status == 1, "\(result)")
        #expect(result.stderr.contains("cannot update documents of 'people': the store at \(sandbox.storePath) was "
                                       + "opened read-only"), "\(result)")
        #expect(!result.stderr.contains("refusing to"), "\(result)")
    }
}
}

extension DocumentValue {
    /// The number, when it is one.
    fileprivate var doubleValue: Double? {
        switch self {
        case .double(let d): return d
        default: return nil
        }
    }
}
