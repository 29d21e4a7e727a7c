import Foundation
import NIOCore
import Testing

/// A request the HTTP/1.1 decoder cannot read never reaches a route, yet it is answered like any
/// other caller mistake: 400 problem+json `invalid_request`, saying which rule it broke without
/// repeating what it held, and the connection is closed (`HTTPEdgeHandler`).
@Suite struct HTTPEdgeHandlerTests {
    /// A card number pasted where it does not belong, so that an echo would show.
    static let secret = "4242424242424242"

    static let heads: [(head: String, says: String)] = [
        ("GET /healthz HTTP/1.1\r\nHost: x\r\nX-Note: \(secret)\u{01}\r\n\r\n", "a header name or value holds a character"),
        ("GET /healthz HTTP/1.1\r\nHost: x\r\nBad Header\(secret): x\r\n\r\n", "a header name or value holds a character"),
        ("FOO\(secret) BAR /healthz HTTP/1.1\r\nHost: x\r\n\r\n", "its method is not an HTTP method"),
        ("GET /healthz HTTP/1.1\r\nHost: x\r\nContent-Length: \(secret)x\r\n\r\n", "its Content-Length is not valid"),
        ("GET /healthz HTTP/1.1\r\nHost: x\r\nX-Big: \(secret)\(String(repeating: "a", count: 90_000))\r\n\r\n",
         "its head is larger than the gateway accepts"),
        // RFC 9112, 3.2 (`HostHeaderCheck`).
        ("GET /healthz HTTP/1.1\r\nX-Note: \(secret)\r\n\r\n", "an HTTP/1.1 request must have a Host header"),
        ("GET /healthz HTTP/1.1\r\nHost: x\r\nHost: \(secret)\r\n\r\n", "it has more than one Host header"),
        ("GET /healthz HTTP/1.0\r\nHost: x\r\nhost: x\r\n\r\n", "it has more than one Host header"),
        ("GET /healthz HTTP/1.1\r\nHost: x/\(secret)\r\n\r\n", "its Host header is not a host and port"),
        ("GET /healthz HTTP/1.1\r\nHost: \(String(repeating: "a", count: 301))\r\n\r\n", "its Host header is not a host and port"),
        ("GET /healthz HTTP/1.1\r\nHost: a:b:c\r\n\r\n", "its Host header is not a host and port"),
        ("GET /healthz HTTP/1.1\r\nHost: x:abc\r\n\r\n", "its Host header is not a host and port"),
        ("GET /healthz HTTP/1.1\r\nHost: [::1\r\n\r\n", "its Host header is not a host and port"),
        ("GET /healthz HTTP/1.1\r\nHost: x:123456\r\n\r\n", "its Host header is not a host and port"),
    ]

    @Test(arguments: heads.indices)
    func aHeadTheDecoderCannotReadIsAProblemAndTheConnectionCloses(index: Int) async throws {
        let (head, says) = Self.heads[index]
        try await LiveListener.run(try LiveListener.config()) { port in
            let connection = try await RawConnection.open(port: port)
            defer { connection.close() }
            try await connection.send(head)
            #expect(await connection.eventually { !$0.isOpen }, "the connection stays open")
            let (status, fields, body) = try Self.parse(connection.text)
            #expect(status == "HTTP/1.1 400 Bad Request")
            #expect(fields["content-type"] == "application/problem+json")
            #expect(fields["connection"] == "close")
            #expect(fields["content-length"] == "\(body.utf8.count)")
            let problem = try #require(try JSONSerialization.jsonObject(with: Data(body.utf8)) as? [String: Any])
            #expect(problem["code"] as? String == "invalid_request")
            #expect(problem["status"] as? Int == 400)
            #expect(problem["type"] as? String == "urn:provisioning-gateway:problem:invalid_request")
            #expect(problem["retryable"] as? Bool == false)
            let detail = try #require(problem["detail"] as? String)
            #expect(detail.contains(says), "\(detail)")
            #expect(!connection.text.contains(Self.secret), "the answer repeats what the request held")
        }
    }

    /// Requests before the unreadable one on the same connection get their own answers first, and
    /// a route's own 400 (which has a body) is left as the route wrote it.
    @Test func answersBeforeTheUnreadableRequestStandAndARoutes400IsItsOwn() async throws {
        try await LiveListener.run(try LiveListener.config()) { port in
            let connection = try await RawConnection.open(port: port)
            defer { connection.close() }
            try await connection.send(
                "GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n"
                + "GET /v1/cards/%20 HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer \(GatewayHarness.demoKey)\r\n\r\n"
                + "GET /healthz HTTP/1.1\r\nHost: x\r\nX-Note: a\u{01}\r\n\r\n")
            #expect(await connection.eventually { !$0.isOpen }, "the connection stays open")
            let answers = Self.answers(connection.text)
            #expect(answers.count == 3, "\(connection.text.prefix(600))")
            guard answers.count == 3 else { return }
            #expect(answers[0].hasPrefix("HTTP/1.1 200 "))
            // The second is a route's own 400 (a card id that is a space), unchanged.
            #expect(answers[1].hasPrefix("HTTP/1.1 400 "), "\(answers[1])")
            #expect(answers[1].contains(#""code":"invalid_request""#))
            #expect(!answers[1].contains("could not be read as HTTP/1.1"))
            #expect(answers[2].hasPrefix("HTTP/1.1 400 "))
            #expect(answers[2].contains(#""code":"invalid_request""#))
            #expect(answers[2].contains("could not be read as HTTP/1.1"))
        }
    }

    /// Host's rule is HTTP/1.1's: an HTTP/1.0 request (a health checker's, say) may come without
    /// one; hosts of every form RFC 3986 has are served. A refused head is answered after the
    /// answers before it, and nothing behind it is read as a request.
    @Test func hostIsRequiredOfHTTP11OnlyAndARefusedHeadEndsTheConnection() async throws {
        try await LiveListener.run(try LiveListener.config()) { port in
            let old = try await RawConnection.open(port: port)
            defer { old.close() }
            try await old.send("GET /healthz HTTP/1.0\r\n\r\n")
            #expect(await old.eventually { $0.text.contains("\r\n\r\n") })
            #expect(old.text.hasPrefix("HTTP/1.1 200 "), "\(old.text.prefix(200))")
            for host in ["127.0.0.1:8080", "[::1]:8080", "gateway.example", "", "xn--bcher-kva.example:443"] {
                let connection = try await RawConnection.open(port: port)
                defer { connection.close() }
                try await connection.send("GET /healthz HTTP/1.1\r\nHost: \(host)\r\n\r\n")
                #expect(await connection.eventually { $0.text.contains("\r\n\r\n") })
                #expect(connection.text.hasPrefix("HTTP/1.1 200 "), "Host: \(host): \(connection.text.prefix(200))")
            }
            let connection = try await RawConnection.open(port: port)
            defer { connection.close() }
            try await connection.send(
                "GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n"
                + "GET /healthz HTTP/1.1\r\nHost: x\r\nHost: y\r\n\r\n"
                + "GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n")
            #expect(await connection.eventually { !$0.isOpen }, "the connection stays open")
            let answers = Self.answers(connection.text)
            #expect(answers.count == 2, "\(connection.text.prefix(600))")
            guard answers.count == 2 else { return }
            #expect(answers[0].hasPrefix("HTTP/1.1 200 "))
            #expect(answers[1].hasPrefix("HTTP/1.1 400 "))
            #expect(answers[1].contains("it has more than one Host header"))
        }
    }

    /// A `CONNECT` (a tunnel, which the gateway never opens) is answered and its connection closed
    /// at once: SwiftNIO frames that answer without a body or a length and reads no request after
    /// it, so a client left with an open connection would wait for the idle timeout.
    @Test(arguments: [false, true])
    func aConnectIsAnsweredAndItsConnectionClosed(afterAnotherRequest: Bool) async throws {
        try await LiveListener.run(try LiveListener.config { $0.idleTimeoutMS = 60_000 }) { port in
            let connection = try await RawConnection.open(port: port)
            defer { connection.close() }
            try await connection.send((afterAnotherRequest ? "GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n" : "")
                + "CONNECT /v1/cards/card_bridge_demo HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer sk_nobody\r\n\r\n"
                + "GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n")
            #expect(await connection.eventually { !$0.isOpen }, "the connection stays open")
            let answers = Self.answers(connection.text)
            #expect(answers.count == (afterAnotherRequest ? 2 : 1), "\(connection.text.prefix(600))")
            if afterAnotherRequest { #expect(answers.first?.hasPrefix("HTTP/1.1 200 ") == true) }
            let connect = try #require(answers.last)
            #expect(connect.hasPrefix("HTTP/1.1 4"), "\(connect)")
            #expect(connect.lowercased().contains("connection: close"))
            #expect(connect.hasSuffix("\r\n\r\n"), "an answer to CONNECT has no body")
        }
    }

    /// The answers a connection received, each from its status line on.
    static func answers(_ text: String) -> [String] {
        text.components(separatedBy: "HTTP/1.1 ").dropFirst().map { "HTTP/1.1 " + $0 }
    }

    /// The status line, the header fields (names lower-cased) and the body of one answer.
    static func parse(_ text: String) throws -> (String, [String: String], String) {
        let parts = text.components(separatedBy: "\r\n\r\n")
        let head = try #require(parts.first).components(separatedBy: "\r\n")
        var fields: [String: String] = [:]
        for line in head.dropFirst() {
            guard let colon = line.firstIndex(of: ":") else { continue }
            fields[line[..<colon].lowercased()] = line[line.index(after: colon)...].trimmingCharacters(in: .whitespaces)
        }
        return (head[0], fields, parts.dropFirst().joined(separator: "\r\n\r\n"))
    }
}
