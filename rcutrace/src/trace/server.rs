//! The smallest HTTP server `serve` needs: each connection gets one answer and is closed.
//! `GET /metrics` is answered with the exposition made when the connection arrived; anything
//! else with an error status. Nothing here knows what the metrics are.

use std::{net::SocketAddr, time::Duration};

use anyhow::{Context as _, Result, anyhow};
use tokio::{
    io::{AsyncReadExt as _, AsyncWriteExt as _},
    net::{TcpListener, TcpStream},
};

/// The OpenMetrics text format's content type, as Prometheus asks for it.
const CONTENT_TYPE: &str = "application/openmetrics-text; version=1.0.0; charset=utf-8";
/// A request head larger than this is not a scrape.
const MAX_HEAD: usize = 8192;
/// A client that sends nothing for this long is dropped.
const CLIENT_TIMEOUT: Duration = Duration::from_secs(10);

/// Listens on `address`; a port already in use says so.
pub async fn listen(address: SocketAddr) -> Result<TcpListener> {
    TcpListener::bind(address).await.map_err(|e| {
        let cause = match e.kind() {
            std::io::ErrorKind::AddrInUse => {
                "the port is already in use (is another exporter, or rcutrace serve, running?); \
                 choose another with --listen"
                    .to_string()
            }
            std::io::ErrorKind::AddrNotAvailable => {
                "the address is not one of this machine's".to_string()
            }
            _ => e.to_string(),
        };
        anyhow!(e).context(format!("cannot listen on {address}: {cause}"))
    })
}

/// Answers `stream` in the background: `metrics` for `GET /metrics`.
pub fn answer(stream: TcpStream, metrics: String) {
    tokio::spawn(async move {
        if let Err(e) = tokio::time::timeout(CLIENT_TIMEOUT, answer_one(stream, metrics)).await {
            log::info!("a client was too slow: {e}");
        }
    });
}

async fn answer_one(mut stream: TcpStream, metrics: String) {
    let response = match read_head(&mut stream).await {
        Ok(head) => respond(&head, metrics),
        Err(e) => {
            log::info!("unreadable request: {e:#}");
            status(400, "Bad Request")
        }
    };
    if let Err(e) = stream.write_all(&response).await {
        log::info!("writing a response: {e}");
    }
    let _ = stream.shutdown().await;
}

/// The request line and headers, up to the empty line.
async fn read_head(stream: &mut TcpStream) -> Result<String> {
    let mut head = Vec::new();
    let mut buffer = [0u8; 1024];
    while !head.windows(4).any(|w| w == b"\r\n\r\n") {
        let n = stream
            .read(&mut buffer)
            .await
            .context("reading the request")?;
        if n == 0 {
            anyhow::bail!("connection closed before the request ended");
        }
        head.extend_from_slice(&buffer[..n]);
        if head.len() > MAX_HEAD {
            anyhow::bail!("request head longer than {MAX_HEAD} bytes");
        }
    }
    Ok(String::from_utf8_lossy(&head).into_owned())
}

/// The whole response to a request with head `head`.
fn respond(head: &str, metrics: String) -> Vec<u8> {
    let mut request_line = head.lines().next().unwrap_or("").split_whitespace();
    let (method, target) = (request_line.next(), request_line.next());
    let path = target.map(|t| t.split('?').next().unwrap_or(t));
    match (method, path) {
        (Some("GET"), Some("/metrics")) => {
            let mut response = format!(
                "HTTP/1.1 200 OK\r\nContent-Type: {CONTENT_TYPE}\r\nContent-Length: {}\r\n\
                 Connection: close\r\n\r\n",
                metrics.len()
            )
            .into_bytes();
            response.extend_from_slice(metrics.as_bytes());
            response
        }
        (Some("GET"), _) => status(404, "Not Found"),
        _ => status(405, "Method Not Allowed"),
    }
}

fn status(code: u16, reason: &str) -> Vec<u8> {
    let body = format!("{code} {reason}: rcutrace serves GET /metrics only\n");
    format!(
        "HTTP/1.1 {code} {reason}\r\nContent-Type: text/plain\r\nContent-Length: {}\r\n\
         Connection: close\r\n\r\n{body}",
        body.len()
    )
    .into_bytes()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_get_metrics_gets_the_metrics() {
        let ok = respond(
            "GET /metrics HTTP/1.1\r\nHost: x\r\nAccept: application/openmetrics-text\r\n\r\n",
            "m 1\n# EOF\n".into(),
        );
        let ok = String::from_utf8(ok).unwrap();
        assert!(ok.starts_with("HTTP/1.1 200 OK\r\n"), "{ok}");
        assert!(ok.contains("Content-Length: 10\r\n"), "{ok}");
        assert!(ok.ends_with("\r\n\r\nm 1\n# EOF\n"), "{ok}");
        let query = String::from_utf8(respond("GET /metrics?x=1 HTTP/1.1\r\n\r\n", "m".into()));
        assert!(query.unwrap().starts_with("HTTP/1.1 200 OK"));
        let other = String::from_utf8(respond("GET / HTTP/1.1\r\n\r\n", "m".into())).unwrap();
        assert!(other.starts_with("HTTP/1.1 404 Not Found"), "{other}");
        let post = String::from_utf8(respond("POST /metrics HTTP/1.1\r\n\r\n", "m".into()));
        assert!(post.unwrap().starts_with("HTTP/1.1 405"));
    }

    /// A whole exchange over loopback, as a scraper makes it.
    #[tokio::test]
    async fn a_scrape_over_loopback() {
        let listener = listen("127.0.0.1:0".parse().unwrap()).await.unwrap();
        let address = listener.local_addr().unwrap();
        let client = tokio::spawn(async move {
            let mut stream = TcpStream::connect(address).await.unwrap();
            stream
                .write_all(b"GET /metrics HTTP/1.1\r\nHost: x\r\n\r\n")
                .await
                .unwrap();
            let mut response = String::new();
            stream.read_to_string(&mut response).await.unwrap();
            response
        });
        let (stream, _) = listener.accept().await.unwrap();
        answer(stream, "m_total 1\n# EOF\n".into());
        let response = client.await.unwrap();
        assert!(response.starts_with("HTTP/1.1 200 OK\r\n"), "{response}");
        assert!(response.contains(CONTENT_TYPE), "{response}");
        assert!(
            response.ends_with("\r\n\r\nm_total 1\n# EOF\n"),
            "{response}"
        );
    }

    #[tokio::test]
    async fn a_port_in_use_is_a_clear_error() {
        let first = listen("127.0.0.1:0".parse().unwrap()).await.unwrap();
        let taken = first.local_addr().unwrap();
        let error = listen(taken).await.unwrap_err();
        let message = format!("{error:#}");
        assert!(
            message.contains(&format!("cannot listen on {taken}")),
            "{message}"
        );
        assert!(message.contains("already in use"), "{message}");
    }
}
