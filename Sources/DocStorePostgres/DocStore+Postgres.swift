import DocStore
import Foundation

extension DocStore {
    /// Opens the store kept in a PostgreSQL database, creating its tables when they are missing: the same store,
    /// queries, verbs, migrations and observation as on a file, for an app that runs on several hosts.
    ///
    /// The URL is libpq's: `postgres://USER[:PASSWORD]@HOST[:PORT]/DATABASE`, with libpq's own query items
    /// (`sslmode=require`, say) and one of DocStore's, `schema=NAME`: the schema that holds the store's tables
    /// (`docstore` unless given), so that one database can hold several stores. A connection that cannot be made
    /// fails within `connect_timeout` seconds (5 unless given).
    ///
    /// For example:
    /// ```swift
    /// let store = try await DocStore(postgres: "postgres://app@db.internal/app?schema=people")
    /// ```
    ///
    /// Of ``DocStore/Options``, ``DocStore/Options/readOnly``, ``DocStore/Options/checkChecksums`` and
    /// ``DocStore/Options/durability`` apply: ``DocStore/Durability/full`` commits with `synchronous_commit`
    /// on; the others turn it off, so that a crash of the server may lose the last commits (never a part of one).
    /// The sizes of the file's map, its readers and scan threads do not apply.
    ///
    /// - Throws: ``DocStoreError`` with code ``DocStoreError/Code/cannotOpen`` when the URL is not a PostgreSQL
    ///   URL or the server cannot be reached or refuses the connection (a wrong password, no such database),
    ///   naming the server and its reason.
    public init(postgres url: String, options: Options = Options()) async throws {
        let settings = try PostgresLocation(url, durability: options.durability)
        try await self.init(engine: {
            do {
                return try PostgresStorage(settings: settings.storage)
            } catch let error as PostgresError {
                throw DocStoreError(.cannotOpen, "cannot open a store on \(settings.name): \(error)")
            }
        }, name: settings.name, threadName: settings.storage.schema, options: options)
    }
}

extension DocStore {
    /// Opens the store kept in a PostgreSQL database, as ``init(postgres:options:)`` does, then runs the migrations
    /// of `migrator` it has not applied, in order, as ``init(path:options:migrator:)`` does on a file. Processes on
    /// several hosts may open the store with the same migrator at once: each migration runs once.
    ///
    /// For example:
    /// ```swift
    /// var migrator = Migrator()
    /// migrator.registerMigration("v2") { m in try m.renameField("name", to: "fullName", in: "people") }
    /// let store = try await DocStore(postgres: "postgres://app@db.internal/app", migrator: migrator)
    /// ```
    public init(postgres url: String, options: Options = Options(), migrator: Migrator) async throws {
        try await self.init(postgres: url, options: options)
        do {
            try await migrator.migrate(self)
        } catch {
            close()
            throw error
        }
    }
}

/// A PostgreSQL URL taken apart: what libpq is given, and the name the store goes by, with no password in it.
struct PostgresLocation {
    var storage: PostgresStorage.Settings
    /// The URL without its password: the store's ``DocStore/path``.
    var name: String

    init(_ url: String, durability: DocStore.Durability) throws {
        guard var parts = URLComponents(string: url), let scheme = parts.scheme?.lowercased(),
              scheme == "postgres" || scheme == "postgresql" else {
            // Not the text itself: it may hold a password.
            throw DocStoreError(.cannotOpen, "the location given is not a PostgreSQL URL: write "
                + "postgres://USER[:PASSWORD]@HOST[:PORT]/DATABASE[?schema=NAME], with reserved characters of the "
                + "password percent-encoded")
        }
        var items = parts.queryItems ?? []
        let schema = items.first { $0.name == "schema" }?.value ?? "docstore"
        guard !schema.isEmpty, schema.utf8.count <= 63 else {
            throw DocStoreError(.cannotOpen, "'\(schema)' cannot name a schema: give 1 to 63 bytes")
        }
        items.removeAll { $0.name == "schema" }
        if !items.contains(where: { $0.name == "connect_timeout" }) {
            items.append(URLQueryItem(name: "connect_timeout", value: "5"))
        }
        // The client's own keepalives: a connection that only listens sends nothing, and a network that drops
        // without a word would otherwise leave it waiting, missing other processes' commits, for the system's two
        // hours. (A URL may set its own.)
        for (name, value) in [("keepalives", "1"), ("keepalives_idle", "20"), ("keepalives_interval", "10"),
                              ("keepalives_count", "3")] where !items.contains(where: { $0.name == name }) {
            items.append(URLQueryItem(name: name, value: value))
        }
        if !items.contains(where: { $0.name == "application_name" }) {
            items.append(URLQueryItem(name: "application_name", value: "docstore"))
        }
        parts.queryItems = items
        guard let conninfo = parts.string else {
            throw DocStoreError(.cannotOpen, "the location given is not a PostgreSQL URL")
        }
        let host = parts.host.map { $0.isEmpty ? "localhost" : $0 } ?? "localhost"
        let server = host + ":\(parts.port ?? 5432)" + (parts.path.isEmpty ? "" : parts.path)
        var shown = URLComponents()
        shown.scheme = scheme
        shown.user = parts.user
        shown.host = parts.host
        shown.port = parts.port
        shown.path = parts.path
        if schema != "docstore" { shown.queryItems = [URLQueryItem(name: "schema", value: schema)] }
        name = shown.string ?? server
        var synchronous = true
        if case .full = durability {} else { synchronous = false }
        storage = .init(conninfo: conninfo, server: server, schema: schema, synchronousCommit: synchronous)
    }
}
