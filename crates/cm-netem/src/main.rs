//! tmp
fn main() -> anyhow::Result<()> {
    let rate = std::env::args().nth(1).unwrap_or("10mbit".into());
    let delay = std::env::args().nth(2).unwrap_or("30ms".into());
    let loss: f64 = std::env::args().nth(3).unwrap_or("0.01".into()).parse()?;
    let p = cm_netem::Path::build(cm_netem::PathConfig { rate_bps: cm_netem::parse_rate(&rate)?, one_way_delay: cm_netem::parse_duration(&delay)?, loss, ..Default::default() })?;
    let r = p.self_test_report(&Default::default())?;
    println!("{r}");
    Ok(())
}
