import Foundation
@testable import DocStore

// What the oracle tests of untyped documents share: their own reading of a document, independent of the library's,
// and where their seeds come from.

/// The value at a dotted path, `nil` where a step is missing or not an object (a stored null is `.null`).
func lookup(_ document: DocumentValue, _ path: String) -> DocumentValue? {
    var current = document
    for name in path.split(separator: ".", omittingEmptySubsequences: false) {
        guard case .object(let fields) = current, let field = fields.first(where: { $0.name == name }) else {
            return nil
        }
        current = field.value
    }
    return current
}

func isNaN(_ value: DocumentValue) -> Bool {
    if case .double(let d) = value { return d.isNaN }
    return false
}

/// An object with its fields sorted by name, at every depth: documents compared without their field order.
func normalized(_ value: DocumentValue) -> DocumentValue {
    switch value {
    case .object(let fields):
        return .object(fields.map { DocumentValue.Field($0.name, normalized($0.value)) }.sorted { $0.name < $1.name })
    case .array(let elements): return .array(elements.map(normalized))
    default: return value
    }
}

/// The seeds of a random test: those of the environment variable `variable` (comma-separated), or `fixed`.
func randomSeeds(from variable: String, otherwise fixed: [UInt64]) -> [UInt64] {
    guard let text = ProcessInfo.processInfo.environment[variable] else { return fixed }
    return text.split(separator: ",").compactMap { UInt64($0.trimmingCharacters(in: .whitespaces)) }
}
