//! A training run's curves, for people to look at: CSV tables and a two-panel plot.
//!
//! [`Curves`] collects one [`StepPoint`] per optimizer step and one [`EpochPoint`] per epoch.
//! [`Curves::write_csv`] writes `steps.csv` and `epochs.csv`; [`Curves::plot`] draws
//! `curves.png` and `curves.svg` with plotters: the loss (train per step, train and test per
//! epoch) on the left, the accuracy (train and test per epoch, in percent) on the right.
//!
//! The plot's text is drawn in pure Rust (plotters' `ab_glyph` feature) with a TrueType font
//! read at run time: `$WS_PLOT_FONT` if set, else DejaVu Sans from Debian's
//! `fonts-dejavu-core` ([`FONT_PATHS`]). Nothing is linked against fontconfig or freetype, and
//! no font is shipped in the repository. Without a font both pictures are still drawn, without
//! text, and [`CurvesError::NoFont`] says which package to install.

use std::fmt::Display;
use std::io::{self, Write};
use std::ops::Range;
use std::path::{Path, PathBuf};
use std::sync::OnceLock;

use plotters::chart::SeriesAnno;
use plotters::coord::Shift;
use plotters::prelude::*;
use serde::{Deserialize, Serialize};

/// The Debian package that provides the plot's font.
pub const FONT_PACKAGE: &str = "fonts-dejavu-core";

/// The environment variable that names a TrueType font file for the plot's text.
pub const FONT_ENV: &str = "WS_PLOT_FONT";

/// Where the font is looked for after [`FONT_ENV`]: DejaVu Sans on Debian and Ubuntu
/// ([`FONT_PACKAGE`]), Arch and Fedora, then Liberation Sans.
pub const FONT_PATHS: &[&str] = &[
    "/usr/share/fonts/truetype/dejavu/DejaVuSans.ttf",
    "/usr/share/fonts/TTF/DejaVuSans.ttf",
    "/usr/share/fonts/dejavu-sans-fonts/DejaVuSans.ttf",
    "/usr/share/fonts/truetype/liberation/LiberationSans-Regular.ttf",
];

/// The font family the text asks for; the font found is registered under it, and the SVG
/// names it, so a viewer without DejaVu Sans still shows a sans-serif face.
const FAMILY: &str = "sans-serif";

/// The picture's size in pixels: two panels side by side.
const SIZE: (u32, u32) = (1280, 560);

/// One optimizer step.
#[derive(Debug, Clone, Copy, PartialEq, Default, Serialize, Deserialize)]
pub struct StepPoint {
    /// The step, counted from 1 over the whole run.
    pub step: u32,
    /// The epoch the step belongs to.
    pub epoch: u32,
    /// The batch's mean cross-entropy loss per sample.
    pub loss: f32,
    /// The share of the batch classified correctly, 0 to 1.
    pub accuracy: f32,
}

/// One epoch's evaluation, over the whole train and test sets.
#[derive(Debug, Clone, Copy, PartialEq, Default, Serialize, Deserialize)]
pub struct EpochPoint {
    /// The epoch (0 for an evaluation before training, if the run makes one).
    pub epoch: u32,
    /// The last step of the epoch: where the point sits on the loss panel's step axis.
    pub step: u32,
    /// Mean loss per sample over the train set.
    pub train_loss: f32,
    /// Share of the train set classified correctly, 0 to 1.
    pub train_accuracy: f32,
    /// Mean loss per sample over the test set.
    pub test_loss: f32,
    /// Share of the test set classified correctly, 0 to 1.
    pub test_accuracy: f32,
}

/// A run's curves, in the order they were recorded.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
pub struct Curves {
    /// One point per step.
    pub steps: Vec<StepPoint>,
    /// One point per epoch.
    pub epochs: Vec<EpochPoint>,
}

/// What went wrong writing the curves.
#[derive(Debug, thiserror::Error)]
pub enum CurvesError {
    /// could not create the folder {} ({source}): check that its parent exists and is writable
    #[error("could not create the folder {} ({source}): check that its parent exists and is writable", path.display())]
    CreateDir {
        /// The folder.
        path: PathBuf,
        /// The OS error.
        source: io::Error,
    },
    /// could not write {} ({source}): check that its folder is writable and the disk has room
    #[error("could not write {} ({source}): check that its folder is writable and the disk has room", path.display())]
    Write {
        /// The file.
        path: PathBuf,
        /// The OS error.
        source: io::Error,
    },
    /// could not draw {} ({reason}): check that its folder is writable and the disk has room
    #[error("could not draw {} ({reason}): check that its folder is writable and the disk has room", path.display())]
    Plot {
        /// The picture.
        path: PathBuf,
        /// What plotters reported.
        reason: String,
    },
    /// found no font for the plot's text (looked for {tried}): install the Debian package fonts-dejavu-core (`apt-get install fonts-dejavu-core`) or set WS_PLOT_FONT to a .ttf file; the pictures were written without text
    #[error(
        "found no font for the plot's text (looked for {tried}): install the Debian package fonts-dejavu-core (`apt-get install fonts-dejavu-core`) or set WS_PLOT_FONT to a .ttf file; the pictures were written without text"
    )]
    NoFont {
        /// The font files tried, comma-separated.
        tried: String,
        /// The pictures written without text: curves.png and curves.svg.
        files: Vec<PathBuf>,
    },
}

impl Curves {
    /// Writes `steps.csv` (step, epoch, loss, accuracy) and `epochs.csv` (epoch, step,
    /// train_loss, train_accuracy, test_loss, test_accuracy) into `dir`, creating it if needed,
    /// each with a header row; returns their paths. Numbers are written in the shortest form
    /// that reads back to the same f32.
    pub fn write_csv(&self, dir: &Path) -> Result<Vec<PathBuf>, CurvesError> {
        create_dir(dir)?;
        let steps = dir.join("steps.csv");
        let mut text = String::from("step,epoch,loss,accuracy\n");
        for p in &self.steps {
            text += &format!("{},{},{},{}\n", p.step, p.epoch, p.loss, p.accuracy);
        }
        write_file(&steps, text.as_bytes())?;

        let epochs = dir.join("epochs.csv");
        let mut text = String::from("epoch,step,train_loss,train_accuracy,test_loss,test_accuracy\n");
        for p in &self.epochs {
            text += &format!(
                "{},{},{},{},{},{}\n",
                p.epoch, p.step, p.train_loss, p.train_accuracy, p.test_loss, p.test_accuracy
            );
        }
        write_file(&epochs, text.as_bytes())?;
        Ok(vec![steps, epochs])
    }

    /// Draws `curves.png` and `curves.svg` into `dir` (created if needed) under `title`;
    /// returns their paths.
    ///
    /// Without a font (module documentation) both are still drawn, without any text, and the
    /// result is [`CurvesError::NoFont`] carrying their paths, so a caller can warn and go on.
    pub fn plot(&self, dir: &Path, title: &str) -> Result<Vec<PathBuf>, CurvesError> {
        match font() {
            Ok(()) => self.plot_files(dir, title, true),
            Err(tried) => {
                let files = self.plot_files(dir, title, false)?;
                Err(CurvesError::NoFont { tried: tried.clone(), files })
            }
        }
    }

    /// Both pictures, with or without text.
    fn plot_files(&self, dir: &Path, title: &str, text: bool) -> Result<Vec<PathBuf>, CurvesError> {
        create_dir(dir)?;
        let png = dir.join("curves.png");
        let plot_err = |path: &Path| {
            let path = path.to_path_buf();
            move |reason: String| CurvesError::Plot { path, reason }
        };
        let root = BitMapBackend::new(&png, SIZE).into_drawing_area();
        self.draw(&root, title, text).map_err(plot_err(&png))?;
        root.present().map_err(|e| e.to_string()).map_err(plot_err(&png))?;
        drop(root);

        let svg = dir.join("curves.svg");
        let root = SVGBackend::new(&svg, SIZE).into_drawing_area();
        self.draw(&root, title, text).map_err(plot_err(&svg))?;
        root.present().map_err(|e| e.to_string()).map_err(plot_err(&svg))?;
        drop(root);
        Ok(vec![png, svg])
    }

    /// The two panels on any plotters back-end; `text` false leaves out every title, label,
    /// tick label and legend (nothing then needs a font).
    fn draw<DB: DrawingBackend>(
        &self,
        root: &DrawingArea<DB, Shift>,
        title: &str,
        text: bool,
    ) -> Result<(), String> {
        root.fill(&WHITE).map_err(err)?;
        let area =
            if text { root.titled(title, (FAMILY, 24)).map_err(err)? } else { root.margin(30, 0, 0, 0) };
        let (left, right) = area.split_horizontally(SIZE.0 / 2);
        self.draw_loss(&left, text)?;
        self.draw_accuracy(&right, text)
    }

    /// Loss per sample against the step: train per step (light), train and test per epoch.
    fn draw_loss<DB: DrawingBackend>(&self, area: &DrawingArea<DB, Shift>, text: bool) -> Result<(), String> {
        let steps = self.steps.iter().map(|p| p.step).chain(self.epochs.iter().map(|p| p.step));
        let x = span(steps.map(|s| s as f32));
        let losses = self
            .steps
            .iter()
            .map(|p| p.loss)
            .chain(self.epochs.iter().flat_map(|p| [p.train_loss, p.test_loss]));
        let top = losses.filter(|v| v.is_finite()).fold(0.0f32, f32::max);
        let y = 0.0..if top > 0.0 { top * 1.08 } else { 1.0 };

        let mut chart = panel(area, "loss per sample", x, y, text)?;
        mesh(&mut chart, "step", "cross-entropy loss", false, text)?;

        let per_step = self.steps.iter().filter(|p| p.loss.is_finite()).map(|p| (p.step as f32, p.loss));
        let series = chart.draw_series(LineSeries::new(per_step, TRAIN.mix(0.35))).map_err(err)?;
        legend(series, "train, each step", TRAIN.mix(0.35), text);
        let train = self.epoch_series(|p| (p.step as f32, p.train_loss));
        let series = chart.draw_series(LineSeries::new(train.clone(), TRAIN.stroke_width(2))).map_err(err)?;
        legend(series, "train, each epoch", TRAIN, text);
        chart.draw_series(train.iter().map(|&p| Circle::new(p, 3, TRAIN.filled()))).map_err(err)?;
        let test = self.epoch_series(|p| (p.step as f32, p.test_loss));
        let series = chart.draw_series(LineSeries::new(test.clone(), TEST.stroke_width(2))).map_err(err)?;
        legend(series, "test, each epoch", TEST, text);
        chart.draw_series(test.iter().map(|&p| Circle::new(p, 3, TEST.filled()))).map_err(err)?;
        if text {
            labels(&mut chart, SeriesLabelPosition::UpperRight)?;
        }
        Ok(())
    }

    /// Accuracy in percent against the epoch, train and test.
    fn draw_accuracy<DB: DrawingBackend>(
        &self,
        area: &DrawingArea<DB, Shift>,
        text: bool,
    ) -> Result<(), String> {
        let x = span(self.epochs.iter().map(|p| p.epoch as f32));
        let mut chart = panel(area, "accuracy", x, 0.0..100.0, text)?;
        mesh(&mut chart, "epoch", "accuracy (%)", true, text)?;
        for (name, colour, value) in [
            ("train", TRAIN, (|p: &EpochPoint| p.train_accuracy) as fn(&EpochPoint) -> f32),
            ("test", TEST, |p: &EpochPoint| p.test_accuracy),
        ] {
            let points = self.epoch_series(|p| (p.epoch as f32, value(p) * 100.0));
            let series =
                chart.draw_series(LineSeries::new(points.clone(), colour.stroke_width(2))).map_err(err)?;
            legend(series, name, colour, text);
            chart.draw_series(points.iter().map(|&p| Circle::new(p, 3, colour.filled()))).map_err(err)?;
        }
        if text {
            labels(&mut chart, SeriesLabelPosition::LowerRight)?;
        }
        Ok(())
    }

    /// One value per epoch, skipping non-finite ones (a diverged run's NaN loss).
    fn epoch_series(&self, point: impl Fn(&EpochPoint) -> (f32, f32)) -> Vec<(f32, f32)> {
        self.epochs.iter().map(point).filter(|(_, v)| v.is_finite()).collect()
    }
}

/// The train curves' colour (blue).
const TRAIN: RGBColor = RGBColor(31, 119, 180);
/// The test curves' colour (orange).
const TEST: RGBColor = RGBColor(230, 110, 10);

type Chart<'a, DB> = ChartContext<
    'a,
    DB,
    Cartesian2d<plotters::coord::types::RangedCoordf32, plotters::coord::types::RangedCoordf32>,
>;

/// One panel's chart over `x` × `y`, with its caption when there is text (without, the label
/// areas are just wide enough for the axis lines).
fn panel<'a, DB: DrawingBackend>(
    area: &'a DrawingArea<DB, Shift>,
    caption: &str,
    x: Range<f32>,
    y: Range<f32>,
    text: bool,
) -> Result<Chart<'a, DB>, String> {
    let mut builder = ChartBuilder::on(area);
    let (x_area, y_area) = if text { (44, 56) } else { (2, 2) };
    builder.margin(16).x_label_area_size(x_area).y_label_area_size(y_area);
    if text {
        builder.caption(caption, (FAMILY, 18));
    }
    builder.build_cartesian_2d(x, y).map_err(err)
}

/// The grid, tick labels and axis names; without `text` only the axes (plotters puts the grid
/// lines where the labels go). The x axis counts steps or epochs, so only its whole numbers
/// are labelled; `y_whole` labels y without decimals.
fn mesh<DB: DrawingBackend>(
    chart: &mut Chart<'_, DB>,
    x_desc: &str,
    y_desc: &str,
    y_whole: bool,
    text: bool,
) -> Result<(), String> {
    let whole = |v: &f32| if v.fract() == 0.0 { format!("{v:.0}") } else { String::new() };
    let no_decimals = |v: &f32| format!("{v:.0}");
    let mut mesh = chart.configure_mesh();
    mesh.light_line_style(BLACK.mix(0.05)).bold_line_style(BLACK.mix(0.15));
    if text {
        mesh.x_desc(x_desc)
            .y_desc(y_desc)
            .x_label_formatter(&whole)
            .label_style((FAMILY, 13))
            .axis_desc_style((FAMILY, 15));
        if y_whole {
            mesh.y_label_formatter(&no_decimals);
        }
    } else {
        mesh.x_labels(0).y_labels(0);
    }
    mesh.draw().map_err(err)
}

/// Names a series in the legend when there is text.
fn legend<'a, DB: DrawingBackend + 'a>(
    series: &mut SeriesAnno<'a, DB>,
    name: &str,
    colour: impl Into<ShapeStyle>,
    text: bool,
) {
    if text {
        let style: ShapeStyle = colour.into();
        series
            .label(name)
            .legend(move |(x, y)| PathElement::new(vec![(x, y), (x + 20, y)], style.stroke_width(2)));
    }
}

/// Draws the legend box.
fn labels<'a, DB: DrawingBackend + 'a>(
    chart: &mut Chart<'a, DB>,
    position: SeriesLabelPosition,
) -> Result<(), String> {
    chart
        .configure_series_labels()
        .position(position)
        .label_font((FAMILY, 14))
        .background_style(WHITE.mix(0.85))
        .border_style(BLACK.mix(0.4))
        .draw()
        .map_err(err)
}

/// The range that holds `values`, at least 1 wide so a single point still has an axis
/// (0..1 for none).
fn span(values: impl Iterator<Item = f32>) -> Range<f32> {
    let (lo, hi) = values.fold((f32::INFINITY, f32::NEG_INFINITY), |(lo, hi), v| (lo.min(v), hi.max(v)));
    if lo > hi {
        0.0..1.0
    } else if hi - lo < 1.0 {
        lo..lo + 1.0
    } else {
        lo..hi
    }
}

fn err(e: impl Display) -> String {
    e.to_string()
}

fn create_dir(dir: &Path) -> Result<(), CurvesError> {
    std::fs::create_dir_all(dir).map_err(|source| CurvesError::CreateDir { path: dir.into(), source })
}

fn write_file(path: &Path, bytes: &[u8]) -> Result<(), CurvesError> {
    std::fs::File::create(path)
        .and_then(|mut f| f.write_all(bytes))
        .map_err(|source| CurvesError::Write { path: path.into(), source })
}

/// Registers the plot's font with plotters once per process: `Ok` when one was found, else
/// the files tried.
fn font() -> Result<(), &'static String> {
    static FOUND: OnceLock<Result<(), String>> = OnceLock::new();
    FOUND
        .get_or_init(|| {
            let env = std::env::var_os(FONT_ENV).map(PathBuf::from);
            let candidates: Vec<PathBuf> =
                env.into_iter().chain(FONT_PATHS.iter().map(PathBuf::from)).collect();
            for path in &candidates {
                let Ok(bytes) = std::fs::read(path) else { continue };
                // plotters keeps fonts for the life of the process and wants them 'static:
                // one font file, leaked once.
                let bytes: &'static [u8] = Box::leak(bytes.into_boxed_slice());
                if plotters::style::register_font(FAMILY, FontStyle::Normal, bytes).is_ok() {
                    return Ok(());
                }
            }
            Err(candidates.iter().map(|p| p.display().to_string()).collect::<Vec<_>>().join(", "))
        })
        .as_ref()
        .map(|_| ())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn example() -> Curves {
        let mut curves = Curves::default();
        for step in 1..=40u32 {
            let epoch = (step - 1) / 10 + 1;
            let loss = 2.3 / (1.0 + step as f32 / 8.0) + if step % 3 == 0 { 0.1 } else { 0.0 };
            curves.steps.push(StepPoint { step, epoch, loss, accuracy: 1.0 - loss / 2.5 });
        }
        for epoch in 1..=4u32 {
            let e = epoch as f32;
            curves.epochs.push(EpochPoint {
                epoch,
                step: epoch * 10,
                train_loss: 1.5 / e,
                train_accuracy: 0.6 + 0.09 * e,
                test_loss: 1.6 / e,
                test_accuracy: 0.55 + 0.09 * e,
            });
        }
        curves
    }

    /// A test's own temp folder, removed when dropped (also when the test fails).
    struct TempDir(PathBuf);

    impl TempDir {
        fn new(tag: &str) -> TempDir {
            TempDir(std::env::temp_dir().join(format!("ws-train-curves-{tag}-{}", std::process::id())))
        }
    }

    impl Drop for TempDir {
        fn drop(&mut self) {
            let _ = std::fs::remove_dir_all(&self.0);
        }
    }

    fn rows(path: &Path) -> (String, Vec<Vec<f32>>) {
        let text = std::fs::read_to_string(path).unwrap();
        let mut lines = text.lines();
        let header = lines.next().unwrap().to_string();
        (header, lines.map(|l| l.split(',').map(|v| v.parse().unwrap()).collect()).collect())
    }

    fn check_pictures(files: &[PathBuf]) {
        let names: Vec<_> = files.iter().map(|p| p.file_name().unwrap().to_str().unwrap()).collect();
        assert_eq!(names, ["curves.png", "curves.svg"]);
        let png = std::fs::read(&files[0]).unwrap();
        assert!(png.starts_with(b"\x89PNG\r\n\x1a\n"), "not a PNG");
        let svg = std::fs::read_to_string(&files[1]).unwrap();
        assert!(svg.contains("<svg"), "not an SVG");
    }

    #[test]
    fn a_small_run_writes_its_tables_and_pictures() {
        let curves = example();
        let temp = TempDir::new("all");
        let dir = temp.0.join("run");
        let tables = curves.write_csv(&dir).unwrap();
        assert_eq!(tables, [dir.join("steps.csv"), dir.join("epochs.csv")]);

        let (header, steps) = rows(&tables[0]);
        assert_eq!(header, "step,epoch,loss,accuracy");
        let back: Vec<StepPoint> = steps
            .iter()
            .map(|r| StepPoint { step: r[0] as u32, epoch: r[1] as u32, loss: r[2], accuracy: r[3] })
            .collect();
        assert_eq!(back, curves.steps, "steps.csv reads back exactly");
        let (header, epochs) = rows(&tables[1]);
        assert_eq!(header, "epoch,step,train_loss,train_accuracy,test_loss,test_accuracy");
        let back: Vec<EpochPoint> = epochs
            .iter()
            .map(|r| EpochPoint {
                epoch: r[0] as u32,
                step: r[1] as u32,
                train_loss: r[2],
                train_accuracy: r[3],
                test_loss: r[4],
                test_accuracy: r[5],
            })
            .collect();
        assert_eq!(back, curves.epochs, "epochs.csv reads back exactly");

        match curves.plot(&dir, "digits: 64→32→10, Adam, lr 0.001") {
            Ok(files) => {
                check_pictures(&files);
                let svg = std::fs::read_to_string(&files[1]).unwrap();
                assert!(svg.contains("loss per sample") && svg.contains("test, each epoch"), "text missing");
            }
            // A machine without the font still gets both pictures, and the message says why.
            Err(CurvesError::NoFont { files, tried }) => {
                eprintln!("no font ({tried}): the pictures were checked without text");
                check_pictures(&files);
            }
            Err(e) => panic!("{e}"),
        }
    }

    #[test]
    fn without_a_font_the_pictures_have_no_text() {
        let temp = TempDir::new("no-text");
        let dir = &temp.0;
        let files = example().plot_files(dir, "a title", false).unwrap();
        check_pictures(&files);
        let svg = std::fs::read_to_string(&files[1]).unwrap();
        assert!(!svg.contains("<text"), "text drawn without a font");
    }

    #[test]
    fn empty_and_single_point_curves_still_plot() {
        let temp = TempDir::new("empty");
        let dir = &temp.0;
        example().plot_files(dir, "x", false).unwrap();
        Curves::default().plot_files(dir, "x", false).unwrap();
        let one = Curves {
            steps: vec![StepPoint { step: 1, epoch: 1, loss: f32::NAN, accuracy: 0.0 }],
            epochs: vec![EpochPoint { epoch: 1, step: 1, ..EpochPoint::default() }],
        };
        one.plot_files(dir, "x", false).unwrap();
        if font().is_ok() {
            Curves::default().plot_files(dir, "x", true).unwrap();
            one.plot_files(dir, "x", true).unwrap();
        }
    }

    #[test]
    fn the_missing_font_message_names_the_package() {
        let e = CurvesError::NoFont { tried: FONT_PATHS[0].into(), files: vec![] };
        assert!(e.to_string().contains(FONT_PACKAGE) && e.to_string().contains(FONT_ENV));
    }
}
