//! Scenario: the `wsctl link` and `wsctl logs --link` commands against the simulated board,
//! as a user runs them: the boot log over the link (the board sends its log to whichever host
//! is connected, so this comes first), HELLO and the channel table, pings, the bulk echo with
//! its summary, the counters table, and `wsctl swarm` on the SoC's SwarmX node: its status
//! table, its event list (the boot configuration), and a mask naming a port the node lacks refused with a clear
//! error.
//!
//! The simulator listens on a fixed port block (7650..7655), so `wsctl --addr` finds the PHY
//! port at base + 4 as it does for a board's own simulator. Needs: the simulator and the
//! `wsctl` binary beside `ws-sim` (both built by `cargo xtask build`).

const BASE: u16 = 7650;

fn wsctl(args: &[&str]) -> String {
    hil_tests::Wsctl::at(BASE).ok(args)
}

/// Runs wsctl expecting it to fail; returns its stderr.
fn wsctl_fails(args: &[&str]) -> String {
    hil_tests::Wsctl::at(BASE).fails(args)
}

#[test]
fn wsctl_link_commands_on_the_simulated_board() {
    let Some(_sim) = hil_tests::sim_at("wsctl_link", BASE) else { return };

    // First, while the board still holds its log since boot for the first host to come.
    let logs = wsctl(&["logs", "--link"]);
    assert!(logs.contains("weightstream firmware") && logs.contains("echo windows"), "{logs}");

    let hello = wsctl(&["link", "hello"]);
    assert!(
        hello.contains("link v2 up") && hello.contains("max_payload 4096 B, window 16 frames"),
        "{hello}"
    );
    assert!(hello.lines().any(|l| l.starts_with("2 weights") && l.ends_with("65536")), "{hello}");

    let ping = wsctl(&["link", "ping", "-c", "2"]);
    assert!(ping.contains("2 pings, 2 answered"), "{ping}");

    let echo = wsctl(&["link", "echo", "--mib", "3"]);
    assert!(echo.contains("echo: 3.0 MiB each way") && echo.contains("SHA-256 equal at both ends"), "{echo}");
    let row = |table: &str, name: &str| -> Vec<String> {
        let line = table
            .lines()
            .find(|l| l.starts_with(name))
            .unwrap_or_else(|| panic!("no `{name}` row:\n{table}"));
        line.split_whitespace().map(str::to_string).collect()
    };
    // The echo's counter delta: 1 MiB accepted on channel 4 and 1 MiB sent back on 6.
    assert_eq!(row(&echo, "4 data")[3], "1048576", "{echo}");
    assert_eq!(row(&echo, "6 trace")[9], "1048576", "{echo}");

    let stats = wsctl(&["link", "stats"]);
    assert_eq!(row(&stats, "2 weights")[3], "1048576", "{stats}");
    assert_eq!(row(&stats, "2 weights")[4], "0", "no CRC errors: {stats}");

    // The simulated SoC's SwarmX node (slot 24): four ports, all active at boot;
    // a mask naming port 4 is refused and changes nothing; the link stays usable.
    let status = wsctl(&["swarm", "status"]);
    assert!(status.contains("4 ports"), "{status}");
    assert!(status.contains("host 0x000f"), "{status}");
    assert_eq!(row(&status, "   3").get(1).map(String::as_str), Some("active"), "{status}");
    // The one event since boot: the firmware set every port active.
    let events = wsctl(&["swarm", "events"]);
    assert!(
        events.starts_with("#1 ") && events.contains("host set the port mask; ports now 0x000f"),
        "{events}"
    );
    assert_eq!(events.lines().count(), 1, "{events}");
    let err = wsctl_fails(&["swarm", "config", "--mask", "0x13"]);
    assert!(err.contains("argument out of range"), "{err}");
    assert!(wsctl(&["swarm", "status"]).contains("host 0x000f"), "the refused mask changed nothing");
    let ping = wsctl(&["link", "ping", "-c", "1"]);
    assert!(ping.contains("1 pings, 1 answered"), "{ping}");
}
