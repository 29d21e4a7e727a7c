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

    /// The index of an earlier rule that covers rule `index`, which therefore never matches: the
    /// definition, one rule at a time (`shadowingRules()` answers for all of them at once).
    public func shadowingRule(of index: Int) -> Int? {
        rules[..<index].firstIndex { $0.covers(rules[index]) }
    }

    /// `shadowingRule(of:)` for every rule, in one pass: the first earlier rule that covers each,
    /// or nil. Asking `shadowingRule(of:)` for each rule compares every pair (20,000 rules took
    /// 90 s of `config check`); here the earlier rules are kept by their program and wallet (or
    /// none), with the first index of each card id prefix, so a rule looks up the at most four
    /// program and wallet pairs that can cover it and, in each, its own prefixes.
    public func shadowingRules() -> [Int?] {
        struct Scope: Hashable {
            let program: ProgramID?
            let wallet: Wallet?
        }
        /// Per scope, the first rule with no prefix, and the first rule of each prefix.
        var firstAny: [Scope: Int] = [:]
        var firstByPrefix: [Scope: [Substring: Int]] = [:]
        var result: [Int?] = []
        result.reserveCapacity(rules.count)
        for (index, rule) in rules.enumerated() {
            var earliest: Int?
            func consider(_ candidate: Int?) {
                if let candidate, candidate < earliest ?? .max { earliest = candidate }
            }
            for program in Set([nil, rule.program]) {
                for wallet in Set([nil, rule.wallet]) {
                    let scope = Scope(program: program, wallet: wallet)
                    consider(firstAny[scope])
                    // A prefix covers only a rule with a prefix it starts (`covers`), the empty one included.
                    guard let prefix = rule.cardIDPrefix, let prefixes = firstByPrefix[scope] else { continue }
                    var end = prefix.startIndex
                    while true {
                        consider(prefixes[prefix[..<end]])
                        guard end < prefix.endIndex else { break }
                        end = prefix.index(after: end)
                    }
                }
            }
            result.append(earliest)
            let scope = Scope(program: rule.program, wallet: rule.wallet)
            if let prefix = rule.cardIDPrefix {
                firstByPrefix[scope, default: [:]][prefix[...]] = firstByPrefix[scope]?[prefix[...]] ?? index
            } else if firstAny[scope] == nil {
                firstAny[scope] = index
            }
        }
        return result
    }
}
