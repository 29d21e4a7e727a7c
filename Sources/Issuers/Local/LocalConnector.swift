import Crypto
import Foundation
import ProvisioningCore
import WalletCrypto

/// The gateway as its own issuer: validates the device's chain, opens the card's data from the
/// vault and encrypts it with ECC_V2 for the leaf key, exactly as an issuer does.
public struct LocalConnector: IssuerConnector {
    public static let issuerID: IssuerID = "local"
    /// The gateway encrypts Apple Pay's payload only (ECC_V2).
    public static let servedWallets: Set<Wallet> = [.applePay]
    public let issuer: IssuerID = LocalConnector.issuerID
    public var wallets: Set<Wallet> { Self.servedWallets }
    public let endpoint = "local"
    let vault: any CardDataSource
    let validator: ApplePayChainValidator
    let activation: any ActivationDataProvider

    public init(vault: any CardDataSource, validator: ApplePayChainValidator, activation: any ActivationDataProvider) {
        self.vault = vault
        self.validator = validator
        self.activation = activation
    }

    public func provisionApplePay(_ request: ApplePayProvisioningRequest, card: CardRecord, context: ProvisioningContext)
        async throws(GatewayError) -> ApplePayPayload
    {
        let leafKey: P256.KeyAgreement.PublicKey
        do {
            leafKey = try await validator.validate(leaf: request.leafCertificate.value, subordinate: request.subordinateCertificate.value,
                                                   at: context.clock.date)
        } catch {
            throw GatewayError(.invalidCertificateChain, error.reason)
        }
        guard let data = try await vault.cardData(card) else {
            throw GatewayError(.cardNotFound, "the vault holds no card data for \(card.id)")
        }
        let plaintext = PassPlaintext(primaryAccountNumber: data.number, name: data.name, expiryMonth: data.expiryMonth,
                                      expiryYear: data.expiryYear, nonce: request.nonce.value, nonceSignature: request.nonceSignature.value)
        do {
            let encrypted = try ECCV2.encrypt(try plaintext.encoded(), for: leafKey)
            return try ApplePayPayload(
                activationData: activation.activationData(cardID: card.id.rawValue, expiration: plaintext.expiration, nonce: request.nonce.value),
                encryptedPassData: encrypted.encryptedPassData, ephemeralPublicKey: encrypted.ephemeralPublicKey)
        } catch {
            throw GatewayError(.internal, "the local encryptor failed")
        }
    }
}

