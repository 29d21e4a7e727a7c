/// Whether `condition` holds within `limit` of real time, checked every `interval`: a bound on
/// waiting for what another task, connection or process does next, never a measurement. It
/// returns as soon as the condition holds, so a bound long enough for a stalled machine costs a
/// quick one nothing. The one polling loop the test targets share.
public func eventually(
    upTo limit: Duration = .seconds(10), every interval: Duration = .milliseconds(10), _ condition: () async throws -> Bool
) async rethrows -> Bool {
    let deadline = ContinuousClock.now + limit
    while true {
        if try await condition() { return true }
        if ContinuousClock.now >= deadline { return false }
        try? await Task.sleep(for: interval)
    }
}
