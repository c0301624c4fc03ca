//! `pcielab top`: a live full-screen view of per-port and per-function PCIe traffic and link
//! health, or `-b` frames of plain text (library: `pcielab::observe` for samples and rates,
//! `pcielab::observe::top` for the view, its keys, text and painting). This file only runs the
//! loop: the terminal, the clock and the key translation.

use std::io::{IsTerminal, Write};
use std::sync::atomic::{AtomicI32, Ordering};
use std::time::{Duration, Instant, SystemTime};

use clap::Args as ClapArgs;
use ratatui::crossterm::event::{self, Event, KeyCode, KeyEventKind, KeyModifiers};

use super::number_in;
use pcielab::machine::Machine;
use pcielab::observe::top::{draw, Action, Key, SortKey, TopFrame, View};
use pcielab::observe::{Observer, Sample};
use pcielab::{Error, Result};

#[derive(ClapArgs)]
#[command(after_help = "Examples:
  pcielab top                                         the live host, every second
  pcielab top --machine sim:yitian710 -- fio --filename=/dev/sda --rw=read --bs=1m \\
      --time_based --runtime=600 --name=r             a simulated read, played in real time
  pcielab top -b -n 3 -d 2 --sort rx                  three plain-text frames, 2 s apart
  pcielab top -b -n 1 --json --filter 00:02           one frame as a JSON line

Columns: BDF (indented under its parent in tree mode), KIND, RX_MB/s and TX_MB/s (payload,
10^6 B/s, toward / away from the root complex, over the last interval), %LINK (the busier
direction as % of the link-achievable rate), SRC (pmu: a PCIe PMU counts it; derived: summed from
/sys/block and /sys/class/net below it; -: not observable), LINK and CAPABLE (width@speed now and
at best), STATE (ok, DOWNGRADED, DOWN, - for no link), AER_C/NF/F (correctable / non-fatal / fatal
errors since top started), NAME.
Keys: s > < sort (bdf, rx, tx, %link), / filter (Enter applies, Esc cancels; Esc clears), t tree
or flat, space pause, arrows/PgUp/PgDn scroll, h or ? help, q or Ctrl-C quit.
A filter keeps the functions whose name, kind, device or BDF field (\"00:02\", \"b1\") matches,
with everything below them.")]
pub struct Args {
    /// host, snapshot:DIR, sim:PRESET, sim:FILE.toml or lspci:FILE
    #[arg(long, default_value = "host")]
    pub machine: String,
    /// Seconds between frames (0.1 to 3600)
    #[arg(short = 'd', long = "delay", value_name = "SECONDS", default_value_t = 1.0,
          value_parser = number_in(0.1..=3600.0f64))]
    pub delay: f64,
    /// Print plain-text frames to stdout instead of the full-screen view
    #[arg(short = 'b', long)]
    pub batch: bool,
    /// Stop after N frames (default: until quit or interrupted)
    #[arg(short = 'n', long = "iterations", value_name = "N",
          value_parser = number_in(1..=1_000_000u64))]
    pub iterations: Option<u64>,
    /// With -b: one JSON object per frame and line (fields in docs/top.md)
    #[arg(long, requires = "batch")]
    pub json: bool,
    /// Initial sort: bdf, rx, tx or link
    #[arg(long, value_name = "KEY", default_value = "bdf", value_parser = parse_sort)]
    pub sort: SortKey,
    /// Initial filter text
    #[arg(long, value_name = "TEXT", default_value = "")]
    pub filter: String,
    /// Start with the flat list instead of the tree
    #[arg(long)]
    pub flat: bool,
    /// sim: the workload to play in real time, after `--` (fio …, nettest …, dmatest …, sleep S)
    #[arg(trailing_var_arg = true, value_name = "WORKLOAD")]
    pub workload: Vec<String>,
}

fn parse_sort(text: &str) -> std::result::Result<SortKey, String> {
    match text {
        "bdf" => Ok(SortKey::Bdf),
        "rx" => Ok(SortKey::Rx),
        "tx" => Ok(SortKey::Tx),
        "link" | "%link" => Ok(SortKey::Link),
        _ => Err(format!(
            "'{text}' is not a sort key: expected bdf, rx, tx or link"
        )),
    }
}

pub fn run(args: Args) -> Result<()> {
    let machine: Machine = args.machine.parse()?;
    let on_terminal = std::io::stdout().is_terminal() && std::io::stdin().is_terminal();
    if !args.batch && !on_terminal {
        return Err(Error::bad_input(
            "top's full-screen view needs a terminal on stdin and stdout; use -b/--batch \
             (with -n N) for plain-text frames",
        ));
    }
    let observer = Observer::open(&machine, &args.workload, |p| {
        pcielab::input::read_input_file(p, "fio job file")
    })?;
    for warning in observer.warnings() {
        eprintln!("{warning}");
    }
    let view = View {
        sort: args.sort,
        tree: !args.flat,
        filter: args.filter.clone(),
        ..View::default()
    };
    let delay = Duration::from_secs_f64(args.delay);
    if args.batch {
        batch(observer, &view, delay, args.iterations, args.json)
    } else {
        interactive(observer, view, delay, args.iterations)
    }
}

/// Samples at open and every `delay` after, on a fixed schedule (no drift from printing).
struct Clock {
    first: Sample,
    prev: Sample,
    latest: Sample,
    taken: SystemTime,
    next: Instant,
    delay: Duration,
}

impl Clock {
    fn start(observer: &mut Observer, delay: Duration) -> Result<Clock> {
        let first = observer.sample()?;
        Ok(Clock {
            prev: first.clone(),
            latest: first.clone(),
            first,
            taken: SystemTime::now(),
            next: Instant::now() + delay,
            delay,
        })
    }

    fn until_next(&self) -> Duration {
        self.next.saturating_duration_since(Instant::now())
    }

    fn tick(&mut self, observer: &mut Observer) -> Result<()> {
        let latest = observer.sample()?;
        self.prev = std::mem::replace(&mut self.latest, latest);
        self.taken = SystemTime::now();
        // A late tick (a suspended terminal) starts a new schedule instead of catching up.
        self.next = (self.next + self.delay).max(Instant::now());
        Ok(())
    }

    fn frame(&self, view: &View) -> TopFrame {
        TopFrame::build(view, &self.first, &self.prev, &self.latest, self.taken)
    }
}

fn batch(
    mut observer: Observer,
    view: &View,
    delay: Duration,
    iterations: Option<u64>,
    json: bool,
) -> Result<()> {
    let mut clock = Clock::start(&mut observer, delay)?;
    let mut out = std::io::stdout().lock();
    let written = |e: std::io::Error| Error::runtime(format!("cannot write to stdout: {e}"));
    for i in 0..iterations.unwrap_or(u64::MAX) {
        std::thread::sleep(clock.until_next());
        clock.tick(&mut observer)?;
        let frame = clock.frame(view);
        if json {
            let line = serde_json::to_string(&pcielab::report::tagged("top-frame", &frame)?)
                .map_err(|e| Error::runtime(format!("cannot encode the frame as JSON: {e}")))?;
            writeln!(out, "{line}").map_err(written)?;
        } else {
            if i > 0 {
                writeln!(out).map_err(written)?;
            }
            write!(out, "{}", frame.text()).map_err(written)?;
        }
        out.flush().map_err(written)?;
    }
    Ok(())
}

/// The signal (SIGTERM, SIGHUP) that asked the full-screen view to stop; 0 while none has.
static STOP_SIGNAL: AtomicI32 = AtomicI32::new(0);

extern "C" fn note_stop_signal(signal: libc::c_int) {
    STOP_SIGNAL.store(signal, Ordering::SeqCst);
}

/// How often the view looks for a stop signal between keys and ticks.
const SIGNAL_CHECK: Duration = Duration::from_millis(200);

fn interactive(
    mut observer: Observer,
    mut view: View,
    delay: Duration,
    iterations: Option<u64>,
) -> Result<()> {
    let terminal_error = |e: std::io::Error| Error::runtime(format!("terminal: {e}"));
    // SIGTERM and SIGHUP (kill, a closed terminal window) leave through the same restore as q.
    for signal in [libc::SIGTERM, libc::SIGHUP] {
        // SAFETY: the handler only stores to an atomic, which is async-signal-safe.
        unsafe {
            libc::signal(
                signal,
                note_stop_signal as extern "C" fn(libc::c_int) as libc::sighandler_t,
            );
        }
    }
    // Raw mode and the alternate screen; ratatui's panic hook restores both on a panic.
    let mut terminal = ratatui::try_init().map_err(terminal_error)?;
    let result = (|| -> Result<Option<i32>> {
        let mut clock = Clock::start(&mut observer, delay)?;
        // While paused the screen holds the samples it showed; sampling goes on behind it.
        let mut held: Option<(Sample, Sample, SystemTime)> = None;
        let mut frames = 0u64;
        let mut redraw = true;
        loop {
            if redraw {
                let shown = match &held {
                    Some((prev, latest, taken)) => {
                        TopFrame::build(&view, &clock.first, prev, latest, *taken)
                    }
                    None => clock.frame(&view),
                };
                terminal
                    .draw(|f| draw(f, &view, &shown))
                    .map_err(terminal_error)?;
                redraw = false;
            }
            let wait = clock.until_next().min(SIGNAL_CHECK);
            if event::poll(wait).map_err(terminal_error)? {
                // Keys change the view; a resize needs nothing but the redraw.
                redraw = true;
                if let Event::Key(k) = event::read().map_err(terminal_error)? {
                    if k.kind != KeyEventKind::Release {
                        if let Some(key) = translate(k.code, k.modifiers) {
                            if view.handle(key) == Action::Quit {
                                return Ok(None);
                            }
                        }
                    }
                }
                held = match (view.paused, held.take()) {
                    (true, None) => Some((clock.prev.clone(), clock.latest.clone(), clock.taken)),
                    (true, Some(h)) => Some(h),
                    (false, _) => None,
                };
            }
            match STOP_SIGNAL.load(Ordering::SeqCst) {
                0 => {}
                signal => return Ok(Some(signal)),
            }
            if clock.until_next().is_zero() {
                clock.tick(&mut observer)?;
                redraw = true;
                frames += 1;
                if iterations.is_some_and(|n| frames >= n) {
                    return Ok(None);
                }
            }
        }
    })();
    ratatui::restore();
    if let Ok(Some(signal)) = result {
        // End as the signal's default action would (status 128 + signal), terminal restored.
        // SAFETY: resetting a disposition and raising a signal in the process's own thread.
        unsafe {
            libc::signal(signal, libc::SIG_DFL);
            libc::raise(signal);
        }
    }
    result.map(|_| ())
}

fn translate(code: KeyCode, modifiers: KeyModifiers) -> Option<Key> {
    Some(match code {
        KeyCode::Char('c') if modifiers.contains(KeyModifiers::CONTROL) => Key::Interrupt,
        KeyCode::Char(c) => Key::Char(c),
        KeyCode::Enter => Key::Enter,
        KeyCode::Esc => Key::Esc,
        KeyCode::Backspace => Key::Backspace,
        KeyCode::Up => Key::Up,
        KeyCode::Down => Key::Down,
        KeyCode::PageUp => Key::PageUp,
        KeyCode::PageDown => Key::PageDown,
        KeyCode::Home => Key::Home,
        _ => return None,
    })
}
