package pipelines

import "embed"

// FS holds every pipeline's pipeline.yaml, for the catalog.
//
//go:embed */pipeline.yaml
var FS embed.FS
