#!/usr/bin/env bash
# Builds the local demo images from root filesystems with `docker import` (there is no registry):
#   jaco-demo/busybox:1 and :2   two tags of one image (so rolling updates can be shown), from
#                                Debian's busybox-static;
#   jaco/pause:1                 the sandbox of cluster-network replicas: a static busybox shell that
#                                waits for ever and exits at once on SIGTERM or SIGINT;
#   jaco-demo/postgres:15, jaco-demo/redis:7, jaco-demo/nginx:1
#                                real servers from Debian bookworm's packages, each described by a
#                                folder under scripts/images/ (packages, install.sh run in a chroot,
#                                entrypoint and files, the image's Dockerfile instructions in `config`).
# The servers' base (debootstrap minbase, updated, with every image's packages downloaded) is made
# once and cached as a tarball under ${XDG_CACHE_HOME:-~/.cache}/jaco/, keyed by suite and a hash of
# the package lists; an image is rebuilt only when the hash of its inputs (this script, its folder,
# the base key) differs from its jaco.demo.inputs label. `--force` rebuilds everything, base too.
# Packages come only from the Debian mirror apt on this machine already uses.
set -Eeuo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
force=false
case "${1:-}" in
--force) force=true ;;
'') ;;
*) echo "usage: $0 [--force]" >&2; exit 2 ;;
esac

docker_cli=/usr/bin/docker
[ -x "$docker_cli" ] || docker_cli=$(command -v docker)
busybox=/bin/busybox
SUITE=bookworm
SERVER_IMAGES=(postgres=jaco-demo/postgres:15 redis=jaco-demo/redis:7 nginx=jaco-demo/nginx:1)
INPUTS_LABEL=jaco.demo.inputs
cache=${XDG_CACHE_HOME:-$HOME/.cache}/jaco
SUDO=""
[ "$(id -u)" -eq 0 ] || SUDO="sudo"

# Every failure names the step it happened in and shows the end of that step's log.
step="start"
step_log=""
on_error() {
  local rc=$?
  trap - ERR
  if [ "$BASHPID" = "$$" ]; then
    echo "build-images: FAILED at step: $step (exit $rc)" >&2
    if [ -n "$step_log" ] && [ -s "$step_log" ]; then
      echo "build-images: last lines of $step_log:" >&2
      tail -n 30 "$step_log" >&2
    fi
  fi
  exit "$rc"
}
trap on_error ERR
die() {
  echo "build-images: FAILED at step: $step: $*" >&2
  exit 1
}
# begin STEP [LOG]: names the step under way; LOG (under the cache) collects its commands' output.
begin() {
  step=$1
  step_log=${2:+$cache/logs/$2.log}
}

work=""
cleanup() {
  if [ -n "$work" ]; then $SUDO rm -rf --one-file-system "$work"; fi
}
trap cleanup EXIT

build_busybox() {
  begin "jaco-demo/busybox"
  if ! $force && "$docker_cli" image inspect jaco-demo/busybox:1 >/dev/null 2>&1 && "$docker_cli" image inspect jaco-demo/busybox:2 >/dev/null 2>&1; then
    return 0
  fi
  if ! file -L "$busybox" 2>/dev/null | grep -q 'statically linked' && ! ldd "$busybox" 2>&1 | grep -q 'not a dynamic'; then
    die "$busybox is not statically linked; install busybox-static"
  fi
  local rootfs="$work/busybox" applet id
  mkdir -p "$rootfs"/{bin,tmp,etc,data,www}
  cp "$busybox" "$rootfs/bin/busybox"
  for applet in sh ash sleep true false test '[' touch wget httpd cat echo ls date env grep ps kill mkdir rm printf seq wc head tail nc id hostname uname yes dd sha256sum; do
    ln -sf busybox "$rootfs/bin/$applet"
  done
  echo 'root:x:0:0:root:/:/bin/sh' >"$rootfs/etc/passwd"
  echo 'jaco demo' >"$rootfs/www/index.html"
  chmod 1777 "$rootfs/tmp"
  id=$(tar -C "$rootfs" -c . | "$docker_cli" import -c 'ENV PATH=/bin' -c 'CMD ["sh"]' - jaco-demo/busybox:1)
  "$docker_cli" tag "$id" jaco-demo/busybox:2
  echo "build-images: jaco-demo/busybox:1 and :2 -> ${id:7:12}"
}

# The pause image: what holds a cluster-network replica's network namespace (the agent's
# --sandbox-image). A shell as PID 1 ignores signals it has no trap for, hence the trap; it waits on
# a sleep in the background so that the trap runs at once. Rebuilt when this function changes.
build_pause() {
  begin "jaco/pause"
  local rootfs="$work/pause" hash id
  hash=$(declare -f build_pause | sha256sum | cut -c1-16)
  if ! $force && [ "$("$docker_cli" image inspect -f "{{ index .Config.Labels \"$INPUTS_LABEL\" }}" jaco/pause:1 2>/dev/null || true)" = "$hash" ]; then
    return 0
  fi
  mkdir -p "$rootfs/bin"
  cp "$busybox" "$rootfs/bin/busybox"
  ln -sf busybox "$rootfs/bin/sh"
  ln -sf busybox "$rootfs/bin/sleep"
  printf '#!/bin/sh\ntrap "exit 0" TERM INT\nwhile :; do sleep 2147483647 & wait $!; done\n' >"$rootfs/pause"
  chmod 0755 "$rootfs/pause"
  id=$(tar -C "$rootfs" -c . | "$docker_cli" import -c 'ENV PATH=/bin' -c 'ENTRYPOINT ["/pause"]' -c "LABEL $INPUTS_LABEL=$hash" - jaco/pause:1)
  echo "build-images: jaco/pause:1 -> ${id:7:12}"
}

# The non-comment lines of a file, one a line.
lines_of() { grep -v -e '^[[:space:]]*#' -e '^[[:space:]]*$' "$1"; }

# "URI SUITE" for every Debian source with component main that apt on this machine uses, from
# one-line .list files and deb822 .sources files alike.
host_debian_sources() {
  local f
  for f in /etc/apt/sources.list /etc/apt/sources.list.d/*.list; do
    [ -f "$f" ] || continue
    sed -e 's/#.*//' -e 's/\[[^]]*\]//' "$f" | awk '$1 == "deb" { for (i = 4; i <= NF; i++) if ($i == "main") print $2, $3 }'
  done
  for f in /etc/apt/sources.list.d/*.sources; do
    [ -f "$f" ] || continue
    awk '
      function flush(   n, m, i, j, u, s) {
        if (types ~ /(^| )deb( |$)/ && comps ~ /(^| )main( |$)/ && tolower(enabled) != "no") {
          n = split(uris, u, " "); m = split(suites, s, " ")
          for (i = 1; i <= n; i++) for (j = 1; j <= m; j++) print u[i], s[j]
        }
        types = uris = suites = comps = ""; enabled = "yes"
      }
      BEGIN { enabled = "yes" }
      /^[[:space:]]*#/ { next }
      /^[[:space:]]*$/ { flush(); next }
      /^[^[:space:]]/ {
        key = tolower($1); sub(/:$/, "", key); $1 = ""; sub(/^ +/, "")
        if (key == "types") types = $0; else if (key == "uris") uris = $0
        else if (key == "suites") suites = $0; else if (key == "components") comps = $0
        else if (key == "enabled") enabled = $0
      }
      END { flush() }' "$f"
  done
}

# Debootstraps the base every server image starts from, with the packages of all of them already
# downloaded (an image build then installs offline), and caches it as a tarball.
build_base() {
  local root="$work/base" sources mirror f tmp started=$SECONDS
  begin "find the Debian $SUITE mirror apt uses"
  sources=$(host_debian_sources | awk -v s="$SUITE" '$2 == s || $2 == s "-updates" || $2 == s "-security"' | sort -u)
  mirror=$(awk -v s="$SUITE" '$2 == s { print $1; exit }' <<<"$sources")
  [ -n "$mirror" ] || die "no 'deb … $SUITE main' source in /etc/apt/sources.list or sources.list.d; the images come only from the mirror apt uses"
  command -v debootstrap >/dev/null 2>&1 || [ -x /usr/sbin/debootstrap ] || die "debootstrap is missing (scripts/ensure-system.sh installs it)"

  begin "debootstrap --variant=minbase $SUITE from $mirror" base
  echo "build-images: debootstrapping the $SUITE base from $mirror (once; cached in $cache)"
  : >"$step_log"
  $SUDO env PATH="/usr/sbin:/sbin:$PATH" debootstrap --variant=minbase "$SUITE" "$root" "$mirror" >>"$step_log" 2>&1

  begin "configure apt and dpkg in the base" base
  $SUDO install -m 0644 "$here/images/base/dpkg-lean.cfg" "$root/etc/dpkg/dpkg.cfg.d/90jaco-lean"
  $SUDO install -m 0644 "$here/images/base/dpkg-unsafe-io.cfg" "$root/etc/dpkg/dpkg.cfg.d/90jaco-unsafe-io"
  $SUDO install -m 0755 "$here/images/base/policy-rc.d" "$root/usr/sbin/policy-rc.d"
  awk '{ print "deb", $1, $2, "main" }' <<<"$sources" | $SUDO tee "$root/etc/apt/sources.list" >/dev/null
  # How this machine reaches its mirror (e.g. a snapshot whose Release files are past Valid-Until);
  # used while building only.
  for f in /etc/apt/apt.conf /etc/apt/apt.conf.d/*; do
    if [ -f "$f" ] && grep -qs '^[[:space:]]*Acquire' "$f"; then
      $SUDO cp "$f" "$root/etc/apt/apt.conf.d/zz-host-$(basename "$f")"
    fi
  done
  # What debootstrap installed before the dpkg excludes applied.
  $SUDO find "$root/usr/share/doc" -mindepth 1 ! -type d ! -name copyright -delete
  $SUDO find "$root/usr/share/doc" -mindepth 1 -type d -empty -delete
  $SUDO find "$root/usr/share/man" "$root/usr/share/info" "$root/usr/share/locale" -mindepth 1 -maxdepth 1 ! -name locale.alias -exec rm -rf {} +

  begin "apt-get update && upgrade in the base" base
  $SUDO chroot "$root" apt-get clean >>"$step_log" 2>&1
  $SUDO chroot "$root" apt-get update >>"$step_log" 2>&1
  $SUDO chroot "$root" env DEBIAN_FRONTEND=noninteractive apt-get -y --no-install-recommends upgrade >>"$step_log" 2>&1
  $SUDO chroot "$root" apt-get clean >>"$step_log" 2>&1

  begin "download the images' packages into the base ($all_packages)" base
  # shellcheck disable=SC2086 # a list of package names
  $SUDO chroot "$root" env DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends --download-only $all_packages >>"$step_log" 2>&1

  begin "cache the base as $base_tar" base
  mkdir -p "$cache"
  tmp="$base_tar.tmp.$$"
  $SUDO tar -C "$root" -cf "$tmp" .
  mv -f "$tmp" "$base_tar"
  for f in "$cache"/debootstrap-"$SUITE"-*.tar; do
    [ "$f" = "$base_tar" ] || rm -f "$f"
  done
  $SUDO rm -rf --one-file-system "$root"
  echo "build-images: cached the base as $base_tar ($((SECONDS - started)) s)"
}

# What no image needs at run time: apt's lists and caches, logs, the build's apt settings, the
# host's DNS and name (Docker provides its own), device nodes (Docker mounts /dev).
strip_rootfs() {
  local root=${1:?}
  $SUDO rm -rf "$root"/var/lib/apt/lists/* "$root"/var/cache/apt/* "$root"/var/cache/debconf/*-old \
    "$root"/var/lib/dpkg/*-old "$root"/tmp/* "$root"/tmp/.[!.]* "$root"/var/tmp/* "$root"/dev/* \
    "$root"/etc/apt/apt.conf.d/zz-host-*
  $SUDO find "$root/var/log" -type f -delete
  $SUDO sh -c ': >"$1/etc/resolv.conf"; : >"$1/etc/hostname"' sh "$root"
}

# The hash of everything an image is made from.
inputs_hash() {
  local name=$1 f
  {
    echo "$base_key"
    cat "$here/build-images.sh"
    (cd "$here" && find "images/$name" -type f | LC_ALL=C sort) | while read -r f; do
      echo "== $f $(stat -c %a "$here/$f")"
      cat "$here/$f"
    done
  } | sha256sum | cut -c1-16
}

build_server_image() {
  local name=$1 tag=$2 hash current root pkgs previous rootfs_id id started
  hash=$(inputs_hash "$name")
  current=$("$docker_cli" image inspect -f "{{ index .Config.Labels \"$INPUTS_LABEL\" }}" "$tag" 2>/dev/null || true)
  if ! $force && [ "$current" = "$hash" ]; then
    return 0
  fi
  if [ ! -s "$base_tar" ]; then build_base; fi

  started=$SECONDS
  begin "$tag: unpack the cached base" "$name"
  : >"$step_log"
  root="$work/$name"
  mkdir -p "$root"
  $SUDO tar -C "$root" -xf "$base_tar"

  pkgs=$(lines_of "$here/images/$name/packages" | xargs)
  begin "$tag: install $pkgs (scripts/images/$name/install.sh in the chroot)" "$name"
  $SUDO cp -r "$here/images/$name" "$root/tmp/jaco-image"
  # shellcheck disable=SC2086 # a list of package names
  $SUDO chroot "$root" /bin/sh /tmp/jaco-image/install.sh $pkgs >>"$step_log" 2>&1

  begin "$tag: strip the rootfs" "$name"
  strip_rootfs "$root"

  begin "$tag: docker import" "$name"
  previous=$("$docker_cli" image inspect -f '{{.Id}}' "$tag" 2>/dev/null || true)
  rootfs_id=$($SUDO tar -C "$root" -c . | "$docker_cli" import - 2>>"$step_log")
  # The image's config goes on with the (legacy, offline) builder: docker import -c of Docker 20.10
  # refuses STOPSIGNAL. FROM the imported id, so nothing is looked up in a registry.
  begin "$tag: docker build of scripts/images/$name/config on the imported rootfs" "$name"
  id=$({ echo "FROM $rootfs_id"; lines_of "$here/images/$name/config"; echo "LABEL $INPUTS_LABEL=$hash"; } |
    DOCKER_BUILDKIT=0 "$docker_cli" build --quiet --force-rm --tag "$tag" - 2>>"$step_log")
  # The image this one replaces, unless a container still uses it.
  if [ -n "$previous" ] && [ "$previous" != "$id" ]; then "$docker_cli" image rm "$previous" >/dev/null 2>&1 || true; fi
  echo "build-images: $tag -> ${id:7:12} ($($SUDO du -sh "$root" | cut -f1) rootfs, $((SECONDS - started)) s)"
  $SUDO rm -rf --one-file-system "$root"
}

mkdir -p "$cache/logs"
# One build at a time per cache (two worktrees' `make test`): the second then finds it all built.
exec 9>"$cache/build-images.lock"
if ! flock -n 9; then
  echo "build-images: waiting for another build-images.sh to finish"
  flock 9
fi
work=$(mktemp -d "${TMPDIR:-/var/tmp}/jaco-images.XXXXXX")
build_busybox
build_pause

all_packages=$(for entry in "${SERVER_IMAGES[@]}"; do lines_of "$here/images/${entry%%=*}/packages"; done | LC_ALL=C sort -u | xargs)
base_key=$({ echo "$SUITE $all_packages"; cat "$here"/images/base/*; } | sha256sum | cut -c1-16)
base_tar="$cache/debootstrap-$SUITE-$base_key.tar"
if $force; then rm -f "$base_tar"; fi
for entry in "${SERVER_IMAGES[@]}"; do
  build_server_image "${entry%%=*}" "${entry#*=}"
done
