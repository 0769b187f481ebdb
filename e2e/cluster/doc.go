// Package cluster brings up, inspects and tears down tekvirt's local
// single-node cluster: etcd, the Kubernetes control plane, containerd, the
// kubelet and kube-proxy, a local OCI registry, libvirt, Tekton Pipelines and
// the tekvirt controller. Every process it starts is recorded in a PID file
// under $TEKVIRT_HOME/run, so Up is idempotent (running components are left
// alone, crashed ones are restarted) and Down stops only what Up started.
package cluster
