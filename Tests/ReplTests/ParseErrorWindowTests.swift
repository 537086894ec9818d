// The line shown under an error: whole when it is short; of a very long line, a window around the mistake with the
// caret still under it.

import DocStore
import Foundation
import Testing
@testable import repl

@Suite struct ParseErrorWindowTests {
    @Test func aShortLineIsShownWhole() throws {
        let text = "people.include(age = 1)"
        let error = try #require(ParseFixture.failureOrNil(text))
        let lines = error.rendered(source: text).split(separator: "\n").map(String.init)
        #expect(lines[1] == "  " + text)
        #expect(lines[2] == "  " + String(repeating: " ", count: 19) + "^")
    }

    @Test func aLongLineIsCutAroundTheSpotAtBothEnds() {
        let line = Array((String(repeating: "a", count: 200) + "X" + String(repeating: "b", count: 200)).unicodeScalars)
        let window = ParseError.window(line, around: 200, marking: 1, within: 80)
        #expect(window.contains(200))
        #expect(window.count <= 77 && window.lowerBound > 0 && window.upperBound < line.count, "\(window)")
    }

    @Test func aSpotNearAnEndKeepsThatEndAndOneEllipsis() throws {
        let text = "people.sortby(age)" + String(repeating: " ", count: 10) + "// " + String(repeating: "c", count: 200)
        let error = try #require(ParseFixture.failureOrNil(text))
        let lines = error.rendered(source: text).split(separator: "\n").map(String.init)
        #expect(lines[1].hasPrefix("  people.sortby(age)") && lines[1].hasSuffix("…") && lines[1].count <= 84,
                "\(lines[1])")
        #expect(lines[2] == "         ^~~~~~", "\(lines[2])")

        let late = String(repeating: " ", count: 200) + "people.sortby(age)"
        let lateError = try #require(ParseFixture.failureOrNil(late))
        let shown = lateError.rendered(source: late).split(separator: "\n").map(String.init)
        #expect(shown[1].hasPrefix("  …") && shown[1].hasSuffix("people.sortby(age)") && shown[1].count <= 84,
                "\(shown[1])")
        let caret = try #require(shown[2].firstIndex(of: "^"))
        let sortby = try #require(shown[1].range(of: "sortby"))
        #expect(shown[2].distance(from: shown[2].startIndex, to: caret)
            == shown[1].distance(from: shown[1].startIndex, to: sortby.lowerBound), "\n\(shown[1])\n\(shown[2])")
    }

    @Test func wideCharactersBeforeTheSpotKeepTheCaretUnderIt() throws {
        let text = "people.include(name == \"" + String(repeating: "日本", count: 40) + "\" && age = 3)"
        let error = try #require(ParseFixture.failureOrNil(text))
        let lines = error.rendered(source: text).split(separator: "\n").map(String.init)
        let source = lines[1], caret = lines[2]
        #expect(Renderer.width(source) <= 84, "\(source)")
        // The caret sits under the '=' of "age = 3", counting two columns for each wide character.
        let before = try #require(source.range(of: "age = 3")).lowerBound
        #expect(Renderer.width(String(source[..<before])) + 4 == caret.count - 1, "\n\(source)\n\(caret)")
    }
}

extension ShellSessions {
@Suite struct ReplErrorWindowTests {
    @Test func anErrorOnAVeryLongLineShowsAWindowAroundTheCaret() throws {
        let sandbox = try ShellSandbox()
        try sandbox.prepare(ShellSandbox.threePeople)
        let many = String(repeating: #"name == "somebody" || "#, count: 20)
        let statement = "people.include(" + many + "age = 12 || " + many + #"name == "last")"#
        let result = try sandbox.run([sandbox.storePath, statement])
        #expect(result.status == 1, "\(result)")
        let lines = result.stderr.split(separator: "\n", omittingEmptySubsequences: false).map(String.init)
        try #require(lines.count >= 3, "\(result)")
        #expect(lines[0].hasPrefix("error at line 1, column \(15 + many.count + 5): '=' alone"), "\(lines[0])")
        let source = lines[1], caret = lines[2]
        #expect(source.count <= 2 + 80 + 2 && source.hasPrefix("  …") && source.hasSuffix("…"), "\(source)")
        let spot = try #require(source.range(of: "age = 12"), "\(source)")
        let column = source.distance(from: source.startIndex, to: spot.lowerBound) + 4
        #expect(caret == String(repeating: " ", count: column) + "^", "\n\(source)\n\(caret)")
    }
}
}

extension ParseFixture {
    /// The error a statement gives, or nil when it parses.
    static func failureOrNil(_ text: String) -> ParseError? {
        do {
            _ = try Parser.statement(text)
            return nil
        } catch {
            return error
        }
    }
}
