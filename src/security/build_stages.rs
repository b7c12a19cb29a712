//! The stages of a Dockerfile a build reaches, and the images it pulls for them (attack K12,
//! spec-note 0400): the base of each reached stage (`FROM`) and every image a reached stage
//! copies or mounts from (`COPY --from=<image>`, `RUN --mount=…,from=<image>`). Which stages
//! are reached depends on the builder ([`Reach`]): the engine's classic builder (the one
//! devcontainer.json's build uses) builds every stage up to the target, in order; BuildKit
//! (Compose's builds) only the stages the target needs. Nothing is pulled for a stage the
//! build does not reach, so neither the `ONBUILD` check nor the registry judgement looks at
//! one. Pure.

use std::collections::BTreeMap;

/// Which stages a builder builds.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Reach {
    /// The classic builder: every stage up to and including the target (the last stage when
    /// none is named), whether the target needs it or not.
    UpToTarget,
    /// BuildKit: the target and, transitively, the stages its `FROM`, `COPY --from` and
    /// `RUN --mount=from=` name.
    Needed,
}

/// One stage of a Dockerfile.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
struct Stage {
    /// What `FROM` names, build arguments expanded.
    base: String,
    /// The `AS` name, lowercased.
    name: Option<String>,
    /// What its `COPY --from=`/`ADD --from=` and `RUN --mount=…,from=` name (and the same
    /// behind `ONBUILD`), expanded.
    from: Vec<String>,
}

/// The stages of `text` in each reading a builder may give it (one per escape character,
/// [`super::dockerfile::escape_chars`]; attack N4), with the build's `args` (over the `ARG`
/// defaults before the first `FROM`) expanded in what each stage names.
fn readings(text: &str, args: &BTreeMap<String, String>) -> Vec<Vec<Stage>> {
    // Read as the builder reads it: a leading BOM dropped before the directives (attack M3).
    let (text, escapes) = super::dockerfile::read(text);
    escapes
        .into_iter()
        .map(|escape| stages(text, escape, args))
        .collect()
}

/// The stages of `text` read with `escape` ([`readings`]).
fn stages(text: &str, escape: char, args: &BTreeMap<String, String>) -> Vec<Stage> {
    let mut defaults = args.clone();
    let mut stages: Vec<Stage> = Vec::new();
    for instruction in super::dockerfile::dockerfile_instructions(text, escape) {
        let mut words = super::dockerfile::Words::new(&instruction, escape);
        let Some(mut keyword) = words.next().map(|k| k.to_ascii_lowercase()) else {
            continue;
        };
        // `ONBUILD COPY --from=<image>` pulls its image in the build `FROM` this stage's
        // result (devcell's own uid and Features layers): the stage names it (attack 23, N16)
        if keyword == "onbuild" {
            keyword = words.next().unwrap_or_default().to_ascii_lowercase();
            if !matches!(keyword.as_str(), "copy" | "add" | "run") {
                continue;
            }
        }
        match keyword.as_str() {
            "arg" if stages.is_empty() => {
                // a build argument wins over the default (itself expanded); an `ARG` without
                // either stays unknown, its `$` left for the caller
                for word in words {
                    if let Some((name, value)) = word.split_once('=')
                        && !defaults.contains_key(name)
                    {
                        let value = super::dockerfile::expand(value, &defaults);
                        defaults.insert(name.to_string(), value);
                    }
                }
            }
            "from" => {
                while words.peek_flag().is_some() {}
                let rest: Vec<String> = words.collect();
                let Some(base) = rest.first() else {
                    continue;
                };
                let name = match rest.as_slice() {
                    [_, as_word, name, ..] if as_word.eq_ignore_ascii_case("as") => {
                        Some(name.to_ascii_lowercase())
                    }
                    _ => None,
                };
                stages.push(Stage {
                    base: super::dockerfile::expand(base, &defaults),
                    name,
                    from: Vec::new(),
                });
            }
            "copy" | "add" | "run" => {
                let Some(stage) = stages.last_mut() else {
                    continue;
                };
                while let Some(flag) = words.peek_flag() {
                    let body = &flag[2..];
                    let Some((name, value)) = body.split_once('=') else {
                        continue;
                    };
                    let name = name.to_ascii_lowercase();
                    if name == "from" && keyword != "run" {
                        stage.from.push(super::dockerfile::expand(value, &defaults));
                    } else if name == "mount" && keyword == "run" {
                        let from = value.split(',').find_map(|field| {
                            let (k, v) = field.split_once('=')?;
                            k.eq_ignore_ascii_case("from").then_some(v)
                        });
                        stage
                            .from
                            .extend(from.map(|v| super::dockerfile::expand(v, &defaults)));
                    }
                }
            }
            _ => {}
        }
    }
    stages
}

/// The index of the stage `name` names among `stages[..before]` (an `AS` name, any case, or
/// a number), as the builders resolve `FROM <stage>` and `--from=<stage>`.
fn stage_index(stages: &[Stage], before: usize, name: &str) -> Option<usize> {
    let lower = name.to_ascii_lowercase();
    if let Ok(n) = lower.parse::<usize>() {
        return (n < before).then_some(n);
    }
    stages[..before]
        .iter()
        .rposition(|s| s.name.as_deref() == Some(lower.as_str()))
}

/// The indexes of the stages a build of `target` (an `AS` name; the last stage when `None`
/// or unknown) reaches under `reach`, in file order.
fn reached(stages: &[Stage], target: Option<&str>, reach: Reach) -> Vec<usize> {
    let Some(last) = stages.len().checked_sub(1) else {
        return Vec::new();
    };
    let target = target
        .and_then(|t| stage_index(stages, stages.len(), t))
        .unwrap_or(last);
    match reach {
        Reach::UpToTarget => (0..=target).collect(),
        Reach::Needed => {
            let mut seen = vec![false; stages.len()];
            let mut todo = vec![target];
            while let Some(i) = todo.pop() {
                if std::mem::replace(&mut seen[i], true) {
                    continue;
                }
                let stage = &stages[i];
                for named in std::iter::once(&stage.base).chain(&stage.from) {
                    todo.extend(stage_index(stages, i, named));
                }
            }
            (0..stages.len()).filter(|i| seen[*i]).collect()
        }
    }
}

/// Whether `name` is an image to pull, not `scratch`, a stage before `index` or a name whose
/// value only the builder knows (a `$` left after expansion: left to the caller).
fn is_image(stages: &[Stage], index: usize, name: &str) -> bool {
    !name.is_empty()
        && !name.eq_ignore_ascii_case("scratch")
        // no reference holds an escape character (a word of the other escape's reading,
        // `FROM `` ` `` read with `\`): no builder pulls it
        && !name.contains(['`', '\\'])
        && stage_index(stages, index, name).is_none()
}

/// The images the stages a build of `target` reaches (see [`Reach`]) build `FROM`, in file
/// order, each once: what the builder pulls when missing and whose `ONBUILD` triggers it
/// runs (attacks G9). A name still holding a `$` after `args` and the `ARG` defaults are
/// expanded is kept as it is (its value is the builder's to decide).
pub fn reached_bases(
    text: &str,
    args: &BTreeMap<String, String>,
    target: Option<&str>,
    reach: Reach,
) -> Vec<String> {
    let mut bases: Vec<String> = Vec::new();
    for stages in readings(text, args) {
        for i in reached(&stages, target, reach) {
            let base = &stages[i].base;
            if is_image(&stages, i, base) && !bases.contains(base) {
                bases.push(base.clone());
            }
        }
    }
    bases
}

/// Every image a build of `target` pulls when it is missing: [`reached_bases`] and what the
/// reached stages copy or mount from (`COPY --from=<image>`, `RUN --mount=from=<image>`),
/// in file order, each once (attack K12).
pub fn pulled_images(
    text: &str,
    args: &BTreeMap<String, String>,
    target: Option<&str>,
    reach: Reach,
) -> Vec<String> {
    union(readings(text, args).iter().map(|stages| {
        let reached = reached(stages, target, reach);
        images_named_by(stages, reached)
    }))
}

/// Every image any stage names (its base, its `--from` images), whatever the target: what a
/// Dockerfile *names*, as the committed side of the registry judgement reads it (attack K12).
pub fn named_images(text: &str, args: &BTreeMap<String, String>) -> Vec<String> {
    union(
        readings(text, args)
            .iter()
            .map(|stages| images_named_by(stages, 0..stages.len())),
    )
}

/// The names of `lists`, in order, each once.
fn union(lists: impl Iterator<Item = Vec<String>>) -> Vec<String> {
    let mut out: Vec<String> = Vec::new();
    for name in lists.flatten() {
        if !out.contains(&name) {
            out.push(name);
        }
    }
    out
}

/// The images the stages at `indices` of `stages` name (base, then `--from`), in order,
/// each once; a name that is a stage (a `--from` may name the stage it is in no more than
/// an earlier one) is no image.
fn images_named_by(stages: &[Stage], indices: impl IntoIterator<Item = usize>) -> Vec<String> {
    let mut images: Vec<String> = Vec::new();
    for i in indices {
        let stage = &stages[i];
        for named in std::iter::once(&stage.base).chain(&stage.from) {
            if is_image(stages, i, named) && !images.contains(named) {
                images.push(named.clone());
            }
        }
    }
    images
}

/// The images the stages a build of `target` reaches build `FROM`, in order
/// ([`reached_bases`]): BuildKit runs each one's `ONBUILD` triggers
/// (attacks G9), and a stage the build does not reach is neither pulled nor judged. Pure.
pub fn base_images(
    text: &str,
    args: &BTreeMap<String, String>,
    target: Option<&str>,
    reach: Reach,
) -> Vec<String> {
    reached_bases(text, args, target, reach)
        .into_iter()
        .filter(|b| !b.contains('$'))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A UTF-8 BOM before `# escape=` is dropped as the builder drops it, so a `FROM`
    /// continued with that escape character is still seen (attack M3).
    #[test]
    fn a_bom_before_the_escape_directive_hides_no_base() {
        let base = "\u{feff}# escape=`\nFROM `\n  evil/base:1\n";
        assert_eq!(
            base_images(base, &args(&[]), None, Reach::UpToTarget),
            ["evil/base:1"]
        );
    }

    /// Attack N4: with `# check=` before `# escape=`` ` ``, the classic builder keeps `\`
    /// and BuildKit takes `` ` ``: a `FROM` or a `COPY --from` continued in either reading is
    /// an image of the build (and a `FROM` continued with a U+00A0 after `\` is not joined,
    /// attack N5).
    #[test]
    fn both_escape_readings_name_their_images() {
        let text = "# check=skip=all\n# escape=`\nFROM \\\n  evil/classic:1\nCOPY `\n  --from=evil/buildkit:2 / /\n";
        let pulled = pulled_images(text, &args(&[]), None, Reach::UpToTarget);
        assert!(pulled.contains(&"evil/classic:1".to_string()), "{pulled:?}");
        assert!(
            pulled.contains(&"evil/buildkit:2".to_string()),
            "{pulled:?}"
        );
        let named = named_images(text, &args(&[]));
        assert!(named.contains(&"evil/classic:1".to_string()), "{named:?}");
        let nbsp = "FROM a AS one \\\u{a0}\nFROM evil/next:1\n";
        assert_eq!(
            reached_bases(nbsp, &args(&[]), None, Reach::UpToTarget),
            ["a", "evil/next:1"]
        );
    }

    fn args(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
        pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect()
    }

    const MULTI: &str = "ARG REG=127.0.0.1:5000\n\
        FROM ${REG}/tools:1 AS tools\n\
        FROM unused.example.test/never:1 AS unused\n\
        FROM busybox AS build\n\
        COPY --from=tools /bin/x /x\n\
        COPY --from=copied.example.test/src:2 /a /a\n\
        RUN --mount=type=bind,from=mounted.example.test/m:3,target=/m true\n\
        FROM build AS final\n\
        COPY --from=0 /y /y\n\
        FROM after.example.test/later:1 AS later\n";

    /// BuildKit builds only what the target needs: the unused stage's base is never pulled,
    /// nor a stage after the target; `COPY --from` and `RUN --mount=from=` of an image are
    /// pulls, of a stage (by name or number) are not.
    #[test]
    fn buildkit_pulls_only_what_the_target_needs() {
        assert_eq!(
            pulled_images(MULTI, &args(&[]), Some("final"), Reach::Needed),
            [
                "127.0.0.1:5000/tools:1",
                "busybox",
                "copied.example.test/src:2",
                "mounted.example.test/m:3",
            ]
        );
        assert_eq!(
            reached_bases(MULTI, &args(&[]), Some("FINAL"), Reach::Needed),
            ["127.0.0.1:5000/tools:1", "busybox"]
        );
        // no target: the last stage
        assert_eq!(
            reached_bases(MULTI, &args(&[]), None, Reach::Needed),
            ["after.example.test/later:1"]
        );
    }

    /// The classic builder builds every stage up to the target, so it pulls the unused
    /// stage's base too, but never one after the target; build arguments win over defaults.
    #[test]
    fn the_classic_builder_pulls_every_stage_up_to_the_target() {
        assert_eq!(
            reached_bases(
                MULTI,
                &args(&[("REG", "mine.example.test")]),
                Some("final"),
                Reach::UpToTarget
            ),
            [
                "mine.example.test/tools:1",
                "unused.example.test/never:1",
                "busybox"
            ]
        );
        assert!(
            !pulled_images(MULTI, &args(&[]), Some("final"), Reach::UpToTarget)
                .contains(&"after.example.test/later:1".to_string())
        );
        assert!(reached_bases("FROM scratch\n", &args(&[]), None, Reach::Needed).is_empty());
        assert!(reached_bases("# nothing\n", &args(&[]), None, Reach::Needed).is_empty());
    }

    /// Attack 23, N20 variant: `FROM ${REG:-docker.io}/library/x` was read as written, so it
    /// asked `registry:${reg:-docker.io}` (which reads like Docker Hub's), and a grant of that
    /// let the working tree's `build.args.REG` pick any registry. The `${NAME:-word}` and
    /// `${NAME:+word}` forms expand as the builders expand them; a variable no argument or
    /// `ARG` gives stays as written (its `$` is the caller's sign of a one-run request).
    #[test]
    fn default_and_alternative_forms_expand_as_the_builder_expands_them() {
        let text = "ARG REG=\nARG ALT=yes\nFROM ${REG:-docker.io}/library/x AS one\n\
            FROM ${ALT:+alt.example.test}/y AS two\nFROM ${UNKNOWN:-d.example.test}/z AS three\n\
            FROM ${REG:-${ALT:+nested.example.test}}/n\n";
        assert_eq!(
            reached_bases(text, &args(&[]), None, Reach::UpToTarget),
            [
                "docker.io/library/x",
                "alt.example.test/y",
                "${UNKNOWN:-d.example.test}/z",
                "nested.example.test/n",
            ]
        );
        // an `ARG` without a default or an argument: unknown, left as written
        let bare = "ARG REG\nFROM ${REG:-docker.io}/library/x\n";
        assert_eq!(
            reached_bases(bare, &args(&[]), None, Reach::UpToTarget),
            ["${REG:-docker.io}/library/x"]
        );
        let chosen = args(&[("REG", "mine.example.test"), ("ALT", "")]);
        assert_eq!(
            reached_bases(text, &chosen, None, Reach::UpToTarget),
            [
                "mine.example.test/library/x",
                "/y",
                "${UNKNOWN:-d.example.test}/z",
                "mine.example.test/n",
            ]
        );
        // an `ARG` default is itself expanded
        let chained = "ARG HOST=chained.example.test\nARG IMAGE=${HOST}/i:1\nFROM $IMAGE\n";
        assert_eq!(
            reached_bases(chained, &args(&[]), None, Reach::UpToTarget),
            ["chained.example.test/i:1"]
        );
        assert_eq!(
            crate::security::dockerfile::expand("${A:?err}/x", &args(&[("A", "a")])),
            "${A:?err}/x"
        );
        assert_eq!(
            crate::security::dockerfile::expand("$A$B", &args(&[("A", "a")])),
            "a$B"
        );
    }

    /// Attack 23, N16: `ONBUILD COPY --from=<image>` (or `ONBUILD RUN --mount=from=`) in
    /// the workspace Dockerfile pulls its image when devcell builds its own layers `FROM` the
    /// result: an image of the build, judged with the rest. Another `ONBUILD` names none.
    #[test]
    fn an_onbuild_from_names_an_image() {
        let text = "FROM busybox\nONBUILD COPY --from=127.0.0.1:18424/exfil/ob:s / /x\n\
            onbuild run --mount=type=bind,from=mounted.example.test/m:1,target=/m true\n\
            ONBUILD FROM never.example.test/x\nONBUILD ARG X=1\n";
        let expected = [
            "busybox",
            "127.0.0.1:18424/exfil/ob:s",
            "mounted.example.test/m:1",
        ];
        assert_eq!(
            pulled_images(text, &args(&[]), None, Reach::UpToTarget),
            expected
        );
        assert_eq!(named_images(text, &args(&[])), expected);
    }
}
