// Package ocibuild makes the container images the local cluster runs, from
// files on this machine (static Go binaries, a static busybox), with
// go-containerregistry: no Dockerfile, no container engine, no download.
// Layers are reproducible (fixed times and owners), so pushing an unchanged
// image again uploads nothing.
package ocibuild
