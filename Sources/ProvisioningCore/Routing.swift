public enum Wallet: String, Sendable, Codable, CaseIterable {
    case applePay = "apple_pay"
    case googlePay = "google_pay"
    case samsungPay = "samsung_pay"
}

/// One ops-written rule: cards matching every given condition go to `issuer`.
public struct RoutingRule: Sendable, Equatable {
    public var program: ProgramID?
    public var cardIDPrefix: String?
    public var wallet: Wallet?
    public var issuer: IssuerID
    public var fallback: IssuerID?
    /// The whole request's deadline on this route, all attempts included; the server's when nil.
    public var deadline: Duration?

    public init(
        program: ProgramID? = nil, cardIDPrefix: String? = nil, wallet: Wallet? = nil, issuer: IssuerID, fallback: IssuerID? = nil,
        deadline: Duration? = nil
    ) {
        self.fallback = fallback
        self.deadline = deadline
        self.program = program
        self.cardIDPrefix = cardIDPrefix
        self.wallet = wallet
        self.issuer = issuer
    }

    func matches(card: CardID, program: ProgramID, wallet: Wallet) -> Bool {
        (self.program == nil || self.program == program)
            && (cardIDPrefix.map { card.rawValue.hasPrefix($0) } ?? true)
            && (self.wallet == nil || self.wallet == wallet)
    }
}

/// Which issuer serves a card for a wallet: the registry's explicit issuer wins; otherwise the
/// first matching rule, in the order ops wrote them.
public struct RoutingTable: Sendable {
    public let rules: [RoutingRule]
    public init(rules: [RoutingRule]) { self.rules = rules }

    /// The first rule matching the card, in the order ops wrote them: it gives the issuer of a
    /// card whose record names none, and the fallback and deadline of every card it matches. A
    /// request scans the rules once, here.
    public func firstMatch(_ card: CardRecord, wallet: Wallet) -> RoutingRule? {
        rules.first { $0.matches(card: card.id, program: card.program, wallet: wallet) }
    }

    public func issuer(for card: CardRecord, wallet: Wallet) -> IssuerID? {
        card.issuer ?? firstMatch(card, wallet: wallet)?.issuer
    }

    /// The issuer to try when the card's issuer fails with a retryable error, from the first rule
    /// matching the card (whether or not that rule chose the issuer).
    public func fallback(for card: CardRecord, wallet: Wallet) -> IssuerID? {
        firstMatch(card, wallet: wallet)?.fallback
    }

    /// The deadline of the first rule matching the card (nil when that rule sets none).
    public func deadline(for card: CardRecord, wallet: Wallet) -> Duration? {
        firstMatch(card, wallet: wallet)?.deadline
    }
}
