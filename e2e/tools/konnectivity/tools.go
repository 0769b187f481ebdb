//go:build tools

// Package konnectivity pins the Konnectivity programs the testbed builds.
package konnectivity

import (
	_ "sigs.k8s.io/apiserver-network-proxy/cmd/agent"
	_ "sigs.k8s.io/apiserver-network-proxy/cmd/server"
)
