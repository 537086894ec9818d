import DocStore
import Foundation

extension Shell {
    /// The steps `.migrate` takes, as written after the migration's name.
    nonisolated static let migrationSteps = [
        "renameField COLLECTION FIELD NEWNAME", "addField COLLECTION FIELD VALUE", "removeField COLLECTION FIELD",
        "convertField COLLECTION FIELD string|int|double|bool|date [DATEFORMAT]", "renameCollection COLLECTION NEWNAME",
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
    /// with its record; the store's migration records list it as the app's migrations are listed. `raw` is the text
    /// after `.migrate`, as typed.
    func migrate(_ raw: String) async throws {
        let usage = ".migrate NAME STEP [; STEP ...], a STEP one of: " + Shell.migrationSteps.joined(separator: "; ")
        var steps = Shell.migrationWords(raw)
        guard let name = steps.first?.first.map(Shell.unquoted), steps[0].count >= 2 else {
            throw ShellError("usage: \(usage)")
        }
        steps[0].removeFirst()
        guard !pending.isOpen else { throw ShellError("a migration applies at once: commit or rollback first") }
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

    /// The steps of `.migrate`'s text, each its words, split at spaces and at `;` outside quotes, backticks and
    /// brackets; quotes and backticks stay in the words, so that `"0150"` is text and `` `a b` `` one name.
    nonisolated static func migrationWords(_ raw: String) -> [[String]] {
        var steps: [[String]] = [[]]
        var word = ""
        var quoted = false, backticked = false, escaped = false
        var depth = 0
        func endWord() {
            if !word.isEmpty { steps[steps.count - 1].append(word) }
            word = ""
        }
        for c in raw {
            if quoted {
                word.append(c)
                if escaped { escaped = false } else if c == "\\" { escaped = true } else if c == "\"" { quoted = false }
                continue
            }
            if backticked {
                word.append(c)
                if c == "`" { backticked = false }
                continue
            }
            switch c {
            case "\"": quoted = true; word.append(c)
            case "`": backticked = true; word.append(c)
            case "[", "{": depth += 1; word.append(c)
            case "]", "}": depth = max(0, depth - 1); word.append(c)
            case ";" where depth == 0:
                endWord()
                steps.append([])
            default:
                if c.isWhitespace && depth == 0 { endWord() } else { word.append(c) }
            }
        }
        endWord()
        return steps.filter { !$0.isEmpty }
    }

    /// A name as written: without the double quotes or backticks around it.
    static func unquoted(_ word: String) -> String {
        if word.count >= 2, word.hasPrefix("\""), word.hasSuffix("\""),
           case .string(let text)? = CSV.jsonValue(word) { return text }
        return Shell.name(word)
    }

    /// One step of `.migrate`, from its words.
    static func migrationStep(_ words: [String]) throws -> @Sendable (MigrationContext) throws -> Void {
        guard let verb = words.first else { throw ShellError("an empty step") }
        let raw = Array(words.dropFirst())
        let a = raw.map(Shell.unquoted)
        func need(_ n: Int, _ usage: String) throws {
            guard a.count == n else { throw ShellError("usage: \(usage)") }
        }
        func field(_ i: Int) throws -> FieldPath {
            // A name in double quotes is taken as it is; one in backticks, or dotted, as a query writes it.
            if raw[i].hasPrefix("\"") { return FieldPath(components: [a[i]]) }
            do {
                let paths = try Parser.fieldPaths(raw[i])
                guard paths.count == 1 else { throw ShellError("'\(raw[i])' names \(paths.count) fields, not one") }
                return paths[0]
            } catch let error as ParseError {
                throw ShellError("'\(raw[i])' is not a field name: \(error.message)")
            }
        }
        switch verb {
        case "renameField":
            try need(3, "renameField COLLECTION FIELD NEWNAME")
            let (from, to) = (try field(1), try field(2))
            return { try $0.renameField(from, to: to, in: a[0]) }
        case "addField":
            try need(3, "addField COLLECTION FIELD VALUE (JSON, or text)")
            let path = try field(1)
            let value = CSV.jsonValue(raw[2]) ?? .string(a[2])
            return { try $0.addField(path, in: a[0], value: value) }
        case "removeField":
            try need(2, "removeField COLLECTION FIELD")
            let path = try field(1)
            return { try $0.removeField(path, in: a[0]) }
        case "convertField":
            let usage = "convertField COLLECTION FIELD string|int|double|bool|date [DATEFORMAT]"
            guard a.count == 3 || (a.count == 4 && a[2] == "date") else { throw ShellError("usage: \(usage)") }
            let path = try field(1)
            guard let kind = FieldConversion(rawValue: a[2]) else {
                throw ShellError("a field converts to string, int, double, bool or date, not '\(a[2])'")
            }
            if a.count == 4 {
                let format = a[3]
                return { try $0.convertField(path, in: a[0], to: kind, format: format) }
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
            do { fields = try Parser.fieldPaths(raw[2]) } catch {
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
