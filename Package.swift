// swift-tools-version: 6.1
import PackageDescription

let package = Package(
    name: "provisioning-gateway",
    platforms: [.macOS(.v15)],
    products: [
        .executable(name: "provisioning-gateway", targets: ["provisioning-gateway"]),
        .executable(name: "wallet-crypto-bench", targets: ["wallet-crypto-bench"]),
        .executable(name: "request-path-bench", targets: ["request-path-bench"]),
        .executable(name: "gateway-soak", targets: ["gateway-soak"]),
        .executable(name: "proxy-floor", targets: ["proxy-floor"]),
        .library(name: "ProvisioningGatewayClient", targets: ["ProvisioningGatewayClient"]),
    ],
    traits: [
        // Off by default, so `swift run` and `swift test` need nothing but Swift; production builds
        // turn it on (`swift build -c release --traits Jemalloc`, README "A production build").
        .trait(
            name: "Jemalloc",
            description: "Link jemalloc (Debian: libjemalloc-dev) as the process's malloc: the gateway and its benchmarks."),
    ],
    dependencies: [
        .package(url: "https://github.com/hummingbird-project/hummingbird", from: "2.28.1"),
        .package(url: "https://github.com/apple/swift-openapi-generator", from: "1.14.3"),
        .package(url: "https://github.com/apple/swift-openapi-runtime", from: "1.13.4"),
        .package(url: "https://github.com/hummingbird-project/swift-openapi-hummingbird", from: "2.1.0"),
        .package(url: "https://github.com/swift-server/async-http-client", from: "1.37.0"),
        .package(url: "https://github.com/swift-server/swift-openapi-async-http-client", from: "1.5.0"),
        .package(url: "https://github.com/apple/swift-crypto", from: "4.5.2"),
        .package(url: "https://github.com/jpsim/Yams", from: "6.2.2"),
        .package(url: "https://github.com/apple/swift-argument-parser", from: "1.8.2"),
        .package(url: "https://github.com/apple/swift-log", from: "1.16.2"),
        .package(url: "https://github.com/swift-server/swift-service-lifecycle", from: "2.13.0"),
        .package(url: "https://github.com/apple/swift-nio", from: "2.101.2"),
        .package(url: "https://github.com/apple/swift-nio-ssl", from: "2.37.6"),
        .package(url: "https://github.com/apple/swift-nio-extras", from: "1.35.2"),
        .package(url: "https://github.com/apple/swift-http-types", from: "1.8.0"),
        .package(url: "https://github.com/groue/GRDB.swift", from: "7.10.0"),
        .package(url: "https://github.com/vapor/postgres-nio", from: "1.33.2"),
        .package(url: "https://github.com/swiftcsv/SwiftCSV", from: "0.10.0"),
        .package(url: "https://github.com/swiftlang/swift-subprocess", from: "1.0.2"),
        .package(url: "https://github.com/apple/swift-certificates", from: "1.21.1"),
        .package(url: "https://github.com/apple/swift-asn1", from: "1.7.4"),
        .package(url: "https://github.com/apple/swift-metrics", from: "2.13.0"),
        .package(url: "https://github.com/swift-server/swift-prometheus", from: "2.4.1"),
        .package(url: "https://github.com/apple/swift-distributed-tracing", from: "1.7.3"),
        // OTLP/HTTP (protobuf over async-http-client, already a dependency) only: the gRPC trait would add grpc-swift.
        .package(url: "https://github.com/swift-otel/swift-otel", from: "1.6.0", traits: ["OTLPHTTP"]),
    ],
    targets: [
        .target(
            name: "ByteText"
        ),
        // jemalloc's header and library, with the trait `Jemalloc` only (GatewayServer imports it).
        .systemLibrary(name: "CJemalloc"),
        .target(
            name: "ProvisioningCore",
            dependencies: ["ByteText"]
        ),
        .target(
            name: "PEMFiles",
            dependencies: ["ProvisioningCore", .product(name: "NIOSSL", package: "swift-nio-ssl")]
        ),
        .target(
            name: "ProvisioningAPI",
            dependencies: [
                .product(name: "OpenAPIRuntime", package: "swift-openapi-runtime"),
            ],
            resources: [.copy("openapi.yaml")],
            plugins: [.plugin(name: "OpenAPIGenerator", package: "swift-openapi-generator")]
        ),
        // The Swift client, generated from the same spec (Sources/ProvisioningGatewayClient/openapi.yaml is a symlink).
        .target(
            name: "ProvisioningGatewayClient",
            dependencies: [
                .product(name: "OpenAPIRuntime", package: "swift-openapi-runtime"),
                .product(name: "OpenAPIAsyncHTTPClient", package: "swift-openapi-async-http-client"),
                .product(name: "AsyncHTTPClient", package: "async-http-client"),
                .product(name: "HTTPTypes", package: "swift-http-types"),
            ],
            plugins: [.plugin(name: "OpenAPIGenerator", package: "swift-openapi-generator")]
        ),
        .target(
            name: "Issuers",
            dependencies: [
                "ByteText",
                "PEMFiles",
                "ProvisioningCore",
                "WalletCrypto",
                .product(name: "Crypto", package: "swift-crypto"),
                .product(name: "Logging", package: "swift-log"),
                .product(name: "NIOConcurrencyHelpers", package: "swift-nio"),
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOFoundationCompat", package: "swift-nio"),
                .product(name: "NIOHTTP1", package: "swift-nio"),
                .product(name: "NIOPosix", package: "swift-nio"),
                .product(name: "NIOSSL", package: "swift-nio-ssl"),
                .product(name: "NIOTLS", package: "swift-nio"),
            ]
        ),
        .target(
            name: "WalletCrypto",
            dependencies: [
                "ByteText",
                .product(name: "Crypto", package: "swift-crypto"),
                .product(name: "X509", package: "swift-certificates"),
                .product(name: "SwiftASN1", package: "swift-asn1"),
            ],
            resources: [.copy("AppleRootCA-G3.cer")]
        ),
        .target(
            name: "GatewayStore",
            dependencies: [
                "PEMFiles",
                "ProvisioningCore",
                .product(name: "GRDB", package: "GRDB.swift"),
                // SQLite's C API, for the busy timeout of a commit on a request's thread.
                .product(name: "GRDBSQLite", package: "GRDB.swift"),
                .product(name: "PostgresNIO", package: "postgres-nio"),
                .product(name: "NIOSSL", package: "swift-nio-ssl"),
                .product(name: "Logging", package: "swift-log"),
                .product(name: "ServiceLifecycle", package: "swift-service-lifecycle"),
                .product(name: "NIOFoundationCompat", package: "swift-nio"),
            ]
        ),
        .target(
            name: "Sandbox",
            dependencies: [
                "ByteText",
                "WalletCrypto",
                .product(name: "X509", package: "swift-certificates"),
                .product(name: "SwiftASN1", package: "swift-asn1"),
                .product(name: "Hummingbird", package: "hummingbird"),
                .product(name: "Crypto", package: "swift-crypto"),
                .product(name: "Logging", package: "swift-log"),
                .product(name: "NIOFoundationCompat", package: "swift-nio"),
                .product(name: "HTTPTypes", package: "swift-http-types"),
                .product(name: "ServiceLifecycle", package: "swift-service-lifecycle"),
            ]
        ),
        .target(
            name: "Gateway",
            dependencies: [
                "ByteText",
                "ProvisioningCore",
                "Issuers",
                "GatewayStore",
                "WalletCrypto",
                .product(name: "X509", package: "swift-certificates"),
                .product(name: "SwiftASN1", package: "swift-asn1"),
                .product(name: "SwiftCSV", package: "SwiftCSV"),
                .product(name: "Crypto", package: "swift-crypto"),
                .product(name: "Logging", package: "swift-log"),
                .product(name: "Yams", package: "Yams"),
                .product(name: "Metrics", package: "swift-metrics"),
                .product(name: "Prometheus", package: "swift-prometheus"),
                .product(name: "Tracing", package: "swift-distributed-tracing"),
            ]
        ),
        .target(
            name: "GatewayServer",
            dependencies: [
                "ByteText",
                "PEMFiles",
                "Gateway",
                "GatewayStore",
                "ProvisioningAPI",
                .product(name: "Hummingbird", package: "hummingbird"),
                .product(name: "HummingbirdCore", package: "hummingbird"),
                .product(name: "HummingbirdTLS", package: "hummingbird"),
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOSSL", package: "swift-nio-ssl"),
                .product(name: "NIOHTTP1", package: "swift-nio"),
                .product(name: "NIOHTTPTypes", package: "swift-nio-extras"),
                .product(name: "OpenAPIHummingbird", package: "swift-openapi-hummingbird"),
                .product(name: "OpenAPIRuntime", package: "swift-openapi-runtime"),
                .product(name: "ServiceLifecycle", package: "swift-service-lifecycle"),
                .product(name: "UnixSignals", package: "swift-service-lifecycle"),
                .product(name: "HTTPTypes", package: "swift-http-types"),
                .product(name: "Tracing", package: "swift-distributed-tracing"),
                .product(name: "OTel", package: "swift-otel"),
                .target(name: "CJemalloc", condition: .when(traits: ["Jemalloc"])),
            ]
        ),
        .target(
            name: "SandboxGateway",
            dependencies: [
                "GatewayServer",
                "Gateway",
                "ProvisioningAPI",
                "ProvisioningCore",
                "Sandbox",
                "WalletCrypto",
                .product(name: "Crypto", package: "swift-crypto"),
                .product(name: "X509", package: "swift-certificates"),
                .product(name: "Logging", package: "swift-log"),
                .product(name: "ServiceLifecycle", package: "swift-service-lifecycle"),
            ]
        ),
        .executableTarget(
            name: "gateway-soak",
            dependencies: [
                "ProvisioningGatewayClient",
                .product(name: "ArgumentParser", package: "swift-argument-parser"),
                .product(name: "AsyncHTTPClient", package: "async-http-client"),
                .product(name: "OpenAPIRuntime", package: "swift-openapi-runtime"),
            ]
        ),
        .executableTarget(
            name: "provisioning-gateway",
            dependencies: [
                "GatewayServer",
                "SandboxGateway",
                "ProvisioningCore",
                .product(name: "ArgumentParser", package: "swift-argument-parser"),
                .product(name: "Logging", package: "swift-log"),
                .product(name: "ServiceLifecycle", package: "swift-service-lifecycle"),
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOPosix", package: "swift-nio"),
            ]
        ),
        // The stack's floor for scripts/bench-gateway.sh: forwarding alone, on SwiftNIO, on Hummingbird with
        // AsyncHTTPClient, and on Hummingbird with the connectors' UpstreamHTTP.
        .executableTarget(
            name: "proxy-floor",
            dependencies: [
                "Issuers",
                "ProvisioningCore",
                .product(name: "Hummingbird", package: "hummingbird"),
                .product(name: "AsyncHTTPClient", package: "async-http-client"),
                .product(name: "Logging", package: "swift-log"),
                .product(name: "NIOCore", package: "swift-nio"),
                .product(name: "NIOFoundationCompat", package: "swift-nio"),
                .product(name: "NIOHTTP1", package: "swift-nio"),
                .product(name: "NIOPosix", package: "swift-nio"),
            ],
            // The same allocator as the gateway it is the floor of.
            linkerSettings: [.linkedLibrary("jemalloc", .when(traits: ["Jemalloc"]))]
        ),
        .executableTarget(
            name: "request-path-bench",
            dependencies: ["Gateway", "GatewayStore", "ProvisioningAPI", "ProvisioningCore"],
            linkerSettings: [.linkedLibrary("jemalloc", .when(traits: ["Jemalloc"]))]
        ),
        .executableTarget(
            name: "wallet-crypto-bench",
            dependencies: ["WalletCrypto", .product(name: "Crypto", package: "swift-crypto")]
        ),
        .testTarget(
            name: "ByteTextTests",
            dependencies: ["ByteText"]
        ),
        .testTarget(
            name: "PEMFilesTests",
            dependencies: ["PEMFiles", "ProvisioningCore"]
        ),
        .testTarget(
            name: "ProvisioningCoreTests",
            dependencies: ["ProvisioningCore"]
        ),
        .testTarget(
            name: "IssuersTests",
            dependencies: ["Issuers", "Sandbox", "GatewayTestSupport", .product(name: "Hummingbird", package: "hummingbird"),
                           .product(name: "HummingbirdTLS", package: "hummingbird"), .product(name: "NIOFoundationCompat", package: "swift-nio"),
                           .product(name: "NIOConcurrencyHelpers", package: "swift-nio"), .product(name: "NIOHTTP1", package: "swift-nio"),
                           .product(name: "NIOPosix", package: "swift-nio"), .product(name: "NIOSSL", package: "swift-nio-ssl"),
                           .product(name: "ServiceLifecycle", package: "swift-service-lifecycle")],
            resources: [.copy("Fixtures")]
        ),
        .testTarget(
            name: "SandboxTests",
            dependencies: ["Sandbox", .product(name: "AsyncHTTPClient", package: "async-http-client"), .product(name: "NIOFoundationCompat", package: "swift-nio"), .product(name: "NIOHTTP1", package: "swift-nio")]
        ),
        .target(
            name: "GatewayTestSupport",
            dependencies: [
                "Gateway",
                "ProvisioningCore",
                .product(name: "Subprocess", package: "swift-subprocess"),
                .product(name: "GRDB", package: "GRDB.swift"),
                .product(name: "Crypto", package: "swift-crypto"),
                .product(name: "X509", package: "swift-certificates"),
                .product(name: "SwiftASN1", package: "swift-asn1"),
            ],
            path: "Tests/GatewayTestSupport"
        ),
        .testTarget(
            name: "WalletCryptoTests",
            dependencies: ["WalletCrypto", "Sandbox", .product(name: "Crypto", package: "swift-crypto"),
                           .product(name: "X509", package: "swift-certificates"), .product(name: "SwiftASN1", package: "swift-asn1")],
            resources: [.copy("Fixtures")]
        ),
        .testTarget(
            name: "GatewayStoreTests",
            dependencies: [
                "GatewayStore", "GatewayTestSupport",
                .product(name: "Logging", package: "swift-log"),
                .product(name: "GRDB", package: "GRDB.swift"),
            ]
        ),
        .testTarget(
            name: "GatewayTests",
            dependencies: ["Gateway", "Issuers", "GatewayStore", "WalletCrypto", "GatewayTestSupport", "Sandbox", .product(name: "Crypto", package: "swift-crypto"),
                           .product(name: "GRDB", package: "GRDB.swift")]
        ),
        .testTarget(
            name: "GatewayServerTests",
            dependencies: [
                .product(name: "NIOEmbedded", package: "swift-nio"),
                .product(name: "X509", package: "swift-certificates"),
                "ByteText",
                "GatewayServer",
                "ProvisioningGatewayClient",
                "GatewayStore",
                "GatewayTestSupport",
                "Sandbox",
                "SandboxGateway",
                "WalletCrypto",
                .product(name: "GRDB", package: "GRDB.swift"),
                .product(name: "HummingbirdTesting", package: "hummingbird"),
                .product(name: "HTTPTypes", package: "swift-http-types"),
                .product(name: "NIOFoundationCompat", package: "swift-nio"),
                .product(name: "NIOPosix", package: "swift-nio"),
                .product(name: "NIOSSL", package: "swift-nio-ssl"),
                .product(name: "AsyncHTTPClient", package: "async-http-client"),
                .product(name: "ServiceLifecycle", package: "swift-service-lifecycle"),
                .product(name: "Crypto", package: "swift-crypto"),
                .product(name: "Tracing", package: "swift-distributed-tracing"),
                .product(name: "InMemoryTracing", package: "swift-distributed-tracing"),
            ]
        ),
        .testTarget(
            name: "ProvisioningGatewayClientTests",
            dependencies: [
                "ProvisioningGatewayClient",
                "GatewayTestSupport",
                "Gateway",
                "GatewayServer",
                "GatewayStore",
                "ProvisioningCore",
                "SandboxGateway",
                .product(name: "AsyncHTTPClient", package: "async-http-client"),
                .product(name: "OpenAPIRuntime", package: "swift-openapi-runtime"),
                .product(name: "OpenAPIAsyncHTTPClient", package: "swift-openapi-async-http-client"),
                .product(name: "Crypto", package: "swift-crypto"),
                .product(name: "HTTPTypes", package: "swift-http-types"),
                .product(name: "ServiceLifecycle", package: "swift-service-lifecycle"),
                .product(name: "Logging", package: "swift-log"),
            ]
        ),
        .testTarget(
            name: "provisioning-gatewayTests",
            dependencies: [
                "provisioning-gateway", "GatewayServer", "GatewayStore", "ProvisioningCore", "GatewayTestSupport",
                .product(name: "GRDB", package: "GRDB.swift"),
                .product(name: "AsyncHTTPClient", package: "async-http-client"),
                .product(name: "NIOHTTP1", package: "swift-nio"),
                .product(name: "NIOFoundationCompat", package: "swift-nio"),
                .product(name: "NIOPosix", package: "swift-nio"),
                .product(name: "NIOSSL", package: "swift-nio-ssl"),
            ]
        ),
    ],
    swiftLanguageModes: [.v6]
)
