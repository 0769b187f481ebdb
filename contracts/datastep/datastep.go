package datastep

// PermanentExitCode is a step's exit code for failures a retry cannot fix
// (checksum, invalid or too large image, no such source).
const PermanentExitCode = 2

// ErrorResult is the result a failed step leaves its error in, so that a
// controller reads why without reading pod logs.
const ErrorResult = "error"

// ProgressPort is where an import step serves GET /progress for the
// DataVolume controller, as CDI's importer serves its progress metric.
const ProgressPort = 8089

// ProgressReport is what GET /progress answers.
type ProgressReport struct {
	// Progress is CDI's form: "45.20%", or "N/A" while the size is unknown.
	Progress string `json:"progress"`
	Done     int64  `json:"done"`
	Total    int64  `json:"total"`
}

// Environment variables an import gets registry credentials in (from its
// DataVolume's or DataImportCron's secretRef), so that its step needs no
// API access.
const (
	AccessKeyEnv = "IMPORTER_ACCESS_KEY_ID"
	SecretKeyEnv = "IMPORTER_SECRET_KEY"
)

// Keys of a credentials Secret (a secretRef), as CDI's.
const (
	AccessKeyIDKey = "accessKeyId"
	SecretKeyKey   = "secretKey"
)
