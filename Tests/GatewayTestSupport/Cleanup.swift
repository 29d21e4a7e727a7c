/// Runs `body`, then `cleanup` whatever happens: a failure of `body` is what is thrown, and a
/// failing cleanup after it is ignored; after a success, a failing cleanup is thrown.
public func withCleanup<T: Sendable>(
    _ body: () async throws -> T, cleanup: () async throws -> Void
) async throws -> T {
    let result: T
    do {
        result = try await body()
    } catch {
        try? await cleanup()
        throw error
    }
    try await cleanup()
    return result
}
