//! The resume packet: what a fresh agent reads first, in a fixed order and
//! never over its byte cap, however long the history.
//!
//! Budgeting is pure: the caller gathers the sections; [`render`] decides what fits. Every
//! later section keeps room for its heading and its "+N more" line, so a long inbox can
//! never push the stop conditions out of the packet.

use serde::Serialize;

/// Default cap, in bytes.
pub const DEFAULT_MAX_BYTES: usize = 6000;
/// Longest single item, in bytes; longer ones are cut with `…`.
pub const MAX_ITEM_BYTES: usize = 400;

/// One list in the packet.
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Section {
    pub title: &'static str,
    /// Items in priority order (the first ones are shown first).
    pub items: Vec<String>,
    /// Items known to exist beyond `items` but not read (a bounded query); they count in
    /// "+N more".
    pub unlisted: usize,
    /// The command that lists them all, quoted in "+N more".
    pub more: &'static str,
    /// Printed when there are no items; `None` hides an empty section.
    pub empty: Option<&'static str>,
}

impl Section {
    /// A section of `items`, all of them read.
    pub fn of(
        title: &'static str,
        items: Vec<String>,
        more: &'static str,
        empty: Option<&'static str>,
    ) -> Self {
        Self {
            title,
            items,
            unlisted: 0,
            more,
            empty,
        }
    }

    fn total(&self) -> usize {
        self.items.len() + self.unlisted
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

fn more_line(hidden: usize, command: &str) -> String {
    format!("  +{hidden} more: `{command}`\n")
}

/// Renders `header` then `sections`, in order, within `max_bytes`.
pub fn render(header: &str, sections: &[Section], max_bytes: usize) -> Packet {
    let mut text = String::new();
    text.push_str(header.trim_end());
    text.push('\n');
    // What each later section is promised: its heading, its first item, and a "+N more"
    // line for the rest (or its empty text).
    let floor = |s: &Section| -> usize {
        let heading = format!("\n## {}\n", s.title).len();
        heading
            + match (s.items.first(), s.empty) {
                (None, Some(e)) => e.len() + 3,
                (None, None) => 0,
                (Some(first), _) => {
                    let rest = s.total() - 1;
                    format!("- {}\n", clip(first, MAX_ITEM_BYTES)).len()
                        + if rest > 0 {
                            more_line(rest, s.more).len()
                        } else {
                            0
                        }
                }
            }
    };
    let mut shown = Vec::new();
    for (i, section) in sections.iter().enumerate() {
        if section.items.is_empty() && section.empty.is_none() {
            shown.push(Shown {
                title: section.title,
                shown: 0,
                total: 0,
            });
            continue;
        }
        let reserved: usize = sections[i + 1..].iter().map(floor).sum();
        let mut part = format!("\n## {}\n", section.title);
        let mut count = 0;
        if section.items.is_empty() {
            part.push_str(&format!("  {}\n", section.empty.unwrap_or_default()));
        } else {
            for (j, item) in section.items.iter().enumerate() {
                let line = format!("- {}\n", clip(item, MAX_ITEM_BYTES));
                let rest = section.total() - j - 1;
                let tail = if rest > 0 {
                    more_line(rest, section.more).len()
                } else {
                    0
                };
                if text.len() + part.len() + line.len() + tail + reserved > max_bytes {
                    break;
                }
                part.push_str(&line);
                count += 1;
            }
            if count < section.total() {
                part.push_str(&more_line(section.total() - count, section.more));
            }
        }
        if text.len() + part.len() + reserved <= max_bytes {
            text.push_str(&part);
        }
        shown.push(Shown {
            title: section.title,
            shown: count,
            total: section.total(),
        });
    }
    if text.len() > max_bytes {
        // Only when even the headings cannot fit: a tiny cap is still a cap.
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
            let p = render("You are x in /p, generation 1", &sections, max);
            prop_assert!(p.text.len() <= max, "{} > {}", p.text.len(), max);
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
