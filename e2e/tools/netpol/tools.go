//go:build tools

// Package netpol records the command this module builds.
package netpol

import _ "sigs.k8s.io/kube-network-policies/cmd"
