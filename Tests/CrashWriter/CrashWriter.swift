import DocStore
import Foundation

/// A record written by the crash-safety test's child process. Each batch holds `batchSize` records with the same
/// `batch`, ids `batch * batchSize + i`, and unique codes, so a half-written batch would show.
public struct CrashRecord: Document, Equatable {
    public var id: Int
    public var batch: Int
    public var code: String
    public var tags: [String]
    public var payload: String

    public static let batchSize = 40
    public static let collection = "records"
    public static let indexes: [IndexSpec<CrashRecord>] = [
        .index("batch", \.batch),
        .unique("code", \.code),
        .multi("tags", \.tags),
    ]

    public static func batch(_ b: Int) -> [CrashRecord] {
        (0..<batchSize).map { i in
            CrashRecord(id: b * batchSize + i, batch: b, code: "code-\(b)-\(i)",
                        tags: ["b\(b % 7)", "i\(i % 5)"], payload: String(repeating: "x", count: 100 + (b * 31 + i) % 400))
        }
    }

    /// Options with a small map, so that the map grows while the child is being killed.
    public static var options: DocStore.Options {
        var options = DocStore.Options()
        options.initialMapSize = 256 << 10
        return options
    }
}

/// Usage: `DocStoreCrashWriter PATH` — writes batch after batch into the store at PATH, printing
/// `committed N` after each commit, until it is killed.
@main
struct CrashWriter {
    static func main() async {
        let arguments = CommandLine.arguments
        guard arguments.count == 2 else {
            FileHandle.standardError.write(Data("usage: DocStoreCrashWriter PATH\n".utf8))
            exit(2)
        }
        do {
            let store = try await DocStore(path: arguments[1], options: CrashRecord.options)
            var batch = try await store.count(CrashRecord.self) / CrashRecord.batchSize
            while true {
                try await store.insert(contentsOf: CrashRecord.batch(batch))
                // Written straight to the file descriptor: nothing is buffered when the process is killed.
                FileHandle.standardOutput.write(Data("committed \(batch)\n".utf8))
                batch += 1
            }
        } catch {
            FileHandle.standardError.write(Data("DocStoreCrashWriter: \(error)\n".utf8))
            exit(1)
        }
    }
}
