//! Taking down what a path or a network built, whatever state it is in.

/// Stop `boxes`, then delete the namespaces `created` (newest first, which
/// deletes their devices, qdiscs and filters with them). Every step runs
/// even if one fails; the failures come back together.
pub(crate) fn tear_down(
    boxes: impl IntoIterator<Item = crate::delaybox::DelayBox>,
    created: Vec<String>,
    what: &'static str,
) -> crate::error::Result<()> {
    let mut errors = Vec::new();
    for mut b in boxes {
        if let Err(e) = b.stop() {
            errors.push(e.to_string());
        }
    }
    for ns in created.into_iter().rev() {
        if let Err(e) = crate::netns::run("ip", &["netns", "del", &ns]) {
            errors.push(e.to_string());
        }
    }
    if errors.is_empty() {
        Ok(())
    } else {
        Err(crate::error::NetemError::Cleanup { what, errors })
    }
}
