//! [`DecodeError`]: why a stored message does not decode, as the codecs find it
//! (`message::Codec::decode`).
//!
//! Each case keeps what it is about (the field, the role, the item kind, the position) as data;
//! its `Display` is the message users read. The wording that differs between formats (the
//! format's or agent's name, how it words an unknown role) comes from the codec that builds the
//! error, so this module names no agent. It lives beside [`Error`](super::Error), whose
//! [`Error::Decode`](super::Error::Decode) carries it with the conversation's ID.

/// Why a stored message (or a whole stored history) does not decode.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum DecodeError {
    /// Text that is not JSON, or not the JSON shape the format wraps a message in (`what`
    /// says which); `error` is the parser's own message.
    NotJson { what: String, error: String },
    /// A required field is absent (or, where `field` says so, not of the type it must have).
    Missing { item: String, field: String },
    /// A value of the wrong JSON type: `what` (when named) is `expected`.
    WrongType {
        what: Option<String>,
        expected: String,
    },
    /// A role the format does not have, worded "unknown `format` role".
    UnknownRole { format: &'static str, role: String },
    /// A role the format does not have, worded "role … is not `of` role".
    NotARole { role: String, of: &'static str },
    /// An item of a kind the agent does not read.
    UnreadKind {
        item: String,
        kind: String,
        reader: &'static str,
    },
    /// An item of a kind an old version of the agent wrote and no later version reads.
    RetiredKind {
        kind: String,
        agent: &'static str,
        version: &'static str,
    },
    /// An error inside a part of the message (a row, a content item).
    In { at: String, error: Box<DecodeError> },
    /// An error that makes the agent itself refuse to load `what` (the message, the session).
    Unloadable {
        agent: &'static str,
        what: &'static str,
        error: Box<DecodeError>,
    },
    /// An error at a position of a stored history (`None`: the history as a whole).
    At {
        index: Option<usize>,
        error: Box<DecodeError>,
    },
}

impl DecodeError {
    /// Text that is not the JSON `what` names.
    pub fn not_json(what: impl Into<String>, error: impl std::fmt::Display) -> Self {
        DecodeError::NotJson {
            what: what.into(),
            error: error.to_string(),
        }
    }

    /// `item` has no `field`.
    pub fn missing(item: impl Into<String>, field: impl Into<String>) -> Self {
        DecodeError::Missing {
            item: item.into(),
            field: field.into(),
        }
    }

    /// `what` is of the wrong type (`expected` says what it is instead, e.g. "not a JSON
    /// object").
    pub fn wrong_type(what: Option<&str>, expected: impl Into<String>) -> Self {
        DecodeError::WrongType {
            what: what.map(str::to_string),
            expected: expected.into(),
        }
    }

    /// This error, inside the part named `at`.
    pub fn inside(self, at: impl Into<String>) -> Self {
        DecodeError::In {
            at: at.into(),
            error: Box::new(self),
        }
    }

    /// This error, which makes `agent` refuse to load `what`.
    pub fn unloadable(self, agent: &'static str, what: &'static str) -> Self {
        DecodeError::Unloadable {
            agent,
            what,
            error: Box::new(self),
        }
    }

    /// This error, at message `index` of a stored history (`None`: the history as a whole).
    pub fn at(self, index: Option<usize>) -> Self {
        DecodeError::At {
            index,
            error: Box::new(self),
        }
    }

    /// The message index in the stored history, where known.
    pub fn index(&self) -> Option<usize> {
        match self {
            DecodeError::At { index, .. } => *index,
            _ => None,
        }
    }

    /// The error without its position in the history.
    pub fn detail(&self) -> &DecodeError {
        match self {
            DecodeError::At { error, .. } => error.detail(),
            e => e,
        }
    }
}

impl std::fmt::Display for DecodeError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            DecodeError::NotJson { what, error } => write!(f, "{what} ({error})"),
            DecodeError::Missing { item, field } => write!(f, "{item} has no {field}"),
            DecodeError::WrongType {
                what: Some(what),
                expected,
            } => write!(f, "{what} is {expected}"),
            DecodeError::WrongType {
                what: None,
                expected,
            } => f.write_str(expected),
            DecodeError::UnknownRole { format, role } => {
                write!(f, "unknown {format} role {role:?}")
            }
            DecodeError::NotARole { role, of } => write!(f, "role {role:?} is not {of} role"),
            DecodeError::UnreadKind { item, kind, reader } => {
                write!(f, "{item} has type {kind:?}, which {reader} does not read")
            }
            DecodeError::RetiredKind {
                kind,
                agent,
                version,
            } => write!(
                f,
                "item type {kind:?} ({agent} {version}) is not read by any later {agent}"
            ),
            DecodeError::In { at, error } => write!(f, "{at}: {error}"),
            DecodeError::Unloadable { agent, what, error } => {
                write!(f, "{error}; {agent} cannot load {what}")
            }
            DecodeError::At {
                index: Some(i),
                error,
            } => write!(f, "raw_messages[{i}]: {error}"),
            DecodeError::At { index: None, error } => write!(f, "raw_messages: {error}"),
        }
    }
}

impl std::error::Error for DecodeError {}

#[cfg(test)]
mod tests {
    use super::DecodeError;

    #[test]
    fn positions_wrap_the_cause_and_can_be_taken_off() {
        let e = DecodeError::missing("tool call", "id")
            .inside("content item 2")
            .at(Some(4));
        assert_eq!(e.index(), Some(4));
        assert_eq!(
            e.to_string(),
            "raw_messages[4]: content item 2: tool call has no id"
        );
        assert_eq!(
            e.detail(),
            &DecodeError::In {
                at: "content item 2".into(),
                error: Box::new(DecodeError::Missing {
                    item: "tool call".into(),
                    field: "id".into()
                })
            }
        );
        let whole = DecodeError::not_json("not a JSON array of messages", "EOF").at(None);
        assert_eq!(whole.index(), None);
        assert_eq!(
            whole.to_string(),
            "raw_messages: not a JSON array of messages (EOF)"
        );
    }

    #[test]
    fn an_agent_refusal_follows_its_cause() {
        let e = DecodeError::wrong_type(None, "not a JSON object").unloadable("X", "this session");
        assert_eq!(
            e.to_string(),
            "not a JSON object; X cannot load this session"
        );
        assert!(matches!(e, DecodeError::Unloadable { agent: "X", .. }));
    }
}
