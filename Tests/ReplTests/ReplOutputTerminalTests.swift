// How the shell prints results at a terminal (a pseudo-terminal, TerminalSession, 120 columns by 40 rows): Ctrl-C
// stops a long output, tables are cut to the terminal's width, and long results come a page at a time (`it` for the
// next).

import Foundation
import Testing

extension ShellSessions {
@Suite struct ReplOutputTerminalTests {
    // MARK: Ctrl-C

    @Test func controlCStopsALongOutputAtOnceAndThePromptComesBack() throws {
        let sandbox = try ShellSandbox()
        let total = 60_000
        var json = "["
        for i in 1...total {
            json += (i == 1 ? "\n" : ",\n")
                + #"{"id": \#(i), "temp": \#((i * 7919) % 1000), "city": "City\#(i % 50)", "note": "reading \#(i)"}"#
        }
        try sandbox.write(json + "\n]\n", to: "temps.json")
        let imported = try sandbox.run([sandbox.storePath, ".import \(sandbox.path("temps.json")) temps"], timeout: 180)
        try #require(imported.status == 0, "\(imported)")

        let shell = try TerminalSession.docstore(sandbox, [sandbox.storePath])
        defer { shell.terminate() }
        try shell.enter(".pager off")
        try shell.enter("temps.sortBy(temp)", expecting: " id ")
        // Rows are coming: Ctrl-C now (typed as is, without waiting for the output to pause).
        try shell.expect(" City", timeout: TerminalSession.shellPatience)
        shell.skipOutputSoFar()
        try shell.send("\u{03}")
        // The terminal turns the byte into SIGINT on a kernel worker, which a busy machine may run late. Meanwhile
        // the shell, its output not read, waits on the terminal's full buffer: it cannot print past the Ctrl-C by
        // more than that buffer while the signal is on its way.
        Thread.sleep(forTimeInterval: 0.3)
        let afterControlC = try shell.expect("interrupted: printing stopped after ", timeout: TerminalSession.shellPatience)
        let note = try shell.expect(" documents", timeout: TerminalSession.shellPatience)
        let printed = try #require(Int(note.dropLast(" documents".count).split(separator: " ").first ?? ""), "\(note)")
        #expect(printed < total, "every document was printed: \(note)")
        #expect(note.hasSuffix("of \(total) documents"), "\(note)")
        // Every row takes more than 40 bytes: all of them would be over 2 MB.
        #expect(afterControlC.utf8.count < total * 40 / 20,
                "\(afterControlC.utf8.count) bytes were printed after Ctrl-C")
        // The prompt comes back, and the shell goes on.
        try shell.enter("temps.count()", expecting: "\n\(total)\n")
        #expect(try shell.leave() == 0)
    }

    // MARK: Terminal width

    @Test func aTableWiderThanTheTerminalIsCutToFitButNotThroughAPipe() throws {
        let sandbox = try ShellSandbox()
        let long = String(repeating: "abcdefghij", count: 30)
        let documents = (1...3).map { i in
            "{" + #""id": \#(i), "# + (1...6).map { #""field\#($0)": "\#(long)""# }.joined(separator: ", ") + "}"
        }
        try sandbox.prepare(["wide.insert([" + documents.joined(separator: ", ") + "])"])

        let shell = try TerminalSession.docstore(sandbox, [sandbox.storePath])
        defer { shell.terminate() }
        let table = try shell.enter("wide", expecting: "3 documents")
        let lines = table.split(separator: "\n").map(String.init).filter { $0.first.map("+|┌│├└".contains) == true }
        try #require(lines.count == 7, "\(table)")
        let columns = Int(TerminalSession.columns)
        #expect(lines.allSatisfy { $0.count <= columns }, "lines wider than the terminal:\n\(table)")
        #expect(lines[3].contains("abcdefghijabc") && lines[3].contains("…"), "\(table)")

        // .width sets the first columns; 0 leaves one to fit.
        try shell.enter(".width 2 0 12")
        let set = try shell.enter("wide.include(id == 1)", expecting: "1 document")
        let row = try #require(set.split(separator: "\n").first { $0.hasPrefix("| 1") }.map(String.init), "\(set)")
        let cells = row.split(separator: "|").map { $0.trimmingCharacters(in: .whitespaces) }
        #expect(cells.first == "1" && cells.count >= 3 && cells[2] == "abcdefghija…", "\(row)")
        #expect(row.count <= columns, "\(row)")
        #expect(try shell.leave() == 0)

        let piped = try sandbox.run([sandbox.storePath, "wide"])
        #expect(piped.status == 0, "\(piped)")
        #expect(!piped.stdout.contains("…") && piped.stdout.contains("| " + long + " |"), "\(piped)")
    }

    // MARK: Pages

    @Test func aLongResultComesAPageAtATimeAndItShowsTheNext() throws {
        let sandbox = try ShellSandbox()
        let total = 100
        try sandbox.prepare(["numbers.insert([" + (1...total).map { #"{"id": \#($0), "n": "n\#($0)"}"# }
            .joined(separator: ", ") + "])"])
        // A table's page: its top, header and rule, the rows, its bottom, the line under it, and the prompt.
        let page = Int(TerminalSession.rows) - 6

        let shell = try TerminalSession.docstore(sandbox, [sandbox.storePath])
        defer { shell.terminate() }
        let first = try shell.enter("numbers", expecting: "documents 1–\(page) of \(total); type it for more")
        #expect(first.contains("| n\(page) ") && !first.contains("| n\(page + 1) "), "\(first)")
        #expect(first.split(separator: "\n").count <= Int(TerminalSession.rows) - 1, "the page is taller than the screen")
        let second = try shell.enter("it", expecting: "documents \(page + 1)–\(2 * page) of \(total); type it for more")
        #expect(second.contains("| n\(page + 1) ") && !second.contains("| n\(page) "), "\(second)")
        let last = try shell.enter("it", expecting: "documents \(2 * page + 1)–\(total) of \(total)\n")
        #expect(last.contains("| n\(total) ") && !last.contains("type it for more"), "\(last)")
        try shell.enter("it", expecting: "nothing more to show")

        // Off: the whole result at once.
        try shell.enter(".pager off")
        let whole = try shell.enter("numbers", expecting: "\(total) documents\n")
        #expect(whole.contains("| n1 ") && whole.contains("| n\(total) ") && !whole.contains("type it for more"))
        // On, but to a file: never paged.
        try shell.enter(".pager on")
        try shell.enter(".output \(sandbox.path("numbers.txt"))")
        let toFile = try shell.enter("numbers", expecting: TerminalSession.shellPrompt)
        #expect(!toFile.contains("| n1 ") && !toFile.contains("type it for more"), "\(toFile)")
        try shell.enter(".output", at: "")
        #expect(try shell.leave() == 0)
        let file = try sandbox.read("numbers.txt")
        #expect(file.contains("| n\(total) ") && file.hasSuffix("\(total) documents\n"), "\(file)")
    }
}
}
