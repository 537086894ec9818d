// The Swift blocks of the README and the DocC articles are code that compiles: each appears, line for line, in
// Examples.swift of this target (which the tests build), so an example that no longer compiles, or one changed in
// the documents but not here, fails the tests.

import Foundation
import Testing

@Suite struct DocumentationTests {
    /// The package's folder, from this file's path.
    static let root = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
        .deletingLastPathComponent()

    /// The lines that count: trimmed, without blank lines and `import`s (which a function cannot hold).
    static func lines(_ text: some StringProtocol) -> [String] {
        text.split(separator: "\n", omittingEmptySubsequences: false)
            .map { $0.trimmingCharacters(in: .whitespaces) }
            .filter { !$0.isEmpty && !$0.hasPrefix("import ") }
    }

    /// The Swift blocks of a Markdown text.
    static func swiftBlocks(_ text: String) -> [String] {
        var blocks: [String] = []
        var current: [Substring]?
        for line in text.split(separator: "\n", omittingEmptySubsequences: false) {
            if current == nil, line.trimmingCharacters(in: .whitespaces) == "```swift" {
                current = []
            } else if current != nil, line.trimmingCharacters(in: .whitespaces) == "```" {
                blocks.append(current!.joined(separator: "\n"))
                current = nil
            } else {
                current?.append(line)
            }
        }
        return blocks
    }

    /// A block that is not Swift of the app (a package manifest's lines) is not compiled here.
    static func isManifest(_ block: String) -> Bool { block.hasPrefix("dependencies: [") }

    /// The Swift blocks of the doc comments of a source file (`/// ```swift` ... `/// ````), without the slashes.
    static func docCommentBlocks(_ text: String) -> [String] {
        let comments = text.split(separator: "\n", omittingEmptySubsequences: false).map { line -> String in
            let trimmed = line.trimmingCharacters(in: .whitespaces)
            guard trimmed.hasPrefix("///") else { return "" }
            return String(trimmed.dropFirst(3).drop { $0 == " " })
        }
        return swiftBlocks(comments.joined(separator: "\n"))
    }

    @Test func everySwiftBlockOfTheDocCommentsIsCompiledHere() throws {
        let sources = Self.root.appendingPathComponent("Sources/DocStore")
        let examples = Self.lines(try String(contentsOf: Self.root.appendingPathComponent(
            "Tests/DocumentationTests/CodeExamples.swift"), encoding: .utf8))
        var checked = 0
        for case let file as String in FileManager.default.enumerator(atPath: sources.path) ?? .init()
        where file.hasSuffix(".swift") {
            let text = try String(contentsOf: sources.appendingPathComponent(file), encoding: .utf8)
            for block in Self.docCommentBlocks(text) {
                let wanted = Self.lines(block)
                guard !wanted.isEmpty else { continue }
                let found = examples.indices.contains { start in
                    start + wanted.count <= examples.count && Array(examples[start..<start + wanted.count]) == wanted
                }
                #expect(found, "a Swift block of \(file)'s doc comments is not in CodeExamples.swift as written:\n\(block)")
                checked += 1
            }
        }
        #expect(checked >= 40, "only \(checked) blocks were found")
    }

    /// The one-line examples of a source file's doc comments: the code after `For example:`, in backticks.
    static func inlineExamples(_ text: String) -> [String] {
        var examples: [String] = []
        var paragraph: [String] = []
        func flush() {
            let joined = paragraph.joined(separator: " ")
            var rest = joined[...]
            while let marker = rest.range(of: "For example:") {
                rest = rest[marker.upperBound...].drop { $0 == " " }
                guard rest.first == "`", let end = rest.dropFirst().firstIndex(of: "`") else { continue }
                examples.append(String(rest[rest.index(after: rest.startIndex)..<end]))
                rest = rest[end...]
            }
            paragraph = []
        }
        for line in text.split(separator: "\n", omittingEmptySubsequences: false) {
            let trimmed = line.trimmingCharacters(in: .whitespaces)
            guard trimmed.hasPrefix("///") else { flush(); continue }
            let comment = trimmed.dropFirst(3).trimmingCharacters(in: .whitespaces)
            if comment.isEmpty || comment.hasPrefix("```") { flush() } else { paragraph.append(comment) }
        }
        flush()
        return examples
    }

    @Test func everyOneLineExampleOfTheDocCommentsIsCompiledHere() throws {
        let sources = Self.root.appendingPathComponent("Sources/DocStore")
        let examples = try String(contentsOf: Self.root.appendingPathComponent(
            "Tests/DocumentationTests/CodeExamples.swift"), encoding: .utf8)
        var checked = 0
        for case let file as String in FileManager.default.enumerator(atPath: sources.path) ?? .init()
        where file.hasSuffix(".swift") {
            let text = try String(contentsOf: sources.appendingPathComponent(file), encoding: .utf8)
            for example in Self.inlineExamples(text) {
                let found = examples.contains(example)
                #expect(found, "a one-line example of \(file) is not in CodeExamples.swift: \(example)")
                checked += 1
            }
        }
        #expect(checked >= 40, "only \(checked) examples were found")
    }

    @Test func everySwiftBlockOfTheDocumentsIsCompiledHere() throws {
        let documents = ["README.md"] + (try FileManager.default.contentsOfDirectory(
            atPath: Self.root.appendingPathComponent("Sources/DocStore/DocStore.docc").path)
            .filter { $0.hasSuffix(".md") }.sorted().map { "Sources/DocStore/DocStore.docc/" + $0 })
        let examples = Self.lines(try String(contentsOf: Self.root.appendingPathComponent(
            "Tests/DocumentationTests/Examples.swift"), encoding: .utf8))
        var checked = 0
        for document in documents {
            let text = try String(contentsOf: Self.root.appendingPathComponent(document), encoding: .utf8)
            for block in Self.swiftBlocks(text) where !Self.isManifest(block) {
                let wanted = Self.lines(block)
                guard !wanted.isEmpty else { continue }
                let found = examples.indices.contains { start in
                    start + wanted.count <= examples.count && Array(examples[start..<start + wanted.count]) == wanted
                }
                #expect(found, "a Swift block of \(document) is not in Examples.swift as written:\n\(block)")
                checked += 1
            }
        }
        #expect(checked >= 20, "only \(checked) blocks were found")
    }
}
