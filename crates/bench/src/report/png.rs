//! SVG to PNG with resvg, using only the font bundled in the binary.
//!
//! Why resvg rather than a plotting crate's bitmap backend: the charts are drawn once, as SVG, and
//! the PNG is that same document rasterized, so the two files cannot drift apart. resvg is pure
//! Rust (no C libraries to install), and it is given a font database holding only the bundled
//! DejaVu Sans subset, so the PNG is the same on a machine without any fonts (a fresh Debian
//! container has none) as on a desktop.

use std::sync::Arc;

use resvg::tiny_skia;
use resvg::usvg;

use super::chart::FONT_FAMILY;

/// DejaVu Sans cut down to Latin-1 and a few symbols; see `font/LICENSE`.
const FONT: &[u8] = include_bytes!("font/DejaVuSans-subset.ttf");

#[derive(Debug)]
#[non_exhaustive]
pub enum PngError {
    Parse(usvg::Error),
    Size { width: u32, height: u32 },
    Encode(String),
}

impl std::fmt::Display for PngError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            PngError::Parse(error) => write!(f, "the chart's SVG does not parse: {error}"),
            PngError::Size { width, height } => {
                write!(f, "cannot make a {width}x{height} pixel image")
            }
            PngError::Encode(error) => write!(f, "PNG encoding failed: {error}"),
        }
    }
}

impl std::error::Error for PngError {}

/// A renderer holds the font database, which is parsed once for all charts.
pub struct Renderer {
    options: usvg::Options<'static>,
}

impl Renderer {
    pub fn new() -> Renderer {
        let mut fonts = usvg::fontdb::Database::new();
        fonts.load_font_data(FONT.to_vec());
        fonts.set_sans_serif_family(FONT_FAMILY);
        let options = usvg::Options {
            font_family: FONT_FAMILY.to_string(),
            fontdb: Arc::new(fonts),
            ..usvg::Options::default()
        };
        Renderer { options }
    }

    /// Rasterizes `svg` at `scale` times its size (2 gives sharp text on any screen).
    pub fn render(&self, svg: &str, scale: f32) -> Result<Vec<u8>, PngError> {
        let tree = usvg::Tree::from_str(svg, &self.options).map_err(PngError::Parse)?;
        let size = tree.size();
        let width = (size.width() * scale).ceil() as u32;
        let height = (size.height() * scale).ceil() as u32;
        let mut pixmap = tiny_skia::Pixmap::new(width, height).ok_or(PngError::Size { width, height })?;
        resvg::render(
            &tree,
            tiny_skia::Transform::from_scale(scale, scale),
            &mut pixmap.as_mut(),
        );
        pixmap
            .encode_png()
            .map_err(|error| PngError::Encode(error.to_string()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_bundled_font_draws_text() {
        let renderer = Renderer::new();
        let blank = r#"<svg xmlns="http://www.w3.org/2000/svg" width="60" height="20"><rect width="60" height="20" fill="white"/></svg>"#;
        let text = r#"<svg xmlns="http://www.w3.org/2000/svg" width="60" height="20"><rect width="60" height="20" fill="white"/><text x="2" y="15" font-size="14" font-family="DejaVu Sans">µs 95</text></svg>"#;
        let blank = renderer.render(blank, 1.0).unwrap_or_default();
        let text = renderer.render(text, 1.0).unwrap_or_default();
        assert!(blank.starts_with(b"\x89PNG\r\n\x1a\n"));
        assert!(text.starts_with(b"\x89PNG\r\n\x1a\n"));
        // Without a font, usvg drops the text and the two images would be identical.
        assert_ne!(blank, text);
    }
}
