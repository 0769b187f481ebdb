package pipelines

import "embed"

// FS holds every pipeline's pipeline.yaml, README.md and samples/, for the
// catalog.
//
//go:embed */pipeline.yaml */README.md */samples
var FS embed.FS
