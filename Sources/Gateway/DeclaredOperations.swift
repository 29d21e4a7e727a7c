/// The HTTP methods a path can be asked for. `RequestContract.declaredMethods` says which of them
/// each path of the OpenAPI document declares, so the server answers any other method on a known
/// path with 405 and `Allow` (RFC 9110, 15.5.6) instead of 404: the spec is the list.
public enum DeclaredOperations {
    /// The HTTP methods an OpenAPI path item may declare, and QUERY (RFC 9110's registry has it;
    /// OpenAPI 3.0 cannot declare it, so it always answers 405 on a known path).
    public static let methods = ["GET", "PUT", "POST", "DELETE", "OPTIONS", "HEAD", "PATCH", "TRACE", "QUERY"]
}
