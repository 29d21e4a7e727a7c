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

    @Test func anIssuerTheFileDropsIsForgotten() {
        var pauses = PauseSwitch(config: ["bridge": true])
        pauses.apply(config: [:])
        #expect(pauses.state("bridge") == nil && !pauses.isPaused("bridge"))
        pauses.apply(config: ["bridge": false])
        #expect(pauses.state("bridge") == .init(paused: false, setBy: .config))
    }
}
