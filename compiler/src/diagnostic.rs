//! Diagnostics: spans, the structured error every pass produces ([`Diag`]), and their
//! rendering as miette reports with the source file attached.
//!
//! Passes build `Diag`s with plain data (a primary span and label, secondary labels, a help
//! line); they are rendered once, at the boundary, by [`Diagnostics`].

use miette::{
    Diagnostic, GraphicalReportHandler, GraphicalTheme, LabeledSpan, NamedSource, SourceCode,
};
use std::fmt;
use std::sync::Arc;

/// A byte range in a source file.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct Span {
    pub start: usize,
    pub end: usize,
}

impl Span {
    pub fn new(start: usize, end: usize) -> Span {
        Span { start, end }
    }
    pub fn join(self, other: Span) -> Span {
        Span {
            start: self.start.min(other.start),
            end: self.end.max(other.end),
        }
    }
}

/// One diagnostic: what is wrong, where, and what to do about it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Diag {
    /// A stable kebab-case code, shown as `mmac::CODE`.
    pub code: &'static str,
    pub message: String,
    pub span: Span,
    pub label: String,
    pub secondary: Vec<(Span, String)>,
    pub help: Option<String>,
}

impl Diag {
    pub fn new(code: &'static str, span: Span, message: impl Into<String>) -> Diag {
        Diag {
            code,
            message: message.into(),
            span,
            label: String::new(),
            secondary: vec![],
            help: None,
        }
    }
    pub fn label(mut self, label: impl Into<String>) -> Diag {
        self.label = label.into();
        self
    }
    pub fn help(mut self, help: impl Into<String>) -> Diag {
        self.help = Some(help.into());
        self
    }
    pub fn also(mut self, span: Span, label: impl Into<String>) -> Diag {
        self.secondary.push((span, label.into()));
        self
    }
}

/// A `Diag` bound to the file it is about, as miette wants it.
#[derive(Debug)]
struct Located {
    diag: Diag,
    code: String,
    source: Arc<NamedSource<String>>,
}

impl fmt::Display for Located {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.diag.message)
    }
}

impl std::error::Error for Located {}

impl Diagnostic for Located {
    fn code<'a>(&'a self) -> Option<Box<dyn fmt::Display + 'a>> {
        Some(Box::new(&self.code))
    }
    fn help<'a>(&'a self) -> Option<Box<dyn fmt::Display + 'a>> {
        self.diag
            .help
            .as_ref()
            .map(|h| Box::new(h) as Box<dyn fmt::Display>)
    }
    fn source_code(&self) -> Option<&dyn SourceCode> {
        Some(self.source.as_ref())
    }
    fn labels(&self) -> Option<Box<dyn Iterator<Item = LabeledSpan> + '_>> {
        let primary = LabeledSpan::new_primary_with_span(
            if self.diag.label.is_empty() {
                None
            } else {
                Some(self.diag.label.clone())
            },
            (
                self.diag.span.start,
                self.diag.span.end.saturating_sub(self.diag.span.start),
            ),
        );
        let rest = self.diag.secondary.iter().map(|(s, l)| {
            LabeledSpan::new_with_span(Some(l.clone()), (s.start, s.end.saturating_sub(s.start)))
        });
        Some(Box::new(std::iter::once(primary).chain(rest)))
    }
}

/// All diagnostics of one file, ready to render.
#[derive(Debug)]
pub struct Diagnostics {
    pub file: String,
    pub source: Arc<NamedSource<String>>,
    pub diags: Vec<Diag>,
}

impl Diagnostics {
    pub fn new(file: &str, text: &str, diags: Vec<Diag>) -> Diagnostics {
        Diagnostics {
            file: file.to_string(),
            source: Arc::new(NamedSource::new(file, text.to_string())),
            diags,
        }
    }

    /// Render every diagnostic, without colour, at a fixed width (stable for snapshots).
    pub fn render_plain(&self, width: usize) -> String {
        let handler =
            GraphicalReportHandler::new_themed(GraphicalTheme::unicode_nocolor()).with_width(width);
        self.render_with(&handler)
    }

    /// Render for a terminal (colour when `color`).
    pub fn render(&self, color: bool) -> String {
        let theme = if color {
            GraphicalTheme::unicode()
        } else {
            GraphicalTheme::unicode_nocolor()
        };
        let handler = GraphicalReportHandler::new_themed(theme).with_width(100);
        self.render_with(&handler)
    }

    fn render_with(&self, handler: &GraphicalReportHandler) -> String {
        let mut out = String::new();
        for d in &self.diags {
            let located = Located {
                diag: d.clone(),
                code: format!("mmac::{}", d.code),
                source: self.source.clone(),
            };
            let _ = handler.render_report(&mut out, &located);
        }
        if self.diags.len() > 1 {
            out.push_str(&format!(
                "error: {} errors in {}\n",
                self.diags.len(),
                self.file
            ));
        }
        out
    }

    /// `file:line:col: message` lines, one per diagnostic (for tools and quick greps).
    pub fn short(&self) -> String {
        let text = self.source.inner();
        self.diags
            .iter()
            .map(|d| {
                let (line, col) = line_col(text, d.span.start);
                format!("{}:{}:{}: {}\n", self.file, line, col, d.message)
            })
            .collect()
    }
}

/// The candidate nearest to `name` by edit distance (optimal string alignment), if it is
/// near enough to be a likely misspelling: at most 2 edits, or a third of the name's
/// length for long names, and fewer edits than either word has characters.
pub fn closest<'a>(name: &str, candidates: impl IntoIterator<Item = &'a str>) -> Option<String> {
    candidates
        .into_iter()
        .map(|c| (strsim::osa_distance(name, c), c))
        .filter(|(d, c)| {
            *d <= 2.max(name.chars().count() / 3)
                && *d < c.chars().count().max(name.chars().count())
        })
        .min()
        .map(|(_, c)| c.to_string())
}

/// 1-based line and column of a byte offset.
pub fn line_col(text: &str, offset: usize) -> (usize, usize) {
    let offset = offset.min(text.len());
    let before = &text[..offset];
    let line = before.matches('\n').count() + 1;
    let col = before
        .rsplit('\n')
        .next()
        .map(|l| l.chars().count())
        .unwrap_or(0)
        + 1;
    (line, col)
}
