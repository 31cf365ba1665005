//! Unit tests of the opencode codec on rows of the shape the released opencode
//! 1.18.34 writes (messages, parts and its own compaction; docs/stores.md, "opencode").

use super::*;

fn env(id: &str, info: &str, parts: &[(&str, &str)]) -> Box<RawValue> {
    let parts: Vec<(String, String)> = parts
        .iter()
        .map(|(i, d)| (i.to_string(), d.to_string()))
        .collect();
    envelope(id, info, &parts).unwrap()
}

const USER: &str = r#"{"role":"user","time":{"created":1795458008020},"agent":"build","model":{"providerID":"fake","modelID":"fake-model"},"summary":{"diffs":[]}}"#;
const ASSISTANT: &str = r#"{"parentID":"msg_209a303d4001D8e42cvZQUwSx5","role":"assistant","mode":"build","agent":"build","path":{"cwd":"/tmp/ocproj","root":"/"},"cost":0.00121,"tokens":{"total":1250,"input":1100,"output":40,"reasoning":10,"cache":{"write":0,"read":100}},"modelID":"fake-model","providerID":"fake","time":{"created":1795458011595,"completed":1795458013151},"finish":"stop"}"#;
const TOOL: &str = r#"{"type":"tool","tool":"read","callID":"call_1","state":{"status":"completed","input":{"filePath":"/tmp/ocproj/hello.txt"},"output":"<path>/tmp/ocproj/hello.txt</path>\n<type>file</type>\n<content>\n1: hello world\n\n(End of file - total 1 lines)\n</content>","metadata":{"preview":"hello world","truncated":false},"title":"hello.txt","time":{"start":1795458194395,"end":1795458194512}}}"#;

#[test]
fn user_parts_as_opencode_sends_them() {
    let raw = env(
        "msg_209a303d4001D8e42cvZQUwSx5",
        USER,
        &[
            (
                "prt_1",
                r#"{"type":"text","text":"\"Hello there, first message\""}"#,
            ),
            (
                "prt_2",
                r#"{"type":"text","synthetic":true,"text":"Called the Read tool with the following input: {\"filePath\":\"/tmp/ocproj/hello.txt\"}"}"#,
            ),
            (
                "prt_3",
                r#"{"type":"file","mime":"text/plain","filename":"hello.txt","url":"file:///tmp/ocproj/hello.txt"}"#,
            ),
            ("prt_4", r#"{"type":"text","text":"hidden","ignored":true}"#),
            ("prt_5", r#"{"type":"agent","name":"explore"}"#),
            (
                "prt_6",
                r#"{"type":"subtask","prompt":"p","description":"d","agent":"explore"}"#,
            ),
        ],
    );
    let m = decode(&raw).unwrap();
    assert_eq!(m.role, Role::User);
    assert_eq!(
        m.text(),
        "\"Hello there, first message\"\nCalled the Read tool with the following input: {\"filePath\":\"/tmp/ocproj/hello.txt\"}\nThe following tool was executed by the user"
    );
    assert!(m.is_user_instruction());
    assert_eq!(raw.get(), m.raw.get(), "bytes kept");
}

#[test]
fn assistant_parts_and_a_tool_as_call_plus_result() {
    let raw = env(
        "msg_a",
        ASSISTANT,
        &[
            (
                "prt_1",
                r#"{"snapshot":"68aba62e560c0ebc3396e8ae9335232cd93a3f60","type":"step-start"}"#,
            ),
            (
                "prt_2",
                r#"{"type":"reasoning","text":"thinking about it","time":{"start":1795458013031,"end":1795458013058}}"#,
            ),
            (
                "prt_3",
                r#"{"type":"text","text":"Reply number 2.","time":{"start":1795458013072,"end":1795458013097}}"#,
            ),
            ("prt_4", TOOL),
            (
                "prt_5",
                r#"{"reason":"tool-calls","snapshot":"68aba62e","type":"step-finish","tokens":{"total":19050,"input":18900,"output":40,"reasoning":10,"cache":{"write":0,"read":100}},"cost":0.01901}"#,
            ),
            (
                "prt_6",
                r#"{"type":"patch","hash":"abc","files":["/tmp/ocproj/a.rs"]}"#,
            ),
            ("prt_7", r#"{"type":"snapshot","snapshot":"abc"}"#),
            (
                "prt_8",
                r#"{"type":"retry","attempt":1,"error":{"name":"APIError","data":{"message":"x","isRetryable":true}},"time":{"created":1}}"#,
            ),
            ("prt_9", r#"{"type":"hologram","beam":[1,2,3]}"#),
        ],
    );
    let m = decode(&raw).unwrap();
    assert_eq!(m.role, Role::Assistant);
    assert_eq!(m.text(), "Reply number 2.");
    let calls: Vec<_> = m.tool_calls().collect();
    assert_eq!(
        calls,
        [("call_1", "read", r#"{"filePath":"/tmp/ocproj/hello.txt"}"#)]
    );
    assert_eq!(m.tool_result_ids().collect::<Vec<_>>(), ["call_1"]);
    let result = m.blocks.iter().find_map(|b| match b {
        Block::ToolResult {
            content, is_error, ..
        } => Some((content.clone(), *is_error)),
        _ => None,
    });
    assert!(result
        .unwrap()
        .0
        .starts_with("<path>/tmp/ocproj/hello.txt</path>"));
    assert!(m
        .blocks
        .iter()
        .any(|b| matches!(b, Block::Thinking { text, .. } if text == "thinking about it")));
    assert!(m.blocks.iter().any(
        |b| matches!(b, Block::Opaque { kind, bytes, .. } if kind == "opencode:hologram" && *bytes > 0)
    ));
}

#[test]
fn tool_states_pruned_error_and_interrupted() {
    let pruned = TOOL.replace(
        r#""end":1795458194512}"#,
        r#""end":1795458194512,"compacted":1795458999000}"#,
    );
    let error = r#"{"type":"tool","tool":"bash","callID":"c2","state":{"status":"error","input":{"command":"ls"},"error":"Tool execution aborted","metadata":{"interrupted":true},"time":{"start":1,"end":2}}}"#;
    let running = r#"{"type":"tool","tool":"bash","callID":"c3","state":{"status":"running","input":{"command":"ls"},"time":{"start":1}}}"#;
    let pending = r#"{"type":"tool","tool":"bash","callID":"c4","state":{"status":"pending","input":{},"raw":""}}"#;
    let raw = env(
        "msg_a",
        ASSISTANT,
        &[
            ("p1", &pruned),
            ("p2", error),
            ("p3", running),
            ("p4", pending),
        ],
    );
    let m = decode(&raw).unwrap();
    let results: Vec<(String, bool)> = m
        .blocks
        .iter()
        .filter_map(|b| match b {
            Block::ToolResult {
                content, is_error, ..
            } => Some((content.clone(), *is_error)),
            _ => None,
        })
        .collect();
    assert_eq!(
        results,
        [
            (CLEARED.to_string(), false),
            ("Tool execution aborted".to_string(), true),
            (INTERRUPTED.to_string(), true),
            (INTERRUPTED.to_string(), true),
        ]
    );
    assert_eq!(cleared_parts(&raw), ["p1"]);
}

#[test]
fn compaction_user_and_summary_assistant() {
    let user = env(
        "msg_209addc41001",
        r#"{"role":"user","model":{"providerID":"fake","modelID":"fake-model"},"agent":"build","time":{"created":1795458718785},"summary":{"diffs":[]}}"#,
        &[(
            "prt_c",
            r#"{"type":"compaction","auto":false,"tail_start_id":"msg_209adcf80001IjGi4sAhG0l8N2"}"#,
        )],
    );
    let m = decode(&user).unwrap();
    assert_eq!(m.text(), COMPACTION_TEXT);
    let summary = r#"{"role":"assistant","parentID":"msg_209addc41001","mode":"compaction","agent":"compaction","summary":true,"path":{"cwd":"/tmp","root":"/"},"cost":0.00121,"tokens":{"total":1250,"input":1100,"output":40,"reasoning":10,"cache":{"write":0,"read":100}},"modelID":"fake-model","providerID":"fake","time":{"created":1795458718910,"completed":1795458720001},"finish":"stop"}"#;
    let info: Value = serde_json::from_str(summary).unwrap();
    assert!(is_completed_summary(&info));
    let unfinished: Value =
        serde_json::from_str(&summary.replace(r#","finish":"stop""#, "")).unwrap();
    assert!(!is_completed_summary(&unfinished));
    // The user message's `summary` is an object, never a completed summary.
    assert!(!is_completed_summary(&serde_json::from_str(USER).unwrap()));
    let made = summary_messages("S");
    assert_eq!(decode(&made[0]).unwrap().text(), COMPACTION_TEXT);
    assert_eq!(decode(&made[1]).unwrap().text(), "S");
}

#[test]
fn errored_assistants_are_skipped_unless_aborted_with_content() {
    let err = ASSISTANT.replace(
        r#","finish":"stop""#,
        r#","error":{"name":"APIError","data":{"message":"boom","isRetryable":false}}"#,
    );
    let raw = env("m", &err, &[("p", TOOL)]);
    let m = decode(&raw).unwrap();
    assert!(!m.has_tool_calls());
    assert_eq!(m.text(), "");
    let aborted = ASSISTANT.replace(
        r#","finish":"stop""#,
        r#","error":{"name":"MessageAbortedError","data":{"message":"aborted"}}"#,
    );
    let m = decode(&env("m", &aborted, &[("p", TOOL)])).unwrap();
    assert!(m.has_tool_calls());
}

#[test]
fn bad_rows_are_errors_not_panics() {
    assert!(envelope("msg_x", "{not json", &[])
        .unwrap_err()
        .to_string()
        .contains("msg_x"));
    let e = envelope("msg_x", USER, &[("prt_y".into(), "[".into())])
        .unwrap_err()
        .to_string();
    assert!(e.contains("prt_y") && e.contains("msg_x"), "{e}");
    let raw = env("msg_x", r#"{"role":"system"}"#, &[]);
    let e = decode(&raw).unwrap_err();
    assert_eq!(
        e.to_string(),
        "message msg_x: role \"system\" is not an opencode role"
    );
    assert!(matches!(&e, DecodeError::In { at, error }
        if at == "message msg_x" && matches!(**error, DecodeError::NotARole { .. })));
    let raw = env(
        "msg_x",
        r#"{"role":"user"}"#,
        &[("p", r#"{"no_type":1}"#), ("q", "42")],
    );
    let m = decode(&raw).unwrap();
    assert_eq!(m.blocks.len(), 2);
}

#[test]
fn prune_marks_completed_tools_only() {
    let skill = TOOL.replace(r#""tool":"read""#, r#""tool":"skill""#);
    let raw = env(
        "m",
        ASSISTANT,
        &[
            ("p1", TOOL),
            ("p2", &skill),
            ("p3", r#"{"type":"text","text":"x"}"#),
        ],
    );
    let mut v: Value = serde_json::from_str(raw.get()).unwrap();
    assert!(prune(&mut v));
    let out = raw_of(&v);
    assert_eq!(cleared_parts(&out), ["p1"]);
    assert_eq!(
        decode(&out)
            .unwrap()
            .blocks
            .iter()
            .filter(|b| matches!(b, Block::ToolResult { content, .. } if content == CLEARED))
            .count(),
        1
    );
    let mut again: Value = serde_json::from_str(out.get()).unwrap();
    assert!(!prune(&mut again), "already cleared parts are left alone");
}

/// A part with a repeated key is read as opencode's `JSON.parse` reads it (the last value), and
/// the message's other rows with it; a tool state read in place gives the same blocks.
#[test]
fn a_repeated_key_reads_as_json_parse_does() {
    let tool_twice = TOOL.replacen(
        r#""status":"completed""#,
        r#""status":"error","error":"boom","status":"completed""#,
        1,
    );
    let raw = env(
        "msg_1",
        ASSISTANT,
        &[
            ("prt_1", r#"{"type":"text","text":"first","text":"last"}"#),
            ("prt_2", &tool_twice),
        ],
    );
    let m = decode(&raw).unwrap();
    assert_eq!(m.text(), "last");
    let Block::ToolResult {
        content, is_error, ..
    } = &m.blocks[2]
    else {
        panic!("{:?}", m.blocks)
    };
    assert!(content.contains("hello world") && !is_error, "{content}");
    let plain = env("msg_1", ASSISTANT, &[("prt_2", TOOL)]);
    assert_eq!(decode(&plain).unwrap().blocks, m.blocks[1..].to_vec());
}

/// The envelope is the stored bytes, verbatim, in the fixed frame: ids escaped as JSON strings,
/// each `data` as stored (inner whitespace and escapes kept, the space around it dropped).
#[test]
fn the_envelope_frames_the_stored_bytes() {
    let e = envelope(
        "msg_\"é\u{1}",
        " {\"role\" : \"user\",\"t\":\"\\u00e9\"} ",
        &[(
            "prt_1".into(),
            "{\"type\":\"text\",  \"text\":\"a\\nb\"}".into(),
        )],
    )
    .unwrap();
    assert_eq!(
        e.get(),
        r#"{"id":"msg_\"é\u0001","info":{"role" : "user","t":"\u00e9"},"parts":[{"id":"prt_1","data":{"type":"text",  "text":"a\nb"}}]}"#
    );
    let bad = envelope("m", "{", &[]).unwrap_err().to_string();
    assert!(
        bad.starts_with("message m: data is not valid JSON"),
        "{bad}"
    );
}
