import Foundation

/// How dates are written as text, to read them: a pattern of Unicode's date fields (`yyyy/MM/dd`, `MMM d yyyy`,
/// `dd.MM.yyyy HH:mm`), read in the POSIX locale (English month names, whatever the machine's language) and in UTC
/// unless the pattern has a zone (`Z`, `XXX`, `zzz`), whose offset the text then gives.
///
/// Used by ``MigrationContext/convertField(_:in:to:format:)`` and by the shell's `.import --date-format`.
public final class DateTextFormat: @unchecked Sendable, CustomStringConvertible {
    // `@unchecked Sendable`: the formatter, which is not, is only used under the lock.
    public let pattern: String
    private let formatter = DateFormatter()
    private let lock = NSLock()

    /// A format for `pattern`; throws when the pattern cannot read back a date it writes (it lacks the year, the
    /// month or the day, or holds no date field at all).
    public init(_ pattern: String) throws {
        self.pattern = pattern
        formatter.locale = Locale(identifier: "en_US_POSIX")
        formatter.timeZone = TimeZone(identifier: "UTC")
        formatter.calendar = Calendar(identifier: .gregorian)
        formatter.dateFormat = pattern
        formatter.isLenient = false
        // 1987-06-25 13:00:00 UTC, a day whose year, month and day are each unlike the formatter's defaults.
        let probe = Date(timeIntervalSince1970: 551_624_400)
        let written = formatter.string(from: probe)
        guard let read = formatter.date(from: written),
              Calendar.utc.dateComponents([.year, .month, .day], from: read)
                == Calendar.utc.dateComponents([.year, .month, .day], from: probe) else {
            throw DateFormatError(pattern: pattern)
        }
    }

    /// The date `text` is written for, or `nil` when it does not match the pattern as a whole.
    public func date(from text: String) -> Date? {
        lock.withLock { formatter.date(from: text) }
    }

    public var description: String { pattern }

    /// The date text in ISO 8601 is written for: a day (`2024-05-01`), or a time with `Z` or a zone's offset, with
    /// or without fractional seconds (`2024-05-01T10:30:00Z`, `2024-05-01T10:30:00.250+02:00`); `nil` for other
    /// text.
    public static func iso8601(_ text: String) -> Date? {
        if let d = try? Date(text, strategy: Date.ISO8601FormatStyle(includingFractionalSeconds: true)) { return d }
        if let d = try? Date(text, strategy: Date.ISO8601FormatStyle()) { return d }
        let dayOnly = Date.ISO8601FormatStyle().year().month().day()
        if text.utf8.count == 10, let d = try? Date(text, strategy: dayOnly) { return d }
        return nil
    }
}

/// A date pattern ``DateTextFormat`` refuses.
public struct DateFormatError: Error, Sendable, CustomStringConvertible {
    public let pattern: String
    public var description: String {
        "'\(pattern)' is not a date format that reads a whole date: it needs the year, the month and the day "
            + "(such as yyyy/MM/dd, MMM d yyyy or dd.MM.yyyy HH:mm)"
    }
}

extension Calendar {
    static let utc: Calendar = {
        var calendar = Calendar(identifier: .gregorian)
        calendar.timeZone = TimeZone(identifier: "UTC") ?? calendar.timeZone
        return calendar
    }()
}
