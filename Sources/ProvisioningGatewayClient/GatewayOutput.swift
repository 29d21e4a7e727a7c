import Foundation

/// A generated operation's answer that may be a problem: `checked()` turns every non-2xx answer
/// into a thrown `GatewayProblem`, so the generated `Client` can be used as is:
///
///     let card = try await gateway.raw.getCard(path: .init(cardId: "card_1")).checked().ok.body.json
///
/// Each operation of the spec answers 429 (`RateLimited`, with `Retry-After`) and a `default`
/// problem; `/readyz` answers 503. (`/healthz` documents no problem, so its output is not one.)
public protocol GatewayOutput: Sendable {
    /// The problem this answer carries; nil for a documented success.
    var problem: GatewayProblem? { get }
}

extension GatewayOutput {
    /// This answer when it is a success, else its problem, thrown.
    public func checked() throws(GatewayProblem) -> Self {
        if let problem { throw problem }
        return self
    }
}


extension Operations.ProvisionApplePay.Output: GatewayOutput {
    public var problem: GatewayProblem? {
        switch self {
        case .tooManyRequests(let answer): answer.gatewayProblem
        case .default(let status, let answer): answer.gatewayProblem(status: status)
        default: nil
        }
    }
}

extension Operations.ProvisionGooglePay.Output: GatewayOutput {
    public var problem: GatewayProblem? {
        switch self {
        case .tooManyRequests(let answer): answer.gatewayProblem
        case .default(let status, let answer): answer.gatewayProblem(status: status)
        default: nil
        }
    }
}

extension Operations.ProvisionSamsungPay.Output: GatewayOutput {
    public var problem: GatewayProblem? {
        switch self {
        case .tooManyRequests(let answer): answer.gatewayProblem
        case .default(let status, let answer): answer.gatewayProblem(status: status)
        default: nil
        }
    }
}

extension Operations.ListWalletTokens.Output: GatewayOutput {
    public var problem: GatewayProblem? {
        switch self {
        case .tooManyRequests(let answer): answer.gatewayProblem
        case .default(let status, let answer): answer.gatewayProblem(status: status)
        default: nil
        }
    }
}

extension Operations.SuspendWalletToken.Output: GatewayOutput {
    public var problem: GatewayProblem? {
        switch self {
        case .tooManyRequests(let answer): answer.gatewayProblem
        case .default(let status, let answer): answer.gatewayProblem(status: status)
        default: nil
        }
    }
}

extension Operations.ResumeWalletToken.Output: GatewayOutput {
    public var problem: GatewayProblem? {
        switch self {
        case .tooManyRequests(let answer): answer.gatewayProblem
        case .default(let status, let answer): answer.gatewayProblem(status: status)
        default: nil
        }
    }
}

extension Operations.DeactivateWalletToken.Output: GatewayOutput {
    public var problem: GatewayProblem? {
        switch self {
        case .tooManyRequests(let answer): answer.gatewayProblem
        case .default(let status, let answer): answer.gatewayProblem(status: status)
        default: nil
        }
    }
}

extension Operations.ActivateToken.Output: GatewayOutput {
    public var problem: GatewayProblem? {
        switch self {
        case .tooManyRequests(let answer): answer.gatewayProblem
        case .default(let status, let answer): answer.gatewayProblem(status: status)
        default: nil
        }
    }
}

extension Operations.PutCard.Output: GatewayOutput {
    public var problem: GatewayProblem? {
        switch self {
        case .tooManyRequests(let answer): answer.gatewayProblem
        case .default(let status, let answer): answer.gatewayProblem(status: status)
        default: nil
        }
    }
}

extension Operations.GetCard.Output: GatewayOutput {
    public var problem: GatewayProblem? {
        switch self {
        case .tooManyRequests(let answer): answer.gatewayProblem
        case .default(let status, let answer): answer.gatewayProblem(status: status)
        default: nil
        }
    }
}

extension Operations.DeleteCard.Output: GatewayOutput {
    public var problem: GatewayProblem? {
        switch self {
        case .tooManyRequests(let answer): answer.gatewayProblem
        case .default(let status, let answer): answer.gatewayProblem(status: status)
        default: nil
        }
    }
}

extension Operations.ListCards.Output: GatewayOutput {
    public var problem: GatewayProblem? {
        switch self {
        case .tooManyRequests(let answer): answer.gatewayProblem
        case .default(let status, let answer): answer.gatewayProblem(status: status)
        default: nil
        }
    }
}

extension Operations.GetProvisioning.Output: GatewayOutput {
    public var problem: GatewayProblem? {
        switch self {
        case .tooManyRequests(let answer): answer.gatewayProblem
        case .default(let status, let answer): answer.gatewayProblem(status: status)
        default: nil
        }
    }
}

extension Operations.AddSandboxFault.Output: GatewayOutput {
    public var problem: GatewayProblem? {
        switch self {
        case .tooManyRequests(let answer): answer.gatewayProblem
        case .default(let status, let answer): answer.gatewayProblem(status: status)
        default: nil
        }
    }
}

extension Operations.ListSandboxFaults.Output: GatewayOutput {
    public var problem: GatewayProblem? {
        switch self {
        case .tooManyRequests(let answer): answer.gatewayProblem
        case .default(let status, let answer): answer.gatewayProblem(status: status)
        default: nil
        }
    }
}

extension Operations.ClearSandboxFaults.Output: GatewayOutput {
    public var problem: GatewayProblem? {
        switch self {
        case .tooManyRequests(let answer): answer.gatewayProblem
        case .default(let status, let answer): answer.gatewayProblem(status: status)
        default: nil
        }
    }
}

extension Operations.ListIssuerHealth.Output: GatewayOutput {
    public var problem: GatewayProblem? {
        switch self {
        case .tooManyRequests(let answer): answer.gatewayProblem
        case .default(let status, let answer): answer.gatewayProblem(status: status)
        default: nil
        }
    }
}

extension Operations.PauseIssuer.Output: GatewayOutput {
    public var problem: GatewayProblem? {
        switch self {
        case .tooManyRequests(let answer): answer.gatewayProblem
        case .default(let status, let answer): answer.gatewayProblem(status: status)
        default: nil
        }
    }
}

extension Operations.ResumeIssuer.Output: GatewayOutput {
    public var problem: GatewayProblem? {
        switch self {
        case .tooManyRequests(let answer): answer.gatewayProblem
        case .default(let status, let answer): answer.gatewayProblem(status: status)
        default: nil
        }
    }
}

extension Operations.ReloadConfig.Output: GatewayOutput {
    public var problem: GatewayProblem? {
        switch self {
        case .tooManyRequests(let answer): answer.gatewayProblem
        case .default(let status, let answer): answer.gatewayProblem(status: status)
        default: nil
        }
    }
}

extension Operations.ExplainRoute.Output: GatewayOutput {
    public var problem: GatewayProblem? {
        switch self {
        case .tooManyRequests(let answer): answer.gatewayProblem
        case .default(let status, let answer): answer.gatewayProblem(status: status)
        default: nil
        }
    }
}

extension Operations.ListSecurityEvents.Output: GatewayOutput {
    public var problem: GatewayProblem? {
        switch self {
        case .tooManyRequests(let answer): answer.gatewayProblem
        case .default(let status, let answer): answer.gatewayProblem(status: status)
        default: nil
        }
    }
}

extension Operations.GetMetrics.Output: GatewayOutput {
    public var problem: GatewayProblem? {
        switch self {
        case .tooManyRequests(let answer): answer.gatewayProblem
        case .default(let status, let answer): answer.gatewayProblem(status: status)
        default: nil
        }
    }
}

extension Operations.GetReadiness.Output: GatewayOutput {
    public var problem: GatewayProblem? {
        switch self {
        case .ok: nil
        case .serviceUnavailable(let answer): answer.gatewayProblem(status: 503)
        case .default(let status, let answer): answer.gatewayProblem(status: status)
        }
    }
}
