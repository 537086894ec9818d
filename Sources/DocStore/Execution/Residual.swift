/// The part of a plan's condition its access does not answer, checked on each candidate's stored bytes: compiled
/// once per run, reading only the fields it names, and decoding the document only for a part that needs it (once
/// per document, however many parts do).
final class Residual {
    private let handle: CollectionHandle
    private let statistics: StatisticsBox
    /// The condition, compiled once for the documents this run checks (constants' keys computed once).
    private let compiled: CompiledCondition
    /// Whether some part needs the decoded document.
    private let needsDecoding: Bool
    /// The answer when the condition is a constant (no condition left, or one known to be false).
    private let constant: Bool?
    /// Decodes a document into the query's type, for the parts evaluated on it.
    private let decodeForCondition: OpaqueCondition?

    init(_ condition: Condition, handle: CollectionHandle, statistics: StatisticsBox) {
        self.handle = handle
        self.statistics = statistics
        compiled = CompiledCondition.make(condition, keys: ComparisonKeys())
        needsDecoding = condition.needsDecoding
        if case .constant(let b) = condition { constant = b } else { constant = nil }
        decodeForCondition = condition.firstOpaque
    }

    /// Whether every candidate matches, without looking at it.
    var isTrivial: Bool { constant == true }

    /// Whether a candidate document satisfies the condition.
    func matches(_ candidate: CandidateSource.Candidate) throws -> Bool {
        if let constant { return constant }
        let reader = BinaryReader(candidate.document)
        let root: ValueRef, shaped: BinaryReader.Shaped?
        do { (root, shaped) = try reader.rootAndShape() } catch let error as MalformedDocument {
            throw DocStoreError(.corruptDocument, "document \(CollectionHandle.hex(candidate.id)) of collection '\(handle.name)' "
                + "is damaged: \(error)", collection: handle.name)
        }
        guard needsDecoding, let decodeForCondition else {
            // The common case: no closure capturing this document, so nothing is allocated per document.
            return try compiled.check(.init(reader: reader, root: root, shaped: shaped, decoded: Residual.noDecoding))
        }
        var decoded: Any?
        return try compiled.check(.init(reader: reader, root: root, shaped: shaped) { [self] in
            if let decoded { return decoded }
            statistics.value.documentsDecoded += 1
            let value: Any
            do { value = try decodeForCondition.decode(candidate.document) } catch {
                throw DecodingFailure.named(error, type: decodeForCondition.typeName(), collection: handle.name) {
                    CollectionHandle.describeID(Array(candidate.id), in: Array(candidate.document),
                                                idPath: handle.info.idPath)
                }
            }
            decoded = value
            return value
        })
    }


    /// The decoder of a residual that never asks for one.
    private static func noDecoding() throws -> Any { throw CancellationError() }
}
