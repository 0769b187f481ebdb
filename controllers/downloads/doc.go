// Package downloads serves the clients tekvirt ships for users (the
// tekvirt CLI for each platform), as HCO's
// hyperconverged-cluster-cli-download serves virtctl: a read-only tree of
// files (<arch>/<os>/<program>) with an index and their SHA-256 sums,
// from a Deployment and Service the operator owns, over HTTPS with a
// certificate of the operator's CA.
package downloads
