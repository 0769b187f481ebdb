package images

import (
	"bufio"
	"bytes"
	"crypto/sha256"
	"encoding/binary"
	"errors"
	"fmt"
	"hash"
	"hash/crc32"
	"hash/crc64"
	"io"
	"sync"

	"github.com/ulikunitz/xz/lzma"
)

// The xz container (tukaani.org xz-file-format 1.2): a stream header, blocks,
// an index and a footer. Multi-threaded xz writes every block header with its
// compressed and uncompressed size, so the blocks of such a stream can be cut
// apart without decoding and decoded at once, each on its own core. This
// reader does that in fork-join batches inside Read: no goroutine outlives a
// Read call, so an abandoned reader leaks nothing. Streams whose first block
// it cannot split (no sizes in its header, filters other than LZMA2) go to
// ulikunitz/xz; a later such block in a stream that began splittable fails
// (no xz tool writes that mix).

const (
	xzHeaderLen = 12
	xzLZMA2     = 0x21
)

// xzMaxBuffered bounds the blocks held in memory (a batch holds at most one
// per worker); larger ones are decoded streaming, alone.
var xzMaxBuffered int64 = 64 << 20

var (
	xzMagic       = []byte{0xfd, '7', 'z', 'X', 'Z', 0}
	xzFooterMagic = []byte{'Y', 'Z'}
	crc64Table    = crc64.MakeTable(crc64.ECMA)
	errXZCorrupt  = errors.New("xz: corrupt stream")
)

// xzBlockHeader is what a block header says.
type xzBlockHeader struct {
	headerLen            int64
	compressed, unpacked int64 // -1 when absent
	dictCap              int
}

// parseXZBlockHeader parses a block header h (its full length).
func parseXZBlockHeader(h []byte) (xzBlockHeader, error) {
	b := xzBlockHeader{headerLen: int64(len(h)), compressed: -1, unpacked: -1}
	if crc32.ChecksumIEEE(h[:len(h)-4]) != binary.LittleEndian.Uint32(h[len(h)-4:]) {
		return b, fmt.Errorf("%w: block header checksum", errXZCorrupt)
	}
	flags, rest := h[1], h[2:len(h)-4]
	if flags&0x3c != 0 {
		return b, fmt.Errorf("%w: reserved block flags", errXZCorrupt)
	}
	var err error
	if flags&0x40 != 0 {
		if b.compressed, rest, err = xzVarint(rest); err != nil {
			return b, err
		}
	}
	if flags&0x80 != 0 {
		if b.unpacked, rest, err = xzVarint(rest); err != nil {
			return b, err
		}
	}
	if flags&0x03 != 0 {
		return b, errXZUnsplittable // a filter chain, not LZMA2 alone
	}
	id, rest, err := xzVarint(rest)
	if err != nil {
		return b, err
	}
	n, rest, err := xzVarint(rest)
	if err != nil {
		return b, err
	}
	if id != xzLZMA2 || n != 1 || len(rest) < 1 {
		return b, errXZUnsplittable
	}
	prop := rest[0]
	if prop > 40 {
		return b, fmt.Errorf("%w: LZMA2 dictionary size %d", errXZCorrupt, prop)
	}
	b.dictCap = 1<<32 - 1
	if prop < 40 {
		b.dictCap = int((2 | uint64(prop&1)) << (prop/2 + 11))
	}
	return b, nil
}

var errXZUnsplittable = errors.New("xz stream cannot be split into blocks")

func xzVarint(b []byte) (int64, []byte, error) {
	var v uint64
	for i := 0; i < len(b) && i < 9; i++ {
		v |= uint64(b[i]&0x7f) << (7 * i)
		if b[i]&0x80 == 0 {
			return int64(v), b[i+1:], nil
		}
	}
	return 0, nil, fmt.Errorf("%w: bad integer", errXZCorrupt)
}

func xzCheckLen(check byte) (int64, error) {
	switch check {
	case 0:
		return 0, nil
	case 1:
		return 4, nil
	case 4:
		return 8, nil
	case 10:
		return 32, nil
	}
	return 0, fmt.Errorf("xz: check type %d is not supported", check)
}

func xzHash(check byte) hash.Hash {
	switch check {
	case 1:
		return crc32.NewIEEE()
	case 4:
		return crc64.New(crc64Table)
	case 10:
		return sha256.New()
	}
	return nil
}

// splittable reports whether the xz stream at p's head can be decoded
// block-parallel: its first block header records its compressed size.
func splittable(p *bufio.Reader) bool {
	head, err := p.Peek(xzHeaderLen + 1)
	if err != nil || !bytes.HasPrefix(head, xzMagic) || head[xzHeaderLen] == 0 {
		return false
	}
	h, err := p.Peek(xzHeaderLen + (int(head[xzHeaderLen])+1)*4)
	if err != nil {
		return false
	}
	b, err := parseXZBlockHeader(h[xzHeaderLen:])
	return err == nil && b.compressed >= 0
}

// xzBlocksReader decodes a splittable xz stream.
type xzBlocksReader struct {
	r       *bufio.Reader
	workers int
	check   byte
	flags   []byte
	// records are (unpadded, uncompressed) sizes of the stream's blocks so
	// far, checked against its index.
	records [][2]int64
	// batch is the decoded batch being read, from batch[0].out[pos:];
	// stream a large block being decoded alone.
	batch  []*xzBlock
	pos    int
	stream io.Reader
	err    error
	// free holds buffers of read batches for the next ones.
	free [][]byte
}

func newXZBlocksReader(r *bufio.Reader, workers int) *xzBlocksReader {
	return &xzBlocksReader{r: r, workers: max(workers, 1)}
}

func (x *xzBlocksReader) Read(p []byte) (int, error) {
	for len(x.batch) > 0 && x.pos == len(x.batch[0].out) {
		x.recycle(x.batch[0])
		x.batch, x.pos = x.batch[1:], 0
	}
	for len(x.batch) == 0 && x.stream == nil {
		if x.err != nil {
			return 0, x.err
		}
		x.err = x.next()
	}
	if x.stream != nil {
		n, err := x.stream.Read(p)
		if errors.Is(err, io.EOF) {
			x.stream, err = nil, nil
		}
		return n, err
	}
	n := copy(p, x.batch[0].out[x.pos:])
	x.pos += n
	return n, nil
}

// buffer is a free buffer of n bytes, or a new one.
func (x *xzBlocksReader) buffer(n int64) []byte {
	for i, b := range x.free {
		if int64(cap(b)) >= n {
			x.free = append(x.free[:i], x.free[i+1:]...)
			return b[:n]
		}
	}
	return make([]byte, n)
}

func (x *xzBlocksReader) recycle(b *xzBlock) {
	x.free = append(x.free, b.data[:0], b.out[:0])
	if len(x.free) > 4*x.workers {
		x.free = x.free[len(x.free)-4*x.workers:]
	}
}

// next decodes the next batch of blocks (or starts streaming a large one);
// io.EOF at the end of the last stream.
func (x *xzBlocksReader) next() error {
	if x.flags == nil {
		if err := x.streamHeader(); err != nil {
			return err
		}
	}
	var batch []*xzBlock
	for len(batch) < x.workers {
		b, atIndex, err := x.readBlock(len(batch) == 0)
		if err != nil {
			return err
		}
		if atIndex && len(batch) == 0 {
			return x.endStream()
		}
		if atIndex || b == nil { // b nil: a large block waits for a batch of its own
			break
		}
		if b.stream != nil {
			x.stream = b.stream
			return nil
		}
		batch = append(batch, b)
	}
	var wg sync.WaitGroup
	for _, b := range batch {
		wg.Add(1)
		go func() { defer wg.Done(); b.decode() }()
	}
	wg.Wait()
	for _, b := range batch {
		if b.err != nil {
			return b.err
		}
	}
	x.batch, x.pos = batch, 0
	return nil
}

func (x *xzBlocksReader) streamHeader() error {
	var h [xzHeaderLen]byte
	if _, err := io.ReadFull(x.r, h[:]); err != nil {
		return xzEOF(err)
	}
	if !bytes.HasPrefix(h[:], xzMagic) || crc32.ChecksumIEEE(h[6:8]) != binary.LittleEndian.Uint32(h[8:]) || h[6] != 0 {
		return fmt.Errorf("%w: stream header", errXZCorrupt)
	}
	x.flags, x.check, x.records = append([]byte(nil), h[6:8]...), h[7]&0x0f, nil
	_, err := xzCheckLen(x.check)
	return err
}

// xzBlock is one block read whole, or a large one to stream.
type xzBlock struct {
	hdr    xzBlockHeader
	check  byte
	pad    int64
	data   []byte // compressed data, padding and check
	out    []byte
	err    error
	stream io.Reader
}

// readBlock reads the next block; atIndex is set when the index comes
// instead. A block too large to hold in memory is returned to stream only
// as the first of a batch; otherwise readBlock returns nil and leaves it.
func (x *xzBlocksReader) readBlock(first bool) (b *xzBlock, atIndex bool, err error) {
	lead, err := x.r.Peek(1)
	if err != nil {
		return nil, false, xzEOF(err)
	}
	if lead[0] == 0 {
		return nil, true, nil
	}
	h, err := x.r.Peek((int(lead[0]) + 1) * 4)
	if err != nil {
		return nil, false, xzEOF(err)
	}
	hdr, err := parseXZBlockHeader(h)
	if err == nil && hdr.compressed < 0 {
		err = errXZUnsplittable
	}
	if err != nil {
		return nil, false, fmt.Errorf("xz block %d: %w", len(x.records)+1, err)
	}
	large := hdr.compressed > xzMaxBuffered || hdr.unpacked < 0 || hdr.unpacked > xzMaxBuffered
	if large && !first {
		return nil, false, nil
	}
	_, _ = x.r.Discard(len(h))
	checkLen, _ := xzCheckLen(x.check)
	pad := (4 - (hdr.headerLen+hdr.compressed)%4) % 4
	x.records = append(x.records, [2]int64{hdr.headerLen + hdr.compressed + checkLen, hdr.unpacked})
	b = &xzBlock{hdr: hdr, check: x.check, pad: pad}
	if large {
		b.stream, err = x.streamBlock(hdr, pad, checkLen)
		return b, false, err
	}
	b.data, b.out = x.buffer(hdr.compressed+pad+checkLen), x.buffer(hdr.unpacked)
	if _, err := io.ReadFull(x.r, b.data); err != nil {
		return nil, false, xzEOF(err)
	}
	return b, false, nil
}

// decode decompresses a whole block and verifies its size and check.
func (b *xzBlock) decode() {
	c := b.hdr.compressed
	r, err := lzma.Reader2Config{DictCap: b.hdr.dictCap}.NewReader2(bytes.NewReader(b.data[:c]))
	if err != nil {
		b.err = fmt.Errorf("%w: %w", errXZCorrupt, err)
		return
	}
	n, err := io.ReadFull(r, b.out)
	if err == nil {
		var one [1]byte
		if m, _ := r.Read(one[:]); m > 0 {
			n++ // more than the header said
		}
	} else if !errors.Is(err, io.ErrUnexpectedEOF) && !errors.Is(err, io.EOF) {
		b.err = fmt.Errorf("%w: %w", errXZCorrupt, err)
		return
	}
	b.out = b.out[:min(n, len(b.out))]
	var sum []byte
	if h := xzHash(b.check); h != nil {
		_, _ = h.Write(b.out)
		sum = h.Sum(nil)
	}
	b.err = verifyXZBlock(b.check, b.data[c+b.pad:], sum, int64(n), b.hdr.unpacked, b.data[c:c+b.pad])
}

// verifyXZBlock checks a decoded block: n bytes where the header said
// unpacked, zero padding, and its check (sum, as a hash computes it;
// want, as stored).
func verifyXZBlock(check byte, want, sum []byte, n, unpacked int64, pad []byte) error {
	if n != unpacked {
		return fmt.Errorf("%w: block holds %d bytes, its header says %d", errXZCorrupt, n, unpacked)
	}
	if !bytes.Equal(pad, make([]byte, len(pad))) {
		return fmt.Errorf("%w: block padding", errXZCorrupt)
	}
	if sum == nil {
		return nil
	}
	if check != 10 { // CRC32 and CRC64 are stored little-endian
		for i, j := 0, len(sum)-1; i < j; i, j = i+1, j-1 {
			sum[i], sum[j] = sum[j], sum[i]
		}
	}
	if !bytes.Equal(sum, want) {
		return fmt.Errorf("%w: block check mismatch", errXZCorrupt)
	}
	return nil
}

// streamBlock decodes a block too large to hold while it is read,
// verifying it at its end.
func (x *xzBlocksReader) streamBlock(hdr xzBlockHeader, pad, checkLen int64) (io.Reader, error) {
	r, err := lzma.Reader2Config{DictCap: hdr.dictCap}.NewReader2(io.LimitReader(x.r, hdr.compressed))
	if err != nil {
		return nil, fmt.Errorf("%w: %w", errXZCorrupt, err)
	}
	return &xzBlockStream{x: x, r: r, h: xzHash(x.check), hdr: hdr, pad: pad, checkLen: checkLen}, nil
}

type xzBlockStream struct {
	x                *xzBlocksReader
	r                io.Reader
	h                hash.Hash
	hdr              xzBlockHeader
	n, pad, checkLen int64
}

func (s *xzBlockStream) Read(p []byte) (int, error) {
	n, err := s.r.Read(p)
	s.n += int64(n)
	if s.h != nil {
		_, _ = s.h.Write(p[:n])
	}
	if !errors.Is(err, io.EOF) {
		return n, err
	}
	tail := make([]byte, s.pad+s.checkLen)
	if _, err := io.ReadFull(s.x.r, tail); err != nil {
		return n, xzEOF(err)
	}
	if s.hdr.unpacked < 0 {
		s.x.records[len(s.x.records)-1][1] = s.n
		s.hdr.unpacked = s.n
	}
	var out []byte
	if s.h != nil {
		out = s.h.Sum(nil)
	}
	if err := verifyXZBlock(s.x.check, tail[s.pad:], out, s.n, s.hdr.unpacked, tail[:s.pad]); err != nil {
		return n, err
	}
	return n, io.EOF
}

// endStream checks the index and footer against the blocks read, then
// skips stream padding: io.EOF at the end, nil when another stream follows.
func (x *xzBlocksReader) endStream() error {
	indexLen, err := x.readIndex()
	if err != nil {
		return err
	}
	var f [xzHeaderLen]byte
	if _, err := io.ReadFull(x.r, f[:]); err != nil {
		return xzEOF(err)
	}
	if crc32.ChecksumIEEE(f[4:10]) != binary.LittleEndian.Uint32(f[:4]) || !bytes.Equal(f[8:10], x.flags) ||
		!bytes.Equal(f[10:], xzFooterMagic) || (int64(binary.LittleEndian.Uint32(f[4:8]))+1)*4 != indexLen {
		return fmt.Errorf("%w: stream footer", errXZCorrupt)
	}
	x.flags = nil
	for {
		b, err := x.r.Peek(4)
		if errors.Is(err, io.EOF) && len(b) == 0 {
			return io.EOF
		}
		if err != nil {
			return fmt.Errorf("%w: trailing bytes", errXZCorrupt)
		}
		if !bytes.Equal(b, []byte{0, 0, 0, 0}) {
			return nil // another stream
		}
		_, _ = x.r.Discard(4)
	}
}

// readIndex reads the index, checks it lists the blocks read, and returns
// its length.
func (x *xzBlocksReader) readIndex() (int64, error) {
	cr := &countingReader{r: x.r, h: crc32.NewIEEE()}
	if _, err := cr.ReadByte(); err != nil {
		return 0, xzEOF(err)
	}
	n, err := cr.varint()
	if err != nil || n != int64(len(x.records)) {
		return 0, fmt.Errorf("%w: the index lists %d blocks, the stream has %d", errXZCorrupt, n, len(x.records))
	}
	for i, rec := range x.records {
		unpadded, err1 := cr.varint()
		unpacked, err2 := cr.varint()
		if err := errors.Join(err1, err2); err != nil {
			return 0, err
		}
		if unpadded != rec[0] || unpacked != rec[1] {
			return 0, fmt.Errorf("%w: index record %d does not match block %d", errXZCorrupt, i+1, i+1)
		}
	}
	for cr.n%4 != 0 {
		if b, err := cr.ReadByte(); err != nil || b != 0 {
			return 0, fmt.Errorf("%w: index padding", errXZCorrupt)
		}
	}
	var crc [4]byte
	if _, err := io.ReadFull(x.r, crc[:]); err != nil {
		return 0, xzEOF(err)
	}
	if binary.LittleEndian.Uint32(crc[:]) != cr.h.Sum32() {
		return 0, fmt.Errorf("%w: index checksum", errXZCorrupt)
	}
	return cr.n + 4, nil
}

// countingReader reads bytes, counting and hashing them.
type countingReader struct {
	r *bufio.Reader
	h hash.Hash32
	n int64
}

func (c *countingReader) ReadByte() (byte, error) {
	b, err := c.r.ReadByte()
	if err == nil {
		c.n++
		_, _ = c.h.Write([]byte{b})
	}
	return b, err
}

func (c *countingReader) varint() (int64, error) {
	var v uint64
	for i := 0; i < 9; i++ {
		b, err := c.ReadByte()
		if err != nil {
			return 0, xzEOF(err)
		}
		v |= uint64(b&0x7f) << (7 * i)
		if b&0x80 == 0 {
			return int64(v), nil
		}
	}
	return 0, fmt.Errorf("%w: bad integer", errXZCorrupt)
}

// xzEOF makes an end of input inside the container an unexpected one.
func xzEOF(err error) error {
	if errors.Is(err, io.EOF) {
		return io.ErrUnexpectedEOF
	}
	return err
}
