/// CRC-32C (the Castagnoli polynomial, as iSCSI, ext4 and LevelDB use it), computed eight bytes at a time.
///
/// A stored document ends with the checksum of its other bytes, so that damage which still parses (a flipped bit
/// inside a string or a number) is found: every burst of up to 32 changed bits is caught, and any other change but
/// for one time in 2³².
enum CRC32C {
    /// Eight tables of 256 entries: entry `b` of table `k` is the CRC of byte `b` followed by `k` zero bytes.
    private static let tables: [UInt32] = {
        var tables = [UInt32](repeating: 0, count: 8 * 256)
        for byte in 0..<256 {
            var crc = UInt32(byte)
            for _ in 0..<8 { crc = crc & 1 == 0 ? crc >> 1 : (crc >> 1) ^ 0x82F6_3B78 }
            tables[byte] = crc
        }
        for k in 1..<8 {
            for byte in 0..<256 {
                let previous = tables[(k - 1) * 256 + byte]
                tables[k * 256 + byte] = (previous >> 8) ^ tables[Int(previous & 0xFF)]
            }
        }
        return tables
    }()

    static func checksum(_ bytes: UnsafeRawBufferPointer) -> UInt32 {
        guard let base = bytes.baseAddress else { return 0 }
        let count = bytes.count
        var crc: UInt32 = 0xFFFF_FFFF
        var i = 0
        tables.withUnsafeBufferPointer { t in
            while i + 8 <= count {
                let word = UInt64(littleEndian: base.loadUnaligned(fromByteOffset: i, as: UInt64.self)) ^ UInt64(crc)
                crc = t[7 * 256 + Int(word & 0xFF)] ^ t[6 * 256 + Int(word >> 8 & 0xFF)]
                    ^ t[5 * 256 + Int(word >> 16 & 0xFF)] ^ t[4 * 256 + Int(word >> 24 & 0xFF)]
                    ^ t[3 * 256 + Int(word >> 32 & 0xFF)] ^ t[2 * 256 + Int(word >> 40 & 0xFF)]
                    ^ t[1 * 256 + Int(word >> 48 & 0xFF)] ^ t[Int(word >> 56)]
                i += 8
            }
            while i < count {
                crc = t[Int((crc ^ UInt32(base.load(fromByteOffset: i, as: UInt8.self))) & 0xFF)] ^ (crc >> 8)
                i += 1
            }
        }
        return ~crc
    }
}
