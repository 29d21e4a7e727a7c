import ProvisioningCore
import Testing

struct RetryPolicyTests {
    let policy = RetryPolicy(maxAttempts: 5, baseBackoff: .milliseconds(100), maxBackoff: .seconds(1), minAttemptTime: .milliseconds(50))

    @Test func fullJitterStaysUnderAnExponentialCeilingCappedAtTheMaximum() {
        // The ceiling doubles per attempt from the base and stops at the cap.
        let ceilings = (1...6).map { policy.backoff(afterAttempt: $0, unit: { 1 }) }
        #expect(ceilings == [.milliseconds(100), .milliseconds(200), .milliseconds(400), .milliseconds(800), .seconds(1), .seconds(1)])
        // The draw scales the ceiling: full jitter goes all the way down to zero.
        #expect(policy.backoff(afterAttempt: 3, unit: { 0 }) == .zero)
        #expect(policy.backoff(afterAttempt: 3, unit: { 0.5 }) == .milliseconds(200))
        // Real draws never leave the range.
        for attempt in 1...8 {
            let ceiling = min(Duration.seconds(1), .milliseconds(100) * (1 << (attempt - 1)))
            for _ in 0..<50 {
                let wait = policy.backoff(afterAttempt: attempt, unit: { Double.random(in: 0...1) })
                #expect(wait >= .zero && wait <= ceiling)
            }
        }
    }

    @Test(arguments: [
        // condition, resend-safe action, not-safe action, code
        (UpstreamCondition.connectFailed, RetryAction.failover, RetryAction.failover, GatewayError.Code.upstreamUnavailable),
        (.status(429), .retry, .retry, .upstreamUnavailable),
        // A proxy in front of the issuer answers 503 after the request reached it (Envoy's reset
        // before headers): sent again only where resending is safe (the upstream audit).
        (.status(503), .retry, .fail, .upstreamUnavailable),
        (.status(500), .retry, .fail, .upstreamUnavailable),
        (.status(502), .retry, .fail, .upstreamUnavailable),
        (.status(504), .retry, .fail, .upstreamTimeout),
        (.timedOut, .retry, .fail, .upstreamTimeout),
        (.connectionReset, .retry, .fail, .upstreamUnavailable),
        (.malformed, .retry, .fail, .upstreamProtocolError),
        (.status(400), .fail, .fail, .upstreamRejected),
        (.status(404), .fail, .fail, .upstreamRejected),
        (.status(408), .fail, .fail, .upstreamTimeout),
        (.status(401), .fail, .fail, .upstreamAuthFailed),
        (.status(403), .fail, .fail, .upstreamAuthFailed),
    ])
    func theDefaultTableSendsAgainOnlyWhatCannotProvisionTwice(
        condition: UpstreamCondition, safe: RetryAction, unsafe: RetryAction, code: GatewayError.Code
    ) {
        let safeRule = RetryDecisionTable.defaults(resendSafe: true).decide(condition)
        let unsafeRule = RetryDecisionTable.defaults(resendSafe: false).decide(condition)
        #expect(safeRule?.action == safe)
        #expect(unsafeRule?.action == unsafe)
        #expect(safeRule?.code == code && unsafeRule?.code == code)
    }

    @Test func configRowsGoFirstAndTheRowsParse() throws {
        let rows = [RetryRule(try #require(RetryRule.Match(parsing: "500")), .upstreamUnavailable, .failover)]
        let table = RetryDecisionTable.defaults(resendSafe: true).overridden(by: rows)
        #expect(table.decide(.status(500))?.action == .failover)
        #expect(table.decide(.status(502))?.action == .retry)  // still the default
        #expect(RetryRule.Match(parsing: "5xx") == .statusClass(5))
        #expect(RetryRule.Match(parsing: "timeout") == .condition(.timedOut))
        #expect(RetryRule.Match(parsing: "700") == nil)
        #expect(RetryRule.Match(parsing: "sometimes") == nil)
    }

    /// An issuer kind that is resend-safe or not, and nothing else.
    struct Profile: IssuerProfile {
        let resendSafe: Bool
        var kind: IssuerKind { resendSafe ? "safe-kind" : "unsafe-kind" }
        var credentialNames: [String] { [] }
        var referenceFields: [String] { [] }
        var activatesTokens: Bool { false }
        var wallets: Set<Wallet> { [.applePay] }
        func wireProblems(_ wire: WireOptions, path: String) -> [ConfigProblem] { [] }
    }

    @Test func theConfigRefusesRowsThatCouldProvisionTwice() {
        let rejectedRetry = RetryDecisionConfig(on: "400", action: .retry)
        #expect(rejectedRetry.refusal(for: Profile(resendSafe: true))?.contains("4xx") == true)
        #expect(RetryDecisionConfig(on: "4xx", action: .failover).refusal(for: Profile(resendSafe: true)) != nil)
        #expect(RetryDecisionConfig(on: "429", action: .retry).refusal(for: Profile(resendSafe: false)) == nil)
        // A kind with no idempotency key (TMP): a timed-out request may have reached it.
        #expect(RetryDecisionConfig(on: "timeout", action: .retry).refusal(for: Profile(resendSafe: false))?.contains("idempotency") == true)
        #expect(RetryDecisionConfig(on: "timeout", action: .retry).refusal(for: Profile(resendSafe: true)) == nil)
        #expect(RetryDecisionConfig(on: "500", action: .fail).refusal(for: Profile(resendSafe: false)) == nil)
        // Nor a 503 (a proxy answers one after the request reached the issuer), where a 429 is taken.
        #expect(RetryDecisionConfig(on: "503", action: .retry).refusal(for: Profile(resendSafe: false))?.contains("idempotency") == true)
        #expect(RetryDecisionConfig(on: "503", action: .retry).refusal(for: Profile(resendSafe: true)) == nil)
    }

    /// What leaves an issuer's outcome unknown (so an Idempotency-Key is never run again) agrees
    /// with what the default table sends again to an issuer where resending is not safe: every
    /// condition it sends again (no connection, 429) says the request was not handled, and
    /// every condition it stops on leaves the outcome unknown, but for the 4xx the issuer refused.
    @Test func anOutcomeIsUnknownExactlyWhereAnUnsafeIssuerIsNotSentAgain() {
        let unsafe = RetryDecisionTable.defaults(resendSafe: false)
        let conditions: [UpstreamCondition] = [.connectFailed, .timedOut, .connectionReset, .malformed]
            + [201, 202, 204, 301, 302, 307, 400, 401, 403, 404, 408, 409, 422, 429, 500, 501, 502, 503, 504, 599].map { .status($0) }
        for condition in conditions {
            // A failure no row matches (an undocumented 2xx, a 3xx) fails with its own code.
            let action = unsafe.decide(condition)?.action ?? .fail
            let refused = if case .status(let status) = condition { status / 100 == 4 && status != 429 } else { false }
            #expect(condition.leavesOutcomeUnknown == (action == .fail && !refused), "\(condition): \(String(describing: action))")
        }
        #expect(UpstreamCondition.timedOut.leavesOutcomeUnknown && !UpstreamCondition.connectFailed.leavesOutcomeUnknown)
    }

    @Test func onlyUnhealthyConditionsCountAgainstAnEndpoint() {
        #expect(UpstreamCondition.status(503).countsAgainstEndpoint)
        #expect(UpstreamCondition.timedOut.countsAgainstEndpoint)
        #expect(UpstreamCondition.malformed.countsAgainstEndpoint)
        #expect(!UpstreamCondition.status(429).countsAgainstEndpoint)
        #expect(!UpstreamCondition.status(400).countsAgainstEndpoint)
    }
}
