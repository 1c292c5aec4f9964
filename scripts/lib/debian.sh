# Sourced by scripts/setup: installing Debian packages without disturbing what the machine has.
# Needs as_root (from scripts/setup) and writes only to stderr.

# Runs a command with its output held back: shown (on stderr) only if it fails.
quietly() {
    local log status=0
    log="$(mktemp)"
    "$@" >"$log" 2>&1 || status=$?
    if [[ $status -ne 0 ]]; then
        printf 'setup: `%s` failed (status %s):\n' "$*" "$status" >&2
        cat "$log" >&2
    fi
    rm -f "$log"
    return "$status"
}

# The suites (bookworm, bookworm-backports, ...) that offer any of the packages.
offering_suites() {
    apt-cache policy "$@" 2>/dev/null \
        | sed -n 's|^ *[0-9][0-9]* [^ ][^ ]* \([^/ ][^/ ]*\)/[^ ]* [^ ]* Packages$|\1|p' \
        | sort -u
}

# The URI of the machine's Debian archive for SUITE, as apt-cache policy lists it for PACKAGES.
archive_uri() {
    local suite="$1"; shift
    apt-cache policy "$@" 2>/dev/null \
        | awk -v suite="$suite" '$3 ~ "^" suite "/" && $NF == "Packages" { print $2; exit }'
}

# The backports suite of this release (bookworm-backports), when a package this machine has
# came from it (its version says ~bpoNN) and apt's sources do not offer it: the machine was set
# up from backports that its sources no longer list. Empty otherwise.
unlisted_backports() {
    local removed="$1" codename
    grep -q '~bpo[0-9]' <<<"$removed" || return 0
    codename="$(. "${OS_RELEASE_FILE:-/etc/os-release}" && printf '%s' "${VERSION_CODENAME:-}")"
    [[ -n "$codename" ]] && printf '%s-backports' "$codename"
}

# Simulates, then performs, installing PACKAGES with apt options OPTS (an array's name) from
# SUITE ("" for apt's own choice); returns 3 and appends to REMOVED (a variable's name) what the
# simulation would have removed, or fails as the install does.
install_from() {
    local -n opts_ref="$1" removed_ref="$2"
    local suite="$3"; shift 3
    local simulation target=()
    [[ -n "$suite" ]] && target=(-t "$suite")
    simulation="$(apt-get "${opts_ref[@]}" install -s --no-install-recommends "${target[@]}" "$@" 2>&1)" \
        || return 3
    if grep -q '^Remv ' <<<"$simulation"; then
        removed_ref+="$(sed -n 's/^Remv \([^ ]*\) \[\([^]]*\)\].*/\1 \2/p' <<<"$simulation")"$'\n'
        return 3
    fi
    quietly as_root env DEBIAN_FRONTEND=noninteractive \
        apt-get "${opts_ref[@]}" install -y -q --no-install-recommends "${target[@]}" "$@"
}

# Installs packages without removing any the machine has: apt's default choice when it removes
# nothing, else the same packages taken from each suite that offers them in turn (a qemu-utils
# from bookworm-backports needs the qemu-system-x86 of bookworm-backports beside it), else from
# the backports suite a package the machine has came from, read through a sources list of the
# setup's own (APT_PRIVATE_DIR, under target/; the machine's own sources stay as they are),
# else nothing at all, saying what every way would have removed.
install_debs() {
    local suite removed="" status backports
    local none=()
    local suites=("")
    mapfile -t -O 1 suites < <(offering_suites "$@")
    for suite in "${suites[@]}"; do
        status=0
        install_from none removed "$suite" "$@" || status=$?
        [[ $status -eq 3 ]] || return "$status"
    done
    backports="$(unlisted_backports "$removed")"
    if [[ -n "$backports" ]] && ! printf '%s\n' "${suites[@]}" | grep -qx "$backports"; then
        local dir="${APT_PRIVATE_DIR:?}" uri codename="${backports%-backports}"
        uri="$(archive_uri "$codename" "$@")"
        if [[ -n "$uri" ]]; then
            printf '==> reading %s (a package this machine has came from it; its own apt sources untouched)\n' \
                "$backports" >&2
            mkdir -p "$dir/lists/partial"
            { [[ -f /etc/apt/sources.list ]] && cat /etc/apt/sources.list
              printf 'deb [signed-by=/usr/share/keyrings/debian-archive-keyring.gpg] %s %s main\n' \
                  "$uri" "$backports"; } >"$dir/sources.list"
            local private=(-o "Dir::Etc::sourcelist=$dir/sources.list" -o "Dir::State::Lists=$dir/lists")
            if quietly as_root apt-get "${private[@]}" update -q; then
                status=0
                install_from private removed "$backports" "$@" || status=$?
                [[ $status -eq 3 ]] || return "$status"
            fi
        fi
    fi
    printf 'setup: not installing %s: every version apt offers would remove a package this machine has (%s)\n' \
        "$*" "$(grep -v '^$' <<<"$removed" | cut -d' ' -f1 | sort -u | paste -sd ' ')" >&2
    printf '  fix: install %s yourself in a way that keeps them, then run scripts/setup again\n' "$*" >&2
    return 1
}
