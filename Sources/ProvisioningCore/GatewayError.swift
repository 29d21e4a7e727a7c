/// The one error type callers of the gateway see. Its `code` is a stable vocabulary: clients
/// branch on it, so a code is never renamed and each code has one HTTP status.
public struct GatewayError: Error, Sendable, Equatable, CustomStringConvertible {
    public enum Code: String, Sendable, CaseIterable {
        case invalidRequest = "invalid_request"
        case requestTooLarge = "request_too_large"
        /// The request's head came, but its body did not arrive whole within
        /// `server.read_timeout_ms`: nothing of it ran, so sending it again is safe.
        case requestTimeout = "request_timeout"
        /// A body in another media type than the operation's (`application/json`, UTF-8).
        case unsupportedMediaType = "unsupported_media_type"
        case unauthorized
        case forbidden
        case cardNotFound = "card_not_found"
        case walletNotSupported = "wallet_not_supported"
        case invalidCertificateChain = "invalid_certificate_chain"
        case upstreamRejected = "upstream_rejected"
        case upstreamAuthFailed = "upstream_auth_failed"
        case upstreamUnavailable = "upstream_unavailable"
        case upstreamTimeout = "upstream_timeout"
        case deadlineExceeded = "deadline_exceeded"
        case upstreamProtocolError = "upstream_protocol_error"
        case notFound = "not_found"
        case unsupportedEncryptionScheme = "unsupported_encryption_scheme"
        case idempotencyKeyReused = "idempotency_key_reused"
        case idempotencyKeyInProgress = "idempotency_key_in_progress"
        /// The request with this key died unfinished, after it may have reached the issuer: it is
        /// never run again under this key.
        case idempotencyOutcomeUnknown = "idempotency_outcome_unknown"
        case issuerReferenceInUse = "issuer_reference_in_use"
        /// Too many requests from this client, or too many failed authentications from this source.
        case rateLimited = "rate_limited"
        /// The gateway is shutting down: another instance takes the request.
        case shuttingDown = "shutting_down"
        /// A config reload found problems in the file; the running configuration is unchanged.
        case configInvalid = "config_invalid"
        /// The token is not among the card's wallet tokens at its issuer.
        case tokenNotFound = "token_not_found"
        /// The token's state at its issuer, listed just before, does not allow the transition
        /// (it is deactivated, or already in the state asked for); nothing was sent.
        case tokenStateConflict = "token_state_conflict"
        /// The card's issuer has no such operation (wallet token management).
        case operationNotSupported = "operation_not_supported"
        /// The path exists, but not for this method (`Allow` names those it has).
        case methodNotAllowed = "method_not_allowed"
        /// A value is within the API's bounds but longer than the card's issuer accepts; nothing was sent.
        case issuerLimitExceeded = "issuer_limit_exceeded"
        /// The card cannot be registered as asked: its issuer is not configured, does not serve
        /// its program, or names cards with other reference fields.
        case registrationRefused = "registration_refused"
        case `internal`

        public var httpStatus: Int {
            switch self {
            case .invalidRequest: 400
            case .requestTooLarge: 413
            case .requestTimeout: 408
            case .unsupportedMediaType: 415
            case .unauthorized: 401
            case .forbidden: 403
            case .cardNotFound, .notFound, .tokenNotFound: 404
            case .walletNotSupported, .invalidCertificateChain, .upstreamRejected, .idempotencyKeyReused, .unsupportedEncryptionScheme,
                 .configInvalid, .operationNotSupported, .issuerLimitExceeded, .registrationRefused: 422
            case .methodNotAllowed: 405
            case .idempotencyKeyInProgress, .idempotencyOutcomeUnknown, .issuerReferenceInUse, .tokenStateConflict: 409
            case .rateLimited: 429
            case .upstreamAuthFailed, .upstreamProtocolError: 502
            case .upstreamUnavailable, .shuttingDown: 503
            case .upstreamTimeout, .deadlineExceeded: 504
            case .internal: 500
            }
        }

        /// True when sending the same request again later may succeed.
        public var isRetryable: Bool {
            switch self {
            case .upstreamUnavailable, .upstreamTimeout, .deadlineExceeded, .idempotencyKeyInProgress, .rateLimited, .shuttingDown,
                 .requestTimeout: true
            default: false
            }
        }

        public var title: String {
            switch self {
            case .invalidRequest: "The request is not valid"
            case .requestTooLarge: "The request body is too large"
            case .requestTimeout: "The request did not arrive in time"
            case .unsupportedMediaType: "The request body's media type is not supported"
            case .unauthorized: "Missing or unknown API key"
            case .forbidden: "This client may not do this"
            case .cardNotFound: "No such card"
            case .walletNotSupported: "The card's issuer does not support this wallet"
            case .invalidCertificateChain: "The certificate chain is not valid"
            case .upstreamRejected: "The issuer rejected the request"
            case .upstreamAuthFailed: "The issuer rejected the gateway's credentials"
            case .upstreamUnavailable: "The issuer is unavailable"
            case .upstreamTimeout: "The issuer did not answer in time"
            case .deadlineExceeded: "The request's deadline passed"
            case .upstreamProtocolError: "The issuer answered with a malformed response"
            case .notFound: "No such resource"
            case .idempotencyKeyReused: "The Idempotency-Key was used with another request"
            case .unsupportedEncryptionScheme: "The encryption scheme is not supported"
            case .idempotencyKeyInProgress: "A request with this Idempotency-Key is still running"
            case .idempotencyOutcomeUnknown: "The request with this Idempotency-Key ended without an answer"
            case .issuerReferenceInUse: "Another card already uses this issuer reference"
            case .rateLimited: "Too many requests"
            case .shuttingDown: "The gateway is shutting down"
            case .configInvalid: "The configuration file is not valid"
            case .tokenNotFound: "No such wallet token for this card"
            case .tokenStateConflict: "The wallet token's state does not allow this"
            case .operationNotSupported: "The card's issuer does not offer this operation"
            case .issuerLimitExceeded: "The card's issuer accepts less than this"
            case .registrationRefused: "The card cannot be registered as asked"
            case .methodNotAllowed: "This method is not allowed on this path"
            case .internal: "Internal error"
            }
        }
    }

    public let code: Code
    /// Human-readable and safe to show: never holds card data, certificates, nonces or keys.
    public let detail: String
    /// The upstream's HTTP status when the error came from an issuer.
    public let upstreamStatus: Int?
    /// The provisioning it ended, whose audit trail says more.
    public private(set) var provisioningID: ProvisioningID?

    /// What went wrong at the upstream, for the retry decision table; nil when no upstream was
    /// involved. An upstream HTTP status implies `.status(status)`.
    public let condition: UpstreamCondition?
    /// The upstream's `Retry-After`, when it sent one.
    public let retryAfter: Duration?
    /// For `method_not_allowed`: the methods the path has, sent as `Allow`.
    public var allowedMethods: [String]?
    /// For the gateway's own log only, never sent to the caller: what the underlying error said
    /// when this one wraps another (a store failure), one line and short.
    public private(set) var cause: String?
    /// True when the request it ended had already made an attempt at an issuer, which may have
    /// acted on it. An Idempotency-Key whose request ended in an internal error after that is
    /// never run again; one that failed before any attempt is freed for a retry.
    public private(set) var afterIssuerAttempt = false
    /// True when an attempt at an issuer ended without saying whether the issuer acted on it (no
    /// answer in time, the connection lost mid-exchange, an undocumented answer, a 5xx that does
    /// not say "not handled", the call cancelled while out: `UpstreamCondition.leavesOutcomeUnknown`).
    /// An Idempotency-Key whose request ended so is never run again: a retry could provision twice.
    public private(set) var issuerOutcomeUnknown = false
    /// The call that failed only read (`nothingActed()`): it cannot have acted at the issuer.
    public var actedOnNothing: Bool { marks.contains(.actedOnNothing) }
    /// The failure is the gateway's own connection pool's (`waitedForAConnection()`): every
    /// connection to the issuer's host stayed busy with other calls for at least half the try's
    /// time. Its condition is kept for the retry table and an Idempotency-Key, but it says nothing
    /// of the endpoint's health, so no circuit breaker counts it: one tenant's burst at an issuer
    /// account shared with another had opened the account's breaker for both (the tenant audit).
    public var ownPoolSaturated: Bool { marks.contains(.ownPoolSaturated) }
    /// The request this error ended had a store write that did not answer in time
    /// (`storeDidNotAnswer()`): what is left to write for it (an Idempotency-Key's abandon) is
    /// made in the background, so the request pays the store's wait once.
    public var storeUnanswered: Bool { marks.contains(.storeUnanswered) }

    /// `actedOnNothing`, `ownPoolSaturated` and `storeUnanswered`, in one byte, so the error keeps the size it had
    /// with one flag. With a fourth stored `Bool`, the incrementally built test product crashed
    /// reproducibly with memory corrupted in unrelated code (BoringSSL loading CA files,
    /// JSONEncoder in the store); whether a module left compiled against the old layout or a
    /// miscompile of the typed throws was the cause was not established. More flags go here.
    private struct Marks: OptionSet, Sendable, Equatable {
        let rawValue: UInt8
        static let actedOnNothing = Marks(rawValue: 1)
        static let ownPoolSaturated = Marks(rawValue: 2)
        static let storeUnanswered = Marks(rawValue: 4)
    }
    private var marks: Marks = []

    /// `cause`: the error this one wraps; its description is kept for the log (see `cause`).
    public init(
        _ code: Code, _ detail: String, upstreamStatus: Int? = nil, condition: UpstreamCondition? = nil, retryAfter: Duration? = nil,
        cause: (any Error)? = nil
    ) {
        self.code = code
        self.detail = detail
        self.upstreamStatus = upstreamStatus
        self.condition = condition ?? upstreamStatus.map { .status($0) }
        self.retryAfter = retryAfter
        self.cause = cause.map(Self.describe)
    }

    /// The same failure under the code an issuer's retry table gives it.
    public func recoded(_ newCode: Code) -> GatewayError {
        guard newCode != code else { return self }
        var copy = GatewayError(newCode, detail, upstreamStatus: upstreamStatus, condition: condition, retryAfter: retryAfter)
        copy.provisioningID = provisioningID
        copy.cause = cause
        copy.afterIssuerAttempt = afterIssuerAttempt
        copy.issuerOutcomeUnknown = issuerOutcomeUnknown
        copy.marks = marks
        return copy
    }

    /// The same failure, noted as the gateway's own pool's (see `ownPoolSaturated`).
    public func waitedForAConnection() -> GatewayError {
        var copy = self
        copy.marks.insert(.ownPoolSaturated)
        return copy
    }

    /// The same failure, noted as ending a request whose store did not answer in time.
    public func storeDidNotAnswer(_ unanswered: Bool = true) -> GatewayError {
        guard unanswered else { return self }
        var copy = self
        copy.marks.insert(.storeUnanswered)
        return copy
    }

    /// Whether a circuit breaker counts this failure against the endpoint it was sent to.
    public var countsAgainstEndpoint: Bool {
        condition?.countsAgainstEndpoint == true && !ownPoolSaturated
    }

    /// The same failure, from a call that only read (a token list before a transition): whatever
    /// happened to it, the issuer did nothing, so it leaves no outcome unknown (an Idempotency-Key
    /// is released, `retryable` keeps its code's answer). Its condition, code and status are
    /// kept, so the retry table, the breakers and the caller see the failure as it was.
    public func nothingActed() -> GatewayError {
        var copy = self
        copy.marks.insert(.actedOnNothing)
        return copy
    }

    /// An underlying error as one short log-safe line: its type and description, control
    /// characters replaced, at most `maxCauseLength` characters. A wrapped `GatewayError` gives its
    /// own code, detail and cause.
    public static func describe(_ error: any Error) -> String {
        let text: String
        if let error = error as? GatewayError {
            text = error.description + (error.cause.map { " (\($0))" } ?? "")
        } else {
            text = "\(type(of: error)): \(String(describing: error))"
        }
        let line = String(text.unicodeScalars.map { $0.properties.generalCategory == .control ? " " : Character($0) })
        return line.count > maxCauseLength ? String(line.prefix(maxCauseLength - 1)) + "…" : line
    }

    public static let maxCauseLength = 300

    /// A card the client may not use, answered exactly as one that does not exist: the same
    /// words for both, so a tenant learns nothing of another's cards.
    public static func cardNotAmongClients(_ id: CardID) -> GatewayError {
        GatewayError(.cardNotFound, "no card \(id) among this client's programs")
    }

    public func with(provisioningID: ProvisioningID) -> GatewayError {
        var copy = self
        copy.provisioningID = provisioningID
        return copy
    }

    /// The same error, noted as ending a request that had made an attempt at an issuer.
    public func afterAttempt(_ attempted: Bool = true) -> GatewayError {
        var copy = self
        copy.afterIssuerAttempt = attempted
        return copy
    }

    /// The same error, noted as ending a request whose issuer may have acted without the gateway
    /// knowing (see `issuerOutcomeUnknown`); never unset once set.
    public func outcomeUnknown(_ unknown: Bool = true) -> GatewayError {
        var copy = self
        copy.issuerOutcomeUnknown = issuerOutcomeUnknown || unknown
        return copy
    }

    public var httpStatus: Int { code.httpStatus }
    public var isRetryable: Bool { code.isRetryable }
    /// What the caller is told (`retryable`): whether the same request may succeed if sent again.
    /// Never when the issuer may have acted without the gateway knowing, whatever the code: sent
    /// again, it could act twice (under an Idempotency-Key it would not run again at all).
    public var isRetryableByTheCaller: Bool { code.isRetryable && !issuerOutcomeUnknown }
    public var description: String { "\(code.rawValue): \(detail)" }
}
