import Foundation
import ProvisioningCore
import Testing

@Suite struct SecretReferenceTests {
    @Test func theEnvironmentSuppliesTheValueAndProblemsNameThePath() throws {
        guard case .value(let value) = try SecretReference.resolve("env:KEY", at: "a.b", in: ["KEY": "s3cret"]) else {
            Issue.record("not a value"); return
        }
        #expect(value.value == "s3cret")
        guard case .sandbox = try SecretReference.resolve("sandbox", at: "a.b", in: [:]) else { Issue.record("not sandbox"); return }
        #expect(throws: ConfigProblem("a.b", "environment variable KEY is not set")) { try SecretReference.resolve("env:KEY", at: "a.b", in: ["KEY": ""]) }
        #expect(throws: ConfigProblem("a.b", "must be env:NAME or sandbox")) { try SecretReference.resolve("s3cret", at: "a.b", in: [:]) }
        #expect(throws: ConfigProblem("a.b", "required")) { try SecretReference.resolve(nil, at: "a.b", in: [:]) }
    }
}
