import DocStore
import Foundation

extension Shell {
    /// The steps `.migrate` takes, as written after the migration's name.
    nonisolated static let migrationSteps = [
        "renameField COLLECTION FIELD NEWNAME", "addField COLLECTION FIELD VALUE", "removeField COLLECTION FIELD",
        "convertField COLLECTION FIELD string|int|double|bool", "renameCollection COLLECTION NEWNAME",
        "dropCollection COLLECTION", "createIndex NAME COLLECTION FIELD[,FIELD...] [unique|multi]",
        "dropIndex NAME COLLECTION",
    ]

    /// `.migrations`: the migrations the store applied, in order, and those the app's migrator has and the store
    /// has not applied.
    func listMigrations() async throws {
        let store = try requireStore()
        let applied = try await store.appliedMigrations()
        let known = try await store.knownMigrations()
        let pending = known.filter { name in !applied.contains { $0.name == name } }
        if applied.isEmpty && pending.isEmpty {
            console.note("No migrations: the store has applied none (.migrate NAME STEP applies one).")
            return
        }
        var out = ""
        for record in applied {
            out += "applied \(record.position). \(record.name)  (\(record.appliedAt.formatted(.iso8601)))\n"
            for step in record.steps { out += "    \(step)\n" }
        }
        for name in pending { out += "pending    \(name)\n" }
        console.result(out)
    }

    /// `.migrate NAME STEP [; STEP ...]`: one migration of the steps given, applied at once, in one transaction
    /// with its record; the store's migration records list it as the app's migrations are listed.
    func migrate(_ args: [String]) async throws {
        let usage = ".migrate NAME STEP [; STEP ...], a STEP one of: " + Shell.migrationSteps.joined(separator: "; ")
        guard args.count >= 2 else { throw ShellError("usage: \(usage)") }
        guard !pending.isOpen else { throw ShellError("a migration applies at once: commit or rollback first") }
        let name = args[0]
        var steps: [[String]] = [[]]
        for word in args.dropFirst() {
            if word == ";" { steps.append([]); continue }
            if word.hasSuffix(";") {
                steps[steps.count - 1].append(String(word.dropLast()))
                steps.append([])
                continue
            }
            steps[steps.count - 1].append(word)
        }
        steps.removeAll { $0.isEmpty }
        let parsed = try steps.map(Shell.migrationStep)
        let store = try requireStore()
        if try await store.appliedMigrations().contains(where: { $0.name == name }) {
            throw ShellError("the store has applied a migration named '\(name)' already (.migrations lists them)")
        }
        guard try await confirm("Apply the migration \(name) (\(steps.count) step\(steps.count == 1 ? "" : "s")) "
                                + "to every document it names?", refusing: "apply the migration \(name)") else {
            console.note("Nothing was changed.")
            return
        }
        let ran = try await store.applyMigration(name) { m in for step in parsed { try step(m) } }
        console.note(ran ? "Applied the migration \(name)." : "The store had applied \(name) already.")
    }

    /// One step of `.migrate`, from its words.
    static func migrationStep(_ words: [String]) throws -> @Sendable (MigrationContext) throws -> Void {
        guard let verb = words.first else { throw ShellError("an empty step") }
        let a = Array(words.dropFirst()).map(Shell.name)
        func need(_ n: Int, _ usage: String) throws {
            guard a.count == n else { throw ShellError("usage: \(usage)") }
        }
        func field(_ text: String) throws -> FieldPath {
            do {
                let paths = try Parser.fieldPaths(text)
                guard paths.count == 1 else { throw ShellError("'\(text)' names \(paths.count) fields, not one") }
                return paths[0]
            } catch let error as ParseError {
                throw ShellError("'\(text)' is not a field name: \(error.message)")
            }
        }
        switch verb {
        case "renameField":
            try need(3, "renameField COLLECTION FIELD NEWNAME")
            let (from, to) = (try field(a[1]), try field(a[2]))
            return { try $0.renameField(from, to: to, in: a[0]) }
        case "addField":
            try need(3, "addField COLLECTION FIELD VALUE (JSON, or text)")
            let path = try field(a[1])
            let value = CSV.jsonValue(words[3]) ?? .string(words[3])
            return { try $0.addField(path, in: a[0], value: value) }
        case "removeField":
            try need(2, "removeField COLLECTION FIELD")
            let path = try field(a[1])
            return { try $0.removeField(path, in: a[0]) }
        case "convertField":
            try need(3, "convertField COLLECTION FIELD string|int|double|bool")
            let path = try field(a[1])
            guard let kind = FieldConversion(rawValue: a[2]) else {
                throw ShellError("a field converts to string, int, double or bool, not '\(a[2])'")
            }
            return { try $0.convertField(path, in: a[0], to: kind) }
        case "renameCollection":
            try need(2, "renameCollection COLLECTION NEWNAME")
            return { try $0.renameCollection(a[0], to: a[1]) }
        case "dropCollection":
            try need(1, "dropCollection COLLECTION")
            return { try $0.dropCollection(a[0]) }
        case "createIndex":
            guard a.count == 3 || a.count == 4 else {
                throw ShellError("usage: createIndex NAME COLLECTION FIELD[,FIELD...] [unique|multi]")
            }
            let kinds: [String: IndexKind] = ["unique": .unique, "multi": .multi, "index": .regular, "regular": .regular]
            guard let kind = a.count == 4 ? kinds[a[3]] : .regular else {
                throw ShellError("the kind of index is unique or multi (or nothing), not '\(a[3])'")
            }
            let fields: [FieldPath]
            do { fields = try Parser.fieldPaths(a[2]) } catch {
                throw ShellError("the fields to index are names separated by commas: \(error.message)")
            }
            let definition = IndexDefinition(name: a[0], kind: kind, fields: fields)
            return { try $0.createIndex(definition, in: a[1]) }
        case "dropIndex":
            try need(2, "dropIndex NAME COLLECTION")
            return { try $0.dropIndex(a[0], from: a[1]) }
        default:
            throw ShellError("unknown migration step '\(verb)'; the steps are: "
                + Shell.migrationSteps.joined(separator: "; "))
        }
    }
}
