import Foundation
import Gateway
import GatewayStore
import ProvisioningAPI
import ProvisioningCore

// Microseconds per call of the request path's CPU-bound steps that run before any store or
// issuer, on one core, for the sandbox device's Apple Pay body (Config/sandbox/apple-pay-request.json,
// or the file given second): the request-contract check (the body parsed and checked against the
// served OpenAPI document) and its parse alone; and the card read every provisioning makes, from a
// throwaway SQLite store. `bench-gateway.sh` says how a whole provisioning
// costs; this says how its own parts do, with far less noise (no network, no other process), so
// a change to one of them can be weighed in seconds. Usage: request-path-bench [seconds] [body.json]
let arguments = CommandLine.arguments.dropFirst()
let seconds = Double(arguments.first ?? "") ?? 2
let bodyPath = arguments.dropFirst().first ?? "Config/sandbox/apple-pay-request.json"
let body = try Data(contentsOf: URL(fileURLWithPath: bodyPath))
let contract = try RequestContract(spec: OpenAPISpec.yaml())
let pathParameters = ["card_id": "card_bench_1"]
func check() -> [String] {
    contract.problems(operationID: "provisionApplePay", pathParameters: pathParameters, query: [], header: { _ in [] }, body: body)
}
guard check().isEmpty else {
    FileHandle.standardError.write(Data("the body breaks the contract: \(check())\n".utf8))
    exit(1)
}

/// Runs `body` for `seconds` after a warm-up; prints and returns microseconds per call.
@discardableResult
func measure(_ name: String, _ body: () async -> Void) async -> Double {
    let clock = ContinuousClock()
    for _ in 0..<500 { await body() }
    var count = 0
    let start = clock.now
    let end = start.advanced(by: .milliseconds(Int64(seconds * 1000)))
    while clock.now < end {
        for _ in 0..<100 { await body() }
        count += 100
    }
    let elapsed = start.duration(to: clock.now)
    let micros = (Double(elapsed.components.seconds) * 1e6 + Double(elapsed.components.attoseconds) / 1e12) / Double(count)
    print(String(format: "%@_us %.2f", name, micros))
    return micros
}

print("body_bytes \(body.count)")
let parsed = try SharedJSON.decoder.decode(JSONValue.self, from: body)
// Every step is timed off the main actor (top-level code runs on it): `measure`'s closures are
// nonisolated and async, so called from the main actor each call would hop to the cooperative
// pool and back, and the hops (tens of microseconds) would be timed with the step.
await Task.detached {
    await measure("contract_check") { precondition(check().isEmpty) }
    await measure("contract_parse") { _ = try? SharedJSON.decoder.decode(JSONValue.self, from: body) }
    await measure("contract_schema") { precondition(contract.bodyProblems(operationID: "provisionApplePay", body: parsed).isEmpty) }
}.value

let storeDirectory = FileManager.default.temporaryDirectory.appendingPathComponent("request-path-bench-\(UUID().uuidString)")
defer { try? FileManager.default.removeItem(at: storeDirectory) }
let store = try SQLiteGatewayStore(path: storeDirectory.appendingPathComponent("gateway.sqlite").path)
try await store.migrate()
let card = CardRecord(id: "card_bench_1", program: "bench", issuer: "bridge",
                      issuerReference: IssuerReference(["bridge_card_id": "bridge_card_bench_1"]))
_ = try await store.putCard(card, owners: nil, event: nil)
guard try await store.card(card.id) == card else {
    FileHandle.standardError.write(Data("the card read gave another card\n".utf8))
    exit(1)
}
// Off the main actor too: the read runs where a request's would, on the cooperative pool.
_ = await Task.detached { [store, card] in
    await measure("card_read") {
        let read = try? await store.card(card.id)
        precondition(read != nil)
    }
}.value
