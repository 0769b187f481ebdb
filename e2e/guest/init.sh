#!/bin/sh
# tekvirt guest init: mount the basics, load the virtio and ext4 modules,
# start the QEMU guest agent, then hand over to busybox init (a shell on
# the serial console).
/bin/busybox --install -s /bin
mkdir -p /proc /sys /dev /run /tmp /var/run
mount -t proc proc /proc
mount -t sysfs sys /sys
mount -t devtmpfs dev /dev
mkdir -p /dev/pts && mount -t devpts devpts /dev/pts
while read -r m; do insmod "/lib/modules/$m" 2>/dev/null; done < /etc/modules.load
hostname tekvirt-guest
ip link set lo up
for p in /sys/class/virtio-ports/*; do
  [ "$(cat "$p/name" 2>/dev/null)" = org.qemu.guest_agent.0 ] && agent="/dev/${p##*/}"
done
if [ -n "$agent" ]; then
  /usr/sbin/qemu-ga -d -m virtio-serial -p "$agent" -f /run/qemu-ga.pid
fi
echo "tekvirt-guest: ready (agent ${agent:-none})" > /dev/console
exec /bin/init
