import DocStore
import Foundation

extension Shell {
    /// The dot-commands, with their arguments and what they do: `.help` prints this.
    nonisolated static let commands: [(name: String, usage: String, summary: String)] = [
        ("help", ".help [TOPIC]", "this list; .help query for the query language, .help STEP for a step (.help "
            + "sortBy), .help NAME for a command"),
        ("open", ".open PATH|URL", "open (or create) the store at PATH, or the one kept in PostgreSQL at URL "
            + "(postgres://USER[:PASSWORD]@HOST[:PORT]/DATABASE[?schema=NAME])"),
        ("collections", ".collections", "the collections, with their documents and indexes"),
        ("indexes", ".indexes [COLLECTION]", "the indexes, of one collection or all"),
        ("fields", ".fields COLLECTION", "the fields seen, their types, and the comparisons each allows"),
        ("createIndex", ".createIndex NAME COLLECTION FIELD[,FIELD...] [unique|multi]",
         "index fields of a collection that exists (compound when several; multi: one entry per array element); "
            + "a field no document has yet is indexed, with a warning"),
        ("dropIndex", ".dropIndex NAME COLLECTION", "delete an index (asks first)"),
        ("drop", ".drop COLLECTION", "delete a collection with its documents and indexes (asks first)"),
        ("mode", ".mode [table|box|csv|json|line]", "how results are printed: a table drawn in ASCII or with "
            + "box characters, CSV (RFC 4180), JSON, or one field per line; alone, the mode now"),
        ("headers", ".headers on|off", "the field names above tables and CSV (on at first)"),
        ("width", ".width [N ...]", "table column widths, in order: 0 sizes a column to its cells, a negative width "
            + "right-aligns; alone, every column sized to its cells again"),
        ("pager", ".pager on|off", "at a terminal, a result longer than the screen a page at a time, it showing the "
            + "next (on at first)"),
        ("timer", ".timer on|off", "print the time, entries scanned and documents returned after each query"),
        ("explain", ".explain on|off", "print the plan before each query"),
        ("import", ".import FILE COLLECTION [--null MARKER] [--dates FIELD,...] [--date-format FORMAT] "
            + "[--number COLUMN,...] [--text COLUMN,...]",
         "load documents from JSON (an array), NDJSON or CSV, by extension, all or none; --null names the text of "
            + "a missing value (as NA), --dates the fields that hold dates, in ISO 8601 or as --date-format writes "
            + "them (\"MMM d yyyy\", yyyy/MM/dd: in UTC unless the format has a zone). A CSV column is numbers when "
            + "every cell is one in a form that loses no digit (1e3, 2.50, 48.053808600000004; inf, -inf, nan), "
            + "else text, as with a leading zero (0150), a + or a word; the import names each column kept as text "
            + "and the cell that decided it, and --number or --text decides instead. An empty cell is nil (quoted, "
            + "\"\" is empty text). CSV and NDJSON are read as they are written, in bounded memory"),
        ("export", ".export COLLECTION|QUERY FILE",
         "write documents, or the rows a query prints (select, groupBy, sum ...), to FILE as JSON, NDJSON (.ndjson) "
            + "or CSV; dates, and NaN and the infinities, as the dump writes them in JSON ({\"$double\": \"inf\"}), "
            + "as inf, -inf, nan in CSV, nil as an empty cell, so that .import reads back the same values"),
        ("read", ".read FILE", "run the statements in FILE"),
        ("output", ".output [FILE]", "send results to FILE, or back to the terminal"),
        ("save", ".save NAME QUERY", "keep a query by name: .save adults people.include(age >= 18)"),
        ("filters", ".filters", "the saved filters"),
        ("unsave", ".unsave NAME", "forget a saved filter"),
        ("status", ".status", "the transaction and its pending changes"),
        ("watch", ".watch QUERY", "show what a query prints (its results, count(), groups, a sum, select(...) ...) "
            + "again after each commit that changes it, until Ctrl-C"),
        ("verify", ".verify [COLLECTION]", "check the file's structure, every document (and its checksum) and index "
            + "entry; with a collection, list its fields whose documents hold values of more than one kind (those a "
            + "model would fail to decode)"),
        ("recover", ".recover NEW", "copy every document that can still be read, with the catalog, into a new store "
            + "at NEW, and say what was lost (for a damaged file: docstore FILE .recover NEW)"),
        ("backup", ".backup FILE", "write a compact copy of the store, as of its last commit, to FILE: other "
            + "writers go on meanwhile, and FILE opens as a store"),
        ("stats", ".stats", "the store's size, what is in use and free, and each collection's counts"),
        ("compact", ".compact", "rewrite the store's file with full pages and none free, so that it shrinks: the "
            + "shell closes the store for it, and it is refused while another process has the store open"),
        ("dump", ".dump [FILE]", "write the whole store (catalog, saved filters, migrations, documents) as NDJSON, "
            + "to FILE or the output: a copy any later DocStore reads (.restore, or docstore NEW < FILE), NEW a file "
            + "or a PostgreSQL URL"),
        ("restore", ".restore FILE", "build the open store, which must be empty, from a dump: all of it, or nothing"),
        ("migrations", ".migrations", "the migrations the store applied, with their steps, and those the app's "
            + "migrator has that it has not"),
        ("migrate", ".migrate NAME STEP [; STEP ...]", "apply a migration of these steps, once, in one transaction "
            + "(asks first): renameField C FIELD NEW; addField C FIELD VALUE; removeField C FIELD; convertField C "
            + "FIELD string|int|double|bool|date [DATEFORMAT] (text in ISO 8601, or as \"MMM d yyyy\" writes it, in "
            + "UTC unless the format has a zone); renameCollection C NEW; dropCollection C; createIndex NAME C FIELDS "
            + "[unique|multi]; dropIndex NAME C"),
        ("exit", ".exit [CODE]", "leave the shell (also .quit, or Ctrl-D)"),
    ]

    static let queryHelp = """
        Queries read as in Swift, with a collection (or a saved filter) in front:
          people.include(age >= 18 && city == "Oslo").sortBy(age, .reverse).sortBy(name)[0..<10]
          people.exclude(tags.contains("swift")).count()
        Steps:   query() (optional: people.query() is people)  include(COND)  exclude(COND)
                 sortBy(FIELD[, .reverse])  reverse()  [a..<b]  [a...b]
        Results: results() (or nothing)  first  last  any  count()  explain()
        Compute: sum(F)  average(F)  min(F)  max(F)  distinct(F)  select(F, ...) then results() or first
                 groupBy(F, ...).count() (or .sum(F) ...) then sortBy(value[, .reverse])  [a..<b]
                 explain() after count(), sum(F) ... or the groups: how they are computed
        Changes: insert({...} or [{...}, ...])  save({...})  findOrCreate({...})  delete()
                 update(set: {...}, unset: [...], inc: {...}, push: {...}, pull: {...})
        Conditions: ==  !=  <  <=  >  >=  &&  ||  !  ( )   age in 18..<30   city in ["Oslo", "Bergen"]
          tags.contains("swift")   ["a", "b"].contains(city)   name.hasPrefix("An")   name.contains("nn")
          nick?.hasPrefix("A") == true   nick!.contains("n")   (as #Predicate writes a method on an optional)
          email == nil   address.city == "Oslo"   active (a true/false field alone)
          `Body Mass (g)` > 5000 (a name that is not a plain word, in backticks)
        Values: JSON (numbers, "strings", true, false, null or nil, [lists], {objects}), date("2024-05-01")
        Transactions: begin, then changes stay pending (shown here only) until commit or rollback.
        A statement may end in ; (a dot-command takes its words as written, as in sqlite3).
        """

    func command(_ name: String, _ args: [String], location: SourceLocation, text: String) async throws {
        func need(_ count: Int, _ usage: String) throws {
            guard args.count >= count else { throw ShellError("usage: \(usage)") }
        }
        func onOff(_ usage: String) throws -> Bool {
            guard args.count == 1, args[0] == "on" || args[0] == "off" else { throw ShellError("usage: \(usage)") }
            return args[0] == "on"
        }
        if Shell.serverTools[name] != nil && isOnServer { throw Shell.needsFile("." + name, tool: name) }
        if let change = Shell.change(made: name, args) {
            // Refused before the arguments are checked against the store or a question is asked.
            try requireStore().checkWritable(change)
        }
        switch name {
        case "help": try help(args.first)
        case "open":
            try need(1, ".open PATH")
            try await open(path: args[0])
            console.note("Opened \(try requireStore().path).")   // a URL without its password
        case "collections": try await listCollections()
        case "indexes": try await listIndexes(args.first.map(Shell.name))
        case "fields":
            try need(1, ".fields COLLECTION")
            try await listFields(Shell.name(args[0]))
        case "createIndex": try await createIndex(args)
        case "dropIndex":
            try need(2, ".dropIndex NAME COLLECTION")
            try await dropIndex(Shell.name(args[0]), from: Shell.name(args[1]))
        case "drop":
            try need(1, ".drop COLLECTION")
            try await dropCollection(Shell.name(args[0]))
        case "mode":
            if args.isEmpty {
                console.result("current output mode: \(renderer.mode.rawValue)\n")
                return
            }
            let modes = OutputMode.allCases.map(\.rawValue).joined(separator: "|")
            guard args.count == 1, let mode = OutputMode(rawValue: args[0]) else {
                throw ShellError("usage: .mode [\(modes)] (now \(renderer.mode.rawValue))")
            }
            renderer.mode = mode
        case "headers": renderer.headers = try onOff(".headers on|off")
        case "width":
            let widths = args.map { Int($0) }
            guard widths.allSatisfy({ $0.map { (-10_000...10_000).contains($0) } == true }) else {
                throw ShellError("usage: .width [N ...], each N a number of columns (0 automatic, negative "
                    + "right-aligned)")
            }
            renderer.widths = widths.compactMap { $0 }
        case "pager": console.pager.isOn = try onOff(".pager on|off")
        case "timer": timer = try onOff(".timer on|off")
        case "explain": explainEach = try onOff(".explain on|off")
        case "import":
            try await importFile(args)
        case "export":
            guard args.count >= 2 else { throw ShellError("usage: .export COLLECTION|QUERY FILE") }
            let rest = Shell.rawArguments(of: name, in: text)
            let file = args[args.count - 1]
            // The query as typed, without the file name after it (quoted or not).
            var query = rest
            for written in ["\"" + file + "\"", file] where query.hasSuffix(written) {
                query = String(query.dropLast(written.count))
                break
            }
            try await export(query.trimmingCharacters(in: .whitespaces), to: file)
        case "read":
            try need(1, ".read FILE")
            try await readFile(args[0])
        case "output":
            if let file = args.first, !(try await mayWrite("the results", to: file)) { return }
            try console.redirect(to: args.first)
        case "save":
            try need(2, ".save NAME QUERY")
            try refuseInTransaction("saved filters are kept at once")
            let rest = Shell.rawArguments(of: name, in: text).drop { $0.isWhitespace }
            try await saveFilter(args[0], String(rest.dropFirst(args[0].count)))
        case "filters":
            let filters = try await reading { try $0.savedFilters() }
            if filters.isEmpty { console.note("No saved filters (.save NAME QUERY keeps one).") }
            for f in filters {
                // One kept as text by an older build is shown as it reads now (its collection renamed, say).
                let query = f.legacyText == nil ? f.query
                    : try? await resolve(QueryExpression(base: f.name, baseLocation: SourceLocation(offset: 0, line: 1,
                        column: 1), baseLength: f.name.unicodeScalars.count, steps: [], text: f.name)).query
                console.result("\(f.name) = \(query?.description ?? f.legacyText ?? "")\n")
            }
        case "unsave":
            try need(1, ".unsave NAME")
            try refuseInTransaction("saved filters are forgotten at once")
            let name = args[0]
            let removed = try await requireStore().write { try $0.deleteFilter(named: name) }
            guard removed else { throw ShellError("no saved filter is named '\(name)'") }
            console.note("Forgot the saved filter \(name).")
        case "status": status()
        case "verify":
            if pending.isOpen && !pending.isEmpty {
                console.note("The pending changes are not in the file, and are not verified.")
            }
            if let collection = args.first.map(Shell.name) {
                try await requireCollection(collection)
                // What is verified is the file: a collection only a pending change makes is not there yet.
                guard try await requireStore().read({ try $0.collections() }).contains(where: { $0.name == collection })
                else { throw ShellError("'\(collection)' is made by a pending change: commit it to verify it") }
                let kinds = try await requireStore().fieldKinds(of: collection)
                console.result(kinds.description + "\n")
            } else {
                console.result(try await requireStore().verify().description + "\n")
                if isOnServer {
                    console.note("The store is kept in PostgreSQL: \(Shell.serverTools["--check"] ?? "").")
                }
            }
        case "recover":
            try need(1, ".recover NEW")
            guard let source = store?.path ?? unopenedPath else { throw ShellError("no store is open: use .open PATH") }
            if pending.isOpen && !pending.isEmpty {
                console.note("The pending changes are not in the file, and are not recovered.")
            }
            let report = try await DocStore.recover(from: source, to: args[0])
            console.result(report.description + "\n")
            console.note(report.lostNothing ? "Recovered \(source) into \(args[0]); nothing was lost."
                : "Recovered what could be read of \(source) into \(args[0]).")
        case "stats": try await stats()
        case "compact": try await compact()
        case "dump": try await dump(args)
        case "restore":
            try need(1, ".restore FILE")
            try await restore(args[0])
        case "migrations": try await listMigrations()
        case "migrate": try await migrate(Shell.rawArguments(of: name, in: text))
        case "backup":
            try need(1, ".backup FILE")
            let store = try requireStore()
            guard try await mayWrite("a backup", to: args[0]) else { return }
            if pending.isOpen && !pending.isEmpty {
                console.note("The pending changes are not in the file, and are not in the backup.")
            }
            try await store.backup(to: args[0])
            let size = (try? FileManager.default.attributesOfItem(atPath: args[0])[.size] as? Int) ?? 0
            console.note("Backed up \(store.path) to \(args[0]) (\(Shell.bytes(size))).")
        case "exit", "quit":
            var code = hadError ? 1 : 0 as Int32   // as at the end of the input: 1 when a statement failed
            if let given = args.first {
                guard let c = Int32(given), (0...255).contains(c) else {
                    throw ShellError("usage: .exit [CODE], CODE a number from 0 to 255")
                }
                code = c
            }
            // At a terminal, pending changes are dropped only once agreed to, as at Ctrl-D.
            if pending.isOpen && !pending.isEmpty && console.interactive && !assumeYes {
                let n = pending.count
                let changes = "\(n) pending change\(n == 1 ? "" : "s")"
                guard try await confirm("Leave and drop \(changes)?", refusing: "leave") else {
                    console.note("Still in the transaction: commit keeps the \(changes), rollback drops "
                        + "\(n == 1 ? "it" : "them").")
                    return
                }
                pending.close()
                console.note("Dropped \(changes) (not committed).")
            }
            exitCode = code
        case "watch":
            try need(1, ".watch QUERY")
            try await watch(Shell.rawArguments(of: name, in: text))
        default:
            let names = Shell.commands.map(\.name) + ["quit"]
            throw ParseError(message: "unknown command '.\(name)'; .help lists them", location: location,
                             length: name.count + 1, suggestion: Suggest.closest(name, in: names).map { "'.\($0)'" })
        }
    }

    /// The change a dot-command makes to the store, in the words of a refusal, or `nil` for one that only reads.
    static func change(made command: String, _ args: [String]) -> String? {
        let (first, second) = (args.first.map { "'\($0)'" }, args.count > 1 ? "'\(args[1])'" : nil)
        switch command {
        case "createIndex": return second.map { "create index \(first ?? "") on \($0)" } ?? "create an index"
        case "dropIndex": return second.map { "drop index \(first ?? "") of \($0)" } ?? "drop an index"
        case "drop": return first.map { "drop collection \($0)" } ?? "drop a collection"
        case "import": return second.map { "import into \($0)" } ?? "import documents"
        case "save": return first.map { "save the filter \($0)" } ?? "save a filter"
        case "unsave": return first.map { "delete the saved filter \($0)" } ?? "delete a saved filter"
        case "restore": return first.map { "restore \($0)" } ?? "restore a dump"
        case "compact": return "compact the store"
        case "migrate": return first.map { "apply the migration \($0)" } ?? "apply a migration"
        default: return nil
        }
    }

    /// A collection's or an index's name given to a dot-command, without the backticks it may be written in.
    static func name(_ argument: String) -> String {
        argument.count > 2 && argument.hasPrefix("`") && argument.hasSuffix("`") && argument.dropFirst().dropLast()
            .allSatisfy({ $0 != "`" }) ? String(argument.dropFirst().dropLast()) : argument
    }

    /// The text after `.name`, as typed: quotes and spaces inside a query kept.
    static func rawArguments(of name: String, in text: String) -> String {
        guard let range = text.range(of: "." + name) else { return "" }
        return String(text[range.upperBound...]).trimmingCharacters(in: .whitespacesAndNewlines)
    }

    /// Refuses a collection that does not exist, with the closest name when there is one.
    func requireCollection(_ collection: String) async throws {
        let names = try await reading { try $0.collections().map(\.name) }
        guard !names.contains(collection) else { return }
        throw ShellError("no collection is named '\(collection)'"
            + (Suggest.closest(collection, in: names).map { " (did you mean '\($0)'?)" } ?? ""))
    }

    private func refuseInTransaction(_ why: String) throws {
        if pending.isOpen { throw ShellError("\(why), not at commit: commit or rollback the open transaction first") }
    }

    private func listCollections() async throws {
        let rows = try await reading { ctx in
            try ctx.collections().map { ($0, try Query<DocumentValue>($0.name).count(in: ctx)) }
        }
        if rows.isEmpty { console.note("No collections (insert creates one: people.insert({\"name\": \"Ann\"})).") }
        for (info, count) in rows {
            console.result("\(info.name.onOneLine): \(count) document\(count == 1 ? "" : "s"), "
                + "id at \("\(info.idPath)".onOneLine), "
                + "\(info.indexes.count) index\(info.indexes.count == 1 ? "" : "es")\n")
        }
    }

    private func listIndexes(_ collection: String?) async throws {
        if let collection { try await requireCollection(collection) }
        let infos = try await reading { try $0.collections() }
        var any = false
        for info in infos where collection == nil || info.name == collection {
            for index in info.indexes {
                any = true
                console.result("\(info.name.onOneLine).\(index.name.onOneLine): \(index.kind.rawValue) on "
                    + index.fields.map(\.written.onOneLine).joined(separator: ", ") + "\n")
            }
        }
        if !any { console.note("No indexes (.createIndex NAME COLLECTION FIELD makes one).") }
    }

    private func listFields(_ collection: String) async throws {
        try await requireCollection(collection)
        let stats = try await fieldStats(collection)
        if stats.fields.isEmpty { console.note("\(collection) has no documents."); return }
        var out = ""
        let width = stats.paths.map(\.written.count).max() ?? 0
        for field in stats.fields {
            let kinds = field.kinds.sorted()
            var types = kinds.map { kind -> String in
                if kind == .array, !field.elementKinds.isEmpty {
                    return "array of " + field.elementKinds.sorted().map(\.rawValue).joined(separator: "|")
                }
                return kind.rawValue
            }.joined(separator: "|")
            if field.count < stats.sampled { types += " (in \(field.count) of \(stats.sampled))" }
            let ops = kinds.filter { $0 != .null }.flatMap(\.comparators)
            var unique: [String] = []
            for op in ops where !unique.contains(op) { unique.append(op) }
            if kinds.contains(.null) || field.count < stats.sampled { unique.append("== nil") }
            out += "  " + field.path.written.onOneLine
                + String(repeating: " ", count: max(0, width - field.path.written.onOneLine.count))
                + "  " + types + "\n" + String(repeating: " ", count: width + 4) + unique.joined(separator: " ") + "\n"
        }
        let sample = stats.sampled < stats.total ? " (from the first \(stats.sampled) of \(stats.total) documents)" : ""
        console.result("\(collection)\(sample):\n" + out)
    }

    private func createIndex(_ args: [String]) async throws {
        let usage = ".createIndex NAME COLLECTION FIELD[,FIELD...] [unique|multi]"
        guard args.count == 3 || args.count == 4 else { throw ShellError("usage: \(usage)") }
        guard !pending.isOpen else { throw ShellError("index changes apply at once: commit or rollback first") }
        var kind = IndexKind.regular
        if args.count == 4 {
            switch args[3] {
            case "unique": kind = .unique
            case "multi": kind = .multi
            case "index", "regular": kind = .regular
            default: throw ShellError("the kind of index is unique or multi (or nothing), not '\(args[3])'")
            }
        }
        let fields: [FieldPath]
        do { fields = try Parser.fieldPaths(args[2]) } catch {
            throw ShellError("the fields to index are names separated by commas (`in backticks` when a name has "
                + "spaces or punctuation): \(error.message)")
        }
        let definition = IndexDefinition(name: Shell.name(args[0]), kind: kind, fields: fields)
        let collection = Shell.name(args[1])
        // An index is made on a collection that exists, as sqlite3's on a table; on a field no document has yet it is
        // made all the same (documents may come with it later), with a warning.
        try await requireCollection(collection)
        let stats = try await fieldStats(collection)
        for f in fields where stats[f] == nil {
            let closest = Suggest.closest(f.written, in: stats.paths.map(\.written))
            console.error("warning: no document of '\(collection)' has a field '\(f.written)'"
                + (stats.total == 0 ? " (it has no documents yet)" : closest.map { " (did you mean '\($0)'?)" } ?? ""))
        }
        try await requireStore().write { try $0.createIndex(definition, in: collection) }
        console.note("Created index \(definition.name) on \(collection) (\(definition.kind.rawValue) on "
            + fields.map(\.written).joined(separator: ", ") + ").")
    }

    private func dropIndex(_ name: String, from collection: String) async throws {
        guard !pending.isOpen else { throw ShellError("index changes apply at once: commit or rollback first") }
        let made = try await askingAgain("Index \(name) of \(collection)", look: {
            let found = try await reading { ctx in
                try ctx.collections().first { $0.name == collection }?.indexes.first { $0.name == name }
            }
            guard let definition = found else { throw ShellError("\(collection) has no index named '\(name)'") }
            return (definition, ChangeQuestion(text: "Drop index \(name) of \(collection) (\(definition))?",
                                               refusing: "drop index \(name)", declined: "Nothing was dropped."))
        }, apply: { (definition: IndexDefinition) in
            try await requireStore().write { ctx -> Bool? in
                // Only the index that was shown: one dropped and re-made meanwhile is not this one.
                guard try ctx.collections().first(where: { $0.name == collection })?.indexes
                    .contains(definition) == true else { return nil }
                return try ctx.dropIndex(name, from: collection) ? true : nil
            }
        })
        if made != nil { console.note("Dropped index \(name) of \(collection).") }
    }

    private func dropCollection(_ collection: String) async throws {
        guard !pending.isOpen else { throw ShellError("dropping a collection applies at once: commit or rollback first") }
        func what(_ count: Int) -> String { "collection \(collection) and its \(count) document\(count == 1 ? "" : "s")" }
        let all = Query<DocumentValue>(collection)
        let made = try await askingAgain(collection, look: {
            let found = try await reading { ctx -> [DocumentValue]? in
                try ctx.collections().contains { $0.name == collection } ? try all.ids(in: ctx) : nil
            }
            guard let ids = found else { throw ShellError("no collection is named '\(collection)'") }
            return (ids, ChangeQuestion(text: "Drop \(what(ids.count))?", refusing: "drop \(what(ids.count))",
                                        declined: "Nothing was dropped."))
        }, apply: { (ids: [DocumentValue]) in
            try await requireStore().write { ctx -> Bool? in
                guard try all.ids(in: ctx) == ids else { return nil }
                return try ctx.dropCollection(collection) ? true : nil
            }
        })
        if let (ids, _) = made { console.note("Dropped \(what(ids.count)).") }
    }

    private func saveFilter(_ name: String, _ text: String) async throws {
        guard name.first.map({ $0.isLetter || $0 == "_" }) == true,
              name.allSatisfy({ $0.isLetter || $0.isNumber || $0 == "_" }) else {
            throw ShellError("a filter's name is a word (letters, digits, _), not '\(name)'")
        }
        guard !Parser.statementWords.contains(name) && !Parser.literalWords.contains(name) else {
            throw ShellError("'\(name)' is a word of the language; choose another name")
        }
        let expression = try Parser.savedQuery(text)
        let collections = try await reading { try $0.collections().map(\.name) }
        if collections.contains(name) { throw ShellError("'\(name)' is a collection's name; choose another name") }
        let resolved = try await resolve(expression)   // checks names, fields and comparisons
        warn(resolved.warnings, in: text)
        // Built on another saved filter: the request keeps that filter's steps, whatever becomes of it.
        let filter = SavedFilter(name: name, query: resolved.query)
        try await requireStore().write { try $0.saveFilter(filter) }
        console.note("Saved \(name) = \(filter.query)" + (filter.collection == expression.base ? ""
            : " (the steps of \(expression.base) written out)"))
    }

    /// Redraws what a query prints (its results, a count, groups, a value...) after each commit that changes it,
    /// until Ctrl-C.
    private func watch(_ text: String) async throws {
        guard !pending.isOpen else {
            throw ShellError(".watch follows committed changes: commit or rollback the open transaction first")
        }
        guard case .query(let expression) = try Parser.statement(text) else {
            throw ShellError("usage: .watch QUERY, such as .watch people.include(age >= 18).count()")
        }
        let resolved = try await resolve(expression)
        let compute: (@Sendable (ReadContext) throws -> Computed)?
        do { compute = try Shell.computation(of: resolved) } catch {
            throw ShellError(".watch follows what a query prints; it cannot run \(expression.text): \(error)")
        }
        warn(resolved.warnings, in: text)
        let store = try requireStore()
        let redraw = isatty(1) == 1 && console.outputPath == nil
        func header() -> String {
            (redraw ? "\u{1B}[H\u{1B}[2J" : "") + "\(expression.text)   (\(Shell.clockTime()); "
                + "Ctrl-C stops)\n"
        }
        let columns = console.resultScreen?.columns
        switch (resolved.rows == nil, resolved.terminal) {
        case (true, .count?):
            for try await n in resolved.query.observeCount(in: store) { console.result(header() + "\(n)\n") }
        case (true, nil), (true, .results?):
            for try await documents in resolved.query.observe(in: store) {
                console.result(header() + (try renderer.render(documents, fitting: columns)))
            }
        case (true, .first?):
            for try await documents in resolved.query[0..<1].observe(in: store) {
                console.result(header() + renderer.render(documents.first, fitting: columns))
            }
        default:
            // Groups, values, fields of each result: computed again after each commit, redrawn when they change.
            guard let compute else { return }
            for try await computed in store.observe(ComputedRequest(compute: compute)) {
                console.result(header() + (try renderer.render(computed, fitting: columns)))
            }
        }
        console.note((console.interactive ? "\n" : "") + "Stopped watching.")
    }

    static func clockTime() -> String {
        let c = Calendar.current.dateComponents([.hour, .minute, .second], from: Date())
        return String(format: "%02d:%02d:%02d", c.hour ?? 0, c.minute ?? 0, c.second ?? 0)
    }

    private func status() {
        guard pending.isOpen else { console.note("No transaction is open."); return }
        if pending.isEmpty { console.note("A transaction is open, with no pending change."); return }
        var out = "A transaction is open, with \(pending.count) pending change\(pending.count == 1 ? "" : "s"):\n"
        for (i, c) in pending.changes.enumerated() { out += "  \(i + 1). \(c.summary)\n" }
        console.result(out)
    }

    private func stats() async throws {
        let store = try requireStore()
        let rows = try await reading { ctx in try ctx.collections().map { ($0, try Query<DocumentValue>($0.name).count(in: ctx)) } }
        var out = "store:  \(store.path)\n"
        if isOnServer {
            out += "file:   none, the store is kept in PostgreSQL: \(Shell.serverTools["space"] ?? "")\n"
        } else {
            let space = try await store.spaceUsage()
            out += "file:   \(Shell.bytes(space.fileBytes)), \(Shell.bytes(space.bytesInUse)) in use, "
                + "\(space.freePages) free pages of \(Shell.bytes(space.pageSize)); map \(Shell.bytes(space.mapBytes))\n"
            if space.reclaimableBytes > space.fileBytes / 2 && space.fileBytes > 1 << 20 {
                out += "        compacting would give back about \(Shell.bytes(space.reclaimableBytes)) (.compact)\n"
            }
        }
        for (info, count) in rows {
            out += "\(info.name.onOneLine): \(count) documents, \(info.indexes.count) indexes\n"
        }
        if pending.isOpen { out += "transaction: open, \(pending.count) pending\n" }
        console.result(out)
    }

    /// `.compact`: closes the store, compacts its file, and opens it again, whether the compaction was done or
    /// refused.
    private func compact() async throws {
        let store = try requireStore()
        guard !pending.isOpen else { throw ShellError("compaction closes the store: commit or rollback first") }
        let path = store.path
        await close()
        let result: Result<(before: Int, after: Int), any Error>
        do { result = .success(try await DocStore.compact(path: path)) } catch { result = .failure(error) }
        do {
            try await open(path: path)
        } catch {
            let outcome: String
            switch result {
            case .success(let sizes): outcome = "it was compacted (\(Shell.bytes(sizes.before)) to \(Shell.bytes(sizes.after)))"
            case .failure(let failure): outcome = "it was not compacted (\(failure))"
            }
            throw ShellError("\(outcome), and it could not be opened again: \(error); .open \(path) tries again")
        }
        let (before, after) = try result.get()
        console.note("Compacted \(path) from \(Shell.bytes(before)) to \(Shell.bytes(after)).")
    }

    static func bytes(_ n: Int) -> String {
        if n < 1024 { return "\(n) B" }
        if n < 1 << 20 { return String(format: "%.1f KiB", Double(n) / 1024) }
        if n < 1 << 30 { return String(format: "%.1f MiB", Double(n) / 1048576) }
        return String(format: "%.2f GiB", Double(n) / 1073741824)
    }
}
