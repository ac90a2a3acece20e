//! Parsing command-line values: addresses, lengths and byte strings.
//!
//! Functions return `Result<_, String>` so clap can use them as value parsers and print the
//! message under the argument's name.

/// Parses a `u32`: decimal, `0x` hex, `0b` binary or `0o` octal, with `_` separators allowed
/// (`0x1003_f000`).
pub fn parse_u32(s: &str) -> Result<u32, String> {
    let u = parse_u64(s)?;
    u32::try_from(u).map_err(|_| format!("`{s}` does not fit in 32 bits"))
}

/// Parses a `u64` in the forms [`parse_u32`] accepts.
pub fn parse_u64(s: &str) -> Result<u64, String> {
    let t: String = s.trim().chars().filter(|&c| c != '_').collect();
    let lower = t.to_ascii_lowercase();
    let (digits, radix) = if let Some(h) = lower.strip_prefix("0x") {
        (h, 16)
    } else if let Some(b) = lower.strip_prefix("0b") {
        (b, 2)
    } else if let Some(o) = lower.strip_prefix("0o") {
        (o, 8)
    } else {
        (lower.as_str(), 10)
    };
    if digits.is_empty() {
        return Err(format!("`{s}` is not a number"));
    }
    u64::from_str_radix(digits, radix)
        .map_err(|e| format!("`{s}` is not a number ({e}); use e.g. 4096 or 0x1000"))
}

/// Parses a 16-bit mask (ports, layers) in the forms [`parse_u64`] accepts (`0x0f`).
pub fn parse_mask16(s: &str) -> Result<u16, String> {
    let v = parse_u64(s)?;
    u16::try_from(v).map_err(|_| format!("`{s}` is not a 16-bit mask; write it like 0x0f"))
}

/// Parses a length in bytes: a number as [`parse_u64`], optionally with `K`/`KiB` or
/// `M`/`MiB` (powers of 1024).
pub fn parse_len(s: &str) -> Result<usize, String> {
    let t = s.trim();
    let (num, mul) = [("KiB", 1024u64), ("MiB", 1 << 20), ("K", 1024), ("M", 1 << 20), ("k", 1024)]
        .iter()
        .find_map(|(suffix, mul)| t.strip_suffix(suffix).map(|n| (n, *mul)))
        .unwrap_or((t, 1));
    let n = parse_u64(num)?.checked_mul(mul).ok_or_else(|| format!("`{s}` is too large"))?;
    usize::try_from(n).map_err(|_| format!("`{s}` is too large"))
}

/// Parses a hex byte string: `deadbeef`, `de:ad:be:ef`, `de ad be ef`, `0xdeadbeef` or
/// `de,ad,be,ef`. Bytes are taken in the order written.
pub fn parse_hex_bytes(s: &str) -> Result<Vec<u8>, String> {
    let t = s.trim();
    let t = t.strip_prefix("0x").or_else(|| t.strip_prefix("0X")).unwrap_or(t);
    let digits: String = t.chars().filter(|c| !matches!(c, ' ' | ':' | ',' | '_' | '-')).collect();
    if digits.is_empty() {
        return Err("no bytes given; write them as hex, e.g. `deadbeef` or `de:ad:be:ef`".into());
    }
    if digits.len() % 2 != 0 {
        return Err(format!("`{s}` has an odd number of hex digits; write every byte as two digits"));
    }
    (0..digits.len())
        .step_by(2)
        .map(|i| {
            u8::from_str_radix(&digits[i..i + 2], 16)
                .map_err(|_| format!("`{}` in `{s}` is not a hex byte", &digits[i..i + 2]))
        })
        .collect()
}

/// A byte string parsed by [`parse_hex_bytes`], as one command-line value.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct HexBytes(pub Vec<u8>);

impl std::str::FromStr for HexBytes {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        parse_hex_bytes(s).map(HexBytes)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn masks_parse_in_hex_and_decimal() {
        assert_eq!(parse_mask16("0x0f"), Ok(15));
        assert_eq!(parse_mask16("7"), Ok(7));
        assert!(parse_mask16("0x10000").unwrap_err().contains("16-bit mask"));
        assert!(parse_mask16("ports").is_err());
    }

    #[test]
    fn numbers() {
        assert_eq!(parse_u32("4096"), Ok(4096));
        assert_eq!(parse_u32("0x1003_F000"), Ok(0x1003_f000));
        assert_eq!(parse_u32("0b101"), Ok(5));
        assert_eq!(parse_u32("0o17"), Ok(15));
        assert!(parse_u32("0x1_0000_0000").unwrap_err().contains("32 bits"));
        assert!(parse_u32("0x").is_err());
        assert!(parse_u32("twelve").unwrap_err().contains("not a number"));
        assert_eq!(parse_len("4K"), Ok(4096));
        assert_eq!(parse_len("1MiB"), Ok(1 << 20));
        assert_eq!(parse_len("0x40"), Ok(64));
    }

    #[test]
    fn hex_bytes() {
        assert_eq!(parse_hex_bytes("deadbeef"), Ok(vec![0xde, 0xad, 0xbe, 0xef]));
        assert_eq!(parse_hex_bytes("de:ad:BE:ef"), Ok(vec![0xde, 0xad, 0xbe, 0xef]));
        assert_eq!(parse_hex_bytes("0x01 02,03"), Ok(vec![1, 2, 3]));
        assert!(parse_hex_bytes("abc").unwrap_err().contains("odd"));
        assert!(parse_hex_bytes("zz").unwrap_err().contains("not a hex byte"));
        assert!(parse_hex_bytes("").is_err());
        assert_eq!("0102".parse::<HexBytes>(), Ok(HexBytes(vec![1, 2])));
    }
}
