package images

import (
	"bytes"
	"encoding/binary"
)

// Format is what a stream holds, read from its first bytes.
type Format string

// Formats detected by magic bytes.
const (
	Gzip  Format = "gz"
	XZ    Format = "xz"
	Zstd  Format = "zst"
	Tar   Format = "tar"
	QCOW2 Format = "qcow2"
	VMDK  Format = "vmdk"
	VHD   Format = "vhd"
	VHDX  Format = "vhdx"
	VDI   Format = "vdi"
	ISO   Format = "iso"
	Raw   Format = "raw"
)

// HeaderSize is how many leading bytes Detect needs for every format (the
// ISO 9660 signature sits at 32769, the VHD footer copy at 0).
const HeaderSize = 32774

// Compressed reports whether f is a compression wrapper.
func (f Format) Compressed() bool { return f == Gzip || f == XZ || f == Zstd }

// Detect names the format of data, the first bytes of a stream (up to
// HeaderSize; fewer only for short streams). Anything unrecognised is raw.
func Detect(h []byte) Format {
	switch {
	case bytes.HasPrefix(h, []byte{0x1f, 0x8b}):
		return Gzip
	case bytes.HasPrefix(h, []byte{0xfd, '7', 'z', 'X', 'Z', 0x00}):
		return XZ
	case bytes.HasPrefix(h, []byte{0x28, 0xb5, 0x2f, 0xfd}):
		return Zstd
	case bytes.HasPrefix(h, []byte("QFI\xfb")):
		return QCOW2
	case bytes.HasPrefix(h, []byte("KDMV")), bytes.HasPrefix(h, []byte("# Disk DescriptorFile")):
		return VMDK
	case bytes.HasPrefix(h, []byte("conectix")):
		return VHD
	case bytes.HasPrefix(h, []byte("vhdxfile")):
		return VHDX
	case len(h) >= 0x44 && binary.LittleEndian.Uint32(h[0x40:]) == 0xbeda107f:
		return VDI
	case len(h) >= 262 && bytes.Equal(h[257:262], []byte("ustar")):
		return Tar
	case len(h) >= 32774 && bytes.Equal(h[32769:32774], []byte("CD001")):
		return ISO
	}
	return Raw
}
