//! The metrics port: answers `GET /metrics` with the server's statistics in
//! Prometheus text format, and every other path with 404. It is not
//! authenticated (a scraper has no key), so bind it where only the
//! monitoring host can reach it (docs/deployment.md).
//!
//! A scrape is one short request and one response, so this reads the
//! request head (bounded, with a timeout) and writes an HTTP/1.0 reply
//! itself instead of bringing in an HTTP server stack for one endpoint.

use std::time::Duration;

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::{mpsc, oneshot, watch};

use crate::prometheus::prometheus;
use crate::schedule::Command;

const MAX_REQUEST_HEAD: usize = 8192;

pub(crate) async fn serve(
    listener: TcpListener,
    sched: mpsc::Sender<Command>,
    mut stopped: watch::Receiver<bool>,
) {
    loop {
        tokio::select! {
            accepted = listener.accept() => {
                if let Ok((stream, _)) = accepted {
                    tokio::spawn(scrape(stream, sched.clone()));
                }
            }
            _ = stopped.changed() => break,
        }
    }
}

async fn scrape(mut stream: TcpStream, sched: mpsc::Sender<Command>) {
    let mut head = Vec::new();
    let mut buf = [0u8; 1024];
    let read_head = async {
        while !head.windows(4).any(|w| w == b"\r\n\r\n") && head.len() < MAX_REQUEST_HEAD {
            match stream.read(&mut buf).await {
                Ok(0) | Err(_) => return false,
                Ok(n) => head.extend_from_slice(&buf[..n]),
            }
        }
        true
    };
    if !matches!(
        tokio::time::timeout(Duration::from_secs(5), read_head).await,
        Ok(true)
    ) {
        return;
    }
    // The request line's path, without a query string.
    let path = head
        .split(|&b| b == b' ')
        .nth(1)
        .map(|p| p.split(|&b| b == b'?').next().unwrap_or(p));
    let response = if !head.starts_with(b"GET ") {
        "HTTP/1.0 405 Method Not Allowed\r\nContent-Length: 0\r\n\r\n".to_string()
    } else if path != Some(&b"/metrics"[..]) {
        "HTTP/1.0 404 Not Found\r\nContent-Length: 0\r\n\r\n".to_string()
    } else {
        let (tx, rx) = oneshot::channel();
        let body = match sched.send(Command::Stats { reply: tx }).await {
            Ok(()) => rx.await.map(|s| prometheus(&s)).ok(),
            Err(_) => None,
        };
        match body {
            Some(body) => format!(
                "HTTP/1.0 200 OK\r\nContent-Type: text/plain; version=0.0.4\r\nContent-Length: {}\r\n\r\n{body}",
                body.len()
            ),
            None => "HTTP/1.0 503 Service Unavailable\r\nContent-Length: 0\r\n\r\n".to_string(),
        }
    };
    let _ = stream.write_all(response.as_bytes()).await;
    let _ = stream.shutdown().await;
}
