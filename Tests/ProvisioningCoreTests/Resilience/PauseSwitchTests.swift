import ProvisioningCore
import Testing

/// The pause state alone: the file sets it, admins change it, and a later file changes only what
/// the file itself changed.
@Suite struct PauseSwitchTests {
    @Test func theFileSetsTheStartingState() {
        let pauses = PauseSwitch(config: ["bridge": true, "tmp": false])
        #expect(pauses.isPaused("bridge") && !pauses.isPaused("tmp"))
        #expect(pauses.state("bridge") == .init(paused: true, setBy: .config))
        #expect(!pauses.isPaused("stripe") && pauses.state("stripe") == nil)
        #expect(pauses.all.map { $0.issuer } == ["bridge", "tmp"])
    }

    @Test func anAdminPausesAndResumesOnlyConfiguredIssuers() {
        var pauses = PauseSwitch(config: ["bridge": false])
        #expect(pauses.set("bridge", paused: true, by: "ops") == .init(paused: true, setBy: .admin("ops")))
        #expect(pauses.isPaused("bridge"))
        #expect(pauses.set("stripe", paused: true, by: "ops") == nil)
        #expect(!pauses.isPaused("stripe"))
        _ = pauses.set("bridge", paused: false, by: "ops2")
        #expect(!pauses.isPaused("bridge") && pauses.state("bridge")?.setBy.description == "ops2")
    }

    @Test func anAdminsPauseIsKeptAcrossAFileThatDidNotChangeIt() {
        var pauses = PauseSwitch(config: ["bridge": false, "tmp": true])
        _ = pauses.set("bridge", paused: true, by: "ops")
        _ = pauses.set("tmp", paused: false, by: "ops")
        pauses.apply(config: ["bridge": false, "tmp": true, "crossmint": true])
        #expect(pauses.isPaused("bridge") && !pauses.isPaused("tmp"))
        #expect(pauses.state("bridge")?.setBy == .admin("ops"))
        // A new issuer takes the file's value.
        #expect(pauses.state("crossmint") == .init(paused: true, setBy: .config))
    }

    @Test func aFileThatChangesAnIssuersValueWins() {
        var pauses = PauseSwitch(config: ["bridge": false, "tmp": true])
        _ = pauses.set("bridge", paused: true, by: "ops")
        _ = pauses.set("tmp", paused: false, by: "ops")
        pauses.apply(config: ["bridge": true, "tmp": false])
        #expect(pauses.state("bridge") == .init(paused: true, setBy: .config))
        #expect(pauses.state("tmp") == .init(paused: false, setBy: .config))
        // Then the next unchanged file keeps whatever an admin does after it.
        _ = pauses.set("bridge", paused: false, by: "ops")
        pauses.apply(config: ["bridge": true, "tmp": false])
        #expect(!pauses.isPaused("bridge"))
    }

    @Test func anIssuerTheFileDropsIsNoLongerListed() {
        var pauses = PauseSwitch(config: ["bridge": false, "tmp": false])
        pauses.apply(config: ["tmp": false])
        #expect(pauses.state("bridge") == nil && !pauses.isPaused("bridge"))
        #expect(pauses.all.map { $0.issuer } == ["tmp"])
        pauses.apply(config: ["bridge": false, "tmp": false])
        #expect(pauses.state("bridge") == .init(paused: false, setBy: .config))
    }

    /// Requests of the generation before a reload may still hold a dropped issuer's connectors:
    /// one that was paused (by the file or an admin) stays paused for them, unlisted, until a file
    /// names it again.
    @Test func anIssuerDroppedWhilePausedStaysPausedUntilAFileNamesItAgain() {
        var pauses = PauseSwitch(config: ["bridge": true, "tmp": false, "crossmint": false])
        _ = pauses.set("tmp", paused: true, by: "ops")
        pauses.apply(config: ["crossmint": false])
        #expect(pauses.isPaused("bridge") && pauses.isPaused("tmp"))
        #expect(pauses.state("bridge") == nil && pauses.all.map { $0.issuer } == ["crossmint"])
        #expect(pauses.set("bridge", paused: false, by: "ops") == nil, "an admin cannot resume an issuer the file no longer names")
        #expect(pauses.isPaused("bridge"))
        // Another reload that still leaves it out keeps it paused.
        pauses.apply(config: ["crossmint": true])
        #expect(pauses.isPaused("bridge") && pauses.isPaused("tmp"))
        // Named again: the file decides.
        pauses.apply(config: ["bridge": false, "crossmint": true])
        #expect(!pauses.isPaused("bridge") && pauses.state("bridge") == .init(paused: false, setBy: .config))
        #expect(pauses.isPaused("tmp"))
    }
}
