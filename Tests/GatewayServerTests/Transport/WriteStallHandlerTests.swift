@testable import GatewayServer
import NIOCore
import NIOEmbedded
import Testing

/// The write timeout ends a stall, not a slow reader: on an embedded channel the test decides
/// when the channel is unwritable, how many bytes it holds unsent (written, not flushed) and
/// when time passes.
@Suite struct WriteStallHandlerTests {
    static func channel() throws -> EmbeddedChannel {
        let channel = EmbeddedChannel(handler: WriteStallHandler(timeout: .milliseconds(100)))
        try channel.connect(to: SocketAddress(ipAddress: "127.0.0.1", port: 1)).wait()
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
        let channel = try Self.channel()
        Self.hold(channel, bytes: 70_000)
        Self.stall(channel)
        channel.embeddedEventLoop.advanceTime(by: .milliseconds(99))
        #expect(channel.isActive)
        channel.embeddedEventLoop.advanceTime(by: .milliseconds(1))
        #expect(!channel.isActive)
    }

    @Test func aClientTakingSomeEveryPeriodKeepsItsConnectionUntilItStops() throws {
        let channel = try Self.channel()
        Self.hold(channel, bytes: 70_000)
        Self.stall(channel)
        // Each period the client takes some (the unsent bytes go down), still unwritable.
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
        let channel = try Self.channel()
        Self.hold(channel, bytes: 70_000)
        Self.stall(channel)
        channel.embeddedEventLoop.advanceTime(by: .milliseconds(50))
        channel.isWritable = true
        channel.pipeline.fireChannelWritabilityChanged()
        channel.embeddedEventLoop.advanceTime(by: .seconds(5))
        #expect(channel.isActive)
    }
}
