/// Floors for DocStore's ratios against a peer, from a file of lines `scenario form peer floor` (`#` comments):
/// the ratio is the peer's median time over DocStore's, so 1.5 means DocStore must be at least 1.5x as fast. Against
/// the `postgres` peer, DocStore is the one on PostgreSQL; in a run of the `docstore-x` peer alone, the store opened
/// exclusively.
enum Thresholds {
    /// Prints a line per floor and returns how many were not met (a floor without a measurement counts as not met).
    static func check(_ text: String, _ all: [Measurement], print: (String) -> Void) throws -> Int {
        var failures = 0
        for (n, raw) in text.split(separator: "\n", omittingEmptySubsequences: false).enumerated() {
            let line = raw.split(separator: "#", maxSplits: 1, omittingEmptySubsequences: false).first ?? ""
            let words = line.split(whereSeparator: { $0 == " " || $0 == "\t" }).map(String.init)
            if words.isEmpty { continue }
            guard words.count == 4, let floor = Double(words[3]), let peer = Harness.makePeer(words[2]) else {
                throw BenchFailure(description: "line \(n + 1) of the thresholds: expected `scenario form peer floor`, "
                    + "found '\(raw)'")
            }
            let (scenario, form) = (words[0], words[1])
            // Against PostgreSQL used directly, DocStore on the same server; otherwise ``Report/primary(_:)``.
            let ours = peer is PostgresJSONBPeer ? "DocStore PG" : Report.primary(all)
            guard let m = all.first(where: { $0.peer == ours && $0.scenario == scenario && $0.form == form }),
                  let ratio = Report.ratio(all, m, to: peer.name) else {
                print("MISSING \(scenario) \(form) vs \(peer.name): not measured")
                failures += 1
                continue
            }
            let ok = ratio >= floor
            if !ok { failures += 1 }
            print(String(format: "%@ %@ %@ vs %@: %.2fx (floor %.2fx)", ok ? "ok  " : "FAIL", scenario, form,
                         peer.name, ratio, floor))
        }
        return failures
    }
}
