// Package images is to hold tekvirt's VM disk image library (sources,
// format detection, decompression, conversion to sparse raw, checksums,
// progress) as pure Go that knows nothing of Kubernetes. It is empty until
// the disk image work lands; the layering test already guards its imports.
package images
