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
        // RFC 9112, 6.1 (`HostHeaderCheck`): only chunked, alone, and never on HTTP/1.0 (the input
        // audit's smuggling shapes: a coding before chunked was ignored, the body read as chunked).
        ("PUT /v1/cards/c1 HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: gzip, chunked\r\n\r\n0\r\n\r\n", "its Transfer-Encoding is not chunked alone"),
        ("PUT /v1/cards/c1 HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: foo, chunked\r\n\r\n0\r\n\r\n", "its Transfer-Encoding is not chunked alone"),
        ("PUT /v1/cards/c1 HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: identity\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n",
         "its Transfer-Encoding is not chunked alone"),
        ("PUT /v1/cards/c1 HTTP/1.0\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\n", "an HTTP/1.0 request must not have a Transfer-Encoding"),
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

    /// RFC 9112, 9.3: an HTTP/1.0 request keeps its connection only when it asks to. Without
    /// `Connection: keep-alive` its answer says `Connection: close` and the connection closes
    /// once the answer is written (it had stayed open until the idle timeout, 30 s, holding a
    /// slot, for health checkers that read until the close). Chunked HTTP/1.1 still works, and an
    /// HTTP/1.0 keep-alive request keeps its connection.
    @Test func anHTTP10RequestClosesItsConnectionUnlessItAsksToKeepIt() async throws {
        try await LiveListener.run(try LiveListener.config { $0.idleTimeoutMS = 60_000 }) { port in
            let closing = try await RawConnection.open(port: port)
            defer { closing.close() }
            try await closing.send("GET /healthz HTTP/1.0\r\n\r\n")
            #expect(await closing.eventually { !$0.isOpen }, "the connection stays open")
            let answers = Self.answers(closing.text)
            #expect(answers.count == 1 && answers.first?.hasPrefix("HTTP/1.1 200 ") == true, "\(closing.text.prefix(300))")
            #expect(try Self.parse(closing.text).1["connection"] == "close")

            let kept = try await RawConnection.open(port: port)
            defer { kept.close() }
            try await kept.send("GET /healthz HTTP/1.0\r\nConnection: keep-alive\r\n\r\n")
            #expect(await kept.eventually { $0.text.contains("\r\n\r\n") })
            try await kept.send("GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n")
            #expect(await kept.eventually { Self.answers($0.text).count == 2 }, "\(kept.text.prefix(400))")
            #expect(kept.isOpen)

            let chunked = try await RawConnection.open(port: port)
            defer { chunked.close() }
            try await chunked.send("PUT /v1/cards/c1 HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\nContent-Type: application/json\r\n\r\n2\r\n{}\r\n0\r\n\r\n")
            #expect(await chunked.eventually { $0.text.contains("\r\n\r\n") })
            // No key: the route's own 401, not a framing refusal.
            #expect(chunked.text.hasPrefix("HTTP/1.1 401 "), "\(chunked.text.prefix(300))")
        }
    }

    /// A Content-Length past Int's range (2^63 to 2^64 - 1, which the parser takes) is too large,
    /// said at once: it had been waited for until the read timeout, and the connection then closed
    /// with no answer.
    @Test func aContentLengthPastIntsRangeIsTooLargeAtOnce() async throws {
        try await LiveListener.run(try LiveListener.config { $0.readTimeoutMS = 60_000 }) { port in
            let connection = try await RawConnection.open(port: port)
            defer { connection.close() }
            try await connection.send("PUT /v1/cards/c1 HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer \(GatewayHarness.demoKey)\r\n"
                                      + "Content-Type: application/json\r\nContent-Length: 9223372036854775808\r\n\r\n{}")
            #expect(await connection.eventually { $0.text.contains("\r\n\r\n") }, "no answer")
            #expect(connection.text.hasPrefix("HTTP/1.1 413 "), "\(connection.text.prefix(300))")
            #expect(connection.text.contains(#""code":"request_too_large""#))
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
