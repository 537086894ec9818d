import Foundation

/// One group's key and aggregate, as execution produces them: `key` orders the groups (the key bytes of the
/// group's values, one part per field), `values` are the group's field values as stored (those of the first
/// document met), and `result` the aggregate.
struct GroupRow: Sendable, Equatable {
    var key: [UInt8]
    var values: [DocumentValue]
    var result: DocumentValue

    /// The one group of an aggregate without groups that met no document: a count of 0, a sum of 0, no average.
    static func ofNothing(_ aggregate: Aggregate, collection: String) throws -> GroupRow {
        GroupRow(key: [], values: [], result: try Accumulator().result(aggregate, collection: collection))
    }

    /// Whether this is the group of documents without a value (`nil` or missing) in its one field.
    var isNilGroup: Bool { key == [KeyEncoder.Kind.null] }
}

extension Grouping {
    /// Groups in key order put in this order (by key, or by aggregate with ties by key), then sliced.
    func arranged(_ rows: [GroupRow]) -> [GroupRow] {
        var rows = rows
        switch order {
        case .key: if descending { rows.reverse() }
        case .value:
            let keyed = rows.map { (KeyEncoder.key($0.result), $0) }
            rows = keyed.sorted { a, b in
                if a.0 != b.0 { return descending ? b.0.lexicographicallyPrecedes(a.0) : a.0.lexicographicallyPrecedes(b.0) }
                return tiesDescending ? b.1.key.lexicographicallyPrecedes(a.1.key) : a.1.key.lexicographicallyPrecedes(b.1.key)
            }.map(\.1)
        }
        guard let window else { return rows }
        return WindowStep.apply([.slice(window.range)] + window.afterwards, to: rows)
    }
}

/// The running state of one aggregate over one group.
struct Accumulator {
    var documents = 0
    /// Numbers seen (for `average`).
    var numbers = 0
    var sum = NumberSum()
    /// The best value so far for `min`/`max`: its key, its value, and the value as a `Double` when a number.
    var best: (key: [UInt8], value: DocumentValue, number: Double?)?

    /// Adds one number: `whole` when it is a whole number (``NumberSum/parts(_:)``), counted `times` times.
    @inline(__always)
    mutating func addNumber(whole: Int128?, _ double: Double, times: Int = 1) {
        numbers += times
        sum.add(whole: whole, double, times: times)
    }

    /// A number read from a document, as `addNumber` takes it; `nil` for anything else.
    @inline(__always)
    static func number(_ ref: ValueRef, in reader: BinaryReader) -> (whole: Int128?, double: Double)? {
        if let i = reader.integer(ref) { return (Int128(i), Double(i)) }
        if let d = reader.double(ref) { return (NumberSum.whole(d), d) }
        if let u = reader.unsigned(ref) { return (Int128(u), Double(u)) }
        return nil
    }

    /// Offers a value to `min` (or with `greatest`, `max`): kept when it orders before (after) the best so far.
    mutating func offer(_ ref: ValueRef, in reader: BinaryReader, greatest: Bool) throws {
        let number = reader.exactDouble(ref)
        if let best {
            if let n = number, let b = best.number {
                guard greatest ? n > b : n < b else { return }
            } else {
                let key = try KeyEncoder.key(ref, in: reader)
                guard greatest ? best.key.lexicographicallyPrecedes(key) : key.lexicographicallyPrecedes(best.key) else {
                    return
                }
                self.best = (key, try DocumentValue(reader: reader, ref: ref), number)
                return
            }
        }
        best = (try KeyEncoder.key(ref, in: reader), try DocumentValue(reader: reader, ref: ref), number)
    }

    /// Offers a value whose key is known (from an index).
    mutating func offer(key: [UInt8], value: () throws -> DocumentValue, greatest: Bool) rethrows {
        if let best, greatest ? !best.key.lexicographicallyPrecedes(key) : !key.lexicographicallyPrecedes(best.key) {
            return
        }
        best = (key, try value(), nil)
    }

    /// Adds another part's state (a later range of the same scan).
    mutating func merge(_ other: Accumulator, _ aggregate: Aggregate) {
        documents += other.documents
        numbers += other.numbers
        sum.merge(other.sum)
        if let theirs = other.best { offer(key: theirs.key, value: { theirs.value }, greatest: aggregate.isMax) }
    }

    /// The aggregate's value.
    func result(_ aggregate: Aggregate, collection: String) throws -> DocumentValue {
        switch aggregate {
        case .count:
            return .int(Int64(documents))
        case .sum(let path):
            guard let value = sum.value else {
                throw DocStoreError(.overflow, "the sum of '\(path)' in collection '\(collection)' is \(sum.whole), "
                    + "which does not fit in a 64-bit integer", collection: collection)
            }
            return value
        case .average:
            guard numbers > 0 else { return .null }
            return .double(sum.double / Double(numbers))
        case .min, .max:
            return best?.value ?? .null
        }
    }
}

/// Aggregates computed over documents one at a time: each document's group key (the key bytes of its group fields)
/// finds its group in a hash table, whose groups are put in key order at the end.
final class GroupScan {
    private let groupPaths: [CompiledPath]
    private let groupLayouts: [CompiledPath.Layout]
    private let valuePath: CompiledPath?
    private let valueLayout: CompiledPath.Layout?
    let aggregate: Aggregate

    init(groupBy: [FieldPath], aggregate: Aggregate) {
        groupPaths = groupBy.map(CompiledPath.init)
        groupLayouts = groupPaths.map(\.layout)
        valuePath = aggregate.path.map(CompiledPath.init)
        valueLayout = valuePath?.layout
        self.aggregate = aggregate
    }

    /// The groups of one part of a scan.
    struct Part {
        var groups: [[UInt8]: (values: [DocumentValue], state: Accumulator)] = [:]
        var scratch: [UInt8] = []
    }

    /// Adds one document to its group.
    func add(_ document: UnsafeRawBufferPointer, to part: inout Part) throws {
        let reader = BinaryReader(document)
        let (root, shaped) = try reader.rootAndShape()
        var encoder = KeyEncoder()
        part.scratch.removeAll(keepingCapacity: true)
        encoder.swapBuffer(&part.scratch)
        for layout in groupLayouts {
            if let ref = try layout.value(in: reader, from: root, shaped: shaped), ref.tag != BinaryFormat.Tag.null {
                try encoder.append(ref, in: reader)
            } else {
                encoder.append(.null)
            }
        }
        encoder.swapBuffer(&part.scratch)
        if let i = part.groups.index(forKey: part.scratch) {
            try add(reader, root, shaped, to: &part.groups.values[i].state)
        } else {
            var state = Accumulator()
            try add(reader, root, shaped, to: &state)
            let values = try groupLayouts.map { layout in
                try layout.value(in: reader, from: root, shaped: shaped).map { try DocumentValue(reader: reader, ref: $0) }
                    ?? .null
            }
            part.groups[part.scratch] = (values, state)
        }
    }

    @inline(__always)
    private func add(_ reader: BinaryReader, _ root: ValueRef, _ shaped: BinaryReader.Shaped?,
                     to state: inout Accumulator) throws {
        state.documents += 1
        guard let valueLayout, let ref = try valueLayout.value(in: reader, from: root, shaped: shaped),
              ref.tag != BinaryFormat.Tag.null else { return }
        switch aggregate {
        case .count: break
        case .sum, .average:
            if let (whole, double) = Accumulator.number(ref, in: reader) { state.addNumber(whole: whole, double) }
        case .min: try state.offer(ref, in: reader, greatest: false)
        case .max: try state.offer(ref, in: reader, greatest: true)
        }
    }

    /// The parts' groups together, in key order: the values of a group are those of the earliest part.
    func rows(_ parts: [Part], collection: String) throws -> [GroupRow] {
        var all = parts.first?.groups ?? [:]
        for part in parts.dropFirst() {
            for (key, group) in part.groups {
                if let i = all.index(forKey: key) {
                    all.values[i].state.merge(group.state, aggregate)
                } else {
                    all[key] = group
                }
            }
        }
        return try all.sorted { $0.key.lexicographicallyPrecedes($1.key) }.map {
            GroupRow(key: $0.key, values: $0.value.values, result: try $0.value.state.result(aggregate, collection: collection))
        }
    }
}

extension Executor {
    /// The groups of the plan's matches (one group of all of them when it groups by no field), each with its
    /// aggregate, computed as the plan says: in the plan's order of the groups (by key unless by value) and within
    /// its slice of them.
    func aggregate() throws -> [GroupRow] {
        guard let grouping = plan.grouping, let access = plan.aggregateAccess else { return [] }
        var rows: [GroupRow]
        switch access {
        case .counting(let afterwards):
            let n = WindowStep.apply(afterwards, toCount: try count())
            statistics.value.returned = n
            return grouping.arranged([GroupRow(key: [], values: [], result: .int(Int64(n)))])
        case .indexKeys(let index, let ranges, let firstOnly, let fixed):
            rows = try aggregateFromKeys(of: index, ranges: ranges, fixedParts: fixed, groupBy: grouping.by,
                                         grouping.aggregate, firstOnly: firstOnly, decoded: grouping.valuesDecoded)
        case .matches:
            rows = try groups(grouping)
        }
        if grouping.dropsNil { rows.removeAll(where: \.isNilGroup) }
        if grouping.by.isEmpty && rows.isEmpty { rows = [try GroupRow.ofNothing(grouping.aggregate, collection: handle.name)] }
        rows = grouping.arranged(rows)
        statistics.value.returned = rows.count
        return rows
    }

    /// The groups of the matches, over the documents: the query's results in order and within its slice when it is
    /// sliced (an aggregate of a slice), otherwise every match in whatever order is cheapest.
    private func groups(_ grouping: Grouping) throws -> [GroupRow] {
        let scan = GroupScan(groupBy: grouping.by, aggregate: grouping.aggregate)
        var parts: [GroupScan.Part]
        if plan.limit != nil {
            var part = GroupScan.Part()
            try walk { _, document in try scan.add(document, to: &part); return true }
            parts = [part]
        } else if let split = try matchesInParts(start: { GroupScan.Part() }, add: { try scan.add($1.document, to: &$0) }) {
            parts = split
        } else {
            // Every match is read: through an index, in id order, where neighbours share pages.
            var part = GroupScan.Part()
            try forEachMatchInIDOrder { try scan.add($0.document, to: &part); return true }
            parts = [part]
        }
        return try scan.rows(parts, collection: handle.name)
    }

    /// Walks the distinct keys of an index in `ranges`, each counted as many times as it has entries
    /// (`mdb_cursor_count`): past its first `fixedParts` parts (the same in every key of the ranges), its parts the
    /// group and the next one the aggregate's value.
    private func aggregateFromKeys(of definition: IndexDefinition, ranges: [KeyRange], fixedParts: Int,
                                   groupBy: [FieldPath], _ aggregate: Aggregate, firstOnly: Bool, decoded: Bool) throws
        -> [GroupRow] {
        let index = try handle.index(definition)
        let keys = IndexKeyValues(definition: definition, handle: handle, txn: txn, decoded: decoded, statistics: statistics)
        let groupParts = groupBy.count
        var rows: [GroupRow] = []
        var current: (key: [UInt8], values: [DocumentValue], state: Accumulator)?
        let descending = firstOnly && aggregate.isMax
        // Where the fixed parts end: the same in every key of the ranges, so found in the first key.
        var fixedEnd: Int?

        func finish() throws {
            guard let group = current else { return }
            current = nil
            rows.append(GroupRow(key: group.key, values: group.values,
                                 result: try group.state.result(aggregate, collection: handle.name)))
        }

        /// Adds a key with `n()` entries (asked only where the aggregate counts them), `id` its first document's;
        /// false once the walk can stop.
        func add(_ key: UnsafeRawBufferPointer, id: UnsafeRawBufferPointer, entries n: () throws -> Int,
                 firstOfKey: () throws -> UnsafeRawBufferPointer) throws -> Bool {
            statistics.value.entriesScanned += 1
            try statistics.checkCancellation()
            // Past the fixed parts, the group is the key's next parts, the aggregate's value the one after.
            if fixedEnd == nil {
                var end = 0
                for _ in 0..<fixedParts {
                    guard let next = KeyEncoder.partEnd(key, from: end) else { throw keys.malformed() }
                    end = next
                }
                fixedEnd = end
            }
            let groupStart = fixedEnd ?? 0
            var groupEnd = groupStart
            for _ in 0..<groupParts {
                guard let end = KeyEncoder.partEnd(key, from: groupEnd) else { throw keys.malformed() }
                groupEnd = end
            }
            let groupKey = UnsafeRawBufferPointer(rebasing: key[groupStart..<groupEnd])
            if current.map({ !groupKey.elementsEqual($0.key) }) ?? true {
                try finish()
                let values = try keys.groupValues(key, groupBy, from: groupStart, id: id)
                current = (Array(groupKey), values, Accumulator())
            }
            var state = current?.state ?? Accumulator()
            let entries: Int
            switch aggregate {
            case .min, .max: entries = 0   // (on an engine with round trips, a count is one)
            default: entries = try n()
            }
            state.documents += entries
            if let valuePath = aggregate.path {
                guard let valueEnd = KeyEncoder.partEnd(key, from: groupEnd) else { throw keys.malformed() }
                let part = UnsafeRawBufferPointer(rebasing: key[groupEnd..<valueEnd])
                switch aggregate {
                case .count: break
                case .sum, .average:
                    if let (whole, double) = KeyEncoder.number(ofPart: part) {
                        state.addNumber(whole: whole, double, times: entries)
                    }
                case .min, .max:
                    guard part.first != KeyEncoder.Kind.null else { break }
                    try state.offer(key: Array(part), value: { try keys.partValue(part, path: valuePath, id: firstOfKey) },
                                    greatest: aggregate.isMax)
                }
            }
            current?.state = state
            return !(firstOnly && state.best != nil)
        }

        if txn.prefersBatches && !descending {
            // Each distinct key with its first value and its number of entries, summed up where they are kept:
            // a key's entries do not travel.
            for range in ranges {
                var after: [UInt8]?
                var window = 256
                while true {
                    let summaries = try txn.keySummaries(index.database, from: range.lower, after: after,
                                                         below: range.upper, atMost: window)
                    for summary in summaries {
                        let more = try summary.key.withUnsafeBytes { key in
                            try summary.first.withUnsafeBytes { id in
                                try add(key, id: id, entries: { summary.count }, firstOfKey: { id })
                            }
                        }
                        if !more { return try finishedRows() }
                    }
                    guard summaries.count == window, let last = summaries.last else { break }
                    after = last.key
                    window = min(window * 4, 16_384)
                }
            }
            return try finishedRows()
        }

        try txn.withCursor(index.database) { cursor in
            for range in descending ? ranges.reversed() : ranges {
                var entry: StorageEntry?
                if descending {
                    if let upper = range.upper {
                        entry = try cursor.seek(atLeast: upper) != nil ? try cursor.previousKey() : try cursor.last()
                    } else {
                        entry = try cursor.last()
                    }
                } else {
                    entry = try cursor.seek(atLeast: range.lower)
                }
                while let (key, id) = entry, range.contains(key) {
                    // The first document of the key, as the scan and the ascending walk keep: a descending walk
                    // stands on the key's last.
                    let more = try add(key, id: id, entries: { try cursor.duplicateCount() },
                                       firstOfKey: { descending ? try cursor.firstDuplicate()?.value ?? id : id })
                    if !more { return }
                    entry = descending ? try cursor.previousKey() : try cursor.nextKey()
                }
            }
        }
        return try finishedRows()

        func finishedRows() throws -> [GroupRow] {
            try finish()
            return rows
        }
    }
}

/// The values of an index's keys, for aggregates read from its keys: a part's value from the part where it tells it
/// exactly, else from the document of the key.
struct IndexKeyValues {
    let definition: IndexDefinition
    let handle: CollectionHandle
    let txn: any StorageTransaction
    /// The caller decodes the values as Swift types (``Grouping/valuesDecoded``): a number's key gives it.
    let decoded: Bool
    /// Where the documents read are counted, if anywhere.
    let statistics: StatisticsBox?

    func malformed() -> DocStoreError {
        DocStoreError(.corruptDocument, "index '\(definition.name)' of collection '\(handle.name)' holds a key that "
            + "is not made of its fields' values (verify() reports it)", collection: handle.name, index: definition.name)
    }

    /// The group's values: from the key where it gives them back exactly, else from the document `id`.
    func groupValues(_ key: UnsafeRawBufferPointer, _ paths: [FieldPath], from offset: Int,
                     id: UnsafeRawBufferPointer) throws -> [DocumentValue] {
        var start = offset
        return try paths.map { path in
            guard let end = KeyEncoder.partEnd(key, from: start) else { throw malformed() }
            defer { start = end }
            return try partValue(UnsafeRawBufferPointer(rebasing: key[start..<end]), path: path, id: { id })
        }
    }

    /// The value a key part holds: from the part where it tells it exactly, else from the document `id` names
    /// (found only then).
    func partValue(_ part: UnsafeRawBufferPointer, path: FieldPath, id: () throws -> UnsafeRawBufferPointer) throws
        -> DocumentValue {
        if let value = KeyEncoder.exactValue(ofPart: part) { return value }
        // A number for a caller that decodes it: whether it was stored as an integer does not matter. (Not
        // zero: its key does not keep the sign of -0.0.)
        if decoded, let (whole, double) = KeyEncoder.number(ofPart: part), whole != 0 {
            if whole == nil { return .double(double) }
            if let whole, let integer = Int64(exactly: whole) { return .int(integer) }
        }
        guard let raw = try txn.get(handle.documents, id()) else {
            throw DocStoreError(.corruptDocument, "index '\(definition.name)' of collection '\(handle.name)' has an "
                + "entry for a missing document (verify() reports it)", collection: handle.name, index: definition.name)
        }
        statistics?.value.documentsRead += 1
        let reader = BinaryReader(raw)
        return try reader.value(atPath: path, from: try reader.root()).map { try DocumentValue(reader: reader, ref: $0) } ?? .null
    }

    /// `min` (with `greatest`, `max`) over every document of the index's first field, `path`: the first key from
    /// that end of the index whose first part is not `nil`, as the walk of a plan that reads it finds it
    /// (``Executor/aggregate()``); `.null` when no document has a value there. `nil` keys are the least, so the
    /// greatest end holds one only when every key does.
    func extreme(of path: FieldPath, greatest: Bool, in index: KeySpace) throws -> DocumentValue {
        try txn.withCursor(index) { cursor in
            var entry = greatest ? try cursor.last() : try cursor.first()
            func firstPart(_ key: UnsafeRawBufferPointer) throws -> UnsafeRawBufferPointer {
                guard let end = KeyEncoder.partEnd(key, from: 0) else { throw malformed() }
                return UnsafeRawBufferPointer(rebasing: key[0..<end])
            }
            if !greatest, let (key, _) = entry, try firstPart(key).first == KeyEncoder.Kind.null {
                entry = try cursor.seek(atLeast: [KeyEncoder.Kind.null + 1])
            }
            guard let (key, id) = entry else { return .null }
            let part = try firstPart(key)
            guard part.first != KeyEncoder.Kind.null else { return .null }
            // The key's first document, as the walk keeps it: a cursor at the greatest end stands on the key's last.
            return try partValue(part, path: path, id: { greatest ? try cursor.firstDuplicate()?.value ?? id : id })
        }
    }
}

extension KeyEncoder {
    /// Where the key part that starts at `offset` ends; `nil` when none starts there.
    static func partEnd(_ key: UnsafeRawBufferPointer, from offset: Int) -> Int? {
        guard offset < key.count else { return nil }
        let end: Int
        switch key[offset] {
        case Kind.null, Kind.false, Kind.true, Kind.nan: end = offset + 1
        case Kind.number:
            guard offset + 10 <= key.count else { return nil }
            end = key[offset + 9] == Exactness.exact ? offset + 10 : offset + 18
        case Kind.date: end = offset + 9
        case Kind.uuid: end = offset + 17
        case Kind.string, Kind.bytes:
            var i = offset + 1
            while i + 1 < key.count {
                if key[i] == 0 {
                    if key[i + 1] == 0x01 { return i + 2 }
                    i += 2
                } else {
                    i += 1
                }
            }
            return nil
        case Kind.array, Kind.object:
            var i = offset + 1
            while i < key.count, key[i] != Kind.end {
                // An object's field is its name (a string part), then its value.
                guard let next = partEnd(key, from: i) else { return nil }
                i = next
            }
            end = i + 1
        default: return nil
        }
        return end <= key.count ? end : nil
    }

    /// The value a key part gives back exactly: `nil`, a Boolean, an ASCII string, a date or a UUID. Numbers are
    /// not given back (the key does not say whether one was an integer or a `Double`), nor other strings (the key
    /// holds their canonical form).
    static func exactValue(ofPart part: UnsafeRawBufferPointer) -> DocumentValue? {
        switch part.first {
        case Kind.null: return .null
        case Kind.false: return .bool(false)
        case Kind.true: return .bool(true)
        case Kind.number: return nil
        case Kind.string where part.count >= 3:
            // An ASCII string without a zero byte, the common group key, read in place.
            let text = UnsafeRawBufferPointer(rebasing: part[1..<(part.count - 2)])
            if part[part.count - 2] == 0, part[part.count - 1] == 1, text.allSatisfy({ $0 != 0 && $0 < 0x80 }) {
                return .string(String(decoding: text, as: UTF8.self))
            }
            return exactValue(ofKey: part, numbers: false)
        default: return exactValue(ofKey: part, numbers: false)
        }
    }

    /// The number a key part holds, as ``NumberSum/add(whole:_:times:)`` takes it; `nil` for a part that
    /// is not a number. NaN is a number (it makes a sum NaN, as adding it does).
    static func number(ofPart part: UnsafeRawBufferPointer) -> (whole: Int128?, double: Double)? {
        switch part.first {
        case Kind.nan: return (nil, .nan)
        case Kind.number where part.count >= 10:
            let d = orderedDouble(part[1..<9])
            guard part[9] != Exactness.exact, part.count >= 18 else { return (NumberSum.whole(d), d) }
            guard d.isFinite, d.magnitude <= 0x1p64 else { return nil }   // no integer's key: a damaged one
            // An integer beyond 2^53: the nearest Double, and how far the integer lies from it.
            var bits: UInt64 = 0
            for b in part[10..<18] { bits = bits << 8 | UInt64(b) }
            let difference = Int64(bitPattern: bits ^ (1 << 63))
            return (Int128(d) + Int128(difference), d)
        default: return nil
        }
    }
}
