//! Every word list the offline summarizer uses, in one place.
//!
//! The summarizer does not classify prose by cue words: it keeps every user turn, picks the
//! assistant's sentences by how distinctive their tokens are, and resolves withdrawals by the
//! entities two user statements share. Only two small, generic lists touch prose:
//! [`NEGATIONS`] (+ [`NEGATION_CONTRACTIONS`]), which give a clause its polarity, and
//! [`WITHDRAWAL_VERBS`] / [`WITHDRAWAL_WORDS`] / [`WITHDRAWAL_PHRASES`], which mark a clause that
//! takes something back (with [`CHANGE_WORDS`] / [`CHANGE_PHRASES`], a change of mind either
//! way). Both only matter once two statements are already tied by a shared
//! entity, and both are refinements: with these prose cue lists switched off (a hidden option the
//! paraphrase test uses for its ablation run) the withdrawals of the paraphrase corpus are still
//! all resolved by structure. The other lists describe tool formats (tool names, JSON keys, shell
//! programs, error markers), not phrasing.
//!
//! All entries are lowercase; matching code lowercases the text first (or, where the case is the
//! signal, checks the uppercase form of an entry explicitly). Nothing else in
//! `compact/extractive/` holds a list of words.

// ---------------------------------------------------------------------------------------------
// Prose: polarity and withdrawal
// ---------------------------------------------------------------------------------------------

/// Words that make a clause negative (whole words). Words ending in `n't` are negative too.
pub const NEGATIONS: &[&str] = &[
    "not", "no", "never", "nothing", "none", "nor", "neither", "without", "cannot", "nobody",
    "nowhere",
];

/// Negative contractions written without an apostrophe.
pub const NEGATION_CONTRACTIONS: &[&str] = &[
    "dont", "doesnt", "didnt", "wont", "cant", "shouldnt", "isnt", "arent", "wasnt", "mustnt",
    "wouldnt", "couldnt", "havent", "hasnt",
];

/// Verbs that take back what an earlier statement said, compared after a light stemming
/// (`scrapped`, `ignoring`, `drops` match their stem). Right after a negation they do the
/// opposite: "don't forget X" and "never skip X" insist on X.
pub const WITHDRAWAL_VERBS: &[&str] = &[
    "scrap",
    "scratch",
    "forget",
    "ignore",
    "disregard",
    "drop",
    "cancel",
    "undo",
    "revert",
    "withdraw",
    "retract",
    "abandon",
    "ditch",
    "nix",
    "skip",
    "reverse",
    "rollback",
];

/// Other words that mark a clause as taking something back, whatever precedes them ("not
/// anymore" still takes back).
pub const WITHDRAWAL_WORDS: &[&str] = &["anymore", "nevermind", "obsolete", "moot", "unnecessary"];

/// Multi-word forms of the same (whole-word phrase match).
pub const WITHDRAWAL_PHRASES: &[&str] = &[
    "no longer",
    "never mind",
    "any more",
    "not needed",
    "no need",
    "roll back",
    "back out",
];

/// Words that refer back to something said before: a take-back followed by an action of its own
/// ("no need to wait for me") is about that action unless the action's words refer back ("no
/// need to do that").
pub const REFERRING_WORDS: &[&str] = &["it", "that", "this", "those", "these", "them"];

/// Words that mark a change of mind without its direction: they replace or take back what was
/// said ("Y instead", "on second thought, no X"), or bring back what was taken back ("we need X
/// after all"); the clause's polarity and take-back words tell which.
pub const CHANGE_WORDS: &[&str] = &["instead", "rather"];

/// Multi-word forms of the same (whole-word phrase match).
pub const CHANGE_PHRASES: &[&str] = &[
    "after all",
    "changed my mind",
    "second thought",
    "change of plan",
];

/// Abbreviations after which a period does not end a sentence.
pub const ABBREVIATIONS: &[&str] = &[
    "e.g", "i.e", "etc", "vs", "cf", "approx", "mr", "dr", "no", "fig",
];

// ---------------------------------------------------------------------------------------------
// Tool calls: names, keys and programs
// ---------------------------------------------------------------------------------------------

/// Substrings of a tool name that make it a shell tool.
pub const SHELL_TOOL_PARTS: &[&str] = &[
    "bash",
    "shell",
    "terminal",
    "exec",
    "run_command",
    "command",
    "powershell",
];

/// Whole tool names that are shell tools.
pub const SHELL_TOOL_NAMES: &[&str] = &["sh", "cmd", "zsh", "run"];

/// Shell programs whose `-c` argument is the command (`["bash", "-lc", "…"]`).
pub const SHELL_PROGRAMS: &[&str] = &["bash", "sh", "zsh", "dash"];

/// Sub-commands of editor tools (`{"command": "str_replace", "path": …}`), which are not shell.
pub const EDITOR_SUBCOMMANDS: &[&str] = &[
    "view",
    "create",
    "str_replace",
    "insert",
    "undo_edit",
    "write",
    "read",
    "edit",
    "delete",
];

/// Editor sub-commands by the file action they mean.
pub const SUB_READ: &[&str] = &["view", "read"];
pub const SUB_CREATE: &[&str] = &["create"];
pub const SUB_WRITE: &[&str] = &["write"];
pub const SUB_EDIT: &[&str] = &["str_replace", "insert", "undo_edit", "edit"];
pub const SUB_DELETE: &[&str] = &["delete"];

/// Substrings of a tool name by the file action they mean (checked in this order).
pub const TOOL_CREATE_PARTS: &[&str] = &["create", "new_file", "add_file"];
pub const TOOL_WRITE_PARTS: &[&str] = &["write", "save"];
pub const TOOL_EDIT_PARTS: &[&str] = &[
    "edit", "replace", "patch", "modify", "update", "insert", "rename", "move",
];
pub const TOOL_DELETE_PARTS: &[&str] = &["delete", "remove", "unlink"];
pub const TOOL_READ_PARTS: &[&str] = &[
    "read",
    "view",
    "cat",
    "open",
    "show",
    "fetch_file",
    "get_file",
];
pub const TOOL_SEARCH_PARTS: &[&str] = &["grep", "search", "glob", "find", "list", "ls", "tree"];

/// JSON keys (compared lowercase) that hold one file path.
pub const PATH_KEYS: &[&str] = &[
    "path",
    "file_path",
    "filepath",
    "filename",
    "file",
    "target_file",
    "notebook_path",
    "source_path",
    "target_path",
    "dest_path",
    "destination",
    "old_path",
    "new_path",
];

/// JSON keys (compared lowercase) that hold a list of file paths.
pub const PATHS_KEYS: &[&str] = &["paths", "files", "file_paths", "filenames"];

/// JSON keys that hold a shell command.
pub const COMMAND_KEYS: &[&str] = &["command", "cmd"];

/// JSON keys that describe a call without a path or command.
pub const DESCRIBE_KEYS: &[&str] = &["pattern", "query", "url", "name", "description"];

/// `apply_patch` envelope lines (lowercase prefixes) and the file action each means.
pub const PATCH_CREATE: &[&str] = &["*** add file:"];
pub const PATCH_EDIT: &[&str] = &["*** update file:"];
pub const PATCH_DELETE: &[&str] = &["*** delete file:"];
pub const PATCH_WRITE: &[&str] = &["*** move to:"];
/// The line that opens an `apply_patch` envelope.
pub const PATCH_BEGIN: &[&str] = &["*** begin patch"];

/// Shell programs whose file arguments are read.
pub const READ_PROGRAMS: &[&str] = &["cat", "head", "tail", "less", "more", "nl", "wc", "bat"];
/// Shell programs whose file arguments are deleted / created.
pub const DELETE_PROGRAMS: &[&str] = &["rm"];
pub const CREATE_PROGRAMS: &[&str] = &["touch"];
/// The stream editor: its file arguments are edited with `-i`, read without.
pub const STREAM_EDITORS: &[&str] = &["sed"];
/// Shell programs that only print files or matches (their output is not an error report).
pub const PRINT_PROGRAMS: &[&str] = &[
    "cat", "head", "tail", "less", "more", "nl", "grep", "rg", "ag", "ack", "awk", "find", "ls",
    "tree", "bat", "jq", "wc", "diff", "fd",
];
/// `git` sub-commands that only print.
pub const GIT_PRINT_SUBCOMMANDS: &[&str] = &["diff", "show", "log", "blame", "grep", "status"];
/// The version-control program whose sub-commands are checked above.
pub const GIT_PROGRAMS: &[&str] = &["git"];

// ---------------------------------------------------------------------------------------------
// Tool results: error markers
// ---------------------------------------------------------------------------------------------

/// Markers followed by an exit code (`exit code 1`, `exited with status 2`).
pub const EXIT_MARKERS: &[&str] = &[
    "exited with status",
    "exited with code",
    "exit code",
    "exit status",
    "exitcode",
    "exit_code",
];

/// A marker that means a non-zero exit without a number.
pub const NONZERO_EXIT_MARKERS: &[&str] = &["returned non-zero exit status"];

/// What follows an exit marker when the code is not a number.
pub const NONZERO_WORDS: &[&str] = &["non-zero", "nonzero"];

/// `Error:` / `Exception:` after a name (`TypeError:`) or on its own.
pub const ERROR_COLON_MARKERS: &[&str] = &["error:", "exception:"];

/// Line contents that report a compiler or runtime error (score 5).
pub const STRONG_ERROR_CONTAINS: &[&str] = &["error[e", "error ts", ": error:", "panicked at"];
/// Line starts that report a compiler or runtime error (score 5).
pub const STRONG_ERROR_STARTS: &[&str] = &["error:", "error[", "panic: ", "fatal:", "fatal error"];

/// An error word that counts only in uppercase (`ERROR`, as a whole word).
pub const UPPERCASE_ERROR_WORDS: &[&str] = &["error"];
/// Other line contents and starts that report an error (score 3).
pub const ERROR_CONTAINS: &[&str] = &["npm err!"];
pub const ERROR_STARTS: &[&str] = &["failed to"];

/// Test-runner failure words that count only in uppercase (`FAILED`, `FAIL`).
pub const UPPERCASE_FAIL_WORDS: &[&str] = &["failed", "fail"];
/// Line starts and contents that report a failure (score 2).
pub const FAIL_STARTS: &[&str] = &["--- fail", "traceback (most recent call last)"];
pub const FAIL_CONTAINS: &[&str] = &[
    "command not found",
    "no such file or directory",
    "permission denied",
    "segmentation fault",
    "cannot find module",
];

/// Both occur in a Python traceback frame line (`File "app/x.py", line 3, in f`).
pub const FRAME_MARKERS: &[&str] = &["file \"", "\", line "];

/// Line prefixes after which a failed test's name follows (`--- FAIL: TestX`, `FAILED a::b`).
pub const FAILED_TEST_PREFIXES: &[&str] = &["--- fail:", "failed "];
/// `test a::b ... FAILED`: the runner's prefix before the name.
pub const TEST_LINE_PREFIXES: &[&str] = &["test "];
