//! Unit tests of the goose codec, on the rows of goose's own recording fixture
//! (`crates/goose-cli/src/scenario_tests/recordings/anthropic/weather_tool.json` at goose
//! `8d844eec`) and on the item shapes of goose's `message.rs`.

use super::*;

const U1: &str = r#"[{"type":"text","text":"tell me what the weather is in Berlin, Germany"}]"#;
const A1: &str = r#"[{"type":"text","text":"I'll get the current weather information for Berlin, Germany for you."},{"type":"toolRequest","id":"toolu_01CDkt9pjh8oC9C1984uhvuG","toolCall":{"status":"success","value":{"name":"weather_extension__get_weather","arguments":{"location":"Berlin, Germany"}}}}]"#;
const U2: &str = r#"[{"type":"toolResponse","id":"toolu_01CDkt9pjh8oC9C1984uhvuG","toolResult":{"status":"success","value":{"content":[{"type":"text","text":"The weather in Berlin, Germany is cloudy and 18°C"}]}}}]"#;

fn row(role: &str, content: &str) -> Message {
    decode(
        &envelope(
            role,
            content,
            Some(r#"{"userVisible":true,"agentVisible":true}"#),
        )
        .unwrap(),
    )
    .unwrap()
}

#[test]
fn decodes_the_recorded_weather_rows() {
    let u1 = row("user", U1);
    assert!(u1.is_user_instruction());
    assert_eq!(u1.text(), "tell me what the weather is in Berlin, Germany");
    let a1 = row("assistant", A1);
    assert_eq!(a1.role, Role::Assistant);
    assert_eq!(
        a1.tool_calls().collect::<Vec<_>>(),
        vec![(
            "toolu_01CDkt9pjh8oC9C1984uhvuG",
            "weather_extension__get_weather",
            r#"{"location":"Berlin, Germany"}"#
        )]
    );
    let u2 = row("user", U2);
    assert_eq!(u2.role, Role::User);
    assert!(!u2.is_user_instruction());
    match &u2.blocks[0] {
        Block::ToolResult {
            call_id,
            content,
            is_error,
            ..
        } => {
            assert_eq!(call_id, "toolu_01CDkt9pjh8oC9C1984uhvuG");
            assert_eq!(content, "The weather in Berlin, Germany is cloudy and 18°C");
            assert!(!is_error);
        }
        b => panic!("unexpected block {b:?}"),
    }
}

#[test]
fn the_envelope_keeps_content_bytes_verbatim() {
    // Odd spacing and escapes that a re-serialization would change.
    let content = r#"[ {"text":"a\u00e9 <b>","type":"text"} ]"#;
    let env = envelope("user", content, Some("not json")).unwrap();
    let parts = split_envelope(&env).unwrap();
    assert_eq!(parts.content.get(), content);
    assert_eq!(parts.role, "user");
    assert!(parts.metadata.is_none(), "unparsable metadata becomes null");
    assert_eq!(
        env.get(),
        format!(r#"{{"role":"user","content":{content},"metadata":null}}"#)
    );
    let env = envelope("assistant", A1, Some(AGENT_ONLY)).unwrap();
    assert_eq!(
        split_envelope(&env).unwrap().metadata.unwrap().get(),
        AGENT_ONLY
    );
    assert_eq!(
        env.get(),
        format!(r#"{{"role":"assistant","content":{A1},"metadata":{AGENT_ONLY}}}"#)
    );
}

#[test]
fn constructed_shapes_of_every_type() {
    let thinking = row(
        "assistant",
        r#"[{"type":"thinking","thinking":"Need to check the test file first.","signature":"EqQBCkYIBxgCKkB"},{"type":"redactedThinking","data":"EmwKAhgBEgy3"},{"type":"text","text":"Let me look."}]"#,
    );
    assert_eq!(
        thinking.blocks[..2],
        [
            Block::Thinking {
                text: "Need to check the test file first.".into(),
                redacted: false
            },
            Block::Thinking {
                text: String::new(),
                redacted: true
            }
        ]
    );
    let legacy = row("assistant", r#"[{"type":"reasoning","text":"old"}]"#);
    assert!(matches!(&legacy.blocks[0], Block::Thinking { text, .. } if text == "old"));

    let image = row(
        "user",
        r#"[{"type":"image","data":"iVBORw0KGgo=","mimeType":"image/png"},{"type":"text","text":"what is in this screenshot?"}]"#,
    );
    assert!(
        matches!(&image.blocks[0], Block::Image(i) if i.media_type.as_deref() == Some("image/png"))
    );
    assert!(image.is_user_instruction());

    let err = row(
        "user",
        r#"[{"type":"toolResponse","id":"call_9","toolResult":{"status":"error","error":"-32603: command timed out"}}]"#,
    );
    assert!(matches!(&err.blocks[0],
        Block::ToolResult { is_error: true, content, .. } if content == "-32603: command timed out"));

    let audience = row(
        "user",
        r#"[{"type":"toolResponse","id":"call_8","toolResult":{"status":"success","value":{"content":[{"type":"text","text":"ok","annotations":{"audience":["assistant"]}},{"type":"text","text":"ok (user view)","annotations":{"audience":["user"]}}],"isError":false}}}]"#,
    );
    assert!(matches!(&audience.blocks[0], Block::ToolResult { content, .. } if content == "ok"));

    let legacy_result = row(
        "user",
        r#"[{"type":"toolResponse","id":"c","toolResult":{"status":"success","value":[{"type":"text","text":"bare"}]}}]"#,
    );
    assert!(
        matches!(&legacy_result.blocks[0], Block::ToolResult { content, .. } if content == "bare")
    );

    let failed_call = row(
        "assistant",
        r#"[{"type":"toolRequest","id":"c2","toolCall":{"status":"error","error":"-32602: bad args"}}]"#,
    );
    assert!(
        matches!(&failed_call.blocks[0], Block::ToolCall { id, name, .. } if id == "c2" && name.is_empty())
    );

    for (role, item, kind) in [
        (
            "assistant",
            r#"{"type":"systemNotification","notificationType":"inlineMessage","msg":"Compaction complete"}"#,
            "goose:systemNotification",
        ),
        (
            "assistant",
            r#"{"type":"error","kind":"contextLengthExceeded","message":"prompt is too long"}"#,
            "goose:error",
        ),
        (
            "user",
            r#"{"type":"document","data":"JVBERi0=","mimeType":"application/pdf","name":"a.pdf"}"#,
            "goose:document",
        ),
        (
            "assistant",
            r#"{"type":"conversationCompacted","msg":"Conversation compacted and summarized"}"#,
            "goose:conversationCompacted",
        ),
        (
            "assistant",
            r#"{"type":"frontendToolRequest","id":"f1","toolCall":{"status":"success","value":{"name":"x","arguments":{}}}}"#,
            "goose:frontendToolRequest",
        ),
        (
            "assistant",
            r#"{"type":"toolConfirmationRequest","id":"t1","toolName":"shell","arguments":{},"prompt":null}"#,
            "goose:toolConfirmationRequest",
        ),
        (
            "assistant",
            r#"{"type":"actionRequired","data":{"actionType":"elicitation","id":"e","message":"m","requested_schema":{}}}"#,
            "goose:actionRequired",
        ),
        (
            "assistant",
            r#"{"type":"somethingFromAFutureGoose","x":1}"#,
            "goose:somethingFromAFutureGoose",
        ),
        (
            "user",
            r#"{"type":"text","text":"for the user only","annotations":{"audience":["user"]}}"#,
            "goose:text(user audience)",
        ),
        (
            "user",
            r#"{"type":"toolRequest","id":"x","toolCall":{"status":"success","value":{"name":"n","arguments":{}}}}"#,
            "goose:toolRequest(in a user message)",
        ),
        (
            "assistant",
            U2.trim_start_matches('[').trim_end_matches(']'),
            "goose:toolResponse(in an assistant message)",
        ),
        (
            "user",
            r#"{"type":"thinking","thinking":"t","signature":"s"}"#,
            "goose:thinking",
        ),
    ] {
        let m = row(role, &format!("[{item}]"));
        assert!(
            matches!(&m.blocks[0], Block::Opaque { kind: k, bytes, .. } if k == kind && *bytes > 0),
            "{item}: {:?}",
            m.blocks
        );
        assert!(!m.has_tool_calls() && !m.has_tool_results(), "{item}");
    }
}

#[test]
fn what_goose_cannot_load_fails_with_a_reason() {
    assert!(envelope("user", "[{\"type\":\"text\"", None)
        .unwrap_err()
        .to_string()
        .contains("goose cannot load"));
    for (content, want) in [
        (r#"{"type":"text","text":"x"}"#, "not a JSON array"),
        (
            r#"[{"type":"contextLengthExceeded","msg":"x"}]"#,
            "goose 1.9",
        ),
        (
            r#"[{"type":"summarizationRequested","msg":"x"}]"#,
            "goose 1.9",
        ),
        (r#"[{"text":"no type"}]"#, "no string \"type\""),
        (r#"[{"type":"text"}]"#, "no string \"text\""),
        (r#"[{"type":"toolRequest","id":"c"}]"#, "no toolCall"),
        (
            r#"[{"type":"toolResponse","toolResult":{}}]"#,
            "no string \"id\"",
        ),
        (r#"[42]"#, "not a JSON object"),
    ] {
        let env = envelope("user", content, None).unwrap();
        let err = decode(&env).unwrap_err();
        assert!(
            matches!(err, DecodeError::Unloadable { agent: "goose", .. })
                || matches!(&err, DecodeError::In { error, .. }
                    if matches!(**error, DecodeError::Unloadable { agent: "goose", .. })),
            "{content}: {err:?}"
        );
        assert!(err.to_string().contains(want), "{content}: {err}");
    }
    let env = envelope("system", U1, None).unwrap();
    let e = decode(&env).unwrap_err();
    assert_eq!(e.to_string(), "role \"system\" is not a goose message role");
    assert!(matches!(e, DecodeError::NotARole { role, .. } if role == "system"));
}

#[test]
fn visibility_follows_the_default_rule() {
    let v = |m: Option<&str>| {
        let v = visibility(m);
        (v.user, v.agent, v.parsed)
    };
    assert_eq!(v(Some(AGENT_ONLY)), (false, true, true));
    assert_eq!(
        v(Some(
            r#"{"userVisible":true,"agentVisible":false,"usage":{"inputTokens":3}}"#
        )),
        (true, false, true)
    );
    // NULL, bad JSON, a partial object or a known key of the wrong type: visible to both.
    assert_eq!(v(None), (true, true, false));
    assert_eq!(v(Some("{")), (true, true, false));
    assert_eq!(v(Some(r#"{"agentVisible":false}"#)), (true, true, false));
    assert_eq!(
        v(Some(
            r#"{"userVisible":true,"agentVisible":false,"steer":"yes"}"#
        )),
        (true, true, false)
    );
    // Unknown keys are ignored by goose's reader.
    assert_eq!(
        v(Some(
            r#"{"userVisible":false,"agentVisible":false,"newKey":[1]}"#
        )),
        (false, false, true)
    );
}

#[test]
fn hiding_edits_only_agent_visible() {
    let before = r#"{"userVisible":true,"agentVisible":true,"inference":{"provider":"anthropic","requestedModel":"claude-sonnet-4-5"},"usage":{"cost":0.10,"inputTokens":1e3}}"#;
    let after = hide_from_agent(Some(before));
    assert_eq!(
        after,
        before.replace("\"agentVisible\":true", "\"agentVisible\":false")
    );
    assert_eq!(
        hide_from_agent(Some(AGENT_ONLY)),
        r#"{"userVisible":false,"agentVisible":false}"#
    );
    // What goose reads as the default becomes the user_only preset, readable by goose.
    for m in [None, Some("x"), Some(r#"{"agentVisible":true}"#)] {
        let h = hide_from_agent(m);
        assert_eq!(h, r#"{"userVisible":true,"agentVisible":false}"#);
        assert!(!visibility(Some(&h)).agent);
    }
}

#[test]
fn summary_and_continuation_are_goose_shaped() {
    let s = summary_message("a <summary> & more");
    let p = split_envelope(&s).unwrap();
    assert_eq!(p.role, "user");
    assert_eq!(
        p.content.get(),
        r#"[{"type":"text","text":"a <summary> & more"}]"#,
        "no Go HTML escaping"
    );
    assert_eq!(p.metadata.unwrap().get(), AGENT_ONLY);
    let c = continuation_message();
    let p = split_envelope(&c).unwrap();
    assert_eq!(p.role, "assistant");
    let items: Value = serde_json::from_str(p.content.get()).unwrap();
    assert_eq!(items[0]["text"], CONTINUATION);
    assert!(CONTINUATION.starts_with("The previous message is a structured summary of the session so far, produced at the user's request"));
    let m = decode(&s).unwrap();
    assert!(m.is_user_instruction());
    let both = crate::message::summary_messages(&CODEC, "x");
    assert_eq!(both.len(), 2);
}

#[test]
fn prune_replaces_results_and_marks_agent_only() {
    let env = envelope("user", U2, None).unwrap();
    let m = decode(&env).unwrap();
    let out =
        crate::message::prune_message(&CODEC, &m, &|id| format!("[pruned {id}]"), false).unwrap();
    let p = split_envelope(&out).unwrap();
    assert_eq!(p.metadata.unwrap().get(), AGENT_ONLY);
    assert_eq!(
        p.content.get(),
        r#"[{"type":"toolResponse","id":"toolu_01CDkt9pjh8oC9C1984uhvuG","toolResult":{"status":"success","value":{"content":[{"type":"text","text":"[pruned toolu_01CDkt9pjh8oC9C1984uhvuG]"}]}}}]"#
    );
    let again = decode(&out).unwrap();
    assert_eq!(
        again.tool_result_ids().collect::<Vec<_>>(),
        vec!["toolu_01CDkt9pjh8oC9C1984uhvuG"]
    );
    // Nothing to prune in a plain text message or an assistant request.
    for (role, c) in [("user", U1), ("assistant", A1)] {
        let m = decode(&envelope(role, c, None).unwrap()).unwrap();
        assert!(crate::message::prune_message(&CODEC, &m, &|_| String::new(), true).is_none());
    }
    // Images go with elide_images.
    let img = envelope(
        "user",
        r#"[{"type":"image","data":"iVBORw0KGgo=","mimeType":"image/png"}]"#,
        None,
    )
    .unwrap();
    let m = decode(&img).unwrap();
    let out = crate::message::prune_message(&CODEC, &m, &|_| String::new(), true).unwrap();
    assert!(split_envelope(&out)
        .unwrap()
        .content
        .get()
        .contains("[image: image/png"));
}

#[test]
fn tool_pairs_are_complete_requests_with_their_response_only_messages() {
    let two = r#"[{"type":"toolRequest","id":"a","toolCall":{"status":"success","value":{"name":"x","arguments":{}}}},{"type":"toolRequest","id":"b","toolCall":{"status":"success","value":{"name":"y","arguments":{}}}}]"#;
    let ra = r#"[{"type":"toolResponse","id":"a","toolResult":{"status":"success","value":{"content":[]}}}]"#;
    let rb_text = r#"[{"type":"toolResponse","id":"b","toolResult":{"status":"success","value":{"content":[]}}},{"type":"text","text":"and also"}]"#;
    let rb = r#"[{"type":"toolResponse","id":"b","toolResult":{"status":"success","value":{"content":[]}}}]"#;
    // u1, (a1 u2) pair, (two: ra rb) pair over two messages.
    let h = vec![
        row("user", U1),
        row("assistant", A1),
        row("user", U2),
        row("assistant", two),
        row("user", ra),
        row("user", rb),
    ];
    let pairs = tool_pairs(&h, None);
    assert_eq!(
        pairs,
        vec![
            ToolPair {
                request: 1,
                responses: vec![2]
            },
            ToolPair {
                request: 3,
                responses: vec![4, 5]
            }
        ]
    );
    // A response message with text, a partial answer, or the kept instruction: no pair.
    let h2 = vec![row("assistant", two), row("user", ra), row("user", rb_text)];
    assert!(tool_pairs(&h2, None).is_empty());
    assert!(tool_pairs(&h[..5], None)[1..].is_empty());
    assert_eq!(tool_pairs(&h, Some(2)).len(), 1);
    // Hidden messages keep role and content and leave the model's view.
    let hid = hidden(&h[1]);
    assert!(!agent_visible(&hid));
    let p = split_envelope(&hid).unwrap();
    assert_eq!((p.role.as_str(), p.content.get()), ("assistant", A1));
    assert_eq!(
        p.metadata.unwrap().get(),
        r#"{"userVisible":true,"agentVisible":false}"#
    );
    let note = pair_note("[agent-db pruned a call to x {}: 0 B of output]");
    assert!(agent_visible(&note));
    let joined = crate::message::join_raw([hid.as_ref(), note.as_ref()]);
    let decoded = crate::message::decode_all(&CODEC, &joined).unwrap();
    assert_eq!(decoded.len(), 1, "the hidden message is not decoded");
}

/// A repeated key reads as serde (goose is Rust) keeps it in a `Value`: the last value; the
/// rest of the content reads as it would without the repeat.
#[test]
fn a_repeated_key_reads_as_a_value_keeps_it() {
    let m = row(
        "assistant",
        r#"[{"type":"text","text":"first","text":"last"},{"type":"toolRequest","id":"c1","toolCall":{"status":"success","value":{"name":"shell","arguments":{"command":"ls","command":"pwd"}}}}]"#,
    );
    assert_eq!(m.text(), "last");
    assert_eq!(
        m.tool_calls().collect::<Vec<_>>(),
        vec![("c1", "shell", r#"{"command":"pwd"}"#)]
    );
}

/// goose's continuations of every release: 1.47's manual text (`8d844eec`) and the three of
/// `context_mgmt/mod.rs@006bd233`, each after an agent-only summary, are goose's own summary.
#[test]
fn every_goose_continuation_text_marks_its_own_summary() {
    let texts = [
        "Your context was compacted at the user's request. The previous message contains a summary of the conversation so far.",
        "The previous message is a structured summary of an earlier portion of this session that no longer fits in your context. The original messages are gone; the summary is your only memory of them. Continue the session.",
        "The previous message is a structured summary of an earlier portion of this session that no longer fits in your context. The original messages and tool outputs are gone. Continue calling tools as necessary to complete the task.",
        CONTINUATION,
    ];
    let s = decode(&summary_message("S")).unwrap();
    for t in texts {
        let c = decode(&new_envelope("assistant", t)).unwrap();
        assert!(is_summary_pair(&s, &c), "{t}");
    }
    let other = decode(&new_envelope("assistant", "Continue the session.")).unwrap();
    assert!(!is_summary_pair(&s, &other));
}
