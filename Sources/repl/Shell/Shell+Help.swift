extension Shell {
    /// A step of a query, for `.help STEP`: how it is written, what it does, and an example.
    struct StepHelp: Sendable {
        var name: String
        var usage: String
        var text: String
        var example: String
    }

    /// Every step the language has, in the order a query is written.
    nonisolated static let steps: [StepHelp] = [
        StepHelp(name: "include", usage: "include(CONDITION)",
                 text: "keeps the documents for which CONDITION holds; several include steps must all hold. "
                    + ".help query lists the conditions.",
                 example: #"people.include(age >= 18 && city == "Oslo")"#),
        StepHelp(name: "exclude", usage: "exclude(CONDITION)",
                 text: "leaves out the documents for which CONDITION holds.",
                 example: #"people.exclude(tags.contains("retired"))"#),
        StepHelp(name: "sortBy", usage: "sortBy(FIELD[, .reverse])",
                 text: "orders the documents by FIELD, smallest first (largest first with .reverse); a further "
                    + "sortBy orders the documents that tie. A missing field or nil sorts first.",
                 example: "people.sortBy(age, .reverse).sortBy(name)[0..<10]"),
        StepHelp(name: "reverse", usage: "reverse()",
                 text: "flips the order: of every sortBy, and of the ids that order ties (or, after [a..<b], "
                    + "the slice).",
                 example: "people.sortBy(age).reverse().first"),
        StepHelp(name: "first", usage: "first",
                 text: "runs the query and prints its first document, or (no document).",
                 example: "people.sortBy(age).first"),
        StepHelp(name: "last", usage: "last",
                 text: "runs the query and prints its last document (of the slice, after [a..<b]); unsorted, "
                    + "the one with the greatest id.",
                 example: #"people.include(city == "Oslo").sortBy(age).last"#),
        StepHelp(name: "any", usage: "any",
                 text: "prints one matching document, whichever is quickest to find, whatever the order.",
                 example: #"people.include(tags.contains("swift")).any"#),
        StepHelp(name: "count", usage: "count()",
                 text: "prints how many documents match (within the slice, after [a..<b]); explain() after it says "
                    + "how they are counted. After groupBy(...) it is the aggregate of each group, and after the "
                    + "groups' aggregate it counts the groups.",
                 example: "people.include(age < 18).count()"),
        StepHelp(name: "sum", usage: "sum(FIELD)",
                 text: "prints the sum of FIELD's numbers over the matching documents (within the slice, after "
                    + "[a..<b]), as one row in a column named sum(FIELD); 0 when there are none. Whole numbers add "
                    + "exactly (a sum past a 64-bit integer is an error); values that are not numbers, nil and "
                    + "missing fields are skipped. explain() after it says how it is computed.",
                 example: #"people.include(city == "Oslo").sum(score)"#),
        StepHelp(name: "average", usage: "average(FIELD)",
                 text: "prints the mean of FIELD's numbers over the matching documents, in a column named "
                    + "average(FIELD); nil when there are none. Other values, nil and missing fields are skipped.",
                 example: #"people.include(city == "Oslo").average(age)"#),
        StepHelp(name: "min", usage: "min(FIELD)",
                 text: "prints the least value of FIELD over the matching documents, in the order of index keys "
                    + "(numbers by value, then dates, strings...), nil and missing skipped; nil when there is none. "
                    + "With an index on FIELD and nothing to filter, it is one step along the index (explain() says so).",
                 example: "people.include(active).min(age)"),
        StepHelp(name: "max", usage: "max(FIELD)",
                 text: "prints the greatest value of FIELD over the matching documents, as min does the least.",
                 example: "people.max(age).explain()"),
        StepHelp(name: "distinct", usage: "distinct(FIELD)",
                 text: "prints the values FIELD takes in the matching documents, each once, a row each, in key order "
                    + "(nil and missing left out; 3 and 3.0 are one value). With an index on FIELD and nothing to "
                    + "filter, it is one step per distinct value along the index (explain() says so). count() after it "
                    + "prints how many values there are.",
                 example: "people.distinct(city)"),
        StepHelp(name: "groupBy", usage: "groupBy(FIELD[, FIELD...]).count() or .sum(F), .average(F), .min(F), .max(F)",
                 text: "groups the matching documents by the values of the fields (nil or missing is a group of its "
                    + "own, first) and prints a row per group: a column per field, and one for the aggregate, named "
                    + "as written (count(), average(age)). Groups are in key order; then sortBy(value[, .reverse]) "
                    + "orders them by the aggregate (ties by key), sortBy(key, .reverse) the other way, [a..<b] "
                    + "slices them, and results(), first, count() (how many groups) or explain() may end the query.",
                 example: "people.groupBy(city).count().sortBy(value, .reverse)[0..<10]"),
        StepHelp(name: "select", usage: "select(FIELD[, FIELD...])",
                 text: "prints only these fields of each result (a missing one left out), read from the stored "
                    + "bytes without decoding the rest. It comes after the steps that choose and order the documents; "
                    + "only results() or first may follow it.",
                 example: "people.include(age > 90).sortBy(age).select(name, age)"),
        StepHelp(name: "results", usage: "results()",
                 text: "runs the query and prints its documents in the current .mode: the same as writing "
                    + "nothing after the steps.",
                 example: "people.include(age >= 65).sortBy(name).results()"),
        StepHelp(name: "explain", usage: "explain()",
                 text: "prints how the query would run (the index it uses, the filter and sort left to do) "
                    + "without running it. After count(), sum(F), average(F), min(F), max(F), distinct(F) or groupBy(...), it "
                    + "says how that is computed (from an index's keys, or over the matches), and what computing it "
                    + "took.",
                 example: #"people.include(city == "Oslo").sortBy(age).explain()"#),
        StepHelp(name: "findOrCreate", usage: "findOrCreate({...})",
                 text: "prints the first matching document; when none matches, inserts the one given (with an "
                    + "id when it has none) and prints it. Both in one transaction.",
                 example: #"people.include(email == "ann@example.com").findOrCreate({"name": "Ann", "email": "ann@example.com"})"#),
        StepHelp(name: "delete", usage: "delete()",
                 text: "deletes the matching documents: counts them and asks first (--yes answers without a "
                    + "terminal); if they change while you answer, it asks again.",
                 example: "people.include(age < 13).delete()"),
        StepHelp(name: "update", usage: "update(set: {...}, unset: [...], inc: {...}, push: {...}, pull: {...})",
                 text: "changes the matching documents, as delete deletes them: counts them and asks first (--yes "
                    + "answers without a terminal), asks again if they change while you answer, then changes exactly "
                    + "those, all or none. set: gives fields values, unset: removes fields, inc: (or increment:) adds "
                    + "numbers (a missing field becomes the number), push: appends to arrays, pull: removes every "
                    + "equal element; applied in that order, whatever the order written. Each label once, in any "
                    + "order; a field is named by a string, its dots nesting (\"address.city\").",
                 example: #"people.include(city == "Oslo").update(set: {"city": "Bergen"}, inc: {"age": 1})"#),
        StepHelp(name: "save", usage: "save({...}) or save([{...}, ...])",
                 text: "writes documents by id: inserts each one, or replaces the document that has its id "
                    + "(asking before it replaces any). Not to be confused with the command .save NAME QUERY, "
                    + "which keeps a query as a saved filter.",
                 example: #"people.save({"id": 7, "name": "Ann", "age": 42})"#),
        StepHelp(name: "insert", usage: "insert({...}) or insert([{...}, ...])",
                 text: "adds new documents, giving an id to those without one; a document whose id is taken "
                    + "is an error (save replaces).",
                 example: #"people.insert([{"name": "Ann", "age": 41}, {"name": "Bo", "age": 17}])"#),
    ]

    /// `it`, which is neither a command nor a step.
    static let itHelp = """
        it
            at a terminal, a result longer than the screen stops after a page (unless .pager off); it shows the
            next page. Example: people.sortBy(name), then it, it, ...
        """

    /// `begin`, `commit` and `rollback`, for `.help begin` (or commit, rollback, transaction).
    static let transactionHelp = """
        begin / commit / rollback   (a transaction)
            begin opens a transaction: the changes after it stay pending, shown by the queries of this shell (the
            prompt counts them, .status lists them) and by no other reader or process. commit applies them all, in
            one transaction, or none: a commit that fails (another process took a unique value meanwhile, say) says
            why and keeps them pending, to commit again. rollback drops them. Ids of pending inserts are chosen at
            commit, which says which. Commands that apply at once (.createIndex, .drop, .save, .restore ...) are
            refused while a transaction is open.
            Example: begin, then people.include(age < 18).delete(), people.count(), commit
        """

    /// The topics `.help` takes besides the commands and steps: the language, `it`, and the transaction words.
    static let otherTopics = ["query", "it", "begin", "commit", "rollback", "transaction"]

    /// `.help`, `.help query`, `.help COMMAND`, `.help STEP`; an unknown topic is an error that names the closest.
    func help(_ topic: String?) throws {
        guard let asked = topic else {
            var out = "Commands:\n"
            let width = Shell.commands.map(\.usage.count).max() ?? 0
            func entry(_ usage: String, _ summary: String) {
                out += "  " + usage + String(repeating: " ", count: max(1, width - usage.count + 2)) + summary + "\n"
            }
            for c in Shell.commands { entry(c.usage, c.summary) }
            entry("begin / commit / rollback", "a transaction")
            entry("it", "the next page of a long result, at a terminal")
            out += "\nNo command writes over the open store's file or its lock file; another store's file only when "
                + "confirmed.\n"
            out += "On a store kept in PostgreSQL (.open postgres://...), .backup, .compact and .recover are done "
                + "with the server's own tools (.help NAME says which); .dump and .restore move a store either way.\n"
            out += "\n" + Shell.queryHelp + "\n"
            out += ".help STEP for one step (.help sortBy), .help NAME for one command (.help mode).\n"
            console.result(out)
            return
        }
        let isCommand = asked.hasPrefix(".")
        var name = isCommand ? String(asked.dropFirst()) : asked
        if name == "query" || name == "queries" { console.result(Shell.queryHelp + "\n"); return }
        if name == "it" { console.result(Shell.itHelp + "\n"); return }
        if ["begin", "commit", "rollback", "transaction", "transactions"].contains(name) {
            console.result(Shell.transactionHelp + "\n")
            return
        }
        let commands = Shell.commands.map(\.name)
        let steps = isCommand ? [] : Shell.steps.map(\.name)
        // sortby finds sortBy: a topic differs from another only in case when it is a misspelling of it.
        if !commands.contains(name) && !steps.contains(name),
           let same = (steps + commands).first(where: { $0.lowercased() == name.lowercased() }) {
            name = same
        }
        var sections: [String] = []
        if let step = Shell.steps.first(where: { $0.name == name }), !isCommand {
            sections.append("\(step.usage)   (a step of a query)\n" + Shell.wrap(step.text) + "\n"
                + "    Example: \(step.example)\n")
        }
        if let c = Shell.commands.first(where: { $0.name == name }) {
            var section = "\(c.usage)\n" + Shell.wrap(c.summary) + "\n"
            if let tool = Shell.serverTools[name] {
                section += Shell.wrap("On a store kept in PostgreSQL: " + tool + ".") + "\n"
            }
            if isCommand, let step = Shell.steps.first(where: { $0.name == name }) {
                section += "    (not the step \(step.usage) of a query: .help \(name) describes both)\n"
            }
            sections.append(section)
        }
        guard !sections.isEmpty else {
            let closest = Shell.closestTopic(name, in: steps + commands + Shell.otherTopics).map { word in
                steps.contains(word) || !commands.contains(word) ? word : "." + word
            }
            throw ShellError("no help on '\(asked)'" + (closest.map { "; did you mean .help \($0)?" } ?? "")
                + " (.help lists the topics)")
        }
        console.result(sections.joined(separator: "\n"))
    }

    /// The topic `name` most likely means: one it starts, else the nearest in spelling (a swap of two letters
    /// counting as two changes), when near enough.
    static func closestTopic(_ name: String, in topics: [String]) -> String? {
        let lower = name.lowercased()
        if lower.count >= 2, let started = topics.first(where: { $0.lowercased().hasPrefix(lower) }) { return started }
        let scored = topics.map { ($0, Suggest.distance(lower, $0.lowercased())) }
        guard let best = scored.min(by: { $0.1 < $1.1 }), best.1 <= max(2, best.0.count / 3) else { return nil }
        return best.0
    }

    /// `text` in lines of at most `width` columns, each indented by `indent`.
    static func wrap(_ text: String, width: Int = 100, indent: String = "    ") -> String {
        var lines: [String] = []
        var line = ""
        for word in text.split(separator: " ") {
            if !line.isEmpty && indent.count + line.count + 1 + word.count > width {
                lines.append(indent + line)
                line = ""
            }
            line += (line.isEmpty ? "" : " ") + word
        }
        if !line.isEmpty { lines.append(indent + line) }
        return lines.joined(separator: "\n")
    }
}
