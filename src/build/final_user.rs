//! The user a Dockerfile's final stage runs as, read from the Dockerfile before it is built
//! (`handoff --plan`, spec-note 0424), the way the engine will build it: the instructions as
//! Docker's parser splits them (the `parse-dockerfile` crate), the stage `build.target` names
//! (else the last one), `ARG` defaults overridden by the build arguments, variables expanded
//! with the engine's word rules (`$NAME`, `${NAME}`, `${NAME:-w}`, `${NAME-w}`, `${NAME:+w}`,
//! `${NAME+w}`, quotes, the escape character), `ENV` over `ARG`, and the `USER` a stage
//! inherits from the stage it is built `FROM`.
//!
//! What cannot be known without the build is said, never guessed: a `USER` that is a name
//! other than `root` (its uid is the built image's `/etc/passwd` entry), a variable the
//! Dockerfile does not define (it may come from the base image's `ENV`), a `FROM` with a
//! platform variable, word syntax beyond the forms above.

use indexmap::IndexMap;
use parse_dockerfile::Instruction;
use std::collections::HashMap;

/// What the final stage's user depends on.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum FinalUser {
    /// A `USER` instruction sets it: `spelling` as the engine will get it (variables expanded).
    User {
        /// The expanded `USER` argument (`1000`, `0:0`, `vscode`).
        spelling: String,
        /// The base image at the root of the stage chain (`None` for `scratch`) and the
        /// variables the expansion took from an `ARG` or found unset: an `ENV` of that image
        /// (or an `ONBUILD` of it) would override them.
        shadowed_by: Option<(String, Vec<String>)>,
    },
    /// No `USER` in the final stage or the stages it is built on: the base image's `USER`
    /// (`scratch`: root).
    Base {
        /// The base image reference as the build will pull it (variables expanded).
        image: String,
    },
    /// Not decidable before the build; the reason, one sentence.
    Undecided(String),
}

/// The user of the final stage (`target` when given) of Dockerfile `text`, with build
/// arguments `args` (`build.args` and `--build-arg`s). Never fails: an unreadable Dockerfile
/// is [`FinalUser::Undecided`] (the build reports its error).
pub fn final_user(text: &str, args: &IndexMap<String, String>, target: Option<&str>) -> FinalUser {
    let dockerfile = match parse_dockerfile::parse(text) {
        Ok(d) => d,
        Err(e) => return FinalUser::Undecided(format!("the Dockerfile could not be read ({e})")),
    };
    let escape = dockerfile
        .parser_directives
        .escape
        .as_ref()
        .map_or('\\', |d| d.value.value);
    // Global ARGs: in scope of the FROM lines only.
    let mut global = Vars::default();
    for arg in dockerfile.global_args() {
        if let Err(why) = global.declare_args(&arg.arguments.value, args, None, escape) {
            return FinalUser::Undecided(why);
        }
    }
    let mut stages: Vec<StageState> = Vec::new();
    for stage in dockerfile.stages() {
        let name = stage.from.as_.as_ref().map(|(_, n)| n.value.to_lowercase());
        let base = match expand(&stage.from.image.value, escape, &|n| {
            global.lookup_global(n)
        }) {
            Err(why) => Base::Unknown(format!("its `FROM` {why}")),
            Ok((_, read)) if read.iter().any(String::is_empty) => {
                Base::Unknown("its `FROM` reads a variable the build decides".to_string())
            }
            Ok((image, _)) => match stages
                .iter()
                .rposition(|s| s.name.as_deref() == Some(&image.to_lowercase()))
            {
                Some(parent) => Base::Stage(parent),
                None if image.eq_ignore_ascii_case("scratch") => Base::Scratch,
                None => Base::Image(image),
            },
        };
        let mut state = StageState {
            name,
            base,
            vars: Vars::default(),
            user: None,
        };
        for instruction in stage.instructions {
            let step = match instruction {
                Instruction::Arg(arg) => {
                    state
                        .vars
                        .declare_args(&arg.arguments.value, args, Some(&global), escape)
                }
                Instruction::Env(env) => {
                    let parents = &stages;
                    let base = &state.base;
                    let vars = &state.vars;
                    match env_pairs(&env.arguments.value, escape, &|n| {
                        lookup(vars, base, parents, n)
                    }) {
                        Ok(pairs) => {
                            state.vars.env.extend(pairs);
                            Ok(())
                        }
                        Err(why) => Err(why),
                    }
                }
                Instruction::User(user) => {
                    let (vars, base) = (&state.vars, &state.base);
                    let spelled = expand(user.arguments.value.trim(), escape, &|n| {
                        lookup(vars, base, &stages, n)
                    });
                    state.user = Some(match spelled {
                        Ok((_, read)) if read.iter().any(String::is_empty) => {
                            Err("its `USER` reads a variable the build decides".to_string())
                        }
                        Ok((spelling, read)) if !spelling.is_empty() => Ok((spelling, read)),
                        Ok(_) => Err("its `USER` is empty once expanded".to_string()),
                        Err(why) => Err(format!("its `USER` {why}")),
                    });
                    Ok(())
                }
                _ => Ok(()),
            };
            if let Err(why) = step {
                // a later USER may still decide; an undecidable variable table does not
                state.vars.broken.get_or_insert(why);
            }
        }
        stages.push(state);
    }
    let index = match target {
        None => stages.len() - 1,
        Some(t) => match stages
            .iter()
            .position(|s| s.name.as_deref() == Some(&t.to_lowercase()))
        {
            Some(i) => i,
            None => {
                return FinalUser::Undecided(format!(
                    "the Dockerfile has no stage `{t}` (`build.target`)"
                ));
            }
        },
    };
    resolve_stage(&stages, index)
}

/// The stage the chain of stage `index` starts from.
fn root_image(stages: &[StageState], mut index: usize) -> Option<String> {
    loop {
        match &stages[index].base {
            Base::Stage(parent) => index = *parent,
            Base::Image(image) => return Some(image.clone()),
            Base::Scratch | Base::Unknown(_) => return None,
        }
    }
}

fn resolve_stage(stages: &[StageState], index: usize) -> FinalUser {
    let stage = &stages[index];
    match &stage.user {
        Some(Err(why)) => FinalUser::Undecided(why.clone()),
        Some(Ok((spelling, read))) => {
            if let Some(why) = &stage.vars.broken
                && !read.is_empty()
            {
                return FinalUser::Undecided(why.clone());
            }
            if read.iter().any(|v| v.is_empty()) {
                return FinalUser::Undecided(
                    "its `USER` reads a variable the build decides".to_string(),
                );
            }
            let shadowed_by = root_image(stages, index).map(|image| (image, read.clone()));
            if let Some(Base::Unknown(why)) = chain_unknown(stages, index) {
                return FinalUser::Undecided(why);
            }
            FinalUser::User {
                spelling: spelling.clone(),
                shadowed_by,
            }
        }
        None => match &stage.base {
            Base::Stage(parent) => resolve_stage(stages, *parent),
            Base::Scratch => FinalUser::Base {
                image: "scratch".to_string(),
            },
            Base::Image(image) => FinalUser::Base {
                image: image.clone(),
            },
            Base::Unknown(why) => FinalUser::Undecided(why.clone()),
        },
    }
}

/// The unknown base at the root of stage `index`'s chain, if it is one.
fn chain_unknown(stages: &[StageState], mut index: usize) -> Option<Base> {
    loop {
        match &stages[index].base {
            Base::Stage(parent) => index = *parent,
            b @ Base::Unknown(_) => return Some(b.clone()),
            _ => return None,
        }
    }
}

#[derive(Debug, Clone)]
enum Base {
    Stage(usize),
    Scratch,
    Image(String),
    Unknown(String),
}

#[derive(Debug)]
struct StageState {
    name: Option<String>,
    base: Base,
    vars: Vars,
    /// The last `USER`: its expansion and the variables it read from an `ARG` or found unset
    /// (an empty name: one the build decides).
    user: Option<Result<(String, Vec<String>), String>>,
}

/// The value of a variable during expansion.
enum Value {
    /// Set by the Dockerfile's own `ENV` (nothing overrides it).
    Env(String),
    /// Set by an `ARG` (an `ENV` of the base image would override it), or unset (`None`).
    Arg(Option<String>),
    /// Decided by the build (a platform argument).
    Build,
}

#[derive(Debug, Default)]
struct Vars {
    env: HashMap<String, String>,
    /// Declared `ARG`s: `None` declared without a value.
    args: HashMap<String, Option<String>>,
    /// Declared `ARG`s the builder sets (platform arguments no build argument names).
    by_builder: std::collections::HashSet<String>,
    /// Why this stage's variables are not known (a declaration that could not be read).
    broken: Option<String>,
}

/// Arguments the builder sets itself (BuildKit's platform arguments).
fn set_by_builder(name: &str) -> bool {
    matches!(
        name,
        "TARGETPLATFORM"
            | "TARGETOS"
            | "TARGETARCH"
            | "TARGETVARIANT"
            | "BUILDPLATFORM"
            | "BUILDOS"
            | "BUILDARCH"
            | "BUILDVARIANT"
    )
}

impl Vars {
    fn lookup_global(&self, name: &str) -> Value {
        match self.args.get(name) {
            Some(v) => Value::Arg(v.clone()),
            None if set_by_builder(name) || self.by_builder.contains(name) => Value::Build,
            None => Value::Arg(None),
        }
    }

    /// `ARG a[=default] b[=default] …`: a build argument overrides the default; a stage `ARG`
    /// without one takes the global `ARG`'s value.
    fn declare_args(
        &mut self,
        text: &str,
        build_args: &IndexMap<String, String>,
        global: Option<&Vars>,
        escape: char,
    ) -> Result<(), String> {
        for word in split_words(text, escape)? {
            let (name, default) = match word.split_once('=') {
                Some((n, d)) => (n.to_string(), Some(d.to_string())),
                None => (word.clone(), None),
            };
            let value = if let Some(given) = build_args.get(&name) {
                Some(given.clone())
            } else if let Some(default) = default {
                let this: &Vars = self;
                let (v, read) = expand(&default, escape, &|n| match this.args.get(n) {
                    Some(v) => Value::Arg(v.clone()),
                    None => Value::Arg(None),
                })
                .map_err(|why| format!("`ARG {name}` {why}"))?;
                if read.iter().any(String::is_empty) {
                    return Err(format!("`ARG {name}` reads a variable the build decides"));
                }
                Some(v)
            } else if let Some(v) = global.and_then(|g| g.args.get(&name)) {
                v.clone()
            } else if set_by_builder(&name) {
                self.by_builder.insert(name);
                continue;
            } else {
                None
            };
            self.args.insert(name, value);
        }
        Ok(())
    }
}

/// A variable as stage `vars` (built on `base`, earlier stages `stages`) sees it: its own
/// `ENV`, then the `ENV` of the stages it is built on, then its `ARG`s.
fn lookup(vars: &Vars, base: &Base, stages: &[StageState], name: &str) -> Value {
    if let Some(v) = vars.env.get(name) {
        return Value::Env(v.clone());
    }
    let mut parent = match base {
        Base::Stage(p) => Some(*p),
        _ => None,
    };
    while let Some(p) = parent {
        if let Some(v) = stages[p].vars.env.get(name) {
            return Value::Env(v.clone());
        }
        if stages[p].vars.broken.is_some() {
            return Value::Build;
        }
        parent = match stages[p].base {
            Base::Stage(q) => Some(q),
            _ => None,
        };
    }
    match vars.args.get(name) {
        Some(v) => Value::Arg(v.clone()),
        None if vars.by_builder.contains(name) => Value::Build,
        None => Value::Arg(None),
    }
}

/// `ENV a=b c=d` or the legacy `ENV a value with spaces`.
fn env_pairs(
    text: &str,
    escape: char,
    vars: &dyn Fn(&str) -> Value,
) -> Result<Vec<(String, String)>, String> {
    let text = text.trim();
    let first = text.split_whitespace().next().unwrap_or_default();
    if !first.contains('=') {
        let rest = text[first.len()..].trim_start();
        let (value, _) =
            expand(rest, escape, vars).map_err(|why| format!("`ENV {first}` {why}"))?;
        return Ok(vec![(first.to_string(), value)]);
    }
    let mut pairs = Vec::new();
    for word in split_words(text, escape)? {
        let Some((name, raw)) = word.split_once('=') else {
            return Err(format!("`ENV {word}` has no value"));
        };
        let (value, _) = expand(raw, escape, vars).map_err(|why| format!("`ENV {name}` {why}"))?;
        pairs.push((name.to_string(), value));
    }
    Ok(pairs)
}

/// Splits `text` at whitespace outside quotes, keeping each word's quotes and escapes for
/// [`expand`].
fn split_words(text: &str, escape: char) -> Result<Vec<String>, String> {
    let mut words = Vec::new();
    let mut word = String::new();
    let mut quote: Option<char> = None;
    let mut chars = text.chars();
    while let Some(c) = chars.next() {
        match (quote, c) {
            (None, c) if c.is_whitespace() => {
                if !word.is_empty() {
                    words.push(std::mem::take(&mut word));
                }
                continue;
            }
            (None, '"' | '\'') => quote = Some(c),
            (Some(q), c) if c == q => quote = None,
            (Some('\''), _) => {}
            (_, c) if c == escape => {
                word.push(c);
                match chars.next() {
                    Some(next) => word.push(next),
                    None => return Err("ends with the escape character".to_string()),
                }
                continue;
            }
            _ => {}
        }
        word.push(c);
    }
    if quote.is_some() {
        return Err("has an unterminated quote".to_string());
    }
    if !word.is_empty() {
        words.push(word);
    }
    Ok(words)
}

/// Expands one word with the engine's rules (quotes removed, `escape` escapes, `$NAME`,
/// `${NAME}`, `${NAME:-w}`, `${NAME-w}`, `${NAME:+w}`, `${NAME+w}`). Returns the word and the
/// names read from an `ARG` or found unset (an empty name for one the build decides). Other
/// forms are an error naming them (the plan cannot decide them).
fn expand(
    word: &str,
    escape: char,
    vars: &dyn Fn(&str) -> Value,
) -> Result<(String, Vec<String>), String> {
    let mut out = String::new();
    let mut read = Vec::new();
    let chars: Vec<char> = word.chars().collect();
    let mut i = 0;
    let mut quote: Option<char> = None;
    while i < chars.len() {
        let c = chars[i];
        match (quote, c) {
            (None, '"' | '\'') => quote = Some(c),
            (Some(q), c) if c == q => quote = None,
            (Some('\''), c) => out.push(c),
            (_, c) if c == escape => {
                i += 1;
                match chars.get(i) {
                    // inside double quotes only `$`, `"` and the escape itself are escaped
                    Some(&n) if quote.is_none() || matches!(n, '$' | '"') || n == escape => {
                        out.push(n)
                    }
                    Some(&n) => {
                        out.push(c);
                        out.push(n);
                    }
                    None => return Err("ends with the escape character".to_string()),
                }
            }
            (_, '$') => {
                let (value, used, next) = variable(&chars, i + 1, escape, vars)?;
                out.push_str(&value);
                read.extend(used);
                i = next;
                continue;
            }
            (_, c) => out.push(c),
        }
        i += 1;
    }
    if quote.is_some() {
        return Err("has an unterminated quote".to_string());
    }
    Ok((out, read))
}

/// The `$…` reference starting at `chars[start]` (after the `$`): its value, the names it
/// read, and where the text goes on.
fn variable(
    chars: &[char],
    start: usize,
    escape: char,
    vars: &dyn Fn(&str) -> Value,
) -> Result<(String, Vec<String>, usize), String> {
    let is_name = |c: char| c.is_ascii_alphanumeric() || c == '_';
    let value_of = |name: &str, read: &mut Vec<String>| -> Option<String> {
        match vars(name) {
            Value::Env(v) => Some(v),
            Value::Arg(v) => {
                read.push(name.to_string());
                v
            }
            Value::Build => {
                read.push(String::new());
                None
            }
        }
    };
    let mut read = Vec::new();
    if chars.get(start) != Some(&'{') {
        let end = (start..chars.len())
            .find(|&j| !is_name(chars[j]))
            .unwrap_or(chars.len());
        if end == start {
            return Ok(("$".to_string(), read, start));
        }
        let name: String = chars[start..end].iter().collect();
        let value = value_of(&name, &mut read).unwrap_or_default();
        return Ok((value, read, end));
    }
    let close = (start + 1..chars.len())
        .find(|&j| chars[j] == '}')
        .ok_or_else(|| "has an unterminated `${`".to_string())?;
    let inner: String = chars[start + 1..close].iter().collect();
    if inner.contains("${") || inner.contains('{') {
        return Err(format!(
            "has a nested `${{{inner}}}` the plan does not expand"
        ));
    }
    let name_end = inner.find(|c: char| !is_name(c)).unwrap_or(inner.len());
    let (name, modifier) = inner.split_at(name_end);
    if name.is_empty() {
        return Err(format!(
            "has `${{{inner}}}`, which the plan does not expand"
        ));
    }
    let value = value_of(name, &mut read);
    let (set, non_empty) = (
        value.is_some(),
        value.as_deref().is_some_and(|v| !v.is_empty()),
    );
    let alternative = |w: &str, read: &mut Vec<String>| -> Result<String, String> {
        let (v, r) = expand(w, escape, vars)?;
        read.extend(r);
        Ok(v)
    };
    let result = if modifier.is_empty() {
        value.unwrap_or_default()
    } else if let Some(w) = modifier.strip_prefix(":-") {
        if non_empty {
            value.unwrap_or_default()
        } else {
            alternative(w, &mut read)?
        }
    } else if let Some(w) = modifier.strip_prefix(":+") {
        if non_empty {
            alternative(w, &mut read)?
        } else {
            String::new()
        }
    } else if let Some(w) = modifier.strip_prefix('-') {
        if set {
            value.unwrap_or_default()
        } else {
            alternative(w, &mut read)?
        }
    } else if let Some(w) = modifier.strip_prefix('+') {
        if set {
            alternative(w, &mut read)?
        } else {
            String::new()
        }
    } else {
        return Err(format!(
            "has `${{{inner}}}`, which the plan does not expand"
        ));
    };
    Ok((result, read, close + 1))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn user(text: &str) -> FinalUser {
        final_user(text, &IndexMap::new(), None)
    }

    fn spelled(text: &str, args: &[(&str, &str)], target: Option<&str>) -> String {
        let args = args
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
        match final_user(text, &args, target) {
            FinalUser::User { spelling, .. } => spelling,
            other => panic!("{text}: {other:?}"),
        }
    }

    #[test]
    fn the_last_user_of_the_final_stage_with_args_and_env() {
        assert_eq!(spelled("FROM a\nUSER 1000\n", &[], None), "1000");
        assert_eq!(
            spelled("FROM a\nUSER 0\nUSER 1000:1000\n", &[], None),
            "1000:1000"
        );
        assert_eq!(spelled("FROM a\nARG U=1000\nUSER $U\n", &[], None), "1000");
        assert_eq!(
            spelled("FROM a\nARG U=1000\nUSER ${U}\n", &[("U", "0")], None),
            "0"
        );
        assert_eq!(
            spelled("FROM a\nARG U=\"10 01\"\nUSER '$U'\n", &[], None),
            "$U"
        );
        assert_eq!(spelled("FROM a\nARG U\nUSER ${U:-7}\n", &[], None), "7");
        assert_eq!(spelled("FROM a\nARG U=5\nUSER ${U:+7}\n", &[], None), "7");
        assert_eq!(
            spelled("FROM a\nENV U=9\nARG U=5\nUSER $U\n", &[("U", "0")], None),
            "9"
        );
        assert_eq!(spelled("FROM a\nENV U 9\nUSER \"$U\"\n", &[], None), "9");
        // a stage ARG without a value takes the global one
        assert_eq!(spelled("ARG U=3\nFROM a\nARG U\nUSER $U\n", &[], None), "3");
        // a global ARG alone is not in the stage's scope
        assert_eq!(spelled("ARG U=3\nFROM a\nUSER x$U\n", &[], None), "x");
        // `build.target`, and the USER a stage inherits from the one it is built on
        let multi = "FROM a AS one\nUSER 0\nFROM one AS two\nFROM b AS three\nUSER 1000\n";
        assert_eq!(spelled(multi, &[], None), "1000");
        assert_eq!(spelled(multi, &[], Some("two")), "0");
        assert_eq!(spelled(multi, &[], Some("ONE")), "0");
        // ENV inherited from the stage built on
        assert_eq!(
            spelled(
                "FROM a AS b\nENV U=4\nFROM b\nARG U=1\nUSER $U\n",
                &[],
                None
            ),
            "4"
        );
        // the escape directive
        assert_eq!(spelled("# escape=`\nFROM a\nUSER `$U\n", &[], None), "$U");
    }

    #[test]
    fn base_images_and_what_cannot_be_decided() {
        assert_eq!(
            user("FROM scratch\n"),
            FinalUser::Base {
                image: "scratch".into()
            }
        );
        assert_eq!(
            user("ARG B=img:1\nFROM $B\nRUN true\n"),
            FinalUser::Base {
                image: "img:1".into()
            }
        );
        assert_eq!(
            user("FROM img AS x\nFROM x\n"),
            FinalUser::Base {
                image: "img".into()
            }
        );
        for (text, why) in [
            ("FROM a\nUSER ${U/x/y}\n", "does not expand"),
            ("FROM a\nUSER \"1000\n", "unterminated"),
            (
                "FROM --platform=$BUILDPLATFORM a\nARG TARGETARCH\nUSER $TARGETARCH\n",
                "build decides",
            ),
            ("FROM $TARGETARCH\n", "build decides"),
            ("RUN x\n", "could not be read"),
            ("FROM a AS x\n", "no stage `y`"),
        ] {
            let target = text.contains("AS x").then_some("y");
            match final_user(text, &IndexMap::new(), target) {
                FinalUser::Undecided(reason) => assert!(reason.contains(why), "{text}: {reason}"),
                other => panic!("{text}: {other:?}"),
            }
        }
    }

    #[test]
    fn variables_an_image_env_could_override_are_named() {
        let FinalUser::User { shadowed_by, .. } =
            user("FROM img\nARG U=1000\nENV V=2\nUSER $U$V$W\n")
        else {
            panic!()
        };
        assert_eq!(
            shadowed_by,
            Some(("img".into(), vec!["U".into(), "W".into()]))
        );
        let FinalUser::User { shadowed_by, .. } = user("FROM scratch\nUSER 5\n") else {
            panic!()
        };
        assert_eq!(shadowed_by, None);
    }
}
