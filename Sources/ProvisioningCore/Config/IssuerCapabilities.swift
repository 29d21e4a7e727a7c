import Foundation

extension IssuerConfig {
    /// The wallets this issuer is used for: `wallets` when the file names them, else the kind's
    /// default ones (every wallet it serves, less those it serves only on request).
    public func walletsUsed(by profile: any IssuerProfile) -> Set<Wallet> {
        wallets.map { Set($0) } ?? profile.defaultWallets
    }

    /// Problems with `wallets` for an issuer of `profile`'s kind, each path starting with `path`.
    func capabilityProblems(profile: any IssuerProfile, path: String) -> [ConfigProblem] {
        guard let wallets else { return [] }
        var problems: [ConfigProblem] = []
        if wallets.isEmpty {
            problems.append(.init("\(path).wallets", "must name at least one wallet (or be left out; paused: true stops every call)"))
        }
        var seen = Set<Wallet>()
        for (index, wallet) in wallets.enumerated() {
            if !profile.wallets.contains(wallet) {
                let served = profile.wallets.map(\.rawValue).sorted().joined(separator: ", ")
                problems.append(.init("\(path).wallets[\(index)]", "a \(profile.kind) issuer provisions only for \(served)"))
            }
            if !seen.insert(wallet).inserted { problems.append(.init("\(path).wallets[\(index)]", "\(wallet.rawValue) is listed twice")) }
        }
        return problems
    }
}

extension GatewayConfig {
    /// Routing rules for one wallet that send it to an issuer not used for that wallet: every
    /// card they match would be refused.
    func walletRuleProblems(profiles: IssuerProfiles) -> [ConfigProblem] {
        routing.rules.enumerated().compactMap { index, rule in
            guard let wallet = rule.match.wallet, let issuer = issuers[rule.issuer], let profile = profiles[issuer.kind],
                  !issuer.walletsUsed(by: profile).contains(wallet)
            else { return nil }
            return ConfigProblem("routing.rules[\(index)].issuer", "issuers.\(rule.issuer) is not used for \(wallet.rawValue) (its wallets)")
        }
    }
}

extension GatewayConfig {
    /// Issuer accounts limited to some programs (`issuers.<name>.programs`); an account absent
    /// here serves every program.
    public var issuerPrograms: [IssuerID: Set<ProgramID>] {
        issuers.reduce(into: [:]) { programs, entry in
            if let allowed = entry.value.programs { programs[IssuerID(entry.key)] = Set(allowed.map { ProgramID($0) }) }
        }
    }

    /// Every program a client that is not an admin holds.
    public var clientPrograms: Set<ProgramID> {
        Set(clients.filter { !$0.admin }.flatMap(\.programs).map { ProgramID($0) })
    }
}
