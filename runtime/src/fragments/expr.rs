//! The formulas of the layout files: integer expressions over a lane's index, the
//! fragment element index `i` and a fragment's selectors, written as the PTX ISA writes
//! its fragment sections.

/// What a formula is evaluated at: the lane (of the whole image: 0..32 for a warp, up to
/// 128 for a warpgroup), the fragment element index, and the values of the fragment's
/// selectors (in the order the fragment declares them).
#[derive(Clone, Copy)]
pub(crate) struct Vars<'v> {
    pub lane: usize,
    pub i: usize,
    pub selectors: &'v [usize],
}

/// A formula: integers, `lane` (`%laneid`, the lane of the whole image), `groupID`
/// (`(lane % 32) >> 2`), `threadID_in_group` (`lane % 4`), `warp` (`lane / 32`, the warp
/// of a warpgroup), `i`, the fragment's selectors by name, parentheses and
/// `* / % + - >> &` with C's precedence.
#[derive(Clone, Debug)]
pub(crate) enum Expr {
    Num(i64),
    Lane,
    Group,
    InGroup,
    Warp,
    Index,
    Selector(usize),
    Bin(char, Box<Expr>, Box<Expr>),
}

impl Expr {
    /// Parse `text`; `selectors` are the names a formula of this fragment may use.
    pub(crate) fn parse(text: &str, selectors: &[String]) -> Result<Expr, String> {
        let tokens = tokenize(text)?;
        let mut p = Parser {
            t: &tokens,
            pos: 0,
            selectors,
        };
        let e = p.level(0)?;
        if p.pos != tokens.len() {
            return Err(format!("unexpected `{}`", tokens[p.pos]));
        }
        Ok(e)
    }

    /// Does the formula use the element index `i`?
    pub(crate) fn uses_index(&self) -> bool {
        match self {
            Expr::Index => true,
            Expr::Bin(_, l, r) => l.uses_index() || r.uses_index(),
            _ => false,
        }
    }

    pub(crate) fn eval(&self, v: Vars) -> i64 {
        match self {
            Expr::Num(n) => *n,
            Expr::Lane => v.lane as i64,
            Expr::Group => ((v.lane % 32) >> 2) as i64,
            Expr::InGroup => (v.lane % 4) as i64,
            Expr::Warp => (v.lane / 32) as i64,
            Expr::Index => v.i as i64,
            Expr::Selector(s) => v.selectors.get(*s).copied().unwrap_or(0) as i64,
            Expr::Bin(op, l, r) => {
                let (l, r) = (l.eval(v), r.eval(v));
                // wrapping: an absurd constant gives an absurd row, which the validator
                // refuses, never an overflow panic
                match op {
                    '+' => l.wrapping_add(r),
                    '-' => l.wrapping_sub(r),
                    '*' => l.wrapping_mul(r),
                    // a zero divisor gives -1, which the validator refuses as a negative
                    // row or column
                    '/' => l.checked_div(r).unwrap_or(-1),
                    '%' => l.checked_rem(r).unwrap_or(-1),
                    '&' => l & r,
                    _ => l.checked_shr(r as u32).unwrap_or(0), // '>'
                }
            }
        }
    }
}

/// Binary operators from loosest to tightest binding, as in C.
const LEVELS: [&[char]; 4] = [&['&'], &['>'], &['+', '-'], &['*', '/', '%']];

struct Parser<'t> {
    t: &'t [String],
    pos: usize,
    selectors: &'t [String],
}

impl Parser<'_> {
    fn level(&mut self, level: usize) -> Result<Expr, String> {
        if level == LEVELS.len() {
            return self.atom();
        }
        let mut left = self.level(level + 1)?;
        while let Some(op) = self.t.get(self.pos).and_then(|s| {
            let c = if s == ">>" { '>' } else { s.chars().next()? };
            (s.len() == 1 || s == ">>").then_some(c)
        }) {
            if !LEVELS[level].contains(&op) {
                break;
            }
            self.pos += 1;
            let right = self.level(level + 1)?;
            left = Expr::Bin(op, Box::new(left), Box::new(right));
        }
        Ok(left)
    }

    fn atom(&mut self) -> Result<Expr, String> {
        let Some(tok) = self.t.get(self.pos) else {
            return Err("the formula ends too early".into());
        };
        self.pos += 1;
        Ok(match tok.as_str() {
            "(" => {
                let e = self.level(0)?;
                if self.t.get(self.pos).map(String::as_str) != Some(")") {
                    return Err("a `(` is not closed".into());
                }
                self.pos += 1;
                e
            }
            "lane" | "%laneid" => Expr::Lane,
            "groupID" => Expr::Group,
            "threadID_in_group" => Expr::InGroup,
            "warp" => Expr::Warp,
            "i" => Expr::Index,
            s if s.starts_with("0x") => Expr::Num(
                i64::from_str_radix(&s[2..], 16).map_err(|_| format!("`{s}` is not a number"))?,
            ),
            s if s.starts_with(|c: char| c.is_ascii_digit()) => {
                Expr::Num(s.parse().map_err(|_| format!("`{s}` is not a number"))?)
            }
            s => match self.selectors.iter().position(|n| n == s) {
                Some(at) => Expr::Selector(at),
                None => {
                    let mut names = "lane, groupID, threadID_in_group, warp, i".to_string();
                    for n in self.selectors {
                        names += &format!(", {n}");
                    }
                    return Err(format!("unknown name `{s}` ({names})"));
                }
            },
        })
    }
}

fn tokenize(text: &str) -> Result<Vec<String>, String> {
    let mut out = Vec::new();
    let mut chars = text.char_indices().peekable();
    while let Some((at, c)) = chars.next() {
        if c.is_whitespace() {
            continue;
        }
        if c.is_ascii_alphanumeric() || c == '_' || c == '%' {
            let mut end = at + c.len_utf8();
            while let Some(&(j, d)) = chars.peek() {
                if !(d.is_ascii_alphanumeric() || d == '_') {
                    break;
                }
                end = j + d.len_utf8();
                chars.next();
            }
            out.push(text[at..end].to_string());
        } else if c == '>' {
            if chars.next_if(|&(_, d)| d == '>').is_none() {
                return Err("`>` alone (did you mean `>>`?)".into());
            }
            out.push(">>".into());
        } else if "()+-*/%&".contains(c) {
            out.push(c.to_string());
        } else {
            return Err(format!("unexpected character `{c}`"));
        }
    }
    Ok(out)
}
