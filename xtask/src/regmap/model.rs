//! The register-map source model: `hdl/regmap/soc.toml` (memory map, slots, interrupts) and
//! one `hdl/regmap/<block>.toml` per register block. Loading validates everything the
//! generators rely on, so a bad source fails here with the file and register named.

use anyhow::{bail, ensure, Context, Result};
use serde::Deserialize;
use std::path::Path;

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SocFile {
    pub soc: SocInfo,
    pub region: Vec<Region>,
    pub block: Vec<SlotRef>,
    pub irq: Vec<Irq>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SocInfo {
    pub name: String,
    pub slot_bytes: u32,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Region {
    pub name: String,
    pub base: u32,
    pub size: u32,
    pub desc: String,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SlotRef {
    pub name: String,
    pub slot: u32,
    /// False for a block whose register file is generated and tested alone but not yet
    /// instantiated in `ws_soc` (hosts then do not expect it on a board).
    #[serde(default = "yes")]
    pub in_soc: bool,
    /// Copies of the block in consecutive slots from `slot` (the SoC carries up to this many;
    /// an empty slot reads 0). Firmware gets one accessor per copy.
    #[serde(default = "one")]
    pub instances: u32,
}

fn yes() -> bool {
    true
}

fn one() -> u32 {
    1
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Irq {
    pub name: String,
    pub line: u32,
    pub desc: String,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct BlockFile {
    pub block: BlockInfo,
    #[serde(default)]
    pub reg: Vec<Reg>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct BlockInfo {
    pub name: String,
    pub id: u16,
    pub version: [u8; 2],
    pub desc: String,
    /// The block's RTL is written by hand at this path (no CSR is generated); the map still
    /// generates the Rust constants, the accessors and the reference.
    #[serde(default)]
    pub hand_rtl: Option<String>,
}

#[derive(Debug, Deserialize, Clone)]
#[serde(deny_unknown_fields)]
pub struct Reg {
    pub name: String,
    pub offset: u32,
    pub desc: String,
    #[serde(default)]
    pub read_pulse: bool,
    /// A register array: `count` copies named `NAME0`, `NAME1`, ... at `offset + i * stride`.
    /// The loader expands it, so every generator sees plain registers.
    #[serde(default)]
    pub count: Option<u32>,
    #[serde(default)]
    pub stride: Option<u32>,
    pub fields: Vec<Field>,
    /// Set by the loader on each instance of an expanded array.
    #[serde(skip)]
    pub array: Option<ArrayInstance>,
}

/// Where an expanded register sits in its array.
#[derive(Debug, Clone)]
pub struct ArrayInstance {
    /// The array's name (the instances append their index).
    pub name: String,
    pub index: u32,
    pub count: u32,
    pub stride: u32,
}

#[derive(Debug, Deserialize, Clone, Copy, PartialEq, Eq)]
#[serde(rename_all = "lowercase")]
pub enum Access {
    /// Software read/write; hardware sees the value.
    Rw,
    /// Hardware drives the value; software reads it.
    Ro,
    /// Software writes; hardware sees the value with a write strobe. Reads return 0.
    Wo,
    /// Sticky bits set by hardware, cleared by software writing 1.
    W1c,
}

#[derive(Debug, Deserialize, Clone)]
#[serde(deny_unknown_fields)]
pub struct Field {
    pub name: String,
    /// [msb, lsb]
    pub bits: [u32; 2],
    pub access: Access,
    #[serde(default)]
    pub reset: Option<u64>,
    #[serde(default)]
    pub desc: Option<String>,
}

impl Field {
    pub fn lsb(&self) -> u32 {
        self.bits[1]
    }
    pub fn width(&self) -> u32 {
        self.bits[0] - self.bits[1] + 1
    }
}

impl Reg {
    pub fn has_we(&self) -> bool {
        self.fields.iter().any(|f| matches!(f.access, Access::Rw | Access::Wo | Access::W1c))
    }
}

/// A block with its slot, as the generators use it.
#[derive(Debug)]
pub struct Block {
    pub in_soc: bool,
    pub info: BlockInfo,
    pub regs: Vec<Reg>,
    pub slot: u32,
    pub base: u32,
    pub source: String,
    /// Copies in slots `slot .. slot + instances`.
    pub instances: u32,
}

impl Block {
    pub fn id_word(&self) -> u32 {
        (self.info.id as u32) << 16 | (self.info.version[0] as u32) << 8 | self.info.version[1] as u32
    }
}

#[derive(Debug)]
pub struct RegMap {
    pub soc: SocFile,
    pub blocks: Vec<Block>,
}

/// Rust keywords a register or field name would collide with in generated code.
const RESERVED: &[&str] = &[
    "as", "break", "const", "continue", "crate", "else", "enum", "extern", "false", "fn", "for", "if",
    "impl", "in", "let", "loop", "match", "mod", "move", "mut", "pub", "ref", "return", "self", "static",
    "struct", "super", "trait", "true", "type", "unsafe", "use", "where", "while", "async", "await", "dyn",
];

fn is_ident(s: &str) -> bool {
    !RESERVED.contains(&s.to_lowercase().as_str())
        && !s.is_empty()
        && s.chars().all(|c| c.is_ascii_alphanumeric() || c == '_')
        && !s.starts_with(|c: char| c.is_ascii_digit())
}

/// Expands register arrays (`count`, `stride`) into plain registers `NAME0..NAME{count-1}`.
fn expand_arrays(rel: &str, regs: Vec<Reg>) -> Result<Vec<Reg>> {
    let mut out = Vec::with_capacity(regs.len());
    for r in regs {
        match (r.count, r.stride) {
            (None, None) => out.push(r),
            (Some(count), Some(stride)) => {
                ensure!(
                    (2..=64).contains(&count) && stride % 4 == 0 && stride != 0,
                    "{rel}: register array {}: count must be 2..=64 and stride a non-zero multiple of 4",
                    r.name
                );
                // A name that ends in a digit (K1, BETA2) takes `_` before the index.
                let sep = if r.name.ends_with(|c: char| c.is_ascii_digit()) { "_" } else { "" };
                for i in 0..count {
                    out.push(Reg {
                        name: format!("{}{sep}{i}", r.name),
                        offset: r.offset + i * stride,
                        desc: format!("{} (instance {i} of {count}.)", r.desc.trim_end_matches('.')),
                        count: None,
                        stride: None,
                        array: Some(ArrayInstance { name: r.name.clone(), index: i, count, stride }),
                        ..r.clone()
                    });
                }
            }
            _ => bail!("{rel}: register {}: `count` and `stride` go together", r.name),
        }
    }
    Ok(out)
}

pub fn load(dir: &Path) -> Result<RegMap> {
    let soc_path = dir.join("soc.toml");
    let soc: SocFile = toml::from_str(
        &std::fs::read_to_string(&soc_path).with_context(|| format!("reading {}", soc_path.display()))?,
    )
    .with_context(|| format!("parsing {}", soc_path.display()))?;
    ensure!(
        soc.soc.slot_bytes.is_power_of_two() && soc.soc.slot_bytes == 0x1000,
        "soc.toml: slot_bytes must be 0x1000 (the CSR blocks decode 12 address bits)"
    );
    let periph = soc.region.iter().find(|r| r.name == "periph").context("soc.toml: no `periph` region")?;
    let mut blocks = Vec::new();
    for sref in &soc.block {
        let rel = format!("hdl/regmap/{}.toml", sref.name);
        let path = dir.join(format!("{}.toml", sref.name));
        let file: BlockFile = toml::from_str(
            &std::fs::read_to_string(&path).with_context(|| format!("reading {}", path.display()))?,
        )
        .with_context(|| format!("parsing {}", path.display()))?;
        ensure!(
            file.block.name == sref.name,
            "{rel}: block name `{}` does not match its file name",
            file.block.name
        );
        ensure!(is_ident(&sref.name), "{rel}: block name must be an identifier");
        ensure!(
            sref.slot * soc.soc.slot_bytes < periph.size,
            "{rel}: slot {} is outside the periph region",
            sref.slot
        );
        let regs = expand_arrays(&rel, file.reg)?;
        let mut seen = std::collections::BTreeSet::new();
        for r in &regs {
            ensure!(
                is_ident(&r.name) && r.name == r.name.to_uppercase(),
                "{rel}: register `{}` must be an UPPER_SNAKE identifier",
                r.name
            );
            ensure!(r.offset % 4 == 0 && r.offset != 0 && r.offset < soc.soc.slot_bytes, "{rel}: register {} offset {:#x} must be word aligned, non-zero (0 is the ID word) and inside the slot", r.name, r.offset);
            ensure!(seen.insert(r.offset), "{rel}: two registers at offset {:#x}", r.offset);
            ensure!(!r.fields.is_empty(), "{rel}: register {} has no fields", r.name);
            let mut used = 0u64;
            for f in &r.fields {
                ensure!(
                    is_ident(&f.name) && f.name == f.name.to_lowercase(),
                    "{rel}: {}.{} must be a lower_snake identifier",
                    r.name,
                    f.name
                );
                ensure!(
                    f.bits[0] >= f.bits[1] && f.bits[0] < 32,
                    "{rel}: {}.{} bits {:?} must be [msb, lsb] within 0..31",
                    r.name,
                    f.name,
                    f.bits
                );
                let mask = ((1u64 << f.width()) - 1) << f.lsb();
                ensure!(used & mask == 0, "{rel}: {}.{} overlaps another field", r.name, f.name);
                used |= mask;
                if let Some(reset) = f.reset {
                    ensure!(
                        f.access == Access::Rw,
                        "{rel}: {}.{}: only rw fields take a reset value",
                        r.name,
                        f.name
                    );
                    ensure!(
                        reset >> f.width() == 0,
                        "{rel}: {}.{}: reset {reset:#x} does not fit in {} bits",
                        r.name,
                        f.name,
                        f.width()
                    );
                }
                if r.read_pulse {
                    ensure!(
                        f.access == Access::Ro,
                        "{rel}: {}: read_pulse registers may only hold ro fields",
                        r.name
                    );
                }
            }
        }
        let slot = sref.slot;
        ensure!(
            (1..=16).contains(&sref.instances)
                && (sref.slot + sref.instances) * soc.soc.slot_bytes <= periph.size,
            "soc.toml: block {} has {} instances: 1 to 16, inside the periph region",
            sref.name,
            sref.instances
        );
        blocks.push(Block {
            instances: sref.instances,
            in_soc: sref.in_soc,
            base: periph.base + slot * soc.soc.slot_bytes,
            slot,
            info: file.block,
            regs,
            source: rel,
        });
    }
    let mut slots = std::collections::BTreeSet::new();
    for b in &blocks {
        for slot in b.slot..b.slot + b.instances {
            ensure!(slots.insert(slot), "soc.toml: two blocks in slot {slot}");
        }
    }
    let mut ids = std::collections::BTreeSet::new();
    for b in &blocks {
        ensure!(ids.insert(b.info.id), "block id {:#06x} used twice", b.info.id);
    }
    for irq in &soc.irq {
        if irq.line >= 32 {
            bail!("soc.toml: irq {} line {} is not a CV32E40P interrupt line (0..31)", irq.name, irq.line);
        }
    }
    Ok(RegMap { soc, blocks })
}
