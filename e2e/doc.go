// Package e2e holds tekvirt's end-to-end scenarios. They run against the
// local cluster `tekvirt up` brings up (real apiserver, kubelet, containerd,
// Tekton and the tekvirt controller); subpackages hold the bring-up, the
// registry, the image builder and the test framework.
package e2e
