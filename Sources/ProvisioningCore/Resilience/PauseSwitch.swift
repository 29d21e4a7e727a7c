import Foundation

/// Which issuers ops have paused (an incident, a migration): a paused issuer gets no calls. A pure
/// value; the gateway's one copy sits in `UpstreamHealth`, under its lock, beside the breakers.
///
/// The config file's `issuers.<name>.paused` sets the state at start-up; an admin's pause or
/// resume changes it at run time. A file read later (a reload) changes only what the file itself
/// changed, so an admin's pause is kept until the file says otherwise.
public struct PauseSwitch: Sendable, Equatable {
    /// Who set an issuer's state last.
    public enum Setter: Sendable, Equatable, CustomStringConvertible {
        case config
        /// An admin client, by id.
        case admin(String)

        /// `config`, or the admin client's id.
        public var description: String {
            switch self {
            case .config: "config"
            case .admin(let id): id
            }
        }
    }

    public struct State: Sendable, Equatable {
        public var paused: Bool
        public var setBy: Setter
        public init(paused: Bool, setBy: Setter) {
            self.paused = paused
            self.setBy = setBy
        }
    }

    /// What the file read last said, per issuer.
    private var fileSaid: [IssuerID: Bool] = [:]
    private var states: [IssuerID: State] = [:]
    /// Issuers a file dropped while they were paused. Requests that started before that file
    /// (a reload's old generation, still draining) may still hold the issuer's connectors, so it
    /// stays paused for them; it is no longer listed, and a file that names it again decides anew.
    private var droppedWhilePaused: Set<IssuerID> = []

    /// The state the file `config` (issuer -> `paused`) describes.
    public init(config: [IssuerID: Bool] = [:]) {
        apply(config: config)
    }

    public func state(_ issuer: IssuerID) -> State? { states[issuer] }

    /// False for an issuer the switch does not know; true for one a file dropped while it was paused.
    public func isPaused(_ issuer: IssuerID) -> Bool {
        states[issuer]?.paused ?? droppedWhilePaused.contains(issuer)
    }

    /// Every issuer's state, by name.
    public var all: [(issuer: IssuerID, state: State)] {
        states.sorted { $0.key.rawValue < $1.key.rawValue }.map { ($0.key, $0.value) }
    }

    /// An admin's pause (`paused: true`) or resume. Nil when the file names no such issuer.
    public mutating func set(_ issuer: IssuerID, paused: Bool, by admin: String) -> State? {
        guard states[issuer] != nil else { return nil }
        let state = State(paused: paused, setBy: .admin(admin))
        states[issuer] = state
        return state
    }

    /// A config file's `issuers.<name>.paused`. An issuer that is new, or whose value the file
    /// changed since the last file, takes the file's value; every other issuer keeps its state
    /// (an admin's pause or resume survives a reload of an unchanged file). Issuers the file no
    /// longer names are no longer listed; one that was paused stays paused for the requests still
    /// holding it (`isPaused`).
    public mutating func apply(config: [IssuerID: Bool]) {
        for (issuer, state) in states where config[issuer] == nil && state.paused {
            droppedWhilePaused.insert(issuer)
        }
        droppedWhilePaused.subtract(config.keys)
        var next: [IssuerID: State] = [:]
        for (issuer, paused) in config {
            if let current = states[issuer], fileSaid[issuer] == paused {
                next[issuer] = current
            } else {
                next[issuer] = State(paused: paused, setBy: .config)
            }
        }
        states = next
        fileSaid = config
    }
}
