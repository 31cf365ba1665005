//! placeholder
use super::HeadInput;
pub fn summarize(_i: &HeadInput<'_>) -> String {
    String::new()
}
