import Foundation

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

    static let bridge = from("BRIDGE", reference: ["CUSTOMER_ID", "CARD_ACCOUNT_ID"])
    static let tmp = from("TMP", reference: ["CARD_ID"])
    static let crossmint = from("CROSSMINT", reference: ["CARD_ID"])
}
