import Hummingbird

/// Runs the request on the config generation serving when it arrives (`RequestScope.generation`)
/// and counts it there until its answer, so a reload never changes the clients, routing or
/// upstreams under a request in flight, and a retired generation's clients close only once its
/// last request is done.
struct ConfigGenerationMiddleware<Context: RequestContext>: RouterMiddleware {
    let live: LiveConfiguration

    func handle(_ request: Request, context: Context, next: (Request, Context) async throws -> Response) async throws -> Response {
        guard let generation = live.enter() else { return try await next(request, context) }
        defer { live.leave(generation) }
        return try await RequestScope.$generation.withValue(generation) { try await next(request, context) }
    }
}
