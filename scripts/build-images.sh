#!/usr/bin/env bash
# Builds the local demo images jaco-demo/busybox:1 and :2 (two tags of one image, so rolling
# updates can be shown) from Debian's busybox-static with `docker import`: there is no registry.
set -euo pipefail

docker_cli=/usr/bin/docker
[ -x "$docker_cli" ] || docker_cli=$(command -v docker)
busybox=/bin/busybox

if "$docker_cli" image inspect jaco-demo/busybox:1 >/dev/null 2>&1 && "$docker_cli" image inspect jaco-demo/busybox:2 >/dev/null 2>&1 && [ "${1:-}" != "--force" ]; then
  exit 0
fi
if ! file -L "$busybox" 2>/dev/null | grep -q 'statically linked' && ! ldd "$busybox" 2>&1 | grep -q 'not a dynamic'; then
  echo "build-images: $busybox is not statically linked; install busybox-static" >&2
  exit 1
fi

rootfs=$(mktemp -d)
trap 'rm -rf "$rootfs"' EXIT
mkdir -p "$rootfs"/{bin,tmp,etc,data,www}
cp "$busybox" "$rootfs/bin/busybox"
for applet in sh ash sleep true false test '[' touch wget httpd cat echo ls date env grep ps kill mkdir rm printf seq wc head tail nc id hostname uname yes dd sha256sum; do
  ln -sf busybox "$rootfs/bin/$applet"
done
echo 'root:x:0:0:root:/:/bin/sh' > "$rootfs/etc/passwd"
echo 'jaco demo' > "$rootfs/www/index.html"
chmod 1777 "$rootfs/tmp"

id=$(tar -C "$rootfs" -c . | "$docker_cli" import -c 'ENV PATH=/bin' -c 'CMD ["sh"]' - jaco-demo/busybox:1)
"$docker_cli" tag "$id" jaco-demo/busybox:2
echo "build-images: jaco-demo/busybox:1 and :2 -> ${id:7:12}"
