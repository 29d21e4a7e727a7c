import Foundation
import ProvisioningCore
import Testing

/// Credentials for the live variants of the contract tests, read from the environment only.
struct LiveUpstream: Sendable {
    let baseURL: URL
    let key: String
    let reference: [String]

    static func from(_ prefix: String, reference names: [String]) -> LiveUpstream? {
        let env = ProcessInfo.processInfo.environment
        guard let base = env["\(prefix)_BASE_URL"].flatMap(URL.init(string:)), let key = env["\(prefix)_API_KEY"] else { return nil }
        let reference = names.compactMap { env["\(prefix)_\($0)"] }
        guard reference.count == names.count else { return nil }
        return LiveUpstream(baseURL: base, key: key, reference: reference)
    }

    /// The Apple Pay request a live test sends: `<PREFIX>_DEVICE_REQUEST` (a JSON file in the
    /// gateway's request shape, from a real device the issuer accepts), else the sandbox device's.
    static func deviceRequest(_ prefix: String) throws -> ApplePayProvisioningRequest {
        guard let path = ProcessInfo.processInfo.environment["\(prefix)_DEVICE_REQUEST"] else { return try Fixtures.deviceRequest() }
        return try Fixtures.deviceRequest(from: URL(fileURLWithPath: path))
    }

    static let bridge = from("BRIDGE", reference: ["CUSTOMER_ID", "CARD_ACCOUNT_ID"])
    static let tmp = from("TMP", reference: ["CARD_ID"])
    static let crossmint = from("CROSSMINT", reference: ["CARD_ID"])
}

/// What a live contract test must see to pass: proof that the upstream answered as its documents
/// say. A payload the connector read, or (only where the issuer documents error answers) one of
/// its documented 4xx statuses whose body had the documented keys (the connector read a code from
/// it, so the detail carries `HTTP <status> (<code>)`). Connection refused, a timeout, a 5xx, an
/// undocumented status or body, or refused credentials all fail. It prints which it saw.
enum LiveVerdict {
    static func expectDocumentedAnswer(
        _ error: GatewayError?, issuer: String, documentedRejections: Set<Int>, sourceLocation: SourceLocation = #_sourceLocation
    ) {
        guard let error else {
            print("live \(issuer): answered 200 with a payload in the documented shape")
            return
        }
        guard !documentedRejections.isEmpty else {
            Issue.record("live \(issuer): \(error.code.rawValue), HTTP \(error.upstreamStatus.map(String.init) ?? "none"): \(issuer) documents no error answer, so only a payload proves its contract (\(error.detail))",
                         sourceLocation: sourceLocation)
            return
        }
        let status = error.upstreamStatus ?? 0
        let readCode = error.detail.range(of: #"HTTP [0-9]{3} \(.+\)"#, options: .regularExpression) != nil
        #expect(error.code == .upstreamRejected && documentedRejections.contains(status),
                "live \(issuer): \(error.code.rawValue), HTTP \(status), not a documented rejection \(documentedRejections.sorted()): \(error.detail)",
                sourceLocation: sourceLocation)
        #expect(readCode, "live \(issuer): HTTP \(status) without the documented error body: \(error.detail)", sourceLocation: sourceLocation)
        if error.code == .upstreamRejected, documentedRejections.contains(status), readCode {
            print("live \(issuer): answered a documented rejection: \(error.detail)")
        }
    }
}
