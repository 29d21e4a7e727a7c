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
