//! Scenario: the boot ROM's link loader (`ws_common::boot`, `host_driver::loader`).
//!
//! Needs: nothing but the host link. The board starts with nothing in RAM, so the boot ROM
//! serves its loader. A corrupted image, a truncated image and a wrong load address are each
//! refused with the boot ROM's reason and leave it in the loader; the good image then boots
//! and the firmware answers. Reflashing the running firmware sends it back to the loader
//! first, and a soft reset afterwards boots the flashed image again after its CRC check.

use std::time::Duration;

use hil_tests::{Boot, Needs, Rig};
use host_driver::loader::{flash_via_link, loader_state, FirmwareImage, Progress};
use ws_common::boot::{ImageError, ImageHeader, SCRATCH_BASE};
use ws_common::ctrl::cmd::{LoadBegin, LoadBoot, LoadData, MAX_LOAD_CHUNK};
use ws_common::ctrl::Status;

fn last_error(rig: &mut Rig) -> Option<ImageError> {
    let st = loader_state(&mut rig.client).expect("LoaderInfo").expect("the loader answers");
    ImageError::from_code(st.last_error)
}

#[test]
fn bad_images_are_refused_and_the_good_one_boots() {
    let Some(mut rig) =
        Rig::open_with("link_loader", Needs { defmt_log: true, ..Needs::default() }, Boot::Loader)
    else {
        return;
    };
    let image = FirmwareImage::read(&rig.elf).expect("firmware image");
    let st = loader_state(&mut rig.client).unwrap().expect("empty RAM: the boot ROM serves its loader");
    assert_eq!(
        ImageError::from_code(st.last_error),
        Some(ImageError::BadMagic),
        "no image was found at reset"
    );

    // 1. Corrupted: one flipped bit in the image body. Every chunk is accepted; the boot check
    //    refuses it with the reason, and nothing runs.
    let mut corrupt = image.clone();
    let mid = corrupt.bytes.len() / 2;
    corrupt.bytes[mid] ^= 0x10;
    let err = flash_via_link(&mut rig.client, &corrupt, &mut |_| {}).expect_err("corrupted image");
    assert!(err.to_string().contains("does not match its CRC"), "{err}");
    assert_eq!(last_error(&mut rig), Some(ImageError::BadImageCrc));

    // 2. Truncated: the header of the whole image, then only its first half.
    let header = image.header.encode();
    rig.client.request(&LoadBegin { header: &header }).unwrap();
    let half = image.bytes.len() / 2 / MAX_LOAD_CHUNK * MAX_LOAD_CHUNK;
    for (i, chunk) in image.bytes[..half].chunks(MAX_LOAD_CHUNK).enumerate() {
        rig.client.request(&LoadData { offset: (i * MAX_LOAD_CHUNK) as u32, data: chunk }).unwrap();
    }
    let err = rig.client.request(&LoadBoot).expect_err("truncated image");
    assert_eq!(err.refusal(), Some(Status::BadImage));
    assert_eq!(last_error(&mut rig), Some(ImageError::BadImageCrc));

    // 3. Wrong load address: the header is refused before any data is taken, and data without
    //    an accepted header is refused too.
    let wrong = ImageHeader { load: SCRATCH_BASE, entry: SCRATCH_BASE, ..image.header }.encode();
    let err = rig.client.request(&LoadBegin { header: &wrong }).expect_err("wrong load address");
    assert_eq!(err.refusal(), Some(Status::BadImage));
    assert_eq!(last_error(&mut rig), Some(ImageError::OutOfWindow));
    let err = rig.client.request(&LoadData { offset: 0, data: &[0; 4] });
    assert_eq!(err.expect_err("no header").refusal(), Some(Status::NoImage));

    // Still in the loader after all that; now the good image.
    rig.client.ping(7).expect("the loader still answers");
    let mut seen = Vec::new();
    let report = flash_via_link(&mut rig.client, &image, &mut |p| seen.push(p)).expect("good image");
    assert!(!report.reset_into_loader);
    assert_eq!(report.bytes, image.bytes.len());
    assert_eq!(report.chunks, image.bytes.len().div_ceil(MAX_LOAD_CHUNK));
    assert!(matches!(seen.first(), Some(Progress::Started { .. })));
    assert_eq!(seen.last(), Some(&Progress::Booting));
    eprintln!(
        "link loader: {} bytes in {} chunks, {:.0} bytes/s, boot after {:?}",
        report.bytes,
        report.chunks,
        report.bytes_per_second(),
        report.total
    );
    assert_eq!(loader_state(&mut rig.client).unwrap(), None, "the firmware answers now, not the loader");
    let id = rig.client.identity().expect("identity from the flashed firmware");
    assert_eq!(u64::from(id.clk_hz), rig.board.clock_hz);
    let lines = rig.wait_for_log("tick 1000 Hz", Duration::from_secs(20));
    assert!(lines.iter().any(|l| l.message.starts_with("weightstream firmware")), "{lines:#?}");
}

#[test]
fn reflashing_a_running_firmware_and_resetting_it() {
    let Some(mut rig) = Rig::open("link_loader_reflash", Needs::default()) else {
        return;
    };
    let image = FirmwareImage::read(&rig.elf).expect("firmware image");
    assert_eq!(loader_state(&mut rig.client).unwrap(), None, "the preloaded firmware runs");
    let report = flash_via_link(&mut rig.client, &image, &mut |_| {}).expect("reflash");
    assert!(report.reset_into_loader, "the running firmware was sent back to the loader");
    rig.client.ping(1).unwrap();

    // A soft reset re-checks the image the loader kept and boots it again.
    let before = rig.client.stats().unwrap();
    rig.client.reset().unwrap();
    // The boot ROM checks the image again: a wait in the board's cycles, not wall time.
    let deadline = host_driver::board_time::Deadline::new(Duration::from_secs(30), rig.client.board_clock());
    rig.client.set_timeout(Duration::from_millis(500));
    while rig.client.ping(2).is_err() {
        assert!(!deadline.expired(), "no answer after the reset ({})", deadline.describe());
    }
    assert_eq!(loader_state(&mut rig.client).unwrap(), None, "the firmware came back, not the loader");
    let after = rig.client.stats().unwrap();
    assert!(after.mtime < before.mtime || after.frames_ok < before.frames_ok, "the board really reset");
}
