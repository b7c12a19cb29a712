# dev-container-features-test-lib: the helpers a Feature's test scripts call
# (`source dev-container-features-test-lib`), written for `devcell features test`.
#
#   check LABEL COMMAND [ARG...]
#       Runs COMMAND with its arguments. Success prints that LABEL passed; failure records
#       LABEL and returns 1 (a script under `set -e` stops there, as it would without the
#       helper).
#   checkMultiple LABEL MINIMUM EXPRESSION...
#       Runs each EXPRESSION as the reference's library does (`if $EXPRESSION`): split into
#       words and globbed, never evaluated, so a `|`, `&&`, quote or `$(…)` in it is a plain
#       word; the list ends at the first empty EXPRESSION. LABEL passes when at least MINIMUM
#       of them succeed.
#   reportResults
#       Exits 0 when every check passed, 1 (naming the failed checks) otherwise.
#
# What they print is the reference CLI's text, so tools and tests that read a Feature test's
# output find the same lines: `🔄 Testing 'LABEL'`, `✅  Passed 'LABEL'!` (stdout),
# `❌ LABEL check failed.` (stderr); `checkMultiple` `✅ Passed!` / `❌ 'LABEL' check failed.`;
# `Test Passed!` or `💥  Failed tests: LABEL...` (stderr). Blank lines as the reference's.

if [ -z "${DEVCELL_FEATURES_TEST_LIB_LOADED:-}" ]; then
DEVCELL_FEATURES_TEST_LIB_LOADED=1
DEVCELL_FEATURES_TEST_FAILED=()

check() {
    local label="$1"
    shift
    printf '\n\n\xf0\x9f\x94\x84 Testing %s\n\033[37m\n' "'${label}'"
    if "$@"; then
        printf '\n\n\xe2\x9c\x85  Passed %s!\n' "'${label}'"
        return 0
    fi
    printf '\n\n'
    printf '\xe2\x9d\x8c %s check failed.\n' "${label}" >&2
    DEVCELL_FEATURES_TEST_FAILED+=("${label}")
    return 1
}

checkMultiple() {
    local label="$1"
    local minimum="$2"
    shift 2
    local passed=0
    local expression
    printf '\n\n\xf0\x9f\x94\x84 Testing %s.\n' "'${label}'"
    for expression in "$@"; do
        [ -n "${expression}" ] || break
        # unquoted on purpose: word splitting and globbing, as the reference
        # shellcheck disable=SC2086
        if ${expression}; then
            passed=$((passed + 1))
        fi
    done
    printf '\n\n'
    if [ "${passed}" -ge "${minimum}" ]; then
        printf '\xe2\x9c\x85 Passed!\n'
        return 0
    fi
    printf '\xe2\x9d\x8c %s check failed.\n' "'${label}'" >&2
    DEVCELL_FEATURES_TEST_FAILED+=("${label}")
    return 1
}

reportResults() {
    printf '\n\n'
    if [ "${#DEVCELL_FEATURES_TEST_FAILED[@]}" -ne 0 ]; then
        printf '\xf0\x9f\x92\xa5  Failed tests: %s\n' "${DEVCELL_FEATURES_TEST_FAILED[*]}" >&2
        exit 1
    fi
    printf 'Test Passed!\n'
    exit 0
}
fi
