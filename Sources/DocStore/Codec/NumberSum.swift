/// The one addition of ``DocumentValue`` numbers: what the `sum` and `average` aggregates compute, and (through
/// ``DocumentValue/adding(_:_:)``, where a `Double` adds as Swift adds Doubles) an `increment` update and a `+` in a
/// computed condition.
///
/// - Whole numbers add exactly, whatever their kind: integers (signed or unsigned) and Doubles without a fraction
///   from -2^63 up to 2^64, since an index key does not tell `3` from `3.0` and a sum read from one must be the
///   sum read from the documents.
/// - A sum of whole numbers is an `.int` when it fits `Int64`; a `.uint` when it fits `UInt64` and one of the
///   numbers lay above `Int64.max` (as only an unsigned integer or a Double may); any other is an overflow.
/// - Any other number (a fraction, an infinity, NaN, a Double outside that range) makes the sum a `Double`: the
///   whole part and the rest, each added as its kind, then together. NaN makes NaN, and so do both infinities.
struct NumberSum {
    /// The sum of the whole numbers.
    private(set) var whole: Int128 = 0
    /// The sum of the other numbers.
    private var rest = 0.0
    private var sawRest = false
    /// Whether a whole number lay above `Int64.max`.
    private var sawUnsigned = false

    /// A number as the sum takes it: the whole number it is, if it is one, and its `Double`; `nil` for a value
    /// that is not a number.
    static func parts(_ value: DocumentValue) -> (whole: Int128?, double: Double)? {
        switch value {
        case .int(let i): return (Int128(i), Double(i))
        case .uint(let u): return (Int128(u), Double(u))
        case .double(let d): return (whole(d), d)
        default: return nil
        }
    }

    /// A `Double` as a whole number, when it has no fraction and lies where an `Int64` or a `UInt64` may.
    @inline(__always)
    static func whole(_ d: Double) -> Int128? {
        d.rounded() == d && d >= -0x1p63 && d < 0x1p64 ? Int128(d) : nil
    }

    /// Adds a number (`whole` when it is a whole one, as ``parts(_:)`` gives it), counted `times` times.
    @inline(__always)
    mutating func add(whole: Int128?, _ double: Double, times: Int = 1) {
        if let whole {
            self.whole += whole * Int128(times)
            if whole > Int128(Int64.max) { sawUnsigned = true }
        } else {
            sawRest = true
            rest += double * Double(times)
        }
    }

    /// Adds another sum's numbers.
    mutating func merge(_ other: NumberSum) {
        whole += other.whole
        rest += other.rest
        sawRest = sawRest || other.sawRest
        sawUnsigned = sawUnsigned || other.sawUnsigned
    }

    /// The sum; `nil` for an overflow.
    var value: DocumentValue? {
        if sawRest { return .double(double) }
        if let i = Int64(exactly: whole) { return .int(i) }
        if sawUnsigned, let u = UInt64(exactly: whole) { return .uint(u) }
        return nil
    }

    /// The sum as a `Double`.
    var double: Double { Double(whole) + rest }
}

extension DocumentValue {
    /// `a + b` for two numbers (a condition's `+`, an increment): a `Double` on either side adds as Swift adds
    /// Doubles, so that a whole Double stays one and a later `/` divides as Swift's does; integers of either sign
    /// add exactly, as ``NumberSum`` adds them. `nil` when either is not a number, or for an overflow.
    static func adding(_ a: DocumentValue, _ b: DocumentValue) -> DocumentValue? {
        guard let x = NumberSum.parts(a), let y = NumberSum.parts(b) else { return nil }
        if case .double = a { return .double(x.double + y.double) }
        if case .double = b { return .double(x.double + y.double) }
        var sum = NumberSum()
        sum.add(whole: x.whole, x.double)
        sum.add(whole: y.whole, y.double)
        return sum.value
    }
}
