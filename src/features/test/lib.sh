# dev-container-features-test-lib: the helpers a Feature's test scripts call
# (`source dev-container-features-test-lib`), written for `devcell features test`.
#
#   check LABEL COMMAND [ARG...]
#       Runs COMMAND with its arguments. Success prints that LABEL passed; failure records
#       LABEL and returns 1 (a script under `set -e` stops there, as it would without the
#       helper).
#   checkMultiple LABEL MINIMUM EXPRESSION...
#       Evaluates each EXPRESSION (a shell command line); LABEL passes when at least MINIMUM
#       of them succeed.
#   reportResults
#       Exits 0 when every check passed, 1 (naming the failed checks) otherwise.

if [ -z "${DEVCELL_FEATURES_TEST_LIB_LOADED:-}" ]; then
DEVCELL_FEATURES_TEST_LIB_LOADED=1
DEVCELL_FEATURES_TEST_FAILED=()

check() {
    local label="$1"
    shift
    printf '\n>> Testing %s\n' "'${label}'"
    if "$@"; then
        printf '[passed] %s\n' "'${label}'"
        return 0
    fi
    printf '[FAILED] %s\n' "'${label}'" >&2
    DEVCELL_FEATURES_TEST_FAILED+=("${label}")
    return 1
}

checkMultiple() {
    local label="$1"
    local minimum="$2"
    shift 2
    local passed=0
    local expression
    printf '\n>> Testing %s\n' "'${label}'"
    for expression in "$@"; do
        if eval "${expression}"; then
            passed=$((passed + 1))
        fi
    done
    if [ "${passed}" -ge "${minimum}" ]; then
        printf '[passed] %s (%s of %s)\n' "'${label}'" "${passed}" "$#"
        return 0
    fi
    printf '[FAILED] %s (%s of %s passed, %s needed)\n' "'${label}'" "${passed}" "$#" "${minimum}" >&2
    DEVCELL_FEATURES_TEST_FAILED+=("${label}")
    return 1
}

reportResults() {
    if [ "${#DEVCELL_FEATURES_TEST_FAILED[@]}" -ne 0 ]; then
        printf '\nFailed checks:' >&2
        printf ' %s' "${DEVCELL_FEATURES_TEST_FAILED[@]}" >&2
        printf '\n' >&2
        exit 1
    fi
    printf '\nAll checks passed.\n'
    exit 0
}
fi
