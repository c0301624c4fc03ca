//! The Prometheus exporter behind `pcielab exporter`: renders a [`Sample`] as Prometheus text
//! exposition format 0.0.4 ([`render_metrics`]) and serves it at `GET /metrics` from a plain
//! HTTP/1.1 server that is read-only (no endpoint changes anything), loopback-only unless asked,
//! and bounded: one accepting thread, a fixed pool of workers, a bounded queue (a full queue is
//! answered 503 at once), request heads capped in size and time, one request per connection.
//! The accepting thread gathers every request head itself, without blocking ([`serve`]), and
//! hands a worker only a complete head: a client trickling its head a byte at a time holds a
//! descriptor for at most `HEAD_DEADLINE` and never a worker, and the oldest unfinished heads
//! are shed when one peer (or all together) hold too many, so scrapes keep being answered.
//! Malformed requests get a 4xx and the server keeps serving. docs/fleet.md lists the metrics.

use std::collections::VecDeque;
use std::io::{ErrorKind, Read, Write};
use std::net::{IpAddr, SocketAddr, TcpListener, TcpStream};
use std::os::fd::AsRawFd;

use std::sync::mpsc::{sync_channel, Receiver, SyncSender, TrySendError};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use super::{Observer, Sample};

use crate::error::{Error, Result};

mod metrics;
#[cfg(test)]
mod tests;

pub use metrics::{render_metrics, MetricsRenderer};

/// Where the exporter listens unless told otherwise (OpenTelemetry's Prometheus exporter port).
pub const DEFAULT_LISTEN: &str = "127.0.0.1:9464";

/// Threads answering requests; scrapes are short, a handful keeps a slow client from holding
/// up the rest.
pub(crate) const WORKERS: usize = 4;
/// Accepted connections waiting for a worker; beyond it a connection is answered 503.
pub(crate) const QUEUE: usize = 128;
/// The most of a request head read: a scrape's head is a few hundred bytes.
pub(crate) const MAX_HEAD_BYTES: usize = 8192;
/// How long a client may take to read the answer.
pub(crate) const IO_TIMEOUT: Duration = Duration::from_secs(5);
/// How long a client has, from the moment it is accepted, to send its whole request head (a
/// scrape sends it at once; only a stalled or hostile client gets near this).
pub(crate) const HEAD_DEADLINE: Duration = Duration::from_secs(3);
/// Unfinished heads one peer address may hold; a further connection from it sheds its oldest.
pub(crate) const MAX_HEADS_PER_PEER: usize = 64;
/// Unfinished heads from all peers together; a further connection sheds the oldest.
pub(crate) const MAX_PENDING_HEADS: usize = 512;

/// Parses `--listen` and refuses a non-loopback address unless `allow_remote`.
pub fn listen_address(text: &str, allow_remote: bool) -> Result<SocketAddr> {
    let addr: SocketAddr = text.parse().map_err(|_| {
        Error::bad_input(format!(
            "--listen '{text}': expected IP:PORT, e.g. 127.0.0.1:9464 or [::1]:9464"
        ))
    })?;
    if !addr.ip().is_loopback() && !allow_remote {
        return Err(Error::bad_input(format!(
            "--listen {addr} is not a loopback address: the exporter serves plain, \
             unauthenticated HTTP; add --allow-remote to listen there (and firewall the port)"
        )));
    }
    Ok(addr)
}

/// Binds `addr`; a port already in use is a runtime error that says so.
pub fn bind(addr: SocketAddr) -> Result<TcpListener> {
    TcpListener::bind(addr).map_err(|e| {
        let why = if e.kind() == ErrorKind::AddrInUse {
            "the address is already in use (another exporter?); choose another port with \
             --listen"
                .to_string()
        } else {
            e.to_string()
        };
        Error::runtime(format!("cannot listen on {addr}: {why}"))
    })
}

/// A complete request head (or all a client sent before closing or overflowing the cap), and the
/// connection to answer it on.
type Request = (TcpStream, Vec<u8>);

/// Serves `observer` on `listener` until the process ends, each scrape rendered by `renderer`.
pub fn serve(listener: TcpListener, observer: Observer, renderer: MetricsRenderer) -> Result<()> {
    let observer = Arc::new(Mutex::new(Scrapes::new(observer, renderer)));
    let (queue, waiting) = sync_channel::<Request>(QUEUE);
    let waiting = Arc::new(Mutex::new(waiting));
    for i in 0..WORKERS {
        let observer = Arc::clone(&observer);
        let waiting = Arc::clone(&waiting);
        std::thread::Builder::new()
            .name(format!("exporter-{i}"))
            .spawn(move || work(&waiting, &observer))
            .map_err(|e| Error::runtime(format!("cannot start an exporter thread: {e}")))?;
    }
    listener.set_nonblocking(true).map_err(|e| {
        Error::runtime(format!(
            "cannot make the listening socket non-blocking: {e}"
        ))
    })?;
    let mut gate = HeadGate::default();
    loop {
        gate.wait(&listener);
        gate.read_ready(&queue);
        gate.expire(Instant::now());
        gate.accept(&listener, &queue);
    }
}

/// A connection whose request head has not fully arrived.
struct PendingHead {
    stream: TcpStream,
    peer: IpAddr,
    accepted: Instant,
    bytes: Vec<u8>,
    /// poll(2) saw it readable in the last wait.
    readable: bool,
}

/// What reading what a client has sent so far came to.
enum HeadProgress {
    /// More is needed; the client has not sent it yet.
    Waiting,
    /// The head ended, overflowed the cap or the client closed: a worker can answer it.
    Answerable,
}

impl PendingHead {
    /// Reads all that has arrived, without blocking, up to just past [`MAX_HEAD_BYTES`].
    fn read_available(&mut self) -> HeadProgress {
        let mut chunk = [0u8; 1024];
        loop {
            if head_end(&self.bytes).is_some() || self.bytes.len() > MAX_HEAD_BYTES {
                return HeadProgress::Answerable;
            }
            match self.stream.read(&mut chunk) {
                Ok(0) => return HeadProgress::Answerable,
                Ok(n) => self.bytes.extend_from_slice(&chunk[..n]),
                Err(e) if e.kind() == ErrorKind::Interrupted => continue,
                Err(e) if e.kind() == ErrorKind::WouldBlock => return HeadProgress::Waiting,
                // A reset connection: what was sent is answered (or, if nothing, dropped).
                Err(_) => return HeadProgress::Answerable,
            }
        }
    }
}

/// The accepting thread's unfinished heads, oldest first.
#[derive(Default)]
struct HeadGate {
    pending: VecDeque<PendingHead>,
}

impl HeadGate {
    /// Sleeps until the listener or a pending connection is readable, or the oldest head's
    /// deadline passes.
    fn wait(&mut self, listener: &TcpListener) {
        let mut fds: Vec<libc::pollfd> = std::iter::once(listener.as_raw_fd())
            .chain(self.pending.iter().map(|p| p.stream.as_raw_fd()))
            .map(|fd| libc::pollfd {
                fd,
                events: libc::POLLIN,
                revents: 0,
            })
            .collect();
        let timeout_ms = self.pending.front().map_or(-1, |oldest| {
            let left = (oldest.accepted + HEAD_DEADLINE).saturating_duration_since(Instant::now());
            i32::try_from(left.as_millis()).unwrap_or(i32::MAX) + 1
        });
        // SAFETY: fds is a live, correctly sized array of pollfd for the duration of the call.
        let ready = unsafe { libc::poll(fds.as_mut_ptr(), fds.len() as libc::nfds_t, timeout_ms) };
        if ready < 0 {
            // EINTR, or descriptors exhausted (ENOMEM): try again shortly rather than spin.
            std::thread::sleep(Duration::from_millis(10));
        }
        for (pending, fd) in self.pending.iter_mut().zip(&fds[1..]) {
            pending.readable = ready > 0 && fd.revents != 0;
        }
    }

    /// Reads every connection poll found readable; complete heads go to the workers.
    fn read_ready(&mut self, queue: &SyncSender<Request>) {
        let mut still = VecDeque::with_capacity(self.pending.len());
        for mut pending in self.pending.drain(..) {
            if !pending.readable {
                still.push_back(pending);
                continue;
            }
            match pending.read_available() {
                HeadProgress::Waiting => still.push_back(pending),
                HeadProgress::Answerable => hand_to_worker(pending, queue),
            }
        }
        self.pending = still;
    }

    /// Answers 408 to every head not complete [`HEAD_DEADLINE`] after it was accepted.
    fn expire(&mut self, now: Instant) {
        while self
            .pending
            .front()
            .is_some_and(|p| now >= p.accepted + HEAD_DEADLINE)
        {
            if let Some(late) = self.pending.pop_front() {
                refuse(late.stream, 408, "request head not received in time\n");
            }
        }
    }

    /// Accepts every waiting connection. A head that has already arrived goes straight to the
    /// workers; otherwise the connection waits here, shedding the oldest unfinished head of its
    /// peer (or of all) when over the caps.
    fn accept(&mut self, listener: &TcpListener, queue: &SyncSender<Request>) {
        loop {
            let (stream, peer) = match listener.accept() {
                Ok(accepted) => accepted,
                Err(e) if e.kind() == ErrorKind::Interrupted => continue,
                // WouldBlock: none left. A failing accept (out of descriptors) waits for the
                // next poll, while the deadlines free descriptors.
                Err(_) => return,
            };
            if stream.set_nonblocking(true).is_err() {
                continue;
            }
            let mut pending = PendingHead {
                stream,
                peer: peer.ip(),
                accepted: Instant::now(),
                bytes: Vec::new(),
                readable: false,
            };
            if let HeadProgress::Answerable = pending.read_available() {
                hand_to_worker(pending, queue);
                continue;
            }
            let peer = pending.peer;
            self.pending.push_back(pending);
            if self.pending.iter().filter(|p| p.peer == peer).count() > MAX_HEADS_PER_PEER {
                let oldest = self.pending.iter().position(|p| p.peer == peer);
                self.shed(oldest);
            }
            if self.pending.len() > MAX_PENDING_HEADS {
                self.shed(Some(0));
            }
        }
    }

    fn shed(&mut self, at: Option<usize>) {
        if let Some(shed) = at.and_then(|i| self.pending.remove(i)) {
            refuse(
                shed.stream,
                408,
                "request head too slow while others waited\n",
            );
        }
    }
}

/// Queues a complete head for a worker, or answers 503 when every worker is busy and the queue
/// is full.
fn hand_to_worker(pending: PendingHead, queue: &SyncSender<Request>) {
    if pending.stream.set_nonblocking(false).is_err() {
        return;
    }
    if let Err(TrySendError::Full((stream, _))) = queue.try_send((pending.stream, pending.bytes)) {
        refuse(stream, 503, "busy: try again\n");
    }
}

/// A short answer written without waiting on the client, then the connection closed.
fn refuse(mut stream: TcpStream, status: u16, body: &str) {
    let _ = stream.set_nonblocking(true);
    let _ = Response::text(status, body)
        .reply(false)
        .write_to(&mut stream);
}

fn work(waiting: &Mutex<Receiver<Request>>, observer: &Mutex<Scrapes>) {
    loop {
        let next = match waiting.lock() {
            Ok(queue) => queue.recv(),
            Err(_) => return,
        };
        let Ok((stream, head)) = next else { return };
        answer(stream, &head, observer);
    }
}

/// Answers the request whose head the accepting thread gathered; the connection is then closed.
fn answer(mut stream: TcpStream, head: &[u8], observer: &Mutex<Scrapes>) {
    let _ = stream.set_write_timeout(Some(IO_TIMEOUT));
    let response = respond(&mut std::io::Cursor::new(head), || {
        observer
            .lock()
            .map_err(|_| Error::runtime("an exporter thread panicked while sampling"))
            .and_then(|mut o| o.scrape())
    });
    if let Some(reply) = response {
        let _ = reply.write_to(&mut stream);
    }
}

/// What the answering threads share: the observer, the renderer, the last sample and the last
/// metrics body. Every scrape samples over the sample before and renders into the buffer of the
/// one before (unless a slow client is still being sent it), so the exporter holds one sample
/// and one response, whatever the number of threads, and allocates neither again.
struct Scrapes {
    observer: Observer,
    renderer: MetricsRenderer,
    sample: Sample,
    body: Arc<String>,
}

impl Scrapes {
    fn new(observer: Observer, renderer: MetricsRenderer) -> Scrapes {
        Scrapes {
            observer,
            renderer,
            sample: Sample::default(),
            body: Arc::new(String::new()),
        }
    }

    fn scrape(&mut self) -> Result<Arc<String>> {
        self.observer.sample_into(&mut self.sample)?;
        let mut body = match Arc::get_mut(&mut self.body) {
            Some(last) => std::mem::take(last),
            None => String::with_capacity(self.body.len()),
        };
        self.renderer.render(&self.sample, &mut body);
        self.body = Arc::new(body);
        Ok(Arc::clone(&self.body))
    }
}

/// A response ready to send: its head and, unless it answers HEAD, its body.
pub struct Reply {
    pub(crate) head: Vec<u8>,
    pub(crate) body: Option<Arc<String>>,
}

impl Reply {
    /// Writes the HTTP reply (status line, headers, body) to `out`.
    pub fn write_to(&self, out: &mut impl Write) -> std::io::Result<()> {
        out.write_all(&self.head)?;
        if let Some(body) = &self.body {
            out.write_all(body.as_bytes())?;
        }
        out.flush()
    }
}

/// The HTTP response to the request read from `request` (`None`: the client sent nothing);
/// `metrics` (the rendered body) is taken only for a well-formed GET or HEAD of `/metrics`.
pub fn respond(
    request: &mut impl Read,
    metrics: impl FnOnce() -> Result<Arc<String>>,
) -> Option<Reply> {
    let (response, head_only) = match read_head(request) {
        Ok(Some(head)) => match route(&head) {
            Ok((method, Route::Metrics)) => {
                let response = match metrics() {
                    Ok(body) => Response {
                        status: 200,
                        content_type: CONTENT_TYPE,
                        body,
                    },
                    Err(e) => Response::text(500, &format!("sampling failed: {e}\n")),
                };
                (response, method == Method::Head)
            }
            Ok((method, Route::NotFound)) => (
                Response::text(404, "not found: the metrics are at /metrics\n"),
                method == Method::Head,
            ),
            Err(response) => (response, false),
        },
        Ok(None) => return None,
        Err(response) => (response, false),
    };
    Some(response.reply(head_only))
}

/// The request head (up to the blank line); `Ok(None)` when the client sent nothing.
fn read_head(stream: &mut impl Read) -> std::result::Result<Option<Vec<u8>>, Response> {
    let mut head = Vec::with_capacity(512);
    let mut chunk = [0u8; 1024];
    loop {
        if let Some(end) = head_end(&head) {
            head.truncate(end);
            return Ok(Some(head));
        }
        if head.len() > MAX_HEAD_BYTES {
            return Err(Response::text(
                431,
                &format!("request head larger than {MAX_HEAD_BYTES} bytes\n"),
            ));
        }
        match stream.read(&mut chunk) {
            Ok(0) if head.is_empty() => return Ok(None),
            Ok(0) => return Err(Response::text(400, "request ended before its blank line\n")),
            Ok(n) => head.extend_from_slice(&chunk[..n]),
            Err(e) if matches!(e.kind(), ErrorKind::WouldBlock | ErrorKind::TimedOut) => {
                return Err(Response::text(408, "request head not received in time\n"))
            }
            Err(e) if e.kind() == ErrorKind::Interrupted => continue,
            Err(_) => return Ok(None),
        }
    }
}

/// Where the head ends: before `\r\n\r\n` (or a bare `\n\n`, which clients such as netcat send).
fn head_end(bytes: &[u8]) -> Option<usize> {
    let crlf = bytes.windows(4).position(|w| w == b"\r\n\r\n");
    let lf = bytes.windows(2).position(|w| w == b"\n\n");
    match (crlf, lf) {
        (Some(a), Some(b)) => Some(a.min(b)),
        (a, b) => a.or(b),
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Method {
    Get,
    Head,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Route {
    Metrics,
    NotFound,
}

/// Checks the request line and picks the route; anything but a well-formed GET or HEAD is 4xx.
fn route(head: &[u8]) -> std::result::Result<(Method, Route), Response> {
    let bad = |why: &str| Response::text(400, &format!("bad request: {why}\n"));
    let text = std::str::from_utf8(head).map_err(|_| bad("the head is not UTF-8"))?;
    let line = text.lines().next().unwrap_or_default();
    let parts: Vec<&str> = line.split(' ').collect();
    let [method, target, version] = parts.as_slice() else {
        return Err(bad("expected 'METHOD /path HTTP/1.1'"));
    };
    if !matches!(*version, "HTTP/1.0" | "HTTP/1.1") {
        return Err(bad("only HTTP/1.0 and HTTP/1.1 are spoken here"));
    }
    if !target.starts_with('/') {
        return Err(bad("the target must be a path starting with '/'"));
    }
    let method = match *method {
        "GET" => Method::Get,
        "HEAD" => Method::Head,
        m if !m.is_empty() && m.bytes().all(|b| b.is_ascii_uppercase()) => {
            return Err(Response {
                status: 405,
                content_type: "text/plain; charset=utf-8",
                body: Arc::new(
                    "method not allowed: this exporter is read-only (GET, HEAD)\n".into(),
                ),
            })
        }
        _ => return Err(bad("no such method")),
    };
    let path = target.split(['?', '#']).next().unwrap_or_default();
    Ok((
        method,
        if path == "/metrics" {
            Route::Metrics
        } else {
            Route::NotFound
        },
    ))
}

/// Prometheus text exposition format, version 0.0.4.
pub(crate) const CONTENT_TYPE: &str = "text/plain; version=0.0.4; charset=utf-8";

#[derive(Debug, Clone, PartialEq)]
struct Response {
    status: u16,
    content_type: &'static str,
    body: Arc<String>,
}

impl Response {
    fn text(status: u16, body: &str) -> Response {
        Response {
            status,
            content_type: "text/plain; charset=utf-8",
            body: Arc::new(body.to_string()),
        }
    }

    /// The response as sent (`head_only`: the answer to HEAD, headers without the body).
    fn reply(self, head_only: bool) -> Reply {
        let reason = match self.status {
            200 => "OK",
            400 => "Bad Request",
            404 => "Not Found",
            405 => "Method Not Allowed",
            408 => "Request Timeout",
            431 => "Request Header Fields Too Large",
            503 => "Service Unavailable",
            _ => "Internal Server Error",
        };
        let allow = if self.status == 405 {
            "Allow: GET, HEAD\r\n"
        } else {
            ""
        };
        let head = format!(
            "HTTP/1.1 {} {reason}\r\nContent-Type: {}\r\nContent-Length: {}\r\n{allow}\
             Connection: close\r\n\r\n",
            self.status,
            self.content_type,
            self.body.len()
        )
        .into_bytes();
        Reply {
            head,
            body: (!head_only).then_some(self.body),
        }
    }
}
