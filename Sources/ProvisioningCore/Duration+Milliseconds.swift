extension Duration {
    /// Whole milliseconds, for logs, audit records and headers; saturates at `Int64`'s bounds
    /// instead of trapping (a duration read from outside may be as long as `Duration` allows).
    public var wholeMilliseconds: Int64 { whole(perSecond: 1_000) }

    public var wholeNanoseconds: Int64 { whole(perSecond: 1_000_000_000) }

    private func whole(perSecond: Int64) -> Int64 {
        let (seconds, attoseconds) = components
        let (scaled, overflow) = seconds.multipliedReportingOverflow(by: perSecond)
        let (sum, carry) = scaled.addingReportingOverflow(attoseconds / (1_000_000_000_000_000_000 / perSecond))
        guard !overflow, !carry else { return seconds < 0 ? .min : .max }
        return sum
    }
}
