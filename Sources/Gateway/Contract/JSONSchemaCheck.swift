import Foundation
import ProvisioningCore

/// A JSON value as the request carried it: `true` is not `1`, `1` is not `1.5`. Parsed by
/// Foundation's `JSONDecoder`; only the shape is kept, to be checked against a schema.
public enum JSONValue: Sendable, Equatable, Decodable {
    case null
    case bool(Bool)
    case integer(Int64)
    case number(Double)
    case string(String)
    case array([JSONValue])
    case object([String: JSONValue])

    /// Any member name of an object.
    private struct MemberKey: CodingKey {
        let stringValue: String
        init(stringValue: String) { self.stringValue = stringValue }
        var intValue: Int? { nil }
        init?(intValue: Int) { nil }
    }

    public init(from decoder: any Decoder) throws {
        let container = try decoder.singleValueContainer()
        // Strings and objects first: a request is mostly those, and every type tried in vain
        // costs a thrown DecodingError. An integer is tried before a double, so 1 stays 1.
        // Objects and arrays are read through the decoder's own containers, as
        // `Dictionary`'s and `Array`'s `Decodable` do (so a name given twice resolves as it does
        // for the generated types, which read the same containers), without their generic
        // look-ups per member.
        if container.decodeNil() {
            self = .null
        } else if let value = try? container.decode(String.self) {
            self = .string(value)
        } else if let object = try? decoder.container(keyedBy: MemberKey.self) {
            let keys = object.allKeys
            var members: [String: JSONValue] = [:]
            members.reserveCapacity(keys.count)
            for key in keys { members[key.stringValue] = try object.decode(JSONValue.self, forKey: key) }
            self = .object(members)
        } else if var list = try? decoder.unkeyedContainer() {
            var items: [JSONValue] = []
            if let count = list.count { items.reserveCapacity(count) }
            while !list.isAtEnd { items.append(try list.decode(JSONValue.self)) }
            self = .array(items)
        } else if let value = try? container.decode(Bool.self) {
            self = .bool(value)
        } else if let value = try? container.decode(Int64.self) {
            self = .integer(value)
        } else {
            self = .number(try container.decode(Double.self))
        }
    }

    /// The YAML/JSON scalar or collection a spec holds (`enum`, `const`, examples), as a value.
    init?(spec value: Any) {
        switch value {
        case let value as Bool: self = .bool(value)
        case let value as Int: self = .integer(Int64(value))
        case let value as Double: self = .number(value)
        case let value as String: self = .string(value)
        case let value as [Any]:
            var items: [JSONValue] = []
            for item in value {
                guard let item = JSONValue(spec: item) else { return nil }
                items.append(item)
            }
            self = .array(items)
        case let value as [String: Any]:
            var members: [String: JSONValue] = [:]
            for (key, item) in value {
                guard let item = JSONValue(spec: item) else { return nil }
                members[key] = item
            }
            self = .object(members)
        case is NSNull: self = .null
        default: return nil
        }
    }

    /// One value of each type, for what is said of types by name.
    static let everyType: [JSONValue] = [.null, .bool(false), .integer(0), .number(0), .string(""), .array([]), .object([:])]

    /// The value's bit in `JSONSchemaCheck.typeMask`.
    var typeBit: UInt8 {
        switch self {
        case .null: 1 << 0
        case .bool: 1 << 1
        case .integer: 1 << 2
        case .number: 1 << 3
        case .string: 1 << 4
        case .array: 1 << 5
        case .object: 1 << 6
        }
    }

    var typeName: String {
        switch self {
        case .null: "null"
        case .bool: "boolean"
        case .integer: "integer"
        case .number: "number"
        case .string: "string"
        case .array: "array"
        case .object: "object"
        }
    }

    /// How the value is shown in a problem when it comes from the spec (never from a request).
    var specText: String {
        switch self {
        case .null: "null"
        case .bool(let value): "\(value)"
        case .integer(let value): "\(value)"
        case .number(let value): "\(value)"
        case .string(let value): value
        case .array, .object: typeName
        }
    }
}

/// The JSON Schema keywords the gateway's OpenAPI document uses for requests, compiled once:
/// `type`, `enum`, `const`, `pattern`, `minLength`/`maxLength` (in code points, as JSON Schema
/// counts), `minimum`/`maximum`, `minItems`/`maxItems`/`items`, `properties`/`required`/
/// `additionalProperties`/`propertyNames`/`minProperties`/`maxProperties`, `oneOf` and `$ref`.
/// A keyword it does not know in a request schema fails the compilation (`SchemaError`), so the
/// spec cannot promise a rule the server silently skips. Descriptive keywords (`description`,
/// `example(s)`, `default`, `format`, `title`, `discriminator`) do not constrain.
public final class JSONSchemaCheck: Sendable {
    public struct SchemaError: Error, CustomStringConvertible {
        public let description: String
    }

    enum Additional: Sendable {
        case allowed
        case forbidden
        case schema(JSONSchemaCheck)
    }

    /// Compiled once; `NSRegularExpression` matching is thread-safe. The spec's common shapes
    /// (canonical base64, hex pairs, one ASCII character class with a length range) are matched
    /// byte by byte instead: a certificate is kilobytes of base64, and ICU walks it in UTF-16.
    /// `Pattern.fastMatcher` recognises them from the pattern's text alone, so the spec stays the
    /// rule; the tests check each against the regex on the same inputs.
    struct Pattern: @unchecked Sendable {
        let source: String
        let regex: NSRegularExpression
        /// ICU's `$` also matches before a final line break; JSON Schema's (ECMA 262) does not.
        let anchoredAtEnd: Bool
        let fast: FastMatcher?

        init(source: String, regex: NSRegularExpression) {
            self.source = source
            self.regex = regex
            anchoredAtEnd = source.hasSuffix("$") && !source.hasSuffix("\\$")
            fast = FastMatcher(pattern: source)
        }

        func matches(_ text: String) -> Bool {
            if let fast { return fast.matches(text) }
            return regexMatches(text)
        }

        func regexMatches(_ text: String) -> Bool {
            let range = NSRange(text.startIndex..<text.endIndex, in: text)
            guard let match = regex.firstMatch(in: text, range: range) else { return false }
            return !anchoredAtEnd || match.range.upperBound == range.upperBound
        }
    }

    /// A byte-level matcher for a pattern of one of the shapes above, or nil for any other.
    struct FastMatcher: Sendable {
        enum Shape: Sendable {
            /// `^(?:[A-Za-z0-9+/]{4})*(?:[A-Za-z0-9+/]{2}[AEIMQUYcgkosw048]=|[A-Za-z0-9+/][AQgw]==)?$`
            case canonicalBase64
            /// `^(?:[0-9A-Fa-f]{2})+$`
            case hexPairs
            /// `^[class]{min,max}$` or `^[class]+$`, a class of printable ASCII characters and ranges.
            case asciiClass(allowed: [Bool], min: Int, max: Int)
        }

        let shape: Shape

        static let canonicalBase64Source = "^(?:[A-Za-z0-9+/]{4})*(?:[A-Za-z0-9+/]{2}[AEIMQUYcgkosw048]=|[A-Za-z0-9+/][AQgw]==)?$"
        static let hexPairsSource = "^(?:[0-9A-Fa-f]{2})+$"

        init?(pattern: String) {
            if pattern == Self.canonicalBase64Source {
                shape = .canonicalBase64
            } else if pattern == Self.hexPairsSource {
                shape = .hexPairs
            } else if let (allowed, min, max) = Self.asciiClass(pattern) {
                shape = .asciiClass(allowed: allowed, min: min, max: max)
            } else {
                return nil
            }
        }

        /// `^[...]{m,n}$` or `^[...]+$`: the class holds printable ASCII (no `\`, `[`, `]` or leading `^`),
        /// as single characters and `a-b` ranges; a `-` first or last is itself.
        private static func asciiClass(_ pattern: String) -> ([Bool], Int, Int)? {
            let bytes = Array(pattern.utf8)
            guard bytes.count > 6, bytes.first == UInt8(ascii: "^"), bytes[1] == UInt8(ascii: "["), bytes.last == UInt8(ascii: "$"),
                  let close = bytes.firstIndex(of: UInt8(ascii: "]")), close > 2
            else { return nil }
            let members = Array(bytes[2..<close])
            guard members.first != UInt8(ascii: "^"), members.allSatisfy({ (0x21...0x7E).contains($0) && $0 != UInt8(ascii: "\\") && $0 != UInt8(ascii: "[") })
            else { return nil }
            let quantifier = String(decoding: bytes[(close + 1)..<(bytes.count - 1)], as: UTF8.self)
            let min: Int, max: Int
            if quantifier == "+" {
                (min, max) = (1, Int.max)
            } else {
                guard quantifier.hasPrefix("{"), quantifier.hasSuffix("}") else { return nil }
                let bounds = quantifier.dropFirst().dropLast().split(separator: ",", omittingEmptySubsequences: false)
                guard bounds.count == 2, let low = Int(bounds[0]), let high = Int(bounds[1]), 0 <= low, low <= high else { return nil }
                (min, max) = (low, high)
            }
            var allowed = [Bool](repeating: false, count: 128)
            var index = 0
            while index < members.count {
                if index + 2 < members.count, members[index + 1] == UInt8(ascii: "-") {
                    guard members[index] <= members[index + 2] else { return nil }
                    for byte in members[index]...members[index + 2] { allowed[Int(byte)] = true }
                    index += 3
                } else {
                    allowed[Int(members[index])] = true
                    index += 1
                }
            }
            return (allowed, min, max)
        }

        func matches(_ text: String) -> Bool {
            var text = text
            // A request's strings are native, so this is its UTF-8 bytes in place, no copy.
            return text.withUTF8(matches)
        }

        private func matches(_ bytes: UnsafeBufferPointer<UInt8>) -> Bool {
            switch shape {
            case .canonicalBase64:
                guard bytes.count % 4 == 0 else { return false }
                guard bytes.count > 0 else { return true }
                // Every group but the last is four alphabet characters; the last may be padded.
                guard Self.all(bytes[..<(bytes.count - 4)], in: Self.base64Alphabet) else { return false }
                let last = (bytes[bytes.count - 4], bytes[bytes.count - 3], bytes[bytes.count - 2], bytes[bytes.count - 1])
                guard Self.isBase64(last.0) else { return false }
                if last.2 == UInt8(ascii: "=") {
                    return last.3 == UInt8(ascii: "=") && "AQgw".utf8.contains(last.1)
                }
                guard Self.isBase64(last.1) else { return false }
                if last.3 == UInt8(ascii: "=") { return "AEIMQUYcgkosw048".utf8.contains(last.2) }
                return Self.isBase64(last.2) && Self.isBase64(last.3)
            case .hexPairs:
                return !bytes.isEmpty && bytes.count % 2 == 0 && Self.all(bytes[...], in: Self.hexDigits)
            case .asciiClass(let allowed, let min, let max):
                return (min...max).contains(bytes.count) && bytes.allSatisfy { $0 < 0x80 && allowed[Int($0)] }
            }
        }

        /// Whether every byte is in `table` (256 entries, one per byte value).
        private static func all(_ bytes: Slice<UnsafeBufferPointer<UInt8>>, in table: [Bool]) -> Bool {
            table.withUnsafeBufferPointer { table in bytes.allSatisfy { table[Int($0)] } }
        }

        private static func table(_ members: (UInt8) -> Bool) -> [Bool] { (0...255).map { members(UInt8($0)) } }
        private static let base64Alphabet = table(isBase64)
        private static let hexDigits = table { (0x30...0x39).contains($0) || (0x41...0x46).contains($0) || (0x61...0x66).contains($0) }

        private static func isBase64(_ byte: UInt8) -> Bool {
            (0x41...0x5A).contains(byte) || (0x61...0x7A).contains(byte) || (0x30...0x39).contains(byte)
                || byte == UInt8(ascii: "+") || byte == UInt8(ascii: "/")
        }
    }

    static let descriptiveKeywords: Set<String> = [
        "description", "example", "examples", "default", "format", "title", "discriminator", "deprecated", "readOnly", "writeOnly",
    ]
    static let knownKeywords: Set<String> = descriptiveKeywords.union([
        "$ref", "type", "enum", "const", "pattern", "minLength", "maxLength", "minimum", "maximum", "minItems", "maxItems", "items",
        "properties", "required", "additionalProperties", "propertyNames", "minProperties", "maxProperties", "oneOf",
    ])

    let types: Set<String>?
    /// `types` as `JSONValue.typeBit`s (`number` admits integers too); nil admits any.
    let typeMask: UInt8?
    let allowed: [JSONValue]?
    let pattern: Pattern?
    let minLength: Int?
    let maxLength: Int?
    let minimum: Double?
    let maximum: Double?
    let minItems: Int?
    let maxItems: Int?
    let items: JSONSchemaCheck?
    let properties: [String: JSONSchemaCheck]
    let required: [String]
    let additional: Additional
    let propertyNames: JSONSchemaCheck?
    let minProperties: Int?
    let maxProperties: Int?
    let oneOf: [JSONSchemaCheck]
    let reference: JSONSchemaCheck?

    /// Compiles `schema` (a parsed YAML mapping), resolving `$ref`s against `components`.
    convenience init(_ schema: Any, components: [String: Any]) throws(SchemaError) {
        var resolving: Set<String> = []
        var cache: [String: JSONSchemaCheck] = [:]
        try self.init(schema, components: components, resolving: &resolving, cache: &cache)
    }

    init(_ schema: Any, components: [String: Any], resolving: inout Set<String>, cache: inout [String: JSONSchemaCheck]) throws(SchemaError) {
        guard let schema = schema as? [String: Any] else { throw SchemaError(description: "a schema is not a mapping") }
        if let unknown = schema.keys.first(where: { !Self.knownKeywords.contains($0) }) {
            throw SchemaError(description: "the schema keyword \(unknown) is not checked by the server")
        }
        func sub(_ value: Any) throws(SchemaError) -> JSONSchemaCheck {
            try JSONSchemaCheck(value, components: components, resolving: &resolving, cache: &cache)
        }
        func int(_ key: String) throws(SchemaError) -> Int? {
            guard let value = schema[key] else { return nil }
            guard let value = value as? Int else { throw SchemaError(description: "\(key) is not an integer") }
            return value
        }
        func number(_ key: String) throws(SchemaError) -> Double? {
            switch schema[key] {
            case nil: return nil
            case let value as Int: return Double(value)
            case let value as Double: return value
            default: throw SchemaError(description: "\(key) is not a number")
            }
        }

        if let ref = schema["$ref"] as? String {
            let prefix = "#/components/schemas/"
            guard ref.hasPrefix(prefix), let target = (components["schemas"] as? [String: Any])?[String(ref.dropFirst(prefix.count))] else {
                throw SchemaError(description: "\(ref) does not resolve")
            }
            if let cached = cache[ref] {
                reference = cached
            } else {
                guard resolving.insert(ref).inserted else { throw SchemaError(description: "\(ref) refers to itself") }
                let compiled = try JSONSchemaCheck(target, components: components, resolving: &resolving, cache: &cache)
                resolving.remove(ref)
                cache[ref] = compiled
                reference = compiled
            }
        } else {
            reference = nil
        }

        switch schema["type"] {
        case nil: types = nil
        case let type as String: types = [type]
        case let list as [String]: types = Set(list)
        default: throw SchemaError(description: "type is neither a name nor a list")
        }
        typeMask = try types.map { (types) throws(SchemaError) -> UInt8 in
            var mask: UInt8 = 0
            for type in types {
                // `number` takes integers too.
                let admitted = JSONValue.everyType.filter { $0.typeName == type || (type == "number" && $0.typeName == "integer") }
                guard !admitted.isEmpty else { throw SchemaError(description: "type \(type) is not a JSON Schema type") }
                for value in admitted { mask |= value.typeBit }
            }
            return mask
        }
        var allowed: [JSONValue]?
        if let list = schema["enum"] {
            guard let list = list as? [Any] else { throw SchemaError(description: "enum is not a list") }
            allowed = list.compactMap(JSONValue.init(spec:))
        }
        if let constant = schema["const"] {
            guard let value = JSONValue(spec: constant) else { throw SchemaError(description: "const is not a JSON value") }
            allowed = [value]
        }
        self.allowed = allowed
        if let source = schema["pattern"] {
            guard let source = source as? String, let regex = try? NSRegularExpression(pattern: source) else {
                throw SchemaError(description: "pattern does not compile")
            }
            pattern = Pattern(source: source, regex: regex)
        } else {
            pattern = nil
        }
        minLength = try int("minLength")
        maxLength = try int("maxLength")
        minimum = try number("minimum")
        maximum = try number("maximum")
        minItems = try int("minItems")
        maxItems = try int("maxItems")
        items = try schema["items"].map { (value) throws(SchemaError) in try sub(value) }
        var properties: [String: JSONSchemaCheck] = [:]
        if let members = schema["properties"] {
            guard let members = members as? [String: Any] else { throw SchemaError(description: "properties is not a mapping") }
            for (name, member) in members { properties[name] = try sub(member) }
        }
        self.properties = properties
        required = (schema["required"] as? [String]) ?? []
        switch schema["additionalProperties"] {
        case nil, true as Bool: additional = .allowed
        case false as Bool: additional = .forbidden
        case let member?: additional = .schema(try sub(member))
        }
        propertyNames = try schema["propertyNames"].map { (value) throws(SchemaError) in try sub(value) }
        minProperties = try int("minProperties")
        maxProperties = try int("maxProperties")
        var variants: [JSONSchemaCheck] = []
        if let list = schema["oneOf"] {
            guard let list = list as? [Any] else { throw SchemaError(description: "oneOf is not a list") }
            for variant in list { variants.append(try sub(variant)) }
        }
        oneOf = variants
    }

    /// Every way `value` breaks the schema, each as `path: rule` (never the value itself).
    public func problems(_ value: JSONValue, at path: String) -> [String] {
        var problems: [String] = []
        check(value, at: path, into: &problems)
        return problems
    }

    /// Where in a request a value is (`device.type`, `certificates[1]`): kept as steps while the
    /// check walks the value, and made into text only for a problem, so a request that holds
    /// builds no text at all.
    struct Location {
        enum Step {
            case member(String)
            case index(Int)
        }

        let root: String
        var steps: [Step] = []

        var text: String {
            var text = root
            for step in steps {
                switch step {
                case .member(let key): text = text.isEmpty ? key : text + "." + key
                case .index(let index): text += "[\(index)]"
                }
            }
            return text
        }

        /// How a problem names the value: its location, or "the body" for the whole of it.
        var name: String {
            let text = text
            return text.isEmpty ? "the body" : text
        }

        mutating func at<T>(_ step: Step, _ body: (inout Location) -> T) -> T {
            steps.append(step)
            defer { steps.removeLast() }
            return body(&self)
        }
    }

    /// The whole body: its problems name their fields from the top.
    func check(_ value: JSONValue, into problems: inout [String]) { check(value, at: "", into: &problems) }

    func check(_ value: JSONValue, at path: String, into problems: inout [String]) {
        var location = Location(root: path)
        check(value, at: &location, into: &problems)
    }

    func check(_ value: JSONValue, at location: inout Location, into problems: inout [String]) {
        if let reference { reference.check(value, at: &location, into: &problems) }
        if let types, let typeMask, value.typeBit & typeMask == 0 {
            problems.append("\(location.name): must be \(types.sorted().map { $0 == "integer" ? "an integer" : $0 == "array" || $0 == "object" ? "an \($0)" : "a \($0)" }.joined(separator: " or "))")
            return
        }
        if let allowed, !allowed.contains(where: { Self.equal($0, value) }) {
            problems.append(allowed.count == 1
                ? "\(location.name): must be \(allowed[0].specText)"
                : "\(location.name): must be one of \(allowed.map(\.specText).joined(separator: ", "))")
            return
        }
        switch value {
        case .string(let text):
            if minLength != nil || maxLength != nil {
                let length = Self.codePoints(text)
                if let minLength, length < minLength { problems.append("\(location.name): \(lengthRule)") }
                else if let maxLength, length > maxLength { problems.append("\(location.name): \(lengthRule)") }
                else if let pattern, !pattern.matches(text) { problems.append("\(location.name): must match \(pattern.source)") }
            } else if let pattern, !pattern.matches(text) {
                problems.append("\(location.name): must match \(pattern.source)")
            }
        case .integer, .number:
            let number: Double = if case .integer(let value) = value { Double(value) } else if case .number(let value) = value { value } else { 0 }
            if let minimum, number < minimum { problems.append("\(location.name): \(rangeRule)") }
            else if let maximum, number > maximum { problems.append("\(location.name): \(rangeRule)") }
        case .array(let elements):
            if let minItems, elements.count < minItems { problems.append("\(location.name): \(countRule)") }
            else if let maxItems, elements.count > maxItems { problems.append("\(location.name): \(countRule)") }
            if let items {
                for (index, element) in elements.enumerated() {
                    location.at(.index(index)) { items.check(element, at: &$0, into: &problems) }
                }
            }
        case .object(let members):
            checkObject(members, at: &location, into: &problems)
        case .null, .bool:
            break
        }
        if !oneOf.isEmpty { checkOneOf(value, at: &location, into: &problems) }
    }

    /// A string's length in code points, as JSON Schema counts it: its UTF-8 bytes that start a
    /// code point (every byte but the `10xxxxxx` continuations), without walking its scalars.
    static func codePoints(_ text: String) -> Int {
        var text = text
        return text.withUTF8 { bytes in
            var count = 0
            for byte in bytes where byte & 0xC0 != 0x80 { count += 1 }
            return count
        }
    }

    private func checkObject(_ members: [String: JSONValue], at location: inout Location, into problems: inout [String]) {
        for key in required where members[key] == nil { problems.append("\(location.at(.member(key)) { $0.text }): required") }
        if let minProperties, members.count < minProperties { problems.append("\(location.name): needs at least \(minProperties) field(s)") }
        if let maxProperties, members.count > maxProperties { problems.append("\(location.name): takes at most \(maxProperties) field(s)") }
        for key in members.keys.sorted() {
            let value = members[key]!
            // Only a problem shows the name, so it is made safe to show only then.
            var shown: Location.Step { .member(InputRules.short(key)) }
            if let propertyNames {
                var nameProblems: [String] = []
                location.at(shown) { propertyNames.check(.string(key), at: &$0, into: &nameProblems) }
                if !nameProblems.isEmpty {
                    problems.append("\(location.at(shown) { $0.text }): not an accepted field name")
                    continue
                }
            }
            if let schema = properties[key] {
                location.at(.member(key)) { schema.check(value, at: &$0, into: &problems) }
                continue
            }
            switch additional {
            case .allowed: break
            case .forbidden: problems.append("\(location.at(shown) { $0.text }): not a field of this request")
            case .schema(let schema): location.at(shown) { schema.check(value, at: &$0, into: &problems) }
            }
        }
    }

    /// Exactly one variant must hold. When none does, the problems reported are those of the
    /// variant the value meant: the one whose enum-valued fields (`mode`, `encoding`, `type`) it
    /// matches, then the one with the fewest problems, then the first.
    ///
    /// A variant whose enum-valued fields the value misses cannot hold (each miss is a problem of
    /// its own), so only the variants with the fewest misses are checked in full: the same verdict
    /// and the same problems, without checking a form the value plainly is not (the Apple Pay
    /// request's other encoding, regexes over its certificates included).
    private func checkOneOf(_ value: JSONValue, at location: inout Location, into problems: inout [String]) {
        let misses = oneOf.map { $0.enumMisses(value) }
        let fewest = misses.min() ?? 0
        let results = zip(oneOf, misses).filter { $0.1 == fewest }.map { variant, misses in
            var found: [String] = []
            variant.check(value, at: &location, into: &found)
            return (misses: misses, problems: found)
        }
        let matching = fewest == 0 ? results.filter(\.problems.isEmpty).count : 0
        if matching == 1 { return }
        if matching > 1 {
            problems.append("\(location.name): matches more than one of its forms")
            return
        }
        let closest = results.min { ($0.misses, $0.problems.count) < ($1.misses, $1.problems.count) }
        var reported = closest?.problems ?? []
        // A field whose value no form's enum takes is told every form's values (`device.type:
        // must be one of phone, tablet, watch` for `WATCH`), not the closest form's alone, which
        // read as if the others' values were refused too.
        for (key, allowed) in enumsMissedByEveryForm(value) {
            let field = location.at(.member(key)) { $0.name }
            reported.removeAll { $0.hasPrefix("\(field): must be ") }
            reported.append(allowed.count == 1 ? "\(field): must be \(allowed[0].specText)"
                                               : "\(field): must be one of \(allowed.map(\.specText).joined(separator: ", "))")
        }
        problems.append(contentsOf: reported)
    }

    /// The object's fields that every form gives an enum and whose value none of them takes, with
    /// the values the forms take together (in the forms' order, each once).
    private func enumsMissedByEveryForm(_ value: JSONValue) -> [(key: String, allowed: [JSONValue])] {
        guard case .object(let members) = value else { return [] }
        var missed: [(key: String, allowed: [JSONValue])] = []
        for key in members.keys.sorted() {
            guard let member = members[key] else { continue }
            var union: [JSONValue] = []
            var everyFormMisses = true
            for form in oneOf {
                let schema = form.reference ?? form
                guard let property = schema.properties[key], let allowed = property.allowed ?? property.reference?.allowed else {
                    everyFormMisses = false
                    break
                }
                if allowed.contains(where: { Self.equal($0, member) }) {
                    everyFormMisses = false
                    break
                }
                for candidate in allowed where !union.contains(where: { Self.equal($0, candidate) }) { union.append(candidate) }
            }
            if everyFormMisses, !union.isEmpty { missed.append((key, union)) }
        }
        return missed
    }

    /// How many of an object's fields hold a value outside their schema's enum.
    private func enumMisses(_ value: JSONValue) -> Int {
        let schema = reference ?? self
        guard case .object(let members) = value else { return 0 }
        return schema.properties.reduce(0) { misses, property in
            let allowed = property.value.allowed ?? property.value.reference?.allowed
            guard let allowed, let member = members[property.key], !allowed.contains(where: { Self.equal($0, member) }) else { return misses }
            return misses + 1
        }
    }

    private var lengthRule: String {
        switch (minLength, maxLength) {
        case let (min?, max?): "must be \(min) to \(max) characters"
        case let (min?, nil): "must be at least \(min) characters"
        case let (nil, max?): "must be at most \(max) characters"
        default: ""
        }
    }

    private var rangeRule: String {
        func text(_ value: Double) -> String { value == value.rounded() ? String(Int64(value)) : String(value) }
        switch (minimum, maximum) {
        case let (min?, max?): return "must be from \(text(min)) to \(text(max))"
        case let (min?, nil): return "must be at least \(text(min))"
        case let (nil, max?): return "must be at most \(text(max))"
        default: return ""
        }
    }

    private var countRule: String {
        switch (minItems, maxItems) {
        case let (min?, max?): "must hold \(min) to \(max) items"
        case let (min?, nil): "must hold at least \(min) items"
        case let (nil, max?): "must hold at most \(max) items"
        default: ""
        }
    }

    /// JSON Schema equality: 1 and 1.0 are the same number.
    static func equal(_ lhs: JSONValue, _ rhs: JSONValue) -> Bool {
        switch (lhs, rhs) {
        case let (.integer(a), .number(b)), let (.number(b), .integer(a)): Double(a) == b
        default: lhs == rhs
        }
    }
}
