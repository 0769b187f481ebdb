package upload

// Upload paths, as CDI's upload proxy and server serve them: the plain
// ones answer once the disk is written, the -async ones once the data is
// received; the -form ones take a multipart form with a "file" field.
const (
	Path          = "/v1beta1/upload"
	AsyncPath     = "/v1beta1/upload-async"
	FormPath      = "/v1beta1/upload-form"
	FormAsyncPath = "/v1beta1/upload-form-async"
)

// Paths lists every upload path.
var Paths = []string{Path, AsyncPath, FormPath, FormAsyncPath}

// TokenEnv holds the upload token a cross-namespace clone's sender uses.
const TokenEnv = "CLONE_UPLOAD_TOKEN"
