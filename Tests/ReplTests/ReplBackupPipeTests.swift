import DocStore
import Foundation
import Testing

extension ShellSessions {
@Suite struct ReplBackupPipeTests {
    /// `.backup FILE` writes a store that opens with every document and index; `.stats` shows what is in use and
    /// free, and says when compacting would pay.
    @Test func backupWritesAStoreThatOpensAndStatsShowTheFreePages() async throws {
        let sandbox = try ShellSandbox()
        let pad = String(repeating: "x", count: 2000)
        try sandbox.write((0..<300).map { "{\"n\": \($0), \"age\": \($0 % 50), \"pad\": \"\(pad)\"}\n" }.joined(),
                          to: "people.ndjson")
        let script = ".import people.ndjson people\n.createIndex age people age\npeople.include(n >= 30).delete()\n"
            + ".stats\n.backup copy.db\n"
        let result = try sandbox.run([sandbox.storePath, "--yes"], input: script, timeout: 120)
        #expect(result.status == 0, "\(result)")
        #expect(result.stdout.contains("in use"), "\(result.stdout)")
        #expect(result.stdout.contains("free pages"), "\(result.stdout)")
        #expect(result.stdout.contains("compacting would give back"), "\(result.stdout)")
        let copy = try await DocStore(path: sandbox.path("copy.db"))
        #expect(try await Query<DocumentValue>("people").count(in: copy) == 30)
        #expect(try await Query<DocumentValue>("people").include(.compare("age", .less, .int(10))).count(in: copy) == 10)
        #expect(try await copy.collections().first?.indexes.map(\.name) == ["age"])
        #expect(try await copy.verify().isClean)

        let refused = try sandbox.run([sandbox.storePath, ".backup \(sandbox.storePath)"])
        #expect(refused.status != 0)
        #expect(refused.stderr.contains("it is the file of the open store"), "\(refused.stderr)")

        // .compact shrinks the file and keeps every document; the shell goes on with the store.
        let before = try FileManager.default.attributesOfItem(atPath: sandbox.storePath)[.size] as? Int ?? 0
        let compacted = try sandbox.run([sandbox.storePath], input: ".compact\npeople.count()\n")
        #expect(compacted.status == 0, "\(compacted)")
        #expect(compacted.stdout.contains("Compacted"), "\(compacted.stdout)")
        #expect(compacted.stdout.contains("30"), "\(compacted.stdout)")
        let after = try FileManager.default.attributesOfItem(atPath: sandbox.storePath)[.size] as? Int ?? 0
        #expect(after < before / 2, "\(before) -> \(after)")
        // Refused while another process (this one) has the store open; the shell still has it.
        let holder = try await DocStore(path: sandbox.storePath)
        let busy = try sandbox.run([sandbox.storePath], input: ".compact\npeople.count()\n")
        #expect(busy.status != 0)
        #expect(busy.stderr.contains("another process has it open"), "\(busy.stderr)")
        #expect(busy.stdout.contains("30"), "\(busy.stdout)")
        #expect(try await Query<DocumentValue>("people").count(in: holder) == 30)
    }

    /// `.verify COLLECTION` lists the fields whose documents hold more than one kind of value.
    @Test func verifyOfACollectionListsItsFieldsOfMixedKinds() throws {
        let sandbox = try ShellSandbox()
        let script = """
            people.insert({"name": "Ann", "age": 41})
            people.insert({"name": "Bo", "age": "seventeen"})
            people.insert({"name": "Cy", "age": 30, "email": "cy@example.com"})
            .verify people

            """
        let result = try sandbox.run([sandbox.storePath], input: script)
        #expect(result.status == 0, "\(result)")
        #expect(result.stdout.contains("3 documents"), "\(result.stdout)")
        #expect(result.stdout.contains("age: int 2, string 1"), "\(result.stdout)")
        #expect(result.stdout.contains("email: missing 2, string 1"), "\(result.stdout)")
        #expect(!result.stdout.contains("name:"), "\(result.stdout)")
    }
}
}
