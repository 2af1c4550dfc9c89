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

/// Which source file a span is in: the file being checked, or the standard prelude that
/// it imports (an error inside a std pipeline points into the prelude).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum FileId {
    /// The file being checked.
    #[default]
    Main,
    /// `specs/std/prelude.mma`, compiled into mmac (`import std`).
    Std,
}

/// A byte range in a source file.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct Span {
    pub file: FileId,
    pub start: usize,
    pub end: usize,
}

impl Span {
    /// A span in the file being checked.
    pub fn new(start: usize, end: usize) -> Span {
        Span {
            file: FileId::Main,
            start,
            end,
        }
    }
    /// The same range in another file.
    pub fn in_file(self, file: FileId) -> Span {
        Span { file, ..self }
    }
    pub fn join(self, other: Span) -> Span {
        Span {
            file: self.file,
            start: self.start.min(other.start),
            end: self.end.max(other.end),
        }
    }
}

/// What kind of mistake a diagnostic reports: a stable kebab-case code, shown as
/// `mmac::CODE`, that tests and tools can match on.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Code {
    /// The text does not follow the grammar.
    Syntax,
    /// A name that nothing defines.
    UnknownName,
    UnknownImport,
    UnknownField,
    UnknownParameter,
    UnknownProperty,
    /// A value of the wrong kind (a format where a number is expected, ...).
    Type,
    /// A number outside what the construct allows.
    OutOfRange,
    /// Arithmetic in a spec expression that overflows or is inexact.
    NumberRange,
    NoMatch,
    DuplicateName,
    DuplicateArch,
    DuplicateInstruction,
    MissingArch,
    MissingArgument,
    MissingField,
    MissingKeep,
    MissingNormalize,
    MissingPrecision,
    MissingRounding,
    MissingShape,
    MissingStage,
    MissingType,
    MissingUses,
    WrongArguments,
    /// A length that does not divide k (chain, group, block).
    Divisibility,
    /// A composed pipeline's run takes a different number of k positions than it selects.
    Shape,
    MisplacedStage,
    StageOrder,
    BadOverflow,
    RoundingNotAllowed,
    ScaleMissing,
    ScaleUnused,
    /// A sparsity clause the instruction cannot have (pattern, operand, format, K).
    Sparsity,
    /// A product, c, group or intermediate sum not consumed exactly once.
    UnbalancedTerms,
    /// An accumulator wider than the engines compute exactly.
    TooWide,
    /// Brackets or an expression nested deeper than the parser takes.
    TooDeep,
    /// IR that breaks an invariant the engines rely on (the validator's last line of
    /// defence; the checker should have reported the mistake).
    InvalidIr,
    /// A failure of mmac itself, not of the spec (e.g. the built-in prelude).
    Internal,
}

impl Code {
    pub const ALL: [Code; 39] = [
        Code::Syntax,
        Code::UnknownName,
        Code::UnknownImport,
        Code::UnknownField,
        Code::UnknownParameter,
        Code::UnknownProperty,
        Code::Type,
        Code::OutOfRange,
        Code::NumberRange,
        Code::NoMatch,
        Code::DuplicateName,
        Code::DuplicateArch,
        Code::DuplicateInstruction,
        Code::MissingArch,
        Code::MissingArgument,
        Code::MissingField,
        Code::MissingKeep,
        Code::MissingNormalize,
        Code::MissingPrecision,
        Code::MissingRounding,
        Code::MissingShape,
        Code::MissingStage,
        Code::MissingType,
        Code::MissingUses,
        Code::WrongArguments,
        Code::Divisibility,
        Code::Shape,
        Code::MisplacedStage,
        Code::StageOrder,
        Code::BadOverflow,
        Code::RoundingNotAllowed,
        Code::ScaleMissing,
        Code::ScaleUnused,
        Code::Sparsity,
        Code::UnbalancedTerms,
        Code::TooWide,
        Code::TooDeep,
        Code::InvalidIr,
        Code::Internal,
    ];

    /// The kebab-case name shown as `mmac::NAME`.
    pub fn as_str(self) -> &'static str {
        match self {
            Code::Syntax => "syntax",
            Code::UnknownName => "unknown-name",
            Code::UnknownImport => "unknown-import",
            Code::UnknownField => "unknown-field",
            Code::UnknownParameter => "unknown-parameter",
            Code::UnknownProperty => "unknown-property",
            Code::Type => "type",
            Code::OutOfRange => "out-of-range",
            Code::NumberRange => "number-range",
            Code::NoMatch => "no-match",
            Code::DuplicateName => "duplicate-name",
            Code::DuplicateArch => "duplicate-arch",
            Code::DuplicateInstruction => "duplicate-instruction",
            Code::MissingArch => "missing-arch",
            Code::MissingArgument => "missing-argument",
            Code::MissingField => "missing-field",
            Code::MissingKeep => "missing-keep",
            Code::MissingNormalize => "missing-normalize",
            Code::MissingPrecision => "missing-precision",
            Code::MissingRounding => "missing-rounding",
            Code::MissingShape => "missing-shape",
            Code::MissingStage => "missing-stage",
            Code::MissingType => "missing-type",
            Code::MissingUses => "missing-uses",
            Code::WrongArguments => "wrong-arguments",
            Code::Divisibility => "divisibility",
            Code::Shape => "shape",
            Code::MisplacedStage => "misplaced-stage",
            Code::StageOrder => "stage-order",
            Code::BadOverflow => "bad-overflow",
            Code::RoundingNotAllowed => "rounding-not-allowed",
            Code::ScaleMissing => "scale-missing",
            Code::ScaleUnused => "scale-unused",
            Code::Sparsity => "sparsity",
            Code::UnbalancedTerms => "unbalanced-terms",
            Code::TooWide => "too-wide",
            Code::TooDeep => "too-deep",
            Code::InvalidIr => "invalid-ir",
            Code::Internal => "internal",
        }
    }
}

impl fmt::Display for Code {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// One diagnostic: what is wrong, where, and what to do about it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Diag {
    pub code: Code,
    pub message: String,
    pub span: Span,
    pub label: String,
    pub secondary: Vec<(Span, String)>,
    pub help: Option<String>,
}

impl Diag {
    pub fn new(code: Code, span: Span, message: impl Into<String>) -> Diag {
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

/// A `Diag` bound to the file its primary span is in, as miette wants it. Secondary
/// labels in another file (a `uses` line for an error inside a prelude pipeline) become
/// related notes bound to that file.
#[derive(Debug)]
struct Located {
    message: String,
    code: Option<String>,
    help: Option<String>,
    labels: Vec<(Span, Option<String>, bool)>,
    source: Arc<NamedSource<String>>,
    related: Vec<Located>,
}

impl Located {
    fn new(diag: &Diag, sources: &Sources) -> Located {
        let file = diag.span.file;
        let mut labels: Vec<(Span, Option<String>, bool)> = vec![(
            diag.span,
            (!diag.label.is_empty()).then(|| diag.label.clone()),
            true,
        )];
        let mut related: Vec<Located> = vec![];
        for (span, label) in &diag.secondary {
            if span.file == file {
                labels.push((*span, Some(label.clone()), false));
            } else if let Some(r) = related.iter_mut().find(|r| r.labels[0].0.file == span.file) {
                r.labels.push((*span, Some(label.clone()), false));
            } else {
                related.push(Located {
                    message: format!("instantiated in {}", sources.name(span.file)),
                    code: None,
                    help: None,
                    labels: vec![(*span, Some(label.clone()), true)],
                    source: sources.get(span.file),
                    related: vec![],
                });
            }
        }
        let source = sources.get(file);
        let mut message = diag.message.clone();
        // a snippet of a line too long to show (miette pads to the column, and panics
        // past column 65,535): the location in the message instead
        let text = source.inner();
        if labels
            .iter()
            .any(|(s, _, _)| line_length_at(text, s.start) > MAX_SNIPPET_LINE)
        {
            let (line, col) = line_col(text, diag.span.start);
            message = format!("{message} (at {}:{line}:{col})", source.name());
            if !diag.label.is_empty() {
                message = format!("{message}: {}", diag.label);
            }
            labels.clear();
        }
        Located {
            message,
            code: Some(format!("mmac::{}", diag.code)),
            help: diag.help.clone(),
            labels,
            source,
            related,
        }
    }
}

/// The longest line whose snippet a diagnostic shows, in characters.
pub const MAX_SNIPPET_LINE: usize = 1000;

/// Diagnostics rendered in full, at most; the rest are counted.
pub const MAX_RENDERED: usize = 50;

/// The length in characters of the line holding byte `offset`.
fn line_length_at(text: &str, offset: usize) -> usize {
    let offset = floor_char_boundary(text, offset.min(text.len()));
    let start = text[..offset].rfind('\n').map_or(0, |i| i + 1);
    let end = text[offset..].find('\n').map_or(text.len(), |i| offset + i);
    // a very long line is long whatever its characters: count bytes past a bound
    if end - start > 4 * MAX_SNIPPET_LINE {
        return end - start;
    }
    text[start..end].chars().count()
}

fn floor_char_boundary(text: &str, mut i: usize) -> usize {
    while i > 0 && !text.is_char_boundary(i) {
        i -= 1;
    }
    i
}

/// The text with every lone carriage return (old Mac line ends) made a line feed: the
/// grammar ends comments at either, and lines and columns count them as line ends. The
/// length and every byte offset stay the same.
fn lone_cr_as_lf(text: &str) -> String {
    if !text.contains('\r') {
        return text.to_string();
    }
    let bytes = text.as_bytes();
    let mut out = bytes.to_vec();
    for i in 0..bytes.len() {
        if bytes[i] == b'\r' && bytes.get(i + 1) != Some(&b'\n') {
            out[i] = b'\n';
        }
    }
    String::from_utf8(out).expect("an ASCII byte replaced by another")
}

impl fmt::Display for Located {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.message)
    }
}

impl std::error::Error for Located {}

impl Diagnostic for Located {
    fn code<'a>(&'a self) -> Option<Box<dyn fmt::Display + 'a>> {
        self.code
            .as_ref()
            .map(|c| Box::new(c) as Box<dyn fmt::Display>)
    }
    fn severity(&self) -> Option<miette::Severity> {
        Some(if self.code.is_some() {
            miette::Severity::Error
        } else {
            miette::Severity::Advice
        })
    }
    fn help<'a>(&'a self) -> Option<Box<dyn fmt::Display + 'a>> {
        self.help
            .as_ref()
            .map(|h| Box::new(h) as Box<dyn fmt::Display>)
    }
    fn source_code(&self) -> Option<&dyn SourceCode> {
        Some(self.source.as_ref())
    }
    fn labels(&self) -> Option<Box<dyn Iterator<Item = LabeledSpan> + '_>> {
        // a span past the end of the text (an error at end of file) is clamped to it
        let len = self.source.inner().len();
        Some(Box::new(self.labels.iter().map(
            move |(s, label, primary)| {
                let start = s.start.min(len);
                let at = (start, s.end.min(len).saturating_sub(start));
                if *primary {
                    LabeledSpan::new_primary_with_span(label.clone(), at)
                } else {
                    LabeledSpan::new_with_span(label.clone(), at)
                }
            },
        )))
    }
    fn related<'a>(&'a self) -> Option<Box<dyn Iterator<Item = &'a dyn Diagnostic> + 'a>> {
        if self.related.is_empty() {
            None
        } else {
            Some(Box::new(self.related.iter().map(|r| r as &dyn Diagnostic)))
        }
    }
}

/// The source files a set of diagnostics can point into.
#[derive(Debug, Clone)]
pub struct Sources {
    main: Arc<NamedSource<String>>,
    std: Arc<NamedSource<String>>,
}

impl Sources {
    pub fn new(file: &str, text: &str) -> Sources {
        Sources {
            main: Arc::new(NamedSource::new(file, lone_cr_as_lf(text))),
            std: Arc::new(NamedSource::new(
                crate::STD_PRELUDE_NAME,
                crate::STD_PRELUDE.to_string(),
            )),
        }
    }
    fn get(&self, file: FileId) -> Arc<NamedSource<String>> {
        match file {
            FileId::Main => self.main.clone(),
            FileId::Std => self.std.clone(),
        }
    }
    /// The name a file is shown with.
    pub fn name(&self, file: FileId) -> &str {
        self.get_ref(file).name()
    }
    /// The text of a file.
    pub fn text(&self, file: FileId) -> &str {
        self.get_ref(file).inner()
    }
    fn get_ref(&self, file: FileId) -> &NamedSource<String> {
        match file {
            FileId::Main => &self.main,
            FileId::Std => &self.std,
        }
    }
}

/// All diagnostics of one file, ready to render.
#[derive(Debug)]
pub struct Diagnostics {
    pub file: String,
    pub sources: Sources,
    pub diags: Vec<Diag>,
}

impl Diagnostics {
    pub fn new(file: &str, text: &str, diags: Vec<Diag>) -> Diagnostics {
        Diagnostics {
            file: file.to_string(),
            sources: Sources::new(file, text),
            diags,
        }
    }

    /// The codes of the diagnostics, in order.
    pub fn codes(&self) -> Vec<Code> {
        self.diags.iter().map(|d| d.code).collect()
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
        for d in self.diags.iter().take(MAX_RENDERED) {
            let located = Located::new(d, &self.sources);
            let _ = handler.render_report(&mut out, &located);
        }
        if self.diags.len() > MAX_RENDERED {
            out.push_str(&format!(
                "... and {} more errors, not shown\n",
                self.diags.len() - MAX_RENDERED
            ));
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
        let mut out: String = self
            .diags
            .iter()
            .take(MAX_RENDERED)
            .map(|d| {
                let (line, col) = line_col(self.sources.text(d.span.file), d.span.start);
                format!(
                    "{}:{}:{}: {}\n",
                    self.sources.name(d.span.file),
                    line,
                    col,
                    d.message
                )
            })
            .collect();
        if self.diags.len() > MAX_RENDERED {
            out.push_str(&format!(
                "{}: ... and {} more errors\n",
                self.file,
                self.diags.len() - MAX_RENDERED
            ));
        }
        out
    }
}

/// Names longer than this get no did-you-mean suggestion.
pub const MAX_SUGGESTED_NAME: usize = 200;

/// The candidate nearest to `name` by edit distance (optimal string alignment), if it is
/// near enough to be a likely misspelling: at most 2 edits, or a third of the name's
/// length for long names, and fewer edits than either word has characters.
pub fn closest<'a>(name: &str, candidates: impl IntoIterator<Item = &'a str>) -> Option<String> {
    let n = name.chars().count();
    // the distance is at least the difference in length: candidates too short or too
    // long are skipped before the quadratic distance, and a name longer than any
    // identifier anyone misspells gets no suggestion at all
    let most = 2.max(n / 3);
    if n > MAX_SUGGESTED_NAME {
        return None;
    }
    candidates
        .into_iter()
        .filter(|c| {
            c.len().abs_diff(name.len()) <= 4 * most && c.chars().count().abs_diff(n) <= most
        })
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
