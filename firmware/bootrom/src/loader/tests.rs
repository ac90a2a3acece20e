//! Host tests of the loader: the reset decision and every request, good and bad, against a
//! RAM model; refused requests must write nothing.

use super::*;
use ws_common::boot::{HEADER_ADDR, SCRATCH_BASE};
use ws_common::ctrl::cmd::{decode_response, encode_request};
use ws_common::ctrl::{Event, FrameDecoder};
use ws_common::regmap::map;

/// All of RAM, word-addressed.
struct FakeRam(Vec<u32>);

impl FakeRam {
    fn new() -> Self {
        FakeRam(vec![0xdead_beef; (map::RAM_SIZE / 4) as usize])
    }
    fn idx(addr: u32) -> usize {
        assert!(addr % 4 == 0 && (map::RAM_BASE..map::RAM_BASE + map::RAM_SIZE).contains(&addr), "{addr:#x}");
        ((addr - map::RAM_BASE) / 4) as usize
    }
    fn bytes(&self, addr: u32, len: u32) -> Vec<u8> {
        (0..len / 4).flat_map(|i| self.0[Self::idx(addr + 4 * i)].to_le_bytes()).collect()
    }
    fn put(&mut self, addr: u32, bytes: &[u8]) {
        for (i, w) in bytes.chunks(4).enumerate() {
            let mut b = [0u8; 4];
            b[..w.len()].copy_from_slice(w);
            self.0[Self::idx(addr + 4 * i as u32)] = u32::from_le_bytes(b);
        }
    }
}

impl Ram for FakeRam {
    unsafe fn read_word(&mut self, addr: u32) -> u32 {
        self.0[Self::idx(addr)]
    }
    unsafe fn write_word(&mut self, addr: u32, value: u32) {
        self.0[Self::idx(addr)] = value;
    }
}

fn image(len: usize) -> Vec<u8> {
    (0..len).map(|i| (i * 31 + 7) as u8).collect()
}

/// Sends one request through the loader; returns (status-or-response, boot action).
fn call<'a, C: Command<'a>>(
    l: &mut Loader,
    ram: &mut FakeRam,
    cmd: &C,
    rx: &'a mut Vec<u8>,
) -> (Result<C::Response, Status>, Action) {
    let mut buf = [0u8; MAX_FRAME];
    let n = encode_request(cmd, 9, &mut buf).unwrap();
    let mut action = Action::Continue;
    rx.clear();
    for &b in &buf[..n] {
        let a = l.receive(b, ram, &mut |reply| rx.extend_from_slice(reply));
        if a != Action::Continue {
            action = a;
        }
    }
    let mut d = FrameDecoder::new();
    let mut payload = None;
    for &b in rx.iter() {
        d.push(b);
        if let Event::Frame(f) = d.poll() {
            assert_eq!((f.opcode, f.req_id), (C::OPCODE | RESPONSE_BIT, 9));
            payload = Some(f.payload.to_vec());
        }
    }
    let payload = payload.expect("exactly one reply");
    let stored: &'a [u8] = Box::leak(payload.into_boxed_slice());
    (decode_response::<C>(stored), action)
}

fn header_for(img: &[u8]) -> ImageHeader {
    ImageHeader::for_image(map::RAM_BASE, map::RAM_BASE, img)
}

#[test]
fn reset_boots_a_resident_image_and_refuses_a_corrupt_one() {
    let mut ram = FakeRam::new();
    assert_eq!(decide(&mut ram), Decision::NoImage(ImageError::BadMagic));
    let img = image(4096);
    let h = header_for(&img);
    ram.put(map::RAM_BASE, &img);
    ram.put(HEADER_ADDR, &h.encode());
    assert_eq!(decide(&mut ram), Decision::Boot(map::RAM_BASE));
    // One flipped image bit: not booted.
    ram.0[100] ^= 1 << 3;
    assert_eq!(decide(&mut ram), Decision::NoImage(ImageError::BadImageCrc));
    ram.0[100] ^= 1 << 3;
    // A corrupt header: not booted.
    ram.0[FakeRam::idx(HEADER_ADDR + 12)] ^= 1;
    assert_eq!(decide(&mut ram), Decision::NoImage(ImageError::BadHeaderCrc));
    ram.put(HEADER_ADDR, &h.encode());
    // The stay key wins over a good image, once.
    ram.put(BOOT_MODE_ADDR, &STAY_IN_LOADER.to_le_bytes());
    assert_eq!(decide(&mut ram), Decision::StayRequested);
    assert_eq!(decide(&mut ram), Decision::Boot(map::RAM_BASE));
}

#[test]
fn a_whole_load_in_shuffled_chunks_boots() {
    let mut ram = FakeRam::new();
    let mut l = Loader::new(Some(ImageError::BadMagic));
    let mut rx = Vec::new();
    let (info, _) = call(&mut l, &mut ram, &LoaderInfo, &mut rx);
    let info = info.unwrap();
    assert_eq!((info.version, info.phase, info.last_error), (1, 0, ImageError::BadMagic.code()));
    assert_eq!((info.window_base, info.window_len), IMAGE_WINDOW);

    let img = image(10_000);
    let h = header_for(&img);
    let enc = h.encode();
    assert_eq!(call(&mut l, &mut ram, &LoadBegin { header: &enc }, &mut rx).0, Ok(()));
    let chunks: Vec<(usize, &[u8])> = img.chunks(MAX_LOAD_CHUNK).enumerate().collect();
    // Last chunk first, then the rest, then one chunk again (a retry).
    for &(i, c) in chunks.iter().rev().chain(chunks.iter().take(1)) {
        let d = LoadData { offset: (i * MAX_LOAD_CHUNK) as u32, data: c };
        assert_eq!(call(&mut l, &mut ram, &d, &mut rx).0, Ok(()), "chunk {i}");
    }
    let (st, _) = call(&mut l, &mut ram, &LoaderInfo, &mut rx);
    assert_eq!(st.unwrap().bytes_written, 10_000 + MAX_LOAD_CHUNK as u32);
    let (r, action) = call(&mut l, &mut ram, &LoadBoot, &mut rx);
    assert_eq!(r, Ok(()));
    assert_eq!(action, Action::Boot(map::RAM_BASE));
    assert_eq!(ram.bytes(map::RAM_BASE, 10_000), img);
    assert_eq!(ram.bytes(HEADER_ADDR, 28), enc, "the header is kept for the next reset");
    assert_eq!(decide(&mut ram), Decision::Boot(map::RAM_BASE));
}

#[test]
fn refusals_write_nothing_and_leave_the_loader_ready() {
    let mut ram = FakeRam::new();
    let before = ram.0.clone();
    let mut l = Loader::default();
    let mut rx = Vec::new();
    let word = [1u8, 2, 3, 4];
    // Data and boot before any header.
    assert_eq!(call(&mut l, &mut ram, &LoadData { offset: 0, data: &word }, &mut rx).0, Err(Status::NoImage));
    assert_eq!(call(&mut l, &mut ram, &LoadBoot, &mut rx).0, Err(Status::NoImage));
    // Bad headers: each refused with its reason.
    let good = header_for(&image(1024));
    let cases: [(ImageHeader, ImageError); 3] = [
        (ImageHeader { load: map::RAM_BASE + 2, ..good }, ImageError::Misaligned),
        (ImageHeader { load: SCRATCH_BASE, ..good }, ImageError::OutOfWindow),
        (ImageHeader { entry: map::RAM_BASE + 2048, ..good }, ImageError::BadEntry),
    ];
    for (h, why) in cases {
        let enc = h.encode();
        assert_eq!(call(&mut l, &mut ram, &LoadBegin { header: &enc }, &mut rx).0, Err(Status::BadImage));
        let (st, _) = call(&mut l, &mut ram, &LoaderInfo, &mut rx);
        assert_eq!(ImageError::from_code(st.unwrap().last_error), Some(why));
    }
    let mut corrupt = good.encode();
    corrupt[9] ^= 0x40;
    assert_eq!(call(&mut l, &mut ram, &LoadBegin { header: &corrupt }, &mut rx).0, Err(Status::BadImage));
    // A short header can only come from a broken host: send the frame by hand.
    let mut buf = [0u8; MAX_FRAME];
    let n = encode_frame(opcode::LOAD_BEGIN, 3, &corrupt[..20], &mut buf).unwrap();
    rx.clear();
    for &b in &buf[..n] {
        l.receive(b, &mut ram, &mut |r| rx.extend_from_slice(r));
    }
    assert_eq!(rx[8], Status::BadLength as u8, "status byte of the reply");
    assert_eq!(ram.0, before, "refused requests wrote nothing");

    // An accepted header, then chunks outside it.
    let enc = good.encode();
    assert_eq!(call(&mut l, &mut ram, &LoadBegin { header: &enc }, &mut rx).0, Ok(()));
    let before = ram.0.clone();
    let out = |offset, data: &[u8], ram: &mut FakeRam, l: &mut Loader, rx: &mut Vec<u8>| {
        call(l, ram, &LoadData { offset, data }, rx).0
    };
    assert_eq!(out(1024, &word, &mut ram, &mut l, &mut rx), Err(Status::OutOfWindow));
    assert_eq!(out(1020, &[0; 8], &mut ram, &mut l, &mut rx), Err(Status::OutOfWindow));
    assert_eq!(out(u32::MAX - 3, &word, &mut ram, &mut l, &mut rx), Err(Status::OutOfWindow));
    assert_eq!(out(2, &word, &mut ram, &mut l, &mut rx), Err(Status::Misaligned));
    assert_eq!(out(0, &[1, 2, 3], &mut ram, &mut l, &mut rx), Err(Status::Misaligned));
    assert_eq!(out(0, &[], &mut ram, &mut l, &mut rx), Err(Status::BadLength));
    assert_eq!(ram.0, before, "refused chunks wrote nothing");
    // A refused header abandons the accepted one.
    let mut bad = enc;
    bad[0] ^= 1;
    assert_eq!(call(&mut l, &mut ram, &LoadBegin { header: &bad }, &mut rx).0, Err(Status::BadImage));
    assert_eq!(out(0, &word, &mut ram, &mut l, &mut rx), Err(Status::NoImage));
    assert_eq!(call(&mut l, &mut ram, &LoadBegin { header: &enc }, &mut rx).0, Ok(()));

    // A truncated load: the boot check fails, the loader stays, and a full load then boots.
    assert_eq!(out(0, &image(1024)[..512], &mut ram, &mut l, &mut rx), Ok(()));
    let (r, action) = call(&mut l, &mut ram, &LoadBoot, &mut rx);
    assert_eq!((r, action), (Err(Status::BadImage), Action::Continue));
    let (st, _) = call(&mut l, &mut ram, &LoaderInfo, &mut rx);
    assert_eq!(ImageError::from_code(st.unwrap().last_error), Some(ImageError::BadImageCrc));
    assert_eq!(out(512, &image(1024)[512..], &mut ram, &mut l, &mut rx), Ok(()));
    assert_eq!(call(&mut l, &mut ram, &LoadBoot, &mut rx).1, Action::Boot(map::RAM_BASE));
}

#[test]
fn random_bytes_never_panic_and_never_boot() {
    let mut ram = FakeRam::new();
    let mut l = Loader::default();
    let mut x = 0x1234_5678_9abc_def0u64;
    let mut replies = 0usize;
    for _ in 0..200_000 {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        let b = if x % 7 == 0 {
            b'W'
        } else if x % 11 == 0 {
            b'S'
        } else {
            x as u8
        };
        let a = l.receive(b, &mut ram, &mut |r| replies += r.len());
        assert_eq!(a, Action::Continue);
    }
}
