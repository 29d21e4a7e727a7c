/// What a config key means when the file leaves it out.
public protocol ConfigDefault {
    associatedtype Value: Codable & Sendable
    static var value: Value { get }
}

/// A key the file may leave out. Synthesized Codable decodes it through the overload below, so a
/// type states each default once, beside its property, and its keys stay the synthesized ones
/// (which the unknown-key check reads back by encoding the decoded config).
@propertyWrapper
public struct Default<Provider: ConfigDefault>: Codable, Sendable {
    public var wrappedValue: Provider.Value

    public init(wrappedValue: Provider.Value) { self.wrappedValue = wrappedValue }
    public init() { wrappedValue = Provider.value }

    public init(from decoder: any Decoder) throws {
        wrappedValue = try decoder.singleValueContainer().decode(Provider.Value.self)
    }

    public func encode(to encoder: any Encoder) throws {
        var container = encoder.singleValueContainer()
        try container.encode(wrappedValue)
    }
}

extension KeyedDecodingContainer {
    /// An absent (or null) key takes its default.
    public func decode<Provider>(_ type: Default<Provider>.Type, forKey key: Key) throws -> Default<Provider> {
        try decodeIfPresent(type, forKey: key) ?? Default()
    }
}

/// A section whose keys all have defaults: `init()` is what the file means when it leaves it out.
public protocol ConfigSection: Codable, Sendable {
    init()
}

/// Defaults shared by many keys; a type's own values sit in its nested `Defaults`.
public enum ConfigDefaults {
    public enum False: ConfigDefault {
        public static var value: Bool { false }
    }

    public enum Empty<Value: Codable & Sendable & ExpressibleByArrayLiteral>: ConfigDefault {
        public static var value: Value { [] }
    }

    public enum EmptyMap<Value: Codable & Sendable & ExpressibleByDictionaryLiteral>: ConfigDefault {
        public static var value: Value { [:] }
    }

    public enum Section<Value: ConfigSection>: ConfigDefault {
        public static var value: Value { Value() }
    }
}

public typealias DefaultFalse = Default<ConfigDefaults.False>
public typealias DefaultEmpty<Value: Codable & Sendable & ExpressibleByArrayLiteral> = Default<ConfigDefaults.Empty<Value>>
public typealias DefaultEmptyMap<Value: Codable & Sendable & ExpressibleByDictionaryLiteral> = Default<ConfigDefaults.EmptyMap<Value>>
public typealias DefaultSection<Value: ConfigSection> = Default<ConfigDefaults.Section<Value>>

extension Default: Equatable where Provider.Value: Equatable {}
extension Default: Hashable where Provider.Value: Hashable {}
