// Package registry serves the local cluster's OCI registry on a loopback
// address. Blobs live on disk through go-containerregistry's disk blob
// handler; manifests, which that registry keeps in memory only, are journaled
// to disk as they are pushed and replayed on start, so images survive a
// restart of the registry process.
package registry
