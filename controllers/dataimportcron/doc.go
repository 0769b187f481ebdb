// Package dataimportcron reconciles CDI DataImportCrons, which keep a golden
// image fresh: on the cron schedule (and once on creation) a TaskRun in the
// cron's namespace (the catalog's import-disk step in digest-only mode, given
// the template's secretRef by the kubelet, so the controller reads no Secret)
// reads the digest of the template's registry image; the reconciler then
// creates a DataVolume from the template pinned to that digest when it is
// new, points the managed DataSource at the newest import that succeeded, and
// deletes imports beyond importsToKeep. The imports themselves are
// DataVolumes, run by the datavolume controller as TaskRuns.
package dataimportcron
