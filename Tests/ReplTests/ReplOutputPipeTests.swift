// How the shell prints results through pipes: the output modes, .headers and .width, and tables never cut to a
// terminal's width and never paged.

import Foundation
import Testing

extension ShellSessions {
@Suite struct ReplOutputPipeTests {
    /// Two people: text with a comma and quotes, a list, a nested object, a missing field, text over two lines.
    static let twoPeople = [#"""
        people.insert([
          {"id": 1, "name": "Ann, \"the first\"", "age": 41, "tags": ["a", "b"], "address": {"city": "Oslo"}},
          {"id": 2, "name": "Bo", "age": 17, "address": {"city": "Bergen", "street": "Line one\nline two"}}
        ])
        """#]

    @Test func modeAloneSaysTheModeAndBoxAndTableDrawAsSqlite3Does() throws {
        let sandbox = try ShellSandbox()
        try sandbox.prepare(Self.twoPeople)
        let result = try sandbox.run([sandbox.storePath, ".mode", "people.include(id == 2)", ".mode box",
                                      "people.include(id == 2)", ".mode"])
        #expect(result.status == 0, "\(result)")
        #expect(result.stdout == """
            current output mode: table
            +----+------+-----+--------------+--------------------+
            | id | name | age | address.city | address.street     |
            +----+------+-----+--------------+--------------------+
            | 2  | Bo   | 17  | Bergen       | Line one\\nline two |
            +----+------+-----+--------------+--------------------+
            1 document
            ┌────┬──────┬─────┬──────────────┬────────────────────┐
            │ id │ name │ age │ address.city │ address.street     │
            ├────┼──────┼─────┼──────────────┼────────────────────┤
            │ 2  │ Bo   │ 17  │ Bergen       │ Line one\\nline two │
            └────┴──────┴─────┴──────────────┴────────────────────┘
            1 document
            current output mode: box

            """, "\(result)")
    }

    @Test func csvModeIsRFC4180WithAHeaderLineThatHeadersOffLeavesOut() throws {
        let sandbox = try ShellSandbox()
        try sandbox.prepare(Self.twoPeople)
        let result = try sandbox.run([sandbox.storePath, ".mode csv", "people", ".headers off", "people.first"])
        #expect(result.status == 0, "\(result)")
        #expect(result.stdout == "id,name,age,tags,address.city,address.street\r\n"
            + "1,\"Ann, \"\"the first\"\"\",41,\"[\"\"a\"\",\"\"b\"\"]\",Oslo,\r\n"
            + "2,Bo,17,,Bergen,\"Line one\nline two\"\r\n"
            + "1,\"Ann, \"\"the first\"\"\",41,\"[\"\"a\"\",\"\"b\"\"]\",Oslo\r\n", "\(result)")
    }

    @Test func headersOffLeavesTheFieldNamesOutOfATable() throws {
        let sandbox = try ShellSandbox()
        try sandbox.prepare(Self.twoPeople)
        let result = try sandbox.run([sandbox.storePath, ".headers off", "people.include(id == 2)"])
        #expect(result.status == 0, "\(result)")
        #expect(result.stdout == """
            +---+----+----+--------+--------------------+
            | 2 | Bo | 17 | Bergen | Line one\\nline two |
            +---+----+----+--------+--------------------+
            1 document

            """, "\(result)")
    }

    @Test(arguments: ["table", "box", "csv", "json", "line"])
    func everyKindOfResultPrintsInEveryMode(mode: String) throws {
        let sandbox = try ShellSandbox()
        try sandbox.prepare(Self.twoPeople)
        let statements = ["people", "people.sortBy(age).first", "people.count()", "people.include(age > 99)",
                          "people.include(age > 99).first"]
        var outputs: [String] = []
        for statement in statements {
            let result = try sandbox.run([sandbox.storePath, ".mode \(mode)", statement])
            #expect(result.status == 0 && result.stderr.isEmpty, "\(statement): \(result)")
            outputs.append(result.stdout)
        }
        let (list, first, count, none, noDocument) = (outputs[0], outputs[1], outputs[2], outputs[3], outputs[4])
        switch mode {
        case "json":
            // Each result is JSON: a list, an object, a number, an empty list, null.
            func parse(_ text: String) throws -> Any {
                try JSONSerialization.jsonObject(with: Data(text.utf8), options: .fragmentsAllowed)
            }
            #expect((try parse(list) as? [NSDictionary])?.count == 2, "\(list)")
            #expect((try parse(first) as? NSDictionary)?["name"] as? String == "Bo", "\(first)")
            #expect(try parse(count) as? Int == 2, "\(count)")
            #expect((try parse(none) as? [Any])?.isEmpty == true, "\(none)")
            #expect(try parse(noDocument) is NSNull, "\(noDocument)")
        case "csv":
            #expect(list.hasPrefix("id,name,age,tags,address.city,address.street\r\n"), "\(list)")
            #expect(first == "id,name,age,address.city,address.street\r\n2,Bo,17,Bergen,\"Line one\nline two\"\r\n",
                    "\(first)")
            #expect(count == "count\r\n2\r\n", "\(count)")
            #expect(none.isEmpty && noDocument.isEmpty, "\(none)|\(noDocument)")
        case "line":
            #expect(list.contains("name = Ann, \"the first\"\n") && list.contains("\n\n") && list.contains("name = Bo"),
                    "\(list)")
            #expect(first.contains("address.city = Bergen") && !first.contains("Ann"), "\(first)")
            #expect(count == "count = 2\n", "\(count)")
            #expect(none == "(no documents)\n" && noDocument == "(no document)\n", "\(none)|\(noDocument)")
        default:
            let corner = mode == "box" ? "┌" : "+"
            #expect(list.hasPrefix(corner) && list.hasSuffix("2 documents\n"), "\(list)")
            #expect(first.hasPrefix(corner) && first.contains(" Bo ") && first.hasSuffix("1 document\n"), "\(first)")
            #expect(count == "2\n", "\(count)")
            #expect(none == "(no documents)\n" && noDocument == "(no document)\n", "\(none)|\(noDocument)")
        }
    }

    @Test func widthSetsColumnWidthsAndZeroLeavesAColumnToItsCells() throws {
        let sandbox = try ShellSandbox()
        try sandbox.prepare(Self.twoPeople)
        let result = try sandbox.run([sandbox.storePath, ".width 4 0 -5 3", "people.include(id == 1)", ".width",
                                      ".mode box", "people.include(id == 1)"])
        #expect(result.status == 0, "\(result)")
        #expect(result.stdout == """
            +------+------------------+-------+-----+--------------+
            | id   | name             | age   | ta… | address.city |
            +------+------------------+-------+-----+--------------+
            | 1    | Ann, "the first" |    41 | ["… | Oslo         |
            +------+------------------+-------+-----+--------------+
            1 document
            ┌────┬──────────────────┬─────┬───────────┬──────────────┐
            │ id │ name             │ age │ tags      │ address.city │
            ├────┼──────────────────┼─────┼───────────┼──────────────┤
            │ 1  │ Ann, "the first" │ 41  │ ["a","b"] │ Oslo         │
            └────┴──────────────────┴─────┴───────────┴──────────────┘
            1 document

            """, "\(result)")
        let refused = try sandbox.run([sandbox.storePath, ".width 4 wide"])
        #expect(refused.status == 1 && refused.stderr.contains("usage: .width"), "\(refused)")
    }

    @Test func aTableThroughAPipeIsNeverCutAndNeverPaged() throws {
        let sandbox = try ShellSandbox()
        let long = String(repeating: "abcdefghij", count: 30)
        let documents = (1...50).map { #"{"id": \#($0), "a": "\#(long)", "b": "\#(long)", "c": "\#(long)"}"# }
        try sandbox.prepare(["wide.insert([" + documents.joined(separator: ", ") + "])"])
        let result = try sandbox.run([sandbox.storePath, ".pager on", "wide"])
        #expect(result.status == 0, "\(result.stderr)")
        #expect(!result.stdout.contains("…"), "a cell was cut")
        #expect(result.stdout.contains("| " + long + " | " + long + " |"), "the cells are not whole")
        #expect(result.stdout.hasSuffix("50 documents\n"), "\(result.stdout.suffix(300))")
        #expect(!result.stdout.contains("type it for more"), "the result was paged")
        let more = try sandbox.run([sandbox.storePath, "it"])
        #expect(more.status == 1 && more.stderr.contains("nothing more to show"), "\(more)")
    }
}
}
