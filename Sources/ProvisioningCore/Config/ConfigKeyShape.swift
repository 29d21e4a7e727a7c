/// The keys a decoded config encodes back to, at every depth: what each mapping in the file may
/// hold, read from the types' own Codable conformances instead of a second list of keys. Unlike a
/// real encoder it keeps the keys of optionals that are nil (`server.tls` left out), so the keys
/// a mapping accepts are all there to name.
public indirect enum ConfigKeyShape: Sendable, Equatable {
    /// Keys in declaration order; free-form maps (credentials, issuer names) hold the file's own.
    case mapping(keys: [String], values: [String: ConfigKeyShape])
    case list([ConfigKeyShape])
    case scalar
    /// A scalar the types read as a number (an integer or a fraction), absent or not.
    case number

    public init(of value: some Encodable) throws {
        let node = Node()
        try value.encode(to: ShapeEncoder(node: node, codingPath: []))
        self = node.shape
    }
}

private final class Node {
    enum Kind { case scalar, mapping, list }
    var kind = Kind.scalar
    /// A scalar encoded as a number.
    var isNumber = false
    var keys: [String] = []
    var values: [String: Node] = [:]
    var items: [Node] = []

    var shape: ConfigKeyShape {
        switch kind {
        case .scalar: isNumber ? .number : .scalar
        case .mapping: .mapping(keys: keys, values: values.mapValues(\.shape))
        case .list: .list(items.map(\.shape))
        }
    }

    func child(_ key: String) -> Node {
        kind = .mapping
        if let node = values[key] { return node }
        let node = Node()
        keys.append(key)
        values[key] = node
        return node
    }

    func item() -> Node {
        kind = .list
        let node = Node()
        items.append(node)
        return node
    }
}

private struct ShapeEncoder: Encoder {
    let node: Node
    let codingPath: [any CodingKey]
    var userInfo: [CodingUserInfoKey: Any] { [:] }

    func container<Key: CodingKey>(keyedBy type: Key.Type) -> KeyedEncodingContainer<Key> {
        node.kind = .mapping
        return KeyedEncodingContainer(Keyed(node: node, codingPath: codingPath))
    }

    func unkeyedContainer() -> any UnkeyedEncodingContainer {
        node.kind = .list
        return Unkeyed(node: node, codingPath: codingPath)
    }

    func singleValueContainer() -> any SingleValueEncodingContainer { Single(node: node, codingPath: codingPath) }
}

/// Every key is recorded, present or nil; values that are containers are walked.
private struct Keyed<Key: CodingKey>: KeyedEncodingContainerProtocol {
    let node: Node
    let codingPath: [any CodingKey]

    private func record(_ key: Key) { _ = node.child(key.stringValue) }
    private func number(_ key: Key) { node.child(key.stringValue).isNumber = true }
    private func record(_ value: (some Encodable)?, _ key: Key) throws {
        let child = node.child(key.stringValue)
        try value?.encode(to: ShapeEncoder(node: child, codingPath: codingPath + [key]))
    }

    mutating func encodeNil(forKey key: Key) throws { record(key) }
    mutating func encode(_ value: Bool, forKey key: Key) throws { record(key) }
    mutating func encode(_ value: String, forKey key: Key) throws { record(key) }
    mutating func encode(_ value: Double, forKey key: Key) throws { number(key) }
    mutating func encode(_ value: Float, forKey key: Key) throws { number(key) }
    mutating func encode(_ value: Int, forKey key: Key) throws { number(key) }
    mutating func encode(_ value: Int8, forKey key: Key) throws { number(key) }
    mutating func encode(_ value: Int16, forKey key: Key) throws { number(key) }
    mutating func encode(_ value: Int32, forKey key: Key) throws { number(key) }
    mutating func encode(_ value: Int64, forKey key: Key) throws { number(key) }
    mutating func encode(_ value: UInt, forKey key: Key) throws { number(key) }
    mutating func encode(_ value: UInt8, forKey key: Key) throws { number(key) }
    mutating func encode(_ value: UInt16, forKey key: Key) throws { number(key) }
    mutating func encode(_ value: UInt32, forKey key: Key) throws { number(key) }
    mutating func encode(_ value: UInt64, forKey key: Key) throws { number(key) }
    mutating func encode<T: Encodable>(_ value: T, forKey key: Key) throws { try record(value, key) }

    // The standard library's versions skip nil; an absent optional is still a key the type accepts.
    mutating func encodeIfPresent(_ value: Bool?, forKey key: Key) throws { record(key) }
    mutating func encodeIfPresent(_ value: String?, forKey key: Key) throws { record(key) }
    mutating func encodeIfPresent(_ value: Double?, forKey key: Key) throws { number(key) }
    mutating func encodeIfPresent(_ value: Float?, forKey key: Key) throws { number(key) }
    mutating func encodeIfPresent(_ value: Int?, forKey key: Key) throws { number(key) }
    mutating func encodeIfPresent(_ value: Int8?, forKey key: Key) throws { number(key) }
    mutating func encodeIfPresent(_ value: Int16?, forKey key: Key) throws { number(key) }
    mutating func encodeIfPresent(_ value: Int32?, forKey key: Key) throws { number(key) }
    mutating func encodeIfPresent(_ value: Int64?, forKey key: Key) throws { number(key) }
    mutating func encodeIfPresent(_ value: UInt?, forKey key: Key) throws { number(key) }
    mutating func encodeIfPresent(_ value: UInt8?, forKey key: Key) throws { number(key) }
    mutating func encodeIfPresent(_ value: UInt16?, forKey key: Key) throws { number(key) }
    mutating func encodeIfPresent(_ value: UInt32?, forKey key: Key) throws { number(key) }
    mutating func encodeIfPresent(_ value: UInt64?, forKey key: Key) throws { number(key) }
    mutating func encodeIfPresent<T: Encodable>(_ value: T?, forKey key: Key) throws { try record(value, key) }

    mutating func nestedContainer<NestedKey: CodingKey>(keyedBy keyType: NestedKey.Type, forKey key: Key)
        -> KeyedEncodingContainer<NestedKey>
    {
        ShapeEncoder(node: node.child(key.stringValue), codingPath: codingPath + [key]).container(keyedBy: keyType)
    }

    mutating func nestedUnkeyedContainer(forKey key: Key) -> any UnkeyedEncodingContainer {
        ShapeEncoder(node: node.child(key.stringValue), codingPath: codingPath + [key]).unkeyedContainer()
    }

    mutating func superEncoder() -> any Encoder { ShapeEncoder(node: node, codingPath: codingPath) }
    mutating func superEncoder(forKey key: Key) -> any Encoder {
        ShapeEncoder(node: node.child(key.stringValue), codingPath: codingPath + [key])
    }
}

private struct Unkeyed: UnkeyedEncodingContainer {
    let node: Node
    let codingPath: [any CodingKey]
    var count: Int { node.items.count }

    private func encoder() -> ShapeEncoder { ShapeEncoder(node: node.item(), codingPath: codingPath) }

    mutating func encodeNil() throws { _ = node.item() }
    mutating func encode(_ value: Bool) throws { _ = node.item() }
    mutating func encode(_ value: String) throws { _ = node.item() }
    mutating func encode(_ value: Double) throws { node.item().isNumber = true }
    mutating func encode(_ value: Float) throws { node.item().isNumber = true }
    mutating func encode(_ value: Int) throws { node.item().isNumber = true }
    mutating func encode(_ value: Int8) throws { node.item().isNumber = true }
    mutating func encode(_ value: Int16) throws { node.item().isNumber = true }
    mutating func encode(_ value: Int32) throws { node.item().isNumber = true }
    mutating func encode(_ value: Int64) throws { node.item().isNumber = true }
    mutating func encode(_ value: UInt) throws { node.item().isNumber = true }
    mutating func encode(_ value: UInt8) throws { node.item().isNumber = true }
    mutating func encode(_ value: UInt16) throws { node.item().isNumber = true }
    mutating func encode(_ value: UInt32) throws { node.item().isNumber = true }
    mutating func encode(_ value: UInt64) throws { node.item().isNumber = true }
    mutating func encode<T: Encodable>(_ value: T) throws { try value.encode(to: encoder()) }

    mutating func nestedContainer<NestedKey: CodingKey>(keyedBy keyType: NestedKey.Type) -> KeyedEncodingContainer<NestedKey> {
        encoder().container(keyedBy: keyType)
    }

    mutating func nestedUnkeyedContainer() -> any UnkeyedEncodingContainer { encoder().unkeyedContainer() }
    mutating func superEncoder() -> any Encoder { encoder() }
}

/// A single value is whatever it encodes itself as (a wrapper passes its wrapped value through).
private struct Single: SingleValueEncodingContainer {
    let node: Node
    let codingPath: [any CodingKey]

    mutating func encodeNil() throws {}
    mutating func encode(_ value: Bool) throws {}
    mutating func encode(_ value: String) throws {}
    mutating func encode(_ value: Double) throws { node.isNumber = true }
    mutating func encode(_ value: Float) throws { node.isNumber = true }
    mutating func encode(_ value: Int) throws { node.isNumber = true }
    mutating func encode(_ value: Int8) throws { node.isNumber = true }
    mutating func encode(_ value: Int16) throws { node.isNumber = true }
    mutating func encode(_ value: Int32) throws { node.isNumber = true }
    mutating func encode(_ value: Int64) throws { node.isNumber = true }
    mutating func encode(_ value: UInt) throws { node.isNumber = true }
    mutating func encode(_ value: UInt8) throws { node.isNumber = true }
    mutating func encode(_ value: UInt16) throws { node.isNumber = true }
    mutating func encode(_ value: UInt32) throws { node.isNumber = true }
    mutating func encode(_ value: UInt64) throws { node.isNumber = true }
    mutating func encode<T: Encodable>(_ value: T) throws { try value.encode(to: ShapeEncoder(node: node, codingPath: codingPath)) }
}
