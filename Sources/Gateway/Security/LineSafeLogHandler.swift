import Logging

/// Wraps a log handler so that no value can start a log line of its own: line breaks and other
/// control characters in the message and in metadata (keys and values, nested too) are written
/// as `\n`, `\r`, `\t` or `\u{..}`. Whatever a caller puts in an id, header or path, one event
/// stays one line, so nobody can forge entries in the gateway's log.
public struct LineSafeLogHandler<Wrapped: LogHandler>: LogHandler {
    public var wrapped: Wrapped

    public init(_ wrapped: Wrapped) { self.wrapped = wrapped }

    public var logLevel: Logger.Level {
        get { wrapped.logLevel }
        set { wrapped.logLevel = newValue }
    }

    public var metadata: Logger.Metadata {
        get { wrapped.metadata }
        set { wrapped.metadata = Self.escape(newValue) }
    }

    public subscript(metadataKey key: String) -> Logger.Metadata.Value? {
        get { wrapped[metadataKey: key] }
        set { wrapped[metadataKey: Self.escape(key)] = newValue.map(Self.escape) }
    }

    public func log(event: LogEvent) {
        var event = event
        event.message = Logger.Message(stringLiteral: Self.escape(event.message.description))
        event.metadata = event.metadata.map(Self.escape)
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
