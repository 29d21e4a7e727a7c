import Foundation

/// One security-relevant action (PCI DSS 10.2): a failed authentication, a change to the card
/// registry, an admin read, a vault or import action from the CLI. It names who, from where and
/// what changed, never card data, keys or payloads.
public struct SecurityEvent: Sendable, Equatable {
    public enum Kind: String, Sendable, Codable, CaseIterable {
        /// A missing or wrong API key (`source` holds the address; the key is never kept).
        case authFailed = "auth_failed"
        case cardRegistered = "card_registered"
        case cardUpdated = "card_updated"
        case cardDeleted = "card_deleted"
        /// A refused registry change (another program's card, `issuer: local` by a non-admin, ...).
        case cardChangeRefused = "card_change_refused"
        case cardsImported = "cards_imported"
        case adminRead = "admin_read"
        case vaultPut = "vault_put"
        case vaultDeleted = "vault_deleted"
        case vaultRotated = "vault_rotated"
        /// An admin paused or resumed an issuer (`issuer` in the detail).
        case issuerPaused = "issuer_paused"
        case issuerResumed = "issuer_resumed"
        /// A config reload applied (`trigger`, `file_sha256`, `generation`, `restart_required`) or
        /// refused (`config_reload_failed`, with `problems`): by an admin client or a signal.
        case configReloaded = "config_reloaded"
        case configReloadFailed = "config_reload_failed"
        /// `store archive` moved a page of events recorded before a time to a file and deleted
        /// them from the store (`before`, `table`, `written`, `deleted`, `first_id`, `last_id`,
        /// `file`, `file_sha256` in the detail), in the deletion's transaction.
        case eventsArchived = "events_archived"
        /// The purge deleted an expired Idempotency-Key claim whose request never finished (its
        /// instance died, or its outcome was unknown): `client`, `provisioning_id` (when the
        /// claim named it) and `claimed_at` in the detail, never the key. The last trace that
        /// the request was under way, in the purge's transaction (the multi-instance audit: a
        /// killed instance's call left only its claim, which the purge then removed).
        case idempotencyClaimUnfinished = "idempotency_claim_unfinished"
        /// The purge deleted a wallet token's transition hold that lapsed without being let go
        /// (actor `gateway:purge`), or a request took such a hold over first (`gateway:hold`, with
        /// `taken_over_by`): its request ended without releasing it, so its instance died between
        /// taking the hold and writing the request's trail (or the store refused the release). The
        /// card in `card_id`; `issuer`, `token_id`, `provisioning_id` (the holder) and `held_until`
        /// in the detail. When `GET /v1/provisionings/{id}` has no issuer attempt for it, the issuer
        /// may have applied the transition with no audit event: list the card's tokens.
        case tokenTransitionUnfinished = "token_transition_unfinished"
    }

    /// Assigned by the store, increasing; 0 before it is stored.
    public var id: Int64
    public var at: Date
    public var kind: Kind
    /// A client id, `cli:<user>` for the command line, `signal:SIGHUP`, or `anonymous`.
    public var actor: String
    /// The caller's address for API requests.
    public var source: String?
    public var cardID: CardID?
    /// Short facts: `before_issuer`, `after_program`, `path`, `count`, `reason`, ...
    public var detail: [String: String]

    public init(id: Int64 = 0, at: Date, kind: Kind, actor: String, source: String? = nil, cardID: CardID? = nil,
                detail: [String: String] = [:]) {
        self.id = id
        self.at = at
        self.kind = kind
        self.actor = actor
        self.source = source
        self.cardID = cardID
        self.detail = detail
    }
}

public struct SecurityEventQuery: Sendable, Equatable {
    public var kind: SecurityEvent.Kind?
    public var actor: String?
    public var cardID: CardID?
    /// Events with a larger id (the previous page's last).
    public var after: Int64?
    public var limit: Int
    public init(kind: SecurityEvent.Kind? = nil, actor: String? = nil, cardID: CardID? = nil, after: Int64? = nil, limit: Int = 100) {
        self.kind = kind
        self.actor = actor
        self.cardID = cardID
        self.after = after
        self.limit = limit
    }
}

/// What the registry refuses whatever the caller's rights.
public enum CardRegistryError: Error, Sendable, Equatable {
    /// Another card already has this issuer and issuer reference: one issuer account's card
    /// belongs to exactly one gateway card, so no tenant can point a card of its own at it.
    case issuerReferenceInUse
}
