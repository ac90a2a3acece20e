//! Status codes: the first byte of every response payload.

/// Outcome of a request, as the device reports it. Every refusal names what to fix.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
#[repr(u8)]
pub enum Status {
    /// The request succeeded.
    Ok = 0,
    /// The opcode is not one this firmware knows.
    UnknownOpcode = 1,
    /// A length field or the payload size is wrong for this command.
    BadLength = 2,
    /// The address range lies outside the window the firmware allows for this access.
    OutOfWindow = 3,
    /// The address or length is not aligned as the command requires.
    Misaligned = 4,
    /// The frame's CRC-32C did not match; it was dropped.
    BadCrc = 5,
    /// The frame's protocol version is not the device's.
    BadVersion = 6,
    /// The frame declared a payload longer than the protocol allows.
    FrameTooLong = 7,
    /// An argument is outside its allowed range.
    BadArgument = 8,
    /// The boot-ROM loader refused an image header or image; `LoaderInfo` says why.
    BadImage = 9,
    /// `LoadData` or `LoadBoot` before an accepted `LoadBegin`.
    NoImage = 10,
    /// A status byte this host does not know.
    Unknown = 0xff,
}

impl Status {
    /// Maps a wire byte to a status; unknown values become [`Status::Unknown`].
    pub fn from_u8(v: u8) -> Self {
        match v {
            0 => Self::Ok,
            1 => Self::UnknownOpcode,
            2 => Self::BadLength,
            3 => Self::OutOfWindow,
            4 => Self::Misaligned,
            5 => Self::BadCrc,
            6 => Self::BadVersion,
            7 => Self::FrameTooLong,
            8 => Self::BadArgument,
            9 => Self::BadImage,
            10 => Self::NoImage,
            _ => Self::Unknown,
        }
    }

    /// A one-line explanation for people.
    pub fn describe(self) -> &'static str {
        match self {
            Self::Ok => "ok",
            Self::UnknownOpcode => {
                "unknown opcode: host and firmware disagree on the command set; reflash matching firmware"
            }
            Self::BadLength => "bad length for this command",
            Self::OutOfWindow => "address range outside the firmware's allowed window (see `wsctl info`)",
            Self::Misaligned => "address or length not aligned to 4 bytes",
            Self::BadCrc => "frame CRC mismatch: the link corrupted a frame",
            Self::BadVersion => "protocol version mismatch between host and firmware",
            Self::FrameTooLong => "frame longer than the protocol maximum",
            Self::BadArgument => "argument out of range",
            Self::BadImage => "the boot ROM refused the image (`LoaderInfo` gives the reason)",
            Self::NoImage => "no image header accepted yet: send LoadBegin first",
            Self::Unknown => "unknown status code",
        }
    }
}
