import Foundation

public enum DeviceType: String, Sendable, Codable, CaseIterable {
    case phone, watch, tablet
}

public struct DeviceInfo: Sendable, Equatable {
    public static let maxPrimaryAccountIdentifierLength = 128

    /// Marqeta's `provisioning_app_version` is at most 50 characters.
    public static let maxAppVersionLength = 50

    public var type: DeviceType
    /// The phone pass's deviceAccountIdentifier when the target is an Apple Watch.
    public var primaryAccountIdentifier: String?
    /// The version of the app pushing the card, for issuers that take one (Marqeta).
    public var appVersion: String?

    public init(type: DeviceType = .phone, primaryAccountIdentifier: String? = nil, appVersion: String? = nil) {
        self.type = type
        self.primaryAccountIdentifier = primaryAccountIdentifier
        self.appVersion = appVersion
    }

    /// PassKit requires `primaryAccountIdentifier` when provisioning to Apple Watch (the phone
    /// pass's `deviceAccountIdentifier`); when given it is a short printable identifier.
    public func validate() throws(GatewayError) {
        if type == .watch, (primaryAccountIdentifier ?? "").isEmpty {
            throw GatewayError(.invalidRequest,
                "device.primary_account_identifier: required for a watch (the phone pass's deviceAccountIdentifier)")
        }
        if let identifier = primaryAccountIdentifier {
            guard !identifier.isEmpty, identifier.count <= Self.maxPrimaryAccountIdentifierLength,
                  identifier.unicodeScalars.allSatisfy({ $0.value > 0x20 && $0.value < 0x7F })
            else {
                throw GatewayError(.invalidRequest,
                    "device.primary_account_identifier: 1 to \(Self.maxPrimaryAccountIdentifierLength) printable characters")
            }
        }
        if let appVersion {
            guard !appVersion.isEmpty, appVersion.count <= Self.maxAppVersionLength,
                  appVersion.unicodeScalars.allSatisfy({ $0.value > 0x20 && $0.value < 0x7F })
            else {
                throw GatewayError(.invalidRequest,
                    "device.app_version: 1 to \(Self.maxAppVersionLength) printable characters without spaces")
            }
        }
    }
}

/// What PassKit handed the app in `generateRequestWithCertificateChain`, as raw bytes. Decoded once
/// at the edge; every connector re-encodes it in its upstream's dialect.
public struct ApplePayProvisioningRequest: Sendable {
    public static let certificateCountRange = 2...4
    /// Multiples of 3 bytes, so the OpenAPI document can bound base64 and hex text exactly
    /// (8190 bytes are 10920 base64 characters or 16380 hex digits).
    public static let maxCertificateBytes = 8190
    public static let maxNonceBytes = 255
    public static let maxNonceSignatureBytes = 1023

    public let leafCertificate: Sensitive<Data>
    public let subordinateCertificate: Sensitive<Data>
    public let nonce: Sensitive<Data>
    public let nonceSignature: Sensitive<Data>
    public let device: DeviceInfo

    /// Checks shapes only (count, sizes, DER framing); chain validation is the crypto layer's job.
    public init(certificates: [Data], nonce: Data, nonceSignature: Data, device: DeviceInfo = DeviceInfo()) throws(GatewayError) {
        try device.validate()
        guard Self.certificateCountRange.contains(certificates.count) else {
            throw GatewayError(.invalidRequest,
                "certificates: expected the leaf and the subordinate CA (2 to 4 certificates), got \(certificates.count)")
        }
        for (index, der) in certificates.enumerated() {
            guard !der.isEmpty, der.count <= Self.maxCertificateBytes else {
                throw GatewayError(.invalidRequest, "certificates[\(index)]: must be 1 to \(Self.maxCertificateBytes) bytes")
            }
            // Every DER certificate is an ASN.1 SEQUENCE; anything else is not what PassKit gives.
            // Well-formed text of the wrong bytes is the chain's problem, not the request's shape.
            guard der.first == 0x30 else {
                throw GatewayError(.invalidCertificateChain, "certificates[\(index)]: not a DER-encoded certificate")
            }
        }
        guard !nonce.isEmpty, nonce.count <= Self.maxNonceBytes else {
            throw GatewayError(.invalidRequest, "nonce: must be 1 to \(Self.maxNonceBytes) bytes")
        }
        guard !nonceSignature.isEmpty, nonceSignature.count <= Self.maxNonceSignatureBytes else {
            throw GatewayError(.invalidRequest, "nonce_signature: must be 1 to \(Self.maxNonceSignatureBytes) bytes")
        }
        self.leafCertificate = Sensitive(certificates[0])
        self.subordinateCertificate = Sensitive(certificates[1])
        self.nonce = Sensitive(nonce)
        self.nonceSignature = Sensitive(nonceSignature)
        self.device = device
    }
}

/// The three values PassKit's `PKAddPaymentPassRequest` takes, as the exact bytes it wants.
public struct ApplePayPayload: Sendable {
    public static let uncompressedP256KeyLength = 65

    public let activationData: Sensitive<Data>
    public let encryptedPassData: Sensitive<Data>
    public let ephemeralPublicKey: Sensitive<Data>

    /// Refuses what a phone could not use: an upstream answer that fails here is a protocol error.
    public init(activationData: Data, encryptedPassData: Data, ephemeralPublicKey: Data) throws(GatewayError) {
        guard ephemeralPublicKey.count == Self.uncompressedP256KeyLength, ephemeralPublicKey.first == 0x04 else {
            throw GatewayError(.upstreamProtocolError,
                "ephemeral public key is not a 65-byte uncompressed P-256 point (got \(ephemeralPublicKey.count) bytes)", condition: .malformed)
        }
        guard !encryptedPassData.isEmpty else {
            throw GatewayError(.upstreamProtocolError, "encrypted pass data is empty", condition: .malformed)
        }
        guard !activationData.isEmpty else {
            throw GatewayError(.upstreamProtocolError, "activation data is empty", condition: .malformed)
        }
        self.activationData = Sensitive(activationData)
        self.encryptedPassData = Sensitive(encryptedPassData)
        self.ephemeralPublicKey = Sensitive(ephemeralPublicKey)
    }
}
