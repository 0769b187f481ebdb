// Package modifydataobject is the step of the modify-data-object task: it
// creates a DataVolume or DataSource from a manifest (replacing an existing
// one when allowed) and waits for it to succeed, or deletes one.
package modifydataobject
