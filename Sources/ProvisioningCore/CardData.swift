/// What the local encryptor needs of a card: held sealed in the vault, never logged.
public struct CardData: Sendable, Equatable, Codable {
    public let number: String
    public let name: String
    public let expiryMonth: Int
    /// Four digits.
    public let expiryYear: Int

    public init(number: String, name: String, expiryMonth: Int, expiryYear: Int) throws(GatewayError) {
        guard (12...19).contains(number.count), number.allSatisfy({ $0.isASCII && $0.isNumber }) else {
            throw GatewayError(.invalidRequest, "number: 12 to 19 digits")
        }
        // Every payment card number ends with its Luhn check digit (ISO/IEC 7812): one that does
        // not hold has a digit typed wrong, and would be sealed, provisioned and refused by the
        // network much later.
        guard Self.passesLuhn(number) else {
            throw GatewayError(.invalidRequest, "number: its check digit (Luhn) does not hold: a digit is wrong")
        }
        guard (1...12).contains(expiryMonth), (2000...2099).contains(expiryYear) else {
            throw GatewayError(.invalidRequest, "expiry: must be MM/YY")
        }
        guard !name.isEmpty, name.count <= 26 else { throw GatewayError(.invalidRequest, "name: 1 to 26 characters") }
        self.number = number
        self.name = name
        self.expiryMonth = expiryMonth
        self.expiryYear = expiryYear
    }

    /// The Luhn check over a string of ASCII digits.
    static func passesLuhn(_ digits: String) -> Bool {
        InputRules.passesLuhn(digits.utf8.map { $0 &- 48 })
    }

    /// `MM/YY` as in the config and the CLI.
    public init(number: String, name: String, expiry: String) throws(GatewayError) {
        let parts = expiry.split(separator: "/")
        guard parts.count == 2, let month = Int(parts[0]), let year = Int(parts[1]), parts[1].count == 2 else {
            throw GatewayError(.invalidRequest, "expiry: must be MM/YY")
        }
        try self.init(number: number, name: name, expiryMonth: month, expiryYear: 2000 + year)
    }
}

/// Printing, interpolating, `dump` or a debugger summary of card data shows nothing of it, so a
/// stray log line or error message cannot leak a card number.
extension CardData: CustomStringConvertible, CustomDebugStringConvertible, CustomReflectable {
    public var description: String { "<redacted>" }
    public var debugDescription: String { "<redacted>" }
    public var customMirror: Mirror { Mirror(self, children: [], displayStyle: .struct) }
}

/// Where the local encryptor finds card data; `nil` when the vault holds none for the card.
/// Entries are bound to the card's program and id, so the whole record is asked for.
public protocol CardDataSource: Sendable {
    func cardData(_ card: CardRecord) async throws(GatewayError) -> CardData?
}
