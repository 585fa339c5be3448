//! Scenario parsing, validation and determinism.

use cm_experiments::scenario::{Scenario, ScenarioError};
use cm_experiments::simulate::run;

const BASE: &str = r#"
name = "t"
duration = 5.0
seed = 7
[bottleneck]
rate_bps = 1_000_000
delay_ms = 60
queue = "bdp"
[[flow]]
name = "a"
transport = "tcpcm"
[[flow]]
name = "w"
transport = "web"
"#;

#[test]
fn same_seed_gives_identical_json() {
    let s = Scenario::from_toml(BASE).expect("valid");
    let a = serde_json::to_string(&run(&s).expect("runs")).expect("json");
    let b = serde_json::to_string(&run(&s).expect("runs")).expect("json");
    assert_eq!(a, b);
    let v: serde_json::Value = serde_json::from_str(&a).expect("json");
    assert!(v["flows"][0]["goodput_bps"].as_f64().expect("field") > 100_000.0);
    assert!(v["bottleneck"]["drops"].as_u64().is_some());
}

#[test]
fn unknown_transport_is_an_error() {
    let bad = BASE.replace("\"tcpcm\"", "\"quic\"");
    let e = Scenario::from_toml(&bad).expect_err("must fail");
    assert!(matches!(e, ScenarioError::Invalid(_)), "{e}");
    assert!(e.to_string().contains("unknown transport"), "{e}");
}

#[test]
fn bad_values_are_errors() {
    for (from, to) in [
        ("rate_bps = 1_000_000", "rate_bps = 0"),
        ("duration = 5.0", "duration = -1.0"),
        ("transport = \"web\"", "transport = \"web\"\nstart = -2.0"),
        ("seed = 7", "seed = 7\nbogus = 1"),
    ] {
        let text = BASE.replace(from, to);
        assert!(Scenario::from_toml(&text).is_err(), "{to}");
    }
}

#[test]
fn a_scenario_chooses_the_cm_controller() {
    let run = |c: Option<&str>| {
        let mut s = Scenario::from_toml(BASE).expect("valid");
        s.cm_controller = c.map(str::to_string);
        cm_experiments::simulate::run(&s)
    };
    assert!(run(Some("tfrc")).is_ok());
    assert!(run(Some("iscc:l=2,capacity=1M")).is_ok());
    let e = run(Some("iscc:l=0.5")).expect_err("l must exceed 1");
    assert!(e.to_string().contains("cm_controller"), "{e}");
    let bad = format!("cm_controller = \"reno\"\n{BASE}");
    let e = Scenario::from_toml(&bad).expect_err("unknown controller");
    assert!(e.to_string().contains("unknown controller"), "{e}");
}

#[test]
fn shipped_scenarios_parse() {
    let dir = concat!(env!("CARGO_MANIFEST_DIR"), "/../../experiments/scenarios");
    let mut n = 0;
    for e in std::fs::read_dir(dir).expect("dir") {
        let p = e.expect("entry").path();
        let text = std::fs::read_to_string(&p).expect("read");
        Scenario::from_toml(&text).unwrap_or_else(|e| panic!("{}: {e}", p.display()));
        n += 1;
    }
    assert!(n >= 2);
}

/// Each cause once when errors are printed as a chain (the `cm` CLI prints
/// anyhow's `{:#}`: every `source()` after the message).
#[test]
fn a_chain_printer_shows_each_cause_once() {
    use cm_experiments::experiments::ExperimentError;
    use cm_experiments::hosts::HostError;

    fn chain(e: &dyn std::error::Error) -> String {
        let mut s = e.to_string();
        let mut cause = e.source();
        while let Some(c) = cause {
            s.push_str(&format!(": {c}"));
            cause = c.source();
        }
        s
    }
    let host = ScenarioError::Host {
        flow: "a".into(),
        error: HostError::CmConfig(cm_core::ConfigError("mtu 0".into())),
    };
    let parse = Scenario::from_toml("duration = [").expect_err("must fail");
    let io = ExperimentError::Io {
        path: "out/x.csv".into(),
        error: std::io::Error::from(std::io::ErrorKind::PermissionDenied),
    };
    for e in [&host as &dyn std::error::Error, &parse, &io] {
        assert_eq!(chain(e), e.to_string());
    }
    assert_eq!(
        chain(&host),
        format!(
            "flow a: congestion manager config: {}",
            cm_core::ConfigError("mtu 0".into())
        )
    );
}

/// The `controller` key of a flow: parsed as a controller spec, one per CM
/// host, only on CM transports.
#[test]
fn a_flow_names_its_hosts_controller() {
    let with = |spec: &str| {
        BASE.replace(
            "transport = \"tcpcm\"",
            &format!("transport = \"tcpcm\"\ncontroller = \"{spec}\""),
        )
    };
    let s = Scenario::from_toml(&with("iscc:l=2,capacity=1M")).expect("valid");
    let c = s.host_controllers().expect("one controller");
    assert_eq!(
        c.get("h-a"),
        Some(&"iscc:l=2,capacity=1000000".parse().expect("a spec"))
    );
    assert_eq!(s.flows[1].controller, None);

    // A spec that does not parse: the parser's words, naming the flow.
    let e = Scenario::from_toml(&with("iscc:l=0.5")).expect_err("must fail");
    assert!(
        e.to_string().contains("flow \"a\"") && e.to_string().contains("iscc:l=0.5"),
        "{e}"
    );
    // Not on a flow that runs no CM.
    let newreno = with("iiad").replace("\"tcpcm\"", "\"newreno\"");
    let e = Scenario::from_toml(&newreno).expect_err("must fail");
    assert!(e.to_string().contains("tcpcm, audio"), "{e}");

    // Two flows on one host share its CM: they must agree (equal specs
    // written differently do).
    let two = |a: &str, b: &str| {
        format!(
            "{BASE}\n[[flow]]\nname = \"b\"\ntransport = \"tcpcm\"\nhost = \"h-a\"\ncontroller = \"{b}\"\n"
        )
        .replace("transport = \"tcpcm\"\n[[flow]]\nname = \"w\"", &format!("transport = \"tcpcm\"\ncontroller = \"{a}\"\n[[flow]]\nname = \"w\""))
    };
    let e = Scenario::from_toml(&two("iscc", "iiad")).expect_err("must fail");
    assert!(e.to_string().contains("different controllers"), "{e}");
    let s = Scenario::from_toml(&two("iscc", "iscc:l=2,m_i=20")).expect("they agree");
    assert_eq!(s.host_controllers().expect("one").len(), 1);
}

/// `controller = "aimd"` is the scenario's own AIMD: the run is the same
/// to the byte as without the key. Another controller runs and changes it.
#[test]
fn plain_aimd_changes_nothing_and_another_controller_runs() {
    let json = |text: &str| {
        let s = Scenario::from_toml(text).expect("valid");
        serde_json::to_string(&run(&s).expect("runs")).expect("json")
    };
    let with = |spec: &str| {
        BASE.replace(
            "transport = \"tcpcm\"",
            &format!("transport = \"tcpcm\"\ncontroller = \"{spec}\""),
        )
    };
    let base = json(BASE);
    assert_eq!(json(&with("aimd")), base);
    let iiad = json(&with("iiad:mode=window"));
    assert_ne!(iiad, base);
    let v: serde_json::Value = serde_json::from_str(&iiad).expect("json");
    assert!(
        v["flows"][0]["goodput_bps"].as_f64().expect("field") > 100_000.0,
        "{v}"
    );
    let iscc = json(&with("iscc:l=2,capacity=1M"));
    let v: serde_json::Value = serde_json::from_str(&iscc).expect("json");
    assert!(
        v["flows"][0]["goodput_bps"].as_f64().expect("field") > 100_000.0,
        "{v}"
    );
    assert_eq!(v["errors"], serde_json::json!([]), "{v}");
}

#[test]
fn bottleneck_reordering_and_duplication_parse_validate_and_run() {
    let with = |extra: &str| BASE.replace("queue = \"bdp\"", &format!("queue = \"bdp\"\n{extra}"));
    let s = Scenario::from_toml(&with(
        "reorder = 0.05\nreorder_delay_ms = 5\nduplicate = 0.02",
    ))
    .expect("valid");
    assert_eq!(
        (
            s.bottleneck.reorder,
            s.bottleneck.reorder_delay_ms,
            s.bottleneck.duplicate
        ),
        (0.05, 5.0, 0.02)
    );
    let r = run(&s).expect("runs");
    let v = serde_json::to_value(&r).expect("json");
    assert!(v["flows"][0]["goodput_bps"].as_f64().expect("field") > 50_000.0);
    // A scenario without them serializes without the keys.
    let plain = serde_json::to_value(Scenario::from_toml(BASE).expect("valid")).expect("json");
    assert!(plain["bottleneck"].get("reorder").is_none());
    for bad in [
        "reorder = 0.05",
        "reorder = 1.5\nreorder_delay_ms = 5",
        "reorder = 0.05\nreorder_delay_ms = -1",
        "duplicate = -0.1",
    ] {
        let e = Scenario::from_toml(&with(bad)).expect_err(bad);
        assert!(matches!(e, ScenarioError::Invalid(_)), "{bad}: {e}");
    }
}
