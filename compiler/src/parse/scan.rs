//! A lexical walk over source text for the parser's checks of its own: the brackets and
//! words outside `//` comments and `"strings"`, which end where the grammar ends them (a
//! comment at a line feed or a carriage return, a string at its closing quote or, left
//! open, at the end of its line). Bracket nesting, the `{` a missing `}` belongs to and
//! where the next top-level item starts are all read from it.

/// What the walk finds.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kind {
    /// `(`, `[` or `{`.
    Open(u8),
    /// `)`, `]` or `}`.
    Close(u8),
    /// A run of letters, digits and `_` (a name, a keyword or a number).
    Word,
}

/// A bracket or a word at `start..end`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Token {
    pub kind: Kind,
    pub start: usize,
    pub end: usize,
}

/// Whether byte `b` can be part of a name or a keyword.
pub fn is_word_byte(b: u8) -> bool {
    b.is_ascii_alphanumeric() || b == b'_'
}

/// The brackets and words of `text` from offset `from` on, which must not be inside a
/// comment, a string or a word.
pub fn tokens(text: &str, from: usize) -> Tokens<'_> {
    Tokens {
        bytes: text.as_bytes(),
        at: from,
    }
}

/// The iterator [`tokens`] returns.
pub struct Tokens<'a> {
    bytes: &'a [u8],
    at: usize,
}

impl Iterator for Tokens<'_> {
    type Item = Token;

    fn next(&mut self) -> Option<Token> {
        let b = self.bytes;
        let line_end = |from: usize| {
            b[from..]
                .iter()
                .position(|&c| c == b'\n' || c == b'\r')
                .map_or(b.len(), |n| from + n)
        };
        while self.at < b.len() {
            let i = self.at;
            let kind = match b[i] {
                b'/' if b.get(i + 1) == Some(&b'/') => {
                    self.at = line_end(i);
                    continue;
                }
                b'"' => {
                    let end = line_end(i + 1);
                    self.at = match b[i + 1..end].iter().position(|&c| c == b'"') {
                        Some(n) => i + n + 2,
                        None => end,
                    };
                    continue;
                }
                c @ (b'(' | b'[' | b'{') => Kind::Open(c),
                c @ (b')' | b']' | b'}') => Kind::Close(c),
                c if is_word_byte(c) => {
                    let len = b[i..].iter().take_while(|c| is_word_byte(**c)).count();
                    self.at = i + len;
                    return Some(Token {
                        kind: Kind::Word,
                        start: i,
                        end: i + len,
                    });
                }
                _ => {
                    self.at += 1;
                    continue;
                }
            };
            self.at = i + 1;
            return Some(Token {
                kind,
                start: i,
                end: i + 1,
            });
        }
        None
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn walk(text: &str) -> Vec<&str> {
        tokens(text, 0).map(|t| &text[t.start..t.end]).collect()
    }

    #[test]
    fn comments_and_strings_are_skipped() {
        assert_eq!(
            walk("arch x \"a { b\" // c }\rformat f{a=1}"),
            ["arch", "x", "format", "f", "{", "a", "1", "}"]
        );
        // a string left open ends at the end of its line
        assert_eq!(walk("t \"a { b\n( c"), ["t", "(", "c"]);
        assert_eq!(walk("\"a\r}"), ["}"]);
        assert_eq!(walk("a // b"), ["a"]);
        assert_eq!(
            walk("mma.m16n8k{K} é 2^128"),
            ["mma", "m16n8k", "{", "K", "}", "2", "128"]
        );
        assert_eq!(tokens("ab cd", 3).next().map(|t| t.start), Some(3));
    }
}
