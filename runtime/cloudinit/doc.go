// Package cloudinit turns a VMI's cloudInitNoCloud volume into a NoCloud
// seed: a small FAT image labelled "cidata" holding user-data, meta-data and
// network-config, as cloud-init and our test guest read it.
package cloudinit
