import Foundation
import Gateway
import OpenAPIRuntime
import ProvisioningAPI
import ProvisioningCore

/// The generated `APIProtocol`: decode the unified API's text into bytes once, hand them to the
/// provisioning service, encode its answer. Errors are thrown and rendered by `ProblemMiddleware`.
struct APIHandler: APIProtocol {
    let service: ProvisioningService

    func provisionApplePay(_ input: Operations.ProvisionApplePay.Input) async throws -> Operations.ProvisionApplePay.Output {
        guard let client = RequestScope.client else { throw GatewayError(.unauthorized, "no API key") }
        guard case .json(let body) = input.body else { throw GatewayError(.invalidRequest, "the body must be JSON") }
        let request = try Self.decode(body)
        let result = try await service.provisionApplePay(cardID: CardID(input.path.cardId), request: request, client: client)
        return .ok(.init(body: .json(.init(
            provisioningId: result.provisioningID.rawValue,
            issuer: result.issuer.rawValue,
            activationData: result.payload.activationData.value.base64EncodedString(),
            encryptedPassData: result.payload.encryptedPassData.value.base64EncodedString(),
            ephemeralPublicKey: result.payload.ephemeralPublicKey.value.base64EncodedString()))))
    }

    func getHealth(_ input: Operations.GetHealth.Input) async throws -> Operations.GetHealth.Output {
        .ok(.init(body: .json(.init(status: "ok"))))
    }

    func getReadiness(_ input: Operations.GetReadiness.Input) async throws -> Operations.GetReadiness.Output {
        .ok(.init(body: .json(.init(status: "ready"))))
    }

    /// Text to bytes, naming the field that does not decode (never its value).
    static func decode(_ body: Components.Schemas.ApplePayProvisioningRequest) throws(GatewayError) -> ApplePayProvisioningRequest {
        let encoding: BinaryEncoding = body.encoding == .hex ? .hex : .base64
        func bytes(_ text: String, _ field: String) throws(GatewayError) -> Data {
            guard let data = encoding.decode(text) else {
                throw GatewayError(.invalidRequest, "\(field): not valid \(encoding.rawValue)")
            }
            return data
        }
        guard ApplePayProvisioningRequest.certificateCountRange.contains(body.certificates.count) else {
            throw GatewayError(.invalidRequest,
                "certificates: expected the leaf and the subordinate CA (2 to 4 certificates), got \(body.certificates.count)")
        }
        var certificates: [Data] = []
        for (index, text) in body.certificates.enumerated() {
            certificates.append(try bytes(text, "certificates[\(index)]"))
        }
        let device = DeviceInfo(
            type: body.device?._type.flatMap { DeviceType(rawValue: $0.rawValue) } ?? .phone,
            primaryAccountIdentifier: body.device?.primaryAccountIdentifier)
        return try ApplePayProvisioningRequest(
            certificates: certificates,
            nonce: try bytes(body.nonce, "nonce"),
            nonceSignature: try bytes(body.nonceSignature, "nonce_signature"),
            device: device)
    }
}
