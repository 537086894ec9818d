import DocStore
import Foundation
import Synchronization

/// The store `docstore --demo` opens: people with the fields and indexes the README's examples use.
enum Demo {
    /// The demo store's folder, removed when the shell ends.
    static let folder = Mutex<String?>(nil)
    /// Kept alive while the shell runs; set once, before any statement.
    nonisolated(unsafe) static var signalSources: [any DispatchSourceSignal] = []

    /// Removes the demo store's folder, if there is one.
    static func removeFolder() {
        if let folder = Demo.folder.withLock({ $0 }) { try? FileManager.default.removeItem(atPath: folder) }
    }

    static let cities = ["Oslo", "Bergen", "Trondheim", "Stavanger", "Tromsø", "Copenhagen", "Stockholm", "Helsinki"]
    static let firstNames = ["Ann", "Bo", "Cai", "Dag", "Eva", "Finn", "Gro", "Hans", "Ida", "Jill", "Kari", "Lars",
                             "Mia", "Nils", "Ola", "Pia", "Rolf", "Siri", "Tor", "Una", "Vera", "Åse", "Øystein"]
    static let lastNames = ["Berg", "Dahl", "Eriksen", "Hansen", "Johansen", "Larsen", "Moe", "Nilsen", "Olsen",
                            "Strand", "Lie", "Haugen"]
    static let tags = ["swift", "rust", "go", "python", "lmdb", "sqlite", "linux", "cycling", "chess", "music"]

    /// Creates the demo store in a new temporary folder and returns its path.
    static func create(count: Int = 1_000) async throws -> String {
        // A fresh folder no one else can have made (mkdtemp), removed on exit, SIGTERM and SIGHUP.
        var template = Array((FileManager.default.temporaryDirectory.path + "/docstore-demo-XXXXXX").utf8CString)
        guard let made = template.withUnsafeMutableBufferPointer({ buffer in buffer.baseAddress.flatMap { mkdtemp($0) } })
        else {
            throw ShellError("cannot make a folder for the demo store: \(String(cString: strerror(errno)))")
        }
        let folder = String(cString: made)
        Demo.folder.withLock { $0 = folder }
        for sig in [SIGTERM, SIGHUP] {
            signal(sig, SIG_IGN)
            let source = DispatchSource.makeSignalSource(signal: sig, queue: .global())
            source.setEventHandler {
                removeFolder()
                exit(128 + sig)
            }
            source.resume()
            Demo.signalSources.append(source)
        }
        let path = folder + "/demo.db"
        let store = try await DocStore(path: path)
        let people = (1...count).map(person)
        try await store.write { ctx in
            for p in people { try ctx.insert(p, into: "people") }
            try ctx.createIndex(IndexDefinition(name: "age", kind: .regular, fields: ["age"]), in: "people")
            try ctx.createIndex(IndexDefinition(name: "city_age", kind: .regular, fields: ["city", "age"]),
                                in: "people")
            try ctx.createIndex(IndexDefinition(name: "email", kind: .unique, fields: ["email"]), in: "people")
            try ctx.createIndex(IndexDefinition(name: "tags", kind: .multi, fields: ["tags"]), in: "people")
        }
        await store.close()
        return path
    }

    /// Person number `n`, the same on every run.
    static func person(_ n: Int) -> DocumentValue {
        var seed = UInt64(n) &* 0x9E37_79B9_7F4A_7C15
        func next(_ bound: Int) -> Int {
            seed ^= seed >> 33
            seed = seed &* 0xFF51_AFD7_ED55_8CCD
            seed ^= seed >> 29
            return Int(seed % UInt64(bound))
        }
        let first = firstNames[next(firstNames.count)]
        let last = lastNames[next(lastNames.count)]
        let city = cities[next(cities.count)]
        var personTags: [DocumentValue] = []
        for _ in 0..<next(4) {
            let t = DocumentValue.string(tags[next(tags.count)])
            if !personTags.contains(t) { personTags.append(t) }
        }
        let created = Date(timeIntervalSince1970: 1_600_000_000 + Double(next(120_000_000)))
        var fields: [(String, DocumentValue)] = [
            ("id", .int(Int64(n))),
            ("name", .string("\(first) \(last)")),
            ("age", .int(Int64(next(90) + 1))),
            ("city", .string(city)),
            ("email", next(5) == 0 ? .null : .string("\(first.lowercased()).\(last.lowercased())\(n)@example.com")),
            ("active", .bool(next(3) != 0)),
            ("score", .double(Double(next(10_000)) / 100)),
            ("tags", .array(personTags)),
            ("createdAt", .date(created)),
            ("address", .object([("street", .string("\(last)veien \(next(200) + 1)")),
                                 ("zip", .string(String(format: "%04d", next(9000) + 1000))),
                                 ("country", .string(["Oslo", "Bergen", "Trondheim", "Stavanger", "Tromsø"]
                                    .contains(city) ? "NO" : "other"))])),
        ]
        if n % 7 == 0 { fields.removeAll { $0.0 == "email" } }
        return .object(fields)
    }
}
