#!/bin/sh
# tekvirt hosted-cluster worker init: the test guest's init, then a node's
# runtime. cgroup v2 with every controller delegated, containerd with the
# pause image imported, and the NoCloud user-data run as a script when it
# is one (as cloud-init runs "#!" user-data): the NodePool controller's
# script writes the kubelet's bootstrap kubeconfig and CA, then kubelet
# starts and joins with the bootstrap token. Node name = hostname = VM name.
/bin/busybox --install -s /bin
mkdir -p /proc /sys /dev /run /tmp /var/run
mount -t proc proc /proc
mount -t sysfs sys /sys
mount -t devtmpfs dev /dev
mkdir -p /dev/pts /dev/shm && mount -t devpts devpts /dev/pts && mount -t tmpfs shm /dev/shm
mount -t cgroup2 cgroup2 /sys/fs/cgroup
for c in $(cat /sys/fs/cgroup/cgroup.controllers); do echo "+$c" > /sys/fs/cgroup/cgroup.subtree_control 2>/dev/null; done
while read -r m; do insmod "/lib/modules/$m" 2>/dev/null; done < /etc/modules.load
echo 1 > /proc/sys/net/ipv4/ip_forward
for d in /var/lib/containerd /var/lib/kubelet /run/containerd /var/log/pods /etc/cni/net.d; do mkdir -p "$d"; done
mount -t tmpfs -o mode=0711 containerd /var/lib/containerd
mount -t tmpfs -o mode=0700 kubelet /var/lib/kubelet
hostname tekvirt-worker
seed=$(findfs LABEL=CIDATA 2>/dev/null || findfs LABEL=cidata 2>/dev/null)
if [ -n "$seed" ] && mkdir -p /run/seed && mount -t vfat -o ro "$seed" /run/seed; then
  name=$(sed -n 's/^local-hostname:[[:space:]]*//p' /run/seed/meta-data 2>/dev/null | head -n1)
  [ -n "$name" ] && hostname "$name"
  [ "$(head -c2 /run/seed/user-data 2>/dev/null)" = "#!" ] && cp /run/seed/user-data /run/user-data && chmod 700 /run/user-data
  umount /run/seed
fi
ip link set lo up
if [ -e /sys/class/net/eth0 ]; then
  udhcpc -i eth0 -t 10 -T 1 -q -n -s /etc/udhcpc.script >/dev/null 2>&1
fi
grep '^nameserver' /etc/resolv.conf > /run/kubelet-resolv.conf 2>/dev/null || : > /run/kubelet-resolv.conf
for p in /sys/class/virtio-ports/*; do
  [ "$(cat "$p/name" 2>/dev/null)" = org.qemu.guest_agent.0 ] && agent="/dev/${p##*/}"
done
[ -n "$agent" ] && /usr/sbin/qemu-ga -d -m virtio-serial -p "$agent" -f /run/qemu-ga.pid
# respawn NAME CMD...: runs CMD again whenever it ends, logging to
# /var/log/NAME.log.
respawn() {
  name=$1; shift
  (while :; do "$@" >>"/var/log/$name.log" 2>&1; sleep 2; done) &
}
# containerd too: the kernel's OOM killer may pick it on a full worker.
respawn containerd /usr/bin/containerd --config /etc/containerd/config.toml
i=0; while [ ! -S /run/containerd/containerd.sock ] && [ $i -lt 60 ]; do sleep 1; i=$((i+1)); done
/usr/bin/ctr -n k8s.io images import --snapshotter overlayfs /opt/images/pause.tar >/var/log/pause-import.log 2>&1
[ -x /run/user-data ] && /run/user-data >/var/log/user-data.log 2>&1
# Pods' MTU: the node's less VXLAN's 50 bytes.
mtu=$(($(cat /sys/class/net/eth0/mtu 2>/dev/null || echo 1500) - 50))
sed -i "s/\"mtu\": [0-9]*/\"mtu\": $mtu/" /etc/containerd/cni.conflist.tmpl
# The node's network services, once the kubelet holds its credentials:
# flannel's VXLAN between the workers (when the user-data configured it)
# and kube-proxy, both as the node.
node_network() {
  i=0; while [ ! -s /var/lib/kubelet/kubeconfig ] && [ $i -lt 900 ]; do sleep 1; i=$((i+1)); done
  if [ -s /etc/kube-flannel/net-conf.json ]; then
    NODE_NAME=$(hostname) && export NODE_NAME
    respawn flanneld /usr/bin/flanneld --kubeconfig-file=/var/lib/kubelet/kubeconfig --iface=eth0
  fi
  respawn kube-proxy /usr/bin/kube-proxy --config=/etc/kubernetes/kube-proxy.yaml --hostname-override="$(hostname)"
}
# A migration moves the worker to another launcher Pod, another address:
# the launcher sets the link down and up, and the worker asks DHCP again
# (flanneld announces the new address when it starts again).
watch_link() {
  last=$(cat /sys/class/net/eth0/carrier_changes 2>/dev/null)
  while sleep 1; do
    now=$(cat /sys/class/net/eth0/carrier_changes 2>/dev/null)
    [ "$now" = "$last" ] && continue
    last=$now
    [ "$(cat /sys/class/net/eth0/carrier 2>/dev/null)" = 1 ] || continue
    udhcpc -i eth0 -t 10 -T 1 -q -n -s /etc/udhcpc.script >/dev/null 2>&1 && killall flanneld 2>/dev/null
    grep '^nameserver' /etc/resolv.conf > /run/kubelet-resolv.conf 2>/dev/null
    echo "tekvirt-worker: link refreshed, address $(ip -4 -o addr show dev eth0 | awk '{print $4}')" > /dev/console
  done
}
if [ -s /etc/kubernetes/bootstrap-kubelet.conf ]; then
  /usr/bin/kubelet --config=/etc/kubernetes/kubelet.yaml --bootstrap-kubeconfig=/etc/kubernetes/bootstrap-kubelet.conf \
    --kubeconfig=/var/lib/kubelet/kubeconfig --hostname-override="$(hostname)" >/var/log/kubelet.log 2>&1 &
  node_network &
fi
[ -e /sys/class/net/eth0 ] && watch_link &
echo "tekvirt-worker: ready (agent ${agent:-none}, kubelet $([ -s /etc/kubernetes/bootstrap-kubelet.conf ] && echo started || echo 'not configured'))" > /dev/console
exec /bin/init
