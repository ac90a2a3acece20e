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
    /// A MemoryX request names a layer that was never created.
    NoLayer = 11,
    /// The weight store has no free range large enough for the layer's arrays.
    StoreFull = 12,
    /// A MemoryX step out of order (not the layer's last step + 1).
    BadStep = 13,
    /// The bulk words a request waits for did not arrive in time.
    Timeout = 14,
    /// MemoryX hardware refused or failed the operation (its error code is in the log).
    DeviceFault = 15,
    /// The bulk channels are not in the mode the request needs, or cannot switch now.
    WrongMode = 16,
    /// The block the request is for is not in this board's SoC.
    NotPresent = 17,
    /// SwarmX aborted a chunk of a multi-wafer MemoryX step, and feeding it again did not
    /// succeed (the abort came mid-chunk, so part of it was applied, or it kept aborting).
    Aborted = 18,
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
            11 => Self::NoLayer,
            12 => Self::StoreFull,
            13 => Self::BadStep,
            14 => Self::Timeout,
            15 => Self::DeviceFault,
            16 => Self::WrongMode,
            17 => Self::NotPresent,
            18 => Self::Aborted,
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
            Self::NoLayer => "no such MemoryX layer: create it first (`wsctl optim` creates its layers)",
            Self::StoreFull => "the MemoryX weight store has no room for the layer: free layers or use fewer parameters",
            Self::BadStep => "MemoryX step out of order: a layer's steps run 1, 2, 3, ... (was this step already applied?)",
            Self::Timeout => "the bulk data for this request did not arrive: is the host still streaming? (`wsctl link stats`)",
            Self::DeviceFault => "MemoryX refused or failed the operation: the board log (`wsctl logs --link`) has its error code",
            Self::WrongMode => "the bulk channels are in the wrong mode or busy: send LinkMode first, with nothing in flight",
            Self::NotPresent => {
                "this board's SoC does not have that block (`wsctl info` lists the blocks it has)"
            }
            Self::Aborted => {
                "SwarmX aborted a chunk of this step and could not feed it again: `wsctl swarm events` says which port and why; the layer's step is incomplete, so reload the layer from your last checkpoint"
            }
            Self::Unknown => "unknown status code",
        }
    }
}
