//! Regular expressions as the reference validator reads them: Python's `re` syntax.
//!
//! The reference checks `pattern`, `patternProperties` and the `regex` format with Python's
//! `re` module, so "is this a valid pattern" and "does it match" must be answered the way
//! Python 3.11 answers them, not the way Rust's `regex` crate would. This module parses a
//! pattern with Python's grammar and error rules (bad escapes, "nothing to repeat", open
//! group references, fixed-width look-behind…) and translates it to an equivalent
//! `fancy-regex` pattern for matching. It never panics on any input.

use std::fmt::Write as _;

/// Why Python would refuse a pattern (its message, close to `re.error`'s).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct PyReError(pub String);

fn err<T>(msg: impl Into<String>) -> Result<T, PyReError> {
    Err(PyReError(msg.into()))
}

/// Python's `MAXREPEAT`: an unbounded repeat.
const MAXREPEAT: u64 = 4_294_967_295;
/// Python's `MAXWIDTH` (a width is clamped to it).
const MAXWIDTH: u128 = 1 << 64;
/// Deeper group nesting than this is refused instead of risking the stack.
const MAX_NESTING: usize = 200;

/// A compiled pattern that matches as Python's `re.search` would.
#[derive(Debug, Clone)]
pub struct PyRegex {
    re: Option<fancy_regex::Regex>,
}

impl PyRegex {
    /// Compiles `pattern` as `re.compile(pattern, re.ASCII if ascii else 0)` would.
    pub fn compile(pattern: &str, ascii: bool) -> Result<Self, PyReError> {
        let translated = translate(pattern, ascii)?;
        // A pattern Python accepts but the matcher cannot build (an enormous repeat count,
        // say) matches nothing rather than failing the whole check.
        let re = fancy_regex::RegexBuilder::new(&translated)
            .backtrack_limit(1_000_000)
            .delegate_size_limit(64 << 20)
            .build()
            .ok();
        Ok(Self { re })
    }

    /// Whether the pattern matches anywhere in `text` (`re.search`).
    pub fn search(&self, text: &str) -> bool {
        self.re
            .as_ref()
            .is_some_and(|re| re.is_match(text).unwrap_or(false))
    }
}

/// Whether Python's `re.compile(pattern)` accepts the pattern (the `regex` format).
pub fn is_valid(pattern: &str) -> bool {
    translate(pattern, false).is_ok()
}

/// The reference's rewrite of a JSON Schema `pattern` for JavaScript semantics: `$` outside
/// a bracket becomes `\Z` (end of text only). Its bracket tracking is naive, and so is this.
pub fn js_rewrite(pattern: &str) -> String {
    let chars: Vec<char> = pattern.chars().collect();
    let mut out = String::with_capacity(pattern.len() + 4);
    let mut in_class = false;
    let mut i = 0;
    while i < chars.len() {
        let c = chars[i];
        if c == '\\' {
            out.push(c);
            if let Some(&n) = chars.get(i + 1) {
                out.push(n);
            }
            i += 2;
            continue;
        }
        if c == '[' {
            in_class = true;
        } else if c == ']' {
            in_class = false;
        }
        if c == '$' && !in_class {
            out.push_str("\\Z");
        } else {
            out.push(c);
        }
        i += 1;
    }
    out
}

// ---- the parser ---------------------------------------------------------------------------

#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
struct Flags {
    ignore_case: bool,
    multiline: bool,
    dotall: bool,
    verbose: bool,
    ascii: bool,
    unicode: bool,
    locale: bool,
}

impl Flags {
    fn set(&mut self, c: char, on: bool) {
        match c {
            'i' => self.ignore_case = on,
            'm' => self.multiline = on,
            's' => self.dotall = on,
            'x' => self.verbose = on,
            'a' => self.ascii = on,
            'u' => self.unicode = on,
            'L' => self.locale = on,
            _ => {}
        }
    }
}

const FLAG_CHARS: &str = "iLmsxatu";

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Category {
    Digit,
    NotDigit,
    Space,
    NotSpace,
    Word,
    NotWord,
}

#[derive(Debug, Clone)]
enum ClassItem {
    Char(char),
    Range(char, char),
    Cat(Category),
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum At {
    Beginning,
    End,
    BeginningString,
    EndString,
    Boundary,
    NonBoundary,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum RepeatKind {
    Greedy,
    Lazy,
    Possessive,
}

/// Flags that decide how a node is emitted: the ones in force where it was parsed.
#[derive(Debug, Clone, Copy)]
struct Mode {
    ignore_case: bool,
    multiline: bool,
    dotall: bool,
    /// `None` until the pattern's type flags are known (`\d` is ASCII or Unicode).
    ascii: Option<bool>,
}

#[derive(Debug, Clone)]
enum Node {
    Literal(char, Mode),
    Any(Mode),
    Class {
        negate: bool,
        items: Vec<ClassItem>,
        mode: Mode,
    },
    At(At, Mode),
    Group {
        index: Option<usize>,
        body: Seq,
    },
    Assert {
        behind: bool,
        negate: bool,
        body: Seq,
    },
    Atomic(Seq),
    Repeat {
        min: u64,
        max: u64,
        kind: RepeatKind,
        item: Box<Node>,
    },
    GroupRef(usize),
    GroupRefExists {
        group: usize,
        yes: Seq,
        no: Option<Seq>,
    },
    Branch(Vec<Seq>),
}

type Seq = Vec<Node>;

#[derive(Debug, Clone, PartialEq, Eq)]
enum Tok {
    Char(char),
    /// A backslash and the character after it.
    Esc(char),
}

struct Parser {
    chars: Vec<char>,
    /// Index of the character after the current token.
    index: usize,
    next: Option<Tok>,
    flags: Flags,
    /// `Some(width)` once a group is closed; `None` while open. Index 0 is the whole match.
    group_widths: Vec<Option<(u128, u128)>>,
    group_names: Vec<(String, usize)>,
    lookbehind_groups: Option<usize>,
    condition_refs: Vec<usize>,
    depth: usize,
}

impl Parser {
    fn new(pattern: &str, flags: Flags) -> Result<Self, PyReError> {
        let mut p = Self {
            chars: pattern.chars().collect(),
            index: 0,
            next: None,
            flags,
            group_widths: vec![None],
            group_names: Vec::new(),
            lookbehind_groups: None,
            condition_refs: Vec::new(),
            depth: 0,
        };
        p.advance()?;
        Ok(p)
    }

    fn advance(&mut self) -> Result<(), PyReError> {
        let Some(&c) = self.chars.get(self.index) else {
            self.next = None;
            return Ok(());
        };
        if c == '\\' {
            match self.chars.get(self.index + 1) {
                Some(&n) => {
                    self.next = Some(Tok::Esc(n));
                    self.index += 2;
                }
                None => return err("bad escape (end of pattern)"),
            }
        } else {
            self.next = Some(Tok::Char(c));
            self.index += 1;
        }
        Ok(())
    }

    fn get(&mut self) -> Result<Option<Tok>, PyReError> {
        let this = self.next.take();
        self.advance()?;
        Ok(this)
    }

    fn matches(&mut self, c: char) -> Result<bool, PyReError> {
        if self.next == Some(Tok::Char(c)) {
            self.advance()?;
            Ok(true)
        } else {
            Ok(false)
        }
    }

    fn next_is(&self, pred: impl Fn(char) -> bool) -> bool {
        matches!(self.next, Some(Tok::Char(c)) if pred(c))
    }

    fn tell(&self) -> usize {
        let len = match self.next {
            None => 0,
            Some(Tok::Char(_)) => 1,
            Some(Tok::Esc(_)) => 2,
        };
        self.index - len
    }

    fn seek(&mut self, index: usize) -> Result<(), PyReError> {
        self.index = index;
        self.advance()
    }

    /// Up to `n` plain characters satisfying `pred`.
    fn get_while(&mut self, n: usize, pred: impl Fn(char) -> bool) -> Result<String, PyReError> {
        let mut out = String::new();
        for _ in 0..n {
            match self.next {
                Some(Tok::Char(c)) if pred(c) => {
                    out.push(c);
                    self.advance()?;
                }
                _ => break,
            }
        }
        Ok(out)
    }

    /// Characters up to `terminator` (a group name, say). Escapes end the name badly.
    fn get_until(&mut self, terminator: char, what: &str) -> Result<String, PyReError> {
        let mut out = String::new();
        loop {
            let tok = self.get()?;
            match tok {
                None => {
                    return if out.is_empty() {
                        err(format!("missing {what}"))
                    } else {
                        err(format!("missing {terminator}, unterminated name"))
                    };
                }
                Some(Tok::Char(c)) if c == terminator => {
                    if out.is_empty() {
                        return err(format!("missing {what}"));
                    }
                    return Ok(out);
                }
                Some(Tok::Char(c)) => out.push(c),
                Some(Tok::Esc(c)) => {
                    out.push('\\');
                    out.push(c);
                }
            }
        }
    }

    fn groups(&self) -> usize {
        self.group_widths.len()
    }

    fn check_group(&self, gid: usize) -> bool {
        gid < self.groups() && self.group_widths[gid].is_some()
    }

    fn check_lookbehind_group(&self, gid: usize) -> Result<(), PyReError> {
        if let Some(lb) = self.lookbehind_groups {
            if !self.check_group(gid) {
                return err("cannot refer to an open group");
            }
            if gid >= lb {
                return err("cannot refer to group defined in the same lookbehind subpattern");
            }
        }
        Ok(())
    }

    fn mode(&self) -> Mode {
        Mode {
            ignore_case: self.flags.ignore_case,
            multiline: self.flags.multiline,
            dotall: self.flags.dotall,
            ascii: if self.flags.ascii { Some(true) } else { None },
        }
    }

    fn parse_sub(&mut self, verbose: bool, nested: usize) -> Result<Seq, PyReError> {
        self.depth += 1;
        if self.depth > MAX_NESTING {
            return err("pattern nested too deeply");
        }
        let mut items: Vec<Seq> = Vec::new();
        let mut verbose = verbose;
        loop {
            let first = nested == 0 && items.is_empty();
            let item = self.parse(verbose, first)?;
            items.push(item);
            if !self.matches('|')? {
                break;
            }
            if nested == 0 {
                verbose = self.flags.verbose;
            }
        }
        self.depth -= 1;
        if items.len() == 1 {
            return Ok(items.pop().unwrap_or_default());
        }
        Ok(vec![Node::Branch(items)])
    }

    fn parse(&mut self, verbose: bool, first: bool) -> Result<Seq, PyReError> {
        let mut seq: Seq = Vec::new();
        let mut verbose = verbose;
        loop {
            let this = match &self.next {
                None => break,
                Some(Tok::Char('|' | ')')) => break,
                Some(t) => t.clone(),
            };
            self.advance()?;
            if verbose && let Tok::Char(c) = this {
                if matches!(c, ' ' | '\t' | '\n' | '\r' | '\x0b' | '\x0c') {
                    continue;
                }
                if c == '#' {
                    loop {
                        match self.get()? {
                            None | Some(Tok::Char('\n')) => break,
                            _ => {}
                        }
                    }
                    continue;
                }
            }
            let c = match this {
                Tok::Esc(e) => {
                    let node = self.escape(e)?;
                    seq.push(node);
                    continue;
                }
                Tok::Char(c) => c,
            };
            match c {
                '[' => {
                    let node = self.class()?;
                    seq.push(node);
                }
                '?' | '*' | '+' | '{' => {
                    let here = self.tell();
                    let (min, max) = match c {
                        '?' => (0, 1),
                        '*' => (0, MAXREPEAT),
                        '+' => (1, MAXREPEAT),
                        _ => {
                            if self.next == Some(Tok::Char('}')) {
                                seq.push(Node::Literal('{', self.mode()));
                                continue;
                            }
                            let lo = self.get_while(usize::MAX, |c| c.is_ascii_digit())?;
                            let hi = if self.matches(',')? {
                                Some(self.get_while(usize::MAX, |c| c.is_ascii_digit())?)
                            } else {
                                None
                            };
                            if !self.matches('}')? {
                                seq.push(Node::Literal('{', self.mode()));
                                self.seek(here)?;
                                continue;
                            }
                            let hi = hi.unwrap_or_else(|| lo.clone());
                            let min = if lo.is_empty() {
                                0
                            } else {
                                repeat_number(&lo)?
                            };
                            let max = if hi.is_empty() {
                                MAXREPEAT
                            } else {
                                let max = repeat_number(&hi)?;
                                if max < min {
                                    return err("min repeat greater than max repeat");
                                }
                                max
                            };
                            (min, max)
                        }
                    };
                    let Some(last) = seq.pop() else {
                        return err("nothing to repeat");
                    };
                    match last {
                        Node::At(..) => return err("nothing to repeat"),
                        Node::Repeat { .. } => return err("multiple repeat"),
                        _ => {}
                    }
                    let kind = if self.matches('?')? {
                        RepeatKind::Lazy
                    } else if self.matches('+')? {
                        RepeatKind::Possessive
                    } else {
                        RepeatKind::Greedy
                    };
                    seq.push(Node::Repeat {
                        min,
                        max,
                        kind,
                        item: Box::new(last),
                    });
                }
                '.' => seq.push(Node::Any(self.mode())),
                '(' => {
                    if let Some(node) = self.group(&mut verbose, first, seq.is_empty())? {
                        seq.push(node);
                    }
                }
                '^' => seq.push(Node::At(At::Beginning, self.mode())),
                '$' => seq.push(Node::At(At::End, self.mode())),
                c => seq.push(Node::Literal(c, self.mode())),
            }
        }
        Ok(seq)
    }

    /// A group or extension after `(`. `None` for comments and global flags.
    fn group(
        &mut self,
        verbose: &mut bool,
        first: bool,
        seq_empty: bool,
    ) -> Result<Option<Node>, PyReError> {
        let mut capture = true;
        let mut atomic = false;
        let mut name: Option<String> = None;
        let saved = self.flags;
        let mut scoped: Option<(Flags, Flags)> = None;
        if self.matches('?')? {
            let Some(tok) = self.get()? else {
                return err("unexpected end of pattern");
            };
            let ch = match tok {
                Tok::Char(c) => c,
                Tok::Esc(c) => return err(format!("unknown extension ?\\{c}")),
            };
            match ch {
                'P' => {
                    if self.matches('<')? {
                        let n = self.get_until('>', "group name")?;
                        check_group_name(&n)?;
                        name = Some(n);
                    } else if self.matches('=')? {
                        let n = self.get_until(')', "group name")?;
                        check_group_name(&n)?;
                        let Some(&(_, gid)) = self.group_names.iter().find(|(k, _)| *k == n) else {
                            return err(format!("unknown group name {n:?}"));
                        };
                        if !self.check_group(gid) {
                            return err("cannot refer to an open group");
                        }
                        self.check_lookbehind_group(gid)?;
                        return Ok(Some(Node::GroupRef(gid)));
                    } else {
                        return match self.get()? {
                            None => err("unexpected end of pattern"),
                            Some(_) => err("unknown extension ?P"),
                        };
                    }
                }
                ':' => capture = false,
                '#' => {
                    loop {
                        match self.get()? {
                            None => return err("missing ), unterminated comment"),
                            Some(Tok::Char(')')) => break,
                            _ => {}
                        }
                    }
                    return Ok(None);
                }
                '=' | '!' | '<' => {
                    let mut kind = ch;
                    let mut behind = false;
                    let mut outer_lookbehind = None;
                    if ch == '<' {
                        match self.get()? {
                            None => return err("unexpected end of pattern"),
                            Some(Tok::Char(c @ ('=' | '!'))) => kind = c,
                            Some(_) => return err("unknown extension ?<"),
                        }
                        behind = true;
                        outer_lookbehind = Some(self.lookbehind_groups);
                        if self.lookbehind_groups.is_none() {
                            self.lookbehind_groups = Some(self.groups());
                        }
                    }
                    let body = self.parse_sub(*verbose, 1)?;
                    if let Some(outer) = outer_lookbehind
                        && outer.is_none()
                    {
                        self.lookbehind_groups = None;
                    }
                    if !self.matches(')')? {
                        return err("missing ), unterminated subpattern");
                    }
                    if behind {
                        let (lo, hi) = self.width(&body);
                        if lo != hi {
                            return err("look-behind requires fixed-width pattern");
                        }
                    }
                    return Ok(Some(Node::Assert {
                        behind,
                        negate: kind == '!',
                        body,
                    }));
                }
                '(' => {
                    let cond = self.get_until(')', "group name")?;
                    let group = if is_identifier(&cond) {
                        match self.group_names.iter().find(|(k, _)| *k == cond) {
                            Some(&(_, gid)) => gid,
                            None => return err(format!("unknown group name {cond:?}")),
                        }
                    } else {
                        let Some(g) = python_int(&cond).filter(|g| *g >= 0) else {
                            return err(format!("bad character in group name {cond:?}"));
                        };
                        if g == 0 {
                            return err("bad group number");
                        }
                        if g >= 1_073_741_823 {
                            return err(format!("invalid group reference {g}"));
                        }
                        let g = g as usize;
                        self.condition_refs.push(g);
                        g
                    };
                    self.check_lookbehind_group(group)?;
                    let yes = self.parse(*verbose, false)?;
                    let no = if self.matches('|')? {
                        let no = self.parse(*verbose, false)?;
                        if self.next == Some(Tok::Char('|')) {
                            return err("conditional backref with more than two branches");
                        }
                        Some(no)
                    } else {
                        None
                    };
                    if !self.matches(')')? {
                        return err("missing ), unterminated subpattern");
                    }
                    return Ok(Some(Node::GroupRefExists { group, yes, no }));
                }
                '>' => {
                    capture = false;
                    atomic = true;
                }
                c if FLAG_CHARS.contains(c) || c == '-' => match self.parse_flags(c)? {
                    None => {
                        if !first || !seq_empty {
                            return err("global flags not at the start of the expression");
                        }
                        *verbose = self.flags.verbose;
                        return Ok(None);
                    }
                    Some((add, del)) => {
                        capture = false;
                        scoped = Some((add, del));
                    }
                },
                _ => return err(format!("unknown extension ?{ch}")),
            }
        }
        let index = if capture {
            let gid = self.groups();
            self.group_widths.push(None);
            if let Some(n) = &name {
                if self.group_names.iter().any(|(k, _)| k == n) {
                    return err(format!("redefinition of group name {n:?}"));
                }
                self.group_names.push((n.clone(), gid));
            }
            Some(gid)
        } else {
            None
        };
        let mut sub_verbose = *verbose;
        if let Some((add, del)) = scoped {
            if add.verbose {
                sub_verbose = true;
            }
            if del.verbose {
                sub_verbose = false;
            }
            for c in FLAG_CHARS.chars() {
                if flag_of(&add, c) {
                    self.flags.set(c, true);
                }
                if flag_of(&del, c) {
                    self.flags.set(c, false);
                }
            }
        }
        let body = self.parse_sub(sub_verbose, 1)?;
        // Scoped flags end with their group.
        self.flags = saved;
        if !self.matches(')')? {
            return err("missing ), unterminated subpattern");
        }
        if let Some(gid) = index {
            let w = self.width(&body);
            self.group_widths[gid] = Some(w);
        }
        if atomic {
            return Ok(Some(Node::Atomic(body)));
        }
        Ok(Some(Node::Group { index, body }))
    }

    /// `(?flags)` (global: `None`) or `(?add-del:` (scoped).
    fn parse_flags(&mut self, first: char) -> Result<Option<(Flags, Flags)>, PyReError> {
        let mut add = Flags::default();
        let mut del = Flags::default();
        let mut ch = first;
        if ch != '-' {
            loop {
                if ch == 'L' {
                    return err("bad inline flags: cannot use 'L' flag with a str pattern");
                }
                add.set(ch, true);
                if matches!(ch, 'a' | 'u' | 'L')
                    && [add.ascii, add.unicode, add.locale]
                        .iter()
                        .filter(|b| **b)
                        .count()
                        > 1
                {
                    return err("bad inline flags: flags 'a', 'u' and 'L' are incompatible");
                }
                match self.get()? {
                    None => return err("missing -, : or )"),
                    Some(Tok::Char(c)) if ")-:".contains(c) => {
                        ch = c;
                        break;
                    }
                    Some(Tok::Char(c)) if FLAG_CHARS.contains(c) => ch = c,
                    Some(Tok::Char(c)) if c.is_alphabetic() => return err("unknown flag"),
                    Some(_) => return err("missing -, : or )"),
                }
            }
        }
        if ch == ')' {
            for c in FLAG_CHARS.chars() {
                if flag_of(&add, c) {
                    self.flags.set(c, true);
                }
            }
            return Ok(None);
        }
        if flag_of(&add, 't') {
            return err("bad inline flags: cannot turn on global flag");
        }
        if ch == '-' {
            match self.get()? {
                None => return err("missing flag"),
                Some(Tok::Char(c)) if FLAG_CHARS.contains(c) => ch = c,
                Some(Tok::Char(c)) if c.is_alphabetic() => return err("unknown flag"),
                Some(_) => return err("missing flag"),
            }
            loop {
                if matches!(ch, 'a' | 'u' | 'L') {
                    return err("bad inline flags: cannot turn off flags 'a', 'u' and 'L'");
                }
                del.set(ch, true);
                match self.get()? {
                    None => return err("missing :"),
                    Some(Tok::Char(':')) => break,
                    Some(Tok::Char(c)) if FLAG_CHARS.contains(c) => ch = c,
                    Some(Tok::Char(c)) if c.is_alphabetic() => return err("unknown flag"),
                    Some(_) => return err("missing :"),
                }
            }
        }
        if flag_of(&del, 't') {
            return err("bad inline flags: cannot turn off global flag");
        }
        if FLAG_CHARS
            .chars()
            .any(|c| flag_of(&add, c) && flag_of(&del, c))
        {
            return err("bad inline flags: flag turned on and off");
        }
        Ok(Some((add, del)))
    }

    fn escape(&mut self, e: char) -> Result<Node, PyReError> {
        let mode = self.mode();
        let cat = |c| Node::Class {
            negate: false,
            items: vec![ClassItem::Cat(c)],
            mode,
        };
        Ok(match e {
            'A' => Node::At(At::BeginningString, mode),
            'b' => Node::At(At::Boundary, mode),
            'B' => Node::At(At::NonBoundary, mode),
            'd' => cat(Category::Digit),
            'D' => cat(Category::NotDigit),
            's' => cat(Category::Space),
            'S' => cat(Category::NotSpace),
            'w' => cat(Category::Word),
            'W' => cat(Category::NotWord),
            'Z' => Node::At(At::EndString, mode),
            '0' => {
                let digits = self.get_while(2, |c| ('0'..='7').contains(&c))?;
                let value = u32::from_str_radix(&format!("0{digits}"), 8).unwrap_or(0);
                Node::Literal(char::from_u32(value).unwrap_or('\0'), mode)
            }
            '1'..='9' => {
                let mut digits = e.to_string();
                if self.next_is(|c| c.is_ascii_digit()) {
                    let Some(Tok::Char(d)) = self.get()? else {
                        return err("bad escape");
                    };
                    digits.push(d);
                    if is_oct(e) && is_oct(d) && self.next_is(is_oct) {
                        let Some(Tok::Char(d3)) = self.get()? else {
                            return err("bad escape");
                        };
                        digits.push(d3);
                        let value = u32::from_str_radix(&digits, 8).unwrap_or(u32::MAX);
                        if value > 0o377 {
                            return err(format!(
                                "octal escape value \\{digits} outside of range 0-0o377"
                            ));
                        }
                        return Ok(Node::Literal(char::from_u32(value).unwrap_or('\0'), mode));
                    }
                }
                let group: usize = digits.parse().unwrap_or(usize::MAX);
                if group < self.groups() {
                    if !self.check_group(group) {
                        return err("cannot refer to an open group");
                    }
                    self.check_lookbehind_group(group)?;
                    return Ok(Node::GroupRef(group));
                }
                return err(format!("invalid group reference {group}"));
            }
            _ => Node::Literal(self.common_escape(e, false)?, mode),
        })
    }

    /// Escapes that mean one character, shared by patterns and classes.
    fn common_escape(&mut self, e: char, in_class: bool) -> Result<char, PyReError> {
        match e {
            'a' => Ok('\x07'),
            'b' if in_class => Ok('\x08'),
            'f' => Ok('\x0c'),
            'n' => Ok('\n'),
            'r' => Ok('\r'),
            't' => Ok('\t'),
            'v' => Ok('\x0b'),
            '\\' => Ok('\\'),
            'x' | 'u' | 'U' => {
                let n = match e {
                    'x' => 2,
                    'u' => 4,
                    _ => 8,
                };
                let hex = self.get_while(n, |c| c.is_ascii_hexdigit())?;
                if hex.len() != n {
                    return err(format!("incomplete escape \\{e}{hex}"));
                }
                let value = u32::from_str_radix(&hex, 16).unwrap_or(u32::MAX);
                match char::from_u32(value) {
                    Some(c) => Ok(c),
                    // A lone surrogate: Python accepts it; no UTF-8 text can contain it.
                    None if value <= 0x10FFFF => Ok('\u{FFFF}'),
                    None => err(format!("bad escape \\{e}{hex}")),
                }
            }
            'N' => err("named Unicode escapes (\\N{...}) are not supported"),
            c if c.is_ascii_alphabetic() => err(format!("bad escape \\{c}")),
            c if c.is_ascii_digit() => err(format!("bad escape \\{c}")),
            c => Ok(c),
        }
    }

    fn class_escape(&mut self, e: char) -> Result<ClassItem, PyReError> {
        Ok(match e {
            'd' => ClassItem::Cat(Category::Digit),
            'D' => ClassItem::Cat(Category::NotDigit),
            's' => ClassItem::Cat(Category::Space),
            'S' => ClassItem::Cat(Category::NotSpace),
            'w' => ClassItem::Cat(Category::Word),
            'W' => ClassItem::Cat(Category::NotWord),
            '0'..='7' => {
                let digits = self.get_while(2, is_oct)?;
                let value = u32::from_str_radix(&format!("{e}{digits}"), 8).unwrap_or(u32::MAX);
                if value > 0o377 {
                    return err(format!(
                        "octal escape value \\{e}{digits} outside of range 0-0o377"
                    ));
                }
                ClassItem::Char(char::from_u32(value).unwrap_or('\0'))
            }
            _ => ClassItem::Char(self.common_escape(e, true)?),
        })
    }

    fn class(&mut self) -> Result<Node, PyReError> {
        let mode = self.mode();
        let negate = self.matches('^')?;
        let mut items: Vec<ClassItem> = Vec::new();
        loop {
            let Some(this) = self.get()? else {
                return err("unterminated character set");
            };
            if this == Tok::Char(']') && !items.is_empty() {
                break;
            }
            let code1 = match this {
                Tok::Esc(e) => self.class_escape(e)?,
                Tok::Char(c) => ClassItem::Char(c),
            };
            if self.matches('-')? {
                let Some(that) = self.get()? else {
                    return err("unterminated character set");
                };
                if that == Tok::Char(']') {
                    items.push(code1);
                    items.push(ClassItem::Char('-'));
                    break;
                }
                let code2 = match that {
                    Tok::Esc(e) => self.class_escape(e)?,
                    Tok::Char(c) => ClassItem::Char(c),
                };
                match (code1, code2) {
                    (ClassItem::Char(lo), ClassItem::Char(hi)) if hi >= lo => {
                        items.push(ClassItem::Range(lo, hi));
                    }
                    _ => return err("bad character range"),
                }
            } else {
                items.push(code1);
            }
        }
        Ok(Node::Class {
            negate,
            items,
            mode,
        })
    }

    /// `(min, max)` width of a sequence, as Python's `getwidth` computes it.
    fn width(&self, seq: &[Node]) -> (u128, u128) {
        let mut lo: u128 = 0;
        let mut hi: u128 = 0;
        for node in seq {
            let (l, h) = self.node_width(node);
            lo = lo.saturating_add(l);
            hi = hi.saturating_add(h);
        }
        (lo.min(MAXWIDTH), hi.min(MAXWIDTH))
    }

    fn node_width(&self, node: &Node) -> (u128, u128) {
        match node {
            Node::Literal(..) | Node::Any(_) | Node::Class { .. } => (1, 1),
            Node::At(..) | Node::Assert { .. } => (0, 0),
            Node::Group { body, .. } | Node::Atomic(body) => self.width(body),
            Node::Branch(alts) => {
                let mut i = MAXWIDTH;
                let mut j = 0;
                for a in alts {
                    let (l, h) = self.width(a);
                    i = i.min(l);
                    j = j.max(h);
                }
                (i, j)
            }
            Node::Repeat { min, max, item, .. } => {
                let (i, j) = self.node_width(item);
                let lo = i.saturating_mul(u128::from(*min));
                let hi = if *max == MAXREPEAT && j > 0 {
                    MAXWIDTH
                } else {
                    j.saturating_mul(u128::from(*max))
                };
                (lo, hi)
            }
            Node::GroupRef(g) => self
                .group_widths
                .get(*g)
                .copied()
                .flatten()
                .unwrap_or((0, 0)),
            Node::GroupRefExists { yes, no, .. } => {
                let (mut i, mut j) = self.width(yes);
                match no {
                    Some(no) => {
                        let (l, h) = self.width(no);
                        i = i.min(l);
                        j = j.max(h);
                    }
                    None => i = 0,
                }
                (i, j)
            }
        }
    }
}

fn flag_of(f: &Flags, c: char) -> bool {
    match c {
        'i' => f.ignore_case,
        'm' => f.multiline,
        's' => f.dotall,
        'x' => f.verbose,
        'a' => f.ascii,
        'u' => f.unicode,
        'L' => f.locale,
        _ => false,
    }
}

fn is_oct(c: char) -> bool {
    ('0'..='7').contains(&c)
}

fn repeat_number(digits: &str) -> Result<u64, PyReError> {
    match digits.parse::<u64>() {
        Ok(n) if n < MAXREPEAT => Ok(n),
        _ => err("the repetition number is too large"),
    }
}

/// Python's `str.isidentifier`, close enough: a letter or `_`, then letters, digits, `_`.
fn is_identifier(s: &str) -> bool {
    let mut chars = s.chars();
    chars.next().is_some_and(|c| c == '_' || c.is_alphabetic())
        && chars.all(|c| c == '_' || c.is_alphanumeric())
}

fn check_group_name(name: &str) -> Result<(), PyReError> {
    if is_identifier(name) {
        Ok(())
    } else {
        err(format!("bad character in group name {name:?}"))
    }
}

/// Python's `int(text)`: surrounding whitespace, a sign and `_` between digits allowed.
pub(crate) fn python_int(text: &str) -> Option<i64> {
    let t = text.trim_matches(|c: char| c.is_whitespace());
    let (neg, digits) = match t.strip_prefix('-') {
        Some(rest) => (true, rest),
        None => (false, t.strip_prefix('+').unwrap_or(t)),
    };
    if digits.is_empty()
        || digits.starts_with('_')
        || digits.ends_with('_')
        || digits.contains("__")
        || !digits.chars().all(|c| c.is_ascii_digit() || c == '_')
    {
        return None;
    }
    let n: i64 = digits.replace('_', "").parse().ok()?;
    Some(if neg { -n } else { n })
}

/// Python's `int(text, 16)`, as `UUID()` uses it.
pub(crate) fn python_int_hex(text: &str) -> Option<u128> {
    let t = text.trim_matches(|c: char| c.is_whitespace());
    let digits = t.strip_prefix(['+', '-']).unwrap_or(t);
    let digits = digits
        .strip_prefix("0x")
        .or_else(|| digits.strip_prefix("0X"))
        .map_or(digits, |d| d.strip_prefix('_').unwrap_or(d));
    if digits.is_empty()
        || digits.starts_with('_')
        || digits.ends_with('_')
        || digits.contains("__")
        || !digits.chars().all(|c| c.is_ascii_hexdigit() || c == '_')
    {
        return None;
    }
    u128::from_str_radix(&digits.replace('_', ""), 16).ok()
}

// ---- translation --------------------------------------------------------------------------

/// Parses `pattern` with Python's rules and returns the equivalent `fancy-regex` pattern.
fn translate(pattern: &str, ascii: bool) -> Result<String, PyReError> {
    let flags = Flags {
        ascii,
        ..Flags::default()
    };
    let mut p = Parser::new(pattern, flags)?;
    let seq = p.parse_sub(false, 0)?;
    if p.flags.ascii && p.flags.unicode {
        return err("ASCII and UNICODE flags are incompatible");
    }
    if p.next.is_some() {
        return err("unbalanced parenthesis");
    }
    if let Some(g) = p.condition_refs.iter().find(|g| **g >= p.groups()) {
        return err(format!("invalid group reference {g}"));
    }
    let mut out = String::new();
    let global_ascii = p.flags.ascii;
    emit_seq(&seq, global_ascii, &mut out);
    Ok(out)
}

const ASCII_WORD: &str = "0-9A-Za-z_";

fn emit_seq(seq: &[Node], ascii: bool, out: &mut String) {
    for node in seq {
        emit(node, ascii, out);
    }
}

fn is_ascii_mode(mode: &Mode, global: bool) -> bool {
    mode.ascii.unwrap_or(global)
}

fn emit(node: &Node, global_ascii: bool, out: &mut String) {
    match node {
        Node::Literal(c, mode) => {
            if mode.ignore_case {
                if is_ascii_mode(mode, global_ascii) {
                    if c.is_ascii_alphabetic() {
                        let _ = write!(
                            out,
                            "[{}{}]",
                            c.to_ascii_lowercase(),
                            c.to_ascii_uppercase()
                        );
                    } else {
                        push_literal(*c, out);
                    }
                } else {
                    out.push_str("(?i:");
                    push_literal(*c, out);
                    out.push(')');
                }
            } else {
                push_literal(*c, out);
            }
        }
        Node::Any(mode) => out.push_str(if mode.dotall { "(?s:.)" } else { "." }),
        Node::Class {
            negate,
            items,
            mode,
        } => {
            let ascii = is_ascii_mode(mode, global_ascii);
            if mode.ignore_case {
                out.push_str("(?i:");
            }
            out.push('[');
            if *negate {
                out.push('^');
            }
            for item in items {
                match item {
                    ClassItem::Char(c) => push_class_char(*c, out),
                    ClassItem::Range(lo, hi) => {
                        push_class_char(*lo, out);
                        out.push('-');
                        push_class_char(*hi, out);
                    }
                    ClassItem::Cat(cat) => out.push_str(category(*cat, ascii)),
                }
            }
            out.push(']');
            if mode.ignore_case {
                out.push(')');
            }
        }
        Node::At(at, mode) => {
            let ascii = is_ascii_mode(mode, global_ascii);
            let s = match at {
                At::Beginning if mode.multiline => "(?m:^)",
                At::Beginning => "\\A",
                At::End if mode.multiline => "(?m:$)",
                At::End => "(?=\\n?\\z)",
                At::BeginningString => "\\A",
                At::EndString => "\\z",
                At::Boundary if ascii => {
                    "(?:(?<=[0-9A-Za-z_])(?![0-9A-Za-z_])|(?<![0-9A-Za-z_])(?=[0-9A-Za-z_]))"
                }
                At::Boundary => "\\b",
                At::NonBoundary if ascii => {
                    "(?:(?<=[0-9A-Za-z_])(?=[0-9A-Za-z_])|(?<![0-9A-Za-z_])(?![0-9A-Za-z_]))"
                }
                At::NonBoundary => "\\B",
            };
            out.push_str(s);
        }
        Node::Group { index, body } => {
            out.push_str(if index.is_some() { "(" } else { "(?:" });
            emit_seq(body, global_ascii, out);
            out.push(')');
        }
        Node::Assert {
            behind,
            negate,
            body,
        } => {
            out.push_str(match (behind, negate) {
                (false, false) => "(?=",
                (false, true) => "(?!",
                (true, false) => "(?<=",
                (true, true) => "(?<!",
            });
            emit_seq(body, global_ascii, out);
            out.push(')');
        }
        Node::Atomic(body) => {
            out.push_str("(?>");
            emit_seq(body, global_ascii, out);
            out.push(')');
        }
        Node::Repeat {
            min,
            max,
            kind,
            item,
        } => {
            if *kind == RepeatKind::Possessive {
                out.push_str("(?>");
            }
            out.push_str("(?:");
            emit(item, global_ascii, out);
            out.push(')');
            if *max == MAXREPEAT {
                let _ = write!(out, "{{{min},}}");
            } else {
                let _ = write!(out, "{{{min},{max}}}");
            }
            match kind {
                RepeatKind::Lazy => out.push('?'),
                RepeatKind::Possessive => out.push(')'),
                RepeatKind::Greedy => {}
            }
        }
        Node::GroupRef(g) => {
            let _ = write!(out, "(?:\\{g})");
        }
        Node::GroupRefExists { group, yes, no } => {
            let _ = write!(out, "(?({group})");
            emit_seq(yes, global_ascii, out);
            out.push('|');
            if let Some(no) = no {
                emit_seq(no, global_ascii, out);
            }
            out.push(')');
        }
        Node::Branch(alts) => {
            out.push_str("(?:");
            for (i, a) in alts.iter().enumerate() {
                if i > 0 {
                    out.push('|');
                }
                emit_seq(a, global_ascii, out);
            }
            out.push(')');
        }
    }
}

fn category(cat: Category, ascii: bool) -> &'static str {
    match (cat, ascii) {
        (Category::Digit, true) => "0-9",
        (Category::NotDigit, true) => "[^0-9]",
        (Category::Space, true) => "\\t\\n\\x0B\\x0C\\r ",
        (Category::NotSpace, true) => "[^\\t\\n\\x0B\\x0C\\r ]",
        (Category::Word, true) => ASCII_WORD,
        (Category::NotWord, true) => "[^0-9A-Za-z_]",
        (Category::Digit, false) => "\\d",
        (Category::NotDigit, false) => "\\D",
        // Python counts the information separators U+001C..U+001F as white space.
        (Category::Space, false) => "\\s\\x1C-\\x1F",
        (Category::NotSpace, false) => "[^\\s\\x1C-\\x1F]",
        (Category::Word, false) => "\\w",
        (Category::NotWord, false) => "\\W",
    }
}

fn push_literal(c: char, out: &mut String) {
    if c.is_alphanumeric() || c == '_' || c == ' ' {
        out.push(c);
    } else {
        let _ = write!(out, "\\x{{{:X}}}", c as u32);
    }
}

fn push_class_char(c: char, out: &mut String) {
    if c.is_alphanumeric() || c == '_' || c == ' ' {
        out.push(c);
    } else {
        let _ = write!(out, "\\x{{{:X}}}", c as u32);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn search(p: &str, ascii: bool, s: &str) -> bool {
        PyRegex::compile(p, ascii).unwrap().search(s)
    }

    #[test]
    fn python_syntax_errors_are_errors() {
        for bad in [
            "(",
            ")",
            "a**",
            "*a",
            "^*",
            "\\",
            "[a",
            "[z-a]",
            "(?P<1a>x)",
            "\\q",
            "(?<=a+)b",
            "\\2(a)",
            "(a)\\2",
            "a{3,2}",
            "(?i)a(?m)b",
            "(?L)a",
            "(?<x)",
            "[\\d-z]",
            "\\8",
        ] {
            assert!(!is_valid(bad), "{bad:?} should be invalid");
        }
        for good in [
            "a{",
            "{",
            "x{1,",
            "[]a]",
            "[^]]",
            "\\d+\\.\\d*",
            "(?P<n>a)(?P=n)",
            "(?<=ab)c",
            "(?i)abc",
            "(?x) a b # c",
            "a{,3}",
            "(a)?(?(1)b|c)",
            "(?>a+)",
            "a*+",
            "\\0",
            "\\141",
            "[\\b]",
            "(?#note)a",
            "(?s:.)",
            "$",
            "^$",
            "(?u)x",
            "\\u00e9",
        ] {
            assert!(is_valid(good), "{good:?} should be valid");
        }
    }

    #[test]
    fn matching_follows_python() {
        // `$` matches before a trailing newline in Python; `\Z` does not.
        assert!(search("^a$", false, "a\n"));
        assert!(!search("^a\\Z", false, "a\n"));
        assert!(!search(&js_rewrite("^a$"), true, "a\n"));
        // `\d` is ASCII only under re.ASCII.
        assert!(search("^\\d$", false, "٣"));
        assert!(!search("^\\d$", true, "٣"));
        assert!(search("x{", false, "x{"));
        assert!(search("(?i)ABC", false, "abc"));
        assert!(search("^[^]]+$", false, "abc"));
        assert!(search("(a)\\1", false, "aa"));
    }

    #[test]
    fn the_rewrite_is_as_naive_as_the_reference() {
        assert_eq!(js_rewrite("a$"), "a\\Z");
        assert_eq!(js_rewrite("[$]"), "[$]");
        assert_eq!(js_rewrite("\\$"), "\\$");
    }
}
