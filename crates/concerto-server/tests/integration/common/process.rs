//! A `concerto-server` process of a test's own, so that its memory, its
//! file descriptors and its death are its own: started from a server file,
//! killed when dropped, whatever the test did.

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use concerto_proto::auth::KeyRing;

pub struct ServerProcess {
    child: Child,
    pub addr: SocketAddr,
    log: PathBuf,
}

impl Drop for ServerProcess {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Writes `ring` to `dir/keys.toml`, mode 0600 (a server refuses others).
pub fn write_ring(dir: &Path, ring: &KeyRing) -> PathBuf {
    use std::os::unix::fs::PermissionsExt;
    let path = dir.join("keys.toml");
    std::fs::write(&path, ring.to_toml()).unwrap();
    std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o600)).unwrap();
    path
}

impl ServerProcess {
    /// Starts the binary with `config` (the server file's text) under a
    /// file descriptor limit (`ulimit -n`), and waits for its ready file.
    pub fn start(dir: &Path, config: &str, max_files: u32) -> ServerProcess {
        let path = dir.join("server.toml");
        std::fs::write(&path, config).unwrap();
        let ready = dir.join("ready.json");
        let log = dir.join("server.log");
        let child = Command::new("sh")
            .arg("-c")
            .arg(format!(
                "ulimit -n {max_files} && exec \"$0\" --config \"$1\" --ready-file \"$2\""
            ))
            .arg(env!("CARGO_BIN_EXE_concerto-server"))
            .arg(&path)
            .arg(&ready)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(std::fs::File::create(&log).unwrap())
            .spawn()
            .unwrap();
        let mut server = ServerProcess {
            child,
            addr: SocketAddr::from(([127, 0, 0, 1], 0)),
            log,
        };
        let deadline = Instant::now() + Duration::from_secs(20);
        let text = loop {
            if let Ok(t) = std::fs::read_to_string(&ready) {
                break t;
            }
            server.assert_alive();
            assert!(
                Instant::now() < deadline,
                "the server did not start: {}",
                server.log()
            );
            std::thread::sleep(Duration::from_millis(10));
        };
        let v: serde_json::Value = serde_json::from_str(&text).unwrap();
        server.addr = v["address"].as_str().unwrap().parse().unwrap();
        server
    }

    /// `key: value` from /proc/PID/status, in kB.
    pub fn status_kb(&self, key: &str) -> u64 {
        let status = std::fs::read_to_string(format!("/proc/{}/status", self.child.id()))
            .expect("the server is running");
        status
            .lines()
            .find_map(|l| l.strip_prefix(key))
            .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
            .unwrap_or_else(|| panic!("no {key} in the server's status"))
    }

    /// What it wrote to its standard error.
    pub fn log(&self) -> String {
        std::fs::read_to_string(&self.log).unwrap_or_default()
    }

    /// Panics, with the log, if the process has exited.
    pub fn assert_alive(&mut self) {
        if let Ok(Some(status)) = self.child.try_wait() {
            panic!("the server exited ({status}):\n{}", self.log());
        }
    }
}
