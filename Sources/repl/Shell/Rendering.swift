import DocStore

/// A list of documents laid out for printing in one mode: a head, a row per document, a foot.
///
/// A table's columns (every field path, in the order first seen) and their widths come from all the documents, looked
/// at once before the first row is printed; the rows are then made one at a time. At a terminal, a table wider than
/// the terminal is narrowed: the widest columns first, their cells cut with `…`, and columns that still do not fit
/// left out from the right (a last `…` column says so).
struct Rendering {
    let mode: OutputMode
    let headers: Bool
    /// The columns printed (table, box, csv).
    private(set) var columns: [Column] = []
    /// Columns left out because the terminal is too narrow for them.
    private(set) var hiddenColumns = 0
    /// CSV's columns, written as `.export` writes them.
    private var csv = CSV.Columns()

    struct Column: Equatable {
        var name: String
        var width: Int
        var rightAligned = false
    }

    /// How many documents are looked at between two checks for Ctrl-C.
    static let checkEvery = 1024

    /// Lays out `documents`. Throws `CancellationError` when the task is cancelled (Ctrl-C) meanwhile.
    init<Documents: Collection<DocumentValue>>(_ documents: Documents, renderer: Renderer,
                                                 fitting terminalColumns: Int?) throws {
        mode = renderer.mode
        headers = renderer.headers
        guard mode.isTable || mode == .csv else { return }
        var names = ColumnNames()
        var natural: [Int] = []
        var seen = 0
        for document in documents {
            seen += 1
            if seen % Rendering.checkEvery == 0 { try Task.checkCancellation() }
            if mode == .csv { csv.add(document); continue }
            for (name, value) in Renderer.flatten(document) {
                let (i, isNew) = names.index(of: name)
                if isNew { natural.append(mode.isTable && headers ? Renderer.width(name.onOneLine) : 1) }
                if mode.isTable { natural[i] = max(natural[i], Renderer.width(Renderer.cell(value).onOneLine)) }
            }
        }
        guard mode.isTable else {
            columns = csv.names.map { Column(name: $0, width: 0) }
            return
        }
        var fixed = Array(repeating: false, count: names.count)
        var rightAligned = fixed
        for (i, width) in renderer.widths.prefix(names.count).enumerated() where width != 0 {
            natural[i] = abs(width)
            fixed[i] = true
            rightAligned[i] = width < 0
        }
        let widths = terminalColumns.map { Rendering.fit(natural, fixed: fixed, into: $0) } ?? natural
        columns = widths.indices.map { Column(name: names.all[$0], width: widths[$0], rightAligned: rightAligned[$0]) }
        hiddenColumns = names.count - widths.count
    }

    /// Widths for columns of `natural` widths (the `fixed` ones keep theirs) in a table at most `total` columns wide:
    /// the widest of the others are narrowed first, to no less than `minimum`; columns that still do not fit are left
    /// out from the right, and room is kept for a last column that says so. Returns the widths of the columns kept.
    static func fit(_ natural: [Int], fixed: [Bool], into total: Int, minimum: Int = 4) -> [Int] {
        // "| " before each cell and " " after it, a closing bar, and " … |" when columns are left out.
        func budget(_ kept: Int) -> Int { total - (3 * kept + 1) - (kept < natural.count ? 4 : 0) }
        func least(_ i: Int) -> Int { fixed[i] ? natural[i] : min(natural[i], minimum) }
        if natural.indices.reduce(0, { $0 + least($1) }) <= budget(natural.count) {
            return share(budget(natural.count), among: natural, fixed: fixed)
        }
        // The least widths only grow with each column kept, and the room only shrinks: the first column that does
        // not fit ends the search, in one pass (a document of many fields is laid out in time linear in them).
        var kept = 0
        var sum = 0
        while kept < natural.count, sum + least(kept) <= budget(kept + 1) {
            sum += least(kept)
            kept += 1
        }
        return kept == 0 ? [] : share(budget(kept), among: Array(natural.prefix(kept)), fixed: Array(fixed.prefix(kept)))
    }

    /// Gives each column its natural width when all fit in `budget`; otherwise the narrow ones keep theirs and the
    /// wide ones share what is left equally.
    private static func share(_ budget: Int, among natural: [Int], fixed: [Bool]) -> [Int] {
        var widths = natural
        var left = budget - zip(natural, fixed).reduce(0) { $0 + ($1.1 ? $1.0 : 0) }
        let free = natural.indices.filter { !fixed[$0] }.sorted { natural[$0] < natural[$1] }
        for (n, i) in free.enumerated() {
            let remaining = free.count - n
            let each = left / remaining
            if natural[i] <= each {
                left -= natural[i]
                continue
            }
            var extra = left - each * remaining
            for j in free[n...] {
                widths[j] = each + (extra > 0 ? 1 : 0)
                extra -= 1
            }
            break
        }
        return widths
    }

    // MARK: Text

    /// What comes before the first row: a table's top and header, CSV's header line, JSON's `[`.
    var head: String {
        switch mode {
        case .table, .box:
            return rule(.top) + (headers ? line(columns.map(\.name.onOneLine), header: true) + rule(.middle) : "")
        case .csv:
            return headers && !columns.isEmpty ? csv.header : ""
        case .json: return "[\n"
        case .line: return ""
        }
    }

    /// The document at `index` of the list (which says whether a separator comes before it).
    func row(_ document: DocumentValue, at index: Int) -> String {
        switch mode {
        case .table, .box:
            let cells = Dictionary(Renderer.flatten(document), uniquingKeysWith: { first, _ in first })
            return line(columns.map { cells[$0.name].map { Renderer.cell($0).onOneLine } ?? "" }, header: false)
        case .csv:
            return csv.row(document)
        case .json:
            return (index > 0 ? ",\n" : "") + "  " + document.json()
        case .line:
            return (index > 0 ? "\n" : "") + Renderer.lines(document)
        }
    }

    /// What comes after the last row: a table's bottom, JSON's `]`.
    var foot: String {
        switch mode {
        case .table, .box: return rule(.bottom)
        case .json: return "\n]\n"
        case .csv, .line: return ""
        }
    }

    private enum Rule { case top, middle, bottom }

    private func rule(_ which: Rule) -> String {
        let ascii = mode == .table
        let (left, middle, right): (String, String, String)
        switch which {
        case .top: (left, middle, right) = ascii ? ("+", "+", "+") : ("┌", "┬", "┐")
        case .middle: (left, middle, right) = ascii ? ("+", "+", "+") : ("├", "┼", "┤")
        case .bottom: (left, middle, right) = ascii ? ("+", "+", "+") : ("└", "┴", "┘")
        }
        let dash = ascii ? "-" : "─"
        var widths = columns.map(\.width)
        if hiddenColumns > 0 { widths.append(1) }
        return left + widths.map { String(repeating: dash, count: $0 + 2) }.joined(separator: middle) + right + "\n"
    }

    private func line(_ cells: [String], header: Bool) -> String {
        let bar = mode == .table ? "|" : "│"
        var out = bar
        for (cell, column) in zip(cells, columns) {
            let text = Renderer.clip(cell, column.width)
            let pad = String(repeating: " ", count: max(0, column.width - Renderer.width(text)))
            out += " " + (column.rightAligned && !header ? pad + text : text + pad) + " " + bar
        }
        if hiddenColumns > 0 { out += " … " + bar }
        return out + "\n"
    }
}

/// Column names in the order they are first seen, with each one's place.
struct ColumnNames {
    private(set) var all: [String] = []
    private var position: [String: Int] = [:]

    var count: Int { all.count }

    /// The place of `name`, or `nil` when it was never seen.
    func position(of name: String) -> Int? { position[name] }

    /// The place of `name`, given it now when it is new.
    mutating func index(of name: String) -> (index: Int, isNew: Bool) {
        if let known = position[name] { return (known, false) }
        position[name] = all.count
        all.append(name)
        return (all.count - 1, true)
    }
}
