// Tables laid out without a process: fitted to a width, their cells cut by the columns they take.

import DocStore
import Foundation
import Testing
@testable import repl

@Suite struct RenderingTests {
    // MARK: Fitting a table

    /// The width a table of these column widths takes: "| " + cell + " " per column, a closing bar, and " … |" when
    /// columns were left out.
    private func tableWidth(_ widths: [Int], leftOut: Bool) -> Int {
        widths.reduce(0, +) + 3 * widths.count + 1 + (leftOut ? 4 : 0)
    }

    @Test func columnsThatFitKeepTheirWidths() {
        #expect(Rendering.fit([2, 10, 30], fixed: [false, false, false], into: 120) == [2, 10, 30])
    }

    @Test func theWidestColumnsAreNarrowedFirst() {
        let widths = Rendering.fit([2, 10, 300, 200], fixed: [false, false, false, false], into: 120)
        #expect(widths.count == 4)
        #expect(widths[0] == 2 && widths[1] == 10, "\(widths)")
        #expect(tableWidth(widths, leftOut: false) == 120, "\(widths)")
        #expect(abs(widths[2] - widths[3]) <= 1, "the two wide columns should share what is left: \(widths)")
    }

    @Test func fixedWidthsAreKeptAndColumnsThatCannotFitAreLeftOut() {
        let natural = Array(repeating: 40, count: 30)
        var fixed = Array(repeating: false, count: 30)
        fixed[0] = true
        let widths = Rendering.fit(natural, fixed: fixed, into: 100)
        #expect(widths.first == 40, "\(widths)")
        #expect(widths.count < 30, "\(widths)")
        #expect(widths.dropFirst().allSatisfy { $0 >= 4 }, "\(widths)")
        #expect(tableWidth(widths, leftOut: true) <= 100, "\(widths)")
    }

    /// The widths fitted in one pass are those of dropping the last column until the rest fit (the rule, written
    /// plainly here), on random columns; and a document of 100,000 fields is laid out.
    @Test func fittingInOnePassKeepsTheRule() throws {
        func plainly(_ natural: [Int], fixed: [Bool], into total: Int) -> Int {
            var kept = natural.count
            while kept > 0 {
                let budget = total - (3 * kept + 1) - (kept < natural.count ? 4 : 0)
                let least = (0..<kept).reduce(0) { $0 + (fixed[$1] ? natural[$1] : min(natural[$1], 4)) }
                if least <= budget { return kept }
                kept -= 1
            }
            return 0
        }
        var rng = ParserFuzzRandom(seed: 0xF17)
        for _ in 0..<2_000 {
            let count = Int.random(in: 0...30, using: &rng)
            let natural = (0..<count).map { _ in Int.random(in: 1...60, using: &rng) }
            let fixed = (0..<count).map { _ in Int.random(in: 0..<5, using: &rng) == 0 }
            let total = Int.random(in: 10...200, using: &rng)
            let widths = Rendering.fit(natural, fixed: fixed, into: total)
            #expect(widths.count == plainly(natural, fixed: fixed, into: total), "\(natural) \(fixed) into \(total)")
        }
        let wide = DocumentValue.object((1...100_000).map { .init("f\($0)", .int(Int64($0))) })
        let text = try Renderer(mode: .box).render([wide], fitting: 80)
        let lines = text.split(separator: "\n").map(String.init)
        #expect(lines.count == 6 && lines.dropLast().allSatisfy { $0.count <= 80 }, "\(lines)")
    }

    @Test func aTableCutToFitMarksItsCutCellsAndLeftOutColumns() throws {
        let long = String(repeating: "x", count: 100)
        let document = DocumentValue.object((1...12).map { .init("field\($0)", .string(long)) })
        let text = try Renderer(mode: .box).render([document], fitting: 80)
        let lines = text.split(separator: "\n").map(String.init)
        #expect(lines.dropLast().allSatisfy { $0.count <= 80 }, "\(text)")
        #expect(lines.dropLast().allSatisfy { $0.hasSuffix("│") || $0.hasSuffix("┐") || $0.hasSuffix("┤")
            || $0.hasSuffix("┘") }, "\(text)")
        #expect(lines[1].hasSuffix(" … │") && lines[3].contains("x… │"), "\(text)")
        #expect(lines.last?.hasPrefix("1 document (") == true && lines.last?.contains("did not fit") == true, "\(text)")
    }

    /// Control characters in stored names and values never reach the terminal as they are: a table shows each as an
    /// escape (`\u{1B}`), on its line; line mode keeps a value's lines and tabs, and escapes the rest. (CSV and JSON
    /// keep the data: CSV as it is, quoted; JSON escaped as JSON escapes.)
    @Test func controlCharactersAreShownNotSent() throws {
        let document = DocumentValue.object([
            .init("id", .int(1)),
            .init("title\u{1B}[2K", .string("clip\u{1B}]52;c;aGk=\u{7} up\u{1B}[1A\u{9B}2J\u{7F}")),
            .init("note", .string("two\nlines\tand\r\nmore")),
        ])
        func controls(_ text: String) -> [UInt32] {
            text.unicodeScalars.map(\.value).filter { $0 < 0x20 && $0 != 0x0A || (0x7F...0x9F).contains($0) }
        }
        for mode in [OutputMode.table, .box] {
            let text = try Renderer(mode: mode).render([document])
            #expect(controls(text).isEmpty, "\(mode): \(controls(text)) in\n\(text)")
            #expect(text.contains("title\\u{1B}[2K") && text.contains("clip\\u{1B}]52;c;aGk=\\u{7} up"), "\(text)")
            #expect(text.contains("two\\nlines\\tand\\r\\nmore"), "\(text)")
        }
        let lines = Renderer.lines(document)
        #expect(controls(lines).filter { $0 != 0x09 }.isEmpty, "\(controls(lines)) in\n\(lines)")
        #expect(lines.contains("two\nlines\tand\\r\nmore") && lines.contains("\\u{9B}2J\\u{7F}"), "\(lines)")
    }

    /// A key with a dot and a field nested at the same dotted path are two columns, named as CSV names them.
    @Test func aKeyWithADotAndANestedFieldAreTwoColumns() throws {
        let document = DocumentValue.object([.init("id", .int(1)), .init("a.b", .int(1)),
                                             .init("a", .object([.init("b", .int(2))]))])
        for mode in [OutputMode.table, .box] {
            let lines = try Renderer(mode: mode).render([document]).split(separator: "\n").map(String.init)
            let cells = { (line: String) in
                line.split(whereSeparator: { $0 == "|" || $0 == "│" }).map { $0.trimmingCharacters(in: .whitespaces) }
            }
            #expect(cells(lines[1]) == ["id", "`a.b`", "a.b"], "\(lines)")
            #expect(cells(lines[3]) == ["1", "1", "2"], "\(lines)")
        }
        #expect(try Renderer(mode: .csv).render([document]).hasPrefix("id,`a.b`,a.b\r\n1,1,2\r\n"))
    }

    @Test func wideCharactersAreCutByTheColumnsTheyTake() {
        #expect(Renderer.clip("日本語のテキスト", 7) == "日本語…")
        #expect(Renderer.width(Renderer.clip("日本語のテキスト", 7)) <= 7)
        #expect(Renderer.clip("short", 7) == "short")
    }
}
