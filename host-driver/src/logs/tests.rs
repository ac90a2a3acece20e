//! Log decoding tests. Frames are encoded here as the firmware's logger does (rzcobs) against
//! the real firmware ELF's table; tests that need the ELF say so and pass when it is absent,
//! since the firmware is built by `cargo xtask build`, not by this crate.

use super::*;

/// The rzcobs encoder of defmt 1 (`defmt/src/encoding/rzcobs.rs`), for one whole frame,
/// terminator included.
fn rzcobs(data: &[u8]) -> Vec<u8> {
    let mut out = Vec::new();
    let (mut run, mut zeros) = (0u8, 0u8);
    for &byte in data {
        if run < 7 {
            if byte == 0 {
                zeros |= 1 << run;
            } else {
                out.push(byte);
            }
            run += 1;
            if run == 7 && zeros != 0 {
                out.push(zeros);
                run = 0;
                zeros = 0;
            }
        } else if byte == 0 {
            out.push((run - 7) | 0x80);
            run = 0;
            zeros = 0;
        } else {
            out.push(byte);
            run += 1;
            if run == 134 {
                out.push(0xff);
                run = 0;
                zeros = 0;
            }
        }
    }
    match run {
        0 => {}
        1..=6 => out.push((zeros | (0xff << run)) & 0x7f),
        _ => out.push((run - 7) | 0x80),
    }
    out.push(0);
    out
}

#[test]
fn rzcobs_matches_defmt_vectors() {
    assert_eq!(rzcobs(&[]), [0x00]);
    assert_eq!(rzcobs(&[0x00]), [0x7f, 0x00]);
    assert_eq!(rzcobs(&[0x01]), [0x01, 0x7e, 0x00]);
    assert_eq!(rzcobs(&[0x00, 0x01]), [0x01, 0x7d, 0x00]);
    assert_eq!(
        rzcobs(&[0x11, 0x22, 0x33, 0x44, 0x55, 0x66, 0x77]),
        [0x11, 0x22, 0x33, 0x44, 0x55, 0x66, 0x77, 0x80, 0x00]
    );
}

fn firmware() -> Option<DefmtLog> {
    let elf = crate::workspace::root().join(crate::workspace::DEFAULT_ELF);
    if !elf.exists() {
        eprintln!("SKIPPED: {} is not built (cargo xtask build)", elf.display());
        return None;
    }
    Some(DefmtLog::from_elf(&elf).expect("the firmware ELF carries a defmt table"))
}

/// A raw defmt frame for the table entry whose message, given `args`, starts with `prefix`:
/// index (u16), timestamp (u64 µs), then the arguments.
fn frame_for(log: &DefmtLog, prefix: &str, ts_us: u64, args: &[u8]) -> Vec<u8> {
    for index in log.table.indices() {
        let mut raw = (index as u16).to_le_bytes().to_vec();
        raw.extend_from_slice(&ts_us.to_le_bytes());
        raw.extend_from_slice(args);
        let enc = rzcobs(&raw);
        if let Some(line) = log.decode_frame(&enc[..enc.len() - 1]) {
            if line.message.starts_with(prefix) {
                return enc;
            }
        }
    }
    panic!("no log statement starting with {prefix:?} in the firmware ELF");
}

fn echo_args(value: u32, tag: i16) -> Vec<u8> {
    let mut a = value.to_le_bytes().to_vec();
    a.extend_from_slice(&tag.to_le_bytes());
    a
}

#[test]
fn log_echo_line_decodes_with_level_time_and_location() {
    let Some(log) = firmware() else { return };
    assert!(log.has_locations(), "the release ELF keeps debug info (debug = 2)");
    let frame = frame_for(&log, "log-echo", 1_234, &echo_args(0xdead_beef, -12345));
    let mut d = LogDecoder::new(log);
    let mut stream = vec![0u8]; // defmt's stream opens with a separator
    stream.extend(&frame);
    let recs = d.push(&stream);
    let [LogRecord::Line(line)] = &recs[..] else { panic!("{recs:?}") };
    assert_eq!(line.message, "log-echo value=3735928559 tag=-12345");
    assert_eq!(line.level.as_deref(), Some("INFO"));
    assert_eq!(line.timestamp.as_deref(), Some("0.001234"));
    assert_eq!(line.timestamp_us, Some(1234));
    let file = line.file.as_deref().unwrap();
    assert!(file.ends_with("board.rs") && file.starts_with("src/"), "{file}");
    assert!(line.line.is_some());
    let text = format(line);
    assert!(text.starts_with("0.001234 INFO  log-echo value=3735928559 tag=-12345 (src/"), "{text}");
}

#[test]
fn frames_split_anywhere_and_garbage_in_between() {
    let Some(log) = firmware() else { return };
    let a = frame_for(&log, "log-echo", 10, &echo_args(1, 2));
    let b = frame_for(&log, "log-echo", 20, &echo_args(3, 4));
    let mut stream = a.clone();
    stream.extend([0x13, 0x37, 0xff, 0x01, 0x00]); // a frame that decodes to nothing
    stream.extend(&b);
    stream.extend([0, 0, 0]); // idle separators
    for split in [1, 2, 5, stream.len() - 1] {
        let log = DefmtLog::from_elf(log.path()).unwrap();
        let mut d = LogDecoder::new(log);
        let mut recs = d.push(&stream[..split]);
        recs.extend(d.push(&stream[split..]));
        let msgs: Vec<String> = recs.iter().map(format_record).collect();
        assert_eq!(recs.len(), 3, "{msgs:?}");
        assert!(msgs[0].contains("log-echo value=1 tag=2"));
        assert!(matches!(&recs[1], LogRecord::Malformed(Malformed { bytes: 4, partial_start: false })));
        assert!(msgs[2].contains("log-echo value=3 tag=4"));
        assert_eq!(d.malformed(), 1);
    }
}

#[test]
fn a_stream_joined_mid_frame() {
    let Some(log) = firmware() else { return };
    let a = frame_for(&log, "log-echo", 10, &echo_args(1, 2));
    let b = frame_for(&log, "log-echo", 20, &echo_args(5, 6));
    let mut stream = a[3..].to_vec();
    stream.extend(&b);
    let path = log.path().to_path_buf();
    // Assumed clean: the cut frame is reported as such, not as an error.
    let mut d = LogDecoder::new(log);
    let recs = d.push(&stream);
    assert!(matches!(&recs[0], LogRecord::Malformed(Malformed { partial_start: true, .. })), "{recs:?}");
    assert_eq!(d.malformed(), 0);
    assert!(format_record(&recs[1]).contains("value=5 tag=6"));
    // Joined knowingly mid-stream: skipped silently.
    let mut d = LogDecoder::mid_stream(DefmtLog::from_elf(&path).unwrap());
    let recs = d.push(&stream);
    assert_eq!(recs.len(), 1, "{recs:?}");
}

#[test]
fn random_bytes_never_panic() {
    let Some(log) = firmware() else { return };
    let mut d = LogDecoder::new(log);
    let mut x: u32 = 0x1234_5678;
    let mut bytes = Vec::new();
    for _ in 0..200_000 {
        // xorshift32
        x ^= x << 13;
        x ^= x >> 17;
        x ^= x << 5;
        bytes.push(if x % 11 == 0 { 0 } else { (x >> 8) as u8 });
    }
    for chunk in bytes.chunks(997) {
        d.push(chunk);
    }
}

#[test]
fn no_defmt_table_is_a_clear_error() {
    let exe = std::env::current_exe().unwrap();
    let e = DefmtLog::from_elf(&exe).unwrap_err().to_string();
    assert!(e.contains("no `.defmt` section") || e.contains("defmt table"), "{e}");
    let e = DefmtLog::from_elf("/nonexistent/ws-firmware").unwrap_err().to_string();
    assert!(e.contains("could not read firmware ELF /nonexistent/ws-firmware"), "{e}");
}

#[test]
fn paths_and_timestamps_for_people() {
    assert_eq!(short_path(Path::new("/work/main/firmware/src/main.rs")), "src/main.rs");
    assert_eq!(short_path(Path::new("src/hal/uart.rs")), "src/hal/uart.rs");
    assert_eq!(
        short_path(Path::new(
            "/root/.cargo/registry/src/index.crates.io-1949cf8c6b5b557f/heapless-0.9.1/src/vec.rs"
        )),
        "heapless-0.9.1/src/vec.rs"
    );
    assert_eq!(short_path(Path::new("/x/y.rs")), "/x/y.rs");
    assert_eq!(parse_seconds_us("0.001234"), Some(1234));
    assert_eq!(parse_seconds_us("12.5"), Some(12_500_000));
    assert_eq!(parse_seconds_us("3"), Some(3_000_000));
    assert_eq!(parse_seconds_us("0.1234567"), None);
    assert_eq!(parse_seconds_us("12:00:00"), None);
}

#[test]
fn format_without_optional_parts() {
    let l = LogLine {
        level: None,
        timestamp: None,
        timestamp_us: None,
        message: "hello".into(),
        file: None,
        line: None,
        module: None,
    };
    assert_eq!(format(&l), "hello");
    let l = LogLine { level: Some("WARN".into()), file: Some("src/a.rs".into()), line: Some(3), ..l };
    assert_eq!(format(&l), "WARN  hello (src/a.rs:3)");
}
