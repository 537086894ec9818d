import Foundation

/// Draws the figures as SVG: throughput per scenario and peer at the largest document count (a log scale), and how
/// each peer's throughput grows with the number of documents.
enum Chart {
    static let colors = ["DocStore": "#1f77b4", "DocStore, 1 thread": "#17becf", "DocStore, exclusive": "#9467bd", "GRDB": "#ff7f0e", "SQLite C": "#2ca02c", "raw LMDB": "#7f7f7f"]

    /// The measurement each scenario shows: documents decoded where the peer decodes, else its rows read (`raw`).
    static func shown(_ all: [Measurement]) -> [Measurement] {
        all.filter { m in
            m.form == "decoded" || m.form == "-" || (m.form == "raw"
                && !all.contains { o in o.peer == m.peer && o.scenario == m.scenario && o.documents == m.documents
                                   && o.form == "decoded" })
        }
    }

    static func svg(_ all: [Measurement]) -> String {
        let shownAll = shown(all)
        guard let largest = shownAll.map(\.documents).max() else { return "<svg xmlns=\"http://www.w3.org/2000/svg\"/>" }
        let peers = Report.peerOrder.filter { p in shownAll.contains { $0.peer == p } }
        var scenarios: [String] = []
        for m in shownAll where !scenarios.contains(m.scenario) { scenarios.append(m.scenario) }
        let rowHeight = 12.0 * Double(peers.count) + 10
        let barsTop = 60.0, left = 170.0, width = 560.0
        let barsHeight = rowHeight * Double(scenarios.count)
        let rates = shownAll.filter { $0.documents == largest }.map(\.documentsPerSecond).filter { $0 > 0 }
        let lo = log10(max(1, (rates.min() ?? 1) / 2)), hi = log10(max(10, (rates.max() ?? 10) * 2))
        func x(_ rate: Double) -> Double { left + width * (log10(max(rate, 1)) - lo) / max(hi - lo, 1e-9) }
        var out = """
            <svg xmlns="http://www.w3.org/2000/svg" width="\(Int(left + width + 40))" \
            height="\(Int(barsTop + barsHeight + 420))" font-family="sans-serif" font-size="11">
            <rect width="100%" height="100%" fill="white"/>
            <text x="10" y="20" font-size="15">Documents per second, \(largest) documents (log scale; decoded models, or rows read where a peer does not decode)</text>

            """
        for (i, p) in peers.enumerated() {
            out += "<rect x=\"\(10 + i * 110)\" y=\"32\" width=\"10\" height=\"10\" fill=\"\(colors[p] ?? "#000")\"/>"
                + "<text x=\"\(24 + i * 110)\" y=\"41\">\(p)</text>\n"
        }
        for (row, scenario) in scenarios.enumerated() {
            let top = barsTop + Double(row) * rowHeight
            out += "<text x=\"\(left - 6)\" y=\"\(top + rowHeight / 2)\" text-anchor=\"end\">\(scenario)</text>\n"
            for (i, p) in peers.enumerated() {
                guard let m = shownAll.first(where: { $0.peer == p && $0.scenario == scenario && $0.documents == largest })
                else { continue }
                let y = top + 4 + Double(i) * 12
                out += String(format: "<rect x=\"%.1f\" y=\"%.1f\" width=\"%.1f\" height=\"10\" fill=\"%@\"/>",
                              left, y, max(1, x(m.documentsPerSecond) - left), colors[p] ?? "#000")
                out += String(format: "<text x=\"%.1f\" y=\"%.1f\" font-size=\"9\">%@</text>\n",
                              x(m.documentsPerSecond) + 3, y + 9, Report.count(m.documentsPerSecond))
            }
        }
        // Growth: each peer's median throughput over the scenarios, against the number of documents.
        let counts = Set(shownAll.map(\.documents)).sorted()
        let gTop = barsTop + barsHeight + 60, gHeight = 300.0
        out += "<text x=\"10\" y=\"\(gTop - 20)\" font-size=\"15\">How throughput grows with the documents "
            + "(median over the scenarios, docs/s, log scales)</text>\n"
        let series: [(String, [(Int, Double)])] = peers.map { p in
            (p, counts.compactMap { c in
                let r = shownAll.filter { $0.peer == p && $0.documents == c }.map(\.documentsPerSecond).filter { $0 > 0 }
                return r.isEmpty ? nil : (c, Meter.median(r))
            })
        }
        let ys = series.flatMap { $0.1.map(\.1) }
        let ylo = log10(max(1, (ys.min() ?? 1) / 2)), yhi = log10(max(10, (ys.max() ?? 10) * 2))
        let xlo = log10(Double(counts.first ?? 1)) - 0.2, xhi = log10(Double(counts.last ?? 10)) + 0.2
        func gx(_ c: Int) -> Double { left + width * (log10(Double(c)) - xlo) / max(xhi - xlo, 1e-9) }
        func gy(_ r: Double) -> Double { gTop + gHeight - gHeight * (log10(r) - ylo) / max(yhi - ylo, 1e-9) }
        out += "<rect x=\"\(left)\" y=\"\(gTop)\" width=\"\(width)\" height=\"\(gHeight)\" fill=\"none\" stroke=\"#ccc\"/>\n"
        for c in counts {
            out += String(format: "<text x=\"%.1f\" y=\"%.1f\" text-anchor=\"middle\">%d</text>\n", gx(c), gTop + gHeight + 14, c)
        }
        for (p, points) in series where !points.isEmpty {
            let path = points.map { String(format: "%.1f,%.1f", gx($0.0), gy($0.1)) }.joined(separator: " ")
            out += "<polyline points=\"\(path)\" fill=\"none\" stroke=\"\(colors[p] ?? "#000")\" stroke-width=\"2\"/>\n"
            for (c, r) in points {
                out += String(format: "<circle cx=\"%.1f\" cy=\"%.1f\" r=\"3\" fill=\"%@\"/>", gx(c), gy(r), colors[p] ?? "#000")
                out += String(format: "<text x=\"%.1f\" y=\"%.1f\" font-size=\"9\">%@</text>\n", gx(c) + 5, gy(r) - 4,
                              Report.count(r))
            }
        }
        return out + "</svg>\n"
    }
}
