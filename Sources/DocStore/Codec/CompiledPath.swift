import Foundation

/// A field path laid out for many look-ups: every name's bytes in one allocation owned by this object, so that
/// finding the field in a document allocates nothing and retains nothing.
final class CompiledPath {
    /// The laid-out names, a plain value: whoever holds it must keep this object alive. Hot loops copy it out so
    /// that each look-up touches no reference count.
    struct Layout {
        fileprivate let names: UnsafeMutableRawPointer
        fileprivate let spans: UnsafeMutableBufferPointer<(offset: Int, count: Int)>

        /// The value at this path from `root`, or `nil` when a step is missing or not an object. The same answer as
        /// ``BinaryReader/value(atPath:from:)``.
        @inline(__always)
        func value(in reader: BinaryReader, from root: ValueRef) throws -> ValueRef? {
            var current = root
            for span in spans {
                let name = UnsafeRawBufferPointer(start: names + span.offset, count: span.count)
                guard let found = try reader.field(current, named: name) else { return nil }
                current = found
            }
            return current
        }

        /// The same, from a root of format 3 whose layout `shaped` is read already (`nil` for any other root): its
        /// field is found without reading the document's header again. (The walk after the first step is written
        /// out again here: one loop shared over a slice of the steps made scans 4-7% slower.)
        @inline(__always)
        func value(in reader: BinaryReader, from root: ValueRef, shaped: BinaryReader.Shaped?) throws -> ValueRef? {
            guard let shaped, let first = spans.first else { return try value(in: reader, from: root) }
            let name = UnsafeRawBufferPointer(start: names + first.offset, count: first.count)
            guard let i = shaped.shape._withUnsafeGuaranteedRef({ $0.index(of: name) }) else { return nil }
            var current = try reader.field(i, of: shaped)
            for span in spans.dropFirst() {
                let name = UnsafeRawBufferPointer(start: names + span.offset, count: span.count)
                guard let found = try reader.field(current, named: name) else { return nil }
                current = found
            }
            return current
        }
    }

    let layout: Layout
    let path: FieldPath

    init(_ path: FieldPath) {
        self.path = path
        let total = path.utf8Components.reduce(0) { $0 + $1.count }
        let names = UnsafeMutableRawPointer.allocate(byteCount: max(total, 1), alignment: 1)
        let spans = UnsafeMutableBufferPointer<(offset: Int, count: Int)>.allocate(capacity: path.utf8Components.count)
        var offset = 0
        for (i, name) in path.utf8Components.enumerated() {
            name.withUnsafeBytes { bytes in
                if let from = bytes.baseAddress { (names + offset).copyMemory(from: from, byteCount: bytes.count) }
            }
            spans[i] = (offset, name.count)
            offset += name.count
        }
        layout = Layout(names: names, spans: spans)
    }

    deinit {
        layout.names.deallocate()
        layout.spans.deallocate()
    }

    /// The value at this path from `root`, or `nil` when a step is missing or not an object.
    @inline(__always)
    func value(in reader: BinaryReader, from root: ValueRef) throws -> ValueRef? {
        try layout.value(in: reader, from: root)
    }
}
