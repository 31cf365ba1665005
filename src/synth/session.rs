//! A provider-neutral coding-agent session: user turns, assistant steps with tool calls, and tool
//! results with kodelet's structured results. `render` turns it into each provider's JSON.

use chrono::{DateTime, Duration, FixedOffset};
use rand::seq::IndexedRandom;
use rand::Rng;
use std::fmt::Write;

use super::gojson::{self, Arr, Obj};
use super::words::{self, Lang, Topic};

/// How tool-call ids look.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum IdStyle {
    /// `toolu_01` + 22 base62 characters.
    Anthropic,
    /// `call_` + 24 base62 characters.
    OpenAi,
}

#[derive(Debug, Clone)]
pub struct Call {
    pub id: String,
    pub name: &'static str,
    /// Compact JSON object text of the arguments.
    pub args: String,
}

#[derive(Debug, Clone)]
pub struct Outcome {
    pub call_id: String,
    /// What the model saw.
    pub text: String,
    pub is_error: bool,
    /// Compact JSON of kodelet's StructuredToolResult up to (not including) its final
    /// `"timestamp":…}` member, which [`Outcome::structured`] appends, so the whole session can be
    /// shifted in time after it was generated.
    pub structured_head: String,
    pub at: DateTime<FixedOffset>,
}

impl Outcome {
    /// The complete StructuredToolResult JSON, with the timestamp moved by `shift`.
    pub fn structured(&self, shift: Duration, out: &mut String) {
        out.push_str(&self.structured_head);
        out.push_str("\"timestamp\":");
        gojson::string(out, &rfc3339_nano(&(self.at + shift)));
        out.push('}');
    }
}

#[derive(Debug, Clone)]
pub struct Image {
    pub png: Vec<u8>,
}

#[derive(Debug, Clone)]
pub enum Step {
    User {
        text: String,
        image: Option<Image>,
    },
    Assistant {
        /// (thinking text, signature)
        thinking: Option<(String, String)>,
        text: Option<String>,
        calls: Vec<Call>,
        /// Last assistant message of a turn (Responses `phase: final_answer`).
        final_answer: bool,
    },
    Results(Vec<Outcome>),
}

/// What the conversation should look like.
#[derive(Debug, Clone)]
pub struct Plan {
    pub shape: Shape,
    /// Number of user turns (>= 1 for `Normal`).
    pub user_turns: usize,
    /// Total tool steps (assistant messages with calls) over all turns.
    pub steps: usize,
    /// Keep adding steps until the messages hold about this many bytes.
    pub target_bytes: Option<usize>,
    /// Probability that a tool output is very long (tens of KB).
    pub long_prob: f64,
    pub think_prob: f64,
    pub image_prob: f64,
    pub error_prob: f64,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Shape {
    Empty,
    OneUser,
    UserAssistant,
    Normal,
}

pub struct Session {
    pub steps: Vec<Step>,
    /// The first user instruction as the model saw it.
    pub first_text: Option<String>,
    /// For slash-command sessions: what the user typed (`message_display` override).
    pub display: Option<(String, String)>,
    /// Files read, with the time of the read (legacy `file_last_access`).
    pub reads: Vec<(String, DateTime<FixedOffset>)>,
    pub end: DateTime<FixedOffset>,
    /// Number of model calls (assistant messages).
    pub model_calls: usize,
    /// Output tokens estimated over all assistant messages.
    pub output_chars: usize,
}

struct Gen<'a, R: Rng> {
    rng: &'a mut R,
    topic: &'a Topic,
    cwd: &'a str,
    style: IdStyle,
    clock: DateTime<FixedOffset>,
    bytes: usize,
    touched: Vec<String>,
    reads: Vec<(String, DateTime<FixedOffset>)>,
    model_calls: usize,
    output_chars: usize,
    /// The main argument of the last tool call (path, command, pattern), for narration.
    target: String,
}

pub fn generate<R: Rng>(
    rng: &mut R,
    topic: &Topic,
    cwd: &str,
    style: IdStyle,
    start: DateTime<FixedOffset>,
    plan: &Plan,
) -> Session {
    let mut g = Gen {
        rng,
        topic,
        cwd,
        style,
        clock: start,
        bytes: 0,
        touched: Vec::new(),
        reads: Vec::new(),
        model_calls: 0,
        output_chars: 0,
        target: String::new(),
    };
    let mut steps = Vec::new();
    let mut display = None;
    if plan.shape == Shape::Empty {
        return g.finish(steps, None, None);
    }
    // First instruction (sometimes an expanded slash command shown as what the user typed).
    let text = if g.rng.random_bool(0.06) {
        let cmd = *["review", "fix-tests", "commit", "explain"]
            .choose(g.rng)
            .unwrap();
        let target = g.topic.file(g.rng).to_string();
        let typed = format!("/{cmd} {target}");
        let expanded = format!(
            "You are running the `{cmd}` recipe.\n\nTarget: {target}\n\n{}\n\nFollow the repository conventions, keep changes minimal, and run `{}` before finishing.",
            words::instruction(g.rng, g.topic),
            words::test_cmd(g.topic)
        );
        display = Some((expanded.clone(), typed));
        expanded
    } else {
        words::instruction(g.rng, g.topic)
    };
    let first_text = Some(text.clone());
    let image = g.maybe_image(plan.image_prob);
    g.bytes += gojson::escaped_len(&text);
    steps.push(Step::User { text, image });
    if plan.shape == Shape::OneUser {
        return g.finish(steps, first_text, display);
    }
    g.tick(3, 40);
    if plan.shape == Shape::UserAssistant {
        let thinking = g.maybe_thinking(plan.think_prob);
        let t = format!(
            "{}\n\n{}",
            words::plan(g.rng, g.topic),
            words::conclusion(g.rng, g.topic, &[])
        );
        g.assistant(&mut steps, thinking, Some(t), Vec::new(), true);
        return g.finish(steps, first_text, display);
    }

    let turns = plan.user_turns.max(1);
    // Spread the steps over the turns, the first turn doing most of the work.
    let mut per_turn = vec![0usize; turns];
    for i in 0..plan.steps {
        let t = if g.rng.random_bool(0.5) { 0 } else { i % turns };
        per_turn[t] += 1;
    }
    let mut turn = 0;
    loop {
        let mut n = per_turn[turn];
        let mut done = 0;
        loop {
            let more_bytes = plan
                .target_bytes
                .map(|t| turn + 1 == turns && g.bytes < t)
                .unwrap_or(false);
            if done >= n && !more_bytes {
                break;
            }
            if done >= n {
                n += 1;
            }
            g.tool_step(&mut steps, plan);
            done += 1;
        }
        // End of the turn: a conclusion.
        let thinking = g.maybe_thinking(plan.think_prob * 0.5);
        let touched = g.touched.clone();
        let text = words::conclusion(g.rng, g.topic, &touched);
        g.assistant(&mut steps, thinking, Some(text), Vec::new(), true);
        turn += 1;
        if turn >= turns {
            break;
        }
        // The user comes back after a pause.
        let gap = if g.rng.random_bool(0.7) {
            g.rng.random_range(20..900)
        } else {
            g.rng.random_range(900..20_000)
        };
        g.clock += Duration::seconds(gap);
        let text = words::followup(g.rng, g.topic);
        let image = g.maybe_image(plan.image_prob);
        g.bytes += gojson::escaped_len(&text);
        steps.push(Step::User { text, image });
        g.tick(3, 30);
    }
    g.finish(steps, first_text, display)
}

impl<R: Rng> Gen<'_, R> {
    fn finish(
        self,
        steps: Vec<Step>,
        first_text: Option<String>,
        display: Option<(String, String)>,
    ) -> Session {
        Session {
            steps,
            first_text,
            display,
            reads: self.reads,
            end: self.clock,
            model_calls: self.model_calls,
            output_chars: self.output_chars,
        }
    }

    fn tick(&mut self, lo: i64, hi: i64) {
        let ms = self.rng.random_range(lo * 1000..hi * 1000);
        self.clock +=
            Duration::milliseconds(ms) + Duration::nanoseconds(self.rng.random_range(0..1_000_000));
    }

    fn maybe_image(&mut self, p: f64) -> Option<Image> {
        if !self.rng.random_bool(p) {
            return None;
        }
        let (w, h) = if self.rng.random_bool(0.8) {
            (self.rng.random_range(16..96), self.rng.random_range(12..72))
        } else {
            (
                self.rng.random_range(96..200),
                self.rng.random_range(72..150),
            )
        };
        let png = super::png::make_png(self.rng, w, h);
        self.bytes += png.len() * 4 / 3;
        Some(Image { png })
    }

    fn maybe_thinking(&mut self, p: f64) -> Option<(String, String)> {
        if !self.rng.random_bool(p) {
            return None;
        }
        let t = words::thinking(self.rng, self.topic);
        let sig_len = self.rng.random_range(120..600);
        let sig = words::opaque(self.rng, sig_len);
        Some((t, sig))
    }

    fn assistant(
        &mut self,
        steps: &mut Vec<Step>,
        thinking: Option<(String, String)>,
        text: Option<String>,
        calls: Vec<Call>,
        final_answer: bool,
    ) {
        let mut chars = 0;
        if let Some((t, s)) = &thinking {
            chars += t.len();
            self.bytes += gojson::escaped_len(t) + s.len() + 50;
        }
        if let Some(t) = &text {
            chars += t.len();
            self.bytes += gojson::escaped_len(t) + 30;
        }
        for c in &calls {
            chars += c.args.len();
            self.bytes += gojson::escaped_len(&c.args) + 80;
        }
        self.model_calls += 1;
        self.output_chars += chars;
        steps.push(Step::Assistant {
            thinking,
            text,
            calls,
            final_answer,
        });
    }

    fn call_id(&mut self) -> String {
        match self.style {
            IdStyle::Anthropic => format!("toolu_01{}", words::alnum(self.rng, 22)),
            IdStyle::OpenAi => format!("call_{}", words::alnum(self.rng, 24)),
        }
    }

    fn abs(&self, rel: &str) -> String {
        format!("{}/{}", self.cwd, rel)
    }

    /// One assistant message with 1-3 tool calls, then their results.
    fn tool_step(&mut self, steps: &mut Vec<Step>, plan: &Plan) {
        let thinking = self.maybe_thinking(plan.think_prob);
        let n = match self.rng.random_range(0..10) {
            0..=6 => 1,
            7 | 8 => 2,
            _ => 3,
        };
        let mut calls = Vec::with_capacity(n);
        let mut outcomes = Vec::with_capacity(n);
        self.tick(2, 45);
        let mut first_target = None;
        for _ in 0..n {
            let long = self.rng.random_bool(plan.long_prob);
            let fail = self.rng.random_bool(plan.error_prob);
            let (c, o) = self.tool(long, fail);
            if first_target.is_none() {
                first_target = Some((c.name, std::mem::take(&mut self.target)));
            }
            self.bytes += gojson::escaped_len(&o.text) + 100;
            calls.push(c);
            outcomes.push(o);
        }
        // What the assistant says before the calls matches the first call.
        let text = match first_target {
            Some((tool, target)) if self.rng.random_bool(0.55) => {
                Some(words::narrate(self.rng, self.topic, tool, &target))
            }
            _ if self.rng.random_bool(0.1) => Some(words::plan(self.rng, self.topic)),
            _ => None,
        };
        self.assistant(steps, thinking, text, calls, false);
        steps.push(Step::Results(outcomes));
    }

    fn structured(
        &self,
        tool: &str,
        success: bool,
        error: Option<&str>,
        metadata: Option<(&str, String)>,
    ) -> String {
        let mut s = String::with_capacity(256 + metadata.as_ref().map_or(0, |m| m.1.len()));
        let mut o = Obj::start(&mut s);
        o.str("toolName", tool).bool("success", success);
        if let Some(e) = error {
            o.str("error", e);
        }
        if let Some((kind, meta)) = &metadata {
            o.str("metadataType", kind).raw("metadata", meta);
        }
        o.end();
        // Drop the closing brace: the timestamp member is appended at render time.
        s.pop();
        s.push(',');
        s
    }

    fn tool(&mut self, long: bool, fail: bool) -> (Call, Outcome) {
        let id = self.call_id();
        let which = match self.rng.random_range(0..100) {
            0..=29 => "file_read",
            30..=59 => "bash",
            60..=71 => "grep_tool",
            72..=77 => "glob_tool",
            78..=94 => "file_edit",
            _ => "file_write",
        };
        // Tools take time.
        self.clock += Duration::milliseconds(self.rng.random_range(5..4000));
        let (args, text, is_error, structured) = match which {
            "file_read" => self.file_read(long, fail),
            "bash" => self.bash(long, fail),
            "grep_tool" => self.grep(long),
            "glob_tool" => self.glob(long),
            "file_edit" => self.file_edit(fail),
            _ => self.file_write(long),
        };
        (
            Call {
                id: id.clone(),
                name: which,
                args,
            },
            Outcome {
                call_id: id,
                text,
                is_error,
                structured_head: structured,
                at: self.clock,
            },
        )
    }

    fn file_read(&mut self, long: bool, fail: bool) -> (String, String, bool, String) {
        let rel = self.topic.file(self.rng).to_string();
        let path = self.abs(&rel);
        self.target = rel.clone();
        let offset_given = self.rng.random_bool(0.25);
        let offset = if offset_given {
            self.rng.random_range(1..400)
        } else {
            1
        };
        let mut args = String::new();
        {
            let mut o = Obj::start(&mut args);
            o.str("file_path", &path);
            if offset_given {
                o.int("offset", offset).int("line_limit", 200);
            }
            o.end();
        }
        let line_limit = if offset_given { 200 } else { 2000 };
        if fail {
            let err = format!("Failed to open file: open {path}: no such file or directory");
            let meta = {
                let mut m = String::new();
                let mut o = Obj::start(&mut m);
                o.str("filePath", &path)
                    .int("offset", 0)
                    .int("lineLimit", line_limit);
                o.raw("lines", "null")
                    .str("language", self.topic.lang.name())
                    .bool("truncated", false);
                o.end();
                m
            };
            let st = self.structured("file_read", false, Some(&err), Some(("file_read", meta)));
            return (args, format!("Error: {err}"), true, st);
        }
        self.reads.push((path.clone(), self.clock));
        let n = if long {
            self.rng.random_range(250..900)
        } else if offset_given {
            self.rng.random_range(20..200)
        } else {
            self.rng.random_range(15..220)
        };
        let lines = if offset_given {
            words::fragment(self.rng, self.topic, n)
        } else {
            let mut lines = Vec::with_capacity(n);
            words::code(self.rng, self.topic, &rel, n, &mut lines);
            lines
        };
        let last = offset as usize + lines.len() - 1;
        let width = last.to_string().len();
        let mut text = String::with_capacity(lines.iter().map(|l| l.len() + width + 3).sum());
        for (i, l) in lines.iter().enumerate() {
            let _ = writeln!(text, "{:>width$}: {}", offset as usize + i, l);
        }
        let remaining = if offset_given && self.rng.random_bool(0.5) {
            let r = self.rng.random_range(10..900);
            let _ = writeln!(
                text,
                "\n... [{r} lines remaining - use offset={} to continue reading]",
                offset + 200
            );
            r
        } else {
            0
        };
        let meta = {
            let mut m = String::with_capacity(text.len() + 200);
            let mut o = Obj::start(&mut m);
            o.str("filePath", &path)
                .int("offset", offset)
                .int("lineLimit", line_limit);
            {
                let mut a = Arr::start(o.field("lines"));
                for l in &lines {
                    a.str(l);
                }
                a.end();
            }
            o.str("language", self.topic.lang.name())
                .bool("truncated", remaining > 0);
            if remaining > 0 {
                o.int("remainingLines", remaining);
            }
            o.end();
            m
        };
        let st = self.structured("file_read", true, None, Some(("file_read", meta)));
        (args, text, false, st)
    }

    fn bash(&mut self, long: bool, fail: bool) -> (String, String, bool, String) {
        let t = self.topic;
        let test = words::test_cmd(t);
        let (command, description, mut output, mut code): (String, String, String, i64) =
            match self.rng.random_range(0..9) {
                0 | 1 => {
                    let lines = if long {
                        self.rng.random_range(200..700)
                    } else {
                        self.rng.random_range(3..40)
                    };
                    let failures = if fail { self.rng.random_range(1..4) } else { 0 };
                    let out = words::test_log(self.rng, t, lines, failures);
                    (
                        test.clone(),
                        "Run the test suite".into(),
                        out,
                        if fail {
                            if t.lang == Lang::Rust {
                                101
                            } else {
                                1
                            }
                        } else {
                            0
                        },
                    )
                }
                2 => {
                    let (cmd, desc) = match t.lang {
                        Lang::Rust => ("cargo build 2>&1 | tail -50", "Build the crate"),
                        Lang::Go => ("go build ./... && go vet ./...", "Build and vet"),
                        Lang::TypeScript => ("npx tsc --noEmit", "Type-check the project"),
                        Lang::Python => ("mypy . --no-color-output", "Type-check with mypy"),
                    };
                    if fail || self.rng.random_bool(0.5) {
                        let n = if long {
                            self.rng.random_range(30..120)
                        } else {
                            self.rng.random_range(1..5)
                        };
                        let mut out = String::new();
                        for _ in 0..n {
                            out.push_str(&words::compiler_error(self.rng, t));
                            out.push('\n');
                        }
                        if t.lang == Lang::Rust {
                            let _ = writeln!(
                                out,
                                "error: could not compile `{}` (lib) due to {n} previous errors",
                                t.project
                            );
                        }
                        (
                            cmd.into(),
                            desc.into(),
                            out,
                            if t.lang == Lang::Rust { 101 } else { 2 },
                        )
                    } else {
                        let n = if long {
                            self.rng.random_range(150..500)
                        } else {
                            self.rng.random_range(2..30)
                        };
                        (cmd.into(), desc.into(), words::build_log(self.rng, t, n), 0)
                    }
                }
                3 => (
                    "git status".into(),
                    "Show working tree status".into(),
                    words::git_status(self.rng, t),
                    0,
                ),
                4 => {
                    let f = t.file(self.rng).to_string();
                    let n = self.rng.random_range(2..8);
                    let old = words::fragment(self.rng, t, n);
                    let new = words::modify(self.rng, t, &old);
                    (
                        format!("git diff -- {f}"),
                        "Show the diff".into(),
                        words::unified_diff(&f, self.rng.random_range(1..300), &old, &new),
                        0,
                    )
                }
                5 => {
                    let pat = words::fn_name(self.rng, t.lang);
                    let mut out = String::new();
                    for _ in 0..self.rng.random_range(0..12) {
                        let file = t.file(self.rng).to_string();
                        let line = self.rng.random_range(1..900);
                        let content = words::call_line(self.rng, t.lang, &pat);
                        let _ = writeln!(out, "{file}:{line}:{content}");
                    }
                    let c = if out.is_empty() { 1 } else { 0 };
                    (
                        format!("rg -n \"{pat}\" ."),
                        format!("Find uses of {pat}"),
                        out,
                        c,
                    )
                }
                6 => {
                    let n = if long {
                        self.rng.random_range(250..900)
                    } else {
                        self.rng.random_range(10..80)
                    };
                    let out = words::app_log(self.rng, t, n);
                    (
                        format!("tail -n {n} logs/{}.log", t.module),
                        "Inspect service logs".into(),
                        out,
                        0,
                    )
                }
                7 => {
                    let mut out = format!("total {}\n", self.rng.random_range(8..200));
                    for _ in 0..self.rng.random_range(4..30) {
                        let _ = writeln!(
                            out,
                            "-rw-r--r--  1 dev dev {:>7} Oct {:>2} {:02}:{:02} {}",
                            self.rng.random_range(100..90000),
                            self.rng.random_range(1..31),
                            self.rng.random_range(0..24),
                            self.rng.random_range(0..60),
                            words::file_path(self.rng, t.lang, &t.project)
                                .rsplit('/')
                                .next()
                                .unwrap_or("x")
                        );
                    }
                    ("ls -la".into(), "List files".into(), out, 0)
                }
                _ => {
                    let (cmd, desc) = match t.lang {
                        Lang::Rust => ("cargo clippy --all-targets -- -D warnings", "Run clippy"),
                        Lang::Go => ("golangci-lint run ./...", "Run the linters"),
                        Lang::TypeScript => ("npm run lint", "Run eslint"),
                        Lang::Python => ("ruff check .", "Run ruff"),
                    };
                    if fail {
                        let mut out = String::new();
                        for _ in 0..self.rng.random_range(1..8) {
                            out.push_str(&words::compiler_error(self.rng, t));
                            out.push('\n');
                        }
                        (cmd.into(), desc.into(), out, 1)
                    } else {
                        (cmd.into(), desc.into(), String::new(), 0)
                    }
                }
            };
        if fail && code == 0 {
            // The command itself failed.
            let prog = command.split_whitespace().next().unwrap_or("x");
            (output, code) = match prog {
                "git" => (
                    "fatal: ambiguous argument 'origin/main': unknown revision or path not in the working tree.\n".to_string(),
                    128,
                ),
                "ls" => ("ls: cannot access 'build': No such file or directory\n".to_string(), 2),
                "tail" => (
                    format!("tail: cannot open 'logs/{}.log' for reading: No such file or directory\n", t.module),
                    1,
                ),
                _ => (format!("bash: line 1: {prog}: command not found\n"), 127),
            };
        }
        self.target = command.clone();
        let timeout = *[30i64, 60, 120, 300, 600].choose(self.rng).unwrap();
        let mut args = String::new();
        {
            let mut o = Obj::start(&mut args);
            o.str("description", &description)
                .str("command", &command)
                .int("timeout", timeout);
            o.end();
        }
        let exec_ns = self.rng.random_range(5_000_000i64..90_000_000_000);
        self.clock += Duration::nanoseconds(exec_ns);
        let is_error = code != 0;
        let text = if is_error {
            format!("Error: Command exited with status {code}\n{output}")
        } else if output.is_empty() {
            "Command executed successfully with no output".to_string()
        } else {
            output.clone()
        };
        let meta = {
            let mut m = String::with_capacity(output.len() + 200);
            let mut o = Obj::start(&mut m);
            o.str("command", &command)
                .int("exitCode", code)
                .str("output", &output)
                .int("executionTime", exec_ns)
                .str("workingDir", self.cwd);
            o.end();
            m
        };
        let err = is_error.then(|| format!("Command exited with status {code}"));
        let st = self.structured("bash", !is_error, err.as_deref(), Some(("bash", meta)));
        (args, text, is_error, st)
    }

    fn grep(&mut self, long: bool) -> (String, String, bool, String) {
        let t = self.topic;
        let pattern = if self.rng.random_bool(0.5) {
            t.func(self.rng).to_string()
        } else {
            t.ty(self.rng).to_string()
        };
        let include = match t.lang {
            Lang::Rust => "*.rs",
            Lang::Go => "*.go",
            Lang::TypeScript => "*.{ts,tsx}",
            Lang::Python => "*.py",
        };
        self.target = pattern.clone();
        let mut args = String::new();
        {
            let mut o = Obj::start(&mut args);
            o.str("pattern", &pattern)
                .str("path", self.cwd)
                .str("include", include);
            o.end();
        }
        let nfiles = if long {
            self.rng.random_range(15..50)
        } else {
            self.rng.random_range(0..8)
        };
        let mut text = String::new();
        let mut meta = String::new();
        let mut o = Obj::start(&mut meta);
        o.str("pattern", &pattern)
            .str("path", self.cwd)
            .str("include", include);
        {
            let mut results = Arr::start(o.field("results"));
            for _ in 0..nfiles {
                let rel = words::file_path(self.rng, t.lang, &t.project);
                let path = format!("{}/{}", self.cwd, rel);
                let _ = writeln!(text, "\nPattern found in file {path}:\n");
                let mut r = Obj::start(results.item());
                r.str("filePath", &path).str("language", t.lang.name());
                {
                    let mut matches = Arr::start(r.field("matches"));
                    let nm = if long {
                        self.rng.random_range(2..12)
                    } else {
                        self.rng.random_range(1..5)
                    };
                    for _ in 0..nm {
                        let line = self.rng.random_range(1..1500);
                        let content = words::call_line(self.rng, t.lang, &pattern);
                        let start = content.find(&pattern).unwrap_or(0) as i64;
                        let _ = writeln!(text, "{line}:{content}");
                        let mut m = Obj::start(matches.item());
                        m.int("lineNumber", line)
                            .str("content", &content)
                            .int("matchStart", start)
                            .int("matchEnd", start + pattern.len() as i64);
                        m.end();
                    }
                    matches.end();
                }
                r.end();
            }
            results.end();
        }
        o.bool("truncated", false);
        o.end();
        if nfiles == 0 {
            text = format!("No matches found for pattern '{pattern}'");
        } else {
            text = format!("Search results for pattern '{pattern}':\n{text}");
        }
        let st = self.structured("grep_tool", true, None, Some(("grep_tool", meta)));
        (args, text, false, st)
    }

    fn glob(&mut self, long: bool) -> (String, String, bool, String) {
        let t = self.topic;
        let pattern = match t.lang {
            Lang::Rust => "**/*.rs",
            Lang::Go => "**/*.go",
            Lang::TypeScript => "src/**/*.tsx",
            Lang::Python => "**/test_*.py",
        };
        self.target = pattern.to_string();
        let mut args = String::new();
        {
            let mut o = Obj::start(&mut args);
            o.str("pattern", pattern).str("path", self.cwd);
            o.end();
        }
        let n = if long {
            self.rng.random_range(150..600)
        } else {
            self.rng.random_range(1..40)
        };
        let mut text = String::new();
        let mut meta = String::new();
        let mut o = Obj::start(&mut meta);
        o.str("pattern", pattern).str("path", self.cwd);
        {
            let mut files = Arr::start(o.field("files"));
            for _ in 0..n {
                let path = format!(
                    "{}/{}",
                    self.cwd,
                    words::file_path(self.rng, t.lang, &t.project)
                );
                let _ = writeln!(text, "{path}");
                let mod_time = self.clock - Duration::seconds(self.rng.random_range(60..5_000_000));
                let mut f = Obj::start(files.item());
                f.str("path", &path)
                    .int("size", self.rng.random_range(80..60_000))
                    .str("modTime", &rfc3339_nano(&mod_time))
                    .str("type", "file")
                    .str("language", t.lang.name());
                f.end();
            }
            files.end();
        }
        o.bool("truncated", false);
        o.end();
        let st = self.structured("glob_tool", true, None, Some(("glob_tool", meta)));
        (args, text, false, st)
    }

    fn file_edit(&mut self, fail: bool) -> (String, String, bool, String) {
        let t = self.topic;
        let rel = t.file(self.rng).to_string();
        let path = self.abs(&rel);
        self.target = rel.clone();
        let n = self.rng.random_range(1..10);
        let old = words::fragment(self.rng, t, n);
        let new = words::modify(self.rng, t, &old);
        let old_text = old.join("\n");
        let new_text = new.join("\n");
        let replace_all = self.rng.random_bool(0.1);
        let mut args = String::new();
        {
            let mut o = Obj::start(&mut args);
            o.str("file_path", &path)
                .str("old_text", &old_text)
                .str("new_text", &new_text);
            if replace_all {
                o.bool("replace_all", true);
            }
            o.end();
        }
        if fail {
            let err = format!("old_text not found in the file {path}; make sure the text matches exactly, including whitespace");
            let st = self.structured("file_edit", false, Some(&err), None);
            return (args, format!("Error: {err}"), true, st);
        }
        if !self.touched.contains(&rel) {
            self.touched.push(rel.clone());
        }
        let start = self.rng.random_range(1..600);
        let diff = words::unified_diff(&rel, start, &old, &new);
        let meta = {
            let mut m = String::new();
            let mut o = Obj::start(&mut m);
            o.str("filePath", &path);
            {
                let mut a = Arr::start(o.field("edits"));
                let mut e = Obj::start(a.item());
                e.int("startLine", start as i64)
                    .int("endLine", (start + old.len().saturating_sub(1)) as i64)
                    .str("oldContent", &old_text)
                    .str("newContent", &new_text);
                e.end();
                a.end();
            }
            o.str("language", t.lang.name());
            if replace_all {
                o.bool("replaceAll", true)
                    .int("replacedCount", self.rng.random_range(1..5));
            }
            o.str("unifiedDiff", &diff);
            o.end();
            m
        };
        let text = format!("File {path} has been edited successfully\n\n{diff}");
        let st = self.structured("file_edit", true, None, Some(("file_edit", meta)));
        (args, text, false, st)
    }

    fn file_write(&mut self, long: bool) -> (String, String, bool, String) {
        let t = self.topic;
        let rel = words::file_path(self.rng, t.lang, &t.project);
        let path = self.abs(&rel);
        let n = if long {
            self.rng.random_range(200..600)
        } else {
            self.rng.random_range(10..120)
        };
        self.target = rel.clone();
        let mut lines = Vec::new();
        words::code(self.rng, t, &rel, n, &mut lines);
        let mut content = lines.join("\n");
        content.push('\n');
        let mut args = String::new();
        {
            let mut o = Obj::start(&mut args);
            o.str("file_path", &path).str("text", &content);
            o.end();
        }
        if !self.touched.contains(&rel) {
            self.touched.push(rel.clone());
        }
        let meta = {
            let mut m = String::with_capacity(content.len() + 128);
            let mut o = Obj::start(&mut m);
            o.str("filePath", &path)
                .str("content", &content)
                .int("size", content.len() as i64)
                .str("language", t.lang.name());
            o.end();
            m
        };
        let text = format!(
            "File {path} has been written successfully ({} bytes)",
            content.len()
        );
        let st = self.structured("file_write", true, None, Some(("file_write", meta)));
        (args, text, false, st)
    }
}

/// RFC 3339 with up to nanosecond precision (trailing zeros trimmed) and `Z` for UTC, as Go's
/// `time.Time.MarshalJSON` writes it.
pub fn rfc3339_nano(t: &DateTime<FixedOffset>) -> String {
    let mut s = t.format("%Y-%m-%dT%H:%M:%S").to_string();
    let nanos = t.timestamp_subsec_nanos();
    if nanos != 0 {
        let f = format!("{nanos:09}");
        s.push('.');
        s.push_str(f.trim_end_matches('0'));
    }
    if t.offset().local_minus_utc() == 0 {
        s.push('Z');
    } else {
        s.push_str(&t.format("%:z").to_string());
    }
    s
}
