//! The o200k_base vocabulary agent-db embeds is kept in the repository as data
//! (`src/tokens/o200k.tokens`: for each rank in order, one length byte and the token's bytes),
//! so building agent-db needs no tokenizer crate. This test holds that file to `bpe-openai`'s
//! vocabulary (tiktoken's ranks), token by token. To regenerate the file after a deliberate
//! vocabulary change: `AGENT_DB_WRITE_VOCAB=1 cargo test --test it tokens_vocab`.

use std::path::Path;

fn expected() -> Vec<u8> {
    let bpe = &bpe_openai::o200k_base().bpe;
    let mut out = Vec::new();
    for rank in 0..bpe.num_tokens() {
        let token = bpe.token_bytes(rank as u32);
        let len = u8::try_from(token.len()).expect("every o200k_base token is under 256 bytes");
        assert!(len > 0, "rank {rank} is empty");
        out.push(len);
        out.extend_from_slice(token);
    }
    out
}

#[test]
fn committed_vocabulary_is_o200k_base_token_for_token() {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("src/tokens/o200k.tokens");
    let want = expected();
    if std::env::var_os("AGENT_DB_WRITE_VOCAB").is_some() {
        std::fs::write(&path, &want).expect("write src/tokens/o200k.tokens");
    }
    let have = std::fs::read(&path).expect("src/tokens/o200k.tokens is in the repository");
    if have != want {
        // Name the first rank that differs.
        let (mut a, mut b, mut rank) = (0usize, 0usize, 0usize);
        while a < have.len() && b < want.len() {
            let (la, lb) = (have[a] as usize, want[b] as usize);
            let ta = have.get(a + 1..a + 1 + la);
            assert_eq!(ta, want.get(b + 1..b + 1 + lb), "token {rank} differs");
            a += 1 + la;
            b += 1 + lb;
            rank += 1;
        }
        panic!("vocabulary lengths differ after {rank} tokens");
    }
    assert!(want.len() > 1_000_000, "o200k_base has about 200k tokens");
}
