#!/bin/sh
# check-unit.sh [UNIT] [MAX_EXPOSURE]: check deploy/lastmiled.service with
# systemd-analyze without installing anything.
#
#  1. `systemd-analyze verify` in a throwaway root (--root) that holds the
#     unit, the host's unit library (/usr/lib/systemd/system, for
#     sysinit.target and friends), /bin/kill and a stand-in
#     /usr/local/bin/lastmiled: verify insists that ExecStart's binary exists
#     and is executable. Any output counts as a failure (systemd-analyze exits
#     0 on warnings such as unknown keys).
#  2. `systemd-analyze security --offline=true --threshold=N UNIT`: the
#     exposure score of the file (no running systemd needed; systemd >= 250),
#     failing above MAX_EXPOSURE (default 2.4: docs/daemon-security.md
#     says what each point above the minimum buys).
#
# Works without systemd as PID 1 (containers, CI).
set -eu

unit=${1:-$(dirname "$0")/lastmiled.service}
max=${2:-2.4}
name=$(basename "$unit")

command -v systemd-analyze >/dev/null || { echo "check-unit: systemd-analyze not found (apt-get install systemd)" >&2; exit 1; }

root=$(mktemp -d)
trap 'rm -rf "$root"' EXIT
mkdir -p "$root/etc/systemd/system" "$root/usr/lib/systemd" "$root/usr/bin" "$root/usr/local/bin"
ln -s usr/bin "$root/bin"
ln -s usr/lib "$root/lib"
cp -r /usr/lib/systemd/system "$root/usr/lib/systemd/"
cp /usr/bin/kill "$root/usr/bin/kill"
printf '#!/bin/sh\nexit 0\n' >"$root/usr/local/bin/lastmiled"
chmod 0755 "$root/usr/local/bin/lastmiled"
cp "$unit" "$root/etc/systemd/system/$name"

echo "== systemd-analyze verify --root=ROOT $name"
out=$(systemd-analyze verify --root="$root" "$name" 2>&1) || { echo "$out"; echo "check-unit: verify failed" >&2; exit 1; }
if [ -n "$out" ]; then
	echo "$out"
	echo "check-unit: verify printed warnings" >&2
	exit 1
fi
echo "clean"

# --threshold takes the exposure scaled by 10 (2.0 -> 20).
threshold=$(awk -v m="$max" 'BEGIN { printf "%d", m * 10 + 0.5 }')
echo "== systemd-analyze security --offline=true --threshold=$threshold $unit"
if ! report=$(systemd-analyze security --offline=true --threshold="$threshold" "$unit" 2>&1); then
	echo "$report"
	echo "check-unit: exposure above $max" >&2
	exit 1
fi
echo "$report" | grep -i 'overall exposure'
