import Foundation
import Logging

/// Writes each event as one JSON object on one line, for log pipelines (`--log-format json`):
/// `timestamp` (UTC, ISO 8601 with milliseconds), `level`, `label`, `message`, `source`, the
/// event's `error` if any, and every metadata entry as a key of its own (`request_id`,
/// `provisioning_id`, `trace_id`, `span_id`, ...). A metadata key that would replace one of those is written as
/// `metadata.<key>`. Counts, durations and statuses (`latency_ms`, `status`, `attempts`, ...:
/// `numberKeys`) are JSON numbers.
///
/// `JSONSerialization` does the escaping, so a line break or quote in a message or an id cannot
/// end the line or the object. The characters some readers also treat as line ends (DEL, C1
/// controls, U+2028, U+2029) are escaped as `\uXXXX` too; a JSON reader gets them back unchanged.
/// What is logged is what the text format logs: sensitive values are redacted by their types.
public struct JSONLogHandler: LogHandler {
    public var logLevel: Logger.Level = .info
    public var metadata: Logger.Metadata = [:]
    public var metadataProvider: Logger.MetadataProvider?
    let label: String
    let write: @Sendable (String) -> Void

    static let reservedKeys: Set<String> = ["timestamp", "level", "label", "message", "source", "error"]

    /// `write` receives each line, newline included.
    public init(label: String, metadataProvider: Logger.MetadataProvider? = nil, write: @escaping @Sendable (String) -> Void) {
        self.label = label
        self.metadataProvider = metadataProvider
        self.write = write
    }

    /// Lines on standard error, one `write` each, so lines from concurrent tasks do not interleave.
    public static func standardError(label: String, metadataProvider: Logger.MetadataProvider? = nil) -> JSONLogHandler {
        JSONLogHandler(label: label, metadataProvider: metadataProvider) { line in
            FileHandle.standardError.write(Data(line.utf8))
        }
    }

    public subscript(metadataKey key: String) -> Logger.Metadata.Value? {
        get { metadata[key] }
        set { metadata[key] = newValue }
    }

    public func log(event: LogEvent) {
        var merged = metadata
        if let provided = metadataProvider?.get() { merged.merge(provided) { $1 } }
        if let given = event.metadata { merged.merge(given) { $1 } }
        write(Self.line(timestamp: Date(), level: event.level, label: label, message: event.message.description,
                        source: event.source, error: event.error.map { "\($0)" }, metadata: merged))
    }

    static func line(
        timestamp: Date, level: Logger.Level, label: String, message: String, source: String, error: String?, metadata: Logger.Metadata
    ) -> String {
        var object: [String: Any] = [:]
        for (key, value) in metadata {
            object[reservedKeys.contains(key) ? "metadata.\(key)" : key] = numberKey(key) ? number(value) : json(value)
        }
        object["timestamp"] = timestamp.formatted(Date.ISO8601FormatStyle(includingFractionalSeconds: true))
        object["level"] = level.rawValue
        object["label"] = label
        object["message"] = message
        object["source"] = source
        if let error { object["error"] = error }
        guard let data = try? JSONSerialization.data(withJSONObject: object, options: [.sortedKeys, .withoutEscapingSlashes]),
              let text = String(data: data, encoding: .utf8)
        else {
            // Only strings, arrays and objects go in, so this does not happen; never drop the event silently.
            return #"{"level":"error","message":"a log event could not be encoded as JSON"}"# + "\n"
        }
        return escapeLineBreakers(text) + "\n"
    }

    /// Keys whose values are counts, durations and statuses: written as JSON numbers, so a log
    /// pipeline can sum and compare them (`latency_ms > 1000`). Chosen by name, never by the
    /// value's look, so a key has one type in every line (a request id of digits stays a string,
    /// and a pipeline's field mapping never meets a number where it learnt a string).
    static let numberKeys: Set<String> = ["status", "upstream_status", "attempt", "attempts", "count", "events", "generation", "max_connections"]

    static func numberKey(_ key: String) -> Bool {
        numberKeys.contains(key) || key.hasSuffix("_ms") || key.hasSuffix("_count") || key.hasSuffix("_bytes")
    }

    /// A whole number as a JSON number; anything else (which these keys do not carry) as the text.
    static func number(_ value: Logger.Metadata.Value) -> Any {
        let text: String
        switch value {
        case .string(let string): text = string
        case .stringConvertible(let convertible): text = convertible.description
        case .array, .dictionary: return json(value)
        }
        guard text.utf8.count <= 18, let number = Int(text) else { return text }
        return number
    }

    static func json(_ value: Logger.Metadata.Value) -> Any {
        switch value {
        case .string(let text): return text
        case .stringConvertible(let convertible): return convertible.description
        case .array(let values): return values.map(json)
        case .dictionary(let values): return values.mapValues(json)
        }
    }

    /// Outside strings JSON text holds none of these, so the escape is always inside a string.
    static func escapeLineBreakers(_ text: String) -> String {
        guard text.unicodeScalars.contains(where: isLineBreaker) else { return text }
        var escaped = ""
        for scalar in text.unicodeScalars {
            if isLineBreaker(scalar) {
                let hex = String(scalar.value, radix: 16)
                escaped += "\\u" + String(repeating: "0", count: 4 - hex.count) + hex
            } else {
                escaped.unicodeScalars.append(scalar)
            }
        }
        return escaped
    }

    static func isLineBreaker(_ scalar: Unicode.Scalar) -> Bool {
        scalar.value == 0x7F || (0x80...0x9F).contains(scalar.value) || scalar.value == 0x2028 || scalar.value == 0x2029
    }
}
