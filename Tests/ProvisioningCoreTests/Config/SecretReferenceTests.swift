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

    /// A secret mounted from a file ends with a line break, which no HTTP header may carry: it
    /// failed every call as the issuer's "malformed answer" (and burnt the keys of the requests).
    /// Spaces and line breaks around a value are dropped; a control character inside one is a
    /// problem that names the variable, never the value.
    @Test(arguments: ["s3cret\n", "s3cret\r\n", "  s3cret \t", "\ns3cret"])
    func spacesAndLineBreaksAroundASecretAreDropped(raw: String) throws {
        guard case .value(let value) = try SecretReference.resolve("env:KEY", at: "a.b", in: ["KEY": raw]) else {
            Issue.record("not a value"); return
        }
        #expect(value.value == "s3cret")
    }

    /// A secret pasted after `env:` (a lower-case key, a long number) is not repeated as the
    /// variable's name; a name as variables are named is.
    @Test func aVariableNameThatMayBeASecretIsNotShown() {
        for name in ["sk_live_51HxSECRETvalue", "K4111111111111111"] {
            #expect { try SecretReference.resolve("env:\(name)", at: "a.b", in: [:]) } throws: { error in
                let text = "\(error)"
                return text.contains("not shown") && !text.contains(name)
            }
        }
        #expect(throws: ConfigProblem("a.b", "environment variable GATEWAY_BRIDGE_KEY is not set")) {
            try SecretReference.resolve("env:GATEWAY_BRIDGE_KEY", at: "a.b", in: [:])
        }
    }

    @Test func aSecretWithAControlCharacterInsideOrOnlySpacesIsAProblem() {
        #expect(throws: ConfigProblem("a.b", "environment variable KEY holds a control character (a line break inside it?)")) {
            try SecretReference.resolve("env:KEY", at: "a.b", in: ["KEY": "s3c\nret"])
        }
        #expect(throws: ConfigProblem("a.b", "environment variable KEY holds only spaces or line breaks")) {
            try SecretReference.resolve("env:KEY", at: "a.b", in: ["KEY": " \n"])
        }
    }

    /// A key of the file that is no setting's name is not repeated in a problem: a secret written
    /// as a key (`{ api_key:sk_live_... }`), a card number or terminal escapes would reach the
    /// terminal, the reload's answer and the log.
    @Test func aKeyThatIsNoNameIsNotShown() {
        #expect(ConfigProblem("issuers.bridge.credentials.api_key", "x").path == "issuers.bridge.credentials.api_key")
        #expect(ConfigProblem("clients[0].programs[1]", "x").path == "clients[0].programs[1]")
        for key in ["api_key:sk_live_51HxSECRETvalue", "k4111111111111111", "a\u{1B}[2Jb", String(repeating: "k", count: 101)] {
            let problem = ConfigProblem("issuers.bridge.credentials.\(key)", "must be env:NAME")
            #expect(problem.path == "issuers.bridge.credentials.(a key that is no name, not shown)", "\(problem.path)")
        }
    }
}
