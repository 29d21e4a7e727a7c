import Foundation
import Gateway
import ProvisioningAPI
import ProvisioningCore

// Microseconds per call of the request path's CPU-bound steps that run before any store or
// issuer, on one core, for the sandbox device's Apple Pay body (Config/sandbox/apple-pay-request.json,
// or the file given second): the request-contract check (the body parsed and checked against the
// served OpenAPI document) and its parse alone. `bench-gateway.sh` says how a whole provisioning
// costs; this says how its own parts do, with far less noise (no network, no other process), so
// a change to one of them can be weighed in seconds. Usage: request-path-bench [seconds] [body.json]
let arguments = CommandLine.arguments.dropFirst()
let seconds = Double(arguments.first ?? "") ?? 2
let bodyPath = arguments.dropFirst().first ?? "Config/sandbox/apple-pay-request.json"
let body = try Data(contentsOf: URL(fileURLWithPath: bodyPath))
let contract = try RequestContract(spec: OpenAPISpec.yaml())
let pathParameters = ["card_id": "card_bench_1"]
func check() -> [String] {
    contract.problems(operationID: "provisionApplePay", pathParameters: pathParameters, query: [], header: { _ in nil }, body: body)
}
guard check().isEmpty else {
    FileHandle.standardError.write(Data("the body breaks the contract: \(check())\n".utf8))
    exit(1)
}

/// Runs `body` for `seconds` after a warm-up; prints and returns microseconds per call.
@discardableResult
func measure(_ name: String, _ body: () -> Void) -> Double {
    let clock = ContinuousClock()
    for _ in 0..<500 { body() }
    var count = 0
    let start = clock.now
    let end = start.advanced(by: .milliseconds(Int64(seconds * 1000)))
    while clock.now < end {
        for _ in 0..<100 { body() }
        count += 100
    }
    let elapsed = start.duration(to: clock.now)
    let micros = (Double(elapsed.components.seconds) * 1e6 + Double(elapsed.components.attoseconds) / 1e12) / Double(count)
    print(String(format: "%@_us %.2f", name, micros))
    return micros
}

print("body_bytes \(body.count)")
measure("contract_check") { precondition(check().isEmpty) }
measure("contract_parse") { _ = try? SharedJSON.decoder.decode(JSONValue.self, from: body) }
let parsed = try SharedJSON.decoder.decode(JSONValue.self, from: body)
measure("contract_schema") { precondition(contract.bodyProblems(operationID: "provisionApplePay", body: parsed).isEmpty) }
