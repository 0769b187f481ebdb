// Package datavolume reconciles CDI DataVolumes: it creates the claim,
// runs the catalog's import-disk task as a TaskRun that mounts it (for an
// upload source the step waits for the upload, which the upload proxy
// forwards to it, and the DataVolume is UploadReady once it answers; inline
// spec, so it runs in the DataVolume's namespace with no extra RBAC;
// credentials and CA come from the source's secret and ConfigMap), retries
// failures a retry can fix (the cause read from the step's error result),
// authorizes every clone as the requester recorded on the DataVolume, and
// mirrors the run into status.phase,
// restartCount and the Bound, Running and Ready conditions as CDI does.
package datavolume
