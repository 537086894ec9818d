/// A place in the text typed: line and column count from 1, `offset` is in Unicode scalars from the start.
struct SourceLocation: Equatable, Sendable, CustomStringConvertible {
    var offset: Int
    var line: Int
    var column: Int
    var description: String { "\(line):\(column)" }
}

/// A word or symbol of the language, where it was typed.
struct Token: Equatable, Sendable {
    enum Kind: Equatable, Sendable {
        case identifier(String)
        /// A name in backticks: never a word of the language, whatever it holds.
        case escapedIdentifier(String)
        case integer(Int64)
        /// A number with a fraction or an exponent.
        case number(Double)
        /// An integer too large for `Int64`, as written.
        case largeInteger(String)
        case string(String)
        case symbol(String)
        case end
    }

    let kind: Kind
    let location: SourceLocation
    /// How many Unicode scalars it spans, for the caret under an error.
    let length: Int

    var symbol: String? { if case .symbol(let s) = kind { return s } else { return nil } }
    /// The name, written plainly or in backticks.
    var identifier: String? {
        switch kind {
        case .identifier(let s), .escapedIdentifier(let s): return s
        default: return nil
        }
    }
    /// A plain word (not in backticks): only these can be words of the language (`true`, `nil`, `begin`...).
    var word: String? { if case .identifier(let s) = kind { return s } else { return nil } }

    /// The token as the user would recognise it in a message.
    var shown: String {
        switch kind {
        case .identifier(let s): return "'\(s)'"
        case .escapedIdentifier(let s): return "'`\(s)`'"
        case .integer(let i): return "\(i)"
        case .number(let d): return "\(d)"
        case .largeInteger(let text): return text
        case .string(let s): return "\"\(s)\""
        case .symbol(let s): return "'\(s)'"
        case .end: return "the end of the input"
        }
    }
}

/// A mistake in the text, with where it is and, when one is close, a suggestion.
struct ParseError: Error, Equatable, Sendable, CustomStringConvertible {
    var message: String
    var location: SourceLocation
    var length: Int = 1
    var suggestion: String?
    /// The text stopped before the statement was complete (an open bracket or string): more lines may finish it.
    var isIncomplete = false

    var description: String { "\(location): \(message)" + (suggestion.map { " (did you mean \($0)?)" } ?? "") }
}

/// Splits text into tokens.
struct Lexer {
    /// The text as Unicode scalars: a combining mark after a quote must not merge with it, and "\r\n" is two.
    private let characters: [Unicode.Scalar]
    private var index = 0
    private var line = 1
    private var column = 1

    init(_ text: String) { characters = Array(text.unicodeScalars) }

    static func tokens(_ text: String) throws(ParseError) -> [Token] {
        var lexer = Lexer(text)
        var out: [Token] = []
        while true {
            let token = try lexer.next()
            out.append(token)
            if token.kind == .end { return out }
        }
    }

    private var location: SourceLocation { SourceLocation(offset: index, line: line, column: column) }

    private mutating func advance() {
        if characters[index] == "\n" { line += 1; column = 1 } else { column += 1 }
        index += 1
    }

    private func peek(_ ahead: Int = 0) -> Unicode.Scalar? {
        index + ahead < characters.count ? characters[index + ahead] : nil
    }

    private static let symbols = ["..<", "...", "==", "!=", "<=", ">=", "&&", "||", "??", "?.",
                                  ".", ",", "(", ")", "[", "]", "{", "}", ":", "<", ">", "!", "\\", "-", "+",
                                  "*", "/", "%", "?", ";"]

    mutating func next() throws(ParseError) -> Token {
        // Blanks and comments: `--` as in SQL shells and `//` as in Swift, to the end of the line.
        while true {
            while let c = peek(), c.isWhitespace { advance() }
            guard (peek() == "/" && peek(1) == "/") || (peek() == "-" && peek(1) == "-") else { break }
            while let c = peek(), c != "\n" { advance() }
        }
        let start = location
        guard let c = peek() else { return Token(kind: .end, location: start, length: 1) }
        if c.isLetter || c == "_" || c == "$" {
            var word = ""
            while let d = peek(), d.isLetter || d.isNumber || d.isMark || d == "_" || d == "$" {
                word.unicodeScalars.append(d)
                advance()
            }
            return Token(kind: .identifier(word), location: start, length: word.unicodeScalars.count)
        }
        if c == "`" {
            // A name as Swift escapes one: any text but a backtick or a line break, `Body Mass (g)`.
            advance()
            var word = ""
            while let d = peek(), d != "`", d != "\n" { word.unicodeScalars.append(d); advance() }
            guard peek() == "`" else {
                throw ParseError(message: "this name has no closing backtick", location: start,
                                 length: word.unicodeScalars.count + 1)
            }
            advance()
            guard !word.isEmpty else { throw ParseError(message: "a name in backticks cannot be empty", location: start, length: 2) }
            return Token(kind: .escapedIdentifier(word), location: start, length: word.unicodeScalars.count + 2)
        }
        if c.isASCII && c.isNumber { return try number(start) }
        if c == "\"" { return try string(start) }
        for symbol in Lexer.symbols where matches(symbol) {
            for _ in 0..<symbol.unicodeScalars.count { advance() }
            return Token(kind: .symbol(symbol), location: start, length: symbol.count)
        }
        if c == "'" {
            throw ParseError(message: "strings are written in double quotes", location: start)
        }
        if c == "=" {
            throw ParseError(message: "'=' alone is not a comparison", location: start, suggestion: "'=='")
        }
        if c == "&" || c == "|" {
            throw ParseError(message: "'\(c)' alone is not an operator", location: start, suggestion: "'\(c)\(c)'")
        }
        throw ParseError(message: "unexpected character '\(c)'", location: start)
    }

    private func matches(_ symbol: String) -> Bool {
        for (i, s) in symbol.unicodeScalars.enumerated() where peek(i) != s { return false }
        return true
    }

    private mutating func number(_ start: SourceLocation) throws(ParseError) -> Token {
        var text = ""
        while let d = peek(), d.isASCII && d.isNumber { text.unicodeScalars.append(d); advance() }
        var isInteger = true
        // A fraction, but not the start of a range: `1..<5`.
        if peek() == ".", let d = peek(1), d.isASCII && d.isNumber {
            isInteger = false
            text.append("."); advance()
            while let d = peek(), d.isASCII && d.isNumber { text.unicodeScalars.append(d); advance() }
        }
        if peek() == "e" || peek() == "E" {
            let sign = peek(1) == "-" || peek(1) == "+"
            if let d = peek(sign ? 2 : 1), d.isASCII && d.isNumber {
                isInteger = false
                text.append("e"); advance()
                if sign, let d = peek() { text.unicodeScalars.append(d); advance() }
                while let d = peek(), d.isASCII && d.isNumber { text.unicodeScalars.append(d); advance() }
            }
        }
        if let d = peek(), d.isLetter || d == "_" {
            throw ParseError(message: "a number cannot run into a word ('\(text)\(d)')", location: start,
                             length: text.count + 1)
        }
        if isInteger, let i = Int64(text) { return Token(kind: .integer(i), location: start, length: text.count) }
        // Too large for Int64: kept as written, so that `-9223372036854775808` and unsigned values stay exact.
        if isInteger { return Token(kind: .largeInteger(text), location: start, length: text.count) }
        guard let d = Double(text) else {
            throw ParseError(message: "'\(text)' is not a number", location: start, length: text.count)
        }
        return Token(kind: .number(d), location: start, length: text.count)
    }

    private mutating func string(_ start: SourceLocation) throws(ParseError) -> Token {
        advance()
        var value = ""
        while true {
            guard let c = peek() else {
                throw ParseError(message: "this string has no closing quote", location: start, isIncomplete: true)
            }
            if c == "\"" { advance(); break }
            if c == "\n" {
                throw ParseError(message: "this string has no closing quote on its line", location: start)
            }
            if c == "\\" {
                let escapeStart = location
                advance()
                guard let e = peek() else {
                    throw ParseError(message: "this string has no closing quote", location: start, isIncomplete: true)
                }
                advance()
                switch e {
                case "\"": value.append("\"")
                case "\\": value.append("\\")
                case "/": value.append("/")
                case "n": value.append("\n")
                case "t": value.append("\t")
                case "r": value.append("\r")
                case "b": value.append("\u{8}")
                case "f": value.append("\u{C}")
                case "0": value.append("\0")
                case "u": value.unicodeScalars.append(try unicodeEscape(escapeStart))
                default:
                    throw ParseError(message: "unknown escape '\\\(e)' in a string", location: escapeStart, length: 2)
                }
                continue
            }
            value.unicodeScalars.append(c)
            advance()
        }
        return Token(kind: .string(value), location: start, length: index - start.offset)
    }

    /// `\uXXXX` (with a second `\uXXXX` for a surrogate pair, as JSON writes them) or Swift's `\u{X...}`.
    private mutating func unicodeEscape(_ start: SourceLocation) throws(ParseError) -> Unicode.Scalar {
        func hex(_ count: Int) throws(ParseError) -> UInt32 {
            var text = ""
            for _ in 0..<count {
                guard let c = peek(), c.isHexDigit else {
                    throw ParseError(message: "\\u needs \(count) hexadecimal digits", location: start, length: 2)
                }
                text.unicodeScalars.append(c); advance()
            }
            guard let v = UInt32(text, radix: 16) else {
                throw ParseError(message: "\\u needs \(count) hexadecimal digits", location: start, length: 2)
            }
            return v
        }
        var value: UInt32
        if peek() == "{" {
            advance()
            var text = ""
            while let c = peek(), c.isHexDigit, text.count < 8 { text.unicodeScalars.append(c); advance() }
            guard peek() == "}", let v = UInt32(text, radix: 16) else {
                throw ParseError(message: "\\u{...} needs hexadecimal digits and a closing brace", location: start,
                                 length: 2)
            }
            advance()
            value = v
        } else {
            value = try hex(4)
            if (0xD800..<0xDC00).contains(value) && peek() == "\\" && peek(1) == "u" {
                advance(); advance()
                let low = try hex(4)
                if (0xDC00..<0xE000).contains(low) { value = 0x10000 + ((value - 0xD800) << 10) + (low - 0xDC00) }
            }
        }
        guard let scalar = Unicode.Scalar(value) else {
            throw ParseError(message: "\\u escape \(String(value, radix: 16)) is not a Unicode scalar", location: start,
                             length: 2)
        }
        return scalar
    }
}

extension Unicode.Scalar {
    var isLetter: Bool { properties.isAlphabetic }
    var isNumber: Bool { properties.numericType != nil }
    var isWhitespace: Bool { properties.isWhitespace }
    /// A combining mark: part of the letter before it.
    var isMark: Bool {
        switch properties.generalCategory {
        case .nonspacingMark, .spacingMark, .enclosingMark: return true
        default: return false
        }
    }
    /// 0-9, a-f, A-F only (not the fullwidth digits Unicode also calls hexadecimal).
    var isHexDigit: Bool { isASCII && (("0"..."9").contains(self) || ("a"..."f").contains(self) || ("A"..."F").contains(self)) }
}
