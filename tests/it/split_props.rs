//! Property tests on the split: it never orphans a tool result, the latest user instruction
//! survives verbatim, the tail budget holds, head + tail = the original sequence, and a single
//! instruction followed by a long tool loop is compactable.

use agent_db::message::Role;
use agent_db::split::{split, valid_cuts, Decision, View};
use proptest::prelude::*;

/// A plausible agent history: user turns, each followed by assistant steps that may call tools
/// (answered by tool messages), sometimes an unanswered trailing call.
fn history() -> impl Strategy<Value = Vec<View>> {
    let step = (1usize..400, 0usize..4, 1usize..3000, any::<bool>());
    let turn = (1usize..300, prop::collection::vec(step, 0..8));
    (
        prop::collection::vec(turn, 1..6),
        any::<bool>(),
        any::<bool>(),
    )
        .prop_map(|(turns, anthropic_style, dangling)| {
            let mut v = Vec::new();
            let mut next = 0usize;
            for (utok, steps) in turns {
                v.push(View {
                    role: Some(Role::User),
                    instruction: true,
                    tokens: utok,
                    ..Default::default()
                });
                for (atok, ncalls, rtok, text_only) in steps {
                    let ids: Vec<String> = (0..if text_only { 0 } else { ncalls })
                        .map(|_| {
                            next += 1;
                            format!("c{next}")
                        })
                        .collect();
                    v.push(View {
                        role: Some(Role::Assistant),
                        calls: ids.clone(),
                        tokens: atok,
                        ..Default::default()
                    });
                    if ids.is_empty() {
                        continue;
                    }
                    if anthropic_style {
                        // All results in one user message (Anthropic).
                        v.push(View {
                            role: Some(Role::User),
                            results: ids,
                            tokens: rtok,
                            ..Default::default()
                        });
                    } else {
                        for id in ids {
                            v.push(View {
                                role: Some(Role::Tool),
                                results: vec![id],
                                tokens: rtok,
                                ..Default::default()
                            });
                        }
                    }
                }
            }
            if dangling {
                next += 1;
                v.push(View {
                    role: Some(Role::Assistant),
                    calls: vec![format!("c{next}")],
                    tokens: 5,
                    ..Default::default()
                });
            }
            v
        })
}

fn latest_instruction(v: &[View]) -> Option<usize> {
    v.iter().rposition(|x| x.instruction)
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(400))]

    #[test]
    fn never_orphans_and_keeps_the_instruction(v in history(), keep in 0usize..20_000) {
        match split(&v, keep, false) {
            Decision::NoOp(_) => {}
            Decision::Compact(s) => {
                prop_assert!(s.cut >= 1 && s.cut <= v.len());
                // head + tail = the original sequence, and the token split adds up.
                let total: usize = v.iter().map(|x| x.tokens).sum();
                prop_assert_eq!(s.head_tokens + s.tail_tokens, total);
                let tail = &v[s.cut..];
                // The kept tail never begins with a tool result.
                if let Some(first) = tail.first() {
                    prop_assert!(first.results.is_empty());
                    prop_assert!(first.role != Some(Role::Tool));
                }
                // No result in the tail answers a call in the head.
                let head_calls: std::collections::HashSet<&str> =
                    v[..s.cut].iter().flat_map(|x| x.calls.iter().map(String::as_str)).collect();
                for x in tail {
                    for r in &x.results {
                        prop_assert!(!head_calls.contains(r.as_str()), "orphaned result {}", r);
                    }
                }
                // The latest instruction survives: in the tail or put back.
                let l = latest_instruction(&v).expect("histories start with a user turn");
                if l < s.cut {
                    prop_assert_eq!(s.reinsert, Some(l));
                } else {
                    prop_assert_eq!(s.reinsert, None);
                }
                // The tail budget holds whenever some valid cut satisfies it.
                let ok = valid_cuts(&v);
                let fits = (1..=v.len()).any(|c| ok[c] && v[c..].iter().map(|x| x.tokens).sum::<usize>() <= keep);
                if fits {
                    prop_assert!(s.tail_tokens <= keep, "tail {} over budget {}", s.tail_tokens, keep);
                }
            }
        }
    }

    #[test]
    fn one_instruction_then_a_long_tool_loop_is_compactable(steps in 3usize..60, rtok in 500usize..5000) {
        let mut v = vec![View { role: Some(Role::User), instruction: true, tokens: 50, ..Default::default() }];
        for i in 0..steps {
            let id = format!("t{i}");
            v.push(View { role: Some(Role::Assistant), calls: vec![id.clone()], tokens: 40, ..Default::default() });
            v.push(View { role: Some(Role::Tool), results: vec![id], tokens: rtok, ..Default::default() });
        }
        let keep = rtok + 100;
        match split(&v, keep, false) {
            Decision::Compact(s) => {
                prop_assert_eq!(s.reinsert, Some(0));
                prop_assert!(s.tail_tokens <= keep);
            }
            Decision::NoOp(why) => prop_assert!(false, "not compactable: {}", why),
        }
    }
}
