import Foundation

/// Named changes to a store, run once each, in the order they were registered: what a store needs when its models
/// change.
///
/// Each migration runs in a write transaction of its own, with the record that it ran: a migration that throws
/// changes nothing, and is run again the next time. Migrations work on documents without their Swift type (the old
/// type is gone by the time a migration runs), through a ``MigrationContext``.
///
/// For example, a store whose `people` had `name: String` and `zip: String`, for a model that now has
/// `fullName`, `initials` and an integer `zip`, indexed:
/// ```swift
/// var migrator = Migrator()
/// migrator.registerMigration("v2") { m in
///     try m.renameField("name", to: "fullName", in: "people")
///     try m.addField("initials", in: "people") { person in
///         guard case .string(let name)? = person[field: "fullName"] else { return nil }
///         return .string(String(name.prefix(1)))
///     }
///     try m.convertField("zip", in: "people", to: .int)
///     try m.createIndex(IndexDefinition(name: "zip", kind: .regular, fields: ["zip"]), in: "people")
/// }
/// try await migrator.migrate(store)
/// ```
///
/// Opening a store with an older model and a newer migrator runs only what the store has not yet had. The store
/// records, for each migration, when it ran and the steps it took; ``DocStore/appliedMigrations()`` lists them, and
/// so does the shell's `.migrations`.
public struct Migrator: Sendable {
    /// A migration's body: its steps, run in one write transaction.
    ///
    /// The body may run more than once before its migration commits: again alone when a step deletes a key space
    /// (``MigrationContext/dropIndex(_:from:)``, ``MigrationContext/dropCollection(_:)``, a rename that moves an
    /// index) while other reads were in flight, again when the map grows, and on a scratch store first with
    /// ``Migrator/eraseStoreOnSchemaChange``. Only what it does to the store is kept, once; keep it free of
    /// effects outside the store (a file written, a message sent). A step that fails halfway leaves the migration
    /// unable to commit, even if the body catches its error.
    public typealias Body = @Sendable (MigrationContext) throws -> Void

    struct Migration: Sendable {
        let name: String
        let body: Body
    }

    private(set) var migrations: [Migration] = []
    private var registrationError: String?

    /// During development: when a migration the store has applied has since been changed (its steps are not
    /// those the store recorded) or removed, erase the store and run every migration again. Never set it for a
    /// store whose data matters: a migration applied with the shell's `.migrate` counts as removed.
    ///
    /// The migrations are first run on an empty store in a temporary folder, to learn the steps each takes now.
    /// A change inside a closure that leaves the steps as they were is not seen (GRDB's option compares the
    /// schema the migrations make instead; a document store has no schema beyond its collections and indexes).
    public var eraseStoreOnSchemaChange = false

    public init() {}

    /// The names of the registered migrations, in order.
    public var migrationNames: [String] { migrations.map(\.name) }

    /// Adds a migration, run after those registered before it. Names must be unique; a name registered twice
    /// makes ``migrate(_:upTo:)`` throw.
    public mutating func registerMigration(_ name: String, _ body: @escaping Body) {
        if migrations.contains(where: { $0.name == name }) {
            registrationError = registrationError ?? "the migration '\(name)' is registered twice"
        } else {
            do { try Catalog.validateName(name, what: "migration") } catch {
                registrationError = registrationError ?? "\(error)"
            }
        }
        migrations.append(Migration(name: name, body: body))
    }

    /// Runs, in order, every registered migration that `store` has not applied, up to and including the one
    /// named `last` (all of them when `nil`). Returns the names of those it ran.
    ///
    /// Migrations the store applied that this migrator does not have (applied with the shell's `.migrate`, or by a
    /// newer version of the app) are left as they are, as GRDB's migrator leaves them: ``hasBeenSuperseded(_:)``
    /// tells an app that would rather refuse a store migrated by a newer version of itself.
    ///
    /// - Throws: ``DocStoreError/Code/migrationFailed`` naming the migration, the step and the document, when a
    ///   migration fails: it changed nothing, and those before it are kept. ``DocStoreError/Code/readOnly`` when
    ///   the store was opened read-only and a migration is pending (a read-only store that has them all opens).
    ///   ``DocStoreError/Code/invalidSchema`` when `last` names no migration, or the store has applied a
    ///   migration registered after it.
    @discardableResult
    public func migrate(_ store: DocStore, upTo last: String? = nil) async throws -> [String] {
        if let registrationError { throw DocStoreError(.invalidSchema, registrationError) }
        var chosen = migrations
        if let last {
            guard let end = migrations.firstIndex(where: { $0.name == last }) else {
                throw DocStoreError(.invalidSchema, "there is no migration named '\(last)' to migrate up to; the "
                    + "registered ones are " + migrationNames.map { "'\($0)'" }.joined(separator: ", "))
            }
            chosen = Array(migrations[...end])
            let applied = Set(try await store.appliedMigrations().map(\.name))
            if let beyond = migrations[(end + 1)...].first(where: { applied.contains($0.name) }) {
                throw DocStoreError(.invalidSchema, "cannot migrate up to '\(last)': the store has applied "
                    + "'\(beyond.name)', which comes after it")
            }
        }
        if eraseStoreOnSchemaChange, let changed = try await changedMigration(in: store) {
            try await store.eraseForMigrations(because: changed)
        }
        try await store.recordKnownMigrations(migrationNames)
        var ran: [String] = []
        for migration in chosen where try await store.applyMigration(migration.name, migration.body) {
            ran.append(migration.name)
        }
        return ran
    }

    /// Whether `store` has applied a migration this migrator does not have: it was migrated by a newer version of
    /// the app (or with the shell's `.migrate`).
    public func hasBeenSuperseded(_ store: DocStore) async throws -> Bool {
        let names = Set(migrationNames)
        return try await store.appliedMigrations().contains { !names.contains($0.name) }
    }

    /// Whether `store` has applied every registered migration.
    public func hasCompletedMigrations(_ store: DocStore) async throws -> Bool {
        try await pendingMigrations(in: store).isEmpty
    }

    /// The registered migrations `store` has not applied, in order.
    public func pendingMigrations(in store: DocStore) async throws -> [String] {
        let applied = Set(try await store.appliedMigrations().map(\.name))
        return migrationNames.filter { !applied.contains($0) }
    }

    /// The first migration the store applied that this migrator no longer has, or whose steps are now other
    /// than those recorded, in words; `nil` when there is none.
    private func changedMigration(in store: DocStore) async throws -> String? {
        let applied = try await store.appliedMigrations()
        guard !applied.isEmpty else { return nil }
        let now = try await stepsOnAnEmptyStore()
        for record in applied {
            guard let steps = now[record.name] else {
                return "the store applied the migration '\(record.name)', which is no longer registered"
            }
            if steps != record.steps {
                return "the migration '\(record.name)' was changed after the store applied it"
            }
        }
        return nil
    }

    /// The steps each migration takes, learned by running them all on an empty store in a temporary folder.
    private func stepsOnAnEmptyStore() async throws -> [String: [String]] {
        let folder = FileManager.default.temporaryDirectory
            .appendingPathComponent("docstore-migrations-\(UUID().uuidString)")
        try FileManager.default.createDirectory(at: folder, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(at: folder) }
        var options = DocStore.Options()
        options.durability = .off
        options.initialMapSize = 1 << 20
        let scratch = try await DocStore(path: folder.appendingPathComponent("scratch").path, options: options)
        do {
            for migration in migrations { _ = try await scratch.applyMigration(migration.name, migration.body) }
        } catch {
            await scratch.close()
            throw DocStoreError(.migrationFailed, "cannot learn whether a migration changed: run on an empty store, "
                + "the migrations failed: \(error)", underlying: error)
        }
        let records = try await scratch.appliedMigrations()
        await scratch.close()
        return Dictionary(records.map { ($0.name, $0.steps) }, uniquingKeysWith: { a, _ in a })
    }
}

/// The store's migrations: applied ones as recorded, and the names the last migrator to run had registered.
extension DocStore {
    /// Opens (or creates) the store at `path`, then runs the migrations of `migrator` it has not applied, in
    /// order: the store returned holds documents of the app's current models.
    ///
    /// For example:
    /// ```swift
    /// var migrator = Migrator()
    /// migrator.registerMigration("v2") { m in try m.renameField("name", to: "fullName", in: "people") }
    /// let store = try await DocStore(path: path, migrator: migrator)
    /// ```
    /// - Throws: what ``init(path:options:)`` throws, and what ``Migrator/migrate(_:upTo:)`` throws; a migration
    ///   that fails changed nothing, and the store is closed.
    public init(path: String, options: Options = Options(), migrator: Migrator) async throws {
        try await self.init(path: path, options: options)
        do {
            try await migrator.migrate(self)
        } catch {
            close()
            throw error
        }
    }

    /// The migrations this store has applied, in the order it applied them.
    public nonisolated func appliedMigrations() async throws -> [AppliedMigration] {
        try await read { ctx in try ctx.appliedMigrations() }
    }

    /// The names of the migrations the last ``Migrator`` to run on this store had registered, in order: with
    /// ``appliedMigrations()``, what a tool without the app's migrator (the shell) knows of pending ones.
    public nonisolated func knownMigrations() async throws -> [String] {
        try await read { ctx in try ctx.scope.catalog.knownMigrations() ?? [] }
    }

    /// Runs one migration unless the store has applied it, in a write transaction of its own with its record.
    /// Returns whether it ran. For migrations that are not registered in a ``Migrator``: the shell's `.migrate`.
    @discardableResult
    public func applyMigration(_ name: String, _ body: Migrator.Body) throws -> Bool {
        if isReadOnly {
            // A read-only store that has the migration opens; one that lacks it cannot be given it.
            if try withRead({ try $0.scope.catalog.migration(named: name) }) != nil { return false }
            try checkWritable("apply the migration '\(name)', which it has not had")
        }
        do {
            return try withWrite { ctx in
                if try ctx.scope.catalog.migration(named: name) != nil { return false }
                let migration = MigrationContext(context: ctx, migration: name)
                try body(migration)
                try migration.context.checkValid()
                let position = try ctx.appliedMigrations().count + 1
                let record = AppliedMigration(name: name, position: position, appliedAt: Date(),
                                              steps: migration.steps)
                try ctx.scope.catalog.setMigration(record)
                return true
            }
        } catch let error as DocStoreError where error.code == .closed || error.code == .readOnly {
            throw error
        } catch {
            let known = error as? DocStoreError
            throw DocStoreError(.migrationFailed, "the migration '\(name)' failed, and nothing of it was written: "
                + (known?.message ?? "\(error)"), collection: known?.collection, index: known?.index,
                underlying: error)
        }
    }

    func recordKnownMigrations(_ names: [String]) throws {
        guard !core.isReadOnly else { return }
        guard try withRead({ try $0.scope.catalog.knownMigrations() }) != names else { return }
        try withWrite { ctx in try ctx.scope.catalog.setKnownMigrations(names) }
    }

    /// Erases every collection, saved filter and migration record, in one transaction.
    func eraseForMigrations(because reason: String) throws {
        try checkWritable("erase the store (\(reason))")
        try withWrite { ctx in
            for info in try ctx.collections() { try ctx.dropCollection(info.name) }
            for filter in try ctx.savedFilters() { try ctx.deleteFilter(named: filter.name) }
            for record in try ctx.appliedMigrations() { try ctx.catalog.removeMigration(named: record.name) }
        }
    }
}

extension ReadContext {
    /// The migrations the store has applied, in the order it applied them.
    public func appliedMigrations() throws -> [AppliedMigration] { try catalog.migrations() }
}
