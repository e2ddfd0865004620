#!/bin/bash
# Looks at this host's network the way proxyd will meet it and writes the
# operator settings proxyd needs into proxyd.conf (never changing a key the
# operator already set), saying what it found:
#
#   split DNS     package registries resolve to a reserved or private
#                 address (a corporate resolver): their /24 becomes a
#                 trusted-ranges entry, so names the rules allow may reach
#                 it (addresses given by a guest never do);
#   TLS re-signed the registries' certificates verify only with a CA that
#                 this host trusts and Debian's Mozilla bundle lacks: proxyd
#                 terminates TLS for them (terminate-tls), verifying against
#                 the host's trust store, so guests need only Airlock's CA.
#
# usage: configure_network.sh [STATE_DIR]   (default: Airlock's state dir)
set -euo pipefail
if [ $# -ge 1 ]; then
  state=$1
elif [ -n "${AIRLOCK_STATE_DIR:-}" ]; then
  state=$AIRLOCK_STATE_DIR
elif [ "$(id -u)" -eq 0 ]; then
  state=/var/lib/airlock
else
  state=${XDG_STATE_HOME:-$HOME/.local/state}/airlock
fi
conf=$state/proxyd.conf
mkdir -p "$state"
touch "$conf"
say() { echo "configure_network: $*" >&2; }

hosts=(registry.npmjs.org deb.debian.org security.debian.org)
ranges=()
resigned=()
mozilla=$(mktemp)
trap 'rm -f "$mozilla"' EXIT
cat /usr/share/ca-certificates/mozilla/*.crt > "$mozilla" 2>/dev/null || true

protected() {  # reserved, private, shared, documentation or loopback IPv4
  local IFS=.; read -r a b c _ <<<"$1"
  [ "$a" = 10 ] || [ "$a" = 127 ] || [ "$a" = 0 ] || [ "$a" -ge 224 ] ||
    { [ "$a" = 100 ] && [ "$b" -ge 64 ] && [ "$b" -le 127 ]; } ||
    { [ "$a" = 169 ] && [ "$b" = 254 ]; } ||
    { [ "$a" = 172 ] && [ "$b" -ge 16 ] && [ "$b" -le 31 ]; } ||
    { [ "$a" = 192 ] && [ "$b" = 168 ]; } ||
    { [ "$a" = 192 ] && [ "$b" = 0 ] && { [ "$c" = 0 ] || [ "$c" = 2 ]; }; } ||
    { [ "$a" = 198 ] && { [ "$b" = 18 ] || [ "$b" = 19 ]; }; } ||
    { [ "$a" = 198 ] && [ "$b" = 51 ] && [ "$c" = 100 ]; } ||
    { [ "$a" = 203 ] && [ "$b" = 0 ] && [ "$c" = 113 ]; } ||
    { [ "$a" = 240 ]; }
}

for h in "${hosts[@]}"; do
  addr=$(getent ahostsv4 "$h" 2>/dev/null | awk 'NR==1{print $1}')
  if [ -z "$addr" ]; then
    say "$h does not resolve on this host; skipped"
    continue
  fi
  if protected "$addr"; then
    r=${addr%.*}.0/24
    say "$h resolves to $addr, a protected address (split DNS): trusting $r for allowed names"
    [[ " ${ranges[*]:-} " == *" $r "* ]] || ranges+=("$r")
  fi
  if [ "$h" = registry.npmjs.org ] && [ -s "$mozilla" ]; then
    # Re-signed: the handshake verifies with this host's trust store but not
    # with Debian's Mozilla bundle alone (what a stock guest trusts). A
    # network failure is neither; tried a few times.
    host_ok=; mozilla_ok=
    for _ in 1 2 3; do
      out=$(timeout 20 openssl s_client -connect "$h:443" -servername "$h" </dev/null 2>/dev/null || true)
      case "$out" in *"Verify return code: 0 (ok)"*) host_ok=1; break ;; esac
    done
    if [ -n "$host_ok" ]; then
      for _ in 1 2 3; do
        out=$(timeout 20 openssl s_client -connect "$h:443" -servername "$h" -CAfile "$mozilla" \
          </dev/null 2>/dev/null || true)
        case "$out" in
          *"Verify return code: 0 (ok)"*) mozilla_ok=1; break ;;
          *"Verify return code:"*) break ;;
        esac
      done
      if [ -z "$mozilla_ok" ]; then
        say "$h's certificate verifies only with this host's own CAs (TLS re-signed): proxyd will terminate TLS for the package registries"
        resigned=(registry.npmjs.org registry.yarnpkg.com deb.debian.org security.debian.org)
      fi
    else
      say "cannot complete a verified TLS handshake with $h from this host; TLS settings left alone"
    fi
  fi
done

set_key() {
  local key=$1 value=$2
  if grep -qE "^[[:space:]]*$key[[:space:]]*=" "$conf"; then
    say "$conf already sets $key; left as it is"
  else
    echo "$key = $value" >> "$conf"
    say "wrote $key = $value to $conf"
  fi
}
if [ ${#ranges[@]} -gt 0 ]; then set_key trusted-ranges "$(IFS=,; echo "${ranges[*]}")"; fi
if [ ${#resigned[@]} -gt 0 ]; then set_key terminate-tls "$(IFS=,; echo "${resigned[*]}")"; fi
if [ ${#ranges[@]} -eq 0 ] && [ ${#resigned[@]} -eq 0 ]; then
  say "direct resolution and public TLS: nothing to set"
fi
