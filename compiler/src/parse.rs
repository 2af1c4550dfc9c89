//! Parsing: source text -> pest parse tree (grammar/mma.pest) -> [`File`].
//!
//! pest `Pair`s never leave this module; syntax errors become [`Diag`]s with the span pest
//! reports and a hint from the rules it expected: a missing `}` is reported at the `{` it
//! should close, and a misspelled keyword gets the keyword it is close to. After a syntax
//! error the parse starts again at the next top-level item, so that each broken item of
//! a file gets its own error.

use crate::ast::*;
use crate::diagnostic::{Code, Diag, Span, closest};
use pest::Parser;
use pest::iterators::Pair;
use scan::is_word_byte;

mod limits;
mod scan;
pub use limits::{MAX_EXPRESSION_DEPTH, MAX_NESTING};

#[derive(pest_derive::Parser)]
#[grammar = "../../grammar/mma.pest"]
struct MmaParser;

/// Parse a whole file. A file that does not follow the grammar gets its syntax errors, in
/// order (see [`syntax_errors`]); brackets or an expression nested too deep get one error.
pub fn parse(text: &str) -> Result<File, Vec<Diag>> {
    limits::check_nesting(text).map_err(|d| vec![d])?;
    let mut pairs = MmaParser::parse(Rule::file, text).map_err(|e| syntax_errors(text, e))?;
    let file = pairs
        .next()
        .expect("the file rule always produces one pair");
    limits::check_expression_depth(&file).map_err(|d| vec![d])?;
    let mut items = vec![];
    for pair in file.into_inner() {
        match pair.as_rule() {
            Rule::EOI => {}
            _ => items.push(item(pair)),
        }
    }
    Ok(File { items })
}

// ---------------------------------------------------------------- recovery

/// The syntax errors reported for one file, at most: past the first few, more are rarely
/// news, and each costs a parse of the rest of the file.
pub const MAX_SYNTAX_ERRORS: usize = 10;

/// The syntax errors of `text`, whose parse failed with `first`: that error, then the
/// errors of the rest of the text parsed again, as a file of its own, from the first
/// top-level item after each error ([`next_item_start`]).
fn syntax_errors(text: &str, first: pest::error::Error<Rule>) -> Vec<Diag> {
    // the restart is at or after `past`; `from` is where the last one was
    let mut past = error_start(&first);
    let mut from = 0;
    let mut diags = vec![syntax_error(text, first)];
    while diags.len() < MAX_SYNTAX_ERRORS {
        let Some(next) = next_item_start(text, from, past) else {
            break;
        };
        from = next;
        match MmaParser::parse(Rule::file, &text[from..]) {
            Ok(_) => break,
            // pest took nothing of the item (it stopped at the keyword, as the error before
            // may have): it has nothing to say about it, so go on to the next one
            Err(e) if error_start(&e) == 0 => past = from + 1,
            Err(e) => {
                past = from + error_start(&e);
                diags.push(shifted(syntax_error(&text[from..], e), from));
            }
        }
    }
    diags
}

/// Where the next top-level item starts at or after offset `at`: the first item keyword
/// (`format`, `pipeline`, ...) that starts a line. The text is read from offset `from`,
/// which is outside comments, strings and words.
fn next_item_start(text: &str, from: usize, at: usize) -> Option<usize> {
    let starts_line = |pos: usize| {
        let line = text[..pos].rfind(['\n', '\r']).map_or(0, |n| n + 1);
        text[line..pos].bytes().all(|b| b == b' ' || b == b'\t')
    };
    scan::tokens(text, from)
        .find(|t| {
            t.kind == scan::Kind::Word
                && t.start >= at
                && ITEM_KEYWORDS.contains(&&text[t.start..t.end])
                && starts_line(t.start)
        })
        .map(|t| t.start)
}

/// `d` with its spans moved `by` bytes on: `d` is about the text from offset `by` on.
fn shifted(mut d: Diag, by: usize) -> Diag {
    let shift = |s: Span| Span::new(s.start + by, s.end + by);
    d.span = shift(d.span);
    for (s, _) in &mut d.secondary {
        *s = shift(*s);
    }
    d
}

/// The span of a pair, without the whitespace and comments an optional tail may have
/// swallowed.
fn span(p: &Pair<Rule>) -> Span {
    let s = p.as_span();
    let text = s.as_str();
    let mut end = text.trim_end().len();
    // a trailing comment line is not part of the construct either
    while let Some(i) = text[..end].rfind('\n') {
        let last = text[i + 1..end].trim_start();
        if last.starts_with("//") {
            end = text[..i].trim_end().len();
        } else {
            break;
        }
    }
    Span::new(s.start(), s.start() + end)
}

/// How a rule pest expected reads in a message.
fn rule_name(r: &Rule) -> &'static str {
    match r {
        Rule::ident => "a name",
        Rule::int => "a number",
        Rule::expr | Rule::sum_expr | Rule::product_expr | Rule::power_expr | Rule::unary => {
            "an expression"
        }
        Rule::item
        | Rule::arch_decl
        | Rule::import_decl
        | Rule::format_decl
        | Rule::pipeline_decl
        | Rule::instruction_decl => "`arch`, `import`, `format`, `pipeline` or `instruction`",
        Rule::EOI => "end of file",
        Rule::stage
        | Rule::chain
        | Rule::flush
        | Rule::multiply
        | Rule::zero_exponent
        | Rule::zero_result
        | Rule::group
        | Rule::align
        | Rule::sum_exact
        | Rule::normalize
        | Rule::accumulate
        | Rule::pairwise
        | Rule::nan_rule
        | Rule::convert
        | Rule::let_step
        | Rule::result_step
        | Rule::repeat
        | Rule::coverage => "a pipeline stage",
        Rule::run_step | Rule::add_step | Rule::fma_step => "`run`, `add`, `fma` or a value",
        Rule::value_ref | Rule::zero_value => "a value (`c`, `0`, `-0` or a `let` name)",
        Rule::k_set | Rule::all_k | Rule::k_range | Rule::k_mod => {
            "k positions (`all k`, `k in A..B`, `k mod M in [..]`)"
        }
        Rule::inst_stmt
        | Rule::for_stmt
        | Rule::shape_stmt
        | Rule::types_stmt
        | Rule::scale_stmt
        | Rule::sparse_stmt
        | Rule::uses_stmt
        | Rule::evidence_stmt => "`for`, `shape`, `types`, `scale`, `sparse`, `uses` or `evidence`",
        Rule::operand => "an operand (`a`, `b` or `c`)",
        Rule::operand_name => "an operand (`a`, `b`, `c` or `d`)",
        Rule::source => "a term source (`products`, `c` or a name)",
        Rule::reference => "`max exponent` or `exponent N`",
        Rule::param => "a parameter",
        Rule::arg => "an argument",
        Rule::name_template | Rule::name_text | Rule::placeholder => "an instruction name",
        Rule::string => "a string",
        Rule::value_list | Rule::value_range => "a list `[...]` or a range `A..B`",
        Rule::binder => "a name or a tuple of names",
        Rule::format_field => "a format field `name = value`",
        Rule::match_arm => "a match arm `pattern => value`",
        Rule::term_class => "`products`, `c` or `groups`",
        Rule::keep_round => "`keep N bits round MODE`",
        Rule::uses_nan => "`nan RULE` (a NaN rule for the instruction)",
        _ => "more input",
    }
}

/// The help line of a syntax error that has nothing more specific to say.
const SYNTAX_HELP: &str = "see docs/language.md for the grammar; statements start with a keyword such as `align` or `instruction`";

/// Turn pest's error into a [`Diag`] about `text`.
fn syntax_error(text: &str, e: pest::error::Error<Rule>) -> Diag {
    use pest::error::{ErrorVariant, InputLocation};
    let (start, end) = match e.location {
        InputLocation::Pos(p) => (p, p),
        InputLocation::Span(span) => span,
    };
    let (message, label) = match &e.variant {
        ErrorVariant::ParsingError {
            positives,
            negatives,
        } => {
            if let Some(d) = missing_brace(text, start) {
                return d;
            }
            if let Some(m) = misspelled_keyword(text, start, positives) {
                return m.diag(text, positives);
            }
            if positives.is_empty() && !negatives.is_empty() {
                (
                    "unexpected input".to_string(),
                    "not expected here".to_string(),
                )
            } else {
                let exp = expected(positives);
                (
                    format!("syntax error: expected {exp}"),
                    format!("expected {exp}"),
                )
            }
        }
        ErrorVariant::CustomError { message } => (message.clone(), "here".to_string()),
    };
    Diag::new(Code::Syntax, error_span(text, start, end), message)
        .label(label)
        .help(SYNTAX_HELP)
}

/// What pest expected, in words: `a pipeline stage`, `a name or an expression`; a rule
/// [`rule_name`] has no words for is named by the keywords it starts with (`` `exact` ``).
fn expected(positives: &[Rule]) -> String {
    let mut names: Vec<String> = positives
        .iter()
        .flat_map(|r| match (rule_name(r), rule_keywords(*r)) {
            ("more input", lists) if !lists.is_empty() => {
                lists.iter().map(|l| format!("`{}`", l.join(" "))).collect()
            }
            (name, _) => vec![name.to_string()],
        })
        .collect();
    names.sort();
    names.dedup();
    match names.split_last() {
        None => "something else".to_string(),
        Some((only, [])) => only.to_string(),
        Some((last, rest)) => format!("{} or {}", rest.join(", "), last),
    }
}

/// The span to report for an error pest placed at `start..end`, kept inside `text` and on
/// character boundaries, as miette needs. A position covers the character there; at the
/// end of the text, where miette would show no label, it covers the character after the
/// last non-blank one (or the last character), so the label lands where the text stops.
fn error_span(text: &str, start: usize, end: usize) -> Span {
    let len = text.len();
    let mut start = start.min(len);
    while !text.is_char_boundary(start) {
        start -= 1;
    }
    let mut end = end.clamp(start, len);
    while !text.is_char_boundary(end) {
        end += 1;
    }
    if start < end {
        return Span::new(start, end);
    }
    if start == len {
        let trimmed = text.trim_end().len();
        start = if trimmed < len {
            trimmed
        } else {
            text.char_indices().next_back().map_or(0, |(i, _)| i)
        };
    }
    let width = text[start..].chars().next().map_or(0, char::len_utf8);
    Span::new(start, start + width)
}

// ---------------------------------------------------------------- misspelled keywords

/// Every keyword of the language: the grammar's `keyword` rule (names cannot be these).
#[rustfmt::skip]
const KEYWORDS: &[&str] = &[
    "arch", "import", "format", "pipeline", "instruction", "for", "in", "shape", "types",
    "scale", "block", "uses", "chain", "every", "bytes", "flush", "subnormal", "multiply",
    "exact", "scaled", "overflow", "at", "zero", "exponent", "never", "group", "products",
    "as", "align", "to", "max", "keep", "bits", "round", "drop", "below", "sum", "normalize",
    "range", "precision", "accumulate", "add", "pairwise", "groups", "of", "nan", "result",
    "match", "step", "sign", "integer", "xor", "and", "let", "convert", "run", "over", "with",
    "into", "evidence", "sparse",
];

/// The keywords each rule pest may name as expected starts with, one list per way the rule
/// can start. A list holds all the keywords before the rule's first other element
/// (`chain every`), so that a misspelling of a later one is found too.
const RULE_KEYWORDS: &[(Rule, &[&[&str]])] = &[
    (Rule::arch_decl, &[&["arch"]]),
    (Rule::import_decl, &[&["import"]]),
    (Rule::format_decl, &[&["format"]]),
    (Rule::pipeline_decl, &[&["pipeline"]]),
    (Rule::instruction_decl, &[&["instruction"]]),
    (Rule::match_expr, &[&["match"]]),
    // pipeline stages
    (Rule::chain, &[&["chain", "every"]]),
    (Rule::flush, &[&["flush", "subnormal"]]),
    (Rule::multiply, &[&["multiply"]]),
    (Rule::zero_exponent, &[&["zero", "exponent"]]),
    (Rule::zero_result, &[&["zero", "result"]]),
    (Rule::group, &[&["group"]]),
    (Rule::align, &[&["align"]]),
    (Rule::sum_exact, &[&["sum", "exact"]]),
    (Rule::normalize, &[&["normalize"]]),
    (Rule::accumulate, &[&["accumulate", "in"]]),
    (Rule::pairwise, &[&["add", "pairwise", "groups", "of"]]),
    (Rule::nan_rule, &[&["nan"]]),
    (Rule::uses_nan, &[&["nan"]]),
    (Rule::convert, &[&["convert"]]),
    (Rule::let_step, &[&["let"]]),
    (Rule::result_step, &[&["result"]]),
    (Rule::repeat, &[&["for"]]),
    (Rule::coverage, &[&["coverage", "any"]]),
    // composed steps
    (Rule::run_step, &[&["run"]]),
    (Rule::add_step, &[&["add"]]),
    (Rule::fma_step, &[&["fma"]]),
    (Rule::all_k, &[&["all", "k"]]),
    (Rule::k_range, &[&["k", "in"]]),
    (Rule::k_mod, &[&["k", "mod"]]),
    (Rule::k_word, &[&["k"]]),
    (Rule::c_word, &[&["c"]]),
    (Rule::mod_word, &[&["mod"]]),
    (Rule::all_word, &[&["all"]]),
    (Rule::add_word, &[&["add"]]),
    (Rule::fma_word, &[&["fma"]]),
    // inside stages
    (Rule::bytes_unit, &[&["bytes"]]),
    (Rule::mul_exact, &[&["exact"]]),
    (Rule::mul_round, &[&["round", "to"]]),
    (Rule::mul_integer, &[&["integer"]]),
    (Rule::mul_xor, &[&["xor"]]),
    (Rule::mul_and, &[&["and"]]),
    (Rule::scaled, &[&["scaled"]]),
    (Rule::overflow_at, &[&["overflow", "at"]]),
    (
        Rule::flush_keep_sign,
        &[&["flush", "subnormal", "keep", "sign"]],
    ),
    (Rule::never, &[&["never"]]),
    (Rule::term_class, &[&["products"], &["c"], &["groups"]]),
    (Rule::keep_round, &[&["keep"]]),
    (Rule::drop_below, &[&["drop", "below"]]),
    (Rule::reference, &[&["max", "exponent"], &["exponent"]]),
    (Rule::max_exponent, &[&["max", "exponent"]]),
    (Rule::fixed_exponent, &[&["exponent"]]),
    (Rule::source, &[&["products"]]),
    (Rule::products_source, &[&["products"]]),
    (Rule::products_part, &[&["even"], &["odd"]]),
    (Rule::norm_to, &[&["to"]]),
    (Rule::norm_range, &[&["range"]]),
    (Rule::norm_precision, &[&["precision"]]),
    (Rule::norm_round, &[&["round"]]),
    (Rule::norm_overflow, &[&["overflow"]]),
    // instruction statements
    (Rule::for_stmt, &[&["for"]]),
    (Rule::shape_stmt, &[&["shape"]]),
    (Rule::types_stmt, &[&["types"]]),
    (Rule::scale_stmt, &[&["scale"]]),
    (Rule::sparse_stmt, &[&["sparse"]]),
    (Rule::pairs_word, &[&["pairs"]]),
    (Rule::uses_stmt, &[&["uses"]]),
    (Rule::evidence_stmt, &[&["evidence"]]),
    (Rule::shape_x, &[&["x"]]),
];

/// The length of the longest list in [`RULE_KEYWORDS`] (`add pairwise groups of`).
const LONGEST_KEYWORD_LIST: usize = 4;

/// The keyword lists `r` starts with (see [`RULE_KEYWORDS`]); none for most rules.
fn rule_keywords(r: Rule) -> &'static [&'static [&'static str]] {
    RULE_KEYWORDS
        .iter()
        .find(|(rule, _)| *rule == r)
        .map_or(&[], |(_, lists)| lists)
}

/// The name-like word (a letter or `_`, then letters, digits and `_`) that byte offset
/// `pos` is in or right after.
fn word_at(text: &str, pos: usize) -> Option<Span> {
    let b = text.as_bytes();
    let pos = pos.min(b.len());
    let start = pos
        - b[..pos]
            .iter()
            .rev()
            .take_while(|c| is_word_byte(**c))
            .count();
    let end = pos + b[pos..].iter().take_while(|c| is_word_byte(**c)).count();
    (start < end && !b[start].is_ascii_digit()).then_some(Span::new(start, end))
}

/// The offset of the first byte at or after `pos` that is not blank or in a `//` comment.
fn skip_blank(text: &str, mut pos: usize) -> usize {
    let b = text.as_bytes();
    loop {
        while pos < b.len() && matches!(b[pos], b' ' | b'\t' | b'\r' | b'\n') {
            pos += 1;
        }
        if !text[pos..].starts_with("//") {
            return pos;
        }
        pos = text[pos..].find('\n').map_or(b.len(), |n| pos + n);
    }
}

/// The word at `pos` (see [`word_at`]) and the words after it that only blanks and
/// comments separate from it: at most `n`.
fn words_from(text: &str, pos: usize, n: usize) -> Vec<Span> {
    let mut words = vec![];
    let mut next = word_at(text, pos);
    while let Some(w) = next {
        if words.len() == n {
            break;
        }
        words.push(w);
        let p = skip_blank(text, w.end);
        next = word_at(text, p).filter(|x| x.start == p);
    }
    words
}

/// The text of a span.
fn text_of(text: &str, s: Span) -> &str {
    &text[s.start..s.end]
}

/// A word that is likely a misspelled keyword.
#[derive(Debug, PartialEq)]
struct Misspelling {
    /// The misspelled word.
    word: Span,
    /// The correct keywords before it that the expected rule starts with (`max` before
    /// `exponnt`).
    after: Vec<Span>,
    /// The keywords the grammar expects at the word; empty when found by [`reparse_fix`].
    expected: Vec<&'static str>,
    /// The keyword it is close to.
    meant: String,
}

/// The misspelled keyword at an error pest placed at `pos`, expecting `positives`: the
/// keywords those rules start with (see [`RULE_KEYWORDS`]) are read from `pos` on, and the
/// first word that differs from all of them is compared with the keywords expected there.
/// If none is close, the words there are tried against every keyword by [`reparse_fix`].
fn misspelled_keyword(text: &str, pos: usize, positives: &[Rule]) -> Option<Misspelling> {
    let words = words_from(text, pos, LONGEST_KEYWORD_LIST);
    // the longest run of correct keywords, and the keywords that may follow it
    let mut best: Option<usize> = None;
    let mut expected: Vec<&'static str> = vec![];
    for list in positives.iter().flat_map(|r| rule_keywords(*r)) {
        let k = list
            .iter()
            .zip(&words)
            .take_while(|(kw, w)| **kw == text_of(text, **w))
            .count();
        if k == list.len() || k == words.len() || best.is_some_and(|b| b > k) {
            continue;
        }
        if best != Some(k) {
            best = Some(k);
            expected.clear();
        }
        if !expected.contains(&list[k]) {
            expected.push(list[k]);
        }
    }
    let found = best.and_then(|k| {
        let word = words[k];
        let meant = closest(text_of(text, word), expected.iter().copied())?;
        (meant != text_of(text, word)).then(|| Misspelling {
            word,
            after: words[..k].to_vec(),
            expected: expected.clone(),
            meant,
        })
    });
    found.or_else(|| reparse_fix(text, &words))
}

/// The first of `words` that, replaced by the keyword closest to it, lets the parser get
/// past it: for a misspelling where pest names no rule that starts with a keyword (`keep F
/// bitz`, after an expression) or names the word before it (`bits rund`).
fn reparse_fix(text: &str, words: &[Span]) -> Option<Misspelling> {
    words.iter().find_map(|&w| {
        let word = text_of(text, w);
        let meant = closest(word, KEYWORDS.iter().copied().filter(|k| *k != word))?;
        let fixed = format!("{}{meant}{}", &text[..w.start], &text[w.end..]);
        let past = match MmaParser::parse(Rule::file, &fixed) {
            Ok(_) => true,
            Err(e) => error_start(&e) >= w.start + meant.len(),
        };
        past.then(|| Misspelling {
            word: w,
            after: vec![],
            expected: vec![],
            meant,
        })
    })
}

/// Where pest placed an error.
fn error_start(e: &pest::error::Error<Rule>) -> usize {
    match e.location {
        pest::error::InputLocation::Pos(p) => p,
        pest::error::InputLocation::Span((s, _)) => s,
    }
}

impl Misspelling {
    /// The diagnostic: the whole word labelled, the keyword it is close to as the help.
    fn diag(&self, text: &str, positives: &[Rule]) -> Diag {
        let word = text_of(text, self.word);
        let message = if self.expected.is_empty() {
            format!("syntax error: unexpected `{word}`")
        } else if self.after.is_empty() {
            // the rules a word can start: a word was not meant to be a string or the end
            let starts: Vec<Rule> = positives
                .iter()
                .copied()
                .filter(|r| !rule_keywords(*r).is_empty())
                .collect();
            format!(
                "syntax error: expected {}, found `{word}`",
                expected(&starts)
            )
        } else {
            let after: Vec<&str> = self.after.iter().map(|s| text_of(text, *s)).collect();
            let options: Vec<String> = self.expected.iter().map(|k| format!("`{k}`")).collect();
            format!(
                "syntax error: expected {} after `{}`, found `{word}`",
                options.join(" or "),
                after.join(" ")
            )
        };
        let label = if KEYWORDS.contains(&word) {
            "not valid here"
        } else {
            "not a keyword"
        };
        Diag::new(Code::Syntax, self.word, message)
            .label(label)
            .help(format!("did you mean `{}`?", self.meant))
    }
}

// ---------------------------------------------------------------- unclosed braces

/// Keywords whose construct has a `{ ... }` body, which the missing-`}` message names.
const BLOCK_KEYWORDS: [&str; 4] = ["format", "pipeline", "instruction", "match"];

/// Keywords that start a top-level item.
const ITEM_KEYWORDS: [&str; 5] = ["arch", "import", "format", "pipeline", "instruction"];

/// A `{` still open, and the construct it opens as far as the text before it tells.
#[derive(Debug, PartialEq)]
struct OpenBrace {
    /// The offset of the `{`.
    at: usize,
    /// The construct, as a message names it: `` `pipeline t_fdpa` ``, `` this `match` ``.
    what: Option<String>,
}

/// The innermost bracket still open at offset `end`, if it is a `{`: the brackets before
/// `end` outside comments and strings ([`scan`]), where a closer that does not match the
/// innermost open bracket is ignored.
fn unclosed_brace(text: &str, end: usize) -> Option<OpenBrace> {
    // the open brackets, innermost last
    let mut open: Vec<(u8, OpenBrace)> = vec![];
    // at each depth, the last block keyword that no `{` has taken yet
    let mut keyword: Vec<Option<Span>> = vec![None];
    for token in scan::tokens(text, 0).take_while(|t| t.start < end) {
        let at = token.start;
        match token.kind {
            scan::Kind::Open(c) => {
                let what = if c == b'{' && !is_placeholder(text, at) {
                    let k = keyword.last_mut().and_then(Option::take);
                    k.and_then(|k| block_name(text, k, at))
                } else {
                    None
                };
                open.push((c, OpenBrace { at, what }));
                keyword.push(None);
            }
            scan::Kind::Close(c) => {
                let opener = match c {
                    b')' => b'(',
                    b']' => b'[',
                    _ => b'{',
                };
                if open.last().is_some_and(|(o, _)| *o == opener) {
                    open.pop();
                    keyword.pop();
                }
            }
            scan::Kind::Word => {
                let in_name = at > 0 && matches!(text.as_bytes()[at - 1], b'.' | b':');
                if !in_name
                    && BLOCK_KEYWORDS.contains(&&text[at..token.end])
                    && let Some(k) = keyword.last_mut()
                {
                    *k = Some(Span::new(at, token.end));
                }
            }
        }
    }
    match open.pop() {
        Some((b'{', brace)) => Some(brace),
        _ => None,
    }
}

/// Whether the `{` at `at` opens a placeholder of an instruction name (`mma.m16n8k{K}`):
/// right after the name's text, with a name and `}` right after it.
fn is_placeholder(text: &str, at: usize) -> bool {
    let b = text.as_bytes();
    let after_text = at > 0 && (is_word_byte(b[at - 1]) || matches!(b[at - 1], b'.' | b':' | b'}'));
    after_text
        && word_at(text, at + 1).is_some_and(|w| w.start == at + 1 && b.get(w.end) == Some(&b'}'))
}

/// How a message names the construct that block keyword `kw` starts and the `{` at
/// `brace` opens: `` `pipeline t_fdpa` ``, `` `instruction mma.m16n8k{K}.f32` ``,
/// `` this `match` ``.
fn block_name(text: &str, kw: Span, brace: usize) -> Option<String> {
    let keyword = text_of(text, kw);
    let head = text[kw.end..brace].trim();
    let name = match keyword {
        "instruction" => head,
        "pipeline" | "format" => {
            let w = word_at(text, skip_blank(text, kw.end))?;
            if w.end > brace {
                return None;
            }
            text_of(text, w)
        }
        _ => "",
    };
    Some(if name.is_empty() || name.contains(char::is_whitespace) {
        format!("this `{keyword}`")
    } else {
        format!("`{keyword} {name}`")
    })
}

/// The error for a missing `}`, if that is what pest's error at `pos` is: the text ends
/// there or a top-level keyword starts there, a `}` inserted there would be read, and
/// the innermost bracket still open there is a `{`, which gets a label of its own.
fn missing_brace(text: &str, pos: usize) -> Option<Diag> {
    let pos = pos.min(text.len());
    let item =
        word_at(text, pos).filter(|w| w.start == pos && ITEM_KEYWORDS.contains(&text_of(text, *w)));
    if item.is_none() && skip_blank(text, pos) < text.len() {
        return None;
    }
    let brace = unclosed_brace(text, pos)?;
    let closed = format!("{}}}\n{}", &text[..pos], &text[pos..]);
    if let Err(e) = MmaParser::parse(Rule::file, &closed)
        && error_start(&e) <= pos
    {
        return None;
    }
    let what = brace.what.unwrap_or_else(|| "this block".to_string());
    let end_of = what.replacen("this ", "the ", 1);
    let (span, label, help) = match item {
        Some(w) => (
            w,
            format!("expected `}}` before this `{}`", text_of(text, w)),
            format!(
                "add a `}}` at the end of {end_of}, before `{}`",
                text_of(text, w)
            ),
        ),
        None => (
            error_span(text, text.len(), text.len()),
            "the file ends here".to_string(),
            format!("add a `}}` at the end of {end_of}"),
        ),
    };
    Some(
        Diag::new(
            Code::Syntax,
            span,
            format!("{what} is missing its closing `}}`"),
        )
        .label(label)
        .also(
            Span::new(brace.at, brace.at + 1),
            "this `{` is never closed",
        )
        .help(help),
    )
}

fn ident(p: Pair<Rule>) -> Ident {
    Ident {
        name: p.as_str().to_string(),
        span: span(&p),
    }
}

fn item(p: Pair<Rule>) -> Item {
    let sp = span(&p);
    match p.as_rule() {
        Rule::arch_decl => {
            let mut it = p.into_inner();
            let name = ident(it.next().unwrap());
            let title = it
                .next()
                .map(|s| s.into_inner().next().unwrap().as_str().to_string());
            Item::Arch {
                name,
                title,
                span: sp,
            }
        }
        Rule::import_decl => Item::Import {
            name: ident(p.into_inner().next().unwrap()),
            span: sp,
        },
        Rule::format_decl => {
            let mut it = p.into_inner();
            let name = ident(it.next().unwrap());
            let fields = it
                .map(|f| {
                    let mut fi = f.into_inner();
                    (ident(fi.next().unwrap()), expr(fi.next().unwrap()))
                })
                .collect();
            Item::Format(FormatDecl {
                name,
                fields,
                span: sp,
            })
        }
        Rule::pipeline_decl => {
            let mut it = p.into_inner();
            let name = ident(it.next().unwrap());
            let mut params = vec![];
            let mut stages = vec![];
            for q in it {
                if q.as_rule() == Rule::param {
                    let mut pi = q.into_inner();
                    params.push(Param {
                        name: ident(pi.next().unwrap()),
                        default: pi.next().map(expr),
                    });
                } else {
                    stages.push(stage(q));
                }
            }
            Item::Pipeline(PipelineDecl {
                name,
                params,
                stages,
                span: sp,
            })
        }
        Rule::instruction_decl => Item::Instruction(instruction(p)),
        r => unreachable!("item rule {r:?}"),
    }
}

fn keep_round(p: Pair<Rule>) -> KeepRound {
    let mut it = p.into_inner();
    KeepRound {
        keep: expr(it.next().unwrap()),
        round: expr(it.next().unwrap()),
    }
}

fn stage(p: Pair<Rule>) -> Stage {
    let sp = span(&p);
    let rule = p.as_rule();
    let mut it = p.into_inner();
    let kind = match rule {
        Rule::chain => {
            let length = expr(it.next().unwrap());
            StageKind::Chain {
                length,
                bytes: it.next().is_some(),
            }
        }
        Rule::flush => StageKind::Flush {
            operands: it.map(|o| operand(o.as_str())).collect(),
        },
        Rule::multiply => multiply_stage(it),
        Rule::zero_exponent => zero_exponent_stage(it),
        Rule::zero_result => StageKind::ZeroResult(ident(it.next().unwrap())),
        Rule::group => group_stage(it),
        Rule::align => align_stage(it),
        Rule::sum_exact => StageKind::SumExact,
        Rule::normalize => normalize_stage(it),
        Rule::accumulate => {
            let format = expr(it.next().unwrap());
            let rounding = expr(it.next().unwrap());
            StageKind::Accumulate {
                format,
                rounding,
                flush_keep_sign: it.next().is_some(),
            }
        }
        Rule::pairwise => {
            let size = expr(it.next().unwrap());
            let format = expr(it.next().unwrap());
            let rounding = expr(it.next().unwrap());
            StageKind::Pairwise {
                size,
                format,
                rounding,
                flush_keep_sign: it.next().is_some(),
            }
        }
        Rule::nan_rule => StageKind::Nan(ident(it.next().unwrap())),
        Rule::convert => convert_stage(it),
        Rule::let_step => {
            let name = ident(it.next().unwrap());
            let value = step_expr(it.next().unwrap());
            StageKind::Let { name, value }
        }
        Rule::result_step => StageKind::Result(ident(it.next().unwrap())),
        Rule::repeat => repeat_stage(it),
        Rule::coverage => StageKind::Coverage,
        r => unreachable!("stage rule {r:?}"),
    };
    Stage { kind, span: sp }
}

/// The inner pairs of a stage, after its keywords.
type StageParts<'a> = pest::iterators::Pairs<'a, Rule>;

/// `multiply exact, scaled, overflow at 2^128` and the other products.
fn multiply_stage(mut it: StageParts) -> StageKind {
    let k = it.next().unwrap();
    let kind = match k.as_rule() {
        Rule::mul_exact => MultiplyKind::Exact,
        Rule::mul_round => {
            let mut ki = k.into_inner();
            MultiplyKind::Round {
                format: expr(ki.next().unwrap()),
                rounding: expr(ki.next().unwrap()),
            }
        }
        Rule::mul_integer => MultiplyKind::Integer,
        Rule::mul_xor => MultiplyKind::Xor,
        _ => MultiplyKind::And,
    };
    let mut scaled = false;
    let mut overflow_at = None;
    let mut flush_keep_sign = false;
    for o in it {
        match o.as_rule() {
            Rule::scaled => scaled = true,
            Rule::overflow_at => overflow_at = Some(expr(o.into_inner().next().unwrap())),
            _ => flush_keep_sign = true,
        }
    }
    StageKind::Multiply {
        kind,
        scaled,
        overflow_at,
        flush_keep_sign,
    }
}

/// `zero exponent -133`, `zero exponent never for products`.
fn zero_exponent_stage(mut it: StageParts) -> StageKind {
    let e = it.next().unwrap();
    let exponent = if e.as_rule() == Rule::never {
        None
    } else {
        Some(expr(e))
    };
    let class = it.next().map(|c| match c.as_str() {
        "products" => TermClass::Products,
        "groups" => TermClass::Groups,
        _ => TermClass::C,
    });
    StageKind::ZeroExponent { exponent, class }
}

/// `group 16 products exact, scaled as blocks`.
fn group_stage(mut it: StageParts) -> StageKind {
    let size = expr(it.next().unwrap());
    let mut scaled = false;
    let mut name = None;
    for q in it {
        match q.as_rule() {
            Rule::scaled => scaled = true,
            _ => name = Some(ident(q)),
        }
    }
    StageKind::Group {
        size,
        scaled,
        name: name.unwrap(),
    }
}

/// `align products, c to max exponent keep 25 bits round toward_zero`.
fn align_stage(it: StageParts) -> StageKind {
    let mut terms = vec![];
    let mut reference = Reference::MaxExponent;
    let mut kr = None;
    let mut name = None;
    for q in it {
        match q.as_rule() {
            Rule::align_term => terms.push(align_term(q)),
            Rule::reference => {
                let r = q.into_inner().next().unwrap();
                reference = match r.as_rule() {
                    Rule::max_exponent => Reference::MaxExponent,
                    _ => Reference::Fixed(expr(r.into_inner().next().unwrap())),
                };
            }
            Rule::keep_round => kr = Some(keep_round(q)),
            _ => name = Some(ident(q)),
        }
    }
    StageKind::Align {
        terms,
        reference,
        keep_round: kr,
        name,
    }
}

/// `normalize to out round rho`, or `normalize range R` with precision, rounding and
/// overflow.
fn normalize_stage(mut it: StageParts) -> StageKind {
    let t = it.next().unwrap();
    let target = match t.as_rule() {
        Rule::norm_to => NormalizeTarget::To(expr(t.into_inner().next().unwrap())),
        _ => NormalizeTarget::Range(expr(t.into_inner().next().unwrap())),
    };
    let mut precision = None;
    let mut rounding = None;
    let mut overflow = None;
    for q in it {
        match q.as_rule() {
            Rule::norm_precision => precision = Some(expr(q.into_inner().next().unwrap())),
            Rule::norm_round => rounding = Some(expr(q.into_inner().next().unwrap())),
            _ => overflow = Some(expr(q.into_inner().next().unwrap())),
        }
    }
    StageKind::Normalize {
        target,
        precision,
        rounding,
        overflow,
    }
}

/// `convert a, b to F round MODE`, with an optional `overflow` rule.
fn convert_stage(it: StageParts) -> StageKind {
    let mut operands = vec![];
    let mut exprs = vec![];
    let mut overflow = None;
    for q in it {
        match q.as_rule() {
            Rule::operand => operands.push(operand(q.as_str())),
            Rule::norm_overflow => overflow = Some(expr(q.into_inner().next().unwrap())),
            _ => exprs.push(expr(q)),
        }
    }
    let mut exprs = exprs.into_iter();
    StageKind::Convert {
        operands,
        format: exprs.next().unwrap(),
        rounding: exprs.next().unwrap(),
        overflow,
    }
}

/// `for i in A..B step S { stages }`.
fn repeat_stage(mut it: StageParts) -> StageKind {
    let var = ident(it.next().unwrap());
    let from = expr(it.next().unwrap());
    let to = expr(it.next().unwrap());
    let mut step = None;
    let mut body = vec![];
    for q in it {
        match q.as_rule() {
            Rule::expr => step = Some(expr(q)),
            _ => body.push(stage(q)),
        }
    }
    StageKind::Repeat {
        var,
        from,
        to,
        step,
        body,
    }
}

fn operand(s: &str) -> Operand {
    match s {
        "a" => Operand::A,
        "b" => Operand::B,
        _ => Operand::C,
    }
}

/// The right side of a `let`.
fn step_expr(p: Pair<Rule>) -> StepExpr {
    let sp = span(&p);
    let rule = p.as_rule();
    let mut it = p.into_inner();
    match rule {
        Rule::run_step => {
            let target = it.next().unwrap().into_inner().next().unwrap();
            let target = match target.as_rule() {
                Rule::run_pipeline => {
                    let mut ti = target.into_inner();
                    let name = ident(ti.next().unwrap());
                    let mut args = vec![];
                    let mut into = None;
                    for q in ti {
                        match q.as_rule() {
                            Rule::arg => args.push(arg(q)),
                            _ => into = Some(expr(q)),
                        }
                    }
                    RunTarget::Pipeline {
                        name,
                        args,
                        into: into.unwrap(),
                    }
                }
                _ => RunTarget::Instruction(expr(target)),
            };
            let set = it.next().unwrap();
            let positions = set
                .into_inner()
                .filter(|q| q.as_rule() != Rule::all_k)
                .map(k_clause)
                .collect();
            let c = value_ref(it.find(|q| q.as_rule() == Rule::value_ref).unwrap());
            StepExpr::Run {
                target,
                positions,
                c,
                span: sp,
            }
        }
        Rule::add_step => {
            let mut refs = vec![];
            let mut exprs = vec![];
            for q in it {
                match q.as_rule() {
                    Rule::value_ref => refs.push(value_ref(q)),
                    Rule::add_word => {}
                    _ => exprs.push(expr(q)),
                }
            }
            let (mut refs, mut exprs) = (refs.into_iter(), exprs.into_iter());
            StepExpr::Add {
                x: refs.next().unwrap(),
                y: refs.next().unwrap(),
                format: exprs.next().unwrap(),
                rounding: exprs.next().unwrap(),
            }
        }
        Rule::fma_step => {
            let mut refs = vec![];
            let mut exprs = vec![];
            for q in it {
                match q.as_rule() {
                    Rule::value_ref => refs.push(value_ref(q)),
                    Rule::fma_word => {}
                    _ => exprs.push(expr(q)),
                }
            }
            let (mut refs, mut exprs) = (refs.into_iter(), exprs.into_iter());
            StepExpr::Fma {
                x: refs.next().unwrap(),
                y: refs.next().unwrap(),
                z: refs.next().unwrap(),
                format: exprs.next().unwrap(),
                rounding: exprs.next().unwrap(),
            }
        }
        _ => StepExpr::Value(value_ref_inner(rule, it, sp)),
    }
}

fn value_ref(p: Pair<Rule>) -> ValueRef {
    let sp = span(&p);
    let rule = p.as_rule();
    value_ref_inner(rule, p.into_inner(), sp)
}

fn value_ref_inner(rule: Rule, mut it: pest::iterators::Pairs<Rule>, sp: Span) -> ValueRef {
    debug_assert_eq!(rule, Rule::value_ref);
    let inner = it.next().unwrap();
    match inner.as_rule() {
        Rule::zero_value => ValueRef::Zero {
            span: sp,
            negative: inner.as_str().starts_with('-'),
        },
        _ => ValueRef::Name(ident(inner)),
    }
}

fn k_clause(p: Pair<Rule>) -> KClause {
    let sp = span(&p);
    let rule = p.as_rule();
    let it = p
        .into_inner()
        .filter(|q| !matches!(q.as_rule(), Rule::k_word | Rule::mod_word));
    let exprs: Vec<Expr> = it.map(expr).collect();
    let mut exprs = exprs.into_iter();
    match rule {
        Rule::k_mod => KClause::Mod {
            modulus: exprs.next().unwrap(),
            residues: exprs.collect(),
            span: sp,
        },
        _ => KClause::Range {
            from: Box::new(exprs.next().unwrap()),
            to: Box::new(exprs.next().unwrap()),
            step: exprs.next().map(Box::new),
            span: sp,
        },
    }
}

fn arg(a: Pair<Rule>) -> Arg {
    let mut ai = a.into_inner();
    let first = ai.next().unwrap();
    if first.as_rule() == Rule::ident {
        Arg {
            name: Some(ident(first)),
            value: expr(ai.next().unwrap()),
        }
    } else {
        Arg {
            name: None,
            value: expr(first),
        }
    }
}

fn align_term(p: Pair<Rule>) -> AlignTerm {
    let sp = span(&p);
    let mut it = p.into_inner();
    let src = it.next().unwrap().into_inner().next().unwrap();
    let source = match src.as_rule() {
        Rule::products_source => {
            let part = match src.into_inner().next().map(|x| x.as_str().to_string()) {
                Some(s) if s == "even" => ProductsPart::Even,
                Some(s) if s == "odd" => ProductsPart::Odd,
                _ => ProductsPart::All,
            };
            Source::Products(part)
        }
        _ => Source::Named(ident(src)),
    };
    let mut keep_round_v = None;
    let mut drop_below = None;
    for q in it {
        match q.as_rule() {
            Rule::keep_round => keep_round_v = Some(keep_round(q)),
            _ => drop_below = Some(expr(q.into_inner().next().unwrap())),
        }
    }
    AlignTerm {
        source,
        keep_round: keep_round_v,
        drop_below,
        span: sp,
    }
}

fn instruction(p: Pair<Rule>) -> InstructionDecl {
    let sp = span(&p);
    let mut it = p.into_inner();
    let tmpl = it.next().unwrap();
    let name_span = span(&tmpl);
    let name = tmpl
        .into_inner()
        .map(|q| match q.as_rule() {
            Rule::placeholder => NamePart::Placeholder(ident(q.into_inner().next().unwrap())),
            _ => NamePart::Text(q.as_str().to_string()),
        })
        .collect();
    let mut decl = InstructionDecl {
        name,
        name_span,
        bindings: vec![],
        shape: None,
        types: vec![],
        scale: None,
        sparse: None,
        uses: None,
        evidence: vec![],
        span: sp,
    };
    for q in it {
        let qs = span(&q);
        match q.as_rule() {
            Rule::for_stmt => {
                let mut fi = q.into_inner();
                let binder = fi.next().unwrap();
                let names = binder.into_inner().map(ident).collect();
                let vals = fi.next().unwrap();
                let values = match vals.as_rule() {
                    Rule::value_list => {
                        BindingValues::List(vals.into_inner().map(value_item).collect())
                    }
                    _ => {
                        let mut vi = vals.into_inner();
                        BindingValues::Range {
                            from: expr(vi.next().unwrap()),
                            to: expr(vi.next().unwrap()),
                            step: vi.next().map(expr),
                        }
                    }
                };
                decl.bindings.push(Binding {
                    names,
                    values,
                    span: qs,
                });
            }
            Rule::shape_stmt => {
                let mut si = q.into_inner().filter(|x| x.as_rule() != Rule::shape_x);
                let m = expr(si.next().unwrap());
                let n = expr(si.next().unwrap());
                let k = expr(si.next().unwrap());
                decl.shape = Some(([m, n, k], qs));
            }
            Rule::types_stmt => {
                for b in q.into_inner() {
                    let bs = span(&b);
                    let mut bi = b.into_inner();
                    let op = bi.next().unwrap().as_str().chars().next().unwrap();
                    decl.types.push((op, expr(bi.next().unwrap()), bs));
                }
            }
            Rule::scale_stmt => {
                let mut si = q.into_inner();
                decl.scale = Some((expr(si.next().unwrap()), expr(si.next().unwrap()), qs));
            }
            Rule::sparse_stmt => {
                let mut si = q.into_inner().peekable();
                let operand = si.next().unwrap();
                let kept = expr(si.next().unwrap());
                let group = expr(si.next().unwrap());
                let pairs = si.next_if(|p| p.as_rule() == Rule::pairs_word).is_some();
                decl.sparse = Some(SparseDecl {
                    operand: operand.as_str().chars().next().unwrap(),
                    operand_span: span(&operand),
                    kept,
                    group,
                    pairs,
                    over: si.next().map(ident),
                    span: qs,
                });
            }
            Rule::uses_stmt => {
                let mut ui = q.into_inner();
                let pipeline = ident(ui.next().unwrap());
                let mut args = vec![];
                let mut nan = None;
                for p in ui {
                    match p.as_rule() {
                        Rule::uses_nan => nan = p.into_inner().next().map(ident),
                        _ => args.push(arg(p)),
                    }
                }
                decl.uses = Some(Uses {
                    pipeline,
                    args,
                    nan,
                    span: qs,
                });
            }
            Rule::evidence_stmt => decl.evidence.extend(q.into_inner().map(ident)),
            r => unreachable!("instruction statement {r:?}"),
        }
    }
    decl
}

fn value_item(p: Pair<Rule>) -> Expr {
    let inner = p.into_inner().next().unwrap();
    match inner.as_rule() {
        Rule::tuple => {
            let sp = span(&inner);
            Expr {
                kind: ExprKind::Tuple(inner.into_inner().map(expr).collect()),
                span: sp,
            }
        }
        _ => expr(inner),
    }
}

fn expr(p: Pair<Rule>) -> Expr {
    let sp = span(&p);
    match p.as_rule() {
        Rule::expr | Rule::paren => expr(p.into_inner().next().unwrap()),
        Rule::sum_expr => {
            let mut it = p.into_inner();
            let mut acc = expr(it.next().unwrap());
            while let Some(op) = it.next() {
                let rhs = expr(it.next().unwrap());
                let op = if op.as_str() == "+" {
                    BinOp::Add
                } else {
                    BinOp::Sub
                };
                let s = acc.span.join(rhs.span);
                acc = Expr {
                    kind: ExprKind::Binary(op, Box::new(acc), Box::new(rhs)),
                    span: s,
                };
            }
            acc
        }
        Rule::product_expr => {
            let mut it = p.into_inner();
            let mut acc = expr(it.next().unwrap());
            while let Some(op) = it.next() {
                let rhs = expr(it.next().unwrap());
                let op = if op.as_str() == "*" {
                    BinOp::Mul
                } else {
                    BinOp::Div
                };
                let s = acc.span.join(rhs.span);
                acc = Expr {
                    kind: ExprKind::Binary(op, Box::new(acc), Box::new(rhs)),
                    span: s,
                };
            }
            acc
        }
        Rule::string => Expr {
            kind: ExprKind::Str(p.into_inner().next().unwrap().as_str().to_string()),
            span: sp,
        },
        Rule::power_expr => {
            let mut it = p.into_inner();
            let base = expr(it.next().unwrap());
            match it.next() {
                None => base,
                Some(e) => {
                    let e = expr(e);
                    Expr {
                        kind: ExprKind::Binary(BinOp::Pow, Box::new(base), Box::new(e)),
                        span: sp,
                    }
                }
            }
        }
        Rule::unary => {
            let mut it = p.into_inner();
            let first = it.next().unwrap();
            if first.as_rule() == Rule::neg {
                let inner = expr(it.next().unwrap());
                Expr {
                    kind: ExprKind::Neg(Box::new(inner)),
                    span: sp,
                }
            } else {
                expr(first)
            }
        }
        Rule::int => {
            // the grammar allows any digit string; an out-of-range literal is kept as a
            // sentinel the checker reports
            let v = p.as_str().parse::<i64>().unwrap_or(i64::MIN);
            Expr {
                kind: ExprKind::Int(v),
                span: sp,
            }
        }
        Rule::path => {
            let mut it = p.into_inner();
            let head = ident(it.next().unwrap());
            Expr {
                kind: ExprKind::Path(head, it.next().map(ident)),
                span: sp,
            }
        }
        Rule::match_expr => {
            let mut it = p.into_inner();
            let scrut = expr(it.next().unwrap());
            let arms = it
                .map(|arm| {
                    let mut ai = arm.into_inner();
                    let pat = ai.next().unwrap();
                    let pat = pat
                        .into_inner()
                        .next()
                        .filter(|x| x.as_rule() != Rule::wildcard)
                        .map(expr);
                    (pat, expr(ai.next().unwrap()))
                })
                .collect();
            Expr {
                kind: ExprKind::Match(Box::new(scrut), arms),
                span: sp,
            }
        }
        r => unreachable!("expression rule {r:?}"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The first syntax error of `src`, which must not parse.
    fn first_error(src: &str) -> Diag {
        parse(src).unwrap_err().remove(0)
    }

    #[test]
    fn parses_a_small_spec() {
        let src = r#"
            arch demo "A demo"
            import std
            format e4m3x { exponent = 4, mantissa = 3, bias = 7, specials = fn }
            pipeline p(F, L = 16) {
                chain every L
                multiply exact
                zero exponent -133
                align products, c to max exponent keep F bits round toward_zero
                normalize to out round toward_zero
                nan canonical
            }
            instruction mma.m16n8k{K}.{D}.{A}.{A}.{C} {
                for K in [8, 16]
                for (D, A, C) in [(f32, f16, f32), (f16, f16, f16)]
                shape 16 x 8 x K
                types a = A, b = A, c = C, d = D
                uses p(F = 25, L = match D { f32 => 16, _ => 8 })
            }
        "#;
        let f = parse(src).unwrap();
        assert_eq!(f.items.len(), 5);
        let Item::Instruction(i) = &f.items[4] else {
            panic!()
        };
        assert_eq!(i.bindings.len(), 2);
        assert_eq!(i.types.len(), 4);
        assert!(i.uses.is_some());
    }

    #[test]
    fn syntax_error_has_span() {
        let e = first_error("arch x\npipeline p( { }");
        assert_eq!(e.code, Code::Syntax);
        assert!(e.span.start >= 18, "{:?}", e.span);
    }

    #[test]
    fn error_spans_stay_inside_the_text() {
        // a position covers the character there, a whole one
        assert_eq!(error_span("ab", 0, 0), Span::new(0, 1));
        assert_eq!(error_span("a\u{e9}b", 1, 1), Span::new(1, 3));
        assert_eq!(error_span("a\u{e9}b", 2, 2), Span::new(1, 3));
        // at the end: the character after the last non-blank one, else the last one
        assert_eq!(error_span("ab\n\n", 4, 4), Span::new(2, 3));
        assert_eq!(error_span("ab", 2, 2), Span::new(1, 2));
        assert_eq!(error_span("a\u{e9}", 3, 3), Span::new(1, 3));
        assert_eq!(error_span("ab", 7, 9), Span::new(1, 2));
        assert_eq!(error_span("", 0, 1), Span::new(0, 0));
        // a real span is kept, clipped to the text
        assert_eq!(error_span("abcd", 1, 3), Span::new(1, 3));
        assert_eq!(error_span("abcd", 1, 30), Span::new(1, 4));
    }

    #[test]
    fn syntax_errors_of_truncated_text_point_inside_it() {
        let src = "arch demo \"d\u{e9}mo\"\npipeline p(F) {\n    multiply exact // \u{2192} exact\n    align products, c to max exponent keep F bits round toward_zero\n}\n";
        for cut in (0..=src.len()).filter(|&i| src.is_char_boundary(i)) {
            let text = &src[..cut];
            for e in parse(text).err().into_iter().flatten() {
                let s = e.span;
                assert!(s.start <= s.end && s.end <= text.len(), "{cut}: {s:?}");
                assert!(text.is_char_boundary(s.start) && text.is_char_boundary(s.end));
                assert!(text.is_empty() || s.start < s.end, "{cut}: empty span");
            }
        }
    }

    /// The misspelled word of `src`'s syntax error and the help, or the error's message.
    fn suggestion(src: &str) -> (String, String) {
        let e = first_error(src);
        match e
            .help
            .as_deref()
            .and_then(|h| h.strip_prefix("did you mean "))
        {
            Some(h) => (src[e.span.start..e.span.end].to_string(), h.to_string()),
            None => (String::new(), e.message),
        }
    }

    /// A pipeline whose second stage is `stages`.
    fn pipeline(stages: &str) -> String {
        format!("pipeline p(F) {{\n    multiply exact\n    {stages}\n}}\n")
    }

    #[test]
    fn misspelled_keywords_get_a_suggestion() {
        let cases = [
            // where an item, a stage or an instruction statement starts
            (
                "arch x\npipline t(F) {\n}\n".to_string(),
                "pipline",
                "`pipeline`?",
            ),
            (
                "instruction x {\n    shpe 16 x 8 x 16\n}\n".to_string(),
                "shpe",
                "`shape`?",
            ),
            (
                pipeline("allign products, c to max exponent keep F bits round toward_zero"),
                "allign",
                "`align`?",
            ),
            // a later keyword of a rule that starts with several
            (
                pipeline("align products, c to max exponnt keep F bits round toward_zero"),
                "exponnt",
                "`exponent`?",
            ),
            (
                pipeline("flush subnormol a to zero"),
                "subnormol",
                "`subnormal`?",
            ),
            (pipeline("chain evry 16"), "evry", "`every`?"),
            (pipeline("zero exponnt -133"), "exponnt", "`exponent`?"),
            (
                pipeline("add pairwise grups of 2 in f32 round down"),
                "grups",
                "`groups`?",
            ),
            // a keyword where another one close to it belongs
            (pipeline("multiply exact, scale"), "scale", "`scaled`?"),
            (pipeline("multiply exct"), "exct", "`exact`?"),
            // after an expression, where pest names only the operators
            (
                pipeline("align products, c to max exponent keep F bitz round toward_zero"),
                "bitz",
                "`bits`?",
            ),
            (
                pipeline("align products, c to max exponent keep F bits rund toward_zero"),
                "rund",
                "`round`?",
            ),
            // a keyword with letters after it
            (pipeline("sum exactt"), "exactt", "`exact`?"),
        ];
        for (src, word, help) in cases {
            assert_eq!(
                suggestion(&src),
                (word.to_string(), help.to_string()),
                "{src}"
            );
        }
    }

    #[test]
    fn suggestions_say_what_was_expected() {
        let e = first_error(&pipeline("allign products, c to max exponent"));
        assert_eq!(
            e.message,
            "syntax error: expected a pipeline stage, found `allign`"
        );
        assert_eq!(e.label, "not a keyword");
        let e = first_error(&pipeline("zero exponnt -133"));
        assert_eq!(
            e.message,
            "syntax error: expected `exponent` or `result` after `zero`, found `exponnt`"
        );
        let e = first_error(&pipeline("multiply exact, scale"));
        assert_eq!(e.label, "not valid here");
        let e = first_error(&pipeline("multiply exct"));
        assert_eq!(
            e.message,
            "syntax error: expected `and`, `exact`, `integer`, `round to` or `xor`, found `exct`"
        );
        let e = first_error(&pipeline("accumulate in f32 rund down"));
        assert_eq!(e.message, "syntax error: unexpected `rund`");
    }

    #[test]
    fn nothing_close_keeps_the_plain_error() {
        for src in [
            pipeline("frobnicate products, c to max exponent"),
            pipeline("align products, c to max exponent keep F widgets round down"),
            "instruction x {\n    sh 16 x 8 x 16\n}\n".to_string(),
        ] {
            let e = first_error(&src);
            assert_eq!(e.help.as_deref(), Some(SYNTAX_HELP), "{src}");
            assert!(e.message.starts_with("syntax error: expected "), "{src}");
        }
    }

    #[test]
    fn words_are_read_past_blanks_and_comments() {
        let text = "align  max // note\n  exponnt, c\n16x _y";
        let words: Vec<&str> = words_from(text, 0, 9)
            .into_iter()
            .map(|w| text_of(text, w))
            .collect();
        assert_eq!(words, ["align", "max", "exponnt"]);
        assert_eq!(words_from(text, 7, 2).len(), 2);
        // in a word, right after one, or neither; numbers are not words
        assert_eq!(word_at(text, 2), Some(Span::new(0, 5)));
        assert_eq!(word_at(text, 5), Some(Span::new(0, 5)));
        assert_eq!(word_at(text, 6), None);
        assert_eq!(word_at(text, 32), None);
        assert_eq!(word_at(text, 35), None);
        assert_eq!(word_at(text, 36), Some(Span::new(36, 38)));
        assert_eq!(word_at(text, 99), Some(Span::new(36, 38)));
        assert_eq!(skip_blank(text, 10), 21);
    }

    /// The literals of the grammar's `keyword` rule.
    fn grammar_keywords() -> Vec<&'static str> {
        let grammar = include_str!("../../grammar/mma.pest");
        let start = grammar.find("keyword = @{").unwrap();
        let body = &grammar[start..start + grammar[start..].find("!ident_char").unwrap()];
        body.split('"').skip(1).step_by(2).collect()
    }

    #[test]
    fn keyword_list_is_the_grammars() {
        let mut ours = KEYWORDS.to_vec();
        let mut grammar = grammar_keywords();
        ours.sort();
        grammar.sort();
        assert_eq!(ours, grammar);
    }

    /// Every keyword list of [`RULE_KEYWORDS`] is how its rule starts: the rule reads all of
    /// it, and the words are keywords (or one of the few other literals).
    #[test]
    fn rule_keyword_table_follows_the_grammar() {
        let other_literals = [
            "c", "even", "odd", "x", "k", "mod", "all", "fma", "coverage", "any", "pairs",
        ];
        for (rule, lists) in RULE_KEYWORDS {
            for list in *lists {
                assert!(list.len() <= LONGEST_KEYWORD_LIST, "{rule:?}");
                let src = list.join(" ");
                match MmaParser::parse(*rule, &src) {
                    Ok(_) => {}
                    Err(e) => assert!(error_start(&e) >= src.len(), "{rule:?} on {src:?}: {e}"),
                }
                for kw in *list {
                    assert!(KEYWORDS.contains(kw) || other_literals.contains(kw), "{kw}");
                }
            }
        }
    }

    /// Every rule of the grammar that starts with keywords is in [`RULE_KEYWORDS`], with
    /// those keywords as its first list.
    #[test]
    fn rules_starting_with_keywords_are_in_the_table() {
        let grammar = include_str!("../../grammar/mma.pest");
        let mut checked = 0;
        for line in grammar.lines() {
            let Some((name, body)) = line.split_once('=') else {
                continue;
            };
            let name = name.trim();
            let body = body.trim_start().trim_start_matches(['_', '@', '$', '!']);
            let Some(body) = body.strip_prefix('{') else {
                continue;
            };
            if name.is_empty() || name.contains(' ') || name.starts_with("//") {
                continue;
            }
            // the run of `"word" ~` the rule opens with
            let mut lead = vec![];
            let mut rest = body.trim_start();
            while let Some(r) = rest.strip_prefix('"') {
                let (lit, after) = r.split_once('"').unwrap();
                if !lit.bytes().all(|b| b.is_ascii_alphabetic()) {
                    break;
                }
                lead.push(lit);
                match after.trim_start().strip_prefix('~') {
                    Some(a) => rest = a.trim_start(),
                    None => break,
                }
            }
            if lead.is_empty() || name == "keyword" {
                continue;
            }
            let entry = RULE_KEYWORDS
                .iter()
                .find(|(r, _)| format!("{r:?}") == name)
                .unwrap_or_else(|| panic!("rule {name} starts with {lead:?} but has no entry"));
            assert_eq!(entry.1[0], lead.as_slice(), "{name}");
            checked += 1;
        }
        assert!(checked > 30, "only {checked} rules found in the grammar");
    }

    /// The innermost `{` open at the end of `text`: its offset and how it is named.
    fn open_at_end(text: &str) -> Option<(usize, Option<String>)> {
        unclosed_brace(text, text.len()).map(|b| (b.at, b.what))
    }

    /// The offset of the `{` that ends the first `before` in `text`.
    fn brace_of(text: &str, before: &str) -> usize {
        text.find(before).unwrap() + before.len() - 1
    }

    #[test]
    fn unclosed_braces_are_found_by_their_construct() {
        let cases = [
            (
                "pipeline t_fdpa(F, rho = match out { f16 => nearest_even }) {\n    chain every 4\n",
                ") {",
                "`pipeline t_fdpa`",
            ),
            (
                "instruction mma.m16n8k{K}.{D} {\n    for K in [8, 16]\n",
                "} {",
                "`instruction mma.m16n8k{K}.{D}`",
            ),
            ("format e3m2x { exponent = 3", "x {", "`format e3m2x`"),
            // the innermost one
            (
                "instruction x {\n    uses p(L = match K { 8 => 1",
                "K {",
                "this `match`",
            ),
            // a keyword inside a name does not name a block
            (
                "instruction mma.format {",
                "t {",
                "`instruction mma.format`",
            ),
        ];
        for (text, before, what) in cases {
            let at = brace_of(text, before);
            assert_eq!(
                open_at_end(text),
                Some((at, Some(what.to_string()))),
                "{text}"
            );
        }
        // all closed, or the innermost open bracket is not a `{`
        assert_eq!(open_at_end("format x { a = 1 }\n"), None);
        assert_eq!(open_at_end("instruction x {\n    uses p(L = 1"), None);
        assert_eq!(open_at_end("instruction x {\n    for K in [8"), None);
        // a `{` with no block keyword before it
        assert_eq!(open_at_end("x {"), Some((2, None)));
        // a placeholder's `{` does not take the instruction's name
        assert!(is_placeholder("a{K}", 1) && !is_placeholder("a {K}", 2));
        assert!(!is_placeholder("a{\n", 1) && !is_placeholder("a{K", 1));
    }

    #[test]
    fn braces_in_comments_and_strings_do_not_count() {
        let text = "arch x \"a { b\"\n// a } here\nformat f { // and { here\n    a = \"}\"\n";
        let at = brace_of(text, "f {");
        assert_eq!(
            open_at_end(text),
            Some((at, Some("`format f`".to_string())))
        );
        assert_eq!(open_at_end(&format!("{text}}}\n// {{\n")), None);
        // an unterminated string ends at the end of its line
        let text = "arch x \"a { b\npipeline p() {\n";
        let at = brace_of(text, ") {");
        assert_eq!(
            open_at_end(text),
            Some((at, Some("`pipeline p`".to_string())))
        );
        // a stray closer is ignored; the scan stops at the position given
        let text = "pipeline p() { ) ] \n multiply exact }";
        assert_eq!(open_at_end(text), None);
        assert_eq!(unclosed_brace(text, 20).map(|b| b.at), Some(13));
    }

    #[test]
    fn a_missing_brace_points_at_the_open_one() {
        // at the end of the text
        let src = "arch demo\npipeline p(F) {\n    multiply exact\n";
        let e = first_error(src);
        assert_eq!(e.message, "`pipeline p` is missing its closing `}`");
        assert_eq!(e.label, "the file ends here");
        assert_eq!(e.span, Span::new(src.len() - 1, src.len()));
        assert_eq!(
            e.secondary,
            vec![(Span::new(24, 25), "this `{` is never closed".to_string())]
        );
        assert_eq!(
            e.help.as_deref(),
            Some("add a `}` at the end of `pipeline p`")
        );
        // before the next item
        let src = "format f { exponent = 3, mantissa = 2\npipeline p() {\n}\n";
        let e = first_error(src);
        assert_eq!(e.message, "`format f` is missing its closing `}`");
        assert_eq!(
            (e.span, e.label.as_str()),
            (Span::new(38, 46), "expected `}` before this `pipeline`")
        );
        assert_eq!(e.secondary[0].0, Span::new(9, 10));
        // the innermost open `{`
        let src = "instruction x {\n    uses p(L = match K { 8 => 1, _ => 2 )\n";
        let e = first_error(src);
        assert!(e.secondary.is_empty(), "{e:?}");
        let src = "instruction x {\n    uses p(L = match K { 8 => 1, _ => 2";
        let e = first_error(src);
        assert_eq!(e.message, "this `match` is missing its closing `}`");
        assert_eq!(e.secondary[0].0.start, src.rfind('{').unwrap());
        let src = "pipeline p(L = match K { 8 => 1\n";
        let e = first_error(src);
        assert_eq!(e.message, "this `match` is missing its closing `}`");
        assert_eq!(
            e.help.as_deref(),
            Some("add a `}` at the end of the `match`")
        );
    }

    #[test]
    fn an_unfinished_statement_is_not_a_missing_brace() {
        // a `}` would not be read where the text ends
        let e = first_error("instruction x {\n    shape 16 x 8 x");
        assert_eq!(e.message, "syntax error: expected an expression");
        assert!(e.secondary.is_empty());
        // an item keyword where a name belongs
        let e = first_error("import\npipeline p() {\n}\n");
        assert!(e.secondary.is_empty(), "{e:?}");
    }

    /// The line and column of each syntax error of `src`.
    fn error_places(src: &str) -> Vec<(usize, usize)> {
        let errors = parse(src).unwrap_err();
        assert!(errors.iter().all(|e| e.code == Code::Syntax));
        let place = |e: &Diag| crate::diagnostic::line_col(src, e.span.start);
        errors.iter().map(place).collect()
    }

    #[test]
    fn each_broken_item_gets_its_own_error() {
        let src = "arch demo\n\
                   format e3m2x { exponent = 3, mantissa = }\n\
                   pipeline p(F) {\n    multiply exact\n}\n\
                   pipeline q(F) {\n    multiply exact\n    allign products\n}\n\
                   instruction x {\n    shpe 16 x 8 x 16\n}\n";
        assert_eq!(error_places(src), [(2, 41), (8, 5), (11, 5)]);
        // the first error is the one a file with only that error gets
        let first_only = src.split("pipeline q").next().unwrap();
        assert_eq!(first_error(src), first_error(first_only));
    }

    #[test]
    fn one_error_is_reported_once() {
        // a missing `}` is reported before the next item, which then parses on its own
        let unclosed =
            "pipeline p(F) {\n    multiply exact\n\ninstruction x {\n    shape 16 x 8 x 16\n}\n";
        assert_eq!(error_places(unclosed), [(4, 1)]);
        let misspelled = "arch demo\npipline t(F) {\n}\nimport std\n";
        assert_eq!(error_places(misspelled), [(2, 1)]);
        // pest stops at the keyword of an item it cannot take, at the restart too
        let no_brace = "// a pipeline\npipeline p(F)\n    multiply exact\n}\nimport std\n";
        assert_eq!(error_places(no_brace), [(2, 1)]);
    }

    #[test]
    fn the_parse_restarts_only_where_an_item_starts_a_line() {
        // not in a comment, not after other text on its line
        let src = "format f { a = } // x\n\
                   // format g {\n\
                   \x20 x pipeline p(F) { mma.format }\n\
                   \tformat g { b = 1 }\n";
        assert_eq!(
            next_item_start(src, 0, 1),
            src.find("\tformat").map(|i| i + 1)
        );
        assert_eq!(next_item_start(src, 0, src.len()), None);
        assert_eq!(error_places(src).len(), 1);
    }

    #[test]
    fn syntax_errors_are_bounded() {
        let src = "format f { a = }\n".repeat(3 * MAX_SYNTAX_ERRORS);
        let places = error_places(&src);
        assert_eq!(places.len(), MAX_SYNTAX_ERRORS);
        assert_eq!(places[MAX_SYNTAX_ERRORS - 1], (MAX_SYNTAX_ERRORS, 16));
    }
}
