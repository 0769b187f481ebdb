// Package contracts holds, one small leaf package each, what two layers of
// tekvirt agree on (the controller and the node runtime, a task and the
// controller) and must not write twice. Contract packages import only the
// standard library and Kubernetes API types.
package contracts
