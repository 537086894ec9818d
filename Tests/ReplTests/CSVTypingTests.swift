// How `.import` reads CSV: a column is typed only when every cell of it reads as a value written as it prints, so
// that no text is ever changed into a number; missing values, dates, and rows that do not fit the header.

import DocStore
import Foundation
import Testing
@testable import repl

@Suite struct CSVTypingTests {
    private func documents(_ text: String, null: String? = nil, dates: [FieldPath] = []) throws -> [DocumentValue] {
        try CSV.documents(text, origin: "test.csv", reading: CSV.Reading(nullMarker: null, dates: Set(dates)))
    }

    private func column(_ name: String, _ docs: [DocumentValue]) -> [DocumentValue?] {
        docs.map { $0[path: FieldPath(name)] }
    }

    @Test func textThatLooksLikeANumberKeepsItsColumnText() throws {
        // The airports file's iata codes, zip codes with leading zeros, exponents, a plus sign.
        let docs = try documents("iata,zip,code,big,signed\nMOR,00501,007,1e5,+3\n0E0,12345,42,2,4\n0E8,90210,1,3,5\n")
        #expect(column("iata", docs) == [.string("MOR"), .string("0E0"), .string("0E8")])
        #expect(column("zip", docs) == [.string("00501"), .string("12345"), .string("90210")])
        #expect(column("code", docs) == [.string("007"), .string("42"), .string("1")])
        #expect(column("big", docs) == [.string("1e5"), .string("2"), .string("3")])
        #expect(column("signed", docs) == [.string("+3"), .string("4"), .string("5")])
    }

    @Test func columnsOfNumbersAsTheyPrintAreNumbers() throws {
        let docs = try documents("n,x,neg\n1,2.5,-3\n20,0.00001,-0.5\n300,10.0,0\n")
        #expect(column("n", docs) == [.int(1), .int(20), .int(300)])
        #expect(column("x", docs) == [.double(2.5), .double(0.00001), .double(10)])
        #expect(column("neg", docs) == [.int(-3), .double(-0.5), .int(0)])
    }

    @Test func moreDigitsThanADoubleHoldsKeepTheColumnText() throws {
        let docs = try documents("pi\n3.14159265358979323846\n1.5\n")
        #expect(column("pi", docs) == [.string("3.14159265358979323846"), .string("1.5")])
    }

    @Test func emptyCellsAndTheNullMarkerAreNilSoANumericColumnWithGapsStaysNumeric() throws {
        let text = "mass,sex,comment\n3750,MALE,\nNA,NA,\"NA\"\n,FEMALE,\"\"\n"
        let docs = try documents(text, null: "NA")
        #expect(column("mass", docs) == [.int(3750), .null, .null])
        #expect(column("sex", docs) == [.string("MALE"), .null, .string("FEMALE")])
        // A quoted cell is text as written, the marker and the empty text too.
        #expect(column("comment", docs) == [.null, .string("NA"), .string("")])
        // Without the marker, NA is text and the column with it stays text.
        let plain = try documents(text)
        #expect(column("mass", plain) == [.string("3750"), .string("NA"), .null])
    }

    @Test func dateColumnsAreReadAsDatesAndABadOneNamesItsRow() throws {
        let docs = try documents("day,note\n2014-01-01,a\n2014-01-02T10:30:00Z,b\n,c\n", dates: ["day"])
        let first = try #require(Parser.date("2014-01-01"))
        #expect(column("day", docs)[0] == .date(first))
        #expect(column("day", docs)[2] == .null)
        #expect(column("note", docs) == [.string("a"), .string("b"), .string("c")])
        #expect(throws: ShellError.self) { try documents("day\n2014-01-01\nyesterday\n", dates: ["day"]) }
        do {
            _ = try documents("day\n2014-01-01\nyesterday\n", dates: ["day"])
        } catch let error as ShellError {
            #expect(error.description.contains("row 3"), "\(error)")
            #expect(error.description.contains("yesterday"), "\(error)")
        }
        // A date column the header does not have is an error, not nothing.
        #expect(throws: ShellError.self) { try documents("day\n2014-01-01\n", dates: ["days"]) }
        // Without --dates, an ISO 8601 day stays text: only DocStore's own printed form is read as a date.
        #expect(column("day", try documents("day\n2014-01-01\n")) == [.string("2014-01-01")])
        let printed = "2014-01-01T00:00:00.000Z"
        #expect(column("day", try documents("day\n\(printed)\n")) == [.date(first)])
    }

    @Test func shortAndLongRowsAreRefusedWithTheirNumber() throws {
        for text in ["a,b,c\n1,2,3\n4,5\n", "a,b,c\n1,2,3\n4,5,6,7\n"] {
            do {
                _ = try documents(text)
                Issue.record("\(text.debugDescription) was accepted")
            } catch let error as ShellError {
                #expect(error.description.contains("row 3"), "\(error)")
            }
        }
    }

    @Test func aDuplicatedHeaderIsRefusedNamingIt() throws {
        do {
            _ = try documents("a,a,b\n1,2,3\n")
            Issue.record("a duplicated header was accepted")
        } catch let error as ShellError {
            #expect(error.description.contains("'a' twice"), "\(error)")
            #expect(error.description.contains("columns 1 and 2"), "\(error)")
        }
    }

    @Test func headersWithSpacesAndPunctuationAreFieldNames() throws {
        let docs = try documents("Individual ID,Body Mass (g)\nN1A1,3750\n")
        #expect(docs[0][field: "Individual ID"] == .string("N1A1"))
        #expect(docs[0][field: "Body Mass (g)"] == .int(3750))
    }

    /// Random columns of number-like, word, true/false and empty cells: each column is typed exactly when every
    /// cell is written as its value prints, checked against a plain reading of that rule.
    @Test func randomColumnsAreTypedByTheRule() throws {
        var rng = ParserFuzzRandom(seed: 0xC5F)
        let canonical = ["0", "7", "-12", "340", "2.5", "-0.25", "10.0", "0.001", "9007199254740993", "true", "false"]
        let odd = ["007", "1e5", "0E0", "+3", "1.", ".5", "1,5", "Oslo", "NaN", "inf", "0x1F", "-", "1.2.3", " 4"]
        for _ in 0..<200 {
            let columns = Int.random(in: 1...4, using: &rng)
            let rows = Int.random(in: 1...6, using: &rng)
            var cells = [[String]](repeating: [], count: rows)
            var expectTyped: [Bool] = []
            for _ in 0..<columns {
                let pool = Bool.random(using: &rng) ? canonical : canonical + odd
                var typed = true
                for r in 0..<rows {
                    // (A row of one empty cell would be a blank line, which CSV readers skip.)
                    let empty = columns > 1 && Int.random(in: 0..<5, using: &rng) == 0
                    let cell = empty ? "" : pool.randomElement(using: &rng)!
                    // A quoted cell (one with a comma or a leading space) is text and types nothing.
                    if odd.contains(cell) && !cell.contains(",") && !cell.hasPrefix(" ") { typed = false }
                    cells[r].append(cell)
                }
                expectTyped.append(typed)
            }
            let header = (0..<columns).map { "c\($0)" }
            let text = ([header] + cells).map { $0.map { $0.contains(",") || $0.hasPrefix(" ") ? "\"\($0)\"" : $0 }
                .joined(separator: ",") }.joined(separator: "\n") + "\n"
            let docs = try documents(text)
            try #require(docs.count == rows)
            for (c, name) in header.enumerated() {
                for r in 0..<rows {
                    let raw = cells[r][c]
                    let got = docs[r][field: name]
                    if raw.isEmpty { #expect(got == .null, "\(text)"); continue }
                    // A quoted cell (here those with a comma or a leading space) is always text.
                    if !expectTyped[c] || raw.contains(",") || raw.hasPrefix(" ") {
                        #expect(got == .string(raw), "column \(name) of\n\(text)")
                        continue
                    }
                    switch raw {
                    case "true", "false": #expect(got == .bool(raw == "true"), "\(text)")
                    default:
                        if raw.contains(".") {
                            #expect(got == .double(Double(raw)!), "\(raw) in\n\(text)")
                        } else {
                            #expect(got == .int(Int64(raw)!), "\(raw) in\n\(text)")
                        }
                    }
                }
            }
        }
    }

    @Test func trailingZerosAndQuotedJSONLookingTextStayText() throws {
        // 2.50 would print as 2.5: the column keeps what was written.
        #expect(column("v", try documents("v\n2.50\n1.5\n")) == [.string("2.50"), .string("1.5")])
        // Quoted text that looks like JSON, beside plain text, is text.
        let docs = try documents("p\n\"{\"\"a\"\":1}\"\nplain\n")
        #expect(column("p", docs) == [.string(#"{"a":1}"#), .string("plain")])
        // A column of JSON lists and objects (how lists are written) is read as JSON, dates included.
        let json = try documents("t\n\"[1,2]\"\n\"{\"\"$date\"\":\"\"2024-05-01T00:00:00.000Z\"\"}\"\n\"\"\"x\"\"\"\n\n")
        #expect(column("t", json) == [.array([.int(1), .int(2)]), .date(Parser.date("2024-05-01")!), .string("x")])
    }

    /// Random documents written as `.export` writes CSV, then read back: the same documents, a missing field
    /// coming back as nil, whatever the values look like.
    @Test func randomDocumentsComeBackFromCSVAsTheyWent() throws {
        var rng = ParserFuzzRandom(seed: 0xC5A)
        let texts = ["Oslo", "007", "0E0", "1e5", "2.50", "+3", "true", "nil", "null", "", " padded ", "a,b", "line\nbreak",
                     "say \"hi\"", "[1]", #"{"a":1}"#, #"{"$date":"2024-05-01T00:00:00.000Z"}"#, "2024-05-01T00:00:00.000Z",
                     "\"quoted\"", "NA", "-", "1.", "5"]
        func value(_ depth: Int) -> DocumentValue {
            switch Int.random(in: 0..<(depth > 1 ? 8 : 10), using: &rng) {
            case 0: return .null
            case 1: return .int(Int64.random(in: -1_000_000...1_000_000, using: &rng))
            case 2: return .double(Double(Int.random(in: -100_000...100_000, using: &rng)) / 64)
            case 3: return .bool(Bool.random(using: &rng))
            case 4: return .date(Date(timeIntervalSince1970: Double(Int.random(in: 0...2_000_000_000, using: &rng))))
            case 5, 6, 7: return .string(texts.randomElement(using: &rng)!)
            case 8: return .array((0..<Int.random(in: 0...3, using: &rng)).map { _ in value(depth + 1) })
            default: return .object([("k", value(depth + 1))])
            }
        }
        let names = ["a", "b", "U.S. price", "Body Mass (g)", "c"]
        for _ in 0..<150 {
            // One kind of value per column for some columns, any kind for others.
            var documents: [DocumentValue] = []
            let count = Int.random(in: 1...6, using: &rng)
            let fixedKinds = names.map { _ in Bool.random(using: &rng) ? Optional(value(0)) : nil }
            for _ in 0..<count {
                var fields: [DocumentValue.Field] = []
                for (i, name) in names.enumerated() where Int.random(in: 0..<5, using: &rng) > 0 {
                    var v = value(0)
                    if let fixed = fixedKinds[i], Bool.random(using: &rng) { v = fixed }
                    fields.append(.init(name, v))
                }
                documents.append(.object(fields))
            }
            var columns = CSV.Columns()
            for d in documents { columns.add(d) }
            let text = columns.header + documents.map(columns.row).joined()
            guard !columns.names.isEmpty else { continue }
            let back = try CSV.documents(text, origin: "round trip")
            try #require(back.count == documents.count, "\(text)")
            for (original, read) in zip(documents, back) {
                // Every value comes back as it was; a missing field, or a nil one, comes back nil or missing (CSV
                // cannot tell them apart, nor an object whose fields are all nil from a nil).
                func isNil(_ value: DocumentValue?) -> Bool {
                    switch value {
                    case nil, .null?: return true
                    case .object(let fields)?: return fields.allSatisfy { isNil($0.value) }
                    default: return false
                    }
                }
                for name in columns.names {
                    let path = CSV.path(ofColumn: name)
                    let got = read[path: path]
                    if let expected = original[path: path], !isNil(expected) {
                        #expect(got == expected, "\(name) of \(original.json())\nread \(read.json())\nfrom\n\(text)")
                    } else {
                        #expect(isNil(got), "\(name) of \(original.json())\nread \(read.json())")
                    }
                }
            }
        }
    }

    @Test func numbersAreExportedWithoutAnExponentAndReadBackTheSame() {
        var rng = ParserFuzzRandom(seed: 0xD0B)
        var values: [Double] = [0.00001, 1e21, -1e-7, 123456789.125, 1e15, .leastNonzeroMagnitude, .greatestFiniteMagnitude, 0.1, -0.0]
        for _ in 0..<2_000 {
            values.append(Double(bitPattern: rng.next() & 0x7FEF_FFFF_FFFF_FFFF) * (Bool.random(using: &rng) ? 1 : -1))
            values.append(Double(Int.random(in: -1_000_000...1_000_000, using: &rng)) / 1024)
        }
        for d in values where d.isFinite {
            let cell = CSV.plain(d)
            #expect(!cell.contains("e") && !cell.contains("E"), "\(d) written as \(cell)")
            guard case .number(let back) = CSV.Kind.of(cell) else {
                Issue.record("\(d) written as \(cell) does not read back as a number")
                continue
            }
            #expect(back == .double(d) || (d == 0 && back == .double(0)), "\(d) written as \(cell) read back as \(back)")
        }
    }
}
