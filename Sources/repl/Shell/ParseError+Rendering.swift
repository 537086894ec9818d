extension ParseError {
    /// The most columns of a line of source shown under an error; of a longer line, the part around the mistake.
    static let sourceWindow = 80

    /// The message with the line of `source` it is about and a caret under the spot, as the shell prints it.
    ///
    /// A line wider than ``sourceWindow`` columns is shown as a window around the spot, each end that was cut
    /// marked with `…`, the caret still under the spot. `firstLine` is the number of the source's first line in its
    /// file, for a source that is one line of a longer file.
    func rendered(source: String, origin: String? = nil, firstLine: Int = 1) -> String {
        let lines = source.unicodeScalars.split(separator: "\n", omittingEmptySubsequences: false)
        var out = "error" + (origin.map { " in \($0)" } ?? "")
            + " at line \(location.line + firstLine - 1), column \(location.column): "
            + message + "\n"
        if location.line - 1 < lines.count {
            var line = Array(lines[location.line - 1])
            if line.last == "\r" { line.removeLast() }
            let spot = min(max(0, location.column - 1), line.count)
            let marked = min(length, 60)
            let shown = ParseError.window(line, around: spot, marking: marked, within: ParseError.sourceWindow)
            let before = shown.lowerBound > 0 ? "…" : "", after = shown.upperBound < line.count ? "…" : ""
            out += "  " + before + String(String.UnicodeScalarView(line[shown])) + after + "\n"
            // Under each scalar before the spot: a tab for a tab, nothing for a combining mark, else its width.
            let prefix = line[shown.lowerBound..<spot].map { u -> String in
                u == "\t" ? "\t" : String(repeating: " ", count: u.isMark ? 0 : Renderer.width(u))
            }.joined()
            let tildes = max(0, min(marked, shown.upperBound - spot) - 1)
            out += "  " + (before.isEmpty ? "" : " ") + prefix + "^" + String(repeating: "~", count: tildes) + "\n"
        }
        if let suggestion { out += "  did you mean \(suggestion)?\n" }
        return out
    }

    /// The scalars of `line` to show: all of it when it fits in `columns`, else a run around `spot` that fits with an
    /// ellipsis at each end: the marked span first (up to `marked` scalars), then some text before it, then after.
    static func window(_ line: [Unicode.Scalar], around spot: Int, marking marked: Int, within columns: Int)
        -> Range<Int> {
        // A tab counts as the most it can take, so the window never outgrows the columns.
        let widths = line.map { $0 == "\t" ? 8 : ($0.isMark ? 0 : Renderer.width($0)) }
        if widths.reduce(0, +) <= columns { return 0..<line.count }
        // One column for the caret past the end, two for the ellipses.
        var room = columns - 3
        var lower = spot, upper = spot
        func grow(right limit: Int) {
            while upper < line.count, upper < limit, widths[upper] <= room { room -= widths[upper]; upper += 1 }
        }
        func grow(left limit: Int) {
            var taken = 0
            while lower > 0, taken + widths[lower - 1] <= limit, widths[lower - 1] <= room {
                lower -= 1
                room -= widths[lower]
                taken += widths[lower]
            }
        }
        grow(right: spot + max(1, marked))
        grow(left: room / 3)
        grow(right: line.count)
        grow(left: room)
        return lower..<upper
    }
}
