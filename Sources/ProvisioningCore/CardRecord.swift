/// How an issuer names a card on its side, e.g. Bridge's customer id + card account id.
/// Keys are the config's snake_case names; each connector says which it needs.
public struct IssuerReference: Sendable, Equatable, Codable {
    public var fields: [String: String]
    public init(_ fields: [String: String]) { self.fields = fields }
    public subscript(key: String) -> String? { fields[key] }

    public init(from decoder: any Decoder) throws {
        fields = try decoder.singleValueContainer().decode([String: String].self)
    }
    public func encode(to encoder: any Encoder) throws {
        var container = encoder.singleValueContainer()
        try container.encode(fields)
    }

    /// The reference fields that name a card at its issuer by themselves, whatever else the
    /// reference holds: Bridge's card account id (its customer id says whose account it is, and
    /// Bridge's guide addresses a card account by its id alone) and every other kind's issuer card
    /// id. The registry holds one card per (issuer, naming field value), letter case aside
    /// (schema 014): `{customer_id: mine, card_account_id: yours}` is your card account, not a new
    /// card. Every issuer kind's reference holds exactly one of them (`IssuerCatalogTests`); a
    /// reference holding none is compared whole.
    public static let cardNamingFields = ["card_account_id", "issuer_card_id"]

    /// The value of the first naming field the reference holds (the stores' `Dialect.cardKey`
    /// reads the same), nil when it holds none.
    public var namingValue: String? { Self.cardNamingFields.lazy.compactMap { fields[$0] }.first }
}

/// One card in the gateway's registry: which issuer holds it and how that issuer names it.
/// Without an explicit issuer, the routing rules decide.
public struct CardRecord: Sendable, Equatable {
    public var id: CardID
    public var program: ProgramID
    public var issuer: IssuerID?
    public var issuerReference: IssuerReference

    public init(id: CardID, program: ProgramID, issuer: IssuerID?, issuerReference: IssuerReference) {
        self.id = id
        self.program = program
        self.issuer = issuer
        self.issuerReference = issuerReference
    }
}

/// Card id -> record; the store is the registry.
public protocol CardRegistry: Sendable {
    func card(_ id: CardID) async throws -> CardRecord?
}
