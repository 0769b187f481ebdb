// Package manager builds the controller-runtime manager tekvirt's
// controller binaries share: the scheme of the APIs they read, health and
// readiness probes, and metrics off unless asked for.
package manager
