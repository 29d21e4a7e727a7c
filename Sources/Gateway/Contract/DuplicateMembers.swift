import Foundation
import ProvisioningCore

/// JSON lets an object name a member twice and leaves which one counts to the parser: Foundation's
/// `JSONDecoder` keeps the first, its `JSONSerialization` the last, and a proxy, a firewall or an
/// audit tap in front of the gateway may do either. A body that names a member twice can therefore
/// mean different requests to different readers, so the contract refuses it (`invalid_request`),
/// as I-JSON (RFC 7493) does and as it refuses a query parameter given twice.
///
/// Found without a parser of its own, on a body Foundation has already parsed as JSON: every
/// member is one name and one `:` outside the strings, so the body names a member twice exactly
/// when it has more such colons than the parsed objects (whose names are unique) have members.
/// Only then is the place looked for, by comparing the parsed body (first name wins) with
/// `JSONSerialization`'s reading of the same bytes (last name wins), which differ where a name is
/// given again with another value; copies that say the same are refused without a place.
enum DuplicateMembers {
    /// Where `body` (parsed as `parsed`) names a member more than once: the member (`device.type`,
    /// `certificates[1].k`) when its copies differ, "the body" when it cannot be told; nil when
    /// every name is given once.
    static func duplicate(in body: Data, parsed: JSONValue, shape: Shape? = nil) -> String? {
        guard (shape ?? Self.shape(of: body)).colons != members(parsed) else { return nil }
        guard let lastWins = try? JSONSerialization.jsonObject(with: body, options: [.fragmentsAllowed]),
              let place = difference(parsed, lastWins, at: ""), !place.isEmpty, Self.isShown(place) else { return "the body" }
        return place
    }

    /// Whether a member's place may be named in a problem, which the caller and the logs read:
    /// names the API could have (at most 100 characters of letters, digits, `_ - . : [ ]`, no run
    /// of 8 digits). A name made up to carry a card number, a nonce or 28 KB of text is not
    /// repeated; the problem then says "the body".
    static func isShown(_ place: String) -> Bool {
        InputRules.readsAsCode(place, punctuation: "_-.:[]")
    }

    /// What one pass over a JSON text's bytes outside its strings tells, before any parser runs.
    struct Shape: Equatable {
        /// The `:` outside strings: one per member.
        var colons = 0
        /// The deepest nesting of `[` and `{` (0 for a scalar).
        var deepest = 0
    }

    /// The `:` of a JSON text that are not inside a string, and how deep its arrays and objects
    /// nest. (UTF-8 never puts an ASCII byte inside a multi-byte character.) On text that is not
    /// JSON the figures mean nothing, and the parser then refuses it.
    static func shape(of body: Data) -> Shape {
        body.withUnsafeBytes { (bytes: UnsafeRawBufferPointer) -> Shape in
            guard let base = bytes.baseAddress else { return Shape() }
            var shape = Shape()
            var depth = 0
            var index = 0
            let count = bytes.count
            while index < count {
                let byte = bytes[index]
                index += 1
                switch byte {
                case UInt8(ascii: ":"):
                    shape.colons += 1
                case UInt8(ascii: "["), UInt8(ascii: "{"):
                    depth += 1
                    if depth > shape.deepest { shape.deepest = depth }
                case UInt8(ascii: "]"), UInt8(ascii: "}"):
                    depth -= 1
                case UInt8(ascii: "\""):
                    // A string: to its closing quote, the first not escaped (after an even run of
                    // backslashes), found with memchr (most of a body is its strings).
                    while index < count, let quote = memchr(base + index, Int32(UInt8(ascii: "\"")), count - index) {
                        let at = base.distance(to: UnsafeRawPointer(quote))
                        var backslashes = 0
                        while at - backslashes - 1 >= index, bytes[at - backslashes - 1] == UInt8(ascii: "\\") { backslashes += 1 }
                        index = at + 1
                        if backslashes % 2 == 0 { break }
                    }
                default:
                    break
                }
            }
            return shape
        }
    }

    /// The members of every object in `value` (scalars are not descended into).
    static func members(_ value: JSONValue) -> Int {
        switch value {
        case .object(let members): members.values.reduce(members.count) { $0 + nested($1) }
        case .array(let items): items.reduce(0) { $0 + nested($1) }
        default: 0
        }
    }

    private static func nested(_ value: JSONValue) -> Int {
        switch value {
        case .object, .array: members(value)
        default: 0
        }
    }

    private static func difference(_ first: JSONValue, _ last: Any, at path: String) -> String? {
        switch first {
        case .object(let members):
            guard let other = last as? [String: Any], other.count == members.count else { return path }
            for (name, value) in members {
                // Other names: the object itself was given twice, differently.
                guard let otherValue = other[name] else { return path }
                if let found = difference(value, otherValue, at: path.isEmpty ? name : path + "." + name) { return found }
            }
            return nil
        case .array(let items):
            guard let other = last as? [Any], other.count == items.count else { return path }
            for (index, item) in items.enumerated() {
                if let found = difference(item, other[index], at: path + "[\(index)]") { return found }
            }
            return nil
        case .string(let text):
            return (last as? String) == text ? nil : path
        case .integer(let number):
            guard isNumber(last) else { return path }
            // An integer the other reading holds some other way (beyond Int64) is not compared.
            guard let other = last as? Int64 else { return nil }
            return other == number ? nil : path
        case .number:
            return isNumber(last) ? nil : path
        case .bool(let flag):
            guard let other = last as? Bool else { return path }
            return other == flag ? nil : path
        case .null:
            return last is NSNull ? nil : path
        }
    }

    /// What `JSONSerialization` gives for a number (or a boolean, which Foundation bridges alike).
    private static func isNumber(_ value: Any) -> Bool {
        !(value is String || value is NSNull || value is [Any] || value is [String: Any])
    }
}
