import Foundation

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
        guard Self.isCardholderName(name) else { throw GatewayError(.invalidRequest, Self.nameRule) }
        self.number = number
        self.name = name
        self.expiryMonth = expiryMonth
        self.expiryYear = expiryYear
    }

    /// What a cardholder name may be: what a card prints, with room for names in other scripts.
    public static let nameRule = "name: 1 to 26 letters, spaces and . ' - , / (no control characters, not spaces alone)"

    /// 1 to 26 Unicode scalars (so 3,000 combining marks on one letter are not one character),
    /// each a letter, a combining mark after a letter, a space or `. ' - , /`; not spaces alone,
    /// no space first or last. It goes into the pass's plaintext as it is (vault audit: a name
    /// with a newline, an escape or a bell had been sealed and sent).
    static func isCardholderName(_ name: String) -> Bool {
        let scalars = Array(name.unicodeScalars)
        guard (1...26).contains(scalars.count), scalars.first != " ", scalars.last != " " else { return false }
        var sawLetter = false
        for (index, scalar) in scalars.enumerated() {
            let properties = scalar.properties
            if properties.isAlphabetic && properties.generalCategory != .nonspacingMark {
                sawLetter = true
            } else if properties.generalCategory == .nonspacingMark || properties.generalCategory == .spacingMark {
                guard index > 0, scalars[index - 1] != " " else { return false }
            } else if !" .'-,/".unicodeScalars.contains(scalar) {
                return false
            }
        }
        return sawLetter
    }

    /// Why a card whose expiry is `self`'s is no card to seal at `now`: it expired at the end of
    /// its month (UTC), or nil.
    public func expiredProblem(at now: Date) -> String? {
        var calendar = Calendar(identifier: .gregorian)
        calendar.timeZone = TimeZone(identifier: "UTC")!
        let parts = calendar.dateComponents([.year, .month], from: now)
        guard let year = parts.year, let month = parts.month else { return nil }
        return (expiryYear, expiryMonth) < (year, month) ? "expiry: the card expired at the end of \(String(format: "%02d/%02d", expiryMonth, expiryYear % 100))" : nil
    }

    /// The Luhn check over a string of ASCII digits.
    static func passesLuhn(_ digits: String) -> Bool {
        InputRules.passesLuhn(digits.utf8.map { $0 &- 48 })
    }

    /// `MM/YY` as in the config and the CLI.
    public init(number: String, name: String, expiry: String) throws(GatewayError) {
        let parts = expiry.split(separator: "/", omittingEmptySubsequences: false)
        // Two digits each, as printed: `Int` alone took `09/+3` (2003) and `0009/30`.
        guard parts.count == 2, parts.allSatisfy({ $0.utf8.count == 2 && $0.utf8.allSatisfy { (0x30...0x39).contains($0) } }),
              let month = Int(parts[0]), let year = Int(parts[1]) else {
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
