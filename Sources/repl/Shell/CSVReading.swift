import DocStore
import Foundation

/// The bytes of a CSV text, from a file read in blocks or from text in memory.
protocol CSVBytes {
    /// The next block of bytes, or an empty one at the end.
    mutating func nextBlock() throws -> [UInt8]
}

/// A file read a block at a time through a POSIX descriptor: memory for one block, whatever the file's size.
final class CSVFileBytes: CSVBytes {
    private let fd: Int32
    private let path: String
    private static let blockSize = 1 << 20

    init(path: String) throws {
        fd = open(path, O_RDONLY)
        guard fd >= 0 else { throw ShellError("cannot read \(path): \(String(cString: strerror(errno)))") }
        self.path = path
    }

    deinit { close(fd) }

    func nextBlock() throws -> [UInt8] {
        var block = [UInt8](repeating: 0, count: Self.blockSize)
        while true {
            let n = block.withUnsafeMutableBytes { read(fd, $0.baseAddress, $0.count) }
            if n < 0 && errno == EINTR { continue }
            guard n >= 0 else { throw ShellError("cannot read \(path): \(String(cString: strerror(errno)))") }
            block.removeSubrange(n...)
            return block
        }
    }
}

/// Text in memory, as one block.
struct CSVTextBytes: CSVBytes {
    var text: String?
    mutating func nextBlock() throws -> [UInt8] {
        defer { text = nil }
        return text.map { Array($0.utf8) } ?? []
    }
}

/// The bytes of a source, a block at a time: `block[at]` is the next one.
struct ByteBlocks<Source: CSVBytes> {
    private var source: Source
    private(set) var block: [UInt8] = []
    var at = 0
    private var ended = false
    private var started = false

    init(_ source: Source) { self.source = source }

    /// Whether there is a next byte, reading the next block when this one is used up. A byte order mark at the start
    /// is skipped, however the first blocks fall, before any byte is read (a quote after it opens a quoted cell).
    mutating func hasMore() throws -> Bool {
        if !started {
            started = true
            var first: [UInt8] = []
            while first.count < 3 {
                let more = try source.nextBlock()
                if more.isEmpty { break }
                first += more
            }
            block = first
            at = first.starts(with: [0xEF, 0xBB, 0xBF]) ? 3 : 0
            ended = first.isEmpty
        }
        if at < block.count { return true }
        guard !ended else { return false }
        block = try source.nextBlock()
        at = 0
        ended = block.isEmpty
        return !ended
    }
}

/// The rows of a CSV text (RFC 4180), one at a time, each a list of cells: a quoted cell may hold commas, quotes
/// (doubled) and line breaks; a line ends in LF, CRLF or CR; a blank line is no row.
struct CSVRows<Source: CSVBytes> {
    private var bytes: ByteBlocks<Source>
    private var cell: [UInt8] = []
    /// The bits of the cell's bytes together: below 0x80, it is ASCII.
    private var cellBits: UInt8 = 0
    /// How many cells the last row had, to make room for as many.
    private var width = 0
    private let origin: String
    /// The line the next row starts on.
    private(set) var line = 1

    init(_ source: Source, origin: String) {
        bytes = ByteBlocks(source)
        self.origin = origin
    }

    private mutating func take(quoted: Bool, into row: inout [CSV.Cell]) throws {
        let text: String
        if cellBits < 0x80 {
            text = String(decoding: cell, as: UTF8.self)   // ASCII, which needs no checking
        } else {
            guard let checked = String(validating: cell, as: UTF8.self) else {
                throw ShellError("\(origin): line \(line) holds bytes that are not UTF-8 text")
            }
            text = checked
        }
        row.append(CSV.Cell(text: text, quoted: quoted))
        cell.removeAll(keepingCapacity: true)
        cellBits = 0
    }

    /// Moves the bytes before the next of `stop`s in the block into the cell; whether it stopped at one (else the
    /// block ended first).
    private mutating func copy(until stops: (UInt8, UInt8, UInt8, UInt8)) -> Bool {
        let from = bytes.at
        var bits: UInt8 = 0
        let end = bytes.block.withUnsafeBufferPointer { p -> Int in
            var i = from
            while i < p.count {
                let b = p[i]
                if b == stops.0 || b == stops.1 || b == stops.2 || b == stops.3 { break }
                bits |= b
                i += 1
            }
            return i
        }
        if end > from { cell.append(contentsOf: bytes.block[from..<end]) }
        cellBits |= bits
        bytes.at = end
        return end < bytes.block.count
    }

    /// The next row and the line it starts on, or `nil` after the last.
    mutating func next() throws -> (cells: [CSV.Cell], line: Int)? {
        var row: [CSV.Cell] = []
        row.reserveCapacity(width)
        var quoted = false, wasQuoted = false, atCellStart = true
        var start = line
        let quote = UInt8(ascii: "\""), comma = UInt8(ascii: ",")
        while try bytes.hasMore() {
            if cell.count > CSV.largestValue {
                throw ShellError("\(origin): the cell of line \(start) grows past 64 MiB, the "
                    + "most a cell may hold" + (quoted ? " (a quote opened there that never closes?)" : "")
                    + "; nothing was imported")
            }
            if quoted {
                // Up to the next quote, counting lines.
                guard copy(until: (quote, 0x0A, quote, quote)) else { continue }
                let byte = bytes.block[bytes.at]
                bytes.at += 1
                if byte == 0x0A {
                    line += 1
                    cell.append(byte)
                } else if try bytes.hasMore(), bytes.block[bytes.at] == quote {
                    bytes.at += 1
                    cell.append(quote)
                } else {
                    quoted = false
                }
                continue
            }
            if !(atCellStart && bytes.block[bytes.at] == quote) {
                let before = cell.count
                let stopped = copy(until: (comma, 0x0A, 0x0D, atCellStart ? quote : comma))
                if cell.count > before { atCellStart = false }
                guard stopped else { continue }
            }
            let byte = bytes.block[bytes.at]
            bytes.at += 1
            switch byte {
            case quote where atCellStart:
                quoted = true; wasQuoted = true; atCellStart = false
            case comma:
                try take(quoted: wasQuoted, into: &row)
                atCellStart = true; wasQuoted = false
            case 0x0A, 0x0D:
                if byte == 0x0D, try bytes.hasMore(), bytes.block[bytes.at] == 0x0A { bytes.at += 1 }
                let blank = row.isEmpty && cell.isEmpty && !wasQuoted
                try take(quoted: wasQuoted, into: &row)
                line += 1
                if !blank { width = row.count; return (row, start) }
                row = []; atCellStart = true; wasQuoted = false; start = line
            default:
                cell.append(byte)
                cellBits |= byte
                atCellStart = false
            }
        }
        if quoted { throw ShellError("\(origin): a quoted cell opened before line \(line) never closes") }
        if !cell.isEmpty || !row.isEmpty || wasQuoted {
            try take(quoted: wasQuoted, into: &row)
            return (row, start)
        }
        return nil
    }
}

extension CSV {
    /// The most a cell of a CSV file, or a line of an NDJSON one, may hold (64 MiB): what reading one keeps in
    /// memory at once, whatever the file's size.
    static let largestValue = 64 << 20

    /// A number as a cell writes it, the way a column of numbers reads it.
    enum Number: Equatable {
        /// Written as an integer, without a point or an exponent, that a 64-bit integer holds.
        case integer(DocumentValue)
        /// Any other number (with a point or an exponent), and `inf`, `-inf`, `nan`.
        case double(Double)

        /// An integer as the integer, any other number as a Double.
        var value: DocumentValue {
            switch self {
            case .integer(let v): return v
            case .double(let d): return .double(d)
            }
        }
    }

    /// A cell's number: `-?(0|[1-9][0-9]*)(\.[0-9]+)?([eE][+-]?[0-9]+)?`, as JSON writes numbers, whose digits a
    /// Double holds without losing any: those of its shortest form, its 17 significant digits, or every digit of a
    /// whole number (`48.053808600000004`, `0.10000000000000001`, `2.50`, `1e3`, `1E+03`, but not
    /// `3.14159265358979323846` or `1.0000000000000001`, which read as a Double written otherwise); or `inf`, `-inf`, `nan` (any case, also
    /// `infinity`), as `.export` writes them. With `lenient` (a column given to `--number`), a leading `+`,
    /// leading zeros, a point with no digit on one side (`.5`, `5.`) and more digits than a Double keeps (read as
    /// the nearest Double) are numbers too.
    static func number(_ text: String, lenient: Bool = false) -> Number? {
        // Most cells of a file are short integers, or words: both are told from their bytes, without a copy.
        if case let known?? = text.utf8.withContiguousStorageIfAvailable({ quickNumber($0, lenient: lenient) }) {
            return known
        }
        var text = Substring(text)
        if lenient, text.first == "+" { text = text.dropFirst() }
        var utf8 = text.utf8[...]
        let negative = utf8.first == UInt8(ascii: "-")
        if negative { utf8 = utf8.dropFirst() }
        guard let first = utf8.first else { return nil }
        if !(0x30...0x39).contains(first) && first != UInt8(ascii: ".") {
            switch String(Substring(utf8)).lowercased() {
            case "inf", "infinity": return .double(negative ? -.infinity : .infinity)
            case "nan": return negative ? nil : .double(.nan)
            default: return nil
            }
        }
        guard let parts = NumberParts(utf8, lenient: lenient) else { return nil }
        if !parts.hasPoint && !parts.hasExponent {
            let whole = String(text)
            if let i = Int64(whole) { return .integer(.int(i)) }
            if !negative, let u = UInt64(String(Substring(utf8))) { return .integer(.uint(u)) }
        }
        guard let d = Double(String(text)), d.isFinite else { return nil }
        // Asked for by --number: the nearest Double, whatever digits it keeps.
        if lenient { return .double(d) }
        // Written as the Double prints: the same digits, at once.
        if !parts.hasExponent, d.description == String(text) { return .double(d) }
        // The same digits as a form programs write the Double in: its shortest, its 17 significant digits (which
        // every Double has), or, for a whole number, its every digit (as `.export` writes one beyond 2^53).
        func same(_ written: String) -> Bool {
            guard let other = NumberParts(Substring(written).utf8, lenient: false) else { return false }
            return other.digits == parts.digits && (other.exponent == parts.exponent || parts.digits.isEmpty)
        }
        guard same(d.magnitude.description) || same(String(format: "%.17g", d.magnitude))
                || (d == d.rounded() && same(String(format: "%.0f", d.magnitude))) else { return nil }
        return .double(d)
    }

    /// A cell's number when its bytes alone tell: an integer of up to 18 digits, written as `number` reads one;
    /// `.some(nil)` for no number (text that starts with no digit, sign or point, and is no `inf` or `nan`);
    /// `nil` when ``number(_:lenient:)`` has to look closer.
    private static func quickNumber(_ bytes: UnsafeBufferPointer<UInt8>, lenient: Bool) -> Number?? {
        guard let first = bytes.first else { return .some(nil) }
        func isDigit(_ b: UInt8) -> Bool { b &- 0x30 < 10 }
        if !isDigit(first) && first != UInt8(ascii: "-") && first != UInt8(ascii: ".") && first != UInt8(ascii: "+") {
            // Only inf, infinity and nan (any case) start with a letter.
            let lower = first | 0x20
            guard lower == UInt8(ascii: "i") || lower == UInt8(ascii: "n"), bytes.count == 3 || bytes.count == 8
            else { return .some(nil) }
            return nil
        }
        let negative = first == UInt8(ascii: "-")
        let start = negative ? 1 : 0
        let count = bytes.count - start
        guard count > 0, count <= 18, lenient || count == 1 || bytes[start] != UInt8(ascii: "0") else {
            // A byte no number has (a space, a colon, a letter but e) rules one out at once: `2013-01-01 05:00:00`.
            let letter = count > 0 && !isDigit(bytes[start]) && bytes[start] != UInt8(ascii: ".")
            if !letter, bytes.contains(where: { !isDigit($0) && !".eE+-".utf8.contains($0) }) { return .some(nil) }
            return nil
        }
        var value: Int64 = 0
        for i in start..<bytes.count {
            let b = bytes[i]
            guard isDigit(b) else {
                let letter = i == start && b != UInt8(ascii: ".")
                if !letter, bytes.contains(where: { !isDigit($0) && !".eE+-".utf8.contains($0) }) { return .some(nil) }
                return nil
            }
            value = value * 10 + Int64(b - 0x30)
        }
        return .some(.integer(.int(negative ? -value : value)))
    }

    /// A number's significant digits and the power of ten of the last one: `48.0500` and `4805e-2` are both
    /// digits `4805`, exponent -2; zero has no digits.
    private struct NumberParts {
        var digits: [UInt8] = []
        var exponent = 0
        var hasPoint = false
        var hasExponent = false

        init?(_ utf8: Substring.UTF8View, lenient: Bool) {
            var i = utf8.startIndex
            func isDigit(_ b: UInt8) -> Bool { (0x30...0x39).contains(b) }
            var whole = 0, fraction = 0
            while i != utf8.endIndex, isDigit(utf8[i]) { digits.append(utf8[i]); whole += 1; i = utf8.index(after: i) }
            if !lenient {
                guard whole > 0, whole == 1 || digits[0] != UInt8(ascii: "0") else { return nil }
            }
            if i != utf8.endIndex, utf8[i] == UInt8(ascii: ".") {
                hasPoint = true
                i = utf8.index(after: i)
                while i != utf8.endIndex, isDigit(utf8[i]) {
                    digits.append(utf8[i]); fraction += 1; i = utf8.index(after: i)
                }
                guard fraction > 0 || (lenient && whole > 0) else { return nil }
            }
            guard whole + fraction > 0 else { return nil }
            var written = 0
            if i != utf8.endIndex, utf8[i] == UInt8(ascii: "e") || utf8[i] == UInt8(ascii: "E") {
                hasExponent = true
                i = utf8.index(after: i)
                var sign = 1
                if i != utf8.endIndex, utf8[i] == UInt8(ascii: "+") || utf8[i] == UInt8(ascii: "-") {
                    if utf8[i] == UInt8(ascii: "-") { sign = -1 }
                    i = utf8.index(after: i)
                }
                var count = 0
                while i != utf8.endIndex, isDigit(utf8[i]) {
                    guard count < 6 else { return nil }   // beyond any Double's exponent
                    written = written * 10 + Int(utf8[i] - 0x30); count += 1; i = utf8.index(after: i)
                }
                guard count > 0 else { return nil }
                written *= sign
            }
            guard i == utf8.endIndex else { return nil }
            exponent = written - fraction
            while digits.last == UInt8(ascii: "0") { digits.removeLast(); exponent += 1 }
            if let firstSignificant = digits.firstIndex(where: { $0 != UInt8(ascii: "0") }) {
                digits.removeFirst(firstSignificant)
            } else {
                digits = []; exponent = 0
            }
        }
    }
}

extension CSV {
    /// How a column's cells become values, decided from all of them.
    enum Rule: Sendable, Equatable {
        /// Every cell JSON, one of them a list, an object or a string in quotes.
        case json
        /// Every cell text, as written.
        case text
        /// Unquoted cells numbers, true/false or dates as DocStore prints them (quoted ones text).
        case typed
        /// Given to `--number`: every cell, quoted or not, a number in any form.
        case number
        /// Given to `--dates`: every cell a date.
        case date
    }

    /// The first cell of a column that kept it text though others were numbers, true/false or dates.
    struct KeptText: Sendable, Equatable {
        var column: String
        var row: Int
        var text: String
    }

    /// What the first pass learns of one column.
    struct ColumnLearning {
        var forced: Rule?
        var looksJSON = false, allJSON = true
        var allTyped = true, sawTyped = false
        /// The first cell that was neither a number, true/false nor a printed date.
        var firstText: (row: Int, text: String)?

        var rule: Rule {
            if let forced { return forced }
            if looksJSON && allJSON { return .json }
            return allTyped ? .typed : .text
        }

        /// The cell that made the column text, when it had cells of other kinds.
        var decider: (row: Int, text: String)? {
            guard forced == nil, rule == .text, sawTyped else { return nil }
            return firstText
        }
    }

    /// An import's plan for a CSV text: the header's columns and each one's rule, learned by a first pass over every
    /// row, which also checks the rows' shape and the cells of the columns given to `--dates` and `--number`.
    struct Plan: Sendable {
        var header: [String]
        var paths: [FieldPath]
        var rules: [Rule]
        var reading: Reading
        /// How many rows of documents there are.
        var count = 0
        /// The ids the rows give, in the column named as the collection's id.
        var ids: [DocumentValue] = []
        /// The columns kept as text though some of their cells were numbers, with the cell that decided it.
        var keptText: [KeptText] = []
        let origin: String
        /// Whether every column is a field of the document itself, none nested.
        private var flat = true
        /// For each column, the columns whose field holds its field or lies inside it.
        private var nesting: [[Int]] = []

        /// Reads every row of `rows` once.
        init<Source: CSVBytes>(_ rows: inout CSVRows<Source>, origin: String, reading: Reading, idPath: FieldPath?)
            throws {
            self.origin = origin
            self.reading = reading
            header = []; paths = []; rules = []
            guard let (headerCells, _) = try rows.next() else { return }
            header = headerCells.map(\.text)
            for (i, cell) in headerCells.enumerated() {
                // (A quoted name is as written: `.export` quotes one that begins or ends with a space.)
                let name = cell.quoted ? cell.text : cell.text.trimmingCharacters(in: .whitespaces)
                if name.isEmpty { throw ShellError("\(origin): column \(i + 1) of the header has no name") }
                paths.append(path(ofColumn: name))
            }
            flat = paths.allSatisfy { $0.components.count == 1 }
            var seen: [FieldPath: Int] = [:]
            for (i, path) in paths.enumerated() {
                if let first = seen[path] {
                    throw ShellError("\(origin): the header names '\(header[i])' twice (columns \(first + 1) and "
                        + "\(i + 1)); each column needs a name of its own")
                }
                seen[path] = i
            }
            // The columns whose field holds another column's (`address` and `address.city`): a row may fill one
            // of the two, not both (the field cannot be a value and an object at once: one cell would be lost).
            nesting = Array(repeating: [], count: paths.count)
            for (i, outer) in paths.enumerated() where !flat {
                for (j, inner) in paths.enumerated()
                where inner.components.count > outer.components.count
                    && inner.components.starts(with: outer.components) {
                    nesting[i].append(j)
                    nesting[j].append(i)
                }
            }
            var columns = [ColumnLearning](repeating: ColumnLearning(), count: paths.count)
            for (option, given, rule) in [("--dates", reading.dates, Rule.date), ("--number", reading.numbers, .number),
                                          ("--text", reading.texts, .text)] {
                for path in given.sorted(by: { $0.written < $1.written }) {
                    guard let c = paths.firstIndex(of: path) else {
                        throw ShellError("\(origin): \(option) names '\(path.written)', but no column of the header "
                            + "is named so (the header: \(paths.map(\.written).joined(separator: ", ")))")
                    }
                    if let other = columns[c].forced, other != rule {
                        throw ShellError("\(origin): '\(path.written)' is given to two of --dates, --number and --text")
                    }
                    columns[c].forced = rule
                }
            }
            let idColumn = idPath.flatMap { paths.firstIndex(of: $0) }
            var idCells: [(row: Int, cell: Cell)] = []
            var rowNumber = 1
            while let (cells, _) = try rows.next() {
                rowNumber += 1
                guard cells.count == header.count else {
                    throw ShellError("\(origin): row \(rowNumber) has \(cells.count) cell\(cells.count == 1 ? "" : "s"), "
                        + "the header \(header.count); every row needs one cell per column (an empty cell for a "
                        + "missing value)")
                }
                for c in cells.indices where !isNull(cells[c]) {
                    try learn(cells[c], row: rowNumber, column: c, into: &columns[c])
                }
                if let idColumn, !isNull(cells[idColumn]) { idCells.append((rowNumber, cells[idColumn])) }
            }
            count = rowNumber - 1
            rules = columns.map(\.rule)
            keptText = columns.indices.compactMap { c in
                columns[c].decider.map { KeptText(column: header[c], row: $0.row, text: $0.text) }
            }
            if let idColumn {
                ids = try idCells.map { try value($0.cell, row: $0.row, column: idColumn) }
            }
        }

        private func isNull(_ cell: Cell) -> Bool {
            !cell.quoted && (cell.text.isEmpty || cell.text == reading.nullMarker)
        }

        private func learn(_ cell: Cell, row: Int, column c: Int, into column: inout ColumnLearning) throws {
            switch column.forced {
            case .date?:
                _ = try date(cell.text, row: row, column: c)
                return
            case .number?:
                guard CSV.number(cell.text, lenient: true) != nil else {
                    throw ShellError("\(origin): row \(row), column '\(header[c])': \(cell.text.debugDescription) is not "
                        + "a number, and --number says the column holds numbers; nothing was imported")
                }
                return
            case .text?, .json?, .typed?:
                return
            case nil:
                break
            }
            let jsonLooking = looksLikeJSON(cell.text)
            // Once a cell is text, the rest are looked at only until one shows the column had numbers too.
            let typing = !cell.quoted && (column.allTyped || !column.sawTyped)
            let kind = !jsonLooking && (typing || column.allJSON) ? Kind.of(cell.text) : nil
            if column.allJSON {
                if jsonLooking {
                    column.looksJSON = true
                    if jsonValue(cell.text) == nil { column.allJSON = false }
                } else if !isJSONScalar(cell.text, kind) {
                    column.allJSON = false
                }
            }
            guard typing, let kind else { return }
            switch kind {
            case .number, .bool, .date:
                column.sawTyped = true
            case .text:
                if column.allTyped { column.firstText = (row, cell.text) }
                column.allTyped = false
            }
        }

        /// Whether a cell is JSON's `true`, `false`, `null` or a number as JSON writes it (not `inf` or `nan`).
        private func isJSONScalar(_ text: String, _ kind: Kind?) -> Bool {
            switch kind {
            case .bool?: return true
            case .number(.double(let d))?: return d.isFinite   // not inf or nan
            case .number?: return true
            default: return text == "null"
            }
        }

        /// A cell of a `--dates` column as a date.
        private func date(_ text: String, row: Int, column c: Int) throws -> Date {
            guard let date = reading.date(text) else {
                throw ShellError("\(origin): row \(row), column '\(header[c])': '\(text)' is not "
                    + "\(reading.dateWording); nothing was imported")
            }
            return date
        }

        /// A cell that is not nil as its column's rule reads it.
        private func value(_ cell: Cell, row: Int, column c: Int) throws -> DocumentValue {
            switch rules[c] {
            case .text: return .string(cell.text)
            case .date: return .date(try date(cell.text, row: row, column: c))
            case .json:
                guard let value = jsonValue(cell.text) else {
                    throw ShellError("\(origin): row \(row), column '\(header[c])' is not JSON as the other rows are")
                }
                return value
            case .number:
                guard let n = CSV.number(cell.text, lenient: true) else {
                    throw ShellError("\(origin): row \(row), column '\(header[c])': \(cell.text.debugDescription) is not "
                        + "a number")
                }
                return n.value
            case .typed:
                if cell.quoted { return .string(cell.text) }
                switch Kind.of(cell.text) {
                case .number(let n): return n.value
                case .bool(let b): return .bool(b)
                case .date(let d): return .date(d)
                case .text: return .string(cell.text)
                }
            }
        }

        /// The document of a row, numbered as the first pass numbered it (the header is row 1).
        func document(_ cells: [Cell], row: Int) throws -> DocumentValue {
            guard cells.count == header.count else {
                throw ShellError("\(origin): row \(row) has \(cells.count) cells, the header \(header.count): the file "
                    + "changed while it was imported; nothing was imported")
            }
            if flat {
                var fields: [DocumentValue.Field] = []
                fields.reserveCapacity(cells.count)
                for (c, cell) in cells.enumerated() {
                    fields.append(DocumentValue.Field(paths[c].components[0],
                                                      isNull(cell) ? .null : try value(cell, row: row, column: c)))
                }
                return .object(fields)
            }
            var document = DocumentValue.object([DocumentValue.Field]())
            for (c, cell) in cells.enumerated() {
                if isNull(cell) {
                    // Nil only where nothing is yet: an empty `address` beside an `address.city` keeps the object.
                    if document[path: paths[c]] == nil { document = document.setting(.null, at: paths[c]) }
                    continue
                }
                if let other = nesting[c].first(where: { $0 < c && !isNull(cells[$0]) }) {
                    let (outer, inner) = paths[other].components.count < paths[c].components.count ? (other, c) : (c, other)
                    throw ShellError("\(origin): row \(row) has values in both '\(header[outer])' and "
                        + "'\(header[inner])', which is inside it: a field cannot hold a value and fields at once")
                }
                document = document.setting(try value(cell, row: row, column: c), at: paths[c])
            }
            return document
        }
    }
}

/// The lines of a text read in blocks, without their LF or CRLF: memory for one block and one line.
struct FileLines<Source: CSVBytes> {
    private var bytes: ByteBlocks<Source>
    private var line: [UInt8] = []
    private var number = 0
    private let origin: String

    init(_ source: Source, origin: String) {
        bytes = ByteBlocks(source)
        self.origin = origin
    }

    /// The next line, or `nil` after the last.
    mutating func next() throws -> String? {
        line.removeAll(keepingCapacity: true)
        while try bytes.hasMore() {
            let rest = bytes.block[bytes.at...]
            if let newline = rest.firstIndex(of: 0x0A) {
                line.append(contentsOf: rest[..<newline])
                bytes.at = newline + 1
                return try text(ending: true)
            }
            line.append(contentsOf: rest)
            bytes.at = bytes.block.count
            if line.count > CSV.largestValue {
                throw ShellError("\(origin): line \(number + 1) is longer than 64 MiB, "
                    + "the most a line may hold; nothing was imported")
            }
        }
        return line.isEmpty ? nil : try text(ending: false)
    }

    private mutating func text(ending: Bool) throws -> String {
        number += 1
        if ending, line.last == 0x0D { line.removeLast() }
        guard let text = String(validating: line, as: UTF8.self) else {
            throw ShellError("\(origin): line \(number) holds bytes that are not UTF-8 text")
        }
        return text
    }
}

extension CSV {
    /// A CSV file's plan, from a first pass over it, and its documents, read again from the file as they are written
    /// (held in memory instead with `inMemory`, for a transaction that applies its changes at commit).
    static func streamed(path: String, reading: Reading, idPath: FieldPath, inMemory: Bool) throws
        -> (Plan, Shell.DocumentBatch) {
        var first = CSVRows(try CSVFileBytes(path: path), origin: path)
        let plan = try Plan(&first, origin: path, reading: reading, idPath: idPath)
        /// Each document in turn, read and built on a thread of its own while those before it are written.
        @Sendable func forEach(_ body: (DocumentValue) throws -> Void) throws {
            let pipe = DocumentPipe()
            let reader = Thread {
                do {
                    var rows = CSVRows(try CSVFileBytes(path: path), origin: path)
                    guard let header = try rows.next(), header.cells.map(\.text) == plan.header else {
                        throw ShellError("\(path) changed while it was imported (its header is not what it was); "
                            + "nothing was imported")
                    }
                    var row = 1
                    var batch: [DocumentValue] = []
                    batch.reserveCapacity(DocumentPipe.batchSize)
                    while let (cells, _) = try rows.next() {
                        row += 1
                        batch.append(try plan.document(cells, row: row))
                        if batch.count == DocumentPipe.batchSize {
                            guard pipe.put(batch) else { break }
                            batch.removeAll(keepingCapacity: true)
                        }
                    }
                    if !batch.isEmpty { _ = pipe.put(batch) }
                    pipe.finish(nil)
                } catch {
                    pipe.finish(error)
                }
            }
            reader.start()
            defer { pipe.stop() }
            while let batch = try pipe.take() {
                try Task.checkCancellation()   // Ctrl-C: the whole write is rolled back
                for d in batch { try body(d) }
            }
        }
        guard inMemory else { return (plan, Shell.DocumentBatch(count: plan.count, ids: plan.ids, forEach: forEach)) }
        var held: [DocumentValue] = []
        try forEach { held.append($0) }
        return (plan, Shell.DocumentBatch(count: plan.count, ids: plan.ids) { [held] body in
            for d in held { try body(d) }
        })
    }
}

/// Batches of documents handed from the thread that builds them to the one that writes them: a few wait at most, so
/// that memory stays bounded however long the file.
final class DocumentPipe: @unchecked Sendable {
    // `@unchecked Sendable`: every property is used under the condition's lock.
    static let batchSize = 1024
    private static let capacity = 4
    private let condition = NSCondition()
    private var batches: [[DocumentValue]] = []
    private var finished = false
    private var failure: (any Error)?
    private var stopped = false

    /// Hands a batch over, waiting while the pipe is full; false once the writer stopped taking them.
    func put(_ batch: [DocumentValue]) -> Bool {
        condition.lock()
        defer { condition.unlock() }
        while batches.count >= Self.capacity && !stopped { condition.wait() }
        guard !stopped else { return false }
        batches.append(batch)
        condition.broadcast()
        return true
    }

    /// Says that no batch follows: the builder got to the end, or failed with `error`.
    func finish(_ error: (any Error)?) {
        condition.lock()
        defer { condition.unlock() }
        finished = true
        failure = error
        condition.broadcast()
    }

    /// The next batch, waiting for it; `nil` after the last; the builder's error after the batches before it.
    func take() throws -> [DocumentValue]? {
        condition.lock()
        defer { condition.unlock() }
        while batches.isEmpty && !finished { condition.wait() }
        if !batches.isEmpty {
            condition.broadcast()
            return batches.removeFirst()
        }
        if let failure { throw failure }
        return nil
    }

    /// Stops taking batches, and waits until the builder has stopped too.
    func stop() {
        condition.lock()
        defer { condition.unlock() }
        stopped = true
        condition.broadcast()
        while !finished { condition.wait() }
        batches.removeAll()
    }
}
