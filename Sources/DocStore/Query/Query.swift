import Foundation

/// A request: which documents of a collection, in what order, which slice of them, what it answers of them (the
/// documents, some fields of each, or groups with an aggregate each), decoded as what. A value, built by
/// refinement, that runs nothing until asked (`results`, `first`, `count`, `explain`, ...).
///
/// `Element` is what a result decodes to: a ``Document`` model or a ``DocumentValue`` for documents, any `Decodable`
/// for some fields of each (`select`), a ``Group`` for groups (`groupBy`), and the aggregate's value for an aggregate
/// of every match (`aggregate`, read with `value(in:)`).
///
/// A query of a ``Document`` type is written with `#Predicate`s and key paths; a query without the type (what a tool
/// such as the shell builds from text) names its collection, and its fields by their paths. Both are the same
/// request, decoded two ways: `Query<Person>` gives `Person`s and `Query<DocumentValue>` gives documents as values;
/// ``decoded(as:)-(DocumentValue.Type)`` turns one into the other.
///
/// For example:
/// ```swift
/// let adults = Person
///     .include(#Predicate { $0.age >= 18 })
///     .exclude(#Predicate { $0.city == "Oslo" })
///     .sortBy(\.age)                       // then by name within an age:
///     .sortBy(\.name, order: .reverse)
/// let page = try await adults[20..<40].results(in: store)
///
/// let sameAsValues = try await Query<DocumentValue>("people")
///     .include(.compare("age", .greaterOrEqual, .int(18)))
///     .sortBy("age")[0..<10]
///     .results(in: store)
/// ```
///
/// The words mean what they say:
/// - `include` and `exclude` add conditions; all of them must hold (`&&`), whenever they are added.
/// - `sortBy` is cumulative: each call sorts within the ties of the ones before. Documents that tie on every sort
///   key, and the documents of an unsorted query, come in id order. `nil` (or a missing field) sorts before any value.
/// - `reverse()` flips every ordering, the id order of ties included, so `q.reverse().first` is `q.last`.
///   On a sliced query it reverses the slice: `q[0..<5].reverse()` holds the same five documents, last first.
/// - `q[a..<b]` is the slice of `q`'s results at positions `a..<b` (fewer when there are fewer); slicing a slice
///   narrows it: `q[10..<20][0..<5]` is `q[10..<15]`.
/// - `first` is the first result of the query as it stands, and `last` the last: `q[0..<5].last` is the fifth
///   result of `q` (or the last of fewer), not the last of everything.
///
/// A `#Predicate` becomes a condition the planner reads when the query is built; a part of it DocStore cannot read
/// on the stored bytes is kept whole and evaluated by Foundation on the decoded document.
public struct Query<Element: Sendable>: Sendable {
    /// The collection the query reads.
    public let collection: String
    var selection = Selection()
    /// What the request answers of its matches.
    var output = Output.documents
    let kind: ElementKind<Element>

    /// The same request answering `output`, its results made by `kind`.
    func answering<T>(_ output: Output, as kind: ElementKind<T>) -> Query<T> {
        Query<T>(collection: collection, selection: selection, output: output, kind: kind)
    }

    /// Whether any condition (of an `include` or an `exclude`) chooses among the documents.
    package var hasConditions: Bool { !selection.conditions.isEmpty }

    /// The fields its conditions and its order read, each once, in order of appearance.
    package var fieldsRead: [FieldPath] {
        var out: [FieldPath] = []
        for field in selection.condition.fields + selection.sort.map(\.path) where !out.contains(field) {
            out.append(field)
        }
        return out
    }

    /// The request of the documents it selects.
    var documents: Query { Query(collection: collection, selection: selection, kind: kind) }

    private func with(_ change: (inout Selection) -> Void) -> Query {
        var q = self
        change(&q.selection)
        return q
    }

    /// The request with its groups changed by `change`; `nil` when it answers no groups.
    func withGroups(_ change: (inout Grouping) -> Void) -> Query? {
        guard case .groups(var grouping) = output else { return nil }
        var q = self
        change(&grouping)
        q.output = .groups(grouping)
        return q
    }

    /// Keeps only the documents `filter` holds for (in addition to earlier conditions).
    ///
    /// For example: `Query<DocumentValue>("people").include(.compare("age", .greaterOrEqual, .int(18)))`.
    public func include(_ filter: Filter) -> Query { with { $0.add(filter.condition) } }

    /// Leaves out the documents `filter` holds for.
    public func exclude(_ filter: Filter) -> Query { with { $0.add(filter.condition, excluded: true) } }

    /// Orders by the field at `path`, within the ties of earlier `sortBy`s.
    ///
    /// For example: `Query<DocumentValue>("people").sortBy("age").sortBy("name", order: .reverse)`.
    public func sortBy(_ path: FieldPath, order: SortOrder = .forward) -> Query {
        with { $0.sort.append(SortSpec(path: path, descending: order == .reverse)) }
    }

    /// Flips every ordering (the id order of ties too); on a sliced query, reverses the slice. On groups, flips
    /// their order (or reverses their slice).
    ///
    /// For example: `try await Person.sortBy(\.age).reverse().first(in: store)` is the oldest person.
    public func reverse() -> Query {
        withGroups { g in
            if let window = g.window { g.window = window.reversed() } else { g.descending.toggle(); g.tiesDescending.toggle() }
        }
            ?? with { s in
                if let window = s.window {
                    s.window = window.reversed()
                } else {
                    for i in s.sort.indices { s.sort[i].descending.toggle() }
                    s.idDescending.toggle()
                }
            }
    }

    /// The results at positions `range` of this query's results (of its groups, on groups). Negative bounds count
    /// as 0.
    ///
    /// For example: `Person.sortBy(\.name)[0..<10]` is the first ten by name.
    public subscript(_ range: Range<Int>) -> Query {
        withGroups { $0.window = QueryWindow.slicing($0.window, range) }
            ?? with { $0.window = QueryWindow.slicing($0.window, range) }
    }

    /// The same request, its results as values without a Swift type: documents, their fields, an aggregate, or
    /// groups as objects (the fields grouped by at their paths, and the aggregate named as written: `count()`).
    ///
    /// For example: `try await Person.include(#Predicate { $0.age > 40 }).decoded(as: DocumentValue.self).first(in: store)?.json()`.
    public func decoded(as type: DocumentValue.Type) -> Query<DocumentValue> {
        guard case .groups(var grouping) = output else {
            return answering(output, as: kind.opening(as: .documentValue))
        }
        // Values as stored: a number says whether it was an integer or a `Double`, which only its document tells.
        grouping.valuesDecoded = false
        return answering(.groups(grouping), as: kind.opening(as: .rows { [grouping] values, value in
            var row = DocumentValue.object([DocumentValue.Field]())
            for (path, v) in zip(grouping.by, values) { row = row.setting(v, at: path) }
            return row.setting(value, at: FieldPath(components: [grouping.aggregate.description]))
        }))
    }

    /// The same request, its results decoded as `T`: some fields of each as a smaller type than the model (its
    /// properties the selected fields), or whole documents as any `Decodable`.
    ///
    /// For example: `try await Person.query().select(\.name, \.age).decoded(as: NameAndAge.self).results(in: store)`.
    public func decoded<T: Decodable & Sendable>(as type: T.Type) -> Query<T> {
        let (collection, output) = (collection, output)
        return answering(output, as: kind.opening(as: ElementKind<T>(decodeRaw: {
            try DocumentDecoder().decode(T.self, from: $0)
        }, row: { _, value in
            do { return try value.decoded(as: T.self) } catch {
                guard case .fields(let fields) = output else { throw error }
                throw DocStoreError(.decodingFailed, "the fields \(fields.map(\.description).joined(separator: ", ")) of "
                    + "collection '\(collection)' do not decode as \(String(reflecting: T.self)): \(error)",
                    collection: collection)
            }
        })))
    }

    /// The same request, its documents decoded as `T`, whose collection it must read.
    ///
    /// For example: `try await Query<DocumentValue>("people").include(filter).decoded(as: Person.self).results(in: store)`.
    public func decoded<T: Document>(as type: T.Type) -> Query<T> {
        var selection = selection
        let typeName = String(reflecting: T.self)
        if collection != Query<T>.collection && selection.problem == nil {
            selection.problem = DocStoreError(.invalidSchema, "a query of collection '\(collection)' cannot be decoded "
                + "as \(typeName), whose collection is '\(Query<T>.collection)'", collection: collection)
        }
        if let opaque = selection.condition.firstOpaque, opaque.type != ObjectIdentifier(T.self), selection.problem == nil {
            // Its conditions evaluated on the decoded document need the type they were written for.
            selection.problem = DocStoreError(.invalidSchema, "a query with conditions on \(opaque.typeName()) cannot be "
                + "decoded as \(typeName): some of them are evaluated on the decoded document", collection: collection)
        }
        return Query<T>(collection: collection, selection: selection, output: output, kind: ModelKind.of(T.self))
    }
}

extension Query: CustomStringConvertible {
    /// The query in the shell's words: `people.include(age >= 18).sortBy(name)[0..<10]`,
    /// `people.groupBy(city).count().sortBy(value, .reverse)[0..<10]`.
    public var description: String {
        var text = collection
        for condition in selection.conditions {
            if case .not(let kept) = condition { text += ".exclude(\(kept))" } else { text += ".include(\(condition))" }
        }
        // Written before the reversal that made ties descend, which flipped them.
        let reversed = selection.idDescending
        for field in selection.sort {
            text += ".sortBy(\(field.path)\(field.descending != reversed ? ", .reverse" : ""))"
        }
        if reversed { text += ".reverse()" }
        if let window = selection.window {
            text += "[\(window.range.lowerBound)..<\(window.range.upperBound)]"
            for step in window.afterwards {
                switch step {
                case .reverse: text += ".reverse()"
                case .slice(let r): text += "[\(r.lowerBound)..<\(r.upperBound)]"
                }
            }
        }
        switch output {
        case .documents: break
        case .fields(let paths): text += ".select(\(paths.map(\.description).joined(separator: ", ")))"
        case .groups(let g) where g.dropsNil: text += ".distinct(\(g.by.map(\.description).joined(separator: ", ")))"
        case .groups(let g) where g.by.isEmpty: text += ".\(g.aggregate)"
        case .groups(let g):
            text += ".groupBy(\(g.by.map(\.description).joined(separator: ", "))).\(g.aggregate)"
            if g.order == .value || g.descending {
                text += ".sortBy(\(g.order == .key ? "key" : "value")\(g.descending ? ", .reverse" : ""))"
            }
            if let window = g.window { text += "[\(window.range.lowerBound)..<\(window.range.upperBound)]" }
        }
        return text
    }
}

extension Query where Element == DocumentValue {
    /// A query for every document of `collection`, decoded as ``DocumentValue``s.
    ///
    /// For example: `try await Query<DocumentValue>("people").count(in: store)`.
    public init(_ collection: String) {
        self.init(collection: collection, kind: .documentValue)
    }
}

extension Query where Element: Document {
    /// A query for every document of `Element`.
    public init() {
        let (collection, kind) = ModelKind.withCollection(Element.self)
        self.init(collection: collection ?? Element.collection, kind: kind)
    }

    /// The collection of `Element`, as its schema has it (fixed once per process).
    static var collection: String { TypeRegistry.collection(Element.self) ?? Element.collection }

    /// Keeps only the documents for which `predicate` is true (in addition to earlier conditions).
    ///
    /// For example: `Person.query().include(#Predicate { $0.age >= 18 && $0.tags.contains("swift") })`.
    public func include(_ predicate: Predicate<Element>) -> Query {
        with { $0.add(Query.condition(predicate)) }
    }

    /// Leaves out the documents for which `predicate` is true.
    ///
    /// For example: `Person.query().exclude(#Predicate { $0.city == "Oslo" })`.
    public func exclude(_ predicate: Predicate<Element>) -> Query {
        with { $0.add(Query.condition(predicate), excluded: true) }
    }

    /// Orders by a stored field, within the ties of earlier `sortBy`s: an optional one `nil` first (last with
    /// `.reverse`), in the order of index keys.
    ///
    /// For example: `Person.sortBy(\.age).sortBy(\.name, order: .reverse)`.
    ///
    /// A field stored as its raw values (an enum of `String` or `Int` raw values) orders by them, as stored. For
    /// example: `Flight.sortBy(\.origin)` with `enum Airport: String, Codable { case EWR, JFK, LGA }`.
    public func sortBy<Value>(_ keyPath: KeyPath<Element, Value> & Sendable, order: SortOrder = .forward) -> Query {
        var query = self
        guard let path = query.path(of: keyPath, for: "sort", problem: &query.selection.problem) else { return query }
        return query.sortBy(path, order: order)
    }

    /// `predicate` as a condition on stored fields, key paths resolved once per process.
    static func condition(_ predicate: Predicate<Element>) -> Condition {
        PredicateTranslator.condition(for: predicate, fieldPath: { TypeRegistry.fieldPath($0, of: Element.self) },
                                      decode: { try DocumentDecoder().decode(Element.self, from: $0) })
    }
}

extension Document {
    /// A query for every document of this type. For example: `try await Person.query().count(in: store)`.
    public static func query() -> Query<Self> { Query() }

    /// A query for the documents that satisfy `predicate`.
    public static func include(_ predicate: Predicate<Self>) -> Query<Self> { Query().include(predicate) }

    /// A query for the documents that do not satisfy `predicate`.
    public static func exclude(_ predicate: Predicate<Self>) -> Query<Self> { Query().exclude(predicate) }

    /// A query for every document, ordered by a stored field.
    public static func sortBy<Value>(_ keyPath: KeyPath<Self, Value> & Sendable, order: SortOrder = .forward) -> Query<Self> {
        Query().sortBy(keyPath, order: order)
    }
}
