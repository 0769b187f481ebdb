// Package cluster brings up, inspects and tears down tekvirt's local
// cluster: etcd, the Kubernetes control plane, a local OCI registry and
// libvirt on this machine, which is the first node (containerd, the kubelet
// and kube-proxy); each extra node is the same three in a network and a
// mount namespace of their own. It then installs Tekton Pipelines and
// tekvirt's release. Every process it starts is recorded in a PID file
// under $TEKVIRT_HOME/run, so Up is idempotent (running components are left
// alone, crashed ones are restarted) and Down stops only what Up started.
package cluster
