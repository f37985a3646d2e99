//! Sizes as people write them for limits: `512M`, `2G`, `1048576` (bytes), or `50%` (of
//! the machine's RAM). Binary multiples: `K` is 1024 bytes, `M` 1024 K, and so on.

use std::fmt;
use std::str::FromStr;

use serde::{Deserialize, Deserializer};

/// A size as given: an amount of bytes, or a share of RAM resolved when a call starts.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Size {
    Bytes(u64),
    /// 1 to 100 percent of `MemTotal`.
    PercentOfRam(u8),
}

/// Why a size cannot be read.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("invalid size {text:?}: {why} (write it like 512M, 2G, 1048576 or 25%)")]
pub struct SizeError {
    text: String,
    why: &'static str,
}

impl Size {
    /// The size in bytes on a machine with `ram` bytes of RAM. Never 0: a share of RAM
    /// too small to be a byte is one page, since 0 means "no bound" to the kernel.
    pub fn bytes(self, ram: u64) -> u64 {
        match self {
            Size::Bytes(n) => n,
            Size::PercentOfRam(p) => (u128::from(ram) * u128::from(p) / 100)
                .try_into()
                .unwrap_or(u64::MAX)
                .max(4096),
        }
    }
}

impl FromStr for Size {
    type Err = SizeError;

    fn from_str(text: &str) -> Result<Size, SizeError> {
        let refuse = |why| SizeError {
            text: text.to_owned(),
            why,
        };
        let trimmed = text.trim();
        if let Some(percent) = trimmed.strip_suffix('%') {
            let p: u8 = percent
                .trim()
                .parse()
                .map_err(|_| refuse("a percentage is a whole number from 1 to 100"))?;
            return match p {
                1..=100 => Ok(Size::PercentOfRam(p)),
                _ => Err(refuse("a percentage is a whole number from 1 to 100")),
            };
        }
        let split = trimmed
            .find(|c: char| !c.is_ascii_digit())
            .unwrap_or(trimmed.len());
        let (digits, unit) = trimmed.split_at(split);
        let shift = match unit.trim().to_ascii_uppercase().as_str() {
            "" | "B" => 0,
            "K" | "KB" | "KIB" => 10,
            "M" | "MB" | "MIB" => 20,
            "G" | "GB" | "GIB" => 30,
            "T" | "TB" | "TIB" => 40,
            _ => return Err(refuse("unknown unit: use K, M, G or T")),
        };
        let n: u64 = digits
            .parse()
            .map_err(|_| refuse("it must start with a whole number"))?;
        if n == 0 {
            // The kernel reads a zero tmpfs size or memory limit as "no bound at all".
            return Err(refuse("0 would mean no bound at all"));
        }
        n.checked_mul(1 << shift)
            .map(Size::Bytes)
            .ok_or_else(|| refuse("too large"))
    }
}

impl fmt::Display for Size {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match *self {
            Size::PercentOfRam(p) => write!(f, "{p}%"),
            Size::Bytes(n) => f.write_str(&exact(n)),
        }
    }
}

const UNITS: [(u32, &str); 4] = [(40, "T"), (30, "G"), (20, "M"), (10, "K")];

/// `n` bytes in the largest binary unit that divides it exactly (`512M`, `1536K`): what
/// reads back as the same size.
fn exact(n: u64) -> String {
    UNITS
        .iter()
        .find(|(shift, _)| n >= 1 << shift && n % (1 << shift) == 0)
        .map_or_else(
            || n.to_string(),
            |(shift, unit)| format!("{}{unit}", n >> shift),
        )
}

/// `n` bytes as a message shows them: in the largest unit it reaches, to a tenth where
/// that is not exact (`512M`, `17.7G` for a share of RAM).
pub fn human(n: u64) -> String {
    match UNITS.iter().find(|(shift, _)| n >= 1 << shift) {
        Some((shift, unit)) if n % (1 << shift) == 0 => format!("{}{unit}", n >> shift),
        Some((shift, unit)) => format!("{:.1}{unit}", n as f64 / (1u64 << shift) as f64),
        None => n.to_string(),
    }
}

impl<'de> Deserialize<'de> for Size {
    /// A string as on the command line, or a number of bytes.
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Size, D::Error> {
        #[derive(Deserialize)]
        #[serde(untagged)]
        enum Raw {
            Number(u64),
            Text(String),
        }
        let text = match Raw::deserialize(d)? {
            Raw::Number(n) => n.to_string(),
            Raw::Text(t) => t,
        };
        text.parse().map_err(serde::de::Error::custom)
    }
}

impl serde::Serialize for Size {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.collect_str(self)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sizes_read_as_people_write_them() {
        assert_eq!("512M".parse(), Ok(Size::Bytes(512 << 20)));
        assert_eq!("2G".parse(), Ok(Size::Bytes(2 << 30)));
        assert_eq!("2gib".parse(), Ok(Size::Bytes(2 << 30)));
        assert_eq!("64k".parse(), Ok(Size::Bytes(64 << 10)));
        assert_eq!("1048576".parse(), Ok(Size::Bytes(1 << 20)));
        assert_eq!("25%".parse(), Ok(Size::PercentOfRam(25)));
        for bad in [
            "0",
            "0M",
            "0%",
            "101%",
            "-1G",
            "1.5G",
            "G",
            "12X",
            "",
            "99999999999T",
        ] {
            assert!(bad.parse::<Size>().is_err(), "{bad:?}");
        }
    }

    #[test]
    fn a_share_of_ram_resolves_against_memtotal_and_is_never_zero() {
        assert_eq!(Size::PercentOfRam(25).bytes(8 << 30), 2 << 30);
        assert_eq!(Size::PercentOfRam(1).bytes(100), 4096);
        assert_eq!(Size::Bytes(7).bytes(8 << 30), 7);
    }

    #[test]
    fn sizes_print_in_their_largest_exact_unit() {
        assert_eq!(human(512 << 20), "512M");
        assert_eq!(human(1536 << 10), "1.5M");
        assert_eq!(human(1000), "1000");
        assert_eq!(human(18_512_688 << 10), "17.7G");
        assert_eq!(Size::Bytes(1536 << 10).to_string(), "1536K");
        assert_eq!(Size::Bytes(1000).to_string(), "1000");
        assert_eq!(Size::PercentOfRam(50).to_string(), "50%");
    }

    #[test]
    fn configuration_takes_a_string_or_a_number_of_bytes() -> Result<(), serde_json::Error> {
        assert_eq!(
            serde_json::from_str::<Size>("\"2G\"")?,
            Size::Bytes(2 << 30)
        );
        assert_eq!(serde_json::from_str::<Size>("4096")?, Size::Bytes(4096));
        assert!(serde_json::from_str::<Size>("0").is_err());
        Ok(())
    }
}
