// Package upload is the upload protocol the upload proxy, the upload token
// API, the DataVolume controller, the import and clone steps and the CLI
// share: tokens (Ed25519-signed JWTs granting one upload into one PVC), the
// paths CDI's upload proxy serves and a client of them (Client), and where
// a cross-namespace clone's sender finds its token.
package upload
