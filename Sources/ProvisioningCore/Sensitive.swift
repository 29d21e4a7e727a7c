/// Wraps a value that must never reach a log line, an error message or a debugger dump:
/// card numbers, certificates, nonces, payloads, keys. Reading it takes an explicit `.value`.
public struct Sensitive<Value: Sendable>: Sendable, CustomStringConvertible, CustomDebugStringConvertible,
    CustomReflectable
{
    public let value: Value
    public init(_ value: Value) { self.value = value }
    public var description: String { "<redacted>" }
    public var debugDescription: String { "<redacted>" }
    public var customMirror: Mirror { Mirror(self, children: [:]) }
}

extension Sensitive: Equatable where Value: Equatable {}
extension Sensitive: Hashable where Value: Hashable {}
