import Foundation

/// The JSON coders the request path shares. A configured `JSONEncoder` or `JSONDecoder` is safe to
/// use from many tasks at once (each call builds its own state), so making a new one for every
/// body, row and upstream answer only paid for an allocation and its locked options each time.
public enum SharedJSON {
    /// Default decoding: no key or date strategy.
    public static let decoder = JSONDecoder()

    /// Keys sorted and `/` unescaped, so the same value always gives the same bytes (request
    /// hashes, stored answers, upstream bodies).
    public static let canonicalEncoder: JSONEncoder = {
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.sortedKeys, .withoutEscapingSlashes]
        return encoder
    }()

    /// Keys sorted, `/` escaped: what the stores have always written for issuer references and
    /// event details, kept byte for byte (the unique index on issuer references compares it).
    public static let sortedEncoder: JSONEncoder = {
        let encoder = JSONEncoder()
        encoder.outputFormatting = [.sortedKeys]
        return encoder
    }()
}
