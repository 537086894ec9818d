// `.help` on the steps of a query: each has a usage, what it does and an example; an unknown topic suggests the
// closest.

import Foundation
import Testing
@testable import repl

@Suite struct StepHelpTests {
    @Test func everyStepTheParserKnowsHasHelpWithAnExample() {
        for word in Parser.stepWords {
            let help = Shell.steps.first { $0.name == word }
            #expect(help != nil, "no .help for the step \(word)")
            #expect(help?.example.contains("." + word) == true, "the example of \(word) does not use it")
        }
        #expect(Shell.steps.map(\.name).allSatisfy(Parser.stepWords.contains), "help on a step the parser lacks")
    }
}

extension ShellSessions {
@Suite struct ReplHelpTests {
    @Test func helpOnEachStepGivesItsUsageWhatItDoesAndAnExample() throws {
        let sandbox = try ShellSandbox()
        let steps = ["include", "exclude", "sortBy", "reverse", "first", "last", "any", "count", "results", "explain",
                     "findOrCreate", "delete", "save", "insert", "sum", "average", "min", "max", "distinct", "groupBy",
                     "select", "update"]
        for step in steps {
            let result = try sandbox.run([sandbox.storePath, ".help \(step)"])
            #expect(result.status == 0, "\(step): \(result)")
            #expect(result.stdout.hasPrefix(step), "\(step): \(result.stdout)")
            #expect(result.stdout.contains("(a step of a query)\n    "), "\(step): \(result.stdout)")
            #expect(result.stdout.contains("Example: ") && result.stdout.contains(".\(step)"),
                    "\(step): \(result.stdout)")
        }
    }

    @Test func helpOnSaveDescribesTheStepAndTheCommandForSavedFilters() throws {
        let sandbox = try ShellSandbox()
        let result = try sandbox.run([sandbox.storePath, ".help save"])
        #expect(result.status == 0, "\(result)")
        #expect(result.stdout.containsInOrder(["save({...})", "replaces the document that has its id", "asking", "Example: people.save(",
                                               ".save NAME QUERY", "keep a query by name"]), "\(result)")
    }

    @Test func helpOnAnUnknownTopicSuggestsTheClosest() throws {
        let sandbox = try ShellSandbox()
        let step = try sandbox.run([sandbox.storePath, ".help inclde"])
        #expect(step.status == 1 && step.stderr.contains("no help on 'inclde'; did you mean .help include?"), "\(step)")
        let command = try sandbox.run([sandbox.storePath, ".help mdoe"])
        #expect(command.stderr.contains("did you mean .help .mode?"), "\(command)")
        let sameButCase = try sandbox.run([sandbox.storePath, ".help sortby"])
        #expect(sameButCase.status == 0 && sameButCase.stdout.hasPrefix("sortBy(FIELD"), "\(sameButCase)")
    }
}
}
