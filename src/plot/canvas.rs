//! What every chart shares: the canvas size, the colours, the font, the
//! PNG encoder, and `render!`, which draws a chart into an SVG or PNG file.

use std::error::Error;
use std::path::Path;

use plotters::prelude::*;

pub(crate) type DrawResult = Result<(), Box<dyn Error>>;

pub(crate) const WIDTH: u32 = 1000;
pub(crate) const HEIGHT: u32 = 560;
pub(crate) const OK_COLOR: RGBColor = RGBColor(0x2c, 0xa0, 0x2c);
pub(crate) const ERROR_COLOR: RGBColor = RGBColor(0xd6, 0x27, 0x28);
pub(crate) const TIMEOUT_COLOR: RGBColor = RGBColor(0xff, 0x7f, 0x0e);
pub(crate) const CONCURRENCY_COLOR: RGBColor = RGBColor(0x1f, 0x77, 0xb4);
pub(crate) const PAUSE_COLOR: RGBColor = RGBColor(0xcc, 0xcc, 0xcc);
pub(crate) const PALETTE: [RGBColor; 8] = [
    RGBColor(0x1f, 0x77, 0xb4),
    RGBColor(0xd6, 0x27, 0x28),
    RGBColor(0x2c, 0xa0, 0x2c),
    RGBColor(0x94, 0x67, 0xbd),
    RGBColor(0xff, 0x7f, 0x0e),
    RGBColor(0x8c, 0x56, 0x4b),
    RGBColor(0xe3, 0x77, 0xc2),
    RGBColor(0x17, 0xbe, 0xcf),
];

/// The file extension of a plot: `png` when asked for PNG, else `svg`.
pub fn extension(png: bool) -> &'static str {
    if png { "png" } else { "svg" }
}

/// The series' labels, in one corner of a chart, on a light background.
pub(crate) fn draw_legend<'a, DB: DrawingBackend + 'a, CT: CoordTranslate>(
    chart: &mut ChartContext<'a, DB, CT>,
    corner: SeriesLabelPosition,
) -> DrawResult
where
    DB::ErrorType: 'static,
{
    chart
        .configure_series_labels()
        .position(corner)
        .background_style(WHITE.mix(0.85))
        .border_style(BLACK.mix(0.3))
        .draw()?;
    Ok(())
}

/// Seconds since the client started, for a Unix-millisecond stamp.
pub(crate) fn secs(unix_ms: u64, start_ms: u64) -> f64 {
    unix_ms.saturating_sub(start_ms) as f64 / 1000.0
}

/// Makes text possible: plotters lays out and draws text with a TrueType
/// font registered for "sans-serif"; this takes the first of the usual
/// system fonts it finds, once per process.
pub(crate) fn register_font() -> Result<(), Box<dyn Error>> {
    static REGISTERED: std::sync::OnceLock<Result<(), String>> = std::sync::OnceLock::new();
    REGISTERED
        .get_or_init(|| load_font().map_err(|e| e.to_string()))
        .clone()
        .map_err(Into::into)
}

fn load_font() -> Result<(), Box<dyn Error>> {
    const CANDIDATES: [&str; 4] = [
        "/usr/share/fonts/truetype/dejavu/DejaVuSans.ttf",
        "/usr/share/fonts/TTF/DejaVuSans.ttf",
        "/usr/share/fonts/dejavu/DejaVuSans.ttf",
        "/usr/share/fonts/truetype/liberation/LiberationSans-Regular.ttf",
    ];
    let bytes = CANDIDATES
        .iter()
        .find_map(|p| std::fs::read(p).ok())
        .ok_or(
            "plots need a TrueType font to lay out their text (DejaVu Sans or Liberation \
             Sans, e.g. Debian's fonts-dejavu-core); none found",
        )?;
    let bytes: &'static [u8] = Box::leak(bytes.into_boxed_slice());
    plotters::style::register_font("sans-serif", FontStyle::Normal, bytes)
        .map_err(|_| "the font could not be loaded")?;
    Ok(())
}

/// Renders `$draw` (a function of a drawing area) into `$path`, as PNG or
/// SVG: plotters' backends are distinct types, so each gets its own call.
macro_rules! render {
    ($path:expr, $png:expr, $draw:expr) => {
        render!(
            $path,
            $png,
            ($crate::plot::canvas::WIDTH, $crate::plot::canvas::HEIGHT),
            $draw
        )
    };
    ($path:expr, $png:expr, $size:expr, $draw:expr) => {{
        let (width, height): (u32, u32) = $size;
        if $png {
            let mut pixels = vec![0u8; (width * height * 3) as usize];
            {
                let area =
                    plotters::prelude::BitMapBackend::with_buffer(&mut pixels, (width, height))
                        .into_drawing_area();
                $draw(&area)?;
                area.present()?;
            }
            $crate::plot::canvas::write_png($path, &pixels, (width, height))?;
        } else {
            let area =
                plotters::prelude::SVGBackend::new($path, (width, height)).into_drawing_area();
            $draw(&area)?;
            area.present()?;
        }
    }};
}

/// Encodes an RGB buffer of `size` as a PNG file.
pub(crate) fn write_png(path: &Path, pixels: &[u8], (width, height): (u32, u32)) -> DrawResult {
    let file = std::io::BufWriter::new(std::fs::File::create(path)?);
    let mut encoder = png::Encoder::new(file, width, height);
    encoder.set_color(png::ColorType::Rgb);
    encoder.set_depth(png::BitDepth::Eight);
    encoder.write_header()?.write_image_data(pixels)?;
    Ok(())
}

pub(crate) use render;
