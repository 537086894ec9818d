import Foundation

/// The figures as a person reads them: per document count, each scenario's throughput per peer, and DocStore's
/// ratio to each peer (above 1: DocStore is faster).
enum Report {
    static func rate(_ m: Measurement) -> String {
        "\(duration(m.medianNanoseconds)), \(count(m.documentsPerSecond))/s"
    }

    static func duration(_ ns: Double) -> String {
        if ns < 1e3 { return String(format: "%.0f ns", ns) }
        if ns < 1e6 { return String(format: "%.1f µs", ns / 1e3) }
        if ns < 1e9 { return String(format: "%.2f ms", ns / 1e6) }
        return String(format: "%.2f s", ns / 1e9)
    }

    static func count(_ x: Double) -> String {
        if x >= 1e9 { return String(format: "%.1fG", x / 1e9) }
        if x >= 1e6 { return String(format: "%.2fM", x / 1e6) }
        if x >= 1e3 { return String(format: "%.1fk", x / 1e3) }
        return String(format: "%.0f", x)
    }

    static func bytes(_ n: Int) -> String {
        n >= 1 << 30 ? String(format: "%.2f GiB", Double(n) / 1073741824) : String(format: "%.0f MiB", Double(n) / 1048576)
    }

    /// The figure of `peer` for the scenario, form and count of `m`, as a table's cell.
    static func cell(_ all: [Measurement], _ peer: String, like m: Measurement) -> String {
        guard let x = all.first(where: { $0.peer == peer && $0.scenario == m.scenario && $0.form == m.form
                                         && $0.documents == m.documents }) else { return " – |" }
        return " \(duration(x.medianNanoseconds)), \(count(x.documentsPerSecond)) |"
    }

    /// DocStore's speed relative to `peer` for the same scenario and form: `peer time / DocStore time`.
    static func ratio(_ all: [Measurement], _ m: Measurement, to peer: String) -> Double? {
        guard let other = all.first(where: { $0.peer == peer && $0.scenario == m.scenario && $0.form == m.form
                                             && $0.documents == m.documents }),
              m.medianNanoseconds > 0 else { return nil }
        return other.medianNanoseconds / m.medianNanoseconds
    }

    /// The peers of a file's table and chart, in the order they are shown.
    static let peerOrder = ["DocStore", "DocStore, 1 thread", "DocStore, exclusive", "GRDB", "SQLite C", "raw LMDB"]

    /// The DocStore whose ratios a run's table gives and its floors check: as it opens by default, or, in a run
    /// without it, opened exclusively.
    static func primary(_ all: [Measurement]) -> String {
        let exclusive = "DocStore, exclusive"
        return all.contains { $0.peer == "DocStore" } || !all.contains { $0.peer == exclusive } ? "DocStore" : exclusive
    }

    /// A markdown table per document count.
    static func table(_ all: [Measurement]) -> String {
        var out = ""
        let exclusive = "DocStore, exclusive"
        let peers = peerOrder.filter { p in all.contains { $0.peer == p } }
        // The exclusive store's own ratio to SQLite C has a column of its own when the default one is the primary.
        let primary = primary(all)
        let ratios = ["GRDB", "SQLite C", "raw LMDB"].map { (peer: "vs \($0)", of: primary, to: $0) }
            + (primary != exclusive && peers.contains(exclusive)
               ? [(peer: "exclusive vs SQLite C", of: exclusive, to: "SQLite C")] : [])
        for count in Set(all.map(\.documents)).sorted() {
            out += "\n### \(count) documents\n\n"
            out += "| scenario | form | " + peers.map { "\($0) (median, docs/s)" }.joined(separator: " | ")
                + " | " + ratios.map(\.peer).joined(separator: " | ") + " |\n"
            out += "|" + String(repeating: " --- |", count: 2 + peers.count + ratios.count) + "\n"
            let rows = all.filter { $0.documents == count && $0.peer == primary }
            for m in rows {
                var line = "| \(m.scenario) | \(m.form) |" + peers.map { cell(all, $0, like: m) }.joined()
                for column in ratios {
                    let ours = column.of == m.peer ? m : all.first { $0.peer == column.of && $0.scenario == m.scenario
                        && $0.form == m.form && $0.documents == m.documents }
                    if let ours, let r = ratio(all, ours, to: column.to) {
                        line += r >= 1 ? String(format: " %.2fx |", r) : String(format: " **%.2fx (behind)** |", r)
                    } else {
                        line += " – |"
                    }
                }
                out += line + "\n"
            }
            // Every peer must have produced the same answer.
            for m in rows where m.produced >= 0 {
                for o in all where o.documents == count && o.scenario == m.scenario && o.form == m.form
                    && o.peer != m.peer && o.produced >= 0 && o.produced != m.produced {
                    out += "\n**MISMATCH**: \(m.scenario) \(m.form): DocStore produced \(m.produced), \(o.peer) \(o.produced)\n"
                }
            }
            let files = peers.compactMap { p in all.first { $0.peer == p && $0.documents == count }
                .map { "\(p) \(bytes($0.fileBytes))" } }
            out += "\nFiles: " + files.joined(separator: ", ") + "\n"
            out += latencies(all.filter { $0.documents == count }, peers: peers)
        }
        return out
    }

    /// DocStore on PostgreSQL beside PostgreSQL used directly (`jsonb` documents, plain SQL) and DocStore on a file,
    /// per document count; the ratio is the `jsonb` peer's time over DocStore's on PostgreSQL (above 1: DocStore is
    /// faster). Empty when no PostgreSQL peer ran.
    static func postgresTable(_ all: [Measurement]) -> String {
        let engine = "DocStore PG", direct = "PostgreSQL jsonb"
        let peers = ["DocStore", engine, direct].filter { p in all.contains { $0.peer == p } }
        guard peers.contains(engine) || peers.contains(direct) else { return "" }
        var out = ""
        for count in Set(all.map(\.documents)).sorted() {
            out += "\n### On PostgreSQL, \(count) documents\n\n| scenario | form | "
                + peers.map { "\($0) (median, docs/s)" }.joined(separator: " | ") + " | \(engine) vs \(direct) |\n"
            out += "|" + String(repeating: " --- |", count: 3 + peers.count) + "\n"
            let rows = all.filter { m in
                m.documents == count && (m.peer == engine || (m.peer == direct && !all.contains { o in
                    o.peer == engine && o.documents == count && o.scenario == m.scenario && o.form == m.form }))
            }
            for m in rows {
                var line = "| \(m.scenario) | \(m.form) |" + peers.map { cell(all, $0, like: m) }.joined()
                if m.peer == engine, let r = ratio(all, m, to: direct) {
                    line += r >= 1 ? String(format: " %.2fx |", r) : String(format: " **%.2fx (behind)** |", r)
                } else {
                    line += " – |"
                }
                out += line + "\n"
                for o in all where o.documents == count && o.scenario == m.scenario && o.form == m.form
                    && o.peer != m.peer && m.produced >= 0 && o.produced >= 0 && o.produced != m.produced {
                    out += "\n**MISMATCH**: \(m.scenario) \(m.form): \(m.peer) produced \(m.produced), \(o.peer) \(o.produced)\n"
                }
            }
            let sizes = peers.compactMap { p in all.first { $0.peer == p && $0.documents == count }
                .map { "\(p) \(bytes($0.fileBytes))" } }
            out += "\nOn disk: " + sizes.joined(separator: ", ") + "\n"
            let writes = all.filter { $0.documents == count && peers.contains($0.peer) }
            let scenarios = writes.filter { $0.writeP50Nanoseconds != nil }.map(\.scenario)
            if !scenarios.isEmpty {
                out += latencies(writes.filter { scenarios.contains($0.scenario) }, peers: peers, scenarios: scenarios)
            }
        }
        return out
    }

    /// The write scenarios' latency per write, p50 and p99 for each peer, and each peer's commits per second.
    static func latencies(_ all: [Measurement], peers: [String], scenarios: [String]? = nil) -> String {
        var unique: [String] = []
        let written = all.filter { $0.peer.hasPrefix("DocStore") && $0.writeP50Nanoseconds != nil }.map(\.scenario)
        for s in scenarios ?? written
            where !unique.contains(s) { unique.append(s) }
        let scenarios = unique
        guard !scenarios.isEmpty else { return "" }
        var out = "\nLatency per write (p50 / p99) and commits per second:\n\n| scenario | "
            + peers.map { "\($0) p50 / p99, commits/s" }.joined(separator: " | ") + " |\n"
        out += "|" + String(repeating: " --- |", count: 1 + peers.count) + "\n"
        for scenario in scenarios {
            out += "| \(scenario) |"
            for p in peers {
                if let m = all.first(where: { $0.peer == p && $0.scenario == scenario }), let p50 = m.writeP50Nanoseconds,
                   let p99 = m.writeP99Nanoseconds {
                    out += " \(duration(p50)) / \(duration(p99)), \(count(m.documentsPerSecond)) |"
                } else {
                    out += " – |"
                }
            }
            out += "\n"
        }
        return out
    }
}
