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

# Installs packages without removing any the machine has: apt's default choice when it removes
# nothing, else the same packages taken from each suite that offers them in turn (a qemu-utils
# from bookworm-backports needs the qemu-system-x86 of bookworm-backports beside it), else
# nothing at all, saying what every way would have removed.
install_debs() {
    local suite simulation removed="" target
    local suites=("")
    mapfile -t -O 1 suites < <(offering_suites "$@")
    for suite in "${suites[@]}"; do
        target=()
        [[ -n "$suite" ]] && target=(-t "$suite")
        simulation="$(apt-get install -s --no-install-recommends "${target[@]}" "$@" 2>&1)" || continue
        if grep -q '^Remv ' <<<"$simulation"; then
            removed+="$(sed -n 's/^Remv \([^ ]*\).*/\1/p' <<<"$simulation")"$'\n'
            continue
        fi
        quietly as_root env DEBIAN_FRONTEND=noninteractive \
            apt-get install -y -q --no-install-recommends "${target[@]}" "$@"
        return
    done
    printf 'setup: not installing %s: every version apt offers would remove a package this machine has (%s)\n' \
        "$*" "$(grep -v '^$' <<<"$removed" | sort -u | paste -sd ' ')" >&2
    printf '  fix: install %s yourself in a way that keeps them, then run scripts/setup again\n' "$*" >&2
    return 1
}
