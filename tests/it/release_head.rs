//! `Plan::release_head`: a conversation waiting on its summary requests keeps only what the rest
//! of the compaction reads. For every planned conversation of generated stores (first pass, and
//! a second pass over conversations that start with agent-db's earlier summary and put the
//! latest instruction back), the released plan gives the same prompt inputs (latest instruction,
//! earlier summary, head tokens) and the same new history, byte for byte, as the full plan.

use agent_db::compact::{swap, HeadInput, Rewrite, Summary};
use agent_db::plan::{self, PlanOptions};
use agent_db::select::Reason;
use agent_db::split::Decision;
use agent_db::store::{Access, Store};

use crate::common::{Env, NOW};

fn check_store(env: &Env, keep: usize) -> (usize, usize, usize) {
    let now = agent_db::gotime::parse(NOW).unwrap();
    let store = Store::open(&env.db, Access::Read).unwrap();
    let (mut planned, mut prior, mut reinsert) = (0, 0, 0);
    for id in env.ids("SELECT id FROM conversations ORDER BY id") {
        let meta = store.meta(&id).unwrap();
        let opts = PlanOptions {
            keep_tokens: Some(keep),
            context_limit: None,
            ..Default::default()
        };
        let Ok(full) = plan::plan(&store, meta, Reason::Manual, &opts) else {
            continue;
        };
        let Decision::Compact(split) = &full.decision else {
            continue;
        };
        planned += 1;
        prior += usize::from(split.prior_summary);
        reinsert += usize::from(split.reinsert.is_some());
        let mut released = full.clone();
        released.release_head();
        let (a, b) = (HeadInput::new(&full, now), HeadInput::new(&released, now));
        assert_eq!(
            a.latest_instruction.map(|m| m.raw.get()),
            b.latest_instruction.map(|m| m.raw.get()),
            "{id}: latest instruction"
        );
        assert_eq!(a.prior_summary, b.prior_summary, "{id}: earlier summary");
        assert_eq!(a.head_tokens, b.head_tokens, "{id}: head tokens");
        let rewrite = Rewrite::Summary(Summary {
            text: format!("the summary of {id}"),
            ..Default::default()
        });
        let (x, y) = (
            swap::build(&full, &rewrite).unwrap(),
            swap::build(&released, &rewrite).unwrap(),
        );
        assert_eq!(x.raw_messages, y.raw_messages, "{id}: new history");
        assert_eq!(x.tokens, y.tokens, "{id}: tokens after");
        // What was released is gone: the head holds less than before.
        let bytes = |p: &agent_db::plan::Plan| -> usize {
            p.loaded.messages.iter().map(|m| m.raw.get().len()).sum()
        };
        assert!(bytes(&released) < bytes(&full), "{id}: nothing released");
    }
    (planned, prior, reinsert)
}

#[test]
fn a_released_head_gives_the_same_prompt_inputs_and_the_same_new_history() {
    let env = Env::generated(40, 7, &[]);
    let (planned, _, reinsert1) = check_store(&env, 2000);
    assert!(planned >= 10, "only {planned} planned");
    // Compact everything once with a small tail, then check again: conversations now start
    // with agent-db's summary, and many put the latest instruction back after it.
    env.cmd()
        .args([
            "compact",
            "--all-over",
            "0",
            "--idle",
            "0",
            "--keep-tokens",
            "1500",
        ])
        .args(["--yes", "--quiet"])
        .assert()
        .success();
    let (planned, prior, reinsert2) = check_store(&env, 300);
    eprintln!("reinsert: {reinsert1} + {reinsert2}");
    assert!(
        reinsert1 + reinsert2 > 0,
        "no plan puts an instruction back"
    );
    assert!(
        planned >= 5 && prior >= 5,
        "second pass: {planned} planned, {prior} with an earlier summary"
    );
}
