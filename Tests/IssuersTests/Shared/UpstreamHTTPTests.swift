import Foundation
@testable import Issuers
import NIOHTTP1
import ProvisioningCore
import Testing

/// `UpstreamHTTP.send` over a real loopback server: the request it puts on the wire, the whole
/// answer it hands back, and the bound on an answer's size.
@Suite(.timeLimit(.minutes(1))) struct UpstreamHTTPTests {
    @Test func sendsTheRequestAndReturnsTheWholeAnswer() async throws {
        // Large enough to arrive in several reads, and not a power of two.
        let size = 196_613
        let answer = Data((0..<size).map { _ in UInt8.random(in: 0x61...0x7A) })
        let sent = Data(#"{"card":"c_\#(UUID().uuidString)"}"#.utf8)
        let (received, captured) = try await withReplay(status: .accepted, body: answer) { url, capture in
            try await withUpstreamHTTP { http in
                let response = try await http.send(
                    method: .POST, url: url.appendingPathComponent("v0/cards"), headers: [("Api-Key", "k_test")], body: sent,
                    context: Fixtures.context())
                return (response, await capture.requests)
            }
        }
        #expect(received.status == 202)
        #expect(received.body == answer)
        let request = try #require(captured.first)
        #expect(captured.count == 1)
        #expect(request.method == "POST")
        #expect(request.path == "/v0/cards")
        #expect(request.body == sent)
        #expect(request.header("Api-Key") == "k_test")
        #expect(request.header("Content-Type") == "application/json")
        #expect(request.header("Accept") == "application/json")
    }

    @Test func aGetCarriesNoBodyAndNoContentType() async throws {
        let (status, captured) = try await withReplay(status: .ok, body: Data("{}".utf8)) { url, capture in
            try await withUpstreamHTTP { http in
                let response = try await http.send(method: .GET, url: url.appendingPathComponent("v0/tokens"), headers: [],
                                                   body: nil, context: Fixtures.context())
                return (response.status, await capture.requests)
            }
        }
        #expect(status == 200)
        let request = try #require(captured.first)
        #expect(request.body.isEmpty)
        #expect(request.header("Content-Type") == nil)
    }

    /// An answer one byte over the bound is refused as a protocol error, never buffered whole.
    @Test func anAnswerOverTheBoundIsAProtocolError() async throws {
        let answer = Data(repeating: 0x61, count: UpstreamHTTP.maxResponseBytes + 1)
        let error = try await withReplay(status: .ok, body: answer) { url, _ in
            try await withUpstreamHTTP { http in
                await gatewayError {
                    try await http.send(method: .GET, url: url, headers: [], body: nil, context: Fixtures.context())
                }
            }
        }
        #expect(error?.code == .upstreamProtocolError)
        #expect(error?.condition == .malformed)
        // At the bound exactly, the answer is whole.
        let atBound = Data(repeating: 0x62, count: UpstreamHTTP.maxResponseBytes)
        let body = try await withReplay(status: .ok, body: atBound) { url, _ in
            try await withUpstreamHTTP { http in
                try await http.send(method: .GET, url: url, headers: [], body: nil, context: Fixtures.context()).body
            }
        }
        #expect(body == atBound)
    }

    /// An issuer that answers with something that is not HTTP was reached: its answer is a
    /// protocol error (502, outcome unknown), not a connection that could not be made or was reset.
    @Test(arguments: [
        "HTTP/1.1 2000 OK\r\nContent-Length: 2\r\n\r\n{}",
        "NOT HTTP AT ALL\r\n\r\n",
        "HTTP/1.1 200 OK\r\nContent-Length: 2\r\nContent-Length: 3\r\n\r\n{}",
        "HTTP/1.1 200 OK\r\nBad\u{01}Header: x\r\nContent-Length: 2\r\n\r\n{}",
        // After a 101 the decoder keeps every byte without a bound: refused at its head.
        "HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n\r\n" + String(repeating: "\u{0}", count: 4_096),
    ])
    func anAnswerThatIsNotHTTPIsAProtocolError(raw: String) async throws {
        let error = try await ScriptedUpstream.with([.raw(raw)]) { server in
            try await withUpstreamHTTP { http in
                await gatewayError {
                    try await http.send(method: .GET, url: server.url.appendingPathComponent("v0/x"), headers: [], body: nil,
                                        context: Fixtures.context())
                }
            }
        }
        #expect(error?.code == .upstreamProtocolError, "\(String(describing: error))")
        #expect(error?.condition == .malformed)
        #expect(error?.condition?.leavesOutcomeUnknown == true)
    }

    /// Where a URL sends a request and the Host header it names: the port only when it is not
    /// the scheme's own, an IPv6 address in brackets.
    @Test(arguments: [
        ("http://127.0.0.1:8080/v0/x?a=b", "127.0.0.1:8080", "/v0/x?a=b"),
        ("https://issuer.example/v0/", "issuer.example", "/v0/"),
        ("https://issuer.example:443", "issuer.example", "/"),
        ("http://issuer.example:443/x", "issuer.example:443", "/x"),
        ("http://[::1]:9000/a%2Fb", "[::1]:9000", "/a%2Fb"),
        ("https://[2001:db8::1]/v1", "[2001:db8::1]", "/v1"),
    ])
    func theTargetAndHostHeaderOfAURL(_ url: String, _ host: String, _ path: String) throws {
        let parsed = try #require(URL(string: url))
        let (target, requestPath) = try #require(UpstreamHTTP.target(parsed))
        #expect(UpstreamHTTP.hostHeader(target) == host)
        #expect(requestPath == path)
    }

    @Test(arguments: ["ftp://issuer.example/x", "file:///etc/passwd", "https:///nohost"])
    func aURLThatIsNotHTTPWithAHostHasNoTarget(_ url: String) throws {
        let parsed = try #require(URL(string: url))
        #expect(UpstreamHTTP.target(parsed) == nil)
    }
}
