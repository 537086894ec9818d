import CLMDB
import DocStore
import Foundation

/// The physical limit of DocStore's storage: LMDB through its C API, with the same documents (DocStore's encoding)
/// and the same indexes as hand-made key-value databases, walked with cursors, with no query engine.
final class LMDBPeer: Peer {
    let name = "raw LMDB"
    private var env: OpaquePointer?
    private var docs: MDB_dbi = 0, age: MDB_dbi = 0, cityAge: MDB_dbi = 0, tags: MDB_dbi = 0, email: MDB_dbi = 0,
                bonus: MDB_dbi = 0, city: MDB_dbi = 0
    private var path = ""

    private static func check(_ rc: Int32, _ what: String) throws {
        guard rc == 0 else { throw BenchFailure(description: "\(what): \(String(cString: mdb_strerror(rc)))") }
    }

    static func idKey(_ id: Int64) -> [UInt8] { withUnsafeBytes(of: UInt64(id).bigEndian) { Array($0) } }
    static func cityAgeKey(_ city: String, _ age: Int?) -> [UInt8] {
        Array(city.utf8) + [0] + (age.map { [UInt8($0)] } ?? [])
    }
    /// nil first, then the values in order: the sign bit flipped, big-endian.
    static func bonusKey(_ bonus: Int?) -> [UInt8] {
        guard let bonus else { return [0] }
        return [1] + withUnsafeBytes(of: (UInt64(bitPattern: Int64(bonus)) ^ (1 << 63)).bigEndian) { Array($0) }
    }

    func load(_ people: [BenchPerson], in directory: String) async throws {
        path = directory + "/raw.lmdb"
        try Self.check(mdb_env_create(&env), "mdb_env_create")
        try Self.check(mdb_env_set_mapsize(env, 64 << 30), "mdb_env_set_mapsize")
        try Self.check(mdb_env_set_maxdbs(env, 8), "mdb_env_set_maxdbs")
        try Self.check(mdb_env_open(env, path, UInt32(MDB_NOSUBDIR | MDB_NOTLS), 0o644), "mdb_env_open")
        try write { txn in
            let create = UInt32(MDB_CREATE)
            let dupsort = UInt32(MDB_CREATE | MDB_DUPSORT)
            try Self.check(mdb_dbi_open(txn, "docs", create, &docs), "open docs")
            try Self.check(mdb_dbi_open(txn, "age", dupsort, &age), "open age")
            try Self.check(mdb_dbi_open(txn, "city", dupsort, &city), "open city")
            try Self.check(mdb_dbi_open(txn, "city_age", dupsort, &cityAge), "open city_age")
            try Self.check(mdb_dbi_open(txn, "tags", dupsort, &tags), "open tags")
            try Self.check(mdb_dbi_open(txn, "email", create, &email), "open email")
            try Self.check(mdb_dbi_open(txn, "bonus", dupsort, &bonus), "open bonus")
        }
        let encoder = DocumentEncoder()
        for start in stride(from: 0, to: people.count, by: 10_000) {
            let batch = people[start..<min(people.count, start + 10_000)]
            try write { txn in
                for p in batch {
                    let id = Self.idKey(p.id)
                    try put(txn, docs, id, try encoder.encode(StoredPerson(p)), flags: UInt32(MDB_NOOVERWRITE))
                    try put(txn, age, [UInt8(p.age)], id)
                    try put(txn, city, Array(p.city.utf8), id)
                    try put(txn, cityAge, Self.cityAgeKey(p.city, p.age), id)
                    for t in p.tags { try put(txn, tags, Array(t.utf8), id) }
                    try put(txn, email, Array(p.email.utf8), id, flags: UInt32(MDB_NOOVERWRITE))
                    try put(txn, bonus, Self.bonusKey(p.bonus), id)
                }
            }
        }
    }

    private func write(_ body: (OpaquePointer?) throws -> Void) throws {
        var txn: OpaquePointer?
        try Self.check(mdb_txn_begin(env, nil, 0, &txn), "mdb_txn_begin")
        do { try body(txn) } catch { mdb_txn_abort(txn); throw error }
        try Self.check(mdb_txn_commit(txn), "mdb_txn_commit")
    }

    private func read<R>(_ body: (OpaquePointer?) throws -> R) throws -> R {
        var txn: OpaquePointer?
        try Self.check(mdb_txn_begin(env, nil, UInt32(MDB_RDONLY), &txn), "mdb_txn_begin")
        defer { mdb_txn_abort(txn) }
        return try body(txn)
    }

    private func put(_ txn: OpaquePointer?, _ dbi: MDB_dbi, _ key: [UInt8], _ value: [UInt8], flags: UInt32 = 0) throws {
        var key = key, value = value
        try key.withUnsafeMutableBytes { k in
            try value.withUnsafeMutableBytes { v in
                var mk = MDB_val(mv_size: k.count, mv_data: k.baseAddress)
                var mv = MDB_val(mv_size: v.count, mv_data: v.baseAddress)
                try Self.check(mdb_put(txn, dbi, &mk, &mv, flags), "mdb_put")
            }
        }
    }

    func supports(_ scenario: Scenario, _ form: Form) -> Bool {
        switch scenario {
        case .fileCheck, .verify, .scansInARow4, .scansAtOnce4, .savesBesideScans:
            return false   // checking, and reads beside the writer, are the engine's work
        case .groupByIndexedCount, .groupByUnindexedSum, .distinctIndexed, .maxIndexed, .averageRange10,
             .averageScoreRange10, .update1Percent, .update1PercentFields, .singleInserts, .insertTasks4, .insertTasks16, .insertTasks64,
             .insertProcesses4, .singleSaves, .saveTasks16:
            return false   // aggregates, updates and commits of documents are the engine's work
        case .indexedResidual, .sortUnindexedLimit, .fullSort10, .findOrCreateHit, .findOrCreateMiss:
            return false   // they need fields read from the documents, or a sort: the engine's work
        case .coalesce, .optionalRange, .flatMap, .twoFields, .arithmetic, .ternary, .stringContains, .arrayCount:
            return false   // computed conditions: the engine's work
        case .unindexedFilter:
            return form == .raw   // the full walk, every document's bytes touched
        default:
            return true
        }
    }

    /// What is done with each hit: the id alone, its document's bytes, or its document decoded.
    private final class Visitor {
        let form: Form
        let txn: OpaquePointer?
        let docs: MDB_dbi
        var count = 0
        var touched = 0
        let decoder = DocumentDecoder()

        init(form: Form, txn: OpaquePointer?, docs: MDB_dbi) {
            self.form = form
            self.txn = txn
            self.docs = docs
        }

        func visit(id: MDB_val) throws {
            count += 1
            guard form != .ids else { touched &+= Int(id.mv_size); return }
            var key = id
            var value = MDB_val()
            try LMDBPeer.check(mdb_get(txn, docs, &key, &value), "mdb_get")
            try visit(document: value)
        }

        func visit(document value: MDB_val) throws {
            let bytes = UnsafeRawBufferPointer(start: value.mv_data, count: value.mv_size)
            if form == .decoded {
                touched &+= Int(try decoder.decode(StoredPerson.self, from: bytes).age)
            } else {
                touched &+= Int(bytes.last ?? 0)
            }
        }
    }

    /// Walks the index `dbi` from `lower` (inclusive) while keys are below `upper`, visiting each entry's id;
    /// stops after `limit` entries.
    private func walk(_ txn: OpaquePointer?, _ dbi: MDB_dbi, from lower: [UInt8], below upper: [UInt8]?,
                      limit: Int = .max, _ visitor: Visitor) throws {
        var cursor: OpaquePointer?
        try Self.check(mdb_cursor_open(txn, dbi, &cursor), "mdb_cursor_open")
        defer { mdb_cursor_close(cursor) }
        var lowerKey = lower
        var key = MDB_val(), value = MDB_val()
        var rc: Int32 = lowerKey.isEmpty ? mdb_cursor_get(cursor, &key, &value, MDB_FIRST)
            : lowerKey.withUnsafeMutableBytes { k in
                key = MDB_val(mv_size: k.count, mv_data: k.baseAddress)
                return mdb_cursor_get(cursor, &key, &value, MDB_SET_RANGE)
            }
        var seen = 0
        while rc == 0 && seen < limit {
            if let upper {
                let k = UnsafeRawBufferPointer(start: key.mv_data, count: key.mv_size)
                if !k.lexicographicallyPrecedes(upper) { break }
            }
            try visitor.visit(id: value)
            seen += 1
            rc = mdb_cursor_get(cursor, &key, &value, MDB_NEXT)
        }
        if rc != 0 && rc != MDB_NOTFOUND { try Self.check(rc, "mdb_cursor_get") }
    }

    func run(_ scenario: Scenario, _ form: Form, _ p: Parameters) async throws -> Int {
        try read { txn in
            let visitor = Visitor(form: form, txn: txn, docs: docs)
            switch scenario {
            case .getByID, .lookupByID:
                for id in p.ids {
                    var key = Self.idKey(id)
                    try key.withUnsafeMutableBytes { k in
                        let v = MDB_val(mv_size: k.count, mv_data: k.baseAddress)
                        try visitor.visit(id: v)
                    }
                }
            case .equality:
                try walk(txn, cityAge, from: Self.cityAgeKey(p.city, nil), below: Self.cityAgeKey(p.city, nil) + [255],
                         visitor)
            case .range1: try walk(txn, age, from: [42], below: [43], visitor)
            case .range10: try walk(txn, age, from: [20], below: [30], visitor)
            case .compoundPrefix:
                try walk(txn, cityAge, from: Self.cityAgeKey(p.city, 50), below: Self.cityAgeKey(p.city, nil) + [255],
                         visitor)
            case .arrayContains:
                try walk(txn, tags, from: Array(p.tag.utf8), below: Array(p.tag.utf8) + [0], visitor)
            case .sortIndexedLimit:
                try walk(txn, age, from: [], below: nil, limit: 100, visitor)
            case .countByIndex:
                return try countEntries(txn, age, below: [10])
            case .unindexedFilter:
                var cursor: OpaquePointer?
                try Self.check(mdb_cursor_open(txn, docs, &cursor), "mdb_cursor_open")
                defer { mdb_cursor_close(cursor) }
                var key = MDB_val(), value = MDB_val()
                var rc = mdb_cursor_get(cursor, &key, &value, MDB_FIRST)
                while rc == 0 {
                    try visitor.visit(document: value)
                    rc = mdb_cursor_get(cursor, &key, &value, MDB_NEXT)
                }
                return -1   // every document walked: not the filter's answer
            default:
                return 0
            }
            return visitor.count + (visitor.touched & 0)
        }
    }

    /// Entries of a duplicate-sorted index with keys below `upper`, counted per key with `mdb_cursor_count`.
    private func countEntries(_ txn: OpaquePointer?, _ dbi: MDB_dbi, below upper: [UInt8]) throws -> Int {
        var cursor: OpaquePointer?
        try Self.check(mdb_cursor_open(txn, dbi, &cursor), "mdb_cursor_open")
        defer { mdb_cursor_close(cursor) }
        var key = MDB_val(), value = MDB_val()
        var rc = mdb_cursor_get(cursor, &key, &value, MDB_FIRST)
        var total = 0
        while rc == 0 {
            let k = UnsafeRawBufferPointer(start: key.mv_data, count: key.mv_size)
            if !k.lexicographicallyPrecedes(upper) { break }
            var n = 0
            try Self.check(mdb_cursor_count(cursor, &n), "mdb_cursor_count")
            total += n
            rc = mdb_cursor_get(cursor, &key, &value, MDB_NEXT_NODUP)
        }
        return total
    }

    func fileSize() throws -> Int {
        (try FileManager.default.attributesOfItem(atPath: path)[.size] as? Int) ?? 0
    }

    func close() async {
        if let env { mdb_env_close(env) }
        env = nil
    }
}
