import Foundation
import Testing
@testable import DocStore

/// DocStore's one JSON: what `json()` writes (the dump's text too), `init(json:)` reads back as it was, and it reads
/// what the shell's `.export` wrote before it wrote this JSON.
@Suite struct ExtendedJSONTests {
    @Test func whatIsWrittenReadsBackAsItWas() throws {
        let date = Date(timeIntervalSinceReferenceDate: 736_000_000.123_456)
        let value = DocumentValue.object([
            ("date", .date(date)), ("uuid", .uuid(UUID())), ("bytes", .bytes([0, 1, 255])), ("big", .uint(.max)),
            ("inf", .double(.infinity)), ("whole", .double(2)), ("int", .int(2)), ("$dollar", .object([("$x", .null)])),
            ("list", .array([.double(-.infinity), .string("a\n\"b\"")])),
        ])
        for pretty in [false, true] {
            let text = value.json(pretty: pretty)
            #expect(try DocumentValue(json: text) == value, "\(text)")
            #expect(try DocumentValue(json: text).json() == value.json())
        }
        // A date no text names (NaN or infinite seconds) is written so that it reads back, where its seconds were
        // written as a bare `nan` that no JSON reader takes.
        for seconds in [Double.nan, .infinity, -.infinity] {
            let text = DocumentValue.object([("at", .date(Date(timeIntervalSinceReferenceDate: seconds)))]).json()
            guard case .object(let fields) = try DocumentValue(json: text), case .date(let read) = fields[0].value else {
                Issue.record("\(text) does not read back as a date")
                continue
            }
            #expect(read.timeIntervalSinceReferenceDate.bitPattern == seconds.bitPattern || (seconds.isNaN
                && read.timeIntervalSinceReferenceDate.isNaN), "\(text)")
        }
        #expect(DocumentValue.double(.nan).json() == #"{"$double":"nan"}"#)
        #expect(DocumentValue.double(.infinity).json() == #"{"$double":"inf"}"#)
        #expect(DocumentValue.double(-.infinity).json() == #"{"$double":"-inf"}"#)
    }

    /// The JSON `.export` wrote before: dates with or without a fraction, non-finite Doubles tagged, UUIDs and bytes
    /// as plain text (read back as text, as they were then), comments a file written by hand may hold.
    @Test func readsWhatTheShellExportedBefore() throws {
        let text = """
            // exported
            {"day": {"$date": "2024-05-01T00:00:00Z"}, "at": {"$date": "2024-05-01T10:00:00.250Z"},
             "n": {"$double": "-inf"}, "id": "E621E1F8-C36C-495A-93FC-0C247A3E6E5F", /* a note */ "other": {"$oid": "1"}}
            """
        let value = try DocumentValue(json: text)
        #expect(value[field: "day"] == .date(Date(timeIntervalSince1970: 1_714_521_600)))
        #expect(value[field: "at"] == .date(Date(timeIntervalSince1970: 1_714_557_600.25)))
        #expect(value[field: "n"] == .double(-.infinity))
        #expect(value[field: "id"] == .string("E621E1F8-C36C-495A-93FC-0C247A3E6E5F"))
        #expect(value[field: "other"] == .object([("$oid", .string("1"))]))
    }

    @Test func aCommaBeforeAClosingBracketIsRefusedWhereItIs() {
        for (text, offset) in [("[1,2,]", 4), ("{\"a\": 1,\n}", 7)] {
            #expect(throws: JSONError.self) { _ = try DocumentValue(json: text) }
            do { _ = try DocumentValue(json: text) } catch { #expect(error.offset == offset, "\(text): \(error)") }
        }
    }
}
