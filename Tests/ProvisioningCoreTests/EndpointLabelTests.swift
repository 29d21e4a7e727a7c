import Foundation
import ProvisioningCore
import Testing

/// Metrics labels, health reports and audit events name an endpoint without user info, query or
/// fragment.
@Suite struct EndpointLabelTests {
    @Test(arguments: [
        ("https://api.bridge.xyz/v0", "https://api.bridge.xyz/v0"),
        ("https://user:secret@api.bridge.xyz:8443/v0?api_key=k#frag", "https://api.bridge.xyz:8443/v0"),
        ("https://token@api.example.com", "https://api.example.com"),
        ("HTTPS://api.example.com/a/b/", "https://api.example.com/a/b/"),
        ("http://127.0.0.1:4711", "http://127.0.0.1:4711"),
        ("http://[::1]:8080/v1?x=1", "http://[::1]:8080/v1"),
        ("https://api.example.com/v1/%2F", "https://api.example.com/v1/%2F"),
        ("sandbox://bridge/2", "sandbox://bridge/2"),
        ("local", "local"),
        ("user:pw@host/path?q", "host/path"),
    ])
    func rendersSchemeHostPortAndPathOnly(_ input: String, _ expected: String) {
        #expect(EndpointLabel.render(input) == expected)
        if let url = URL(string: input), url.host != nil { #expect(EndpointLabel.render(url) == expected) }
    }

    @Test func nothingSecretSurvives() {
        let label = EndpointLabel.render("https://admin:hunter2@issuer.example.com/v0?token=abc#s")
        for secret in ["admin", "hunter2", "token", "abc", "#", "?", "@"] { #expect(!label.contains(secret), "\(secret)") }
    }
}
