//! A few RV32I instruction encoders, so tests and the bench can hand-write small RAM programs
//! without a RISC-V toolchain (RISC-V Unprivileged ISA §2, "RV32I Base Integer Instruction
//! Set", base opcode map in §34).

/// Integer register numbers by ABI name.
#[allow(missing_docs)]
pub mod reg {
    pub const ZERO: u32 = 0;
    pub const RA: u32 = 1;
    pub const SP: u32 = 2;
    pub const T0: u32 = 5;
    pub const T1: u32 = 6;
    pub const T2: u32 = 7;
    pub const S0: u32 = 8;
    pub const S1: u32 = 9;
    pub const A0: u32 = 10;
    pub const A1: u32 = 11;
    pub const A2: u32 = 12;
    pub const S2: u32 = 18;
    pub const S3: u32 = 19;
}

fn r(op: u32, rd: u32, f3: u32, rs1: u32, rs2: u32, f7: u32) -> u32 {
    op | rd << 7 | f3 << 12 | rs1 << 15 | rs2 << 20 | f7 << 25
}

fn i(op: u32, rd: u32, f3: u32, rs1: u32, imm: i32) -> u32 {
    op | rd << 7 | f3 << 12 | rs1 << 15 | ((imm as u32) & 0xfff) << 20
}

fn s(op: u32, f3: u32, rs1: u32, rs2: u32, imm: i32) -> u32 {
    let imm = imm as u32;
    op | (imm & 0x1f) << 7 | f3 << 12 | rs1 << 15 | rs2 << 20 | ((imm >> 5) & 0x7f) << 25
}

fn b(f3: u32, rs1: u32, rs2: u32, off: i32) -> u32 {
    let o = off as u32;
    0x63 | ((o >> 11) & 1) << 7
        | ((o >> 1) & 0xf) << 8
        | f3 << 12
        | rs1 << 15
        | rs2 << 20
        | ((o >> 5) & 0x3f) << 25
        | ((o >> 12) & 1) << 31
}

/// `lui rd, imm20` (rd = imm20 << 12).
pub fn lui(rd: u32, imm20: u32) -> u32 {
    0x37 | rd << 7 | (imm20 & 0xf_ffff) << 12
}

/// `addi rd, rs1, imm`.
pub fn addi(rd: u32, rs1: u32, imm: i32) -> u32 {
    i(0x13, rd, 0, rs1, imm)
}

/// `andi rd, rs1, imm`.
pub fn andi(rd: u32, rs1: u32, imm: i32) -> u32 {
    i(0x13, rd, 7, rs1, imm)
}

/// `add rd, rs1, rs2`.
pub fn add(rd: u32, rs1: u32, rs2: u32) -> u32 {
    r(0x33, rd, 0, rs1, rs2, 0)
}

/// `lw rd, imm(rs1)`.
pub fn lw(rd: u32, rs1: u32, imm: i32) -> u32 {
    i(0x03, rd, 2, rs1, imm)
}

/// `sw rs2, imm(rs1)`.
pub fn sw(rs2: u32, rs1: u32, imm: i32) -> u32 {
    s(0x23, 2, rs1, rs2, imm)
}

/// `beq rs1, rs2, off` (byte offset from this instruction).
pub fn beq(rs1: u32, rs2: u32, off: i32) -> u32 {
    b(0, rs1, rs2, off)
}

/// `bne rs1, rs2, off`.
pub fn bne(rs1: u32, rs2: u32, off: i32) -> u32 {
    b(1, rs1, rs2, off)
}

/// `blt rs1, rs2, off`.
pub fn blt(rs1: u32, rs2: u32, off: i32) -> u32 {
    b(4, rs1, rs2, off)
}

/// `bge rs1, rs2, off`.
pub fn bge(rs1: u32, rs2: u32, off: i32) -> u32 {
    b(5, rs1, rs2, off)
}

/// `jal rd, off`.
pub fn jal(rd: u32, off: i32) -> u32 {
    let o = off as u32;
    0x6f | rd << 7
        | ((o >> 12) & 0xff) << 12
        | ((o >> 11) & 1) << 20
        | ((o >> 1) & 0x3ff) << 21
        | ((o >> 20) & 1) << 31
}

/// `j off` (`jal x0, off`); `j(0)` is the `j .` idle loop.
pub fn j(off: i32) -> u32 {
    jal(reg::ZERO, off)
}

/// `wfi`.
pub fn wfi() -> u32 {
    0x1050_0073
}

/// Loads a 32-bit constant into `rd` (`lui` + `addi`, 2 words).
pub fn li(rd: u32, value: u32) -> [u32; 2] {
    let lo = ((value & 0xfff) as i32) << 20 >> 20;
    let hi = value.wrapping_sub(lo as u32) >> 12;
    [lui(rd, hi), addi(rd, rd, lo)]
}

#[cfg(test)]
mod tests {
    use super::reg::*;
    use super::*;

    #[test]
    fn encodes_known_instructions() {
        // Reference encodings from the GNU assembler.
        assert_eq!(j(0), 0x0000_006f);
        assert_eq!(lui(T0, 0x10000), 0x1000_02b7);
        assert_eq!(addi(T0, ZERO, 16), 0x0100_0293);
        assert_eq!(sw(T0, S1, 16), 0x0054_a823);
        assert_eq!(lw(T0, S0, 8), 0x0084_2283);
        assert_eq!(bge(T0, ZERO, -4), 0xfe02_dee3);
        assert_eq!(andi(T0, T0, 0xff), 0x0ff2_f293);
        assert_eq!(jal(ZERO, -16), 0xff1f_f06f);
        assert_eq!(li(A0, 0x1234_5fff), [lui(A0, 0x12346), addi(A0, A0, -1)]);
    }
}
