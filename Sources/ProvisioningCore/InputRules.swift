import Foundation

/// The shapes ids and references must have wherever they enter (API paths, queries, bodies, the
/// CLI): bounded, printable, and unable to start a log line or steer an upstream path.
public enum InputRules {
    public static let maxCardIDLength = 128
    public static let cardIDRule = "card_id: 1 to 128 characters of A-Z, a-z, 0-9, _ - . :, not dots alone, and never a card number"
    public static let maxReferenceValueLength = 128

    /// Not dots alone: `.` and `..` are path segments to every URL tool, so a client that
    /// normalises its URLs could never reach such a card. Never a card number either
    /// (`holdsCardNumber`): an id is logged, audited and echoed, and a card number pasted as one
    /// would then be everywhere the product promises it never is.
    public static func isCardID(_ text: String) -> Bool {
        hasCardIDShape(text) && !holdsCardNumber(text)
    }

    /// `isCardID` without the card-number rule: for deleting (`cards delete`, `vault delete`) a
    /// card a version without that rule registered, and for the card list's cursor (the server's
    /// own id).
    public static func hasCardIDShape(_ text: String) -> Bool {
        !text.isEmpty && text.utf8.count <= maxCardIDLength && text.utf8.allSatisfy(isIDByte)
            && text.utf8.contains { $0 != UInt8(ascii: ".") }
    }

    /// Whether `text` holds what reads as a payment card number: 13 to 19 digits, written in one
    /// run (alone or as one group among others) or in groups (all of a run's, or all but short
    /// groups of one to three digits before or after them): the groups cards are printed in
    /// (fours, the last of one to four; Amex's 4-6-5 and Diners' 4-6-4) and fours run together
    /// (4-12, 8-8, 12-4, 4-4-8: `isCardGrouping`), joined by one or two of ` - . : _ / , +`; not
    /// starting with 0; with no letter right before or after it; and whose Luhn check digit holds
    /// (ISO/IEC 7812). Ids and headers a caller chooses are refused
    /// or replaced when they hold one. A UUID (8-4-4-4-12 hex digits, anywhere in the text) is no
    /// card's, and a run touching a letter is part of a word. Groups shorter than four before the
    /// last are a date's or a time's (`2024-11-26`), not a card's. Other numbers of that length
    /// pass the check about one time in ten, so an id that is a bare long number may be refused
    /// (the message says why); a letter right before it (`c1234...`) makes it an id.
    public static func holdsCardNumber(_ text: String) -> Bool {
        let bytes = withoutUUIDs(Array(text.utf8))
        func isDigit(_ byte: UInt8) -> Bool { (0x30...0x39).contains(byte) }
        func isLetter(_ byte: UInt8) -> Bool { (0x41...0x5A).contains(byte) || (0x61...0x7A).contains(byte) }
        func isSeparator(_ byte: UInt8) -> Bool { " -.:_/,+".utf8.contains(byte) }
        var index = 0
        while index < bytes.count {
            guard isDigit(bytes[index]), index == 0 || !(isLetter(bytes[index - 1]) || isDigit(bytes[index - 1])) else {
                index += 1
                continue
            }
            // One run: digit groups joined by one or two separators.
            var digits: [UInt8] = []
            var groups: [Int] = []
            var end = index
            while true {
                let groupStart = end
                while end < bytes.count, isDigit(bytes[end]) {
                    digits.append(bytes[end] - 0x30)
                    end += 1
                }
                groups.append(end - groupStart)
                if end + 1 < bytes.count, isSeparator(bytes[end]), isDigit(bytes[end + 1]) {
                    end += 1
                } else if end + 2 < bytes.count, isSeparator(bytes[end]), isSeparator(bytes[end + 1]), isDigit(bytes[end + 2]) {
                    end += 2
                } else {
                    break
                }
            }
            let touchesAfter = end < bytes.count && isLetter(bytes[end])
            func isCard(_ number: ArraySlice<UInt8>) -> Bool {
                (13...19).contains(number.count) && number.first != 0 && passesLuhn(Array(number))
            }
            // The whole run; a group long enough to be a card on its own (`4111111111111111_2`);
            // and a card printed in its groups with a short group (one to three digits) before or
            // after it (`4111-1111-1111-1111-1`, `1-4111 1111 1111 1111`; the input probe's, each
            // had been taken as an id). Not a part of a longer run of fours: an id of five or six
            // groups of four (a date, a time, a sequence; a printed IBAN) would be refused one time
            // in six or four (the review). A part ending with the run's last group is no card when
            // a letter follows it.
            var offset = 0
            for first in groups.indices {
                var count = 0
                for last in first..<groups.count {
                    count += groups[last]
                    guard count <= 19 else { break }
                    let whole = first == 0 && last == groups.count - 1
                    let part = first == last
                        || (groups[..<first].allSatisfy { $0 < 4 } && groups[(last + 1)...].allSatisfy { $0 < 4 })
                    if count >= 13, whole || part, !(last == groups.count - 1 && touchesAfter),
                       isCardGrouping(groups[first...last]), isCard(digits[offset..<offset + count]) {
                        return true
                    }
                }
                offset += groups[first]
            }
            index = end
        }
        return false
    }

    /// What an issuer answers for the phone to show or support staff to read (a display name, a
    /// network, an activation's comment, an address line) is passed on only when it reads as such:
    /// at most `maxLength` characters; no control character (C0, DEL, C1), line or paragraph
    /// separator, or bidirectional override (U+202A-U+202E, U+2066-U+2069: text that displays
    /// other than it reads); and, when `screeningCardNumbers`, no card number
    /// (`holdsCardNumber`). Anything else is left out (nil), not trimmed: it is not what the field
    /// is for, and the tenant's app, its logs and a replay's stored answer would all keep it. The
    /// token audit's fake TMP put a card number, terminal escapes and 20 KB in a comment.
    public static func phoneText(_ text: String?, maxLength: Int = 256, screeningCardNumbers: Bool = true) -> String? {
        guard let text, !text.isEmpty, text.utf8.count <= maxLength * 4, text.count <= maxLength else { return nil }
        for scalar in text.unicodeScalars {
            let value = scalar.value
            if value < 0x20 || (0x7F...0x9F).contains(value) || value == 0x2028 || value == 0x2029
                || (0x202A...0x202E).contains(value) || (0x2066...0x2069).contains(value) {
                return nil
            }
        }
        return screeningCardNumbers && holdsCardNumber(text) ? nil : text
    }

    /// A card's last digits as an issuer may answer them: four ASCII digits (`Character.isNumber`
    /// had taken `١٢٣٤` and `½`).
    public static func isLastFour(_ text: String) -> Bool {
        text.utf8.count == 4 && text.utf8.allSatisfy { (0x30...0x39).contains($0) }
    }

    /// One run of digits, the groups cards are printed in, or fours run together: every group but
    /// the last of 4, 8 or 12 digits, the last of 1 to 4, 8 or 12 (4-12, 8-8, 12-4, 4-4-8). Not
    /// any split: a Unix time and a counter (`1732662000-12345`, 10-5) or a date and a time
    /// (`20241126-093000`, 8-6) are ids' and keys' numbers, and one in ten would pass the Luhn check.
    private static func isCardGrouping(_ groups: ArraySlice<Int>) -> Bool {
        if groups.count == 1 { return true }
        if groups == [4, 6, 5] || groups == [4, 6, 4] { return true }
        return groups.dropLast().allSatisfy { [4, 8, 12].contains($0) } && [1, 2, 3, 4, 8, 12].contains(groups.last!)
    }

    /// `bytes` with every UUID (8-4-4-4-12 hex digits) turned into letters: a UUID's digits are
    /// no card number, whatever its first groups hold.
    static func withoutUUIDs(_ bytes: [UInt8]) -> [UInt8] {
        let shape = [8, 4, 4, 4, 12]
        let length = 36
        guard bytes.count >= length else { return bytes }
        func isHex(_ byte: UInt8) -> Bool {
            (0x30...0x39).contains(byte) || (0x41...0x46).contains(byte) || (0x61...0x66).contains(byte)
        }
        var result = bytes
        var start = 0
        while start + length <= bytes.count {
            var at = start
            var matches = true
            for (position, count) in shape.enumerated() {
                for offset in 0..<count where !isHex(bytes[at + offset]) { matches = false }
                at += count
                if position < shape.count - 1 {
                    if !matches || bytes[at] != UInt8(ascii: "-") { matches = false; break }
                    at += 1
                }
            }
            if matches {
                for offset in start..<start + length { result[offset] = UInt8(ascii: "x") }
                start += length
            } else {
                start += 1
            }
        }
        return result
    }

    /// The Luhn check over digit values, the last being the check digit.
    static func passesLuhn(_ digits: [UInt8]) -> Bool {
        var sum = 0
        for (index, digit) in digits.reversed().enumerated() {
            var value = Int(digit)
            if index % 2 == 1 { value *= 2; if value > 9 { value -= 9 } }
            sum += value
        }
        return sum % 10 == 0
    }

    /// Our own provisioning ids are `prv_` and 32 hex digits; anything of 1-64 word characters is
    /// looked up (and not found).
    public static func isProvisioningID(_ text: String) -> Bool {
        !text.isEmpty && text.utf8.count <= 64 && text.allSatisfy { $0.isASCII && ($0.isLetter || $0.isNumber || $0 == "_") }
    }

    /// Names the config and the API share (programs, issuers, clients, key ids): 1 to `maxLength`
    /// of A-Z a-z 0-9 _ - . (they appear in logs, metrics and audit rows).
    /// Never a card number (`isCardNumber`): a name is logged, audited, exported in metrics
    /// and printed by the CLI, and a card number pasted as a program (a CSV's columns shifted by
    /// one) would be everywhere card data never is (the CLI audit imported one). Only a name that
    /// is a card number and nothing else: one with a word in it (`acme-20240115093000002`) is a
    /// name, since about one long number in ten passes the Luhn check by chance.
    public static func isName(_ text: String, maxLength: Int = 64) -> Bool {
        !text.isEmpty && text.utf8.count <= maxLength && text.allSatisfy { $0.isASCII && ($0.isLetter || $0.isNumber || "_-.".contains($0)) }
            && !isCardNumber(text)
    }

    /// Whether `text` is a card number and nothing else: digits and the separators cards are
    /// written with (` - . : _ / , +`), holding one (`holdsCardNumber`). For values whose false
    /// positives would cost more than a leak is likely (names, command-line arguments): a card
    /// number pasted there is pasted alone.
    public static func isCardNumber(_ text: String) -> Bool {
        text.utf8.allSatisfy { (0x30...0x39).contains($0) || " -.:_/,+".utf8.contains($0) } && holdsCardNumber(text)
    }

    /// `field: 1 to 64 characters of ...`, the problem for a name that is not one.
    public static func nameRule(_ field: String, maxLength: Int = 64) -> String {
        "\(field): 1 to \(maxLength) characters of A-Z, a-z, 0-9, _ - ., never a card number"
    }

    /// Why an issuer reference value may not be stored, or nil. Values become upstream path
    /// segments (percent-encoded), so `/`, `..` and `%` are refused outright rather than trusted to
    /// encoding. Only printable ASCII without spaces is taken: every issuer's ids are such, and one
    /// upstream card then has one spelling, so the registry's uniqueness cannot be side-stepped
    /// with a trailing space, another Unicode normalization or look-alike digits.
    public static func referenceValueProblem(_ value: String) -> String? {
        if value.isEmpty { return "must not be empty" }
        if !value.unicodeScalars.allSatisfy({ (0x21...0x7E).contains($0.value) }) {
            return "printable ASCII without spaces or control characters"
        }
        if value.utf8.count > maxReferenceValueLength { return "at most \(maxReferenceValueLength) characters" }
        if value.contains("/") || value.contains("\\") || value.contains("..") || value == "." { return "must not hold /, \\ or .." }
        // Percent-encoded on the way out, `x%2F..%2Fcards` reaches the issuer as `x%252F..`: a
        // path only to one that decodes twice (the issuer, or a proxy in front of it). No
        // issuer's ids hold a `%`, so none is taken (the isolation audit).
        if value.contains("%") { return "must not hold %" }
        // A reference is the issuer's id of the card, taken as the issuer gives it: some let the
        // integrator choose it (Marqeta's card token), and one numeric id in ten passes the Luhn
        // check, so a reference is not screened for card numbers (the review of the CLI audit's fix).
        return nil
    }

    /// A value safe to put in a problem's detail or a log line: at most 64 characters, anything
    /// outside A-Z a-z 0-9 _ - . : shown as `?`, and a run of 8 digits (`withoutLongDigitRuns`)
    /// shown as one `?`: it may be a card number, and a name or an id the caller sent is echoed
    /// only to say which one was wrong.
    public static func short(_ text: String) -> String {
        // UUIDs aside: card ids and names are often made of them, and a value shown here is one
        // the caller sent to name a wrong field.
        if looksLikeCredential(text, uuids: false) { return "(not shown)" }
        var shown = ""
        shown.reserveCapacity(min(text.utf8.count, 64) + 3)
        var count = 0
        for character in text {
            if count == 64 { return withoutLongDigitRuns(shown) + "..." }
            count += 1
            if let byte = character.asciiValue, isIDByte(byte) {
                shown.unicodeScalars.append(Unicode.Scalar(byte))
            } else {
                shown += "?"
            }
        }
        return withoutLongDigitRuns(shown)
    }

    /// Whether `text` holds what may be a credential: an API key's or a webhook secret's marker
    /// (`sk_live`, `sk_test`, `sk-live`, `pk_live`, `rk_live`, `rk_test`, `whsec_`), a key-value
    /// pair naming one (`api_key=`, `token=`, `secret=`, `password=`), a PEM block, a JWT
    /// (`eyJ...`), a UUID (many issuers' tokens are UUIDs), or a run of 16 or more letters and
    /// digits in both cases with at least 4 digits (a random token; our own hex ids are lower
    /// case). Names, codes and ids are none of these: text that is one is not repeated in problems, logs or
    /// the CLI's output, wherever it came from (a config value, a CSV cell, an issuer's error code
    /// that echoed the gateway's own key).
    public static func looksLikeCredential(_ text: String, uuids: Bool = true) -> Bool {
        let lowered = text.lowercased()
        for marker in ["sk_live", "sk_test", "sk-live", "sk-test", "pk_live", "rk_live", "rk_test", "whsec_", "api_key=", "apikey=",
                       "token=", "secret=", "password=", "-----begin"] where lowered.contains(marker) {
            return true
        }
        if let range = text.range(of: "eyJ"), text[range.upperBound...].prefix(10).count == 10,
           text[range.upperBound...].prefix(10).allSatisfy({ $0.isASCII && ($0.isLetter || $0.isNumber || $0 == "-" || $0 == "_") }) {
            return true
        }
        let bytes = Array(text.utf8)
        if uuids, withoutUUIDs(bytes) != bytes { return true }
        var upper = 0, lower = 0, digits = 0, run = 0
        for byte in bytes + [0] {
            if (0x30...0x39).contains(byte) {
                digits += 1; run += 1
            } else if (0x41...0x5A).contains(byte) {
                upper += 1; run += 1
            } else if (0x61...0x7A).contains(byte) {
                lower += 1; run += 1
            } else {
                if run >= 16 && upper > 0 && lower > 0 && upper + lower >= 4 && digits >= 4 { return true }
                upper = 0; lower = 0; digits = 0; run = 0
            }
        }
        return false
    }

    /// `text` with each space- or quote-delimited word that `looksLikeCredential` replaced by
    /// `(not shown)`, the rest as it is: for messages that quote a value of a file.
    public static func withoutCredentials(_ text: String, uuids: Bool = true) -> String {
        guard looksLikeCredential(text, uuids: uuids) else { return text }
        var shown = ""
        var word = ""
        func flush() {
            shown += looksLikeCredential(word, uuids: uuids) ? "(not shown)" : word
            word = ""
        }
        for character in text {
            if character == " " || character == "'" || character == "\"" || character == "`" || character == "(" || character == ")" {
                flush()
                shown.append(character)
            } else {
                word.append(character)
            }
        }
        flush()
        // A marker that spans words (`Bearer sk...`, "basic ") is masked whole.
        return looksLikeCredential(shown, uuids: uuids) ? "(a value that may be a credential, not shown)" : shown
    }

    /// The one rule for text that may hold a card number: 8 digits or more with no letter between
    /// them. Anything else between two digits (a space, `-`, `.`, `,`, `+`, `_`, a tab, an escape)
    /// keeps the run going, so `4111 1111 1111 1111` and `4111+1111,1111-1111` are runs too.
    public static func hasLongDigitRun(_ text: String) -> Bool {
        // By Unicode scalar: a digit with a variation selector or a combining mark after it is
        // one `Character`, and would otherwise not count.
        var digits = 0
        for scalar in text.unicodeScalars {
            if isDigit(scalar) {
                digits += 1
                if digits >= 8 { return true }
            } else if scalar.properties.isAlphabetic {
                digits = 0
            }
        }
        return false
    }

    /// `text` with each run `hasLongDigitRun` finds (from its first digit to its last) replaced by
    /// one `?`, the rest as it is: for messages that quote what a caller sent (a header value in the
    /// generated server's errors).
    public static func withoutLongDigitRuns(_ text: String) -> String {
        var shown = String.UnicodeScalarView()
        var run = String.UnicodeScalarView()
        var between = String.UnicodeScalarView()
        var digits = 0
        func flush() {
            if digits >= 8 { shown.append("?") } else { shown.append(contentsOf: run) }
            shown.append(contentsOf: between)
            run = String.UnicodeScalarView()
            between = String.UnicodeScalarView()
            digits = 0
        }
        for scalar in text.unicodeScalars {
            if isDigit(scalar) {
                run.append(contentsOf: between)
                between = String.UnicodeScalarView()
                run.append(scalar)
                digits += 1
            } else if scalar.properties.isAlphabetic {
                flush()
                shown.append(scalar)
            } else if digits > 0 {
                between.append(scalar)
            } else {
                shown.append(scalar)
            }
        }
        flush()
        return String(shown)
    }

    /// Whether text an issuer or a caller sent may be repeated as a name or a code: at most 100
    /// characters of ASCII letters, digits and `punctuation`, and no run `hasLongDigitRun` finds.
    /// Anything else is left out whole, never trimmed into something that reads well.
    public static func readsAsCode(_ text: String, punctuation: String) -> Bool {
        guard !text.isEmpty, text.utf8.count <= 100, !hasLongDigitRun(text) else { return false }
        let allowed = Set(punctuation.utf8)
        return text.utf8.allSatisfy { byte in
            (0x30...0x39).contains(byte) || (0x41...0x5A).contains(byte) || (0x61...0x7A).contains(byte) || allowed.contains(byte)
        }
    }

    private static func isDigit(_ scalar: Unicode.Scalar) -> Bool { ("0"..."9").contains(scalar) }

    /// A-Z a-z 0-9 _ - . : (a card id's characters, and what `short` shows as it is).
    private static func isIDByte(_ byte: UInt8) -> Bool {
        switch byte {
        case UInt8(ascii: "A")...UInt8(ascii: "Z"), UInt8(ascii: "a")...UInt8(ascii: "z"), UInt8(ascii: "0")...UInt8(ascii: "9"),
             UInt8(ascii: "_"), UInt8(ascii: "-"), UInt8(ascii: "."), UInt8(ascii: ":"): true
        default: false
        }
    }
}
