/// Where a provisioning for one card and wallet would go, and why: what `RoutingTable` decides,
/// spelled out rule by rule for ops (`GET /v1/admin/routes/explain`, `route explain`).
public struct RouteExplanation: Sendable, Equatable {
    public enum Decision: Sendable, Equatable {
        /// The registry record names its issuer; rules only supply the fallback and deadline.
        case card
        /// The first rule matching the card, by its index in `routing.rules`.
        case rule(Int)
        /// No explicit issuer and no rule matches: the request answers `wallet_not_supported`.
        case none
    }

    /// One rule consulted, in order, until the first that matches.
    public struct CheckedRule: Sendable, Equatable {
        public let index: Int
        public let rule: RoutingRule
        /// Why it did not match (one reason per condition that failed); empty when it matched.
        public let mismatches: [String]
        public var matched: Bool { mismatches.isEmpty }
    }

    public let issuer: IssuerID?
    public let decidedBy: Decision
    public let checked: [CheckedRule]
    /// From the first matching rule, whether or not that rule chose the issuer.
    public let fallback: IssuerID?
    /// The first matching rule's deadline; nil means the server's.
    public let deadline: Duration?
}

extension RoutingRule {
    /// Why this rule does not match the card, one reason per failed condition; empty when it matches.
    public func mismatches(card: CardID, program: ProgramID, wallet: Wallet) -> [String] {
        var reasons: [String] = []
        if let expected = self.program, expected != program {
            reasons.append("program is \(program.rawValue), the rule wants \(expected.rawValue)")
        }
        if let prefix = cardIDPrefix, !card.rawValue.hasPrefix(prefix) {
            reasons.append("card_id does not start with \(prefix)")
        }
        if let expected = self.wallet, expected != wallet {
            reasons.append("wallet is \(wallet.rawValue), the rule wants \(expected.rawValue)")
        }
        return reasons
    }

    /// Whether every card `later` matches is matched by this rule too: placed before `later`,
    /// this rule leaves it nothing (its issuer, fallback and deadline are never used).
    public func covers(_ later: RoutingRule) -> Bool {
        (program == nil || program == later.program)
            && (wallet == nil || wallet == later.wallet)
            && (cardIDPrefix.map { prefix in later.cardIDPrefix?.hasPrefix(prefix) ?? false } ?? true)
    }
}

extension RoutingTable {
    /// The same decision as `issuer(for:wallet:)`, `fallback(for:wallet:)` and
    /// `deadline(for:wallet:)`, with the rules checked on the way.
    public func explain(_ card: CardRecord, wallet: Wallet) -> RouteExplanation {
        var checked: [RouteExplanation.CheckedRule] = []
        var matched: RoutingRule?
        for (index, rule) in rules.enumerated() {
            // The match is the requests' own predicate; the reasons only say why it failed.
            let matches = rule.matches(card: card.id, program: card.program, wallet: wallet)
            let mismatches = matches ? [] : rule.mismatches(card: card.id, program: card.program, wallet: wallet)
            checked.append(.init(index: index, rule: rule, mismatches: mismatches))
            if matches {
                matched = rule
                break
            }
        }
        let decision: RouteExplanation.Decision = card.issuer != nil ? .card : matched != nil ? .rule(checked.last!.index) : .none
        return RouteExplanation(issuer: card.issuer ?? matched?.issuer, decidedBy: decision, checked: checked,
                                fallback: matched?.fallback, deadline: matched?.deadline)
    }

    /// The index of an earlier rule that covers rule `index`, which therefore never matches.
    public func shadowingRule(of index: Int) -> Int? {
        rules[..<index].firstIndex { $0.covers(rules[index]) }
    }
}
