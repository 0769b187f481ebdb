// Package dataimportcron reconciles CDI DataImportCrons, which keep a golden
// image fresh: on the cron schedule (and once on creation) it reads the
// digest of the template's registry image, creates a DataVolume from the
// template pinned to that digest when it is new, points the managed
// DataSource at the newest import that succeeded, and deletes imports beyond
// importsToKeep. The imports themselves are DataVolumes, run by the
// datavolume controller as TaskRuns.
package dataimportcron
