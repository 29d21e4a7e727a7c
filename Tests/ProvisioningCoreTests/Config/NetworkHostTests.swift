import ProvisioningCore
import Testing

/// What the gateway takes for this machine (plain HTTP allowed, the sandbox allowed to listen).
@Suite struct NetworkHostTests {
    @Test(arguments: ["localhost", "LOCALHOST", "127.0.0.1", "127.8.9.10", "::1", "[::1]", "0:0:0:0:0:0:0:1", "[0:0:0:0:0:0:0:1]",
                      "0000:0000:0000:0000:0000:0000:0000:0001", "0::1", "::ffff:127.0.0.1", "[::FFFF:127.1.2.3]"])
    func loopbackSpellings(_ host: String) {
        #expect(NetworkHost.isLoopback(host))
    }

    @Test(arguments: ["", "0.0.0.0", "::", "::2", "1::1", "::1%lo", "fe80::1", "::ffff:10.0.0.1", "::ffff:128.0.0.1", "::127.0.0.1",
                      "127.0.0", "127.0.0.256", "127.0.0.1.", "foo.localhost", "localhost.", "0:0:0:0:0:0:0:0:1", "[::1", "::1]",
                      "example.com", "10.0.0.1"])
    func notLoopback(_ host: String) {
        #expect(!NetworkHost.isLoopback(host))
    }
}
