//! How a Concerto process (`concerto-server`, `concerto-fuse`) meets
//! whatever supervises it: it announces that it is ready through a file,
//! and it runs until SIGINT or SIGTERM.

use std::io;
use std::path::Path;
use std::time::Duration;

/// Writes `text` to `path` atomically (a temporary file renamed over it), so
/// a supervisor polling for the file never reads half of it.
pub fn write_ready_file(path: &Path, text: &str) -> io::Result<()> {
    let tmp = path.with_extension("tmp");
    std::fs::write(&tmp, text)
        .and_then(|()| std::fs::rename(&tmp, path))
        .map_err(|e| io::Error::new(e.kind(), format!("ready file {}: {e}", path.display())))
}

/// Waits for SIGINT or SIGTERM, or until `running` turns false (checked
/// every second).
pub async fn until_stopped(running: impl Fn() -> bool) -> io::Result<()> {
    use tokio::signal::unix::{signal, SignalKind};
    let mut term = signal(SignalKind::terminate())?;
    let mut int = signal(SignalKind::interrupt())?;
    let mut tick = tokio::time::interval(Duration::from_secs(1));
    loop {
        tokio::select! {
            _ = term.recv() => return Ok(()),
            _ = int.recv() => return Ok(()),
            _ = tick.tick() => if !running() { return Ok(()) },
        }
    }
}
