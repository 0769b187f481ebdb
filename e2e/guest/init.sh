#!/bin/sh
# tekvirt guest init: mount the basics, load the virtio and ext4 modules,
# configure the network, start dropbear and the QEMU guest agent, then hand
# over to busybox init (a shell on the serial console). A NoCloud seed sets
# the hostname and root's SSH keys (user-data's ssh_authorized_keys and
# meta-data's public-keys).
/bin/busybox --install -s /bin
# Exported, so that the guest agent finds chpasswd and the programs
# guest-exec names without a path.
export PATH=/sbin:/usr/sbin:/bin:/usr/bin
mkdir -p /proc /sys /dev /run /tmp /var/run
mount -t proc proc /proc
mount -t sysfs sys /sys
mount -t devtmpfs dev /dev
mkdir -p /dev/pts && mount -t devpts devpts /dev/pts
while read -r m; do insmod "/lib/modules/$m" 2>/dev/null; done < /etc/modules.load
hostname tekvirt-guest
# NoCloud seed (a FAT disk labelled cidata): hostname and SSH keys.
seed=$(findfs LABEL=CIDATA 2>/dev/null || findfs LABEL=cidata 2>/dev/null)
if [ -n "$seed" ] && mkdir -p /run/seed && mount -t vfat -o ro "$seed" /run/seed; then
  name=$(sed -n 's/^hostname:[[:space:]]*//p' /run/seed/user-data 2>/dev/null | head -n1)
  [ -n "$name" ] || name=$(sed -n 's/^local-hostname:[[:space:]]*//p' /run/seed/meta-data 2>/dev/null | head -n1)
  [ -n "$name" ] && hostname "$name"
  mkdir -p /root/.ssh && chmod 700 /root/.ssh
  awk '/^ssh_authorized_keys:/ {keys=1; next} keys && /^[[:space:]]*-[[:space:]]/ {sub(/^[[:space:]]*-[[:space:]]*/, ""); gsub(/^"|"$/, ""); print; next} {keys=0}' \
    /run/seed/user-data > /root/.ssh/authorized_keys 2>/dev/null
  # meta-data's public-keys (accessCredentials with the noCloud method):
  # a map of JSON-quoted keys, for root, the image's default user.
  awk '/^public-keys:/ {keys=1; next}
    keys && /^[[:space:]]+"[0-9]+":[[:space:]]/ {sub(/^[[:space:]]+"[0-9]+":[[:space:]]*/, "");
      if ($0 ~ /^".*"$/) { $0 = substr($0, 2, length($0) - 2); gsub(/\\"/, "\""); gsub(/\\\\/, "\\") } print; next}
    {keys=0}' /run/seed/meta-data >> /root/.ssh/authorized_keys 2>/dev/null
  chmod 600 /root/.ssh/authorized_keys
  cp /run/seed/network-config /run/network-config 2>/dev/null
  umount /run/seed
fi
ip link set lo up
# Static addresses and gateways of the seed's network-config (version 2),
# e.g. the IPv6 address KubeVirt's masquerade examples give the guest.
if [ -s /run/network-config ]; then
  awk -f /etc/network-config.awk /run/network-config | while read -r what dev arg; do
    [ -e "/sys/class/net/$dev" ] || continue
    ip link set "$dev" up
    case "$what" in
      address) ip addr add "$arg" dev "$dev" ;;
      gateway4) ip route replace default via "$arg" dev "$dev" ;;
      gateway6) ip -6 route replace default via "$arg" dev "$dev" ;;
    esac
  done
fi
# The NIC gets its address by DHCP (user networking answers), in the
# background so the agent does not wait for it; dropbear serves SSH with
# the keys from the seed, host keys made on first use.
if [ -e /sys/class/net/eth0 ]; then
  udhcpc -i eth0 -t 10 -T 1 -q -n -s /etc/udhcpc.script >/dev/null 2>&1 &
fi
/usr/sbin/dropbear -R -s -p 22 >/dev/null 2>&1
for p in /sys/class/virtio-ports/*; do
  [ "$(cat "$p/name" 2>/dev/null)" = org.qemu.guest_agent.0 ] && agent="/dev/${p##*/}"
done
if [ -n "$agent" ]; then
  /usr/sbin/qemu-ga -d -m virtio-serial -p "$agent" -f /run/qemu-ga.pid
fi
echo "tekvirt-guest: ready (agent ${agent:-none})" > /dev/console
exec /bin/init
