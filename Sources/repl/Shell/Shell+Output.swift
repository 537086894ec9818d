import DocStore
import Foundation

/// Printing stopped by Ctrl-C; the output already says where.
struct OutputInterrupted: Error {}

extension Shell {
    /// About how much text is written at once: between two writes, Ctrl-C is looked for.
    static let chunkBytes = 8 * 1024

    /// Prints a query's documents in the current mode: written a chunk of rows at a time, and stopped by Ctrl-C. At a
    /// terminal, a table is cut to the terminal's width, and a result longer than the screen stops after a page
    /// (unless `.pager off`), `it` showing the next. Rows that are not documents (groups, values) are counted as
    /// `noun`s.
    func show(_ documents: [DocumentValue], counting noun: String = "document") throws {
        console.pager.rest = nil
        if documents.isEmpty {
            console.result(renderer.emptyText(counting: noun))
            return
        }
        let screen = console.resultScreen
        if let screen, pages, !fits(documents, rows: screen.rows) {
            try showPage(of: documents[...], shown: 0, total: documents.count, noun: noun, screen: screen)
            return
        }
        try writeRows(documents[...], counting: noun, fitting: screen?.columns) { hidden in
            renderer.mode.isTable ? Renderer.summary(count: documents.count, hiddenColumns: hidden, counting: noun) : ""
        }
    }

    /// Prints one document (`first`, `last`, `any`, `findOrCreate`), or one group, or says there is none.
    func show(_ document: DocumentValue?, counting noun: String = "document") {
        console.pager.rest = nil
        console.result(renderer.render(document, fitting: console.resultScreen?.columns, counting: noun))
    }

    /// Prints one value computed from the matches, in a column named `column` (`sum(score)`).
    func show(_ value: DocumentValue, named column: String) {
        console.pager.rest = nil
        console.result(renderer.render(value: value, named: column, fitting: console.resultScreen?.columns))
    }

    /// Prints what a query computed from its matches.
    func show(_ computed: Computed) throws {
        switch computed {
        case .rows(let rows, let noun): try show(rows, counting: noun)
        case .one(let row, let noun): show(row, counting: noun)
        case .value(let value, let column): show(value, named: column)
        case .count(let n): show(count: n)
        }
    }

    /// Prints a count.
    func show(count: Int) {
        console.pager.rest = nil
        console.result(renderer.render(count: count))
    }

    /// `it`: the next page of the last result that stopped at a page.
    func showMore() throws {
        guard let rest = console.pager.rest else {
            throw ShellError("nothing more to show: it goes on with a result that stopped at a page")
        }
        console.pager.rest = nil
        // At a terminal still: another page; else (after .output FILE, say) all the rest.
        if let screen = console.resultScreen, pages {
            try showPage(of: rest.documents, shown: rest.shown, total: rest.total, noun: rest.noun, screen: screen)
        } else {
            // (A summary only under a table: CSV and JSON written to a file must read back as they are.)
            try writeRows(rest.documents, counting: rest.noun, fitting: console.resultScreen?.columns) { hidden in
                renderer.mode.isTable
                    ? "\(rest.noun)s \(rest.shown + 1)–\(rest.total) of \(rest.total)" + Renderer.hidden(hidden) + "\n" : ""
            }
        }
    }

    /// Whether long results stop after a page: at a terminal, a person there to type `it`, not in a `.read` file.
    private var pages: Bool { console.pager.isOn && console.interactive && readDepth == 0 }

    /// Whether all of `documents` fit on a screen of `rows` lines, with the prompt after them.
    private func fits(_ documents: [DocumentValue], rows: Int) -> Bool {
        var used = renderer.headLines + renderer.footLines + (renderer.mode.isTable ? 1 : 0) + 1
        for (i, document) in documents.enumerated() {
            used += renderer.lines(of: document, at: i)
            if used > rows { return false }
        }
        return true
    }

    /// As many of `documents` as a screen holds, with the line that says which they are; the rest kept for `it`.
    private func showPage(of documents: ArraySlice<DocumentValue>, shown: Int, total: Int, noun: String,
                          screen: (columns: Int, rows: Int)) throws {
        // The page, the line under it, and the prompt.
        let room = screen.rows - renderer.headLines - renderer.footLines - 2
        var used = 0
        var count = 0
        for document in documents {
            let lines = renderer.lines(of: document, at: count)
            if count > 0 && used + lines > room { break }
            used += lines
            count += 1
        }
        let page = documents.prefix(count)
        let more = count < documents.count
        try writeRows(page, counting: noun, fitting: screen.columns) { hidden in
            "\(noun)s \(shown + 1)–\(shown + count) of \(total)" + (more ? "; type it for more" : "")
                + Renderer.hidden(hidden) + "\n"
        }
        if more { console.pager.rest = (documents.dropFirst(count), shown + count, total, noun) }
    }

    /// Writes `documents` a chunk at a time, then the line `summary` makes (given how many columns were left out).
    /// Ctrl-C (the task cancelled) stops it between two chunks, with a note of how far it got (in `noun`s).
    private func writeRows(_ documents: ArraySlice<DocumentValue>, counting noun: String, fitting columns: Int?,
                       summary: (Int) -> String) throws {
        var written = 0
        do {
            let rendering = try renderer.rendering(of: documents, fitting: columns)
            var chunk = rendering.head
            for (i, document) in documents.enumerated() {
                chunk += rendering.row(document, at: i)
                if chunk.utf8.count >= Shell.chunkBytes {
                    console.result(chunk)
                    chunk = ""
                    written = i + 1
                    try Task.checkCancellation()
                }
            }
            console.result(chunk + rendering.foot + summary(rendering.hiddenColumns))
        } catch is CancellationError {
            console.pager.rest = nil
            // At a terminal the line may have been cut short (and ^C shown): the note starts a line of its own.
            console.error((console.interactive ? "\n" : "") + "interrupted: printing stopped after \(written) of "
                + "\(documents.count) \(noun)\(documents.count == 1 ? "" : "s")")
            throw OutputInterrupted()
        }
    }
}
