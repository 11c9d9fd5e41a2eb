//! The resume packet: what a fresh agent reads first, in a fixed order and
//! never over its byte cap, however long the history.
//!
//! Budgeting is pure: the caller gathers the sections; [`render`] decides what fits. The
//! budget is shared, never spent by the first section: each section is promised its
//! first [`Section::want`] items (its share), every heading (with the exact counts its
//! summary states) and "+N more" line is kept, and when the shares do not fit whole,
//! every line is cut to one common width — a line shorter than it keeps all of itself —
//! and, below [`MIN_ITEM_BYTES`], the longest shares give up their last items first.
//! Room left once every share is shown whole goes to more items, section by section in
//! order.

use serde::Serialize;

/// Default cap, in bytes.
pub const DEFAULT_MAX_BYTES: usize = 6000;
/// Longest single item, in bytes; longer ones are cut with `…`.
pub const MAX_ITEM_BYTES: usize = 400;
/// The narrowest an item is cut to before a share gives up items: room for an id and
/// the first words after it.
pub const MIN_ITEM_BYTES: usize = 36;
/// A section's share when it names none: what a successor reads of a list before the
/// rest is better asked for by the command that lists it.
pub const DEFAULT_WANT: usize = 20;

/// One list in the packet.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Section {
    pub title: &'static str,
    /// Said on the heading line after the title: the section's exact counts, and the
    /// commands that list what it leaves out.
    pub summary: Option<String>,
    /// Items in priority order (the first ones are shown first).
    pub items: Vec<String>,
    /// Items known to exist beyond `items` but not read (a bounded query); they count in
    /// "+N more".
    pub unlisted: usize,
    /// The command that lists them all, quoted in "+N more".
    pub more: &'static str,
    /// Printed when there are no items; `None` hides an empty section.
    pub empty: Option<&'static str>,
    /// How many of the first items are this section's share of the budget.
    pub want: usize,
}

impl Section {
    /// A section of `items`, all of them read, with the default share.
    pub fn of(
        title: &'static str,
        items: Vec<String>,
        more: &'static str,
        empty: Option<&'static str>,
    ) -> Self {
        Self {
            title,
            summary: None,
            items,
            unlisted: 0,
            more,
            empty,
            want: DEFAULT_WANT,
        }
    }

    fn total(&self) -> usize {
        self.items.len() + self.unlisted
    }

    fn hidden(&self) -> bool {
        self.total() == 0 && self.empty.is_none() && self.summary.is_none()
    }

    /// Its heading, the empty text, and the "+N more" line when `shown` of its items are.
    fn fixed(&self, shown: usize) -> usize {
        if self.hidden() {
            return 0;
        }
        heading(self).len()
            + match (self.items.is_empty(), self.empty) {
                (true, Some(e)) if self.unlisted == 0 => empty_line(e).len(),
                _ => 0,
            }
            + if shown < self.total() {
                more_line(self.total() - shown, self.more).len()
            } else {
                0
            }
    }
}

/// What the packet showed of one section.
#[derive(Debug, Clone, PartialEq, Serialize, schemars::JsonSchema)]
pub struct Shown {
    pub title: &'static str,
    pub shown: usize,
    pub total: usize,
}

#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Packet {
    pub text: String,
    pub sections: Vec<Shown>,
}

impl Packet {
    /// The sections (by index) whose every item read was shown though the section has
    /// unread ones (`unlisted`): reading more of those lists could show more. When there
    /// are none, reading more of any list gives the same packet.
    pub fn read_short(&self, sections: &[Section]) -> Vec<usize> {
        self.sections
            .iter()
            .zip(sections)
            .enumerate()
            .filter(|(_, (shown, s))| s.unlisted > 0 && shown.shown == s.items.len())
            .map(|(i, _)| i)
            .collect()
    }
}

/// The largest index ≤ `max` (and ≤ `s.len()`) that starts a character: where a byte cap
/// may cut `s` without splitting one.
pub fn floor_char_boundary(s: &str, max: usize) -> usize {
    (0..=max.min(s.len()))
        .rev()
        .find(|i| s.is_char_boundary(*i))
        .unwrap_or(0)
}

/// Cuts `s` to at most `max` bytes on a character boundary, marking the cut with `…`.
pub fn clip(s: &str, max: usize) -> String {
    if s.len() <= max {
        return s.to_owned();
    }
    match max.checked_sub('…'.len_utf8()) {
        Some(budget) => format!("{}…", &s[..floor_char_boundary(s, budget)]),
        // No room even for the mark.
        None => s[..floor_char_boundary(s, max)].to_owned(),
    }
}

fn heading(s: &Section) -> String {
    match &s.summary {
        Some(summary) => format!("\n## {} — {summary}\n", s.title),
        None => format!("\n## {}\n", s.title),
    }
}

fn empty_line(empty: &str) -> String {
    format!("  {empty}\n")
}

fn more_line(hidden: usize, command: &str) -> String {
    format!("  +{hidden} more: `{command}`\n")
}

fn item_line(item: &str, width: usize) -> String {
    format!("- {}\n", clip(item, width.min(MAX_ITEM_BYTES)))
}

/// The bytes of an item's line cut to `width`, without building it.
fn item_bytes(item: &str, width: usize) -> usize {
    let width = width.min(MAX_ITEM_BYTES);
    let text = if item.len() <= width {
        item.len()
    } else {
        match width.checked_sub('…'.len_utf8()) {
            Some(budget) => floor_char_boundary(item, budget) + '…'.len_utf8(),
            None => floor_char_boundary(item, width),
        }
    };
    text + 3
}

/// How many items of each section are shown, and the width every line is cut to: the
/// pure allocation [`render`] prints.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Allocation {
    pub shown: Vec<usize>,
    pub width: usize,
}

/// The bytes `sections` take with `shown` items each, cut to `width`.
fn size(sections: &[Section], shown: &[usize], width: usize) -> usize {
    sections
        .iter()
        .zip(shown)
        .map(|(s, &k)| {
            s.fixed(k)
                + s.items[..k]
                    .iter()
                    .map(|i| item_bytes(i, width))
                    .sum::<usize>()
        })
        .sum()
}

/// Shares `budget` bytes among `sections` (see the module's words).
pub fn allocate(sections: &[Section], budget: usize) -> Allocation {
    let mut shown: Vec<usize> = sections
        .iter()
        .map(|s| {
            if s.hidden() {
                0
            } else {
                s.want.min(s.items.len())
            }
        })
        .collect();
    // Every share whole: the room left goes to more items, in order.
    if size(sections, &shown, MAX_ITEM_BYTES) <= budget {
        let mut used = size(sections, &shown, MAX_ITEM_BYTES);
        for (i, s) in sections.iter().enumerate() {
            while shown[i] < s.items.len() {
                let before = s.fixed(shown[i]);
                let after = s.fixed(shown[i] + 1);
                let grown = used + item_bytes(&s.items[shown[i]], MAX_ITEM_BYTES) + after - before;
                if grown > budget {
                    break;
                }
                used = grown;
                shown[i] += 1;
            }
        }
        return Allocation {
            shown,
            width: MAX_ITEM_BYTES,
        };
    }
    // Below the narrowest width, the longest share gives up its last item (the later
    // section among equals) until the shares fit.
    while size(sections, &shown, MIN_ITEM_BYTES) > budget {
        // `max_by_key` keeps the last of equals.
        let Some(longest) = (0..shown.len()).max_by_key(|&i| shown[i]) else {
            break;
        };
        if shown[longest] == 0 {
            break;
        }
        shown[longest] -= 1;
    }
    // The widest cut that fits.
    let (mut low, mut high) = (MIN_ITEM_BYTES, MAX_ITEM_BYTES);
    while low < high {
        let mid = (low + high).div_ceil(2);
        if size(sections, &shown, mid) <= budget {
            low = mid;
        } else {
            high = mid - 1;
        }
    }
    Allocation { shown, width: low }
}

/// Renders `header` then `sections`, in order, within `max_bytes`.
pub fn render(header: &str, sections: &[Section], max_bytes: usize) -> Packet {
    let mut text = String::new();
    text.push_str(header.trim_end());
    text.push('\n');
    let allocation = allocate(sections, max_bytes.saturating_sub(text.len()));
    let mut shown = Vec::new();
    for (section, &count) in sections.iter().zip(&allocation.shown) {
        let mut part = String::new();
        if !section.hidden() {
            part.push_str(&heading(section));
            if let (true, 0, Some(empty)) =
                (section.items.is_empty(), section.unlisted, section.empty)
            {
                part.push_str(&empty_line(empty));
            }
            for item in &section.items[..count] {
                part.push_str(&item_line(item, allocation.width));
            }
            if count < section.total() {
                part.push_str(&more_line(section.total() - count, section.more));
            }
        }
        // Only under a cap too small for every heading is a section left out whole.
        let fits = text.len() + part.len() <= max_bytes;
        if fits {
            text.push_str(&part);
        }
        shown.push(Shown {
            title: section.title,
            shown: if fits { count } else { 0 },
            total: section.total(),
        });
    }
    if text.len() > max_bytes {
        // Only when even the header cannot fit: a tiny cap is still a cap.
        text = clip(&text, max_bytes);
    }
    Packet {
        text,
        sections: shown,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn section(title: &'static str, n: usize, len: usize) -> Section {
        Section::of(
            title,
            (0..n).map(|i| format!("{i}:{}", "x".repeat(len))).collect(),
            "baton inbox",
            Some("nothing"),
        )
    }

    #[test]
    fn later_sections_survive_a_flooded_first_one() {
        let sections = [
            section("What I owe", 10_000, 80),
            section("Stop when", 2, 20),
        ];
        let p = render("You are impl-1", &sections, 2000);
        assert!(p.text.len() <= 2000);
        assert!(p.text.contains("## Stop when\n- 0:"), "{}", p.text);
        assert!(p.text.contains("more: `baton inbox`"));
        assert_eq!(p.sections[0].total, 10_000);
        assert!(p.sections[0].shown > 0 && p.sections[0].shown < 10_000);
    }

    #[test]
    fn a_packet_reads_short_only_when_it_showed_every_item_read_of_a_longer_list() {
        let mut cut = section("What I owe", 200, 80);
        cut.unlisted = 1000;
        let p = render("h", std::slice::from_ref(&cut), 2000);
        assert!(p.sections[0].shown < 200);
        let none: [usize; 0] = [];
        assert_eq!(
            p.read_short(std::slice::from_ref(&cut)),
            none,
            "the cap cut it first"
        );

        let mut short = section("What I owe", 3, 5);
        short.unlisted = 97;
        let p = render("h", std::slice::from_ref(&short), 6000);
        assert_eq!(
            p.read_short(std::slice::from_ref(&short)),
            [0],
            "room for more was left"
        );

        let whole = section("What I owe", 3, 5);
        let p = render("h", std::slice::from_ref(&whole), 6000);
        assert_eq!(
            p.read_short(std::slice::from_ref(&whole)),
            none,
            "nothing left unread"
        );
    }

    #[test]
    fn unlisted_items_count_in_the_more_line() {
        let mut s = section("What I owe", 3, 5);
        s.unlisted = 97;
        let p = render("h", &[s], 6000);
        assert!(
            p.text.ends_with("  +97 more: `baton inbox`\n"),
            "{}",
            p.text
        );
        assert_eq!((p.sections[0].shown, p.sections[0].total), (3, 100));
    }

    #[test]
    fn everything_fits_when_there_is_room() {
        let p = render("h", &[section("A", 2, 5), section("B", 0, 0)], 6000);
        assert_eq!(
            p.text,
            "h\n\n## A\n- 0:xxxxx\n- 1:xxxxx\n\n## B\n  nothing\n"
        );
    }

    /// A section of `n` items of `len` bytes each (past their index) with a share of `want`.
    fn share(title: &'static str, n: usize, len: usize, want: usize) -> Section {
        Section {
            want,
            ..section(title, n, len)
        }
    }

    #[test]
    fn a_long_first_list_does_not_crowd_out_the_others() {
        // 150 owed, 5 waited for, 5 failed approaches, 300 decisions: every list shows
        // its share, and the first one's heading says how many there are.
        let mut owed = share("What I owe", 150, 100, 20);
        owed.summary = Some("150 open requests to me · `baton inbox`".into());
        let sections = [
            owed,
            share("Active constraints", 5, 90, 20),
            share("Recent decisions", 300, 70, 20),
            share("What I am waiting for", 5, 100, 20),
        ];
        let p = render("# Resume: planner", &sections, DEFAULT_MAX_BYTES);
        assert!(p.text.len() <= DEFAULT_MAX_BYTES);
        let shown: Vec<usize> = p.sections.iter().map(|s| s.shown).collect();
        assert_eq!(shown[1..], [5, 20, 5], "{}", p.text);
        // The room left past every share goes to the first list.
        assert!(shown[0] > 20, "{}", p.text);
        assert!(
            p.text
                .contains("## What I owe — 150 open requests to me · `baton inbox`\n")
        );
        assert!(
            p.text
                .contains(&format!("  +{} more: `baton inbox`\n", 150 - shown[0]))
        );
    }

    #[test]
    fn shares_are_shared_by_one_width_then_by_the_longest_giving_up_items() {
        /// Items and lengths of each section, shares, budget → shown, width.
        type Case = (
            &'static [(usize, usize)],
            &'static [usize],
            usize,
            &'static [usize],
            usize,
        );
        let cases: &[Case] = &[
            // Everything fits whole: more items past the shares, in order.
            (
                &[(30, 20), (30, 20)],
                &[5, 5],
                6000,
                &[30, 30],
                MAX_ITEM_BYTES,
            ),
            // The shares fit whole, and room for four more of the first list only.
            (&[(30, 20), (30, 20)], &[5, 5], 425, &[9, 5], MAX_ITEM_BYTES),
            // The shares fit only cut: one width for all, short items whole.
            (&[(4, 200), (4, 10)], &[4, 4], 600, &[4, 4], 129),
            // Not even at the narrowest width: the longest share gives up first, the later
            // of two equal ones.
            (
                &[(20, 200), (20, 200), (3, 200)],
                &[20, 20, 3],
                1420,
                &[16, 15, 3],
                MIN_ITEM_BYTES,
            ),
            (
                &[(20, 200), (6, 200)],
                &[20, 20],
                990,
                &[18, 6],
                MIN_ITEM_BYTES,
            ),
        ];
        for (lists, wants, budget, shown, width) in cases {
            let sections: Vec<Section> = lists
                .iter()
                .zip(*wants)
                .map(|((n, len), want)| share("s", *n, *len, *want))
                .collect();
            let a = allocate(&sections, *budget);
            assert_eq!(
                (a.shown.as_slice(), a.width),
                (*shown, *width),
                "{lists:?} wanting {wants:?} in {budget}"
            );
            let p = render("", &sections, *budget + 1);
            assert!(p.text.len() <= *budget + 1, "{}", p.text);
        }
    }

    #[test]
    fn a_cut_line_keeps_its_beginning_and_says_it_was_cut() {
        let sections = [share("A", 3, 300, 3), share("B", 3, 300, 3)];
        let p = render("h", &sections, 600);
        let a = allocate(&sections, 600 - 2);
        assert!(a.width < MAX_ITEM_BYTES && a.width >= MIN_ITEM_BYTES);
        for i in 0..3 {
            assert!(p.text.contains(&format!("- {i}:xxx")), "{}", p.text);
        }
        assert_eq!(p.text.matches("…\n").count(), 6, "{}", p.text);
    }

    #[test]
    fn a_summary_heads_even_an_empty_section() {
        let mut s = share("Recent decisions", 0, 0, 20);
        s.empty = None;
        s.summary = Some("0 decisions in force".into());
        let p = render("h", &[s], 6000);
        assert_eq!(p.text, "h\n\n## Recent decisions — 0 decisions in force\n");
    }

    #[test]
    fn cuts_never_split_a_character() {
        let s = "aé"; // 'é' is two bytes, at 1..3
        assert_eq!(floor_char_boundary(s, 2), 1);
        assert_eq!(floor_char_boundary(s, 3), 3);
        assert_eq!(floor_char_boundary(s, 10), 3);
    }

    #[test]
    fn clipping_respects_characters() {
        assert_eq!(clip("ééé", 5), "é…");
        assert!(clip("ééé", 5).len() <= 5);
        assert_eq!(clip("abc", 3), "abc");
        assert_eq!(clip("abcd", 2), "ab");
    }

    proptest! {
        #[test]
        fn the_packet_never_exceeds_its_cap(
            max in 0usize..8000,
            counts in proptest::collection::vec((0usize..300, 0usize..900), 1..8),
        ) {
            const TITLES: [&str; 8] = ["a", "b", "c", "d", "e", "f", "g", "h"];
            let sections: Vec<Section> = counts
                .iter()
                .enumerate()
                .map(|(i, (n, len))| section(TITLES[i], *n, *len))
                .collect();
            let header = "You are x in /p, generation 1";
            let p = render(header, &sections, max);
            prop_assert!(p.text.len() <= max, "{} > {}", p.text.len(), max);
            // Whole lines only, once the header fits: printed with its last newline, it
            // is no longer.
            if header.len() < max {
                prop_assert!(p.text.ends_with('\n'), "{:?}", p.text);
            }
        }

        /// The resume packet is built from a first page of each list, and built again from
        /// whole lists only when the page read short: the two must never differ.
        #[test]
        fn a_packet_that_did_not_read_short_is_the_packet_of_the_whole_lists(
            max in 0usize..8000,
            lists in proptest::collection::vec((0usize..120, 1usize..200, 0usize..120), 1..8),
        ) {
            const TITLES: [&str; 8] = ["a", "b", "c", "d", "e", "f", "g", "h"];
            let whole: Vec<Section> = lists
                .iter()
                .enumerate()
                .map(|(i, (n, len, _))| section(TITLES[i], *n, *len))
                .collect();
            let first: Vec<Section> = whole
                .iter()
                .zip(&lists)
                .map(|(s, (n, _, read))| {
                    let read = (*read).min(*n);
                    let mut page = s.clone();
                    page.items.truncate(read);
                    page.unlisted = n - read;
                    page
                })
                .collect();
            let header = "You are x in /p, generation 1";
            let p = render(header, &first, max);
            if p.read_short(&first).is_empty() {
                prop_assert_eq!(p, render(header, &whole, max));
            }
        }
    }
}
