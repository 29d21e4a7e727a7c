import Foundation

/// A generated operation's answer that may be a problem: `checked()` turns every problem answer
/// into a thrown `GatewayProblem`, so the generated `Client` can be used as is:
///
///     let card = try await gateway.raw.getCard(path: .init(cardId: "card_1")).checked().ok.body.json
///
/// The spec gives each operation its own problem statuses (400, 401, 403, 404, 409, 413, 415, 422, 429,
/// 502, 503, 504, `default`, as that operation documents them), and every one of them carries the
/// same `Problem` schema: an answer is a problem when its payload holds a `Components.Schemas.Problem`.
/// That is found by reflection over the generated output, so a status the spec adds to an operation
/// needs no change here. (`/healthz` documents no problem, so its output is not one.)
public protocol GatewayOutput: Sendable {}

extension GatewayOutput {
    /// The problem this answer carries; nil for a documented success.
    public var problem: GatewayProblem? { GatewayProblem(output: self) }

    /// This answer when it is a success, else its problem, thrown.
    public func checked() throws(GatewayProblem) -> Self {
        if let problem { throw problem }
        return self
    }
}

extension GatewayProblem {
    /// The problem inside a generated output (`.notFound(...)`, `.tooManyRequests(...)`,
    /// `.default(statusCode:, ...)`, ...): its body's `Problem`, the HTTP status (the case's
    /// `statusCode` for `default`, else the problem's own `status`, which the gateway sets to the
    /// HTTP status) and the `Retry-After` header where the response declares one.
    init?(output: some GatewayOutput) {
        var problem: Components.Schemas.Problem?
        var statusCode: Int?
        var retryAfter: Int?
        func visit(_ value: Any, label: String?, depth: Int) {
            guard depth < 6, problem == nil || retryAfter == nil || statusCode == nil else { return }
            if let found = value as? Components.Schemas.Problem {
                problem = found
                return
            }
            if label == "retryAfter", let seconds = value as? Int { retryAfter = seconds }
            if label == "statusCode", let code = value as? Int { statusCode = code }
            for child in Mirror(reflecting: value).children { visit(child.value, label: child.label, depth: depth + 1) }
        }
        visit(output, label: nil, depth: 0)
        guard let problem else { return nil }
        self.init(problem, status: statusCode ?? problem.status, retryAfter: retryAfter)
    }
}

extension Operations.ProvisionApplePay.Output: GatewayOutput {}
extension Operations.ProvisionGooglePay.Output: GatewayOutput {}
extension Operations.ProvisionSamsungPay.Output: GatewayOutput {}
extension Operations.ListWalletTokens.Output: GatewayOutput {}
extension Operations.SuspendWalletToken.Output: GatewayOutput {}
extension Operations.ResumeWalletToken.Output: GatewayOutput {}
extension Operations.DeactivateWalletToken.Output: GatewayOutput {}
extension Operations.ActivateToken.Output: GatewayOutput {}
extension Operations.PutCard.Output: GatewayOutput {}
extension Operations.GetCard.Output: GatewayOutput {}
extension Operations.DeleteCard.Output: GatewayOutput {}
extension Operations.ListCards.Output: GatewayOutput {}
extension Operations.GetProvisioning.Output: GatewayOutput {}
extension Operations.AddSandboxFault.Output: GatewayOutput {}
extension Operations.ListSandboxFaults.Output: GatewayOutput {}
extension Operations.ClearSandboxFaults.Output: GatewayOutput {}
extension Operations.ListIssuerHealth.Output: GatewayOutput {}
extension Operations.PauseIssuer.Output: GatewayOutput {}
extension Operations.ResumeIssuer.Output: GatewayOutput {}
extension Operations.ReloadConfig.Output: GatewayOutput {}
extension Operations.ExplainRoute.Output: GatewayOutput {}
extension Operations.ListSecurityEvents.Output: GatewayOutput {}
extension Operations.GetMetrics.Output: GatewayOutput {}
extension Operations.GetReadiness.Output: GatewayOutput {}
