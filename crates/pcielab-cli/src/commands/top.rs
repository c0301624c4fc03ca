//! `pcielab top`: a live full-screen view of per-port and per-function PCIe traffic and link
//! health, or `-b` frames of plain text (library: `pcielab::observe` for samples and rates,
//! `pcielab::observe::top` for the view, its keys, text and painting). This file runs the
//! loop: the terminal, the clock, the key translation and the painting (ratatui stays out of the
//! library).

use crate::machine_arg::MachineArg;
use std::io::IsTerminal;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime};

use clap::Args as ClapArgs;
use ratatui::crossterm::event::{self, Event, KeyCode, KeyEventKind, KeyModifiers};
use signal_hook::consts::{SIGHUP, SIGTERM};

use super::number_in;
use super::output::{Output, Terminal};
use pcielab::observe::top::{Action, Frames, Key, SortKey, TopFrame, View, COLUMNS, KEY_HELP};
use pcielab::observe::{Observer, Sample};
use pcielab::{Error, Result};
use ratatui::layout::{Constraint, Layout, Rect};
use ratatui::style::{Modifier, Style};
use ratatui::text::Line;
use ratatui::widgets::{Block, Borders, Clear, Paragraph, Row, Table};

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
errors since top started), NAME. Traffic is read every frame; link health (LINK, STATE, AER) at
most about once a second, so with -d under 1 it can be up to a second old.
Keys: s > < sort (bdf, rx, tx, %link), / filter (Enter applies, Esc cancels; Esc clears), t tree
or flat, space pause, arrows/PgUp/PgDn scroll, h or ? help, q or Ctrl-C quit.
A filter keeps the functions whose name, kind, device or BDF field (\"00:02\", \"b1\") matches,
with everything below them.")]
pub struct Args {
    #[command(flatten)]
    pub machine: MachineArg,
    /// Seconds between frames (0.1 to 3600); link health is read at most about once a second
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
    #[arg(long, value_name = "KEY", default_value = "bdf", value_parser = clap::value_parser!(SortKey))]
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

/// Links retrain rarely, and on a big host their trained state is most of what a sample reads
/// (two sysfs attributes per link, each a config-space read on a live host): frames faster
/// than this take the last health read.
const HEALTH_EVERY: Duration = Duration::from_secs(1);

/// Frames are printed as they are sampled, `-b` ones through `out`; nothing is left to print
/// at the end.
pub fn run(args: Args, out: &mut Terminal) -> Result<Output> {
    let machine = args.machine.open()?;
    let on_terminal = std::io::stdout().is_terminal() && std::io::stdin().is_terminal();
    if !args.batch && !on_terminal {
        return Err(Error::bad_input(
            "top's full-screen view needs a terminal on stdin and stdout; use -b/--batch \
             (with -n N) for plain-text frames",
        ));
    }
    let mut observer = Observer::open(&machine, &args.workload, |p| {
        pcielab::input::read_input_file(p, "fio job file")
    })?;
    let delay = Duration::from_secs_f64(args.delay);
    if delay < HEALTH_EVERY {
        // Half a frame's slack: a frame a little early is not pushed to the next second.
        observer.health_every(HEALTH_EVERY - delay / 2);
    }
    for warning in observer.warnings() {
        note!("{warning}");
    }
    let view = View {
        sort: args.sort,
        tree: !args.flat,
        filter: args.filter.clone(),
        ..View::default()
    };
    if args.batch {
        batch(observer, &view, delay, args.iterations, args.json, out)?;
    } else {
        interactive(observer, view, delay, args.iterations)?;
    }
    Ok(Output::done())
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
        // The latest becomes the previous; the new sample is written over the old previous.
        std::mem::swap(&mut self.prev, &mut self.latest);
        observer.sample_into(&mut self.latest)?;
        self.taken = SystemTime::now();
        // A late tick (a suspended terminal) starts a new schedule instead of catching up.
        self.next = (self.next + self.delay).max(Instant::now());
        Ok(())
    }

    fn frame<'a>(&self, frames: &'a mut Frames, view: &View) -> &'a TopFrame {
        frames.build(view, &self.first, &self.prev, &self.latest, self.taken)
    }
}

fn batch(
    mut observer: Observer,
    view: &View,
    delay: Duration,
    iterations: Option<u64>,
    json: bool,
    out: &mut Terminal,
) -> Result<()> {
    let mut clock = Clock::start(&mut observer, delay)?;
    // Kept between frames: an unchanged row is not formatted again.
    let mut frames = Frames::default();
    for i in 0..iterations.unwrap_or(u64::MAX) {
        std::thread::sleep(clock.until_next());
        clock.tick(&mut observer)?;
        let frame = clock.frame(&mut frames, view);
        if json {
            let mut line = serde_json::to_string(&pcielab::text::tagged("top-frame", frame)?)
                .map_err(|e| Error::runtime(format!("cannot encode the frame as JSON: {e}")))?;
            line.push('\n');
            out.json(&line)?;
        } else {
            if i > 0 {
                out.text("\n")?;
            }
            out.escaped(frames.text())?;
        }
    }
    Ok(())
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
    // SIGTERM and SIGHUP (kill, a closed terminal window) leave through the same restore as q:
    // each only notes its number, which the loop looks at.
    let stop_signal = Arc::new(AtomicUsize::new(0));
    for signal in [SIGTERM, SIGHUP] {
        signal_hook::flag::register_usize(signal, Arc::clone(&stop_signal), signal as usize)
            .map_err(|e| Error::runtime(format!("cannot watch for signal {signal}: {e}")))?;
    }
    // Raw mode and the alternate screen; ratatui's panic hook restores both on a panic.
    let mut terminal = ratatui::try_init().map_err(terminal_error)?;
    let result = (|| -> Result<Option<i32>> {
        let mut clock = Clock::start(&mut observer, delay)?;
        let mut built = Frames::default();
        // While paused the screen holds the samples it showed; sampling goes on behind it.
        let mut held: Option<(Sample, Sample, SystemTime)> = None;
        let mut frames = 0u64;
        let mut redraw = true;
        loop {
            if redraw {
                let shown = match &held {
                    Some((prev, latest, taken)) => {
                        built.build(&view, &clock.first, prev, latest, *taken)
                    }
                    None => clock.frame(&mut built, &view),
                };
                terminal
                    .draw(|f| draw(f, &view, shown))
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
            match stop_signal.load(Ordering::SeqCst) {
                0 => {}
                signal => return Ok(Some(signal as i32)),
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
        signal_hook::low_level::emulate_default_handler(signal)
            .map_err(|e| Error::runtime(format!("cannot end on signal {signal}: {e}")))?;
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

/// Paints `frame` as `view` shows it: header and status lines, the table, a key line (or the
/// filter prompt), and the help box over the table when asked for.
pub fn draw(f: &mut ratatui::Frame, view: &View, frame: &TopFrame) {
    let [header, table_area, footer] = Layout::vertical([
        Constraint::Length(1),
        Constraint::Min(1),
        Constraint::Length(1),
    ])
    .areas(f.area());
    let mut title = frame.header();
    if view.paused {
        title.push_str(" - PAUSED");
    }
    f.render_widget(
        Paragraph::new(title).style(Style::default().add_modifier(Modifier::BOLD)),
        header,
    );
    // The table's body is its area less the column-name line.
    let body_rows = usize::from(table_area.height.saturating_sub(1));
    let last_start = frame.rows.len().saturating_sub(body_rows);
    let start = view.scroll.min(last_start);
    let rows = frame.rows[start..]
        .iter()
        .take(body_rows)
        .map(|r| Row::new(r.cells().to_vec()));
    let widths = [
        Constraint::Length(22),
        Constraint::Length(7),
        Constraint::Length(9),
        Constraint::Length(9),
        Constraint::Length(6),
        Constraint::Length(7),
        Constraint::Length(10),
        Constraint::Length(10),
        Constraint::Length(10),
        Constraint::Length(10),
        Constraint::Min(8),
    ];
    let table = Table::new(rows, widths).header(
        Row::new(COLUMNS.to_vec()).style(Style::default().add_modifier(Modifier::REVERSED)),
    );
    f.render_widget(table, table_area);
    let footer_text = match &view.editing {
        Some(text) => format!("filter: {text}_   (Enter applies, Esc cancels)"),
        None => "q quit  s/</> sort  / filter  Esc clear  t tree/flat  space pause  h help".into(),
    };
    f.render_widget(Paragraph::new(footer_text), footer);
    if view.help {
        let lines: Vec<Line> = KEY_HELP
            .iter()
            .map(|(keys, what)| Line::from(format!("{keys:<24} {what}")))
            .collect();
        let height = (lines.len() as u16 + 2).min(table_area.height);
        let width = 76.min(table_area.width);
        let area = Rect {
            x: table_area.x + (table_area.width - width) / 2,
            y: table_area.y + (table_area.height - height) / 2,
            width,
            height,
        };
        f.render_widget(Clear, area);
        f.render_widget(
            Paragraph::new(lines).block(Block::default().borders(Borders::ALL).title(" keys ")),
            area,
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use ratatui::backend::TestBackend;
    use ratatui::Terminal;
    use std::time::UNIX_EPOCH;

    /// yitian710's 28 functions, idle, sampled at 0, 1 and 2 simulated seconds: the painter
    /// test needs rows, not traffic.
    fn frame(view: &View) -> TopFrame {
        let machine = "sim:yitian710".parse().unwrap();
        let mut observer = Observer::open(&machine, &[], |_| unreachable!()).unwrap();
        let mut at = |s: u64| observer.sample_at(s * 1_000_000_000).unwrap();
        let (first, prev, latest) = (at(0), at(1), at(2));
        TopFrame::build(
            view,
            &first,
            &prev,
            &latest,
            UNIX_EPOCH + Duration::from_secs(3723),
        )
    }

    #[test]
    fn draw_paints_header_table_prompt_and_help() {
        let f = frame(&View::default());
        let screen = |view: &View, height: u16| {
            let mut terminal = Terminal::new(TestBackend::new(150, height)).unwrap();
            terminal.draw(|fr| draw(fr, view, &f)).unwrap();
            let buffer = terminal.backend().buffer().clone();
            (0..height)
                .map(|y| {
                    (0..150)
                        .map(|x| buffer[(x, y)].symbol())
                        .collect::<String>()
                })
                .collect::<Vec<_>>()
        };
        let plain = screen(&View::default(), 40);
        assert!(
            plain[0].starts_with("pcielab top - sim:yitian710"),
            "{}",
            plain[0]
        );
        assert!(plain[1].starts_with("BDF "));
        assert!(plain[2].starts_with("0000:00:00.0"));
        assert!(plain[39].starts_with("q quit"));
        // 20 lines: 17 of the 28 rows show; the view scrolls by 5, then at most to the last row.
        let scrolled = screen(
            &View {
                scroll: 5,
                ..View::default()
            },
            20,
        );
        assert_eq!(
            scrolled[2].split_whitespace().next(),
            Some(f.rows[5].bdf.to_string().as_str())
        );
        let bottom = screen(
            &View {
                scroll: 100,
                ..View::default()
            },
            20,
        );
        assert_eq!(
            bottom[18].split_whitespace().next(),
            Some(f.rows[27].bdf.to_string().as_str())
        );
        let editing = screen(
            &View {
                editing: Some("00:0".into()),
                paused: true,
                ..View::default()
            },
            40,
        );
        assert!(editing[39].starts_with("filter: 00:0_"));
        assert!(editing[0].trim_end().ends_with("PAUSED"));
        let help = screen(
            &View {
                help: true,
                ..View::default()
            },
            40,
        );
        assert!(help.iter().any(|l| l.contains(" keys ")));
        assert!(help.iter().any(|l| l.contains("tree / flat")));
    }
}
