@testable import GatewayServer
import NIOCore
import NIOEmbedded
import Testing

/// The write timeout ends a stall, not a slow reader: on an embedded channel the test decides
/// when the channel is unwritable, how many bytes it holds unsent (written, not flushed) and
/// when time passes.
@Suite struct WriteStallHandlerTests {
    /// A connected channel holding 70,000 bytes unsent, just turned unwritable (its timer armed).
    static func stalledChannel() throws -> EmbeddedChannel {
        let channel = EmbeddedChannel(handler: WriteStallHandler(timeout: .milliseconds(100)))
        try channel.connect(to: SocketAddress(ipAddress: "127.0.0.1", port: 1)).wait()
        hold(channel, bytes: 70_000)
        stall(channel)
        return channel
    }

    static func hold(_ channel: EmbeddedChannel, bytes: Int) {
        channel.write(ByteBuffer(repeating: 0x41, count: bytes), promise: nil)
    }

    static func stall(_ channel: EmbeddedChannel) {
        channel.isWritable = false
        channel.pipeline.fireChannelWritabilityChanged()
    }

    @Test func aStallThatTakesNothingForTheTimeoutIsClosed() throws {
        let channel = try Self.stalledChannel()
        channel.embeddedEventLoop.advanceTime(by: .milliseconds(99))
        #expect(channel.isActive)
        channel.embeddedEventLoop.advanceTime(by: .milliseconds(1))
        #expect(!channel.isActive)
    }

    @Test func aClientTakingSomeEveryPeriodKeepsItsConnectionUntilItStops() throws {
        let channel = try Self.stalledChannel()
        // Each period the client takes some (bytes go to the socket: flushed), and the channel
        // fills again, still unwritable.
        for _ in 0..<5 {
            channel.embeddedEventLoop.advanceTime(by: .milliseconds(60))
            channel.flush()
            Self.hold(channel, bytes: 50_000)
            channel.embeddedEventLoop.advanceTime(by: .milliseconds(40))
            #expect(channel.isActive)
            channel.flush()
            Self.hold(channel, bytes: 40_000)
        }
        // Then it stops taking anything: one more period, and the connection is closed.
        channel.embeddedEventLoop.advanceTime(by: .milliseconds(100))
        channel.embeddedEventLoop.advanceTime(by: .milliseconds(100))
        #expect(!channel.isActive)
    }

    @Test func writableAgainCancelsTheTimer() throws {
        let channel = try Self.stalledChannel()
        channel.embeddedEventLoop.advanceTime(by: .milliseconds(50))
        channel.isWritable = true
        channel.pipeline.fireChannelWritabilityChanged()
        channel.embeddedEventLoop.advanceTime(by: .seconds(5))
        #expect(channel.isActive)
    }
}
