import Logging

/// Wraps a log handler so that no value can start a log line of its own: line breaks and other
/// control characters in the message and in metadata (keys and values, nested too) are written
/// as `\n`, `\r`, `\t` or `\u{..}`. Whatever a caller puts in an id, header or path, one event
/// stays one line, so nobody can forge entries in the gateway's log.
public struct LineSafeLogHandler<Wrapped: LogHandler>: LogHandler {
    public var wrapped: Wrapped
    /// The logger's metadata as it was set: escaped, and merged with the wrapped handler's, only
    /// when an event is written. Setting metadata (every request sets its request id, trace ids,
    /// provisioning id) stays a dictionary write, even when the level drops every event.
    private var pending: Logger.Metadata = [:]

    public init(_ wrapped: Wrapped) { self.wrapped = wrapped }

    public var logLevel: Logger.Level {
        get { wrapped.logLevel }
        set { wrapped.logLevel = newValue }
    }

    public var metadataProvider: Logger.MetadataProvider? {
        get { wrapped.metadataProvider }
        set { wrapped.metadataProvider = newValue }
    }

    public var metadata: Logger.Metadata {
        get { wrapped.metadata.merging(pending) { $1 } }
        set {
            pending = newValue
            wrapped.metadata = [:]
        }
    }

    public subscript(metadataKey key: String) -> Logger.Metadata.Value? {
        get { pending[key] ?? wrapped[metadataKey: key] }
        set { pending[key] = newValue }
    }

    public func log(event: LogEvent) {
        var event = event
        event.message = Logger.Message(stringLiteral: Self.escape(event.message.description))
        // The event's own metadata wins over the logger's, as a handler's merge does.
        let merged = event.metadata.map { pending.merging($0) { $1 } } ?? pending
        event.metadata = merged.isEmpty ? event.metadata.map(Self.escape) : Self.escape(merged)
        wrapped.log(event: event)
    }

    public static func escape(_ text: String) -> String {
        guard text.unicodeScalars.contains(where: needsEscape) else { return text }
        var escaped = ""
        for scalar in text.unicodeScalars {
            switch scalar {
            case "\n": escaped += "\\n"
            case "\r": escaped += "\\r"
            case "\t": escaped += "\\t"
            case _ where needsEscape(scalar): escaped += "\\u{\(String(scalar.value, radix: 16))}"
            default: escaped.unicodeScalars.append(scalar)
            }
        }
        return escaped
    }

    static func needsEscape(_ scalar: Unicode.Scalar) -> Bool {
        scalar.value < 0x20 || scalar.value == 0x7F || (0x80...0x9F).contains(scalar.value)
            || scalar.value == 0x2028 || scalar.value == 0x2029 || scalar.value == 0x85
    }

    static func escape(_ metadata: Logger.Metadata) -> Logger.Metadata {
        Dictionary(metadata.map { (escape($0.key), escape($0.value)) }, uniquingKeysWith: { $1 })
    }

    static func escape(_ value: Logger.Metadata.Value) -> Logger.Metadata.Value {
        switch value {
        case .string(let text): .string(escape(text))
        case .stringConvertible(let convertible): .string(escape(convertible.description))
        case .array(let values): .array(values.map(escape))
        case .dictionary(let values): .dictionary(escape(values))
        }
    }
}
