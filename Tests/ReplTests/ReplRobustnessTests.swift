// Bad input and edge cases through pipes: each test would crash, hang or change the wrong data without its fix.

import Foundation
import Testing

extension ShellSessions {
@Suite struct ReplRobustnessTests {
    @Test func insertAfterTheGreatestIntegerIdGetsAUUIDInsteadOfOverflowing() throws {
        let sandbox = try ShellSandbox()
        let result = try sandbox.run([sandbox.storePath], input: """
            people.insert({"id": 9223372036854775807, "name": "Max"})
            people.insert({"name": "Next"})
            people.count()
            """)
        #expect(result.status == 0, "\(result)")
        #expect(result.stdout.contains("\n2\n"), "\(result)")
    }

    @Test func aFileOfThousandsOfCommentLinesImportsWithoutExhaustingTheStack() throws {
        let sandbox = try ShellSandbox()
        let comments = String(repeating: "// a comment\n", count: 5_000)
        try sandbox.write("[\n" + comments + #"{"id": 1, "name": "Ann"}]"#, to: "people.json")
        let result = try sandbox.run([sandbox.storePath, ".import \(sandbox.path("people.json")) people",
                                      "people.count()"])
        #expect(result.status == 0, "\(result)")
        #expect(result.stdout.contains("Imported 1 document into people."), "\(result)")
    }

    @Test func importRefusesTrailingTextAndImportsNothing() throws {
        let sandbox = try ShellSandbox()
        try sandbox.write(#"[{"id": 1}] garbage {"#, to: "bad.json")
        try sandbox.write("{\"id\": 1}\n{\"id\": 2} {\"id\": 3}\n", to: "bad.ndjson")
        let json = try sandbox.run([sandbox.storePath, ".import \(sandbox.path("bad.json")) people"])
        #expect(json.status == 1 && json.stderr.contains("after the value"), "\(json)")
        let ndjson = try sandbox.run([sandbox.storePath, ".import \(sandbox.path("bad.ndjson")) people"])
        #expect(ndjson.status == 1 && ndjson.stderr.contains("line 2"), "\(ndjson)")
        #expect(!(try sandbox.run([sandbox.storePath, ".collections"]).stdout.contains("people:")))
    }

    @Test func importRefusesACommaBeforeAClosingBracketNamingWhereItIs() throws {
        let sandbox = try ShellSandbox()
        try sandbox.write("[{\"a\": 1},\n {\"a\": 2},\n]\n", to: "list.json")
        try sandbox.write("{\"a\": 1}\n{\"a\": 1, \"b\": 2,}\n", to: "object.ndjson")
        let list = try sandbox.run([sandbox.storePath, ".import \(sandbox.path("list.json")) people"])
        #expect(list.status == 1 && list.stderr.contains("line 2, column 10"), "\(list)")
        #expect(list.stderr.contains("a comma before ']'"), "\(list)")
        let object = try sandbox.run([sandbox.storePath, ".import \(sandbox.path("object.ndjson")) people"])
        #expect(object.status == 1 && object.stderr.contains("line 2, column 16"), "\(object)")
        #expect(!(try sandbox.run([sandbox.storePath, ".collections"]).stdout.contains("people:")))
        // The query language keeps allowing it.
        let query = try sandbox.run([sandbox.storePath, "people.insert([{\"a\": 1,},])", "people.count()"])
        #expect(query.status == 0 && query.stdout.contains("1"), "\(query)")
    }

    @Test func readOfAFileThatReadsItselfStopsWithAnError() throws {
        let sandbox = try ShellSandbox()
        let loop = sandbox.path("loop.txt")
        try sandbox.write(".read \(loop)\n", to: "loop.txt")
        let result = try sandbox.run([sandbox.storePath, ".read \(loop)"], timeout: 20)
        #expect(result.status == 1, "\(result)")
        #expect(result.stderr.contains("nested more than 16 deep"), "\(result)")
    }

    @Test func outputToAPathThatCannotBeWrittenIsAnErrorAndDevNullStaysADevice() throws {
        let sandbox = try ShellSandbox()
        try sandbox.prepare(ShellSandbox.threePeople)
        let result = try sandbox.run([sandbox.storePath, ".output \(sandbox.path("no/such/dir/out.txt"))"])
        #expect(result.status == 1 && result.stderr.contains("cannot write to"), "\(result)")
        let null = try sandbox.run([sandbox.storePath, ".output /dev/null", "people.count()"])
        #expect(null.status == 0, "\(null)")
        let type = try FileManager.default.attributesOfItem(atPath: "/dev/null")[.type] as? FileAttributeType
        #expect(type == .typeCharacterSpecial)
    }

    @Test func saveAndExportKeepQuotedTextAsTyped() throws {
        let sandbox = try ShellSandbox()
        try sandbox.prepare([#"people.insert([{"name": "A  B", "city": "Oslo"}, {"name": "C", "city": "Bergen"}])"#])
        let out = sandbox.path("a b.json")
        let result = try sandbox.run([sandbox.storePath, #".save oslo people.include(city == "Oslo")"#, "oslo.count()",
                                      #".export people.include(name == "A  B") "\#(out)""#])
        #expect(result.status == 0, "\(result)")
        #expect(result.stdout.contains("\n1\n"), "\(result)")
        #expect(try sandbox.read("a b.json").contains(#""name":"A  B""#))
    }

    @Test func csvKeepsTextThatLooksLikeANumberAsText() throws {
        let sandbox = try ShellSandbox()
        try sandbox.prepare([#"people.insert({"id": 1, "zip": "0150", "flag": "true", "n": 7})"#])
        let file = sandbox.path("p.csv")
        let result = try sandbox.run([sandbox.storePath, ".export people \(file)", ".import \(file) copy",
                                      ".mode json", "copy"])
        #expect(result.status == 0, "\(result)")
        #expect(result.stdout.contains(#""zip":"0150""#) && result.stdout.contains(#""flag":"true""#)
                && result.stdout.contains(#""n":7"#), "\(result)")
    }

    @Test func bareExitAfterAnErrorExitsWithOneAndOutOfRangeCodesAreRefused() throws {
        let sandbox = try ShellSandbox()
        let failed = try sandbox.run([sandbox.storePath], input: "nosuch.count()\n.exit\n")
        #expect(failed.status == 1, "\(failed)")
        let refused = try sandbox.run([sandbox.storePath], input: ".exit 256\n")
        #expect(refused.status == 1 && refused.stderr.contains("0 to 255"), "\(refused)")
    }

    @Test func saveIsRefusedInsideATransaction() throws {
        let sandbox = try ShellSandbox()
        try sandbox.prepare(ShellSandbox.threePeople)
        let result = try sandbox.run([sandbox.storePath], input: """
            begin
            .save adults people.include(age >= 18)
            rollback
            .filters
            """)
        #expect(result.status == 1 && result.stderr.contains("commit or rollback"), "\(result)")
        #expect(result.stdout.contains("No saved filters") || !result.stdout.contains("adults ="), "\(result)")
    }

    @Test func endingWithPendingChangesSaysTheyWereDropped() throws {
        let sandbox = try ShellSandbox()
        let result = try sandbox.run([sandbox.storePath], input: "begin\npeople.insert({\"name\": \"Ann\"})\n")
        #expect(result.stderr.contains("1 pending change was not committed"), "\(result)")
        #expect(!(try sandbox.run([sandbox.storePath, ".collections"]).stdout.contains("people:")))
    }
}
}
