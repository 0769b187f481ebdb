// Package testenv starts a real etcd and kube-apiserver for reconciler
// tests (controller-runtime's envtest), using the binaries `tekvirt up`
// built and Debian's etcd. Tests skip when those are absent, unless
// TEKVIRT_REQUIRE_TESTENV=1 (as `make e2e` sets) makes that a failure.
package testenv
