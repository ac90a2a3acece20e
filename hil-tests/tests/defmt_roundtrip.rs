//! Scenario: a log line with arguments, requested by the host, decodes exactly.
//!
//! Needs: the defmt log stream (the simulator's log port, or a log UART wired to the host).
//! The host asks the firmware to log `log-echo value={=u32} tag={=i16}` with values it chose,
//! then decodes the stream against the firmware ELF and expects the exact text, level and
//! source location.

use std::time::Duration;

use hil_tests::{Needs, Rig};

#[test]
fn log_line_with_arguments_decodes_exactly() {
    let Some(mut rig) = Rig::open("defmt_roundtrip", Needs { defmt_log: true, ..Needs::default() }) else {
        return;
    };
    let cases: [(u32, i16); 3] = [(0xdead_beef, -12345), (0, i16::MIN), (42, i16::MAX)];
    for (value, tag) in cases {
        rig.client.log_echo(value, tag).expect("log-echo");
    }
    let last = format!("log-echo value={} tag={}", cases[2].0, cases[2].1);
    let lines = rig.wait_for_log(&last, Duration::from_secs(20));
    let echoes: Vec<_> = lines.iter().filter(|l| l.message.starts_with("log-echo")).collect();
    let texts: Vec<&str> = echoes.iter().map(|l| l.message.as_str()).collect();
    assert_eq!(
        texts,
        [
            "log-echo value=3735928559 tag=-12345",
            "log-echo value=0 tag=-32768",
            "log-echo value=42 tag=32767"
        ]
    );
    for l in &echoes {
        assert_eq!(l.level.as_deref(), Some("INFO"), "{l:?}");
        assert!(l.file.as_deref().is_some_and(|f| f.ends_with("board.rs")), "location of {l:?}");
        assert!(l.line.is_some(), "{l:?}");
    }
    // Timestamps come from the firmware's timer and never run backwards.
    let stamps: Vec<u64> = lines.iter().filter_map(|l| l.timestamp_us).collect();
    assert!(stamps.len() >= echoes.len(), "lines carry timestamps: {lines:#?}");
    assert!(stamps.windows(2).all(|w| w[0] <= w[1]), "timestamps run backwards: {stamps:?}");
}
