// Package datastep is what the data controllers (DataVolume,
// DataImportCron, the upload proxy) and the data steps they run
// (import-disk, clone-disk) agree on: the exit code of a failure no retry
// fixes, the result a failed step leaves its error in, the progress
// endpoint, and the names registry credentials travel under.
package datastep
