// How `.import` reads CSV: a column is typed only when every cell of it reads as a number (in any form that loses no
// digit), true/false or a printed date, so that no text is ever changed into a number; missing values, dates, the
// columns given to --number and --text, and rows that do not fit the header.

import DocStore
import Foundation
import Testing
@testable import repl

@Suite struct CSVTypingTests {
    private func documents(_ text: String, null: String? = nil, dates: [FieldPath] = [], format: String? = nil,
                           numbers: [FieldPath] = [], texts: [FieldPath] = []) throws -> [DocumentValue] {
        try CSV.documents(text, origin: "test.csv", reading: reading(null: null, dates: dates, format: format,
                                                                     numbers: numbers, texts: texts))
    }

    private func reading(null: String? = nil, dates: [FieldPath] = [], format: String? = nil, numbers: [FieldPath] = [],
                         texts: [FieldPath] = []) throws -> CSV.Reading {
        CSV.Reading(nullMarker: null, dates: Set(dates), dateFormat: try format.map(DateTextFormat.init),
                    numbers: Set(numbers), texts: Set(texts))
    }

    private func column(_ name: String, _ docs: [DocumentValue]) -> [DocumentValue?] {
        docs.map { $0[path: FieldPath(name)] }
    }

    @Test func textThatLooksLikeANumberKeepsItsColumnText() throws {
        // The airports file's iata codes, zip codes with leading zeros, a plus sign; an exponent is a number.
        let text = "iata,zip,code,big,signed\nMOR,00501,007,1e5,+3\n0E0,12345,42,2,4\n0E8,90210,1,3,5\n"
        let (docs, plan) = try CSV.importing(text, origin: "test.csv", reading: CSV.Reading())
        #expect(column("iata", docs) == [.string("MOR"), .string("0E0"), .string("0E8")])
        #expect(column("zip", docs) == [.string("00501"), .string("12345"), .string("90210")])
        #expect(column("code", docs) == [.string("007"), .string("42"), .string("1")])
        #expect(column("big", docs) == [.double(100_000), .int(2), .int(3)])
        #expect(column("signed", docs) == [.string("+3"), .string("4"), .string("5")])
        // Each column kept as text is named, with the first cell that kept it so.
        #expect(plan.keptText == [CSV.KeptText(column: "iata", row: 2, text: "MOR"),
                                  CSV.KeptText(column: "zip", row: 2, text: "00501"),
                                  CSV.KeptText(column: "code", row: 2, text: "007"),
                                  CSV.KeptText(column: "signed", row: 2, text: "+3")])
        // A column of words alone is not named: nothing in it was a number.
        #expect(try CSV.importing("w\nOslo\nBergen\n", origin: "t", reading: CSV.Reading()).plan.keptText.isEmpty)
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

    /// Random columns of numbers in many forms, words, true/false and empty cells: each column is typed exactly when
    /// every cell is a number, true/false or empty, checked against an oracle of its own: a regular expression for
    /// the form, and Foundation's Decimal for whether the Double keeps every digit written.
    @Test func randomColumnsAreTypedByTheRule() throws {
        var rng = ParserFuzzRandom(seed: 0xC5F)
        let numbers = ["0", "7", "-12", "340", "2.5", "-0.25", "10.0", "0.001", "9007199254740993", "1e3", "1E+03",
                       "-0.5", "2.50", "48.053808600000004", "1013.3", "4.8e-05", "-2E-3", "0.0", "true", "false",
                       "inf", "-inf", "nan", "NaN", "Infinity", "3.14159265358979323846", "1.0000000000000001", "1e400",
                       "0.10000000000000001", "0.30000000000000004"]
        let words = ["007", "0150", "+3", "1.", ".5", "1,5", "Oslo", "0x1F", "-", "1.2.3", " 4", "N14228", "e5", "1e",
                     "--1", "-nan", "1_000"]
        let form = try NSRegularExpression(pattern: "^-?(0|[1-9][0-9]*)(\\.[0-9]+)?([eE][+-]?[0-9]+)?$")
        func oracle(_ raw: String) -> DocumentValue? {
            switch raw.lowercased() {
            case "true", "false": return .bool(raw == "true")
            case "inf", "infinity": return .double(.infinity)
            case "-inf", "-infinity": return .double(-.infinity)
            case "nan": return .double(.nan)
            default: break
            }
            guard form.firstMatch(in: raw, range: NSRange(raw.startIndex..., in: raw)) != nil else { return nil }
            if !raw.contains(where: { ".eE".contains($0) }) { return Int64(raw).map { .int($0) } }
            // The digits of the Double's shortest form or of its 17 significant digits.
            guard let d = Double(raw), d.isFinite, let decimal = Decimal(string: raw),
                  decimal == Decimal(string: "\(d)") || decimal == Decimal(string: String(format: "%.17g", d))
            else { return nil }
            return .double(d)
        }
        func same(_ a: DocumentValue?, _ b: DocumentValue?) -> Bool {
            if case .double(let x)? = a, case .double(let y)? = b, x.isNaN && y.isNaN { return true }
            return a == b
        }
        for _ in 0..<300 {
            let columns = Int.random(in: 1...4, using: &rng)
            let rows = Int.random(in: 1...6, using: &rng)
            var cells = [[String]](repeating: [], count: rows)
            for _ in 0..<columns {
                let pool = Int.random(in: 0..<3, using: &rng) == 0 ? numbers + words : numbers
                for r in 0..<rows {
                    // (A row of one empty cell would be a blank line, which CSV readers skip.)
                    let empty = columns > 1 && Int.random(in: 0..<5, using: &rng) == 0
                    cells[r].append(empty ? "" : pool.randomElement(using: &rng)!)
                }
            }
            let header = (0..<columns).map { "c\($0)" }
            // A cell with a comma or a leading space is quoted, and so text, which types nothing.
            func quoted(_ cell: String) -> Bool { cell.contains(",") || cell.hasPrefix(" ") }
            let text = ([header] + cells).map { $0.map { quoted($0) ? "\"\($0)\"" : $0 }
                .joined(separator: ",") }.joined(separator: "\n") + "\n"
            let docs = try documents(text)
            try #require(docs.count == rows)
            for (c, name) in header.enumerated() {
                let typed = (0..<rows).allSatisfy { r in
                    let raw = cells[r][c]
                    return raw.isEmpty || quoted(raw) || oracle(raw) != nil
                }
                for r in 0..<rows {
                    let raw = cells[r][c]
                    let got = docs[r][field: name]
                    if raw.isEmpty { #expect(got == .null, "\(text)"); continue }
                    let expected = typed && !quoted(raw) ? oracle(raw) : .string(raw)
                    #expect(same(got, expected), "\(raw) in column \(name) of\n\(text)")
                }
            }
        }
    }

    @Test func numbersInAnyFormThatKeepsTheirDigitsAreNumbers() throws {
        let docs = try documents("pressure,lat\n1013.3,48.053808600000004\n1e3,-0.5\n1E+03,61.5\n2.50,\n")
        #expect(column("pressure", docs) == [.double(1013.3), .double(1000), .double(1000), .double(2.5)])
        #expect(column("lat", docs) == [.double(48.053808600000004), .double(-0.5), .double(61.5), .null])
        // One more digit than the Double holds: the column keeps the text, as written.
        #expect(column("x", try documents("x\n1.0000000000000001\n2\n")) == [.string("1.0000000000000001"), .string("2")])
    }

    @Test func numberAndTextOverrideTheTypingOfTheirColumns() throws {
        let text = "zip,code,n\n0150,+3,1\n12345,.5,\"2\"\n"
        let docs = try documents(text, numbers: ["zip", "code"], texts: ["n"])
        #expect(column("zip", docs) == [.int(150), .int(12345)])
        #expect(column("code", docs) == [.int(3), .double(0.5)])
        #expect(column("n", docs) == [.string("1"), .string("2")])
        // A cell of a --number column that is no number is an error naming its row and text.
        do {
            _ = try documents("zip\n0150\nN/A\n", numbers: ["zip"])
            Issue.record("a --number column with a word was accepted")
        } catch let error as ShellError {
            #expect(error.description.contains("row 3") && error.description.contains("N/A"), "\(error)")
        }
        #expect(throws: ShellError.self) { try documents("zip\n1\n", numbers: ["zips"]) }
        #expect(throws: ShellError.self) { try documents("zip\n1\n", numbers: ["zip"], texts: ["zip"]) }
    }

    @Test func dateColumnsReadTheirFormat() throws {
        let docs = try documents("day,note\nJan 5 2013,a\nDec 31 2013,b\n,c\n", dates: ["day"], format: "MMM d yyyy")
        #expect(column("day", docs) == [.date(Date(timeIntervalSince1970: 1_357_344_000)),
                                        .date(Date(timeIntervalSince1970: 1_388_448_000)), .null])
        let slashed = try documents("day\n2013/01/05\n", dates: ["day"], format: "yyyy/MM/dd")
        #expect(column("day", slashed) == [.date(Date(timeIntervalSince1970: 1_357_344_000))])
        // A zone in the format is read from the text.
        let zoned = try documents("at\n2013/01/05 10:00 +0100\n", dates: ["at"], format: "yyyy/MM/dd HH:mm Z")
        #expect(column("at", zoned) == [.date(Date(timeIntervalSince1970: 1_357_376_400))])
        do {
            _ = try documents("day\nJan 5 2013\n2013-01-06\n", dates: ["day"], format: "MMM d yyyy")
            Issue.record("a date in another format was accepted")
        } catch let error as ShellError {
            #expect(error.description.contains("row 3") && error.description.contains("2013-01-06")
                    && error.description.contains("MMM d yyyy"), "\(error)")
        }
        // A format that cannot read a whole date back is refused.
        #expect(throws: DateFormatError.self) { try DateTextFormat("MM/dd") }
    }

    @Test func quotedJSONLookingTextStaysText() throws {
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
                     "\"quoted\"", "NA", "-", "1.", "5", "a\r\nb", "x,\u{301}y", "\"\u{301}", " \u{301}lead", "end\r\n"]
        // The name of nested fields, one per file (CSV cannot tell a missing field from a nil one).
        var nestedName = "k"
        func value(_ depth: Int) -> DocumentValue {
            switch Int.random(in: 0..<(depth > 1 ? 8 : 10), using: &rng) {
            case 0: return .null
            case 1: return .int(Int64.random(in: -1_000_000...1_000_000, using: &rng))
            case 2: return .double(Double(Int.random(in: -100_000...100_000, using: &rng)) / 64)
            case 3: return .bool(Bool.random(using: &rng))
            case 4:
                // Whole seconds, or with a fraction finer than a millisecond (as `Date()` has).
                let seconds = Double(Int.random(in: 0...2_000_000_000, using: &rng))
                return .date(Date(timeIntervalSince1970: Bool.random(using: &rng) ? seconds : seconds + 0.123_456_7))
            case 5 where Bool.random(using: &rng):
                // A UUID, bytes or an unsigned integer past Int64 (written as JSON, beside text or dates).
                switch Int.random(in: 0..<3, using: &rng) {
                case 0: return .uuid(UUID(uuid: (1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, UInt8.random(in: 0...255, using: &rng))))
                case 1: return .bytes([0, 255, UInt8.random(in: 0...255, using: &rng)])
                default: return .uint(UInt64(Int64.max) + UInt64.random(in: 1...1_000, using: &rng))
                }
            case 5, 6, 7: return .string(texts.randomElement(using: &rng)!)
            case 8: return .array((0..<Int.random(in: 0...3, using: &rng)).map { _ in value(depth + 1) })
            default: return .object([(nestedName, value(depth + 1))])
            }
        }
        let names = ["a", "b", "U.S. price", "Body Mass (g)", "c", "user-agent", " padded ", "a`b", "$0"]
        for _ in 0..<150 {
            // One kind of value per column for some columns, any kind for others.
            var documents: [DocumentValue] = []
            nestedName = ["k", "v1.0", "`q", "$0"].randomElement(using: &rng)!
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

    /// Text handed over a few bytes at a time.
    private struct Trickle: CSVBytes {
        var bytes: [UInt8]
        var rng: ParserFuzzRandom
        mutating func nextBlock() throws -> [UInt8] {
            let n = min(bytes.count, Int.random(in: 1...7, using: &rng))
            defer { bytes.removeFirst(n) }
            return Array(bytes.prefix(n))
        }
    }

    /// Rows whose quotes, CRLFs, multi-byte letters and byte order mark fall across the blocks of the file read the
    /// same as from one block.
    @Test func rowsReadTheSameWhateverTheBlocks() throws {
        let text = "\u{FEFF}name,note\r\n\"Ann \"\"A\"\"\",\"two\r\nlines\"\r\nTromsø,\r\n\r\nØ,\"\"\nlast,row"
        func rows<Source: CSVBytes>(_ source: Source) throws -> [[CSV.Cell]] {
            var reader = CSVRows(source, origin: "t")
            var out: [[CSV.Cell]] = []
            while let (cells, _) = try reader.next() { out.append(cells) }
            return out
        }
        let whole = try rows(CSVTextBytes(text: text))
        #expect(whole.map { $0.map(\.text) } == [["name", "note"], ["Ann \"A\"", "two\r\nlines"], ["Tromsø", ""],
                                                 ["Ø", ""], ["last", "row"]])
        #expect(whole[3][1].quoted && !whole[2][1].quoted)
        for seed in 0..<50 {
            #expect(try rows(Trickle(bytes: Array(text.utf8), rng: ParserFuzzRandom(seed: UInt64(seed)))) == whole)
        }
        // A byte order mark before a quoted header (as Windows PowerShell's Export-Csv writes it).
        let quotedHeader = "\u{FEFF}\"id\",\"name\"\r\n\"1\",\"Ann\"\r\n"
        let quotedRows = try rows(CSVTextBytes(text: quotedHeader))
        #expect(quotedRows.map { $0.map(\.text) } == [["id", "name"], ["1", "Ann"]])
        for seed in 0..<20 {
            #expect(try rows(Trickle(bytes: Array(quotedHeader.utf8), rng: ParserFuzzRandom(seed: UInt64(seed)))) == quotedRows)
        }
        var lines = FileLines(Trickle(bytes: Array("a\r\nbø\n\nc".utf8), rng: ParserFuzzRandom(seed: 9)), origin: "t")
        var read: [String] = []
        while let line = try lines.next() { read.append(line) }
        #expect(read == ["a", "bø", "", "c"])
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
            #expect(back.value == .double(d) || (d == 0 && back.value == .double(0)),
                    "\(d) written as \(cell) read back as \(back)")
        }
    }
}

@Suite struct CSVLenientNumberTests {
    /// `--number` reads a number whatever its form, more digits than a Double keeps included (the nearest Double).
    @Test func numberColumnsTakeEveryFormOfANumber() {
        for (text, value) in [("3.14159265358979323846", 3.14159265358979323846), ("+3", 3.0), (".5", 0.5), ("0150", 150.0),
                              ("1.0000000000000001", 1.0)] {
            switch CSV.number(text, lenient: true) {
            case .double(let d)?: #expect(d == value, "\(text)")
            case .integer(let i)?: #expect(i == .int(Int64(value)), "\(text)")
            case nil: Issue.record("\(text) is no number under --number")
            }
        }
        #expect(CSV.number("3.14159265358979323846") == nil)
    }
}
