//! Passnames and topics: the lowercase slugs that name participants and lanes.

use std::fmt;

use serde::{Deserialize, Serialize};

/// The rule every slug must follow, quoted in refusals so a user can fix the input.
pub const SLUG_RULE: &str = "a lowercase slug: a-z or 0-9 first, then up to 63 of a-z, 0-9 or '-' ([a-z0-9][a-z0-9-]{0,63})";

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error, Serialize, Deserialize)]
#[error("{what} {value:?} is not valid: it must be {SLUG_RULE}")]
pub struct NameError {
    #[serde(with = "crate::refusal::fixed")]
    pub what: crate::refusal::fixed::Word,
    pub value: String,
}

pub(crate) fn check_slug(what: &'static str, value: &str) -> Result<(), NameError> {
    let bytes = value.as_bytes();
    let first_ok = bytes
        .first()
        .is_some_and(|b| b.is_ascii_lowercase() || b.is_ascii_digit());
    let rest_ok = bytes
        .iter()
        .skip(1)
        .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || *b == b'-');
    if first_ok && rest_ok && bytes.len() <= 64 {
        Ok(())
    } else {
        Err(NameError {
            what,
            value: value.to_owned(),
        })
    }
}

macro_rules! slug_type {
    ($(#[$doc:meta])* $name:ident, $what:literal) => {
        $(#[$doc])*
        #[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
        #[serde(try_from = "String", into = "String")]
        pub struct $name(String);

        impl $name {
            pub fn new(value: &str) -> Result<Self, NameError> {
                check_slug($what, value)?;
                Ok(Self(value.to_owned()))
            }

            pub fn as_str(&self) -> &str {
                &self.0
            }
        }

        impl TryFrom<String> for $name {
            type Error = NameError;
            fn try_from(value: String) -> Result<Self, NameError> {
                check_slug($what, &value)?;
                Ok(Self(value))
            }
        }

        impl From<$name> for String {
            fn from(value: $name) -> String {
                value.0
            }
        }

        impl fmt::Display for $name {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str(&self.0)
            }
        }

        impl schemars::JsonSchema for $name {
            fn schema_name() -> std::borrow::Cow<'static, str> {
                stringify!($name).into()
            }

            fn json_schema(_: &mut schemars::SchemaGenerator) -> schemars::Schema {
                schemars::json_schema!({
                    "type": "string",
                    "pattern": "^[a-z0-9][a-z0-9-]{0,63}$"
                })
            }
        }
    };
}

slug_type!(
    /// A participant's name, e.g. `planner` or `impl-1`. A claim of identity, not a proof.
    Passname,
    "passname"
);
slug_type!(
    /// A stable lane of work, e.g. `feature-handoff`.
    Topic,
    "topic"
);
slug_type!(
    /// A project's name in a store that holds several, e.g. `shop` (its URL is
    /// `/v1/projects/shop`).
    ProjectName,
    "project name"
);

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn slugs_accept_the_documented_shape_and_refuse_the_rest() {
        let max = "a".repeat(64);
        for ok in ["planner", "impl-1", "0", "a-", max.as_str()] {
            assert!(Passname::new(ok).is_ok(), "{ok} should be accepted");
        }
        let long = "a".repeat(65);
        for bad in ["", "-a", "Planner", "impl_1", "a b", "é", long.as_str()] {
            let err = Passname::new(bad).unwrap_err();
            assert!(err.to_string().contains("[a-z0-9][a-z0-9-]{0,63}"), "{err}");
        }
    }

    #[test]
    fn deserializing_checks_the_rule() {
        assert!(serde_json::from_str::<Topic>("\"Bad Topic\"").is_err());
        assert_eq!(
            serde_json::from_str::<Topic>("\"lane-1\"")
                .unwrap()
                .as_str(),
            "lane-1"
        );
    }
}
